"""Browser tests of the public pages (headless Chromium): a published release at /r/<id> shows
its private map, legend and guarantee, answers drawn rectangles from the release alone, gives
its downloads, is linked from the gallery at /r/, and only the owner can unpublish it."""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from helpers import shown
from test_browser import draw_rect, poll_until   # skips without a browser
from test_browser_workspace import gunicorn   # noqa: F401  (fixture: the multi-worker server)

import dp
from app import create_app
from components import public_page
from server import services

pytestmark = pytest.mark.browser
OFFLINE = "http://127.0.0.1:9/{z}/{x}/{y}.png"
TOKEN = "owner-secret-for-the-public-page-tests"
RECT = dp.Rect(-0.2, 51.45, -0.05, 51.55)


def cells(dash_duo, column: str) -> list[str]:
    return dash_duo.driver.execute_script(
        f"return Array.from(document.querySelectorAll(\"#{public_page.ANSWERS} td[data-dash-column='{column}']\"))"
        ".map(function (td) { return td.innerText; });")


def downloaded(dash_duo, name: str) -> Path:
    path = Path(dash_duo.download_path) / name
    poll_until(lambda: path.exists() and path.stat().st_size > 0, 15)
    return path


def test_a_published_release_has_a_public_page(dash_duo, tmp_path, small, gunicorn):
    # on the server a user runs (3 workers), laid out at both widths; published from this
    # process into the server's folder, with its key, as each of its workers opens it
    services.open_services({"accounts_dir": gunicorn.folder / "accounts", "store_dir": tmp_path / "store",
                            "published_dir": gunicorn.folder / "published"})
    data, domain = small
    rel = dp.release("privtree", data, domain, epsilon=1.0)
    pid = services.current().published.publish(rel, "Test city at night")
    base = gunicorn.url
    for width in (1280, 1600):
        dash_duo.driver.set_window_size(width, 1000)
        dash_duo.wait_for_page(f"{base}/r/{pid}")
        dash_duo.wait_for_text_to_equal(".pub-title", "Test city at night", timeout=15)
        dash_duo.wait_for_element(".leaflet-overlay-pane img.grid-raster", timeout=15)
        # laid out for the width: the map takes at least 60% of it, the legend is in view
        geometry = dash_duo.driver.execute_script("""
            var m = document.querySelector('.pub-map').getBoundingClientRect(),
                l = document.querySelector('.map-legend').getBoundingClientRect();
            return {map: m.width, width: window.innerWidth, height: window.innerHeight,
                    legend: [l.left, l.top, l.right, l.bottom],
                    scroll: document.documentElement.scrollWidth};""")
        assert geometry["map"] >= 0.6 * geometry["width"], geometry
        left, top, right, bottom = geometry["legend"]
        assert 0 <= left and right <= geometry["width"] and 0 <= top and bottom <= geometry["height"], geometry
        assert geometry["scroll"] <= geometry["width"], geometry
    text = dash_duo.driver.execute_script("return document.body.innerText")
    assert rel.spec.guarantee in text and rel.privacy_level in text and "ε = 1" in text
    assert "no one person can be singled out" in text and "About these numbers" in text
    assert "private points per km²" in dash_duo.find_element(".map-legend").text
    assert not dash_duo.find_elements(f"#{public_page.UNPUBLISH}")          # a visitor: no owner control
    # the rectangle tool: a drawn rectangle gets a row; an exact one is the release's answer, rounded
    draw_rect(dash_duo)
    poll_until(lambda: cells(dash_duo, "id") == ["Q1"], 10)
    assert cells(dash_duo, "id") == ["Q1"] and cells(dash_duo, "count")[0]
    ring = [[RECT.west, RECT.south], [RECT.east, RECT.south], [RECT.east, RECT.north],
            [RECT.west, RECT.north], [RECT.west, RECT.south]]
    dash_duo.driver.execute_script(
        "window.dash_clientside.set_props(arguments[0], {geojson: arguments[1]});", public_page.EDIT,
        {"type": "FeatureCollection", "features": [
            {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [ring]}, "properties": {}}]})
    expected = shown(rel.answer(RECT))
    poll_until(lambda: cells(dash_duo, "count") == [expected], 10)
    assert cells(dash_duo, "count") == [expected]
    lo, hi = rel.bounds([RECT])
    assert cells(dash_duo, "range") == [f"{math.floor(lo[0]):,} to {math.ceil(hi[0]):,}"]
    headers = [h.text for h in dash_duo.find_elements(f"#{public_page.ANSWERS} th")]
    assert "True count lies in (95%, any data)" in headers and not any("noise only" in h for h in headers)
    about = dash_duo.find_element(".pub-about").text
    assert "95% of the time whatever the data" in about
    truth = f"{data.true_count(RECT, domain):,}"
    if truth != expected:            # the noise moved it: the true count is shown nowhere
        assert truth not in cells(dash_duo, "count")
    # downloads: GeoJSON, the cells as CSV, the map as PNG
    dash_duo.find_element(f"#{public_page.GEOJSON_BUTTON}").click()
    doc = json.loads(downloaded(dash_duo, f"published_{pid}.geojson").read_text())
    assert doc["type"] == "FeatureCollection" and doc["properties"]["epsilon"] == 1.0
    dash_duo.find_element(f"#{public_page.CSV_BUTTON}").click()
    rows = list(csv.reader(io.StringIO(downloaded(dash_duo, f"published_{pid}_cells.csv").read_text())))
    assert rows[0][:6] == ["west", "south", "east", "north", "count", "people"] and len(rows) == len(rel.regions()[1]) + 1
    # "About these numbers" says what the file holds (it once said negative values were kept
    # in a file that had none)
    negative = sum(float(r[4]) < 0 for r in rows[1:])
    assert (f"{negative:,} of them are below 0" if negative else "none is below 0") in about
    assert f"({len(rows) - 1:,} cells)" in about
    assert rows[1][6] == doc["properties"]["mechanism"] and rows[0][-1] == "WKT"   # a plain, stamped table
    dash_duo.find_element(f"#{public_page.PNG_BUTTON}").click()
    poll_until(lambda: downloaded(dash_duo, f"published_{pid}_map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", 10)
    assert downloaded(dash_duo, f"published_{pid}_map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the gallery links to it
    dash_duo.wait_for_page(f"{base}/r/")
    dash_duo.wait_for_element(f"a.gallery-card[href='/r/{pid}']", timeout=10)
    assert "Test city at night" in dash_duo.find_element(f"a.gallery-card[href='/r/{pid}']").text
    # an unknown address: a friendly page with the way back
    dash_duo.wait_for_page(f"{base}/r/AAAAAAAAAAAA")
    dash_duo.wait_for_contains_text(f"#{public_page.BODY}", "Not published", timeout=10)
    assert dash_duo.find_element(f"#{public_page.BODY} a[href='/r/']")
    poll_until(lambda: dash_duo.driver.title == public_page.TITLE, 10)     # the page's own title
    assert dash_duo.driver.title == public_page.TITLE
    # an address that is no page at all: says so, with the ways to the pages
    dash_duo.wait_for_page(f"{base}/nowhere")
    dash_duo.wait_for_text_to_equal("h1", "No page at this address", timeout=10)
    assert dash_duo.find_element("main a[href='/']") and dash_duo.find_element("main a[href='/r/']")


def test_only_the_owner_unpublishes(dash_duo, tmp_path, small):
    app = create_app({"tiles_url": OFFLINE, "owner_token": TOKEN})
    data, domain = small
    pid = services.current().published.publish(dp.release("ug", data, domain, epsilon=0.5), "")
    dash_duo.start_server(app, navigate=False)
    base = dash_duo.server.url.rstrip("/")
    dash_duo.driver.get(f"{base}/owner?token={TOKEN}")
    dash_duo.wait_for_page(f"{base}/r/{pid}")
    dash_duo.wait_for_element(f"#{public_page.UNPUBLISH} button", timeout=15).click()
    dash_duo.driver.switch_to.alert.accept()
    dash_duo.wait_for_contains_text(f"#{public_page.BODY}", "No longer published", timeout=10)
    assert services.current().published.record(pid) is None
    dash_duo.wait_for_page(f"{base}/r/{pid}")
    dash_duo.wait_for_contains_text(f"#{public_page.BODY}", "Not published", timeout=10)


PAYLOAD = '<img src=x onerror="window.__xss = 1">'


def test_names_from_files_and_people_are_text_on_the_public_page(dash_duo, tmp_path, small):
    """Issue 41, item 1, on the public page: a box name (a counts file carries one) and the
    owner's title holding a script show as the text they are, in the gallery and on the page."""
    app = create_app({"tiles_url": OFFLINE, "owner_token": TOKEN})
    data, domain = small
    box = dp.Domain(*domain.bounds, name=f"{PAYLOAD} box")
    pid = services.current().published.publish(dp.release("ug", data, box, epsilon=0.5), f"{PAYLOAD} title")
    dash_duo.start_server(app, navigate=False)
    base = dash_duo.server.url.rstrip("/")
    for address, selector in ((f"/r/{pid}", ".pub-title"), ("/r/", f"a.gallery-card[href='/r/{pid}']")):
        dash_duo.wait_for_page(f"{base}{address}")
        dash_duo.wait_for_contains_text(selector, f"{PAYLOAD} title", timeout=15)
        text = dash_duo.driver.execute_script("return document.body.innerText")
        assert f"{PAYLOAD} box" in text
        assert not dash_duo.find_elements(f"#{public_page.BODY} img:not(.grid-raster):not(.leaflet-tile)")
        assert dash_duo.driver.execute_script("return window.__xss === undefined;")
