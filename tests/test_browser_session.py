"""Browser tests of a first session on a real-sized upload (headless Chromium).

A 120,000-point upload that lies in San Francisco while the domain is still New York's: nothing
is released, every panel says so instead of showing the sample's release, the Data panel offers
boxes that hold the points, and one click on a suggestion then Release publishes on it. Then the
way back to the built-in sample, and the upload warnings for odd files.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from test_browser import RECOMMENDED, adaptive_steps, ledger_steps, poll_until, press_release, start, table_rows   # skips without a browser

import dp
from components import ids, share

pytestmark = pytest.mark.browser
SF = dp.PRESETS["San Francisco"]


def sf_csv(path, n=120_000, seed=3):
    """n clustered points inside the San Francisco preset, written as a CSV."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform([SF.west, SF.south], [SF.east, SF.north], size=(12, 2))
    pts = centres[rng.integers(0, 12, n)] + rng.normal(0, 0.008, (n, 2))
    pts = pts[SF.contains(pts[:, 0], pts[:, 1])]
    np.savetxt(path, pts, delimiter=",", header="lon,lat", comments="", fmt="%.6f")
    return len(pts)


def upload(dash_duo, path):
    dash_duo.find_element(f"#{ids.UPLOAD} input[type=file]").send_keys(str(path))


def no_horizontal_overflow(dash_duo) -> bool:
    return dash_duo.driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("width", [1280, 1600])
def test_upload_outside_the_domain_releases_nothing_and_offers_boxes(dash_duo, tmp_path, width):
    start(dash_duo, mechanism=None)
    dash_duo.driver.set_window_size(width, 1000)
    n = sf_csv(tmp_path / "sf.csv")
    upload(dash_duo, tmp_path / "sf.csv")
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", f"Loaded sf.csv: {n:,} points", timeout=60)
    # the domain is still New York's: a prominent alert with the ways out, and no release
    dash_duo.wait_for_contains_text(f"#{ids.DOMAIN_WARNING}", "Only 0% of your points lie inside", timeout=20)
    alert = dash_duo.find_element(f"#{ids.DOMAIN_WARNING} .domain-alert").text
    assert "Use San Francisco (100% inside)" in alert
    assert "Type a box" in alert and "Fit to data (leaks its min/max)" in alert
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "No release of this data yet: most of "
                                    "the data lies outside the domain box", timeout=20)
    # every panel describes the data now loaded: nothing of the sample's release stays
    dash_duo.wait_for_contains_text(f"#{ids.MAP_LEGEND_TITLE}", "No release of the data now loaded", timeout=10)
    assert not dash_duo.find_elements("img.grid-raster")
    assert dash_duo.find_element(f"#{ids.LEDGER_TOTAL}").text == "No release yet."
    assert ledger_steps(dash_duo) == []
    dash_duo.find_element(f"#{ids.EXPORT_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.EXPORT_STATUS}", "No release yet", timeout=10)
    assert no_horizontal_overflow(dash_duo)
    # one click on the suggestion declares that box; Release then publishes on it
    dash_duo.find_element(f"#{ids.DOMAIN_WARNING} button.suggest").click()
    poll_until(lambda: "domain-alert" not in dash_duo.find_element(f"#{ids.DOMAIN_WARNING}").get_attribute("innerHTML"), 10)
    assert "San Francisco" in dash_duo.find_element(f"#{ids.DOMAIN_PRESET}").text
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", f"Released {RECOMMENDED}", timeout=60)
    dash_duo.wait_for_element("img.grid-raster", timeout=20)
    poll_until(lambda: adaptive_steps(ledger_steps(dash_duo)), 10)
    assert adaptive_steps(ledger_steps(dash_duo)), ledger_steps(dash_duo)
    assert table_rows(dash_duo) == []
    assert no_horizontal_overflow(dash_duo)


def test_a_built_in_sample_can_be_picked_again_after_an_upload(dash_duo, tmp_path):
    start(dash_duo)
    (tmp_path / "few.csv").write_text("lon,lat\n" + "".join(
        f"{-73.95 + i / 1e4},{40.75 + i / 1e4}\n" for i in range(200)))
    upload(dash_duo, tmp_path / "few.csv")
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "200 points", timeout=30)
    assert "Your upload is loaded" in dash_duo.find_element(f"#{ids.SAMPLE_PICK}").text
    dash_duo.select_dcc_dropdown(f"#{ids.SAMPLE_PICK}", value="Points: Clustered city, 200k points")
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "200,000 points", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Showing your release of this data",
                                    timeout=30)      # the sample's release, already paid for


def test_odd_files_load_with_plain_warnings(dash_duo, tmp_path):
    start(dash_duo)
    (tmp_path / "utf16.csv").write_bytes("lon,lat\n-73.95,40.75\n-73.96,40.76\n".encode("utf-16"))
    upload(dash_duo, tmp_path / "utf16.csv")
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "Check before releasing", timeout=30)
    text = dash_duo.find_element(f"#{ids.DATA_SUMMARY}").text
    assert "the file is UTF-16 text rather than the expected UTF-8" in text
    assert "only 2 points" in text and "mostly noise" in text
    (tmp_path / "xyz.csv").write_text("x,y,z\n1,2,3\n")
    upload(dash_duo, tmp_path / "xyz.csv")
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "columns named 'x' and 'y'", timeout=30)


OVERLAPS = """
var cards = Array.from(document.querySelectorAll('.card')).filter(function (c) {
  return c.offsetParent && !c.closest('details:not([open])'); });
var boxes = cards.map(function (c) { var r = c.getBoundingClientRect();
  return [c.querySelector('h3') ? c.querySelector('h3').textContent : c.className, r.left, r.top, r.right, r.bottom]; });
var out = [];
for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
  var a = boxes[i], b = boxes[j];
  if (a[1] < b[3] - 1 && b[1] < a[3] - 1 && a[2] < b[4] - 1 && b[2] < a[4] - 1) out.push(a[0] + ' / ' + b[0]);
}
cards.forEach(function (c) { var r = c.getBoundingClientRect();
  c.querySelectorAll('*').forEach(function (e) {
    if (e.closest('.leaflet-container') || e.closest('.dash-spreadsheet-container') || !e.offsetParent) return;
    var q = e.getBoundingClientRect();
    if (q.width > 0 && q.right > r.right + 1) out.push('sticks out of ' + (c.querySelector('h3') || c).textContent + ': ' + e.tagName + '.' + e.className);
  }); });
return out;
"""


@pytest.mark.parametrize("size", [(1280, 800), (1600, 1000)])
def test_layout_fits_the_window_without_overlaps(dash_duo, tmp_path, size):
    start(dash_duo, mechanism=None)
    dash_duo.driver.set_window_size(*size)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()       # a second ledger row
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2 of 10", timeout=30)
    dash_duo.driver.save_screenshot(str(tmp_path / f"layout_{size[0]}x{size[1]}.png"))
    assert no_horizontal_overflow(dash_duo)
    assert dash_duo.driver.execute_script(OVERLAPS) == []


def ledger_epsilons(dash_duo) -> list[str]:
    return [c.text for c in dash_duo.find_elements(f"#{ids.LEDGER_TABLE} td[data-dash-column='epsilon']")]


def test_a_link_opens_with_its_settings_and_the_page_makes_such_links(dash_duo):
    start(dash_duo)
    ny = "New+York+%28Manhattan+%26+Brooklyn%29"
    dash_duo.driver.get(f"{dash_duo.server_url}/?mechanism=ug&epsilon=0.5&split=0.1,0.9&domain={ny}")
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "The link's settings are filled in",
                                    timeout=30)       # opening a link spends nothing
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1 of 10", timeout=10)
    press_release(dash_duo, "Released Uniform grid (Heuristic UG) at ε = 0.5")
    assert "Settings from the link: Uniform grid (Heuristic UG), ε = 0.5" in \
        dash_duo.find_element(f"#{ids.SHARE_NOTE}").text
    poll_until(lambda: ledger_epsilons(dash_duo) == ["0.05", "0.45"], 10)
    assert ledger_epsilons(dash_duo) == ["0.05", "0.45"]           # the link's split, not the default
    dash_duo.wait_for_text_to_equal(f"#{ids.EPSILON_READOUT}", "ε = 0.5", timeout=10)
    # the page's own link carries the same settings, and no data or seed
    dash_duo.find_element(f"#{ids.SHARE_BUTTON}").click()
    poll_until(lambda: "?" in (dash_duo.find_element(f"#{ids.SHARE_LINK}").get_attribute("value") or ""), 10)
    link = dash_duo.find_element(f"#{ids.SHARE_LINK}").get_attribute("value")
    s = share.from_query(link[link.index("?"):])
    assert (s.mechanism, s.epsilon, s.domain.name) == ("ug", 0.5, "New York (Manhattan & Brooklyn)")
    assert s.split == pytest.approx((0.1, 0.9)) and "seed" not in link
    # a broken link says why and the page opens as usual
    dash_duo.driver.get(f"{dash_duo.server_url}/?mechanism=ug&domain=Atlantis")
    dash_duo.wait_for_contains_text(f"#{ids.SHARE_NOTE}", "unknown domain 'Atlantis'", timeout=30)


RECTS = """
var r = function (e) { var b = e.getBoundingClientRect(); return [b.left, b.top, b.width, b.height]; };
var map = document.querySelector('#%s');
return {map: r(map), dashed: Array.from(map.querySelectorAll('path'))
  .filter(function (p) { return p.getAttribute('stroke-dasharray') === '6 4'; }).map(r),
  window: [window.innerWidth, window.innerHeight]};
"""


def rects(dash_duo) -> dict:
    """The map's box, every dashed outline's box (left, top, width, height) and the window."""
    return dash_duo.driver.execute_script(RECTS % ids.MAP)


def outline_inside(r: dict) -> list[bool]:
    """The domain outline's left, right, top and bottom within the map, and its size over a
    quarter of the map's width or height."""
    (ml, mt, mw, mh), (bl, bt, bw, bh) = r["map"], r["dashed"][0]
    return [bl >= ml - 1, bl + bw <= ml + mw + 1, bt >= mt - 1, bt + bh <= mt + mh + 1,
            bw > mw / 4 or bh > mh / 4]


def test_zoom_to_domain_brings_the_whole_box_back(dash_duo):
    start(dash_duo)
    assert all(outline_inside(rects(dash_duo)))
    for _ in range(4):
        dash_duo.find_element(".leaflet-control-zoom-in").click()
        time.sleep(0.4)
    poll_until(lambda: not all(outline_inside(rects(dash_duo))[:4]), 10)
    assert not all(outline_inside(rects(dash_duo))[:4])        # zoomed in: the box overflows
    poll_until(lambda: not dash_duo.find_elements(".leaflet-zoom-anim"), 10)   # the zooms settled
    dash_duo.find_element(f"#{ids.MAP_ZOOM_DOMAIN}").click()
    poll_until(lambda: all(outline_inside(rects(dash_duo))), 10)
    r = rects(dash_duo)
    assert all(outline_inside(r)), r


TOOLBARS = """
return Array.from(document.querySelectorAll('#%s .leaflet-draw, #%s .leaflet-control-zoom'))
  .map(function (e) { return e.getBoundingClientRect().right; });
"""


def fit_a_wide_box(dash_duo) -> tuple[dict, float]:
    """Type a custom box three times as wide as tall around the sample's city, zoom to it and
    wait until its outline spans the map's width: (`rects`, the toolbars' right edge)."""
    from test_browser_workspace import choose
    choose(dash_duo, ids.DOMAIN_PRESET, "Custom box")
    for box, v in zip(dash_duo.find_elements(".box-inputs input"), (-74.6, 40.6, -73.5, 40.9)):
        box.clear()
        box.send_keys(str(v), Keys.TAB)
    dash_duo.find_element(f"#{ids.MAP_ZOOM_DOMAIN}").click()
    wide = lambda: (lambda r: r["dashed"] and r["dashed"][0][2] > 0.8 * r["map"][2])(rects(dash_duo))
    poll_until(wide, 20)
    assert wide(), rects(dash_duo)                              # fitted across the map's width
    return rects(dash_duo), max(dash_duo.driver.execute_script(TOOLBARS % (ids.MAP, ids.MAP)))


@pytest.mark.parametrize("size", [(1280, 800), (1600, 1000)])
def test_the_domain_outline_clears_the_toolbars(dash_duo, size):
    # issue 44: a box wider than the map was fitted edge to edge, its west side under the zoom
    # and drawing toolbars. A custom box three times as wide as tall around the sample's city
    start(dash_duo)
    dash_duo.driver.set_window_size(*size)
    r, right_of_toolbars = fit_a_wide_box(dash_duo)
    assert all(outline_inside(r)), r
    assert r["dashed"][0][0] >= right_of_toolbars, (r, right_of_toolbars)


def test_offline_map_shows_world_outlines_and_only_their_attribution(dash_duo):
    start(dash_duo)            # tiles point at a closed port: every tile fails
    dash_duo.wait_for_element(f"#{ids.MAP}.tiles-offline", timeout=20)
    pane = dash_duo.find_element(".leaflet-world-pane")
    poll_until(lambda: pane.find_elements(By.CSS_SELECTOR, "path"), 20)
    assert pane.is_displayed() and pane.find_elements(By.CSS_SELECTOR, "path")
    attribution = dash_duo.find_element(".leaflet-control-attribution").text
    assert "Natural Earth" in attribution and "OpenStreetMap" not in attribution


def test_a_link_never_releases_an_upload_with_settings_not_on_screen(dash_duo, tmp_path):
    start(dash_duo)
    # the link's San Francisco box leaves out the New York sample: nothing is released on it
    dash_duo.driver.get(f"{dash_duo.server_url}/?mechanism=ug&epsilon=0.5&domain=San+Francisco")
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "most of the data lies outside", timeout=30)
    box = dash_duo.find_element(f"#{ids.EPSILON_VALUE}")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("0.2", Keys.ENTER)                  # the owner changes ε on screen
    dash_duo.wait_for_text_to_equal(f"#{ids.EPSILON_READOUT}", "ε = 0.2", timeout=10)
    sf_csv(tmp_path / "sf.csv", n=20_000)
    upload(dash_duo, tmp_path / "sf.csv")
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    press_release(dash_duo, "Released Uniform grid (Heuristic UG) at ε = 0.2")   # the screen's ε
