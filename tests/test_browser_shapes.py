"""Counts per district or hexagon in a real browser, on `python app.py` (3 gunicorn workers) at
1280 px and on the dev server at 1600 px: districts declared public are uploaded (the upload is
closed until they are), drawn as a choropleth with a legend and a tooltip, downloaded as GeoJSON
and GeoParquet, restored by a reload, and nothing is charged; H3 hexagons replace them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import shapely
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from test_browser import poll_until, press_release   # skips without a browser
import test_browser_workspace
from test_browser_workspace import BOTH_WIDTHS, charges, choose, picked, severe_errors

import dp
from components import ids
from server import state

pytestmark = pytest.mark.browser
gunicorn, page = test_browser_workspace.gunicorn, test_browser_workspace.page   # the same two servers
N_DISTRICTS = 600          # about a large city's wards


def districts(path: Path, n: int = N_DISTRICTS) -> list[str]:
    """Voronoi districts over the default sample's box (a little beyond it, so some are
    clipped), written as GeoJSON with a "code" property; their codes."""
    d = state.sample(state.DEFAULT_SAMPLE)[1]
    rng = np.random.default_rng(5)
    seeds = shapely.multipoints(rng.uniform([d.west, d.south], [d.east, d.north], (n, 2)))
    outer = shapely.box(d.west - 0.01, d.south - 0.01, d.east + 0.01, d.north + 0.01)
    cells = shapely.intersection(np.asarray(shapely.voronoi_polygons(seeds, extend_to=outer).geoms), outer)
    codes = [f"D{i:03d}" for i in range(len(cells))]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"code": c}, "geometry": shapely.geometry.mapping(g)}
        for c, g in zip(codes, cells)]}))
    return codes


def drawn(dash_duo) -> int:
    """Shapes drawn in the map's shapes pane."""
    return dash_duo.driver.execute_script(
        "return document.querySelectorAll('.leaflet-shapes-pane path.leaflet-interactive').length;")


def shapes_status(dash_duo) -> str:
    return dash_duo.find_element(f"#{ids.SHAPES_STATUS}").text


def downloaded(dash_duo, name: str) -> Path:
    path = Path(dash_duo.download_path) / name
    poll_until(lambda: path.is_file() and path.stat().st_size > 0, 20)
    return path


@BOTH_WIDTHS
def test_districts_choropleth_downloads_reload_and_hexagons(page, tmp_path):
    dash_duo, accounts = page
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    press_release(dash_duo)
    spent = len(charges(accounts))
    codes = districts(tmp_path / "wards.geojson")
    upload = f"#{ids.SHAPES_UPLOAD} input[type=file]"
    # not declared public: the upload is closed
    dash_duo.find_element(f"#{ids.SHAPES_KIND} input[value=districts]").click()
    assert dash_duo.find_element(upload).get_attribute("disabled")
    assert dash_duo.find_element(f"#{ids.SHAPES_FILE}").text == "No district file loaded."
    # declared public: loaded, shown, with a legend, a summary and a tooltip
    dash_duo.find_element(f"#{ids.SHAPES_PUBLIC} input").click()
    poll_until(lambda: not dash_duo.find_element(upload).get_attribute("disabled"), 10)
    dash_duo.find_element(upload).send_keys(str(tmp_path / "wards.geojson"))
    dash_duo.wait_for_contains_text(f"#{ids.SHAPES_FILE}", f"wards.geojson ({len(codes)} shapes)", timeout=30)
    dash_duo.find_element(f"#{ids.SHAPES_SHOW}").click()
    dash_duo.wait_for_contains_text(f"#{ids.SHAPES_STATUS}", f"{len(codes)} shapes on the map", timeout=60)
    poll_until(lambda: drawn(dash_duo) >= len(codes), 30)
    assert drawn(dash_duo) >= len(codes)               # a district cut in two by the box is two paths
    legend = dash_duo.find_element(f"#{ids.SHAPES_LEGEND}").text
    assert "count per km²" in legend
    path = dash_duo.driver.execute_script(
        "var p = document.querySelectorAll('.leaflet-shapes-pane path.leaflet-interactive');"
        "return p[Math.floor(p.length / 2)];")
    ActionChains(dash_duo.driver).move_to_element(path).perform()
    poll_until(lambda: dash_duo.find_elements(".leaflet-tooltip"), 10)
    tip = dash_duo.find_element(".leaflet-tooltip").text
    assert tip.startswith("D") and "count" in tip and "resolved by whole released regions" in tip
    # downloads: every district with its code, numbers and the release's provenance
    dash_duo.find_element(f"#{ids.SHAPES_DL_GEOJSON}").click()
    doc = json.loads(downloaded(dash_duo, "counts_districts.geojson").read_text())
    assert [f["properties"]["id"] for f in doc["features"]] == codes
    assert {"count", "range_low", "range_high", "noise_only_low", "noise_only_high", "resolved"} <= set(doc["features"][0]["properties"])
    assert doc["properties"]["provenance"]["mechanism"]
    total = sum(f["properties"]["count"] for f in doc["features"])
    assert f"adding up to {total:,.0f}" in shapes_status(dash_duo)
    dash_duo.find_element(f"#{ids.SHAPES_DL_PARQUET}").click()
    table = pq.read_table(downloaded(dash_duo, "counts_districts.parquet"))
    assert table.column("id").to_pylist() == codes and b"geo" in table.schema.metadata
    # a reload draws the same choropleth, and nothing of this was charged
    dash_duo.driver.refresh()
    dash_duo.wait_for_contains_text(f"#{ids.SHAPES_STATUS}", f"{len(codes)} shapes on the map", timeout=60)
    poll_until(lambda: drawn(dash_duo) >= len(codes), 30)
    assert drawn(dash_duo) >= len(codes)
    assert f"wards.geojson ({len(codes)} shapes)" in dash_duo.find_element(f"#{ids.SHAPES_FILE}").text
    # H3 hexagons over the box instead
    dash_duo.find_element(f"#{ids.SHAPES_KIND} input[value=h3]").click()
    dash_duo.wait_for_contains_text(f"#{ids.SHAPES_STATUS}", "shapes on the map", timeout=60)
    hexes = int(shapes_status(dash_duo).split()[0].replace(",", ""))
    d = state.sample(state.DEFAULT_SAMPLE)[1]
    assert hexes == len(dp.shapes.h3_cells(d, 7)[0])
    poll_until(lambda: drawn(dash_duo) == hexes, 30)
    assert drawn(dash_duo) == hexes
    dash_duo.find_element(f"#{ids.SHAPES_HIDE}").click()
    poll_until(lambda: drawn(dash_duo) == 0, 20)
    assert drawn(dash_duo) == 0 and not dash_duo.find_element(f"#{ids.SHAPES_LEGEND}").text
    assert len(charges(accounts)) == spent
    # shown again, then a release over the whole country (the sample is New York's): the layer
    # is hidden (it was drawn for the city's box), the size becomes the finest that fits (res
    # 7's hexagons would number about 3 million) and the finer ones are greyed out, saying why
    # (issue 44)
    dash_duo.find_element(f"#{ids.SHAPES_SHOW}").click()
    poll_until(lambda: drawn(dash_duo) == hexes, 30)
    choose(dash_duo, ids.DOMAIN_PRESET, "Contiguous USA")
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    poll_until(lambda: picked(dash_duo, ids.SHAPES_H3_RES).startswith("3: edges about 70 km"), 60)
    assert picked(dash_duo, ids.SHAPES_H3_RES).startswith("3: edges about 70 km")
    poll_until(lambda: drawn(dash_duo) == 0, 20)
    assert drawn(dash_duo) == 0
    dash_duo.find_element(f"#{ids.SHAPES_H3_RES}").click()
    poll_until(lambda: dash_duo.find_elements(".dash-dropdown-option"), 10)
    options = [o.text for o in dash_duo.find_elements(".dash-dropdown-option")]
    assert "4: edges about 26 km (over 5,000 hexagons in this box)" in options and "0: edges about 1,300 km" in options
    dash_duo.find_element(f"#{ids.SHAPES_H3_RES}").send_keys(Keys.ESCAPE)
    dash_duo.find_element(f"#{ids.SHAPES_SHOW}").click()
    country = len(dp.shapes.h3_cells(dp.presets.PRESETS["Contiguous USA"], 3)[0])
    dash_duo.wait_for_contains_text(f"#{ids.SHAPES_STATUS}", f"{country:,} shapes on the map", timeout=60)
    assert not severe_errors(dash_duo)


PAYLOAD = '<img src=x onerror="window.__xss = 1">'


def test_a_district_name_is_text_never_html(page, tmp_path):
    # a district file whose names carry a script: Leaflet writes a string tooltip with
    # innerHTML, so the name would run in the owner's page; it must show as the text it is
    dash_duo, _ = page
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    press_release(dash_duo)
    d = state.sample(state.DEFAULT_SAMPLE)[1]
    xs, ys = np.linspace(d.west, d.east, 3), np.linspace(d.south, d.north, 3)
    cells = [shapely.box(xs[i], ys[j], xs[i + 1], ys[j + 1]) for i in range(2) for j in range(2)]
    (tmp_path / "evil.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": f"{PAYLOAD} {k}"}, "geometry": shapely.geometry.mapping(g)}
        for k, g in enumerate(cells)]}))
    dash_duo.find_element(f"#{ids.SHAPES_KIND} input[value=districts]").click()
    dash_duo.find_element(f"#{ids.SHAPES_PUBLIC} input").click()
    upload = f"#{ids.SHAPES_UPLOAD} input[type=file]"
    poll_until(lambda: not dash_duo.find_element(upload).get_attribute("disabled"), 10)
    dash_duo.find_element(upload).send_keys(str(tmp_path / "evil.geojson"))
    dash_duo.wait_for_contains_text(f"#{ids.SHAPES_FILE}", "evil.geojson (4 shapes)", timeout=30)
    dash_duo.find_element(f"#{ids.SHAPES_SHOW}").click()
    dash_duo.wait_for_contains_text(f"#{ids.SHAPES_STATUS}", "4 shapes on the map", timeout=60)
    poll_until(lambda: drawn(dash_duo) >= 4, 30)
    for k in range(4):
        path = dash_duo.driver.execute_script(
            "return document.querySelectorAll('.leaflet-shapes-pane path.leaflet-interactive')[arguments[0]];", k)
        ActionChains(dash_duo.driver).move_to_element(path).perform()
        poll_until(lambda: PAYLOAD in dash_duo.find_element(".leaflet-tooltip").text
                   if dash_duo.find_elements(".leaflet-tooltip") else False, 10)
        assert PAYLOAD in dash_duo.find_element(".leaflet-tooltip").text
    assert not dash_duo.find_elements(".leaflet-tooltip img")
    assert dash_duo.driver.execute_script("return window.__xss === undefined;")
