"""Unit tests for the compare panel's pure helpers and the shared ones it moved out of other panels."""
from __future__ import annotations

import json

import numpy as np
import pytest

import dp
from dp.whole_counts import whole_nonnegative
from components import compare_panel, controls, ids, render
from server import releases, state
from helpers import new_sid

E2E, PRIVTREE = dp.mechanisms()["e2epriv"].label, dp.mechanisms()["privtree"].label


def test_the_panel_registers_its_callbacks(app):
    outputs = " ".join(app.callback_map)
    for needed in (ids.COMPARE_RELEASE, ids.COMPARE_TABLE, ids.COMPARE_MAPS, ids.COMPARE_COST,
                   ids.COMPARE_MAP_A, ids.COMPARE_MAP_B):
        assert needed in outputs, needed


def test_summary_line_counts_wins_and_gives_median_errors():
    # errors A: 3, 10, 4; B: 1, 2, 5
    assert compare_panel.summary_line([10, 50, 100], [12, 58, 99], [13, 60, 104], E2E, PRIVTREE) == \
        "B (PrivTree) was closer on 2 of 3 rectangles, A (E2EPriv) on 1; median absolute error A 4, B 2."
    # errors A: 1, 6, 0, 1; B: 1, 0, 3, 1 -> one win each, two ties
    assert compare_panel.summary_line([10, 20, 30, 40], [12, 26, 33, 40], [11, 26, 30, 41]) == \
        "A and B were each closer on 1 of 4 rectangles, tied on 2; median absolute error A 1, B 1."
    assert compare_panel.summary_line([7.4], [4], [5]) == \
        "B was closer on 1 of 1 rectangle, A on 0; median absolute error A 2, B 1."
    assert compare_panel.summary_line([5, 6], [5, 6], [5, 7]) == \
        "A and B were equally close on all 2 rectangles; median absolute error A 0.5, B 0.5."
    assert compare_panel.summary_line([], [], []).startswith("Draw or type rectangles in step 4")


def test_answer_rows_show_whole_people_and_judge_what_they_show():
    """10.04 and 9.97 both show as 10 people: a tie, not "B closer" on hidden decimals; a
    negative answer shows as 0 people; thousands get separators."""
    rows = compare_panel.answer_rows(["Q1", "R1", "R2"], np.array([10.04, 3.0, -1.6]),
                                     np.array([9.97, 1.0, 1234.4]), np.array([10, 2, 1000]))
    assert rows == [
        {"id": "Q1", "a": "10", "b": "10", "true": "10", "err_a": "0", "err_b": "0", "closer": "tie"},
        {"id": "R1", "a": "3", "b": "1", "true": "2", "err_a": "1", "err_b": "1", "closer": "tie"},
        {"id": "R2", "a": "0", "b": "1,234", "true": "1,000", "err_a": "1,000", "err_b": "234", "closer": "B"}]
    assert [compare_panel.closer(*e) for e in ((1, 2), (2, 1), (1, 1))] == ["A", "B", "tie"]


def test_answers_come_from_both_releases_and_the_true_counts(small):
    data, domain = small
    a = dp.release("e2epriv", data, domain, epsilon=1.0, seed=1)
    b = dp.release("privtree", data, domain, epsilon=1.0, seed=1)
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    labels, ans_a, ans_b, truth = compare_panel.answers(a, b, data, [("R1", rect)])
    assert labels == ("R1",)
    assert ans_a[0] == a.answer(rect) and ans_b[0] == b.answer(rect)
    assert truth[0] == data.true_count(rect, domain)
    assert compare_panel.answers(a, b, data, [])[0] == ()


def test_table_columns_name_the_mechanisms():
    cols = compare_panel.table_columns(E2E, PRIVTREE)
    assert [c["id"] for c in cols] == ["id", "a", "b", "true", "err_a", "err_b", "closer"]
    assert cols[1]["name"] == f"A: {E2E}" and cols[2]["name"] == f"B: {PRIVTREE}"
    assert cols[3]["name"] == "True count (owner only)"


def test_options_are_comparable_mechanisms_of_the_same_kind_but_the_current_one():
    values = [o["value"] for o in compare_panel.compare_options("e2epriv")]
    assert "e2epriv" not in values and "privtree" in values and "ug" in values
    assert not {"shifted_grids", "bounded_grid", "euler", "leaky", "best_nonpriv"} & set(values)
    assert compare_panel.compare_options("euler") == []            # the only one for regions
    assert compare_panel.compare_options("shifted_grids") == []    # its ε protects another unit
    assert "different unit" in compare_panel.no_options_reason(dp.mechanisms()["shifted_grids"])
    assert "nothing to compare" in compare_panel.no_options_reason(dp.mechanisms()["euler"])
    opts = compare_panel.compare_options("e2epriv")
    assert compare_panel.default_pick(opts, "ug", "points") == "ug"            # kept
    rec = dp.recommend("points").name
    assert compare_panel.default_pick(opts, "e2epriv", "points") == rec         # the recommended one
    assert compare_panel.default_pick(compare_panel.compare_options(rec), None, "points") == "identity"
    assert compare_panel.default_pick([], None, "regions") is None


def test_cost_line_says_what_the_second_release_spends_or_that_it_is_refused():
    assert compare_panel.cost_line(1.0, 2.0, 10.0) == (
        "This is a second release of the same data: it spends another ε = 1 from the dataset's "
        "budget, leaving 7 of 10.")
    assert compare_panel.cost_line(1.0, 2.0, 2.5).startswith(
        "Another ε = 1 would take this dataset past its total budget (0.5 of 2.5 left): the "
        "comparison will be refused.")


def test_missing_says_why_nothing_is_shown(small):
    info = state.use_sample(new_sid(), "small_city_5k")
    key = releases.release_key(info["fingerprint"], small[1], "e2epriv", {}, [0.05, 0.15, 0.8], 1.0, 1)
    rinfo = {"key": key}
    assert compare_panel.missing(info, None, None).startswith("No release of the data now loaded yet")
    assert compare_panel.missing(None, rinfo, None).startswith("No release of the data now loaded yet")
    other = {**info, "fingerprint": "another"}
    assert compare_panel.missing(other, rinfo, {"base": key}).startswith("The loaded data changed")
    assert compare_panel.missing(info, rinfo, None).startswith("Pick a second mechanism")
    assert compare_panel.missing(info, rinfo, {"base": "an older release"}).startswith("Pick a second")
    assert compare_panel.missing(info, rinfo, {"base": key}) is None


def test_comparison_key_keeps_data_domain_epsilon_seed_and_k(small):
    data, domain = small
    key = releases.release_key(data.fingerprint, domain, "e2epriv", {}, [0.05, 0.15, 0.8], 0.5, 7, 3)
    fp, dom, mech, params, split, eps, tag, k = json.loads(releases.comparison_key(key, "ug"))
    spec = dp.mechanisms()["ug"]
    assert (fp, dom, eps, tag, k) == (data.fingerprint, domain.to_dict(), 0.5, 7, 3)
    assert (mech, split) == ("ug", list(spec.default_split)) and params == spec.resolve_params({})
    fresh = releases.release_key(data.fingerprint, domain, "e2epriv", {}, [0.05, 0.15, 0.8], 0.5, None)
    first, second = releases.comparison_key(fresh, "ug"), releases.comparison_key(fresh, "ug")
    assert first != second and json.loads(first)[6].startswith("fresh:")


def test_a_comparison_release_is_dps_release_and_is_charged(app, small):
    data, domain = small
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    with app.server.test_request_context():
        key = releases.release_key(info["fingerprint"], domain, "e2epriv", {}, [0.05, 0.15, 0.8], 1.0, 1)
        releases.release(sid, key, create=True)
        rel = releases.release(sid, releases.comparison_key(key, "privtree"), create=True)
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    assert rel.answer(rect) == dp.release("privtree", data, domain, epsilon=1.0, seed=1).answer(rect)
    acc = state.account(sid, info["fingerprint"])
    assert acc.spent == 2.0 and [c.label for c in acc.charges] == [E2E, PRIVTREE]


def test_density_is_people_per_km2_on_the_base_grid(small):
    data, domain = small
    rel = dp.release("ug", data, domain, epsilon=1.0, seed=2)
    grid, regions, counts = rel.regions()
    image = compare_panel.density(rel)
    assert image.shape == grid.shape and image.min() >= 0
    area = render.region_km2(grid, regions)
    assert area.sum() == pytest.approx(render.cell_km2(grid) * grid.n_cells)
    assert np.allclose(image.ravel(), whole_nonnegative(counts) / area)    # as the main map
    tree = dp.release("privtree", data, domain, epsilon=1.0, seed=2)
    assert compare_panel.density(tree).shape == tree.regions()[0].shape


def test_labelled_rects_name_drawn_and_added_rectangles_like_the_queries_panel():
    geo = {"features": [{"geometry": {"type": "Polygon", "coordinates": [
        [[0, 0], [1, 0], [1, 2], [0, 2], [0, 0]]]}}]}
    assert controls.labelled_rects(geo, [[3, 4, 5, 6], [7, 8, 9, 10]]) == [
        ("Q1", dp.Rect(0, 0, 1, 2)), ("R1", dp.Rect(3, 4, 5, 6)), ("R2", dp.Rect(7, 8, 9, 10))]
    assert controls.labelled_rects(None, None) == []
