"""Browser tests of the query table and the map legend: each would have caught one reported bug.

Typed rectangles are added once (Enter, Add or both), rectangles outside the public domain are
refused or clipped with a message, every rectangle carries its row label on the map, the
legend's ticks are round and distinct with the cap marked and fully visible, the table leads
with the range the true count lies in (the noise-only interval is in the CSV, labelled in small
print), and the table downloads as CSV. Layout
checks run at 1280 and 1600 pixels wide and assert that the page never scrolls sideways.
"""
from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys

import dp
from components import ids, queries_panel
from helpers import number
from test_browser import draw_rect, poll_until, press_release, start, table_rows, wait_rows
from test_browser_workspace import ON_GUNICORN
from test_browser_workspace import gunicorn, page   # noqa: F401  (fixtures: the multi-worker server)

pytestmark = pytest.mark.browser

WIDTHS = (1280, 1600)
INSIDE = "-73.98, 40.70, -73.93, 40.76"          # inside the New York box of the default sample


def start_at(dash_duo, width: int) -> None:
    """Open the app in a window this wide (the page is laid out for it from the start)."""
    dash_duo.driver.set_window_size(width, 1000)
    start(dash_duo)


def assert_no_sideways_scroll(dash_duo) -> None:
    fits = dash_duo.driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth];")
    assert fits[0] <= fits[1], f"the page is {fits[0]} px wide in a {fits[1]} px window"


def type_rect(dash_duo, text: str, enter: bool = False, add: bool = True) -> None:
    box = dash_duo.find_element(f"#{ids.QUERY_TYPED}")
    box.send_keys(text, *([Keys.ENTER] if enter else []))
    if add:
        dash_duo.find_element(f"#{ids.QUERY_TYPED_BUTTON}").click()


def ids_in_table(dash_duo) -> list[str]:
    return [r["id"] for r in table_rows(dash_duo)]


def map_labels(dash_duo) -> list[str]:
    return dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('.leaflet-tooltip.query-label'))"
        ".map(function (e) { return e.textContent; });")


def test_enter_then_add_adds_a_typed_rectangle_once(dash_duo):
    start(dash_duo)
    type_rect(dash_duo, INSIDE, enter=True, add=True)          # Enter, then Add
    wait_rows(dash_duo, 1)
    dash_duo.wait_for_text_to_equal(f"#{ids.QUERY_COUNT}", "1 row", timeout=10)
    time.sleep(2)                                        # a second row would come now
    assert ids_in_table(dash_duo) == ["R1"]
    assert dash_duo.find_element(f"#{ids.QUERY_TYPED}").get_attribute("value") == ""
    type_rect(dash_duo, "-73.99, 40.75, -73.95, 40.80", enter=True, add=False)   # Enter alone
    dash_duo.wait_for_text_to_equal(f"#{ids.QUERY_COUNT}", "2 rows", timeout=10)
    type_rect(dash_duo, "-73.97, 40.65, -73.90, 40.70")                          # Add alone
    dash_duo.wait_for_text_to_equal(f"#{ids.QUERY_COUNT}", "3 rows", timeout=10)
    assert ids_in_table(dash_duo) == ["R1", "R2", "R3"]


def test_a_rectangle_outside_the_domain_is_refused_and_one_partly_outside_clipped(dash_duo):
    start(dash_duo)
    type_rect(dash_duo, "2.25, 48.80, 2.40, 48.90")                # Paris: wholly outside
    dash_duo.wait_for_contains_text(f"#{ids.QUERY_MESSAGE}", "wholly outside the public domain",
                                    timeout=10)
    assert "Not added" in dash_duo.find_element(f"#{ids.QUERY_MESSAGE}").text
    assert table_rows(dash_duo) == [] and "0.0 %" not in dash_duo.find_element("body").text
    box = dash_duo.find_element(f"#{ids.QUERY_TYPED}")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("-74.10, 40.70, -74.00, 40.75")                  # crosses the west edge
    dash_duo.find_element(f"#{ids.QUERY_TYPED_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.QUERY_MESSAGE}", "clipped to -74.0500", timeout=10)
    row = wait_rows(dash_duo, 1)[0]
    assert row["bounds"] == "-74.0500, 40.7000, -74.0000, 40.7500" + queries_panel.CLIPPED
    data, domain = dp.load_sample("city_200k")
    assert number(row["true"]) == data.true_count(dp.Rect(-74.05, 40.70, -74.0, 40.75), domain)


@pytest.mark.parametrize("width", WIDTHS)
def test_drawn_and_typed_rectangles_carry_their_row_labels_on_the_map(dash_duo, width):
    start_at(dash_duo, width)
    # the draw button shows the outline ▭ the panels talk about, not a filled square
    icon = dash_duo.driver.execute_script(
        "var a = document.querySelector('.leaflet-draw-draw-rectangle');"
        "var s = getComputedStyle(a), b = getComputedStyle(a, '::before');"
        "return [s.backgroundImage, b.content];")
    assert icon == ["none", '"▭"']
    draw_rect(dash_duo)
    type_rect(dash_duo, INSIDE)
    wait_rows(dash_duo, 2)
    poll_until(lambda: sorted(map_labels(dash_duo)) == ["Q1", "R1"], 10)
    assert sorted(map_labels(dash_duo)) == sorted(ids_in_table(dash_duo)) == ["Q1", "R1"]
    assert_no_sideways_scroll(dash_duo)


@pytest.mark.parametrize("width", WIDTHS)
def test_legend_ticks_are_round_distinct_and_the_capped_top_fully_visible(dash_duo, width):
    start_at(dash_duo, width)

    def ticks():
        return dash_duo.driver.execute_script(
            "return Array.from(document.querySelectorAll('#map-legend .legend-tick'))"
            ".map(function (e) { return e.textContent; });")
    poll_until(lambda: len(ticks()) >= 2, 20)            # the legend is drawn after the release
    labels = ticks()
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    assert labels[0] == "0" and labels[-1].startswith("≥ ")     # the 99th-percentile cap is marked
    # the top label ends inside the legend box, the map and the window: nothing clipped
    right = dash_duo.driver.execute_script(
        "function r(s) { return document.querySelector(s).getBoundingClientRect(); }"
        "var t = document.querySelectorAll('#map-legend .legend-tick'), last = t[t.length - 1];"
        "return [last.getBoundingClientRect().right, r('#map-legend').right, r('#map').right,"
        "        window.innerWidth, last.scrollWidth <= last.clientWidth + 1];")
    assert right[0] <= right[1] <= right[2] <= right[3] and right[4], right
    # and no label runs into its neighbour, as drawn
    spans = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#map-legend .legend-tick'))"
        ".map(function (e) { var r = e.getBoundingClientRect(); return [r.left, r.right]; });")
    assert all(b[0] > a[1] for a, b in zip(spans, spans[1:])), spans
    # the error layer is diverging: symmetric round ends, still distinct labels
    dash_duo.find_element(f"#{ids.MAP_LAYER_PICK} input[value=error]").click()
    poll_until(lambda: "−" in "".join(ticks()), 20)
    labels = ticks()
    assert len(set(labels)) == len(labels) and "0" in labels, labels
    assert labels[0].lstrip("≤ ") == "−" + labels[-1].lstrip("≥ "), labels
    assert_no_sideways_scroll(dash_duo)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_table_leads_with_the_range_and_says_which_number_is_noise_only(dash_duo, width):
    dash_duo.driver.set_window_size(width, 1000)
    start(dash_duo, mechanism=None)                  # the app's default: the recommended mechanism
    label = dp.mechanisms()[dp.recommend("points").name].label
    assert label in dash_duo.find_element(f"#{ids.MECHANISM}").text
    type_rect(dash_duo, INSIDE)
    rows = wait_rows(dash_duo, 1)
    headers = [h.text.replace("\n", " ") for h in dash_duo.find_elements(f"#{ids.QUERY_TABLE} th")]
    assert headers.index("True count lies in (95%, any data)") == headers.index("Private answer") + 1
    assert not any("noise only" in h or "Typical" in h for h in headers)
    lo, hi = (number(v) for v in rows[0]["range"].split(" to "))
    assert 0 <= lo <= hi
    note = dash_duo.find_element(".query-note").text
    assert "whatever the data" in note and "noise alone" in note and "not a range for the true count" in note
    assert_no_sideways_scroll(dash_duo)


@ON_GUNICORN
def test_query_table_downloads_as_csv_without_true_counts(page):
    # on the server a user runs (3 workers), the app's default mechanism, as a visitor
    dash_duo, _ = page
    press_release(dash_duo)
    name = dp.recommend("points").name
    type_rect(dash_duo, INSIDE)
    wait_rows(dash_duo, 1)
    dash_duo.find_element(f"#{ids.RANDOM_BUTTON}").click()
    rows = wait_rows(dash_duo, 6)
    dash_duo.find_element(f"#{ids.QUERY_CSV_BUTTON}").click()
    path = Path(dash_duo.download_path) / f"queries_{name}.csv"
    poll_until(path.exists, 20)
    table = path.read_text()
    got = list(csv.DictReader(io.StringIO(table)))            # a plain table, no comment lines
    assert list(got[0]) == [*queries_panel.CSV_FIELDS, "mechanism", "epsilon", "unit_of_privacy",
                            "software_version"]
    assert {(r["mechanism"], r["epsilon"]) for r in got} == {(name, "1.0")}
    assert [r["id"] for r in got] == [r["id"] for r in rows] == ["R1", "R2", "R3", "R4", "R5", "R6"]
    for line, row in zip(got, rows):
        assert number(line["private_people"]) == number(row["private"]) == max(0, round(float(line["private_answer"])))
        low = line["interval95_noise_only_low"]         # empty where the mechanism has none
        assert low == "" or float(low) <= float(line["private_answer"])
        assert f"{float(line['count_range95_any_data_low']):,.0f} to {float(line['count_range95_any_data_high']):,.0f}" \
            == row["range"]
    assert "true" not in table.lower()                       # no true count, nor a column for one
