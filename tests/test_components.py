"""Unit tests for the pure functions the dashboard's callbacks call, with the app's own ids."""
from __future__ import annotations

import base64
import json
import math
import re
import struct
import zlib

import numpy as np
import pytest

import dp
from helpers import new_sid
from components.numbers import count_of, plural, significant
from components import (controls, data_panel, evaluation_panel, export_panel, ids, ledger_panel,
                        map_image, map_panel, mechanism_panel, queries_panel, render)
from server import releases, services, state


def test_every_panel_registers_its_callbacks(app):
    outputs = " ".join(app.callback_map)
    for needed in (ids.DATASET, ids.RELEASE, ids.MAP_LAYERS, ids.QUERY_TABLE, ids.LEDGER_TABLE,
                   ids.EXPORT_DOWNLOAD, ids.EVAL_SUMMARY, ids.DOMAIN_WARNING):
        assert needed in outputs, needed


def test_decode_upload_refuses_oversize_and_garbage():
    payload = "data:text/csv;base64," + base64.b64encode(b"lon,lat\n1,2\n").decode()
    assert data_panel.decode_upload(payload, "a.csv", 1000) == b"lon,lat\n1,2\n"
    big = "data:text/csv;base64," + base64.b64encode(b"x" * 3000).decode()
    with pytest.raises(dp.DataError, match=r"over the 0.001 MB upload limit"):
        data_panel.decode_upload(big, "big.csv", 1000)
    with pytest.raises(dp.DataError, match="incomplete"):
        data_panel.decode_upload("no-comma-here", "a.csv", 1000)


def test_domain_from_controls_presets_custom_and_fit():
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    assert data_panel.domain_from_controls("London", [None] * 4, sid, info) == dp.PRESETS["London"]
    box = data_panel.domain_from_controls(data_panel.CUSTOM, [0, 1, 2, 3], sid, info)
    assert box.bounds == (0, 1, 2, 3) and not box.leaky
    with pytest.raises(dp.ParameterError, match="all four sides"):
        data_panel.domain_from_controls(data_panel.CUSTOM, [0, None, 2, 3], sid, info)
    fitted = data_panel.domain_from_controls(data_panel.FIT, [None] * 4, sid, info)
    assert fitted.leaky   # "fit to data" is marked as leaking


def test_sessions_cannot_reach_each_others_uploads(app):
    a, b = new_sid(), new_sid()
    data = dp.load_points(b"lon,lat\n1,2\n3,4\n")
    info = state.put_upload(a, data)
    assert state.points(a, info["fingerprint"]) is not None
    with pytest.raises(LookupError):
        state.points(b, info["fingerprint"])
    with pytest.raises(LookupError):
        state.points(None, info["fingerprint"])


def test_release_key_rebuilds_the_same_release(app, small):
    data, domain = small
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    key = releases.release_key(info["fingerprint"], domain, "ug", {"c": 10.0}, [0.05, 0.95], 0.5, 3)
    rel = releases.release(sid, key, create=True)
    direct = dp.release("ug", data, domain, epsilon=0.5, params={"c": 10.0}, seed=3)
    np.testing.assert_array_equal(rel.counts, direct.counts)     # a demo seed: rebuilt identically
    assert rel.reproducible_demo and not rel.private
    assert releases.key_domain(key) == domain and releases.key_fingerprint(key) == info["fingerprint"]


def test_fresh_release_key_is_one_draw_that_is_never_rebuilt(app, small):
    # seed None: fresh OS entropy; the key carries a random token (no seed), the release exists
    # only as its cached copy, and once gone it is not silently redrawn (that would spend again)
    data, domain = small
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    k1 = releases.release_key(info["fingerprint"], domain, "ug", {"c": 10.0}, [0.05, 0.95], 0.5, None)
    k2 = releases.release_key(info["fingerprint"], domain, "ug", {"c": 10.0}, [0.05, 0.95], 0.5, None)
    assert k1 != k2 and "fresh:" in k1
    with pytest.raises(LookupError, match="release again"):     # only the Release action draws
        releases.release(sid, k1)
    r1 = releases.release(sid, k1, create=True)
    assert r1.private and not r1.reproducible_demo and releases.release(sid, k1) is r1
    assert not np.array_equal(r1.counts, releases.release(sid, k2, create=True).counts)
    # once the cache drops it (expiry or eviction), readers get an error, never a second draw
    services.current().store.delete(releases._release_entry(sid, k1))
    with pytest.raises(LookupError, match="release again"):
        releases.release(sid, k1)


def test_mechanism_controls_follow_the_registry():
    assert controls.epsilon_from_slider(0) == 1.0
    assert controls.epsilon_from_slider(-2) == 0.01
    assert controls.epsilon_from_slider(np.log10(0.37)) == 0.37
    # the slider moves in steps of 0.01 in log10 ε: the steps nearest 0.5 and 3 give them exactly
    assert controls.epsilon_from_slider(-0.30) == 0.5 and controls.epsilon_from_slider(0.48) == 3.0
    assert controls.epsilon_value("0.123") == 0.123 and controls.epsilon_value(10) == 10.0
    for bad in (None, "", "abc", 0, -1, 0.001, 20):
        with pytest.raises(dp.ParameterError, match="type a total ε from 0.01 to 10"):
            controls.epsilon_value(bad)
    assert controls.split_from_weights([20, 80]) == pytest.approx([0.2, 0.8])
    assert controls.split_from_weights([1, 1, 2]) == pytest.approx([0.25, 0.25, 0.5])
    with pytest.raises(dp.ParameterError):
        controls.split_from_weights([0, 0])
    spec = dp.mechanisms()["e2epriv"]
    pids = [{"type": ids.PARAM, "name": p.name} for p in spec.params]
    vals = [p.default for p in spec.params]
    vals[[p.name for p in spec.params].index("variant")] = "abs"
    params = spec.resolve_params(controls.read_params(spec, vals, pids))
    assert params["variant"] == "abs" and params["grid_sizes"] == [30, 40, 50, 60, 70, 80]
    readout = mechanism_panel.split_readout(spec, [0.05, 0.15, 0.8], 0.5)
    assert [c.children for c in readout] == ["dataset size: 5% = ε 0.025",
                                             "grid-size tuning: 15% = ε 0.075", "counts: 80% = ε 0.4"]
    # non-private references are not offered as releases
    assert "leaky" not in dp.mechanisms(private_only=True)


def test_map_layers_and_hover_payload(small):
    data, domain = small
    rel = dp.release("identity", data, domain, epsilon=1.0, params={"grid_size": 32}, seed=0)
    children, hover, legend = map_panel.cell_layers(rel, data, "private")
    assert legend[0].children == "private points per km²" and legend[0].id == ids.MAP_LEGEND_TITLE
    labels = [t.children for t in legend[2].children]
    assert len(set(labels)) == len(labels) and labels[0] == "0" and labels[-1].startswith("≥ ")
    assert hover["kind"] == "cells" and hover["gx"] == 32 and len(hover["noisy"]) == 32 * 32
    assert hover["truth"] == data.histogram(rel.grid).astype(int).ravel().tolist()
    _, _, err_legend = map_panel.cell_layers(rel, data, "error")
    assert "private − true" in err_legend[0].children
    assert map_panel.cell_layers(rel, data, "none")[2] == []


def test_png_is_valid_and_rows_follow_mercator():
    img = render.colourise(np.arange(6.0).reshape(2, 3), 0, 5, render.SEQUENTIAL)
    png = render.png_bytes(img)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", png[16:24])
    assert (w, h) == (3, 2)
    idat = png[png.index(b"IDAT") + 4:png.index(b"IEND") - 8]
    raw = zlib.decompress(idat)
    assert len(raw) == 2 * (1 + 3 * 4)
    # top pixel row shows the northern grid row; rows are monotone north -> south
    rows = render.mercator_rows(25.0, 50.0, 25, 500)
    assert rows[0] == 24 and rows[-1] == 0 and np.all(np.diff(rows) <= 0)
    # at high latitude, northern rows get more pixels than southern ones (Web Mercator stretch)
    assert np.sum(rows == 24) > np.sum(rows == 0)


def test_comparison_rows_match_dp(small):
    data, domain = small
    rel = dp.release("e2epriv", data, domain, epsilon=1.0, seed=4)
    geo = {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"type": "rectangle"},
           "geometry": {"type": "Polygon", "coordinates": [[[-0.2, 51.45], [-0.05, 51.45], [-0.05, 51.55],
                                                            [-0.2, 51.55], [-0.2, 51.45]]]}}]}
    rects = controls.rects_from_geojson(geo)
    assert rects == [dp.Rect(-0.2, 51.45, -0.05, 51.55)]
    rows = queries_panel.comparison_rows(rel, data, [("Q1", rects[0])])
    assert rows[0]["private"] == f"{max(0, round(rel.answer(rects[0]))):,}"    # whole people, >= 0
    assert rows[0]["true"] == f"{data.true_count(rects[0], domain):,}"
    assert rows[0]["abs_error"] == f"{abs(rows[0]['whole'] - data.true_count(rects[0], domain)):,}"
    assert (rows[0]["lo"], rows[0]["hi"]) == rel.interval(rects[0])     # for the CSV, noise only
    # the range for any data: whole people around rel.bounds, holding the true count here
    blo, bhi = rel.bounds(rects)
    assert rows[0]["range"] == f"{math.floor(blo[0]):,} to {math.ceil(bhi[0]):,}"
    assert blo[0] <= data.true_count(rects[0], domain) <= bhi[0]
    fq = dp.release("full_quadtree", data, domain, epsilon=1.0, seed=4)      # from its nodes' draws
    fq_lo, fq_hi = fq.bounds(rects)
    assert queries_panel.comparison_rows(fq, data, [("Q1", rects[0])])[0]["range"] == \
        f"{math.floor(fq_lo[0]):,} to {math.ceil(fq_hi[0]):,}"
    dawa = dp.release("dawa", data, domain, epsilon=1.0, seed=4)
    d_lo, d_hi = dawa.bounds(rects)                                          # its measured groups
    assert queries_panel.comparison_rows(dawa, data, [("Q1", rects[0])])[0]["range"] == \
        f"{math.floor(d_lo[0]):,} to {math.ceil(d_hi[0]):,}"
    empty = dp.Rect(0.14, 51.36, 0.1401, 51.3601)
    row = queries_panel.comparison_rows(rel, data, [("R1", empty)])[0]
    assert row["true"] == "0" and (row["rel_error"] == "n/a (true = 0)" or row["whole"] == 0)
    assert controls.parse_typed("1, 2, 3, 4") == dp.Rect(1, 2, 3, 4)
    with pytest.raises(dp.ParameterError, match="four numbers"):
        controls.parse_typed("1, 2, 3")


def test_ledger_rows_mark_what_is_not_private(small):
    data, domain = small
    rel = dp.release("e2epriv", data, domain, epsilon=0.5, seed=np.random.default_rng(1))
    rows = ledger_panel.ledger_rows(rel)
    assert [r["share"] for r in rows] == ["5%", "15%", "80%"]
    demo = ledger_panel.ledger_rows(dp.release("e2epriv", data, domain, epsilon=0.5, seed=1))
    assert any("fixed seed" in r["step"] and "NOT private" in r["step"] for r in demo)
    leaky = dp.release("leaky", data, domain, epsilon=1.0, seed=1)
    assert any("NOT private" in r["step"] for r in ledger_panel.ledger_rows(leaky))


def test_export_files_hold_only_public_outputs(small):
    data, domain = small
    rel = dp.release("e2epriv", data, domain, epsilon=1.0, seed=np.random.default_rng(2))
    geo, meta = (json.loads(t) for t in export_panel.export_files(rel))
    assert {k for f in geo["features"] for k in f["properties"]} == {
        "row", "col", "noisy_count", "people",            # and the release's stamp (public settings)
        "mechanism", "epsilon", "unit_of_privacy", "software_version"}
    assert all(isinstance(f["properties"]["noisy_count"], int) for f in geo["features"])
    assert "diagnostics" not in meta and "scores" not in json.dumps(meta)
    assert meta["epsilon"] == 1.0 and meta["differentially_private"] is True
    assert "seed" not in json.dumps(meta).replace("workload_seed", "")
    assert meta["unit_of_privacy"] == "add/remove one point" and "dataset_size_public" not in meta
    demo = dp.release("e2epriv", data, domain, epsilon=1.0, seed=2)
    _, dmeta = (json.loads(t) for t in export_panel.export_files(demo))
    assert dmeta["differentially_private"] is False and "NOT private" in dmeta["reproducible_demo"]
    assert sum(e["epsilon"] for e in meta["ledger"]) == pytest.approx(1.0)


def test_evaluation_inputs_and_figures(small):
    assert evaluation_panel.parse_epsilons("1, 0.1; 0.5") == [0.1, 0.5, 1.0]
    for bad in ("", "a, b", "-1"):
        with pytest.raises(dp.ParameterError):
            evaluation_panel.parse_epsilons(bad)
    assert len(evaluation_panel.parse_epsilons(",".join(f"{e / 10}" for e in range(1, 13)))) == 12
    with pytest.raises(dp.ParameterError, match="at most 12 ε values"):   # a visitor's 1,000 ε values
        evaluation_panel.parse_epsilons(",".join(f"{e / 100}" for e in range(1, 1001)))
    data, domain = small
    rows = dp.evaluate.evaluate(data, domain, ["ug", "uniform"], [0.5, 1.0], [0.01, 0.09],
                                n_queries=20, repetitions=2, seed=0)
    setup = {"mechs": ["ug", "uniform"], "eps": [0.5, 1.0], "sizes": [0.01, 0.09], "rho": 20.0}
    store = evaluation_panel.result_store(dp.evaluate.summarise(rows), setup)
    f_eps, f_size = evaluation_panel.figures(store)
    # one band + one median line per mechanism, the bounded relative error by default
    assert len(f_eps.data) == 4 and len(f_size.data) == 4
    assert list(f_eps.data[1].x) == [0.5, 1.0] and list(f_size.data[1].x) == pytest.approx([1.0, 9.0])
    ug = [r for r in store["rows"] if r["mechanism"] == "ug" and r["area_frac"] == 0.01]
    assert list(f_eps.data[1].y) == [r["median_re_sanity"] for r in ug]
    assert f_eps.layout.title.text.startswith("Median bounded relative error (ρ = 20) vs ε")
    f_abs, _ = evaluation_panel.figures(store, "absolute")
    assert list(f_abs.data[1].y) == [r["median_abs_error"] for r in ug]
    assert len(evaluation_panel.table_rows(store)) == 8


def _eval_store(**changes):
    """A result store of one finished group (ug, ε 1, 1%) in a design of 2 x 1 x 2."""
    row = {"mechanism": "ug", "epsilon": 1.0, "area_frac": 0.01, "reps": 3, "n_queries": 300,
           "n_small": 240, "median_re_sanity": 0.25, "q25_re_sanity": 0.2, "q75_re_sanity": 1234.5,
           "median_abs_error": 5.0, "q25_abs_error": 4.0, "q75_abs_error": 24690.0, **changes}
    summary = [{**row, "median_re": float("inf"), "q25_re": float("inf"), "mean_re": float("inf")}]
    return evaluation_panel.result_store(summary, {"mechs": ["ug", "identity"], "eps": [1.0],
                                                   "sizes": [0.01, 0.09], "rho": 20.0})


def test_evaluation_table_and_csv_explain_every_empty_cell_in_words():
    store = _eval_store()
    assert "median_re" not in store["rows"][0]          # the unbounded RE (inf here) is not kept
    rows = evaluation_panel.table_rows(store)
    ug, identity = (dp.mechanisms()[m].label for m in ("ug", "identity"))
    assert [(r["mechanism"], r["area"]) for r in rows] == [(ug, 1.0), (ug, 9.0), (identity, 1.0), (identity, 9.0)]
    done = rows[0]
    assert (done["bounded"], done["bounded_iqr"], done["absolute"], done["absolute_iqr"]) == \
        ("0.25", "0.2 – 1,234", "5", "4 – 24,690")
    assert (done["small"], done["runs"]) == ("80%", 3)
    assert all(rows[1][k] == evaluation_panel.NOT_RUN for k in ("bounded", "absolute_iqr", "small"))
    names = [c["name"] for c in evaluation_panel.table_columns(store["rho"])]
    assert "bounded relative error, ρ = 20 (median)" in names and "queries with < 20 points" in names
    one_run = evaluation_panel.table_rows(_eval_store(reps=1, median_abs_error=float("nan")))[0]
    assert one_run["bounded_iqr"] == "one run: no spread"
    assert one_run["absolute"] == evaluation_panel.NOT_COMPUTABLE
    text = json.dumps(rows + [one_run]).lower()
    assert "inf" not in text.replace("infinite", "") and "nan" not in text
    lines = evaluation_panel.csv_text(store).splitlines()
    assert lines[0].startswith("mechanism,epsilon,query area (% of domain),"
                               "median bounded relative error (rho = 20),")
    assert "median absolute error (points)" in lines[0] and lines[0].endswith(",runs,note")
    assert lines[1] == f"{ug},1.0,1.0,0.25,0.2,1234.5,5.0,4.0,24690.0,80.0,3,"
    assert lines[2].endswith(",,,,,,,,," + evaluation_panel.NOT_RUN) and len(lines) == 5
    assert "20%" not in evaluation_panel.note(store) and "80% of the queries" in evaluation_panel.note(store)


def test_a_release_map_png_is_drawn_once_per_key(small, monkeypatch):
    # a second click on "Map (PNG)" for the same stored release gets the same bytes undrawn; the
    # last KEEP keys are kept, the oldest dropped first
    data, domain = small
    rel = dp.release("ug", data, domain, 1.0, seed=np.random.default_rng(3))
    drawn = []                       # a stand-in drawing: each call gives new bytes
    monkeypatch.setattr(map_image, "map_png", lambda r: drawn.append(r) or b"\x89PNG\r\n\x1a\n" + bytes([len(drawn)]))
    monkeypatch.setattr(map_image, "_KEPT", type(map_image._KEPT)())
    first = map_image.map_png_of("k0", rel)
    assert map_image.map_png_of("k0", rel) == first and len(drawn) == 1
    for i in range(1, map_image.KEEP + 1):
        map_image.map_png_of(f"k{i}", rel)
    assert list(map_image._KEPT) == [f"k{i}" for i in range(1, map_image.KEEP + 1)]
    map_image.map_png_of("k0", rel)
    assert len(drawn) == map_image.KEEP + 2 and first[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_map_png_is_a_figure_for_a_report(small):
    # issue 44: the PNG was 768 x 453 with no title, ε, mechanism, outline or units. Now 1600 px
    # wide, titled with the mechanism, ε, unit of privacy, date and box; the box outlined; the
    # colour bar in people per km²; an attribution line; a non-private release says so
    data, domain = small
    rel = dp.release("ug", data, domain, 1.0, seed=np.random.default_rng(3))
    png = map_image.map_png(rel)
    width, height = struct.unpack(">II", png[16:24])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and width == 1600 and height > 600
    fig = map_image.map_figure(rel)
    title = fig._suptitle.get_text()
    assert rel.spec.label in title and "ε = 1 " in title and rel.privacy_level in title
    assert rel.released_at[:10] in title and domain.name in title and "NOT" not in title
    ax, bar = fig.axes
    outline = [p for p in ax.patches if p.get_label() == "box"][0]
    assert outline.get_bbox().bounds == pytest.approx((domain.west, domain.south, domain.width, domain.height))
    assert bar.get_ylabel() == map_image.UNITS and "km²" in map_image.UNITS
    assert any(f"{map_image.DISTRIBUTION} " in t.get_text() for t in fig.texts)
    demo = dp.release("ug", data, domain, 1.0, seed=1)             # a fixed seed: not private
    assert "NOT differentially private" in map_image.title_lines(demo)[0]


def test_evaluation_figures_keep_titles_clear_and_name_their_png():
    store = _eval_store()
    fig, _ = evaluation_panel.figures(store)
    assert fig.layout.margin.t >= fig.layout.title.pad.t + 30 and fig.layout.title.xanchor == "left"
    assert fig.layout.yaxis.type == "log"
    # the title names the error, the y axis has no title of its own to run into it (issue 44)
    assert fig.layout.title.text.startswith("Median bounded relative error (ρ = 20) vs ε (1% queries)")
    assert not fig.layout.yaxis.title.text and "drawn at" not in fig.layout.xaxis.title.text
    # errors of exact answers (0, or float dust such as 9.46e-12) no longer stretch the log axis
    # down to 1e-13: they are drawn at the metric's floor, and the title says so
    for metric, tiny in (("absolute", 0.0), ("bounded", 9.46e-12)):
        field = "q25_abs_error" if metric == "absolute" else "q25_re_sanity"
        floored = evaluation_panel.figures(_eval_store(**{field: tiny}), metric)[0]
        floor = evaluation_panel.METRICS[metric]["floor"]
        assert floored.layout.yaxis.type == "log" and floor / 10 <= 10 ** floored.layout.yaxis.range[0] <= floor
        assert min(v for t in floored.data for v in t.y if v is not None) == floor
        assert f"under {floor:g} (exact answers) drawn at {floor:g}" in floored.layout.xaxis.title.text
    assert evaluation_panel.figure_filenames(store, "bounded") == (
        "evaluation_bounded_relative_error_rho20_vs_epsilon", "evaluation_bounded_relative_error_rho20_vs_query_size")
    config = evaluation_panel.graph_config("x")
    assert config["displaylogo"] is False and config["showSendToCloud"] is False
    assert config["toImageButtonOptions"] == {"format": "png", "filename": "x", "scale": 2}


def test_shifted_grids_explain_map_series_and_marking(small):
    data, domain = small
    spec = dp.mechanisms()["shifted_grids"]
    params = spec.resolve_params({"delta_km": 0.5, "bin_km": 2.0})
    # m = floor(w / δ) = 4 grids; equivalent standard ε is m·ε/2 and m·ε/4 (spec 001 section 1)
    assert spec.explain(domain, params, 1.0).startswith("m = 4 grids · equivalent standard ε: 2 for "
                                                        "relocation, 1 for presence")
    assert not spec.comparable and dp.mechanisms()["htf"].comparable
    rel = dp.release("shifted_grids", data, domain, 1.0, params=params, seed=1)
    grid, regions, counts, _, _ = map_panel.structure(rel, series=2)
    r2, c2 = rel.grid_regions(1)
    assert np.array_equal(regions, r2) and np.array_equal(counts, c2)
    children, hover, _ = map_panel.cell_layers(rel, data, "private", series=2)
    assert hover["kind"] == "regions"
    rows = dp.evaluate.evaluate(data, domain, ["shifted_grids", "ug"], [1.0], [0.04], n_queries=10,
                                repetitions=1, params={"shifted_grids": params})
    setup = {"mechs": ["shifted_grids", "ug"], "eps": [1.0], "sizes": [0.04], "rho": 20.0}
    fig, _ = evaluation_panel.figures(evaluation_panel.result_store(dp.evaluate.summarise(rows), setup))
    names = [t.name for t in fig.data if t.name]
    assert any("not comparable at equal ε" in n for n in names)
    assert not any("not comparable" in n for n in names if n.startswith("Uniform grid"))


def test_euler_rows_truth_and_stages():
    regions, domain = dp.load_region_sample("home_ranges_3k")
    rel = dp.release("euler", regions, domain, epsilon=1.0, seed=2)
    grid, cells, counts = rel.regions()
    truth = map_panel.region_truth(regions, grid, cells)
    assert len(truth) == grid.n_cells and truth.sum() >= regions.n   # a region meets >= 1 face
    rect = dp.Rect(116.35, 39.85, 116.45, 39.95)
    row = queries_panel.comparison_rows(rel, regions, [("R1", rect)], "round")[0]
    snapped = rel.snap(rect)
    assert row["true"] == f"{regions.true_count(snapped, domain):,}"
    assert row["true_drawn"] == f"{regions.true_count(rect, domain):,}"
    assert row["raw"] == round(rel.answer_raw(rect), 1) and row["private"] == f"{max(0, round(rel.answer(rect))):,}"
    exact = queries_panel.comparison_rows(rel, regions, [("R1", rect)], "exact")[0]
    assert exact["private"] == exact["true"] and exact["abs_error"] == "0"
    assert [c["id"] for c in queries_panel.columns_for(rel)][2] == "snapped"
    fig = map_panel.violations_figure(rel)
    assert [t.name for t in fig.data] == ["C1", "C2", "C3"]
    assert fig.data[0].y[list(fig.data[0].x).index("round")] == 0   # Round leaves no violation
    assert map_panel.stage_status(rel, "linprog").startswith("linprog: 0 violated")


def test_interactive_panel_rows_and_figures(small):
    from components import interactive_panel
    data, domain = small
    session = dp.interactive.QuerySession(data, domain, sigma_m=100, planned_queries=3, seed=2)
    for rect in ([-0.2, 51.45, -0.05, 51.55], [-0.1, 51.4, 0.0, 51.5]):
        result = session.ask(dp.Rect(*rect))
    rows = [interactive_panel.table_row(h) for h in session.history]
    assert [r["k"] for r in rows] == [1, 2]
    assert rows[1]["true_count"] == data.true_count(dp.Rect(-0.1, 51.4, 0.0, 51.5))
    fig = interactive_panel.session_figure(session.history)
    assert [t.name for t in fig.data][:3] == ["this session", "one-shot baseline", "single full-budget release"]
    hist = interactive_panel.saving_histogram(result)
    assert hist.data[0].x.max() <= 100 and hist.data[0].x.min() >= 0
    text = " ".join(str(d.children) for d in interactive_panel.guarantee_text(100.0))
    eps = session.privacy_statement()
    assert f"100 m apart: ε = {significant(eps[100.0], trim=True)}" in text   # the session's own statement
    assert not re.search(r"\de[+-]\d", text)                             # never in e-notation


@pytest.mark.parametrize("value,text", [(100, "100"), (0.0123, "0.012"), (123456, "120,000"),
                                        (1.0, "1"), (7.25, "7.2"), (2e-5, "0.00002")])
def test_numbers_are_written_for_people(value, text):
    assert significant(value, trim=True) == text
    assert significant(1.0) == "1.0" and significant(0) == "0"


def test_fit_to_data_works_for_regions_and_is_marked_leaky():
    sid = new_sid()
    info = state.use_sample(sid, "home_ranges_3k")
    regions, _ = state.sample("home_ranges_3k")
    box = data_panel.domain_from_controls(data_panel.FIT, [None] * 4, sid, info)
    w, s, e, n = regions.bounds
    assert box.leaky and box.west <= w and box.east >= e and box.south <= s and box.north >= n


def test_outlines_are_one_vector_path_around_every_region(small):
    data, domain = small
    rel = dp.release("ug", data, domain, epsilon=1.0, seed=1)
    grid, regions, _ = rel.regions()
    pane = map_panel.outlines(grid, regions)
    assert pane.style["pointerEvents"] == "none"   # borders never catch the mouse
    layer = pane.children
    rings = layer.data["geometry"]["coordinates"]
    assert layer.data["geometry"]["type"] == "MultiPolygon" and len(rings) == len(regions)
    w, s, e, n = rel.cell_bounds().reshape(-1, 4)[0]
    assert rings[0][0] == [[round(w, 7), round(s, 7)], [round(e, 7), round(s, 7)], [round(e, 7), round(n, 7)],
                           [round(w, 7), round(n, 7)], [round(w, 7), round(s, 7)]]


def test_account_view_and_session_charge():
    from components import interactive_panel
    acc = dp.Accountant(total=2)
    acc.charge("UG", epsilon=1.0, note="fresh randomness")
    s = interactive_panel.snap_allowance(100.0, 10, "pm-dist")
    assert 0 < s < 5                                                  # metres of rounding allowance
    rho = interactive_panel.session_charge(100.0, 10, "pm-dist")
    assert rho == pytest.approx((100.0 + s) ** 2 / (2 * 100.0 ** 2))  # ρ_B·(r + s)², r = σ = 100 m
    text = " ".join(str(c.children) for c in ledger_panel.account_summary(acc, 0.5))
    assert "Spent ε = 1 of 2" in text and "Next release: ε = 0.5, leaving 0.5" in text
    text = " ".join(str(c.children) for c in ledger_panel.account_summary(acc, 1.5))
    assert "would exceed the total" in text
    acc.charge("session", rho=0.01)
    text = " ".join(str(c.children) for c in ledger_panel.account_summary(acc, None))
    assert "Interactive sessions: ε = " in text and "Spent ε = 1 of 2" in text
    rows = ledger_panel.account_rows(acc)
    assert [r["what"] for r in rows] == ["session", "UG"] and rows[0]["epsilon"] == "ρ = 0.01 (zCDP)"


def test_points_left_out_by_the_user_bound():
    user = ["busy"] * 50 + [f"u{i}" for i in range(10)] + [None, " "]
    data = dp.PointData(np.linspace(0, 1, 62), np.linspace(0, 1, 62), user=user)
    assert data_panel.points_left_out(data, 5) == 47 and data_panel.points_left_out(data, 50) == 2
    assert "at most 5 points per user" in str(data_panel.level_text(5, 45, 60)[0].children)
    assert "Event-level" in str(data_panel.level_text(None)[0].children)


def test_next_release_cost_is_what_the_account_will_charge():
    from dp.mechanisms import shifted_grids
    london = dp.PRESETS["London"]
    store = data_panel.domain_store("London", [None] * 4, "s", {})     # what the data panel publishes
    assert controls.domain_from_store(store) == london
    assert controls.next_cost(1.0, "ug", [], [], store) == 1.0
    m = shifted_grids.plan(london, dp.mechanisms()["shifted_grids"].resolve_params({}))[1].m
    cost = controls.next_cost(1.0, "shifted_grids", [], [], store)
    assert m > 1 and cost == pytest.approx(m / 4)          # add/remove equivalent (spec 001 §1)
    incomplete = data_panel.domain_store(data_panel.CUSTOM, [None] * 4, "s", {})
    with pytest.raises(dp.ParameterError, match="all four sides"):     # the message is kept
        controls.domain_from_store(incomplete)
    assert controls.next_cost(1.0, "ug", [], [], incomplete) is None


def test_nice_ticks_are_round_distinct_and_inside_the_range():
    assert render.nice_ticks(0, 0.23) == [0, 0.05, 0.1, 0.15, 0.2]
    assert render.nice_ticks(0, 12345) == [0, 5000, 10000]
    assert render.nice_ticks(-0.23, 0.23) == [-0.2, -0.1, 0, 0.1, 0.2]
    assert render.nice_ticks(3, 3) == [3]
    assert [render.tick_label(v, 0.05) for v in (0, 0.05, 0.1, 0.15)] == ["0", "0.05", "0.1", "0.15"]
    assert render.tick_label(2000, 1000) == "2,000" and render.tick_label(-0.1, 0.1) == "−0.1"
    rng = np.random.default_rng(0)
    for _ in range(2000):
        lo = float(rng.choice([0.0, rng.normal(0, 10 ** rng.uniform(-6, 6))]))
        hi = lo + 10 ** rng.uniform(-9, 7)
        ticks = render.nice_ticks(lo, hi)
        step = render.nice_step(hi - lo)
        labels = [render.tick_label(v, step) for v in ticks]
        assert 2 <= len(ticks) <= 6 and len(set(labels)) == len(labels)
        assert lo - 1e-9 * step <= ticks[0] and ticks[-1] <= hi + 1e-9 * step
        mantissa = step / 10 ** np.floor(np.log10(step) + 1e-9)
        assert any(np.isclose(mantissa, m) for m in (1, 2, 5))


def test_legend_marks_the_cap_and_its_labels_fit_the_bar():
    rng = np.random.default_rng(1)
    for scale in (0.23, 7.0, 4321.0, 2.5e6):
        values = rng.gamma(0.5, scale, 5000)
        leg = render.legend_scale(values)
        labels = [t for _, t in leg.ticks]
        assert leg.capped_top and labels[-1].startswith("≥ ") and not leg.capped_bottom
        assert len(set(labels)) == len(labels) and labels[0] == "0"
        assert leg.ticks[0][0] == 0 and leg.ticks[-1][0] == 1
        assert leg.vmax >= np.percentile(values, 99)                  # rounded up, never down
        assert sum(len(t) + 2 for t in labels) * render.CHAR_PX <= render.LEGEND_PX
    uncapped = render.legend_scale(np.linspace(0, 0.2, 101))
    assert not uncapped.capped_top and uncapped.ticks[-1][1] == "0.2"
    errors = render.legend_scale(rng.normal(0, 30, 5000), diverging=True)
    assert errors.vmin == -errors.vmax and errors.ticks[0][1].startswith("≤ −")
    assert render.legend_scale(np.zeros(10)).ticks[-1][1] == "1"      # empty layer: 0 to 1
    dusty = render.legend_scale(np.r_[-9e-14, np.linspace(0, 0.2, 100)])  # painting's float dust
    assert not dusty.capped_bottom and dusty.ticks[0][1] == "0"


def test_legend_labels_never_run_into_each_other():
    # the review's case (issue 26): capped at 1,000 with a tick every 200, "800" (centred on its
    # tick, 40 px from the bar's end) ran under "≥ 1,000" (ending at the bar's end)
    assert not render.labels_fit(["0", "200", "400", "600", "800", "≥ 1,000"])
    values = np.r_[np.linspace(0, 950, 990), np.full(10, 5000.0)]
    labels = [t for _, t in render.legend_scale(values).ticks]
    assert labels[-1] == "≥ 1,000" and "800" not in labels and len(labels) >= 3
    # placed as the legend places them, neighbours keep a character apart
    n, w = len(labels) - 1, render.LEGEND_PX
    spans = [(0, len(t) * render.CHAR_PX) if i == 0 else (w - len(t) * render.CHAR_PX, w) if i == n
             else (w * i / n - len(t) * render.CHAR_PX / 2, w * i / n + len(t) * render.CHAR_PX / 2)
             for i, t in enumerate(labels)]
    assert all(b[0] - a[1] >= render.CHAR_PX for a, b in zip(spans, spans[1:]))


def test_rectangles_are_fitted_to_the_public_domain(small):
    _, domain = small
    inside = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    assert controls.fit_to_domain(inside, domain) == (inside, False)
    part = dp.Rect(0.1, 51.6, 0.3, 51.9)
    assert controls.fit_to_domain(part, domain) == (dp.Rect(0.1, 51.6, 0.15, 51.65), True)
    with pytest.raises(dp.ParameterError, match="wholly outside the public domain"):
        controls.fit_to_domain(dp.Rect(2.0, 48.8, 2.4, 48.9), domain)      # Paris, not London
    with pytest.raises(dp.ParameterError, match="wholly outside"):
        controls.fit_to_domain(dp.Rect(0.15, 51.4, 0.2, 51.5), domain)     # touches the edge only
    with pytest.raises(dp.ParameterError, match="no area"):
        controls.fit_to_domain(dp.Rect(0, 51.5, 0, 51.6), domain)
    queries, notes = queries_panel.queries_in(domain, [("Q1", part), ("Q2", dp.Rect(2.0, 48.8, 2.4, 48.9))])
    assert queries == [queries_panel.Query("Q1", dp.Rect(0.1, 51.6, 0.15, 51.65), True)]
    assert notes == ["Q2 is not answered: the rectangle lies wholly outside the public domain "
                     "(-0.35, 51.35, 0.15, 51.65), where nothing is counted."]
    assert [plural(n, "row") for n in (0, 1, 2)] == ["rows", "row", "rows"]
    assert count_of(1, "point") == "1 point" and count_of(2000, "point") == "2,000 points"


def test_query_rows_lead_with_the_range_and_the_csv_has_no_true_count(small):
    data, domain = small
    rel = dp.release("ug", data, domain, epsilon=1.0, seed=2)
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)                           # 12% of the box
    q = queries_panel.Query("R1", rect, True)
    row = queries_panel.comparison_rows(rel, data, [q])[0]
    lo, hi = rel.bounds([rect])
    assert row["range"] == f"{math.floor(lo[0]):,} to {math.ceil(hi[0]):,}"
    assert row["bounds"].endswith("(clipped to the domain)") and row["true"] == f"{data.true_count(rect, domain):,}"
    shown = [c["id"] for c in queries_panel.columns_for(rel)]
    assert shown.index("range") == shown.index("private") + 1 and "interval" not in shown
    text = queries_panel.csv_text(queries_panel.public_rows(rel, [q]))
    header, line = text.strip().splitlines()
    assert header.split(",") == list(queries_panel.CSV_FIELDS)
    values = dict(zip(header.split(","), line.split(",")))
    assert float(values["private_answer"]) == pytest.approx(rel.answer(rect), abs=5e-4)
    assert int(values["private_people"]) == max(0, round(rel.answer(rect)))
    assert values["clipped_to_domain"] == "yes"
    assert (float(values["count_range95_any_data_low"]), float(values["count_range95_any_data_high"])) \
        == (math.floor(lo[0]), math.ceil(hi[0]))
    assert float(values["interval95_noise_only_low"]) == pytest.approx(rel.interval(rect)[0], abs=5e-4)
    assert values["differentially_private"] == "yes"
    demo_line = queries_panel.csv_text(queries_panel.public_rows(rel, [q]), private=False)
    assert demo_line.strip().splitlines()[1].endswith(",no")        # a fixed-seed demo says so
    assert "true" not in text.lower()


def test_a_release_of_every_cell_in_tree_order_is_painted_where_its_cells_are(small):
    """The full quadtree releases every base cell, in its tree's (Z) order: the map's image, its
    hover readout and the compare map must place each count on its own cell, not read the list
    as rows (a scrambled map before this test)."""
    from components import compare_panel, map_panel, render
    from dp.mechanisms.leaves import paint
    from dp.whole_counts import whole_nonnegative
    data, domain = small
    rel = dp.release("full_quadtree", data, domain, epsilon=1.0, params={"base_cells": 64},
                     seed=np.random.default_rng(4))
    grid, regions, counts = rel.regions()
    assert len(regions) == grid.n_cells and not render.is_row_major(grid, regions)
    expected = paint(grid.shape, regions, counts)              # order-free painting
    g, r, c, _, _ = map_panel.structure(rel)
    assert render.is_row_major(g, r)
    np.testing.assert_allclose(render.on_grid(g, r, c), expected, atol=1e-9)
    np.testing.assert_allclose(render.on_grid(grid, regions, counts), expected, atol=1e-9)
    _, hover, _ = map_panel.cell_layers(rel, None, "private")
    assert hover["kind"] == "cells"
    people = paint(grid.shape, regions, whole_nonnegative(counts))
    assert np.array_equal(np.reshape(hover["noisy"], grid.shape), people)
    area = render.region_km2(grid, regions)[0]
    np.testing.assert_allclose(compare_panel.density(rel), people / area, atol=1e-9)


@pytest.mark.parametrize("values", [[2.1, 8.7], [0.013, 0.4], [3, 45000], [1.5, 1.6], [1e-3, 1e6],
                                    [0.05, 0.05, 0.07]])
def test_log_axis_ticks_are_few_distinct_round_and_span_the_values(values):
    """Issue 26: log axes ticked '2 3 … 9' or '5, 2, 0.1, 5, 2'. Ticks are 1, 2, 5 × 10^k, at most
    7, labelled once each, from at or below the smallest value to at or above the largest."""
    from components import render
    vals, text = render.log_ticks(values)
    assert 2 <= len(vals) <= 7 and len(set(text)) == len(text)
    assert vals[0] <= min(values) and vals[-1] >= max(values)
    for v, t in zip(vals, text):
        mantissa = v / 10 ** np.floor(np.log10(v) + 1e-9)
        assert round(mantissa, 6) in (1, 2, 5) and float(t.replace(",", "")) == pytest.approx(v)


def test_evaluation_chart_axes_are_ticked_at_the_values_run():
    """x ticks at the ε values run; y ticks round and distinct (values 3.2 to 52: 2 to 100)."""
    rows = [{"mechanism": "ug", "epsilon": e, "area_frac": 0.01,
             **{f"{q}_re_sanity": v * k for q, k in (("q25", 0.8), ("median", 1.0), ("q75", 1.3))}}
            for e, v in ((0.1, 40.0), (0.5, 9.0), (1.0, 4.0))]
    fig = evaluation_panel._band_figure({"rho": 20.0, "rows": rows}, "bounded", "epsilon",
                                        "area_frac", 0.01, "t", "ε")
    assert list(fig.layout.xaxis.tickvals) == [0.1, 0.5, 1.0]
    assert list(fig.layout.xaxis.ticktext) == ["0.1", "0.5", "1"]
    assert fig.layout.yaxis.type == "log"
    assert list(fig.layout.yaxis.ticktext) == ["2", "5", "10", "20", "50", "100"]


def test_a_release_without_a_range_says_so_and_labels_its_noise_interval():
    # region data (Euler) has no range for any data; its noise interval is shown in the same
    # cell, said to be the noise alone, never as the range
    regions, domain = dp.load_region_sample("home_ranges_3k")
    rel = dp.release("euler", regions, domain, epsilon=1.0, seed=1)
    rect = dp.Rect(116.35, 39.85, 116.45, 39.95)
    row = queries_panel.public_rows(rel, [queries_panel.Query("R1", rect)])[0]
    lo, hi = rel.interval(rect)
    assert row["range"] == ("none: regions are counted where they overlap, not per cell "
                            f"(the noise alone: {math.floor(lo):,} to {math.ceil(hi):,})")   # whole, as the ranges
