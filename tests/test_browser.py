"""Browser tests: a real headless Chromium (Debian's chromium + chromedriver) drives the app.

They cover start-up on the sample, mechanism and epsilon changes, a drawn and a typed rectangle
whose row matches what `dp` computes, a malformed upload that keeps the old data, the export,
and two sessions that cannot see each other's uploads.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

if not (shutil.which("chromedriver") and (shutil.which("chromium") or shutil.which("google-chrome"))):
    pytest.skip("browser tests need chromium and chromedriver on PATH (the README's test command "
                "installs Debian's packages)", allow_module_level=True)

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from dash.testing import errors as dash_errors  # noqa: E402
from dash.testing.wait import until  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

import dp  # noqa: E402
from dp.whole_counts import whole_nonnegative  # noqa: E402
from helpers import all_keys, number, shown  # noqa: E402
from app import create_app  # noqa: E402
from components import ids  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = "city_200k"


OWNER_TOKEN = "owner-token-of-the-browser-tests"
RECOMMENDED = dp.mechanisms()[dp.recommend("points").name].label
# the recommended (adaptive) release's ledger: its probe, then the chosen mechanism's steps
ADAPTIVE_AFTER_PROBE = {
    "ag": ["noisy dataset size (sets the level-1 grid)", "AG level-1 counts", "AG level-2 counts"],
    "full_quadtree": [f"full quadtree counts, height {h} (depth {8 - h})" for h in range(8, -1, -1)],
    "privtree": ["PrivTree decomposition", "PrivTree leaf counts"]}


def adaptive_steps(steps: list[str], *chosen: str) -> bool:
    """Whether `steps` are the adaptive mechanism's ledger: the probe, then the steps of one of
    `chosen` (default: any candidate)."""
    return bool(steps) and steps[0].startswith("probe: points of a ") and \
        steps[1:] in [ADAPTIVE_AFTER_PROBE[c] for c in chosen or ADAPTIVE_AFTER_PROBE]


def start(dash_duo, release: bool = True, **config):
    """Serve the app offline (no tiles) and, unless `release=False`, press Release once (a page
    load spends nothing), as the data owner (the owner link opened). These tests read a grid release cell by cell, so they start on
    E2EPriv unless `mechanism=None` asks for the app's own default."""
    config = {"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "mechanism": "e2epriv",
              "owner_token": OWNER_TOKEN, **config}
    app = create_app(config)
    dash_duo.start_server(app)
    dash_duo.driver.get(f"{dash_duo.server_url}/owner?token={OWNER_TOKEN}")    # the data owner
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=30)
    if release:
        press_release(dash_duo)
    return app


def press_release(dash_duo, expect: str = "Released") -> None:
    """Press Release and wait for its status line (and, for a release, the map's cells)."""
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", expect, timeout=60)
    if expect == "Released":
        dash_duo.wait_for_element("img.grid-raster, .leaflet-overlay-pane path", timeout=30)


POLL_FLOOR = 30.0     # seconds: a loaded CI machine (two test processes, two browsers) is slow


def poll_until(condition, timeout: float) -> None:
    """Wait for the page to reach a state (Dash updates asynchronously); the caller asserts it.
    Waits at least POLL_FLOOR: a state that comes returns at once, so the floor costs nothing
    when a test passes and stops a busy machine from failing one (to check that something does
    *not* happen, sleep instead)."""
    try:
        until(condition, max(timeout, POLL_FLOOR))
    except (TimeoutException, dash_errors.TestingTimeoutError):
        pass


def on_screen(dash_duo, element_id: str) -> bool:
    """Whether the element is in the page and displayed (read at once, no implicit wait)."""
    return dash_duo.driver.execute_script(
        "var e = document.getElementById(arguments[0]); return !!(e && e.getClientRects().length);",
        element_id)


def plotly_loaded(dash_duo) -> bool:
    """Whether the page has fetched and run plotly.js (only a chart on screen needs it)."""
    return dash_duo.driver.execute_script(
        "return performance.getEntriesByType('resource').some(e => /plotly[^/]*[.]js/.test(e.name));")


def raster_src(dash_duo) -> str | None:
    """The map image's data URL, read in one step (the element is replaced on every redraw)."""
    return dash_duo.driver.execute_script(
        "var i = document.querySelector('img.grid-raster'); return i ? i.src : null;")


def retry_stale(read):
    """Re-read when Dash replaced the table between finding a cell and reading it."""
    def wrapped(*args):
        for _ in range(20):
            try:
                return read(*args)
            except StaleElementReferenceException:
                time.sleep(0.1)
        return read(*args)
    return wrapped


@retry_stale
def ledger_steps(dash_duo) -> list[str]:
    cells = dash_duo.find_elements(f"#{ids.LEDGER_TABLE} td[data-dash-column='step']")
    return [c.text for c in cells]


def table_rows(dash_duo, table: str = ids.QUERY_TABLE) -> list[dict]:
    """A Dash table's body rows as {column: text}, read in one script: the table's header row
    has no td, and asking Selenium for the cells of each row waited its 2 s implicit wait
    there on every read. Text content, so a table in a closed step reads as it shows when open."""
    return dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (tr) {"
        "  var cells = {}; tr.querySelectorAll('td').forEach(function (td) {"
        "    cells[td.getAttribute('data-dash-column')] = td.textContent.trim(); });"
        "  return cells; }).filter(function (cells) { return Object.keys(cells).length; });",
        f"#{table} tbody tr")


@retry_stale
def hover_raster(dash_duo, dx: int, dy: int) -> None:
    """Move the pointer onto the map image and nudge it, so Leaflet reports a mousemove; the
    image is found afresh on each try because a late redraw replaces it."""
    img = dash_duo.find_element("img.grid-raster")
    ActionChains(dash_duo.driver).move_to_element(img).move_by_offset(dx, dy).move_by_offset(1, 1).perform()


def wait_rows(dash_duo, n, timeout=20):
    poll_until(lambda: len(table_rows(dash_duo)) >= n, timeout)
    rows = table_rows(dash_duo)
    assert len(rows) >= n, f"expected {n} query rows, got {rows}"
    return rows




RASTER = ".leaflet-overlay-pane img.grid-raster"      # the map image a rectangle is drawn over


def draw_rect(dash_duo) -> None:
    """Drag a rectangle with Leaflet.draw's rectangle tool over the middle of the grid. Waits for
    the map image (a release may still be drawing it, and a path such as the outline can come
    first) and finds it afresh if a late redraw replaced it before the drag began."""
    until(lambda: dash_duo.driver.find_elements(By.CSS_SELECTOR, RASTER), 30)
    dash_duo.find_element(".leaflet-draw-draw-rectangle").click()
    _drag_over_raster(dash_duo)


@retry_stale
def _drag_over_raster(dash_duo) -> None:
    """The drag itself: the pointer moves onto the image first, so a stale image fails before
    the button is pressed and the retry starts clean."""
    img = dash_duo.driver.find_element(By.CSS_SELECTOR, RASTER)
    w, h = img.size["width"], img.size["height"]
    ActionChains(dash_duo.driver).move_to_element(img).move_by_offset(-w // 6, -h // 6) \
        .click_and_hold().pause(0.2).move_by_offset(w // 6, h // 8).pause(0.2) \
        .move_by_offset(w // 12, h // 12).pause(0.2).release().perform()


def use_demo_seed(dash_duo, release: bool = True):
    """Switch to the fixed seed (a labelled, non-private demo) so dp can replay the release."""
    dash_duo.find_element(f"#{ids.SEED_MODE} input[value=fixed]").click()
    if release:
        dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
        dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Reproducible demo (seed 1)", timeout=30)


def expected_release(mechanism="e2epriv", epsilon=1.0, seed=1):
    data, domain = dp.load_sample(SAMPLE)
    return data, domain, dp.release(mechanism, data, domain, epsilon=epsilon, seed=seed)


E2E_STEPS = ["noisy dataset size (sets the sanity bound ρ)",
             "grid-size selection (exponential mechanism)", "noisy cell counts"]


def test_starts_with_sample_and_draws_cells(dash_duo):
    start(dash_duo)
    img = dash_duo.find_element("img.grid-raster")
    assert img.get_attribute("src").startswith("data:image/png;base64,")
    assert "200,000 points" in dash_duo.find_element(f"#{ids.DATA_SUMMARY}").text
    # the default is fresh OS randomness: private, and no seed is shown
    status = dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    assert "fresh randomness" in status and "seed" not in status
    assert ledger_steps(dash_duo) == E2E_STEPS
    # a fixed seed is a labelled demo; the chosen grid is what dp picks for the same inputs
    use_demo_seed(dash_duo)
    poll_until(lambda: ledger_steps(dash_duo) == E2E_STEPS + ["fixed seed (reproducible demo) (NOT private)"], 10)
    assert ledger_steps(dash_duo) == E2E_STEPS + ["fixed seed (reproducible demo) (NOT private)"]
    assert "NOT private" in dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    dash_duo.wait_for_contains_text(f"#{ids.LEDGER_GUARANTEE}", "Reproducible demo", timeout=10)
    assert "Unit of privacy: event-level: add/remove one point" in dash_duo.find_element(f"#{ids.LEDGER_GUARANTEE}").text
    _, _, rel = expected_release()
    assert f"{rel.grid.gx}×{rel.grid.gy} grid" in dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    # hovering a cell shows its noisy count and the owner-only true count
    hover_raster(dash_duo, 3, 2)
    dash_duo.wait_for_contains_text(f"#{ids.MAP_HOVER}", "private", timeout=10)
    text = dash_duo.find_element(f"#{ids.MAP_HOVER}").text
    j, k = (int(v) for v in text.split(":")[0].replace("Cell row ", "").split(", col "))
    people = whole_nonnegative(rel.counts.ravel()).reshape(rel.counts.shape)   # as the map shows them
    assert f"private {people[j, k]:,} ·" in text or text.endswith(f"private {people[j, k]:,}")
    data, _, _ = expected_release()
    assert f"true {int(data.histogram(rel.grid)[j, k])} (not private" in text
    assert dash_duo.get_logs() in ([], None) or all("tile" in e["message"] or "127.0.0.1:9" in e["message"]
                                                    for e in dash_duo.get_logs())


def test_starts_on_the_recommended_mechanism_and_says_why(dash_duo):
    start(dash_duo, mechanism=None)
    rec = dp.recommend("points")
    label = dp.mechanisms()[rec.name].label
    assert f"{label} ★ recommended" in dash_duo.find_element(f"#{ids.MECHANISM}").text
    assert dash_duo.find_element(f"#{ids.MECH_RECOMMENDATION}").text == \
        f"★ Recommended: {label}, {rec.reason}."
    status = dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    assert f"Released {label} at ε = 1" in status
    # the sample's points reach most of its box: the probe picks the adaptive grid, and the
    # status line says why in words (no data set names)
    assert "points reach about" in status and "the adaptive grid, which suits" in status
    poll_until(lambda: adaptive_steps(ledger_steps(dash_duo), "ag"), 10)
    assert adaptive_steps(ledger_steps(dash_duo), "ag"), ledger_steps(dash_duo)


def test_switch_mechanism_and_epsilon_changes_map_and_ledger(dash_duo):
    start(dash_duo)
    use_demo_seed(dash_duo, release=False)
    src_before = raster_src(dash_duo)
    dash_duo.select_dcc_dropdown(f"#{ids.MECHANISM}", value="Uniform grid (Heuristic UG)")
    dash_duo.wait_for_contains_text(f"#{ids.MECH_DESCRIPTION}", "Qardaji", timeout=10)
    # keyboard on the log-scale epsilon slider: Home = 10^-2, each PageUp adds 10 steps of 0.01
    thumb = dash_duo.find_element(f"#{ids.EPSILON} [role=slider]")
    thumb.send_keys(Keys.HOME)
    for _ in range(10):
        thumb.send_keys(Keys.PAGE_UP)
    dash_duo.wait_for_text_to_equal(f"#{ids.EPSILON_READOUT}", "ε = 0.1", timeout=10)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Uniform grid (Heuristic UG) at ε = 0.1",
                                    timeout=20)
    _, _, rel = expected_release("ug", 0.1)
    assert f"{rel.grid.gx}×{rel.grid.gy} grid" in dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    ug_steps = ["noisy dataset size (sets the grid size)", "noisy cell counts",
                "fixed seed (reproducible demo) (NOT private)"]
    poll_until(lambda: ledger_steps(dash_duo) == ug_steps, 10)
    assert ledger_steps(dash_duo) == ug_steps
    assert raster_src(dash_duo) != src_before
    assert "This release: ε = 0.1" in dash_duo.find_element(f"#{ids.LEDGER_TOTAL}").text
    # the server-side account: 1 (start-up) + 0.1 (this release), basic composition
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1.1 of 10", timeout=10)
    assert len(table_rows(dash_duo, ids.ACCOUNT_TABLE)) == 2


def type_epsilon(dash_duo, text: str):
    box = dash_duo.find_element(f"#{ids.EPSILON_VALUE}")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(text, Keys.ENTER)


def test_epsilon_is_typed_exactly_and_moves_the_slider(dash_duo):
    start(dash_duo)
    type_epsilon(dash_duo, "0.5")
    dash_duo.wait_for_text_to_equal(f"#{ids.EPSILON_READOUT}", "ε = 0.5", timeout=10)
    thumb = dash_duo.find_element(f"#{ids.EPSILON} [role=slider]")
    poll_until(lambda: abs(float(thumb.get_attribute("aria-valuenow")) + 0.301) < 0.01, 10)
    assert abs(float(thumb.get_attribute("aria-valuenow")) - (-0.30103)) < 0.01
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "at ε = 0.5,", timeout=20)
    dash_duo.wait_for_contains_text(f"#{ids.LEDGER_TOTAL}", "This release: ε = 0.5 of 0.5", timeout=10)
    type_epsilon(dash_duo, "3")
    dash_duo.wait_for_text_to_equal(f"#{ids.EPSILON_READOUT}", "ε = 3", timeout=10)
    # the slider writes rounded values into the box: one step up from log10(3) is 3.1, not 3.09
    thumb.send_keys(Keys.ARROW_RIGHT)
    poll_until(lambda: dash_duo.find_element(f"#{ids.EPSILON_VALUE}").get_attribute("value") == "3.1", 10)
    assert dash_duo.find_element(f"#{ids.EPSILON_VALUE}").get_attribute("value") == "3.1"
    # out of range: said in plain words, and nothing is released
    type_epsilon(dash_duo, "20")
    dash_duo.wait_for_contains_text(f"#{ids.EPSILON_READOUT}", "type a total ε from 0.01 to 10", timeout=10)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Not released: type a total ε", timeout=10)


def test_drawn_and_typed_rectangles_match_dp(dash_duo):
    start(dash_duo)
    use_demo_seed(dash_duo)
    data, domain, rel = expected_release()
    # 1) draw a rectangle with the mouse using Leaflet.draw's rectangle tool
    draw_rect(dash_duo)
    rows = wait_rows(dash_duo, 1)
    # 2) type a rectangle's coordinates
    rect = dp.Rect(-73.98, 40.70, -73.93, 40.76)
    inp = dash_duo.find_element("#typed-rect")
    inp.send_keys("-73.98, 40.70, -73.93, 40.76")
    dash_duo.find_element("#typed-rect-button").click()
    rows = wait_rows(dash_duo, 2)
    typed = next(r for r in rows if r["id"] == "R1")
    assert typed["private"] == shown(rel.answer(rect))
    assert number(typed["true"]) == data.true_count(rect, domain)
    drawn = next(r for r in rows if r["id"] == "Q1")
    w_, s_, e_, n_ = (float(v) for v in drawn["bounds"].split(","))
    r2 = dp.Rect(w_, s_, e_, n_)
    assert r2.area > 0
    # the table rounds bounds to 4 decimals, so compare within one 1e-4-wide strip of points
    assert number(drawn["private"]) == pytest.approx(rel.answer(r2), rel=0.02, abs=2)
    assert abs(number(drawn["true"]) - data.true_count(r2, domain)) <= 0.02 * number(drawn["true"]) + 2
    (ROOT / "docs").mkdir(exist_ok=True)
    dash_duo.driver.set_window_size(1500, 1100)
    dash_duo.driver.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.5)
    dash_duo.driver.save_screenshot(str(ROOT / "docs" / "screenshot.png"))
    # deleting the drawn rectangle removes its row
    dash_duo.find_element(".leaflet-draw-edit-remove").click()
    dash_duo.find_element("path.leaflet-interactive[stroke='#1f4e99']").click()   # the drawn one
    next(a for a in dash_duo.find_elements(".leaflet-draw-actions a") if a.text == "Save").click()
    poll_until(lambda: not any(r["id"] == "Q1" for r in table_rows(dash_duo)), 10)
    assert [r["id"] for r in table_rows(dash_duo)] == ["R1"]


def test_malformed_upload_shows_error_and_keeps_data(dash_duo, tmp_path):
    start(dash_duo)
    bad = tmp_path / "bad.csv"
    bad.write_text("name,city\nann,paris\nbob,rome\n")
    dash_duo.find_element(f"#{ids.UPLOAD} input[type=file]").send_keys(str(bad))
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", "Could not load bad.csv", timeout=20)
    msg = dash_duo.find_element(f"#{ids.UPLOAD_STATUS}").text
    assert "no longitude and latitude column" in msg and "still in use" in msg
    assert "200,000 points" in dash_duo.find_element(f"#{ids.DATA_SUMMARY}").text
    assert dash_duo.find_element("img.grid-raster")


def test_export_has_no_true_counts(dash_duo):
    start(dash_duo)
    dash_duo.find_element(f"#{ids.EXPORT_BUTTON}").click()
    path = Path(dash_duo.download_path) / "release_e2epriv.geojson"
    poll_until(path.exists, 20)
    doc = json.loads(path.read_text())
    data, domain = dp.load_sample(SAMPLE)
    props = [f["properties"] for f in doc["features"]]
    assert {k for p in props for k in p} == {"row", "col", "noisy_count", "people",   # and the stamp
                                             "mechanism", "epsilon", "unit_of_privacy", "software_version"}
    exported = [p["noisy_count"] for p in props]
    # a fresh release: integer noisy counts, no seed, no exact dataset size
    assert all(isinstance(v, int) for v in exported)
    grid = dp.UniformGrid(domain, doc["properties"]["grid"]["cols"], doc["properties"]["grid"]["rows"])
    assert exported != data.histogram(grid).ravel().tolist()   # not the true counts
    meta = doc["properties"]
    assert meta["differentially_private"] is True and "reproducible_demo" not in meta
    assert "seed" not in json.dumps(meta).replace("workload_seed", "")
    assert "dataset_size_public" not in meta and "noisy_dataset_size" in meta
    keys = set(all_keys(doc))
    assert not {k for k in keys if "true" in k.lower() or "exact" in k.lower()}
    assert not keys & {"diagnostics", "scores", "probabilities", "sensitivities", "tuning_errors"}
    # the provenance block, the map as PNG and the repeat script (issue 26, item 6)
    prov = meta["provenance"]
    assert prov["mechanism"] == "e2epriv" and prov["dataset_account"]["epsilon_spent_so_far"] >= 1.0
    dash_duo.find_element(f"#{ids.EXPORT_PNG_BUTTON}").click()
    png = Path(dash_duo.download_path) / "release_e2epriv_map.png"
    poll_until(png.exists, 20)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dash_duo.find_element(f"#{ids.EXPORT_SCRIPT_BUTTON}").click()
    script = Path(dash_duo.download_path) / "repeat_e2epriv.py"
    poll_until(script.exists, 20)
    text = script.read_text()
    compile(text, "repeat.py", "exec")
    assert f"dp.load_sample('{SAMPLE}')" in text and "\n".join(prov["repeat_script"][8:]) in text


def account_text(dash_duo) -> str:
    return dash_duo.find_element(f"#{ids.ACCOUNT_SUMMARY}").text


def upload(driver, path):
    css = f"#{ids.UPLOAD} input[type=file]"
    poll_until(lambda: driver.find_elements(By.CSS_SELECTOR, css), 20)
    driver.find_element(By.CSS_SELECTOR, css).send_keys(str(path))


def second_browser(url):
    """Another browser with its own cookie jar (a second visitor), with the suite's Chrome flags."""
    from selenium import webdriver
    from conftest import pytest_setup_options
    driver = webdriver.Chrome(options=pytest_setup_options())
    driver.get(url)
    return driver


def wait_text(driver, css, text, timeout=30):
    """The element's text once it contains `text` (or when time is up; the caller asserts)."""
    def read():
        found = driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""
    poll_until(lambda: text in read(), timeout)
    return read()


def test_reload_keeps_the_account_and_shows_the_last_release(dash_duo):
    start(dash_duo)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1 of 10", timeout=10)
    assert "Next release: ε = 1, leaving 8" in account_text(dash_duo)
    first = raster_src(dash_duo)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()        # a fresh draw costs again
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2 of 10", timeout=20)
    poll_until(lambda: raster_src(dash_duo) not in (None, first), 20)
    src = raster_src(dash_duo)
    assert src != first
    dash_duo.driver.refresh()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Showing your release of this data", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2 of 10", timeout=20)
    assert len(table_rows(dash_duo, ids.ACCOUNT_TABLE)) == 2
    poll_until(lambda: raster_src(dash_duo) == src, 10)
    assert raster_src(dash_duo) == src                               # the same release, not a new draw
    # a second tab of the same browser continues the same account too
    dash_duo.driver.switch_to.new_window("tab")
    dash_duo.driver.get(dash_duo.server_url)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Showing your release of this data", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2 of 10", timeout=20)


def test_budget_is_refused_past_the_total_and_raised_only_with_confirmation(dash_duo):
    start(dash_duo, default_budget=2.5)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1 of 2.5", timeout=10)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2 of 2.5", timeout=20)
    assert "would exceed the total" in account_text(dash_duo)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Not released: refused", timeout=20)
    assert "only 0.5 of this dataset's total budget of 2.5 is left" in \
        dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    box = dash_duo.find_element(f"#{ids.ACCOUNT_RAISE_VALUE}")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("2", Keys.TAB)                                     # lowering is refused
    dash_duo.find_element(f"#{ids.ACCOUNT_RAISE}").click()
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_MESSAGE}", "can only be raised", timeout=10)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("5", Keys.TAB)
    dash_duo.find_element(f"#{ids.ACCOUNT_RAISE}").click()
    poll_until(lambda: _alert(dash_duo) is not None, 10)
    alert = _alert(dash_duo)
    assert "weakens the guarantee" in alert.text
    alert.accept()
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2 of 5", timeout=20)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 3 of 5", timeout=20)


def _alert(dash_duo):
    try:
        return dash_duo.driver.switch_to.alert
    except Exception:   # no alert open yet
        return None


def test_two_browsers_have_separate_data_accounts_and_releases(dash_duo, tmp_path):
    start(dash_duo)
    good = tmp_path / "mine.csv"
    good.write_text("lat,lon\n40.75,-73.98\n40.71,-73.95\n40.72,-73.99\n")
    upload(dash_duo.driver, good)
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "3 points", timeout=20)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=20)
    press_release(dash_duo)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1 of 10", timeout=20)
    other = second_browser(dash_duo.server_url)
    try:
        assert "200,000 points" in wait_text(other, f"#{ids.DATA_SUMMARY}", "200,000 points")
        upload(other, good)                                           # the very same file
        assert "3 points" in wait_text(other, f"#{ids.DATA_SUMMARY}", "3 points")
        status = wait_text(other, f"#{ids.RELEASE_STATUS}", "Nothing released")
        assert "Nothing released" in status                           # A's release is not B's
        other.find_element(By.ID, ids.RELEASE_BUTTON).click()
        assert "Released" in wait_text(other, f"#{ids.RELEASE_STATUS}", "Released")
        assert "Spent ε = 1 of 10" in wait_text(other, f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1 of 10")
    finally:
        other.quit()
    # A reloads: its upload and release are still what the page shows
    dash_duo.driver.refresh()
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "3 points", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Showing your release of this data", timeout=30)
    # back to the sample, then the same file again: the same account and release continue
    dash_duo.select_dcc_dropdown(f"#{ids.SAMPLE_PICK}", value="Points: Clustered city, 200k points")
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "200,000 points", timeout=30)
    upload(dash_duo.driver, good)
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "3 points", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Showing your release of this data", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1 of 10", timeout=20)


def test_user_id_column_gives_user_level_releases_with_k_points(dash_duo, tmp_path):
    start(dash_duo)
    assert "Event-level: one point" in dash_duo.find_element(f"#{ids.PRIVACY_LEVEL}").text
    rows = ["lon,lat,user_id"] + [f"{-73.99 + i * 1e-4},{40.72 + i * 1e-4},busy" for i in range(50)]
    rows += [f"{-73.96 + i * 1e-3},{40.75},u{i % 30}" for i in range(60)]       # 30 users x 2
    path = tmp_path / "people.csv"
    path.write_text("\n".join(rows) + "\n")
    upload(dash_duo.driver, path)
    dash_duo.wait_for_contains_text(f"#{ids.PRIVACY_LEVEL}", "User-level, at most 5 points per user",
                                    timeout=20)
    # the user with 50 points is cut to 5: 45 left out (owner-only information)
    assert "k = 5 leaves out 45 of 110 points" in dash_duo.find_element(f"#{ids.PRIVACY_LEVEL}").text
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=20)
    press_release(dash_duo)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "at most 5 points per user", timeout=20)
    k = dash_duo.find_element(f"#{ids.POINTS_PER_USER}")
    k.send_keys(Keys.CONTROL, "a")
    k.send_keys("2", Keys.TAB)
    dash_duo.wait_for_contains_text(f"#{ids.PRIVACY_LEVEL}", "k = 2 leaves out 48 of 110 points", timeout=10)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "at most 2 points per user", timeout=20)
    dash_duo.wait_for_contains_text(f"#{ids.LEDGER_GUARANTEE}",
                                    "user-level: add/remove one user, at most 2 points per user", timeout=10)
    poll_until(lambda: any("group privacy" in s for s in ledger_steps(dash_duo)), 10)
    assert any("at most 2 points per user (group privacy)" in s for s in ledger_steps(dash_duo))


def test_evaluation_runs_with_progress_and_charts(dash_duo):
    start(dash_duo)
    nq = dash_duo.find_element(f"#{ids.EVAL_NQ}")
    nq.clear()
    nq.send_keys("20")
    reps = dash_duo.find_element(f"#{ids.EVAL_REPS}")
    reps.clear()
    reps.send_keys("1")
    dash_duo.find_element(f"#{ids.EVAL_RUN}").click()
    dash_duo.wait_for_contains_text(f"#{ids.EVAL_STATUS}", "Done: 27 releases", timeout=120)   # 3 x 3 x 3, once
    assert dash_duo.find_element(f"#{ids.EVAL_PROGRESS_TEXT}").text == ""     # progress is for a running one
    assert dash_duo.find_element(f"#{ids.EVAL_RUN}").is_enabled()
    assert not dash_duo.find_element(f"#{ids.EVAL_CANCEL}").is_enabled()
    lines = dash_duo.find_elements(f"#{ids.EVAL_FIG_EPS} .scatterlayer .trace")
    assert len(lines) == 6   # band + median line for each of the 3 default mechanisms
    assert len(dash_duo.find_elements(f"#{ids.EVAL_TABLE} tbody tr")) > 1


def test_long_evaluation_can_be_cancelled(dash_duo):
    start(dash_duo)
    reps = dash_duo.find_element(f"#{ids.EVAL_REPS}")
    reps.clear()
    reps.send_keys("50")
    dash_duo.find_element(f"#{ids.EVAL_RUN}").click()
    dash_duo.wait_for_contains_text(f"#{ids.EVAL_PROGRESS_TEXT}", "Running… ", timeout=30)
    assert not dash_duo.find_element(f"#{ids.EVAL_RUN}").is_enabled()     # one run at a time
    shown = int(dash_duo.find_element(f"#{ids.EVAL_PROGRESS}").get_attribute("value"))
    dash_duo.find_element(f"#{ids.EVAL_CANCEL}").click()
    dash_duo.wait_for_contains_text(f"#{ids.EVAL_STATUS}", "Cancelled after", timeout=60)
    done, total = map(int, re.search(r"after (\d+) of (\d+) releases",
                                     dash_duo.find_element(f"#{ids.EVAL_STATUS}").text).groups())
    assert shown <= done < total == 50 * 3 * 3 * 3
    poll_until(lambda: dash_duo.find_elements(f"#{ids.EVAL_TABLE} tbody tr"), 20)   # the partial results
    assert dash_duo.find_element(f"#{ids.EVAL_RUN}").is_enabled()


@pytest.mark.parametrize("width", [1280, 1600])
def test_a_release_shows_its_step_and_can_be_cancelled_before_its_draw(dash_duo, monkeypatch, width):
    """A release is a background job: while it runs the button is greyed out, the line under it
    says what the server is doing and Cancel appears; Cancel before the draw charges nothing and
    says so. (The release is held just before its draw until Cancel has reached the server.)"""
    from components import mechanism_panel
    from server import background, sessions, state
    real = mechanism_panel.check_coverage

    def held(data, domain):
        poll_until(lambda: background.stop_requested(fresh=True), 60)
        real(data, domain)
    app = start(dash_duo, release=False)
    monkeypatch.setattr(mechanism_panel, "check_coverage", held)    # the page loaded: a release's now
    dash_duo.driver.set_window_size(width, 1000)
    assert not dash_duo.find_element(f"#{ids.RELEASE_CANCEL}").is_displayed()
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_PROGRESS_TEXT}", "Releasing: drawing the noise", timeout=30)
    assert not dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").is_enabled()
    cancel = dash_duo.find_element(f"#{ids.RELEASE_CANCEL}")
    assert cancel.is_displayed()
    cancel.click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Not released: cancelled before its noise was drawn",
                                    timeout=60)
    poll_until(lambda: dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").is_enabled(), 10)
    assert not dash_duo.find_element(f"#{ids.RELEASE_CANCEL}").is_displayed()
    assert dash_duo.find_element(f"#{ids.RELEASE_PROGRESS_TEXT}").text == ""
    cookie = dash_duo.driver.get_cookie(sessions.COOKIE)["value"]
    with app.server.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={cookie}"}):
        sid = sessions.session_id()
        fp = state.use_sample(sid, SAMPLE)["fingerprint"]
        assert state.account(sid, fp).charges == []


def test_a_release_clicked_while_the_page_loads_is_not_hidden_by_the_loads_answer(dash_duo, monkeypatch):
    """A page load asks which release of its data and box is paid for (none yet); a Release
    clicked before that answer arrives must stay shown when it does: the answer, computed before
    the release, is held here until the release is charged, as on a loaded server. One callback
    writes the release shown, so Dash drops the load's call for the click's (two callbacks
    writing it let the late "Nothing released" hide a release charged and recorded)."""
    import threading
    from components import mechanism_panel
    real_paid, real_spend, spent = mechanism_panel.paid_release, mechanism_panel.spend, threading.Event()

    def spend(*args, **kwargs):
        found = real_spend(*args, **kwargs)
        spent.set()
        return found

    def paid_late(*args, **kwargs):
        found = real_paid(*args, **kwargs)
        if not spent.is_set():                       # computed before the release: answered after it
            spent.wait(60)
            time.sleep(1.0)
        return found
    start(dash_duo, release=False)
    monkeypatch.setattr(mechanism_panel, "spend", spend)
    monkeypatch.setattr(mechanism_panel, "paid_release", paid_late)
    dash_duo.driver.refresh()
    until(lambda: dash_duo.driver.execute_script(
        "var b = document.getElementById(arguments[0]); return !!b && !b.disabled;", ids.RELEASE_BUTTON), 30)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    assert spent.wait(60)
    time.sleep(4.0)                                  # the load's held answers have arrived by now
    dash_duo.wait_for_element("img.grid-raster, .leaflet-overlay-pane path", timeout=30)
    text = dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    assert "Nothing released" not in text and ("Released" in text or "Showing your release" in text), text


@pytest.mark.parametrize("draw_delay", [0.0, 1.0], ids=["fast-draws", "draws-slower-than-a-tick"])
def test_tree_release_shows_leaves_and_grows_level_by_level(dash_duo, monkeypatch, draw_delay):
    if draw_delay:      # a busy server: each level's map takes longer than Play's 0.7 s tick
        from components import map_panel
        from server import state
        heavy_call = state.heavy_call

        def slow(fn, *args, **kw):
            if fn is map_panel.layers and args[4] is not None:     # a depth picked, not a release
                time.sleep(draw_delay)
            return heavy_call(fn, *args, **kw)
        monkeypatch.setattr(state, "heavy_call", slow)
    start(dash_duo)
    use_demo_seed(dash_duo, release=False)
    dash_duo.select_dcc_dropdown(f"#{ids.MECHANISM}", value="PrivTree (Zhang et al.)")
    dash_duo.wait_for_contains_text(f"#{ids.MECH_DESCRIPTION}", "quarters", timeout=10)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "leaves", timeout=30)
    data, domain = dp.load_sample(SAMPLE)
    rel = dp.release("privtree", data, domain, epsilon=1.0, seed=1)
    assert f"{rel.n_leaves:,} leaves" in dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text
    # hover over the map reads a leaf: noisy count, area and the epsilon spent on its path
    hover_raster(dash_duo, 2, 3)
    dash_duo.wait_for_contains_text(f"#{ids.MAP_HOVER}", "ε on path", timeout=10)
    # "watch it grow": the depth control appears; Play steps from the root to the full tree
    assert dash_duo.find_element("#grow-box").is_displayed()
    src_full = raster_src(dash_duo)
    dash_duo.find_element("#grow-play").click()
    seen = set()

    def grown_back() -> bool:   # records every partition drawn until the full tree is back
        seen.add(raster_src(dash_duo))
        return len(seen) >= 3 and raster_src(dash_duo) == src_full
    poll_until(grown_back, 30)
    assert len(seen) >= 3   # several intermediate partitions were drawn
    assert raster_src(dash_duo) == src_full


def test_shifted_grids_show_equivalent_epsilon_and_one_grid_at_a_time(dash_duo):
    start(dash_duo)
    dash_duo.select_dcc_dropdown(f"#{ids.MECHANISM}", value="Shifted grids (δ-neighbourhood)")
    dash_duo.wait_for_contains_text(f"#{ids.EPSILON_READOUT}", "equivalent standard ε", timeout=10)
    assert "not comparable" in dash_duo.find_element(f"#{ids.MECH_DESCRIPTION}").text
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Shifted grids", timeout=30)
    assert dash_duo.find_element("#series-box").is_displayed()
    before = raster_src(dash_duo)
    thumb = dash_duo.find_element("#series-pick [role=slider]")
    thumb.send_keys(Keys.ARROW_RIGHT)   # grid 1 of the series
    poll_until(lambda: raster_src(dash_duo) != before, 15)
    assert raster_src(dash_duo) != before


def test_region_sample_euler_stages_and_snapped_queries(dash_duo):
    start(dash_duo)
    use_demo_seed(dash_duo, release=False)
    dash_duo.select_dcc_dropdown(f"#{ids.SAMPLE_PICK}", value="Regions: City home ranges, 3k users")
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=30)
    press_release(dash_duo)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Euler grid", timeout=30)
    # k and the sensitivity are shown before any release (spec 004: k = ceil(B/d), Δ = (2k+1)²)
    assert "k = ⌈B/d⌉ = 2; sensitivity Δ = 25" in dash_duo.find_element(f"#{ids.EPSILON_READOUT}").text
    dash_duo.wait_for_contains_text("#euler-status", "round: 0 violated", timeout=30)
    poll_until(lambda: on_screen(dash_duo, ids.EULER_CHART), 20)
    assert on_screen(dash_duo, ids.EULER_CHART)
    regions, domain = dp.load_region_sample("home_ranges_3k")
    rel = dp.release("euler", regions, domain, epsilon=1.0, seed=1)
    rect = dp.Rect(116.35, 39.85, 116.45, 39.95)
    dash_duo.find_element("#typed-rect").send_keys("116.35, 39.85, 116.45, 39.95")
    dash_duo.find_element("#typed-rect-button").click()
    row = wait_rows(dash_duo, 1)[0]
    snapped = rel.snap(rect)
    assert row["private"] == shown(rel.answer(rect))
    assert number(row["true"]) == regions.true_count(snapped, domain)
    assert number(row["true_drawn"]) == regions.true_count(rect, domain)
    # no range for any data, but the default stage (Round) has a noise interval, said to be the
    # noise alone; and the noise's dominance is said plainly
    lo, hi = rel.interval(rect)
    assert row["range"] == ("none: regions are counted where they overlap, not per cell "
                            f"(the noise alone: {math.floor(lo):,} to {math.ceil(hi):,})")   # whole, as the ranges
    dash_duo.wait_for_contains_text(f"#{ids.QUERY_WARNING}", "The noise dominates", timeout=10)
    # the stage selector redraws the table: DiffPriv answers differ from Round's
    dash_duo.find_element("#euler-stage input[value=diffpriv]").click()
    dash_duo.wait_for_contains_text("#euler-status", "diffpriv", timeout=20)
    diffpriv = rel.with_stage("diffpriv")
    expected = shown(diffpriv.answer(rect))
    assert expected != shown(rel.answer(rect))             # else the redraw would not show
    poll_until(lambda: table_rows(dash_duo)[0]["private"] == expected, 10)
    assert table_rows(dash_duo)[0]["private"] == expected


def test_interactive_session_answers_typed_and_drawn_rectangles(dash_duo):
    start(dash_duo)
    assert "1 km apart" in dash_duo.find_element("#ia-guarantee").text
    dash_duo.find_element("#ia-start").click()
    dash_duo.wait_for_contains_text("#ia-status", "New session: m = 10 planned queries", timeout=20)
    rect = dp.Rect(-73.98, 40.70, -73.93, 40.76)
    dash_duo.find_element("#ia-typed").send_keys("-73.98, 40.70, -73.93, 40.76")
    dash_duo.find_element("#ia-ask").click()
    dash_duo.wait_for_contains_text("#ia-status", "Query 1 answered", timeout=30)
    data, domain = dp.load_sample(SAMPLE)
    # the session draws fresh OS randomness, so it cannot be replayed; the answer is a noisy
    # count near the true one (users' noise of sigma 100 m blurs only the rectangle's edges)
    cells = table_rows(dash_duo, "ia-table")[0]
    true = data.true_count(rect)
    assert int(cells["true_count"]) == true
    assert abs(float(cells["answer"]) - true) < 0.2 * true
    # a rectangle drawn on the map is answered by the session too
    dash_duo.find_element(".leaflet-draw-draw-rectangle").click()
    box = dash_duo.find_element(".leaflet-overlay-pane img.grid-raster")
    w, h = box.size["width"], box.size["height"]
    ActionChains(dash_duo.driver).move_to_element(box).move_by_offset(-w // 8, -h // 8) \
        .click_and_hold().pause(0.2).move_by_offset(w // 6, h // 8).pause(0.2).release().perform()
    dash_duo.wait_for_contains_text("#ia-status", "Query 2 answered", timeout=30)
    assert len(dash_duo.find_elements("#ia-table tbody tr")) >= 2
    assert dash_duo.find_elements("#ia-plot .scatterlayer .trace")
