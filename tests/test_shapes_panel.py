"""Counts per shape in the app's default install (no geopandas): GeoParquet written and read
with pyarrow and shapely alone, district files checked, and the shapes panel's refusals and
choropleth (the browser side is in test_browser_shapes)."""
import base64
import io
import json
import warnings

import numpy as np
import pyarrow.parquet as pq
import pytest
import shapely

import dp
from components import shapes_panel
from dp import shapes
from dp.errors import DataError, ParameterError


@pytest.fixture(scope="module")
def city():
    return dp.load_sample("small_city_5k")


@pytest.fixture(scope="module")
def hexes(city):
    return shapes.h3_cells(city[1], 7)


def as_upload(raw: bytes) -> str:
    return "data:application/octet-stream;base64," + base64.b64encode(raw).decode()


def test_geoparquet_is_written_without_geopandas_and_read_back_as_districts(city, hexes):
    data, dom = city
    rel = dp.release("privtree", data, dom, 1.0)
    sc = shapes.shape_counts(rel, hexes[1], hexes[0])
    out = io.BytesIO()
    sc.to_parquet(out)
    table = pq.read_table(io.BytesIO(out.getvalue()))
    geo = json.loads(table.schema.metadata[b"geo"])
    assert geo["primary_column"] == "geometry" and geo["columns"]["geometry"]["encoding"] == "WKB"
    assert set(geo["columns"]["geometry"]["geometry_types"]) <= {"Polygon", "MultiPolygon"}
    assert "crs" not in geo["columns"]["geometry"]            # the standard's default: OGC:CRS84
    assert table.column("id").to_pylist() == hexes[0]
    assert np.allclose(table.column("count").to_numpy(), np.round(sc.count, 3))
    # the file is a district file too: the same shapes and ids come back
    ids, polys = shapes.load_shapes(out.getvalue())
    assert ids == hexes[0]
    assert shapely.equals_exact(polys, shapely.make_valid(sc.shapes), tolerance=1e-12).all()
    # and a release's own regions, as GeoParquet
    cells = io.BytesIO()
    rel.to_parquet(cells)
    assert pq.read_table(io.BytesIO(cells.getvalue())).num_rows == len(rel.regions()[2])


def test_district_files_are_checked_in_words(city):
    points = io.BytesIO()
    shapes_pts = shapely.points(np.array([[0.0, 51.5], [0.1, 51.5]]))
    from dp.geo import write_geoparquet
    write_geoparquet([{"id": 1}, {"id": 2}], shapes_pts, points)
    with pytest.raises(DataError, match="shape 0 is a Point; expected a Polygon or MultiPolygon"):
        shapes.load_shapes(points.getvalue())
    with pytest.raises(DataError, match="not a readable Parquet file"):
        shapes.load_shapes(b"PAR1" + b"\0" * 40)
    with pytest.raises(DataError, match="not UTF-8 text"):
        shapes.load_shapes(b"\xff\xfe{")
    upload = as_upload(json.dumps({"type": "FeatureCollection", "features": []}).encode())
    with pytest.raises(DataError, match="expected a GeoJSON FeatureCollection"):
        shapes_panel.read_districts(upload, "empty.geojson", 10**6)
    with pytest.raises(DataError, match="over the 0.0001 MB upload limit"):
        shapes_panel.read_districts(as_upload(b"{}" * 200), "big.geojson", 100)


def test_malformed_district_files_get_a_message_not_a_crash(tmp_path):
    square = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}
    nan = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, float("inf")], [0, 1], [0, 0]]]}
    doc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": ["not", "a", "mapping"], "geometry": square},
        {"type": "Feature", "properties": {}, "geometry": nan}]}
    with pytest.raises(DataError, match="shape 1 has coordinates that are not numbers"):
        shapes.load_shapes(json.dumps(doc).encode())
    doc["features"].pop()
    assert shapes.load_shapes(json.dumps(doc).encode())[0] == [0]     # list properties: no id, its position
    # a GeoParquet file with too many rows is refused from its footer, before its data is read
    from dp.geo import write_geoparquet
    many = io.BytesIO()
    write_geoparquet([{"id": i} for i in range(50)], shapely.box(np.arange(50), 0, np.arange(50) + 1, 1), many)
    with pytest.raises(DataError, match="the file has 50 shapes, more than the 10 allowed here"):
        shapes.load_shapes(many.getvalue(), max_shapes=10)
    # the writer: no bbox for all-empty shapes (NaN is not JSON), 3D types named as such
    empty = io.BytesIO()
    write_geoparquet([{}], [shapely.Polygon()], empty)
    assert "bbox" not in json.loads(pq.read_schema(io.BytesIO(empty.getvalue())).metadata[b"geo"])["columns"]["geometry"]
    z = io.BytesIO()
    write_geoparquet([{}], [shapely.Polygon([(0, 0, 1), (1, 0, 1), (1, 1, 1)])], z)
    geo = json.loads(pq.read_schema(io.BytesIO(z.getvalue())).metadata[b"geo"])
    assert geo["columns"]["geometry"]["geometry_types"] == ["Polygon Z"]


def test_hexagon_sizes_from_resolution_0_and_the_finest_that_fits_the_box():
    # issue 44: on a country-sized box even resolution 4 gave 8,311 > 5,000 hexagons and no
    # larger size was offered
    usa = dp.presets.PRESETS["Contiguous USA"]
    assert min(shapes_panel.H3_RESOLUTIONS) == 0
    fits = shapes_panel.fitting(usa)
    assert fits[3] and not fits[4] and all(fits[r] for r in range(4))
    options = {o["value"]: o for o in shapes_panel.res_options(usa)}
    assert options[4]["disabled"] and "over 5,000 hexagons in this box" in options[4]["label"]
    assert not options[3]["disabled"] and options[3]["label"] == "3: edges about 70 km"
    assert shapes_panel.fitted_res(usa, 7) == 3 and shapes_panel.fitted_res(usa, 2) == 2
    city = dp.presets.PRESETS["London"]
    assert shapes_panel.fitted_res(city, 7) == 7 and not any(o["disabled"] for o in shapes_panel.res_options(None))
    assert len(dp.shapes.h3_cells(usa, 3)[0]) <= shapes_panel.MAX_APP_SHAPES


def test_one_shape_is_one_shape():
    # issue 44: "1 shapes"
    assert shapes_panel.districts_note({"name": "one.geojson", "n": 1}) == "Districts: one.geojson (1 shape)."
    assert shapes_panel.districts_note({"name": "two.geojson", "n": 2}) == "Districts: two.geojson (2 shapes)."


def test_a_crafted_choice_falls_back_to_what_is_offered():
    crafted = {"shapes_kind": "<script>", "shapes_res": -1, "shapes_shown": True}
    choice = shapes_panel.choice_in(crafted)
    assert choice["kind"] == "h3" and choice["res"] == shapes_panel.DEFAULT["res"] and choice["shown"]
    assert shapes_panel.choice_in({"shapes_res": "7"})["res"] == shapes_panel.DEFAULT["res"]   # text, not offered


def test_counts_of_a_seeded_release_say_they_are_not_private(city, hexes):
    data, dom = city
    sc = shapes.shape_counts(dp.release("e2epriv", data, dom, 1.0, seed=3), hexes[1], hexes[0])
    assert not shapes_panel.is_private(sc)
    assert "NOT private" in shapes_panel.summary(sc, "h3").children
    (layer,), _ = shapes_panel.choropleth(sc, dom)
    assert layer.data["features"][0]["properties"]["tip"].startswith("NOT private")
    out = io.BytesIO()
    sc.to_parquet(out)                    # the provenance travels in the file's metadata
    meta = pq.read_schema(io.BytesIO(out.getvalue())).metadata
    assert json.loads(meta[b"provenance"])["differentially_private"] is False


def test_too_many_districts_are_refused_before_drawing():
    boxes = shapely.box(np.arange(5001) * 1e-3, 0, np.arange(5001) * 1e-3 + 1e-3, 1e-3)
    doc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {}, "geometry": shapely.geometry.mapping(b)} for b in boxes]}
    with pytest.raises(DataError, match="5,001 shapes, more than the 5,000 allowed here: the map draws"):
        shapes_panel.read_districts(as_upload(json.dumps(doc).encode()), "many.geojson", 10**8)


def test_a_box_fitted_to_the_data_and_too_many_hexagons_are_refused(city):
    data, dom = city
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.PrivacyLeakWarning)
        fitted = dp.fit_to_data(data.x, data.y)
        rel = dp.release("privtree", data, fitted, 1.0)
    with pytest.raises(ParameterError, match="need a public box"):
        shapes_panel.wanted(rel, {**shapes_panel.DEFAULT, "kind": "h3"})
    rel = dp.release("privtree", data, dom, 1.0)
    with pytest.raises(ParameterError, match="hexagons over this box; the map draws at most 5,000"):
        shapes_panel.wanted(rel, {**shapes_panel.DEFAULT, "kind": "h3", "res": 12})
    with pytest.raises(ParameterError, match="no district file loaded"):
        shapes_panel.wanted(rel, {**shapes_panel.DEFAULT, "kind": "districts"})


def test_the_choropleth_colours_by_density_and_tells_each_shapes_numbers(city, hexes):
    data, dom = city
    rel = dp.release("e2epriv", data, dom, 1.0)
    sc = shapes.shape_counts(rel, hexes[1], hexes[0])
    (layer,), legend = shapes_panel.choropleth(sc, dom)
    feats = layer.data["features"]
    assert len(feats) == len(hexes[0])
    dens = shapes_panel.density(sc, dom)
    colours = [f["properties"]["colour"] for f in feats]
    assert all(len(c) == 7 and c.startswith("#") for c in colours)
    # the densest shape gets the darkest colour, an empty one the lightest
    darkness = np.array([sum(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in colours])
    assert darkness[np.argmax(dens)] == darkness.min() and darkness[np.argmin(dens)] == darkness.max()
    first = feats[0]["properties"]["tip"]
    row = sc.rows()[0]
    assert first.startswith(f"{row['id']}: count {row['count']:,.1f}")
    assert f"true count lies in {row['range_low']:,} to {row['range_high']:,} (95%, any data)" in first
    assert "resolved by whole released regions" in first and "noise" not in first
    assert "count per km²" in legend[0].children


def test_half_widths_of_all_shapes_at_once_cover_the_noise():
    # shape 0: one draw (exact quantile, scaled by its weight); shapes 1..40: two draws of weight
    # 1 (simulated; checked against the exact law of Z1 + Z2); shapes 41..48: 4 to 64 draws of
    # mixed weights and scales (Cornish-Fisher; checked by simulation)
    from dp.mechanisms.half_width import laplace_sim
    from dp.noise import discrete_laplace_quantile, discrete_laplace_variance
    rng = np.random.default_rng(7)
    scales = np.linspace(2.0, 20.0, 40)
    sizes = np.linspace(4, 64, 8).astype(int)
    si = np.concatenate([[0], np.repeat(np.arange(1, 41), 2), np.repeat(np.arange(41, 49), sizes)])
    w = np.concatenate([[0.5], np.ones(80), rng.uniform(0.05, 1.0, sizes.sum())])
    sc = np.concatenate([[10.0], np.repeat(scales, 2), rng.uniform(1.0, 30.0, sizes.sum())])
    var = np.bincount(si, w ** 2 * discrete_laplace_variance(sc))
    h = shapes._half_widths(si, w, sc, var, 0.95)
    assert h[0] == 0.5 * discrete_laplace_quantile(10.0, 0.95)
    # P(|Z1 + Z2| <= h) from the exact pmf: the simulated quantile of 4,000 draws is within
    # 3.5 binomial standard deviations of 0.95 (sd = sqrt(0.95 * 0.05 / 4000) = 0.0034)
    tol = 3.5 * np.sqrt(0.95 * 0.05 / shapes.SIMULATIONS)
    support = np.arange(-4000, 4001)
    for k, s in enumerate(scales, start=1):
        q = np.exp(-1 / s)
        pmf = (1 - q) / (1 + q) * q ** np.abs(np.arange(-2000, 2001))
        total = np.convolve(pmf, pmf)
        assert total[np.abs(support) <= h[k]].sum() >= 0.95 - tol, (s, h[k])
        assert total[np.abs(support) <= h[k] - 1].sum() <= 0.95 + tol, (s, h[k])
    # Cornish-Fisher: the coverage of each interval, from 100,000 simulated sums (sd 0.0007), is
    # within 0.005 of 0.95 (a quantile 2% off moves the coverage by about 0.003 here)
    starts = np.searchsorted(si, np.arange(41, 50))
    for k in range(41, 49):
        lo, hi = starts[k - 41], starts[k - 40]
        sums = laplace_sim(rng, sc[lo:hi], 100_000) @ w[lo:hi]
        assert abs(np.mean(np.abs(sums) <= h[k]) - 0.95) < 0.005, (k, hi - lo)


def test_the_fourth_cumulant_is_the_pmfs():
    from dp.noise import discrete_laplace_fourth_cumulant, discrete_laplace_variance
    for s in (0.7, 3.0, 25.0):
        q = np.exp(-1 / s)
        z = np.arange(-4000, 4001, dtype=np.float64)
        pmf = (1 - q) / (1 + q) * q ** np.abs(z)
        m2, m4 = (pmf * z ** 2).sum(), (pmf * z ** 4).sum()
        assert discrete_laplace_variance(s) == pytest.approx(m2, rel=1e-9)
        assert discrete_laplace_fourth_cumulant(s) == pytest.approx(m4 - 3 * m2 ** 2, rel=1e-9)
