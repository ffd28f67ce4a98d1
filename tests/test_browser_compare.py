"""Browser test of the compare panel (headless Chromium): a second mechanism released beside the
first at the same ε and fixed demo seed, its answers checked against `dp`, its charge on the
dataset's account, the two maps moving together, and a page that fits 1280 and 1600 px windows.
"""
from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains

from test_browser import (expected_release, poll_until, start, table_rows, upload,  # skips without a browser
                          use_demo_seed)
from helpers import number
from test_browser_session import no_horizontal_overflow

import dp
from components import compare_panel, ids

pytestmark = pytest.mark.browser

VIEW = """var l = window.dash_component_api.getLayout(arguments[0]);
return l && l.props.center ? [l.props.center.lat, l.props.center.lng, l.props.zoom] : null;"""
IMAGE_OFFSET = """var m = document.getElementById(arguments[0]), i = m && m.querySelector('img.compare-raster');
if (!i) { return null; }
var a = m.getBoundingClientRect(), b = i.getBoundingClientRect();
return [Math.round(b.left - a.left), Math.round(b.top - a.top), Math.round(b.width), Math.round(b.height)];"""


def view(dash_duo, map_id):
    """[lat, lng, zoom] of a compare map as Dash holds it (updated by Leaflet on every move)."""
    return dash_duo.driver.execute_script(VIEW, map_id)


def image_offset(dash_duo, map_id):
    """Where the map's image overlay sits inside its map, in pixels: equal when the views agree."""
    return dash_duo.driver.execute_script(IMAGE_OFFSET, map_id)


def maps_agree(dash_duo) -> bool:
    a, b = view(dash_duo, ids.COMPARE_MAP_A), view(dash_duo, ids.COMPARE_MAP_B)
    return a is not None and b is not None and a[2] == b[2] and \
        abs(a[0] - b[0]) < 1e-9 and abs(a[1] - b[1]) < 1e-9


def test_compare_two_mechanisms_side_by_side(dash_duo):
    start(dash_duo)
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_MESSAGE}", "Pick a second mechanism", timeout=20)
    assert not dash_duo.find_elements("img.compare-raster")
    use_demo_seed(dash_duo)                                    # e2epriv, seed 1: spent 2 of 10
    privtree = dp.mechanisms()[dp.recommend("points").name].label
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_PICK}", privtree, timeout=20)   # the recommended one
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_COST}", "spends another ε = 1 from the dataset's "
                                    "budget, leaving 7 of 10", timeout=20)
    dash_duo.find_element(f"#{ids.COMPARE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_STATUS}", f"Released {privtree} for comparison at ε = 1",
                                    timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_STATUS}", "NOT private", timeout=10)   # the same demo seed
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 3 of 10", timeout=20)
    assert len(table_rows(dash_duo, ids.ACCOUNT_TABLE)) == 3

    # both maps show their own release, labelled with its mechanism
    dash_duo.wait_for_element(f"#{ids.COMPARE_MAP_B} img.compare-raster", timeout=20)
    srcs = [dash_duo.find_element(f"#{m} img.compare-raster").get_attribute("src")
            for m in (ids.COMPARE_MAP_A, ids.COMPARE_MAP_B)]
    assert all(s.startswith("data:image/png;base64,") for s in srcs) and srcs[0] != srcs[1]
    labels = dash_duo.find_element(f"#{ids.COMPARE_MAPS}").text
    assert f"A · {dp.mechanisms()['e2epriv'].label}" in labels and f"B · {privtree}" in labels

    # a typed rectangle: both answers are what dp computes with the same inputs and seed
    rect = dp.Rect(-73.98, 40.70, -73.93, 40.76)
    dash_duo.find_element(f"#{ids.QUERY_TYPED}").send_keys("-73.98, 40.70, -73.93, 40.76")
    dash_duo.find_element(f"#{ids.QUERY_TYPED_BUTTON}").click()
    seen = []             # the rows read when there was one: the table may be drawn again between reads
    poll_until(lambda: len(seen.append(table_rows(dash_duo, ids.COMPARE_TABLE)) or seen[-1]) == 1, 20)
    assert len(seen[-1]) == 1, seen[-1]
    row = seen[-1][0]
    data, domain, rel_a = expected_release("e2epriv")
    rel_b = dp.release(dp.recommend("points").name, data, domain, epsilon=1.0, seed=1)
    a, b, true = rel_a.answer(rect), rel_b.answer(rect), data.true_count(rect, domain)
    expected = compare_panel.answer_rows(["R1"], [a], [b], [true])[0]
    assert set(row) == set(expected)
    assert row == expected
    assert row["a"] == f"{max(0, round(a)):,}" and row["b"] == f"{max(0, round(b)):,}"
    assert number(row["true"]) == true
    assert dash_duo.find_element(f"#{ids.COMPARE_SUMMARY}").text == \
        compare_panel.summary_line([a], [b], [true], rel_a.spec.label, privtree)
    # both maps draw the table's rectangle with its label; one legend with distinct ticks
    for m in (ids.COMPARE_MAP_A, ids.COMPARE_MAP_B):
        poll_until(lambda: [e.text for e in dash_duo.find_elements(f"#{m} .query-label")] == ["R1"], 10)
        assert [e.text for e in dash_duo.find_elements(f"#{m} .query-label")] == ["R1"]
    ticks = [e.text for e in dash_duo.find_elements(f"#{ids.COMPARE_SCALE} .legend-tick")]
    assert len(ticks) >= 2 and len(set(ticks)) == len(ticks)

    # panning map A moves map B; zooming map B zooms map A
    poll_until(lambda: maps_agree(dash_duo), 10)
    before = view(dash_duo, ids.COMPARE_MAP_A)
    map_a = dash_duo.find_element(f"#{ids.COMPARE_MAP_A}")
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", map_a)
    ActionChains(dash_duo.driver).move_to_element(map_a) \
        .click_and_hold().pause(0.2).move_by_offset(60, 30).pause(0.2).move_by_offset(60, 30) \
        .pause(0.2).release().perform()
    poll_until(lambda: view(dash_duo, ids.COMPARE_MAP_A) != before and maps_agree(dash_duo), 15)
    assert view(dash_duo, ids.COMPARE_MAP_A) != before and maps_agree(dash_duo)
    poll_until(lambda: image_offset(dash_duo, ids.COMPARE_MAP_A) == image_offset(dash_duo, ids.COMPARE_MAP_B), 10)
    assert image_offset(dash_duo, ids.COMPARE_MAP_A) == image_offset(dash_duo, ids.COMPARE_MAP_B)
    zoom = view(dash_duo, ids.COMPARE_MAP_B)[2]
    dash_duo.find_element(f"#{ids.COMPARE_MAP_B} .leaflet-control-zoom-in").click()
    poll_until(lambda: view(dash_duo, ids.COMPARE_MAP_A)[2] > zoom and maps_agree(dash_duo), 15)
    assert view(dash_duo, ids.COMPARE_MAP_A)[2] > zoom and maps_agree(dash_duo)

    # the page fits the usual window widths without scrolling sideways
    for width in (1280, 1600):
        dash_duo.driver.set_window_size(width, 1000)
        poll_until(lambda: no_horizontal_overflow(dash_duo), 5)
        assert no_horizontal_overflow(dash_duo), width

    # a new release in step 3 ends the comparison: nothing stale stays on the page
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_MESSAGE}", "Pick a second mechanism", timeout=30)
    assert not dash_duo.find_elements("img.compare-raster")
    assert dash_duo.find_element(f"#{ids.COMPARE_STATUS}").text == ""


def test_a_comparison_past_the_total_is_refused_and_new_data_clears_the_panel(dash_duo, tmp_path):
    start(dash_duo, default_budget=1.5)
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_COST}", "will be refused", timeout=20)
    dash_duo.find_element(f"#{ids.COMPARE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_STATUS}", "Not released: refused", timeout=20)
    assert "only 0.5 of this dataset's total budget of 1.5 is left" in \
        dash_duo.find_element(f"#{ids.COMPARE_STATUS}").text
    assert "Spent ε = 1 of 1.5" in dash_duo.find_element(f"#{ids.ACCOUNT_SUMMARY}").text
    assert not dash_duo.find_elements("img.compare-raster")
    # new data outside the domain: no release of it, so the panel says so and shows nothing
    (tmp_path / "london.csv").write_text("lon,lat\n" + "".join(f"{-0.1 + i / 1e4},{51.5}\n" for i in range(50)))
    upload(dash_duo.driver, tmp_path / "london.csv")
    dash_duo.wait_for_contains_text(f"#{ids.COMPARE_MESSAGE}", "No release of the data now loaded yet", timeout=30)
    assert dash_duo.find_element(f"#{ids.COMPARE_STATUS}").text == ""
    assert not dash_duo.find_elements("img.compare-raster")
