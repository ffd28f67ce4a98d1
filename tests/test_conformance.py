"""One conformance suite over the registry: every mechanism, Euler included, gets these checks
for free (scikit-learn's `parametrize_with_checks` is the model). A new mechanism is one module
plus one registry line; this file then tests its contract without a line of its own."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import dp
from dp.mechanisms.base import UNITS, Capabilities
from helpers import all_keys

MECHANISMS = sorted(dp.mechanisms())
EPSILON = 1.0
# keys that would carry values read from the data, a seed or owner-only diagnostics
FORBIDDEN_KEYS = {"seed", "diagnostics", "true_count", "true_counts", "n_points", "dataset_size",
                  "points_clamped_into_box", "scores", "probabilities", "tuning_errors"}


@pytest.fixture(scope="module")
def datasets():
    points, pdom = dp.load_sample("small_city_5k")
    regions, rdom = dp.load_region_sample("home_ranges_3k")
    return {"points": (points, pdom), "regions": (regions, rdom)}


@pytest.fixture(scope="module")
def releases(datasets):
    """name -> two releases with the same fixed seed (for determinism) and one fresh, made on
    first use and kept for the module."""
    made = {}

    class Releases(dict):
        def __missing__(self, name):
            spec = dp.mechanisms()[name]
            data, domain = datasets[spec.data_kind]
            made[name] = tuple(dp.release(name, data, domain, EPSILON, seed=s)
                               for s in (11, 11, None))
            return made[name]
    return Releases()


def _rects(domain: dp.Domain) -> list:
    """A few public query rectangles: the whole box, a quarter, a small central one."""
    w, s, e, n = domain.bounds
    cx, cy = (w + e) / 2, (s + n) / 2
    return [dp.Rect(w, s, e, n), dp.Rect(w, s, cx, cy),
            dp.Rect(cx - (e - w) / 20, cy - (n - s) / 20, cx + (e - w) / 20, cy + (n - s) / 20)]


@pytest.mark.parametrize("name", MECHANISMS)
def test_spec_declares_kind_unit_and_split(name):
    # the spec is the contract's metadata: a data kind, a unit of privacy, a split summing to 1
    spec = dp.mechanisms()[name]
    assert spec.data_kind in ("points", "regions") and spec.unit in UNITS
    assert len(spec.budget_parts) == len(spec.default_split)
    assert math.isclose(sum(spec.default_split), 1.0) and all(f > 0 for f in spec.default_split)
    assert spec.comparable == (spec.unit in (UNITS[0], UNITS[3], UNITS[4]))


@pytest.mark.parametrize("name", MECHANISMS)
def test_ledger_sums_to_epsilon(name, releases):
    # every draw is charged: a private release's ledger sums to ε exactly (a reference, to at most ε)
    spec = dp.mechanisms()[name]
    for rel in releases[name]:
        if spec.private:
            assert rel.ledger.total == pytest.approx(EPSILON, rel=1e-9)
        else:
            assert rel.ledger.total <= EPSILON * (1 + 1e-9) and not rel.private
    assert releases[name][2].private == spec.private          # fresh OS entropy: private
    assert not releases[name][0].private                      # a fixed seed: a labelled demo


@pytest.mark.parametrize("name", MECHANISMS)
def test_wrong_data_kind_is_refused(name, datasets):
    spec = dp.mechanisms()[name]
    other = "regions" if spec.data_kind == "points" else "points"
    data, domain = datasets[other]
    with pytest.raises(dp.DataError, match=f"takes {spec.data_kind} data"):
        dp.release(name, data, domain, EPSILON)


@pytest.mark.parametrize("name", MECHANISMS)
def test_answers_intervals_and_variances(name, releases):
    # every release answers, gives a noise variance (≥ 0, or NaN when fitted jointly) and an
    # interval around its answer that is (nan, nan) exactly when the variance is unknown
    rel = releases[name][2]
    rects = _rects(rel.domain)
    ans = rel.answer_many(rects)
    var = rel.noise_variance(rects)
    assert ans.shape == var.shape == (len(rects),) and np.isfinite(ans).all()
    assert np.all(np.isnan(var) | (var >= 0))
    for r, a, v in zip(rects, ans, var):
        assert rel.answer(r) == pytest.approx(a)
        lo, hi = rel.interval(r)
        if math.isnan(v):
            assert math.isnan(lo) and math.isnan(hi)
        else:
            assert lo <= a <= hi and (hi > lo or v == 0)


@pytest.mark.parametrize("name", MECHANISMS)
def test_structure_description_and_capabilities(name, releases):
    # the panels read these and nothing else: regions, a phrase, and declared capabilities
    rel = releases[name][2]
    grid, regions, counts = rel.regions()
    assert regions.shape == (len(counts), 4) and isinstance(grid, dp.UniformGrid)
    raster, rgrid = rel.raster()
    assert raster.shape == rgrid.shape
    assert isinstance(rel.describe(), str) and rel.describe()
    assert all(isinstance(w, str) for w in rel.warnings())
    cap = rel.capabilities
    assert isinstance(cap, Capabilities)
    if cap.depths:
        reg, cnt = rel.partition_at(0)
        assert len(reg) == 1 and cnt.sum() == pytest.approx(counts.sum())   # the root: all leaves
    if cap.grids > 1:
        reg, cnt = rel.grid_regions(cap.grids - 1)
        assert len(reg) == len(cnt) > 0
    if cap.stages:
        assert cap.stage in cap.stages
        before = rel.to_json()
        for st in cap.stages:
            staged = rel.with_stage(st)
            assert staged.capabilities.stage == st and staged is not rel
        assert rel.to_json() == before                          # never changed in place
    if cap.snapping:
        r = _rects(rel.domain)[1]
        assert rel.answer(rel.snap(r)) == pytest.approx(rel.answer(r))
    if cap.budget_layer:
        assert len(rel.eps_path) == len(counts)


@pytest.mark.parametrize("name", MECHANISMS)
def test_export_holds_no_private_values(name, releases):
    # the export carries released values and public parameters only: no seed, no diagnostics
    rel = releases[name][2]
    doc = json.loads(rel.to_json())
    keys = set(all_keys(doc))
    assert not keys & FORBIDDEN_KEYS
    assert doc["properties"]["unit_of_privacy"] == rel.spec.unit
    assert "reproducible_demo" not in doc["properties"]


@pytest.mark.parametrize("name", MECHANISMS)
def test_fixed_seed_is_deterministic(name, releases):
    # the same fixed seed gives the same bytes (a labelled, non-private demo)
    a, b, _ = releases[name]
    assert a.to_json() == b.to_json()
    assert "reproducible_demo" in json.loads(a.to_json())["properties"]


@pytest.mark.parametrize("kind", sorted({s.data_kind for s in dp.mechanisms().values()}))
def test_every_data_kind_has_a_private_recommended_mechanism(kind):
    rec = dp.recommend(kind)
    spec = dp.mechanisms(private_only=True)[rec.name]
    assert spec.data_kind == kind and spec.comparable
    assert rec.reason and "\n" not in rec.reason          # one line for the app


def test_recommendation_for_an_unknown_kind_says_what_exists():
    with pytest.raises(dp.ParameterError, match="expected one of points, regions"):
        dp.recommend("lines")
