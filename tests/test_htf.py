"""HTF (spec 003): every test case of section 7, plus end-to-end releases through dp.release.

Statistical checks use fixed seeds. Their tolerances are 5 standard errors of the estimated
quantity, computed from the distribution being tested (the discrete Laplace moments, stated next
to each check), so a correct implementation fails with negligible probability and the seeds only
make runs repeatable. Releases that must be private get a Generator, never an int seed.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

import dp
from helpers import all_keys
from dp import noise
from dp.budget import geometric_budgets
from dp.errors import ParameterError
from dp.mechanisms import htf
from dp.mechanisms.base import ADD_REMOVE_POINT
from dp.mechanisms.leaves import LeafRelease, paint
from dp.mechanisms.trees import Tree
from dp.postprocess import consistent
from dp.summed_area import box_sums, summed_area

UNIT = dp.Domain(0.0, 0.0, 1.0, 1.0)


def zero_noise(scale, size):
    """A split sampler that returns exact zeros (the 'all ε -> ∞' limit without overflow)."""
    return np.zeros(size)


def zero3(kind, scale, size):
    """The same for build(), whose sampler also receives the kind of draw."""
    return np.zeros(size)


def gen(seed):
    """A caller-made Generator: a private release (an int seed would be a labelled demo)."""
    return np.random.default_rng(seed)


def dlap_moments(scale):
    """(variance, fourth moment) of discrete Laplace(scale), from its pmf (1-q)/(1+q) q^|k|."""
    q = math.exp(-1.0 / scale)
    k = np.arange(1, int(80 * scale) + 80, dtype=np.float64)
    w = 2 * (1 - q) / (1 + q) * q ** k
    var = float((w * k ** 2).sum())
    assert var == pytest.approx(float(noise.discrete_laplace_variance(scale)), rel=1e-9)
    return var, float((w * k ** 4).sum())


def leaf_set(leaves):
    return {tuple(r) for r in np.asarray(leaves).tolist()}


def reference_axis(i, r0, r1, c0, c1) -> int:
    """Algorithm 2's axis rule, node by node: height mod 2 (0 = x), the other one when that
    side is a single cell."""
    axis = i % 2
    if axis == 0 and c1 - c0 == 1:
        return 1
    if axis == 1 and r1 - r0 == 1:
        return 0
    return axis


def assert_tiles(leaves, shape):
    """Leaves are disjoint, cover the grid, have area >= 1 (spec 7 case 8)."""
    lv = np.asarray(leaves)
    area = (lv[:, 1] - lv[:, 0]) * (lv[:, 3] - lv[:, 2])
    assert (area >= 1).all()
    assert area.sum() == shape[0] * shape[1]
    cover = paint(shape, lv, np.ones(len(lv)))
    assert np.allclose(cover, 1.0)          # every cell covered exactly once


def gaussian_points(n, sigma_cells, seed, domain=UNIT, side=1024):
    """Spec 5.2 synthetic data: one Gaussian cluster, sigma in cells of a side x side grid."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(0, side, 2)
    out = np.zeros((0, 2))
    while len(out) < n:
        p = c + rng.normal(0, sigma_cells, (n, 2))
        p = p[((p >= 0) & (p < side)).all(1)]          # reject and resample outside the domain
        out = np.vstack([out, p])
    p = out[:n] / side
    return dp.PointData(domain.west + p[:, 0] * domain.width, domain.south + p[:, 1] * domain.height)


# ====================================================================== exact / unit tests
def test_objective_paper_examples():
    # spec 7 case 1: B1, B2 and the 3x3 tie, k = n meaning "no split"
    B1 = np.array([[3, 3], [3, 3], [0, 0]])
    assert [htf.objective(B1, k, axis=1) for k in (1, 2, 3)] == [6, 0, 8]
    B2 = np.array([[1], [1], [4]])
    assert [htf.objective(B2, k, axis=1) for k in (1, 2, 3)] == [3, 0, 4]
    F = np.array([[3, 3, 1], [3, 3, 1], [0, 0, 4]])
    assert [htf.objective(F, k, axis=0) for k in (1, 2, 3)] == [12, 12, 12]
    for X, ax in ((B1, 1), (B2, 1), (F, 0)):
        assert np.allclose(htf.objectives(X, ax, [1, 2, 3]),
                           [htf.objective(X, k, ax) for k in (1, 2, 3)])
    assert htf.get_split_point(B1, 1e12, 1, 3, noise=zero_noise) == 2   # the paper's k* = 2


def test_objective_step_1x16():
    # spec 7 case 2: columns 0-3 = 10, x-split: o_4 = 0, o_8 = 40, o_1 = 48
    X = np.zeros((1, 16))
    X[0, :4] = 10
    assert htf.objective(X, 4, 0) == 0 and htf.objective(X, 8, 0) == 40
    assert htf.objective(X, 1, 0) == 48
    assert np.allclose(htf.objectives(X, 0, [4, 8, 1]), [0, 40, 48])


def test_vectorised_objectives_match_reference():
    # spec 3.1 efficient form == Eq. O, for every k including the empty sides k = 0 and k = n
    rng = np.random.default_rng(0)
    for _ in range(200):
        U, V = rng.integers(1, 9, 2)
        X = rng.poisson(rng.uniform(0.1, 4), (U, V)) * (rng.random((U, V)) < 0.6)
        for ax in (0, 1):
            n = V if ax == 0 else U
            ks = np.arange(0, n + 1)
            ref = [htf.objective(X, k, ax) for k in ks]
            assert np.allclose(htf.objectives(X, ax, ks), ref, atol=1e-9)
            if n >= 2:
                assert np.allclose(htf.objectives(X, ax), ref[1:-1], atol=1e-9)


@pytest.mark.slow
def test_objective_sensitivity_below_two():
    # spec 7 case 3: adding one point changes o_k by at most 2(n1-1)/n1 < 2 (Theorem 1)
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(3000):
        U, V = rng.integers(1, 7, 2)
        X = rng.poisson(rng.uniform(0, 5), (U, V)).astype(float)
        r, c = rng.integers(U), rng.integers(V)
        X2 = X.copy()
        X2[r, c] += 1
        for ax in (0, 1):
            n, W, pos = (V, U, c) if ax == 0 else (U, V, r)
            if n < 2:
                continue
            ks = np.arange(1, n)
            d = np.abs(htf.objectives(X2, ax, ks) - htf.objectives(X, ax, ks))
            n1 = np.where(pos < ks, ks * W, (n - ks) * W)       # cells of the side that changed
            assert (d <= 2 * (n1 - 1) / n1 + 1e-9).all()
            worst = max(worst, d.max())
    assert worst < 2


def test_split_point_search_trace_and_budget():
    # spec 7 case 4: noise-free results, the evaluation order, <= 2T+1 sampler calls, k in [1, n-1]
    X = np.zeros((1, 16))
    X[0, :4] = 10
    assert htf.get_split_point(X, 1e12, 0, 3, noise=zero_noise) == 4
    step = np.zeros((1, 1024))
    step[0, :300] = 5
    draws, trace = [], []

    def counting(scale, size):
        draws.append(size)
        return np.zeros(size)
    assert htf.get_split_point(step, 1e12, 0, 3, noise=counting, trace=trace) == 320
    assert trace == [512, 256, 768, 128, 384, 192, 320]
    assert sum(draws) == 7
    assert htf.get_split_point(np.array([[1.0, 5.0]]), 1e12, 0, 3, noise=zero_noise) == 1
    # y-split of the same step turned into a column
    assert htf.get_split_point(step.T, 1e12, 1, 3, noise=zero_noise) == 320
    rng = np.random.default_rng(2)
    for T in (1, 2, 3, 5):
        for n in (2, 3, 4, 5, 7, 16, 100, 1024):
            X = rng.poisson(2.0, (3, n))
            draws.clear()

            def noise_counting(scale, size):
                draws.append(size)
                return noise.discrete_laplace(rng, scale, size)
            trace = []
            k = htf.get_split_point(X, 0.01, 0, T, noise=noise_counting, trace=trace)
            assert 1 <= k <= n - 1
            assert sum(draws) == len(trace) <= 2 * T + 1
            assert len(set(trace)) == len(trace)      # memoised: each candidate drawn once
            assert k in trace                         # the winner was evaluated, never redrawn
            ks = htf.get_split_point(X, 0.01, 0, T, rng, size=500)
            assert ks.min() >= 1 and ks.max() <= n - 1
    with pytest.raises(ValueError):
        htf.get_split_point(np.ones((1, 5)), 1.0, 1, 3, rng)   # a single row cannot be y-split
    trace = []          # the default (discretised Laplace) path: noise ~ 0.007 grid steps here
    assert htf.get_split_point(step, 1e6, 0, 3, gen(0), trace=trace) == 320
    assert trace == [512, 256, 768, 128, 384, 192, 320]


def test_baseline_split_noise_free_is_argmin():
    # spec 3.2 B1 (reference only): with a huge budget it returns argmin o_k
    X = np.zeros((1, 16))
    X[0, :4] = 10
    assert htf.baseline_split(X, 1e12, 0, np.random.default_rng(0)) == 4


def test_mechanism_paths_refuse_int_seeds():
    # the release path never turns an int into a generator: only a Generator (or None) is taken
    X = np.zeros((4, 4))
    X[0, 0] = 3
    E = geometric_budgets(2, 1.0)
    for call in (lambda: htf.get_split_point(X, 1.0, 0, 3, 7),
                 lambda: htf.baseline_split(X, 1.0, 0, 7),
                 lambda: htf.build(X, 1.0, 7),
                 lambda: htf.count_step(np.ones(2), np.full(2, 9), 1, E, stop_count=1,
                                        stop_cells=1, rng=7)):
        with pytest.raises(TypeError, match="Generator"):
            call()
    assert htf.build(X, 1.0).leaves.shape[1] == 4          # None: fresh OS entropy


def test_height_rule():
    # spec 7 case 5: floor gives 15/16/17 at 3.5M points; |D| <= 0 gives 1; huge gives h_max
    assert [htf.estimate_height(3.5e6, e) for e in (0.1, 0.3, 0.5)] == [15, 16, 17]
    assert htf.estimate_height(0, 0.1) == 1 and htf.estimate_height(-5e4, 1.0) == 1
    assert htf.estimate_height(1e30, 1.0, h_max=20) == 20
    assert htf.grid_h_max((1024, 1024)) == 20 and htf.grid_h_max((1024, 600)) == 20
    assert htf.estimate_height(1e30, 1.0, h_max=htf.grid_h_max((8, 8))) == 6


@pytest.mark.parametrize("eps, h, lvl, eps_data, root, leaf, scale", [
    (0.1, 15, 5e-4, 0.0924, 6.11e-4, 0.01955, 51.2),
    (0.1, 15, 1e-3, 0.0849, 5.61e-4, 0.01796, 55.7),
    (0.3, 16, 5e-4, 0.2919, 1.52e-3, 0.06143, 16.3),
    (0.3, 16, 1e-3, 0.2839, 1.48e-3, 0.05974, 16.7),
    (0.5, 17, 5e-4, 0.4914, 2.03e-3, 0.10298, 9.7),
    (0.5, 17, 1e-3, 0.4829, 1.99e-3, 0.10120, 9.9),
])
def test_budget_table_rows(eps, h, lvl, eps_data, root, leaf, scale):
    # spec 7 case 7: the rows of the section 4 table (paper mode, |D| = 3.5M, T = 3)
    hh = htf.estimate_height(3.5e6, eps, h_max=20)
    plan = htf.plan_budget(eps, hh, htf.height_budget(eps, "paper"), mode="paper",
                           eps_prt_level=lvl)
    assert plan["h"] == h and plan["eps_prt"] == pytest.approx(h * lvl)
    assert plan["eps_data"] == pytest.approx(eps_data, abs=5e-5)
    assert plan["E"][h] == pytest.approx(root, rel=5e-3)
    assert plan["E"][0] == pytest.approx(leaf, rel=5e-4)
    assert 1 / plan["E"][0] == pytest.approx(scale, abs=0.05)
    assert 2 * 7 / lvl in (28000, 14000)
    assert math.fsum([plan["eps_height"], plan["eps_prt"], *plan["E"]]) == pytest.approx(eps, abs=1e-15)


def _recorded_build(F, eps, seed, **kw):
    """build() with a log of every draw: (kind, region, eps, value)."""
    rng = np.random.default_rng(seed)
    values, log = [], []

    def sampler(kind, scale, size):
        v = noise.discrete_laplace(rng, scale, size)
        values.append(v)
        return v

    def on_draw(kind, regions, e):
        log.append((kind, np.array(regions), np.array(e), values[-1]))
    return htf.build(F, eps, noise=sampler, on_draw=on_draw, **kw), log


def clustered_matrix(shape, seed, n=20000):
    rng = np.random.default_rng(seed)
    N, M = shape
    pts = np.vstack([rng.normal([0.3 * N, 0.6 * M], [0.05 * N, 0.08 * M], (n // 2, 2)),
                     rng.uniform([0, 0], [N, M], (n - n // 2, 2))])
    pts = pts[(pts[:, 0] >= 0) & (pts[:, 0] < N) & (pts[:, 1] >= 0) & (pts[:, 1] < M)]
    F, _, _ = np.histogram2d(pts[:, 0], pts[:, 1], bins=(N, M), range=((0, N), (0, M)))
    return F


@pytest.mark.parametrize("mode, kw", [
    ("share", {}), ("paper", {}), ("share", {"extent_first": True}),
    ("share", {"combine_pruned": True}), ("paper", {"extent_first": True, "combine_pruned": True}),
    ("share", {"T": 1, "stop_count": 10, "stop_cells": 2}),
])
def test_odometer_ledger_and_path_epsilon(mode, kw):
    # spec 7 case 7: per-cell odometer, path epsilon == eps_data, the ledger sums to eps.
    # About the search's split draws, so share mode pins split_rule="search" (the old default).
    F = clustered_matrix((64, 48), seed=4)
    eps = 1.0
    T = kw.get("T", 3)
    tree, log = _recorded_build(F, eps, 5, budget_mode=mode, split_rule="search", **kw)
    info = tree.info
    assert math.fsum([info["eps_height"], info["h"] * info["eps_prt_level"], info["eps_data"]]) \
        == pytest.approx(eps, rel=1e-12)
    assert np.abs(tree.eps_path - info["eps_data"]).max() <= 1e-12
    led = tree.ledger
    led.check(eps)
    assert len(led) == 1 + info["h"] + info["h"] + 1
    assert led.private and all(e.noise == "discrete laplace" for e in led)
    # per cell: every count draw covering it adds up to eps_height + eps_data exactly
    count_eps = np.zeros(F.shape)
    split_eps = np.zeros(F.shape)
    evals = {}
    for kind, regions, e, _ in log:
        target = split_eps if kind == "split" else count_eps
        target += paint(F.shape, regions, e)
        if kind == "split":
            for r in map(tuple, regions.tolist()):
                evals[r] = evals.get(r, 0) + 1
    assert np.allclose(count_eps, info["eps_height"] + info["eps_data"], rtol=1e-12)
    # split draws happen only at internal nodes, at most 2T+1 per node, eps'' each
    leaves = leaf_set(tree.leaves)
    internal = {tuple(r) for r in tree.nodes[:, :4].tolist()} - leaves
    assert set(evals) == internal and max(evals.values()) <= 2 * T + 1
    assert split_eps.max() <= info["h"] * info["eps_prt_level"] * (1 + 1e-12)
    assert (count_eps + split_eps).max() <= eps * (1 + 1e-12)
    assert all(np.allclose(e, info["eps_eval"]) for k, _, e, _ in log if k == "split")


@pytest.mark.parametrize("kw", [{}, {"split_rule": "search"}, {"budget_mode": "paper"},
                                {"split_rule": "search", "extent_first": True, "T": 1,
                                 "stop_count": 10}])
def test_each_draw_is_charged_where_it_is_made(kw, monkeypatch):
    # charge where you draw: at every draw, each cell's spend so far (size and counts, splits
    # apart) is covered by what the ledger has charged so far, and nothing is charged up front
    charged = {"count": 0.0, "split": 0.0}
    charge = dp.Ledger.charge

    def recording(self, step, epsilon, *args, **kwargs):
        charged["split" if step.startswith("split") else "count"] += epsilon
        return charge(self, step, epsilon, *args, **kwargs)
    monkeypatch.setattr(dp.Ledger, "charge", recording)
    F = clustered_matrix((64, 48), seed=4)
    spent = {k: np.zeros(F.shape) for k in charged}

    def on_draw(kind, regions, e):
        k = "split" if kind == "split" else "count"
        spent[k] += paint(F.shape, regions, e)
        assert spent[k].max() <= charged[k] * (1 + 1e-12)
    tree = htf.build(F, 1.0, gen(5), on_draw=on_draw, **kw)
    tree.ledger.check(1.0)
    assert tree.ledger.entries[1].step == f"node counts at height {tree.info['h']} (root)"


@pytest.mark.parametrize("seed", range(4))
def test_partition_tiles_and_pruning_rule(seed):
    # spec 7 case 8: disjoint leaves covering N x M; a pruned leaf has area < θ_cells or a
    # pre-prune noisy count <= θ_cnt; every split node had a larger count and extent
    F = clustered_matrix((50, 70), seed=seed)
    stop_count, stop_cells = 40.0, 5
    tree, log = _recorded_build(F, 2.0, seed, stop_count=stop_count, stop_cells=stop_cells)
    assert_tiles(tree.leaves, F.shape)
    assert (tree.leaf_height >= 0).all()
    S = summed_area(F)
    first = {}                                  # region -> its first (pre-prune) noisy count
    for kind, regions, e, v in log:
        if kind != "count":
            continue
        true = box_sums(S, regions)
        for r, y in zip(map(tuple, regions.tolist()), (true + v).tolist()):
            first.setdefault(r, y)
    areas = (tree.leaves[:, 1] - tree.leaves[:, 0]) * (tree.leaves[:, 3] - tree.leaves[:, 2])
    for r, a, hgt in zip(map(tuple, tree.leaves.tolist()), areas, tree.leaf_height):
        if hgt > 0:
            assert a < stop_cells or first[r] <= stop_count
    internal = {tuple(r) for r in tree.nodes[:, :4].tolist()} - leaf_set(tree.leaves)
    for r in internal:
        assert first[r] > stop_count and (r[1] - r[0]) * (r[3] - r[2]) >= stop_cells
    # nodes: depth 0 is the root, each depth's regions are disjoint
    assert tuple(tree.nodes[0]) == (0, F.shape[0], 0, F.shape[1], 0)
    for d in range(tree.nodes[:, 4].max() + 1):
        reg = tree.nodes[tree.nodes[:, 4] == d, :4]
        assert paint(F.shape, reg, np.ones(len(reg))).max() <= 1 + 1e-12


def test_pruning_paper_examples():
    # spec 7 case 9: θ_cells = 4 prunes a 3-cell node; θ_cnt = 6 prunes a 6-point node (zero noise)
    F = np.array([[1.0, 2.0, 3.0]])
    t = htf.build(F, 1e12, noise=zero3, stop_count=-np.inf, stop_cells=4)
    assert leaf_set(t.leaves) == {(0, 1, 0, 3)} and t.counts.tolist() == [6.0]
    t = htf.build(F, 1e12, noise=zero3, stop_count=-np.inf, stop_cells=3)
    assert len(t.leaves) > 1
    F = np.zeros((4, 4))
    F[1, 2], F[3, 0] = 4, 2
    t = htf.build(F, 1e12, noise=zero3, stop_count=6, stop_cells=1)
    assert leaf_set(t.leaves) == {(0, 4, 0, 4)} and t.counts.tolist() == [6.0]
    F[0, 0] = 1                                  # 7 points: the root splits
    t = htf.build(F, 1e12, noise=zero3, stop_count=6, stop_cells=1)
    assert len(t.leaves) > 1


def _paper_query_release(counts):
    dom = dp.Domain(0.0, 0.0, 3.0, 3.0)
    base = dp.UniformGrid(dom, 3)
    leaves = [[2, 3, 0, 2], [0, 2, 0, 2], [2, 3, 2, 3], [0, 2, 2, 3]]   # C1, C2, C3, C4
    return LeafRelease(htf.HTF, dom, 1.0, (0.01, 0.15, 0.84), {}, dp.Ledger(), base,
                       leaves, counts), dom


def test_query_answers_paper_example():
    # spec 7 case 10: ans = 12/4 + 2/2 = 4 noise-free, (12+n2)/4 + (2+n4)/2 noisy, fractions
    rel, dom = _paper_query_release([0.0, 12.0, 4.0, 2.0])
    Q = dp.Rect(1.0, 0.0, 3.0, 1.0)                     # cells (row 0, col 1) and (row 0, col 2)
    assert rel.answer(Q) == pytest.approx(4.0, abs=1e-12)
    n = np.array([0.7, -3.1, 2.2, 5.3])
    rel, _ = _paper_query_release(np.array([0.0, 12.0, 4.0, 2.0]) + n)
    assert rel.answer(Q) == pytest.approx((12 + n[1]) / 4 + (2 + n[3]) / 2, abs=1e-12)
    assert rel.answer(dp.Rect(0.0, 0.0, 2.0, 1.0)) == pytest.approx((12 + n[1]) / 2, abs=1e-12)
    assert rel.answer(dp.Rect(0.0, 0.0, 3.0, 3.0)) == pytest.approx(rel.counts.sum(), abs=1e-12)
    rng = np.random.default_rng(6)
    a = rng.uniform(0, 3, (200, 2))
    b = rng.uniform(0, 3, (200, 2))
    rects = np.column_stack([np.minimum(a[:, 0], b[:, 0]), np.minimum(a[:, 1], b[:, 1]),
                             np.maximum(a[:, 0], b[:, 0]), np.maximum(a[:, 1], b[:, 1])])
    direct = [rel.overlap_fractions(dp.Rect(*r)) @ rel.counts for r in rects]
    assert np.allclose(rel.answer_many(rects), direct, atol=1e-9)


def test_relative_error_convention():
    # spec 7 case 11: RE = 100 |c - ĉ| / max(c, 20)
    re = 100 * dp.metrics.relative_error([5, 90, 25], [0, 100, 20], sanity=20)
    assert np.allclose(re, [25, 10, 25])


def test_determinism_by_seed():
    # spec 7 case 12: the same seed gives identical leaves and counts; other seeds differ
    data, dom = dp.load_sample("small_city_5k")
    a = dp.release("htf", data, dom, 1.0, seed=11)
    b = dp.release("htf", data, dom, 1.0, seed=11)
    c = dp.release("htf", data, dom, 1.0, seed=12)
    assert not a.private and a.reproducible_demo          # an int seed is a labelled demo
    assert np.array_equal(a.leaves, b.leaves) and np.array_equal(a.counts, b.counts)
    assert np.array_equal(a.nodes, b.nodes)
    assert a.leaves.shape != c.leaves.shape or not np.array_equal(a.counts, c.counts)


def test_noise_free_limit_block_matrix():
    # spec 7 case 13: zero noise, θ_cnt = -inf: the first split lands on the block boundary
    # (16 is on the search path of 64 columns) and homogeneous leaves answer exactly
    F = np.ones((64, 64))
    F[:, :16] = 3
    t = htf.build(F, 1e12, noise=zero3, stop_count=-np.inf, stop_cells=1, split_rule="search")
    assert t.info["h"] == 12 and t.info["h"] % 2 == 0       # root height even: an x-split
    depth1 = leaf_set(t.nodes[t.nodes[:, 4] == 1, :4])
    assert depth1 == {(0, 64, 0, 16), (0, 64, 16, 64)}
    for r0, r1, c0, c1 in t.leaves:
        block = F[r0:r1, c0:c1]
        assert block.min() == block.max()                  # every leaf homogeneous
    assert_tiles(t.leaves, F.shape)
    areas = (t.leaves[:, 1] - t.leaves[:, 0]) * (t.leaves[:, 3] - t.leaves[:, 2])
    raster = paint(F.shape, t.leaves, t.counts / areas)
    assert np.allclose(raster, F)                          # so every aligned query is exact
    rng = np.random.default_rng(7)
    S = np.pad(F.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    P = np.pad(raster.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    for _ in range(100):
        r0, r1 = np.sort(rng.integers(0, 65, 2))
        c0, c1 = np.sort(rng.integers(0, 65, 2))
        q = lambda A: A[r1, c1] - A[r0, c1] - A[r1, c0] + A[r0, c0]  # noqa: E731
        assert q(P) == pytest.approx(q(S), abs=1e-6)


def _reference_htf(F, h, E, eps_lvl, T, stop_count, stop_cells):
    """Spec 3.8 VISIT written recursively, node by node, with zero noise."""
    out = []

    def visit(r0, r1, c0, c1, i):
        y = F[r0:r1, c0:c1].sum()
        cells = (r1 - r0) * (c1 - c0)
        if i == 0 or y <= stop_count or cells < stop_cells or cells == 1:
            out.append((r0, r1, c0, c1))
            return
        axis = reference_axis(i, r0, r1, c0, c1)
        k = htf.get_split_point(F[r0:r1, c0:c1], eps_lvl, axis, T, noise=zero_noise)
        if axis == 0:
            visit(r0, r1, c0, c0 + k, i - 1)
            visit(r0, r1, c0 + k, c1, i - 1)
        else:
            visit(r0, r0 + k, c0, c1, i - 1)
            visit(r0 + k, r1, c0, c1, i - 1)
    visit(0, F.shape[0], 0, F.shape[1], h)
    return set(out)


@pytest.mark.parametrize("seed", range(9))
def test_level_by_level_build_matches_recursive_reference(seed):
    # spec 3.8: the vectorised fused build makes the same tree as the node-by-node recursion
    # (zero noise; small counts, large counts, and large counts with empty cells; exact ties
    # of the objective are frequent here and must be resolved the same way)
    rng = np.random.default_rng(seed)
    N, M = rng.integers(5, 40, 2)
    F = [rng.poisson(rng.gamma(0.6, 6, (N, M))).astype(float),
         np.rint(rng.gamma(0.6, 600, (N, M))) + 1,
         np.rint(rng.gamma(0.6, 600, (N, M))) * (rng.random((N, M)) < 0.7)][seed % 3]
    stop_count, stop_cells, T = float(rng.integers(0, 60)), int(rng.integers(1, 8)), int(rng.integers(1, 4))
    t = htf.build(F, 1e6, noise=zero3, stop_count=stop_count, stop_cells=stop_cells, T=T,
                  split_rule="search")
    ref = _reference_htf(F, t.info["h"], t.info["E"], t.info["eps_prt_level"], T, stop_count,
                         stop_cells)
    assert leaf_set(t.leaves) == ref
    S = {tuple(r): F[r[0]:r[1], r[2]:r[3]].sum() for r in t.leaves.tolist()}
    assert np.allclose(t.counts, [S[tuple(r)] for r in t.leaves.tolist()])


# ============================================================================ split rules
def _reference_midpoint_tree(shape, h, stop_cells):
    """Every node cut at floor(n / 2) on Algorithm 2's axis, node by node (no data at all)."""
    nodes, leaves = set(), set()

    def visit(r0, r1, c0, c1, i):
        nodes.add((r0, r1, c0, c1))
        cells = (r1 - r0) * (c1 - c0)
        if i == 0 or cells < stop_cells or cells == 1:
            leaves.add((r0, r1, c0, c1))
            return
        axis = reference_axis(i, r0, r1, c0, c1)
        if axis == 0:
            m = c0 + (c1 - c0) // 2
            visit(r0, r1, c0, m, i - 1)
            visit(r0, r1, m, c1, i - 1)
        else:
            m = r0 + (r1 - r0) // 2
            visit(r0, m, c0, c1, i - 1)
            visit(m, r1, c0, c1, i - 1)
    visit(0, shape[0], 0, shape[1], h)
    return nodes, leaves


@pytest.mark.parametrize("shape, stop_cells", [((37, 50), 1), ((64, 48), 5), ((9, 1), 2)])
def test_midpoint_splits_are_exact_midpoints(shape, stop_cells):
    # noiseless: every split is at floor(n / 2) on the paper's axis, whatever the data are, and
    # the midpoint rule never draws split noise
    trees = []
    for seed in (0, 1):
        F = clustered_matrix(shape, seed=seed, n=5000 * (seed + 1))
        kinds: list = []
        t = htf.build(F, 1e12, noise=zero3, stop_count=-np.inf, stop_cells=stop_cells,
                      split_rule="midpoint",
                      on_draw=lambda kind, R, e, seen=kinds: seen.append(kind))
        assert "split" not in kinds and t.info["split_rule"] == "midpoint"
        nodes, leaves = _reference_midpoint_tree(shape, t.info["h"], stop_cells)
        assert leaf_set(t.leaves) == leaves and leaf_set(t.nodes[:, :4]) == nodes
        assert_tiles(t.leaves, shape)
        assert np.allclose(t.counts, [F[r0:r1, c0:c1].sum() for r0, r1, c0, c1 in t.leaves])
        trees.append(leaf_set(t.leaves))
    assert trees[0] == trees[1]                  # the partition does not depend on the data


def test_midpoint_split_is_floor_half_of_each_node():
    # the same, read off the released nodes: each split node's first child has floor(n/2) lines
    F = clustered_matrix((45, 45), seed=3)
    t = htf.build(F, 1e12, noise=zero3, stop_count=-np.inf, stop_cells=1, split_rule="midpoint")
    h = t.info["h"]
    by_depth = {}
    for r0, r1, c0, c1, d in t.nodes.tolist():
        by_depth.setdefault(d, []).append((r0, r1, c0, c1))
    checked = 0
    for d, regs in by_depth.items():
        kids = set(by_depth.get(d + 1, []))
        for r0, r1, c0, c1 in regs:
            inside = [k for k in kids if r0 <= k[0] and k[1] <= r1 and c0 <= k[2] and k[3] <= c1]
            if not inside:
                continue
            assert len(inside) == 2
            x_split = (h - d) % 2 == 0 and c1 - c0 > 1 or r1 - r0 == 1
            first = min(inside)
            if x_split:
                assert first == (r0, r1, c0, c0 + (c1 - c0) // 2)
            else:
                assert first == (r0, r0 + (r1 - r0) // 2, c0, c1)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("kw", [{}, {"extent_first": True, "combine_pruned": True},
                                {"split": (0.05, 0.25, 0.7), "stop_count": 10}])
def test_midpoint_ledger_has_no_split_entries_and_sums_to_eps(kw):
    # the partition spends nothing: no split entries; the counts get eps - eps_height, and the
    # per-height budgets E are the geometric schedule of that larger count budget
    F = clustered_matrix((64, 48), seed=4)
    eps = 1.0
    tree, log = _recorded_build(F, eps, 5, split_rule="midpoint", **kw)
    info, led = tree.info, tree.ledger
    led.check(eps)
    assert led.total == pytest.approx(eps, abs=1e-12)
    assert not any("split" in e.step for e in led)
    assert len(led) == 1 + info["h"] + 1
    split = kw.get("split", htf.DEFAULT_SPLIT)
    assert info["eps_height"] == pytest.approx(split[0] * eps)
    assert info["eps_prt"] == info["eps_prt_level"] == info["eps_eval"] == 0.0
    assert info["split_noise_scale"] == 0.0
    assert info["eps_data"] == pytest.approx(eps - info["eps_height"], abs=1e-15)
    assert np.allclose(info["E"], geometric_budgets(info["h"], info["eps_data"]), rtol=1e-12)
    counts = [e.epsilon for e in led if e.step.startswith("node counts")]
    assert counts == pytest.approx(info["E"][::-1], rel=1e-12)
    assert np.abs(tree.eps_path - info["eps_data"]).max() <= 1e-12
    assert all(kind != "split" for kind, *_ in log)
    count_eps = np.zeros(F.shape)
    for kind, regions, e, _ in log:
        count_eps += paint(F.shape, regions, e)
    assert np.allclose(count_eps, eps, rtol=1e-12)       # every cell: eps_height + eps_data


def test_paper_mode_always_searches():
    # paper mode reproduces the paper: the default is the search, an explicit other rule is
    # refused before any draw by build(), and the release ignores the share-mode setting
    F = clustered_matrix((64, 48), seed=2)
    a = htf.build(F, 1.0, gen(9), budget_mode="paper")
    b = htf.build(F, 1.0, gen(9), budget_mode="paper", split_rule="search")
    assert a.info["split_rule"] == b.info["split_rule"] == "search"
    assert np.array_equal(a.leaves, b.leaves) and np.array_equal(a.counts, b.counts)
    assert sum(e.step.startswith("split positions") for e in a.ledger) == a.info["h"]
    kinds = []
    htf.build(F, 1.0, gen(9), budget_mode="paper", on_draw=lambda k, R, e: kinds.append(k))
    assert "split" in kinds
    rng = gen(10)
    state = rng.bit_generator.state
    with pytest.raises(ParameterError, match="paper"):
        htf.build(F, 1.0, rng, budget_mode="paper", split_rule="midpoint")
    assert rng.bit_generator.state == state
    with pytest.raises(ParameterError, match="split_rule"):
        htf.build(F, 1.0, rng, split_rule="magic")
    # share mode: the default is midpoint, "search" is the paper's search with the share split
    assert htf.build(F, 1.0, gen(9)).info["split_rule"] == htf.DEFAULT_SPLIT_RULE == "midpoint"
    s = htf.build(F, 1.0, gen(9), split_rule="search")
    assert s.info["eps_prt"] == pytest.approx(0.15) and s.info["eps_eval"] > 0
    data, dom = dp.load_sample("small_city_5k")
    rel = dp.release("htf", data, dom, 1.0, seed=gen(5),
                     params={"budget_mode": "paper", "split_rule": "midpoint", "base_cells": 64})
    assert rel.tree_info["split_rule"] == "search"


def test_objective_profile_matches_reference():
    rng = np.random.default_rng(3)
    for _ in range(200):
        U, V = rng.integers(1, 12, 2)
        X = rng.poisson(rng.uniform(0.1, 6), (U, V)) * (rng.random((U, V)) < rng.uniform(0.2, 1))
        for ax in (0, 1):
            n = V if ax == 0 else U
            want = htf.objectives(X, ax) if n >= 2 else np.zeros(0)
            assert np.allclose(htf.objective_profile(X, ax), want, atol=1e-9)
            if n >= 3:                                        # a subset of positions
                ks = np.sort(rng.choice(np.arange(1, n), rng.integers(1, n), replace=False))
                assert np.allclose(htf.objective_profile(X, ax, ks), htf.objectives(X, ax, ks),
                                   atol=1e-9)
    B1 = np.array([[3, 3], [3, 3], [0, 0]])
    assert htf.objective_profile(B1, 1).tolist() == [6, 0]
    X = rng.integers(0, 10 ** 6, (6, 400)).astype(float)      # many distinct values: blocks
    ks = np.arange(1, 400, 7)
    assert np.allclose(htf.objective_profile(X, 0, ks), htf.objectives(X, 0, ks), rtol=1e-10)


def test_root_split_snr_is_owner_only_and_changes_nothing():
    # range of the root's exact objective over all split positions / (scale * sqrt 2), at the
    # search's per-value budget; computed after the release from F and public values only
    data, dom = dp.load_sample("small_city_5k")
    for rule in ("midpoint", "search"):
        params = {"base_cells": 128, "split_rule": rule}
        rng = gen(21)
        rel = dp.release("htf", data, dom, 1.0, params=params, seed=rng)
        info = rel.tree_info
        F = data.histogram(rel.base).astype(float)
        axis = 0 if info["h"] % 2 == 0 else 1                 # root height even: x-split
        o = htf.objectives(F, axis)
        eps_eval = 0.15 * 1.0 / info["h"] / (2 * 3 + 1)        # the search's, for either rule
        sd = htf.split_noise_scale(eps_eval) * math.sqrt(2)
        d = rel.diagnostics
        assert d["root_split_objective_range"] == pytest.approx(o.max() - o.min())
        assert d["root_split_noise_sd"] == pytest.approx(sd)
        assert d["root_split_snr"] == pytest.approx((o.max() - o.min()) / sd)
        assert d["root_split_positions"] == o.size              # every position
        if rule == "search":
            assert info["split_noise_scale"] * math.sqrt(2) == pytest.approx(sd)
        # the release is exactly build() with the same generator: the diagnostic drew nothing
        rng2 = gen(21)
        t = htf.build(F, 1.0, rng2, split_rule=rule)
        assert np.array_equal(t.leaves, rel.leaves) and np.array_equal(t.counts, rel.counts)
        assert rng.bit_generator.state == rng2.bit_generator.state
        text = rel.to_json() + json.dumps(rel.metadata(), default=str)
        assert "root_split" not in text and "snr" not in text.lower()


def test_build_takes_whole_counts_only():
    # integer noise is only exact on integer counts: fractional inputs are refused up front
    with pytest.raises(ValueError, match="whole counts"):
        htf.build(np.full((4, 4), 0.5), 1.0, gen(0))


# ======================================================================== statistical tests
def test_discrete_laplace_samplers():
    # spec 7 case 14, for the exact integer sampler HTF now uses: mean 0 and variance
    # 2q/(1-q)^2 within 5 s.e. (s.e. of a sample variance: sqrt((mu4 - sigma^4)/n)), and a
    # chi-square test of the pmf (1-q)/(1+q) q^|k| with p > 1e-3
    n, b = 100_000, 1.7
    y = noise.discrete_laplace(np.random.default_rng(8), b, n)
    assert y.dtype.kind == "i"
    var, mu4 = dlap_moments(b)
    assert abs(y.mean()) < 5 * math.sqrt(var / n)
    assert abs(y.var() - var) < 5 * math.sqrt((mu4 - var ** 2) / n)
    q = math.exp(-1 / b)
    ks = np.arange(-8, 9)
    p = (1 - q) / (1 + q) * q ** np.abs(ks)
    obs = np.array([(y == k).sum() for k in ks] + [(np.abs(y) > 8).sum()])
    exp = np.append(p, 1 - p.sum()) * n
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    # split values: on the public grid, noise = grid * discrete Laplace((2/grid + 1)/eps)
    eps = 0.3
    o = np.full(n, 123.4567)
    z = htf._noisy_objectives(np.random.default_rng(9), o, eps)
    g = htf.SPLIT_GRID
    units = z / g
    assert np.array_equal(units, np.rint(units))                  # multiples of the grid
    var, mu4 = dlap_moments((2 / g + 1) / eps)
    d = units - np.rint(123.4567 / g)
    assert abs(d.mean()) < 5 * math.sqrt(var / n)
    assert abs(d.var() - var) < 5 * math.sqrt((mu4 - var ** 2) / n)
    assert htf.split_noise_scale(eps) == pytest.approx((2 / g + 1) / eps * g)


@pytest.mark.slow
def test_leaf_counts_unbiased_with_fixed_partition():
    # spec 7 case 15: splits noise-free (so the partition tree is fixed), the count pass
    # repeated R = 2000 times; for each leaf region mean(ŷ - y) ~ 0 within 5 s.e. and
    # var(ŷ - y) ~ discrete Laplace variance at 1/eps_final within 5 s.e. (sqrt((mu4 - var^2)/R))
    rng = np.random.default_rng(9)
    F = rng.poisson(3.0, (8, 8)).astype(float)
    F[:4, :4] += rng.poisson(6.0, (4, 4))

    pools: dict = {}                 # independent draws made in bulk, one pool per scale

    def sampler(kind, scale, size):
        if kind != "count":
            return np.zeros(size)
        pool, used = pools.get(scale, (None, 0))
        if pool is None or used + size > pool.size:
            pool, used = noise.discrete_laplace(rng, scale, 100_000), 0
        pools[scale] = (pool, used + size)
        return pool[used:used + size]
    errs: dict = {}
    for _ in range(2000):
        t = htf.build(F, 1.0, noise=sampler, stop_count=30, stop_cells=2)
        for r, v, e, hgt in zip(map(tuple, t.leaves.tolist()), t.counts, t.eps_final,
                                t.leaf_height):
            errs.setdefault((r, e, hgt), []).append(v - F[r[0]:r[1], r[2]:r[3]].sum())
    checked = 0
    pruned_checked = 0
    for (r, e, hgt), d in errs.items():
        d = np.array(d)
        if d.size < 100:
            continue
        var, mu4 = dlap_moments(1 / e)
        assert np.array_equal(d, np.rint(d))                        # integer noise
        assert abs(d.mean()) < 5 * math.sqrt(var / d.size), (r, e, d.mean())
        assert abs(d.var() - var) < 5 * math.sqrt((mu4 - var ** 2) / d.size), (r, e, d.var(), var)
        checked += 1
        # stopped above height 0 by the noisy count (area >= stop_cells): the conditioned case
        pruned_checked += hgt > 0 and (r[1] - r[0]) * (r[3] - r[2]) >= 2
    assert checked >= 5 and pruned_checked >= 3


def _log_ratio_ok(a, b, eps, n):
    """|log p_a/p_b| <= eps + 5 s.e. for outcomes with p > 1% (s.e. of a log frequency ~ 1/sqrt(count))."""
    keys = set(a) | set(b)
    checked = 0
    for k in keys:
        ca, cb = a.get(k, 0), b.get(k, 0)
        if max(ca, cb) / n <= 0.01:
            continue
        assert ca > 0 and cb > 0
        tol = 5 * math.sqrt(1 / ca + 1 / cb)
        assert abs(math.log(ca / cb)) <= eps + tol, (k, ca, cb)
        checked += 1
    return checked


def _freq(values):
    u, c = np.unique(values, return_counts=True, axis=0)
    return {tuple(np.atleast_1d(k).tolist()): int(v) for k, v in zip(u, c)}


@pytest.mark.slow
def test_empirical_dp_of_split_height_and_count_steps():
    # spec 7 case 16: D = [0,0,5,5,5]^T, D' = +1 in row 1, ε'_prt = 1, T = 1, 4e4 runs
    runs = 40_000
    D = np.array([[0.0], [0.0], [5.0], [5.0], [5.0]])
    D2 = D.copy()
    D2[1] += 1
    ka = htf.get_split_point(D, 1.0, 1, 1, np.random.default_rng(10), size=runs)
    kb = htf.get_split_point(D2, 1.0, 1, 1, np.random.default_rng(11), size=runs)
    assert _log_ratio_ok(_freq(ka), _freq(kb), 1.0, runs) >= 2
    # height step: |D| = 40 vs 41 at ε_height = 1 sits on the h = 1 / h = 2 boundary (ratio = e)
    ra, rb = np.random.default_rng(12), np.random.default_rng(13)
    ha = [htf.estimate_height(40 + v, 1.0) for v in noise.discrete_laplace(ra, 1.0, runs)]
    hb = [htf.estimate_height(41 + v, 1.0) for v in noise.discrete_laplace(rb, 1.0, runs)]
    assert _log_ratio_ok(_freq(np.array(ha)), _freq(np.array(hb)), 1.0, runs) >= 2
    # count step at height 1 (E = geometric(1, 1)): output = (pruned, value binned by 2);
    # a pruned node spends E[1] + E[0] = 1, an unpruned one releases only y at E[1]
    E = geometric_budgets(1, 1.0)
    outs = []
    for x, seed in ((5.0, 14), (6.0, 15)):
        st = htf.count_step(np.full(runs, x), np.full(runs, 100), 1, E, stop_count=5.0,
                            stop_cells=5, rng=np.random.default_rng(seed))
        v = np.where(st["pruned"], st["value"], st["y"])
        outs.append(_freq(np.column_stack([st["pruned"], np.floor(np.clip(v, -10, 22) / 2)])))
    assert _log_ratio_ok(outs[0], outs[1], 1.0, runs) >= 6


@pytest.mark.slow
def test_regression_direction_against_grids():
    # spec 7 case 17 (small version): 200k points, 1024^2, ε = 0.1, 5 seeds per sigma:
    # MRE(HTF) < MRE(UG) < MRE(Uniform) and MRE(HTF) < MRE(Identity), RE = |c - ĉ| / max(c, 20)
    eps = 0.1
    for sigma in (20, 50, 100):
        mre = {m: [] for m in ("htf", "ug", "uniform", "identity")}
        for seed in range(5):
            data = gaussian_points(200_000, sigma, seed=100 * sigma + seed)
            Q = np.vstack([dp.random_workload(UNIT, 200, area_frac=a, rng=seed) for a in (0.02, 0.06, 0.10)])
            true = data.true_counts(Q, UNIT)
            for m in mre:
                params = {"grid_size": 1024} if m == "identity" else None
                rel = dp.release(m, data, UNIT, eps, params=params, seed=seed)
                mre[m].append(dp.metrics.mean_relative_error(rel.answer_many(Q), true, sanity=20))
        avg = {m: float(np.mean(v)) for m, v in mre.items()}
        assert avg["htf"] < avg["ug"] < avg["uniform"], (sigma, avg)
        assert avg["htf"] < avg["identity"], (sigma, avg)


# ================================================================= end to end via dp.release


# everything the tree metadata may hold: public plan values and post-processed private outputs
TREE_KEYS = {"h", "eps_height", "eps_prt_level", "eps_prt", "eps_data", "E", "noisy_size",
             "h_afford", "T", "eps_eval", "split_noise_scale", "budget_mode", "eps_total", "h_max",
             "n_leaves", "n_nodes", "base_grid", "split_rule"}
DIAGNOSTIC_KEYS = {"root_split_snr", "root_split_objective_range", "root_split_noise_sd",
                   "root_split_positions"}


def _check_release(rel, eps):
    assert isinstance(rel, LeafRelease) and rel.mechanism == "htf" and rel.private
    rel.ledger.check(eps)
    info = rel.tree_info
    searched = info["split_rule"] == "search"
    assert info["split_rule"] == ("search" if rel.params["budget_mode"] == "paper"
                                  else rel.params["split_rule"])
    assert len(rel.ledger) == (2 if searched else 1) * info["h"] + 2
    splits = [e for e in rel.ledger if e.step.startswith("split positions")]
    assert len(splits) == (info["h"] if searched else 0)
    if not searched:                        # midpoint: the partition share went to the counts
        assert info["eps_prt"] == info["eps_prt_level"] == info["eps_eval"] == 0.0
        assert info["eps_data"] == pytest.approx(eps - info["eps_height"], abs=1e-12)
    assert_tiles(rel.leaves, rel.base.shape)
    assert np.abs(rel.eps_path - info["eps_data"]).max() <= 1e-12
    assert np.allclose(rel.leaf_var, noise.discrete_laplace_variance(1 / rel.eps_final))
    if rel.params["combine_pruned"]:
        assert rel.leaf_scale is None
    else:                                   # each count is one integer draw of a known scale
        assert np.array_equal(rel.counts, np.rint(rel.counts))
        assert np.allclose(rel.leaf_scale, 1 / rel.eps_final)
    assert rel.nodes[:, 4].min() == 0 and rel.max_depth() <= info["h"]
    assert leaf_set(rel.leaves) <= leaf_set(rel.nodes[:, :4])
    gj = json.loads(rel.to_json())
    assert len(gj["features"]) == rel.n_leaves
    keys = {str(k).lower() for k in all_keys(gj)}
    assert not any("true" in k or "exact" in k or "diagnostic" in k for k in keys)
    assert not keys & {"n_public", "dataset_size_public", "dataset_size", "n"}
    meta = rel.metadata()
    assert set(meta["tree"]) == TREE_KEYS               # nothing exact rides along
    # the owner-only root split diagnostic reads exact data: present, never exported
    if info["h"] >= 1 and rel.n_leaves > 1:
        assert set(rel.diagnostics) >= DIAGNOSTIC_KEYS
    text = rel.to_json() + json.dumps(meta, default=str)
    assert not any(k in text for k in DIAGNOSTIC_KEYS | {"root_split"})
    assert isinstance(info["noisy_size"], int)
    assert meta["noisy_dataset_size"] == info["noisy_size"]
    assert gj["properties"]["noisy_dataset_size"] == info["noisy_size"]
    assert meta["unit_of_privacy"] == ADD_REMOVE_POINT
    assert sum(meta["split"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.7])
def test_release_small_city(eps):
    data, dom = dp.load_sample("small_city_5k")
    rel = dp.release("htf", data, dom, eps, seed=gen(3))
    _check_release(rel, eps)
    assert rel.base.gx == 1024 or rel.base.gy == 1024
    # the total over the domain is unbiased-ish: within 6 sd of the summed leaf noise
    total = rel.answer(dp.Rect(*dom.bounds))
    assert abs(total - data.n) < 6 * math.sqrt(rel.leaf_var.sum())


@pytest.mark.parametrize("mode, rule", [("share", "search"), ("paper", "midpoint"),
                                        ("share", "midpoint")])
def test_release_city_200k_and_paper_mode(mode, rule):
    # share mode + "search" was the default before split_rule existed: pinned here; paper mode
    # searches whatever split_rule says; the new default (midpoint) spends nothing on splits
    data, dom = dp.load_sample("city_200k")
    eps = 0.5
    rel = dp.release("htf", data, dom, eps, params={"budget_mode": mode, "split_rule": rule},
                     seed=gen(4))
    _check_release(rel, eps)
    info = rel.tree_info
    if mode == "paper":
        assert info["split_rule"] == "search"
        assert info["eps_height"] == 1e-4 and info["eps_prt_level"] == 1e-3
    elif rule == "search":
        assert info["eps_prt"] == pytest.approx(0.15 * eps)
        assert info["eps_prt_level"] == pytest.approx(0.15 * eps / info["h"])
    else:
        assert info["eps_prt"] == 0 and info["eps_data"] == pytest.approx(0.99 * eps)
    assert 8 <= info["h"] <= 20 and rel.n_leaves > 100


def test_release_options_and_split():
    data, dom = dp.load_sample("small_city_5k")
    rel = dp.release("htf", data, dom, 1.0, split=(0.05, 0.25, 0.7), seed=gen(2),
                     params={"extent_first": True, "combine_pruned": True, "T": 2,
                             "stop_count": 20, "stop_cells": 3, "base_cells": 256, "c0": 5,
                             "split_rule": "search"})      # pinned: the old default
    rel.ledger.check(1.0)
    assert max(rel.base.gx, rel.base.gy) == 256
    assert rel.tree_info["eps_prt"] == pytest.approx(0.25)
    assert_tiles(rel.leaves, rel.base.shape)
    assert np.abs(rel.eps_path - rel.tree_info["eps_data"]).max() <= 1e-12
    assert np.allclose(rel.leaf_var, noise.discrete_laplace_variance(1 / rel.eps_final))
    assert rel.leaf_scale is None                 # combined counts are not one draw
    lo, hi = rel.interval(dp.Rect(*dom.bounds))   # so intervals use the variance
    assert lo < rel.answer(dp.Rect(*dom.bounds)) < hi


def test_extent_first_and_combine_budgets():
    # spec 3.7 (a): an extent-stopped node's only draw gets E[i] + sum_{j<i} E[j];
    # (b): the combined estimate has variance v1 v2 / (v1 + v2), v = discrete Laplace variances
    E = geometric_budgets(3, 1.0)
    x, cells = np.array([500.0, 3.0, 500.0]), np.array([100, 2, 1])
    st = htf.count_step(x, cells, 2, E, stop_count=10, stop_cells=5, extent_first=True,
                        rng=np.random.default_rng(0))
    assert st["pruned"].tolist() == [False, True, True]
    assert np.allclose(st["eps_final"][1:], E[2] + E[1] + E[0])
    assert np.isnan(st["y"][1:]).all()             # no count was drawn before the extent stop
    st = htf.count_step(np.array([0.0, 500.0]), np.array([100, 100]), 2, E, stop_count=10,
                        stop_cells=5, combine_pruned=True, rng=np.random.default_rng(1))
    rem = E[0] + E[1]
    assert st["pruned"].tolist() == [True, False]
    v1, v2 = noise.discrete_laplace_variance(1 / E[2]), noise.discrete_laplace_variance(1 / rem)
    assert st["var"][0] == pytest.approx(v1 * v2 / (v1 + v2))
    assert noise.discrete_laplace_variance(1 / st["eps_final"][0]) == pytest.approx(st["var"][0])
    assert st["eps_final"][0] > rem
    st = htf.count_step(np.array([3.0]), np.array([9]), 0, E, stop_count=10, stop_cells=5,
                        rng=np.random.default_rng(2))
    assert st["pruned"].all() and st["eps_final"][0] == E[0]   # height 0: release the E[0] draw


def test_small_upload_share_works_paper_explains():
    rng = np.random.default_rng(5)
    tiny = dp.PointData(rng.uniform(0.2, 0.4, 50), rng.uniform(0.5, 0.6, 50))
    rel = dp.release("htf", tiny, UNIT, 1.0, seed=gen(1))
    _check_release(rel, 1.0)
    with pytest.raises(ParameterError, match="budget_mode 'share'") as exc:
        dp.release("htf", tiny, UNIT, 0.001, params={"budget_mode": "paper"}, seed=1)
    assert "Raise ε" in str(exc.value)
    with pytest.raises(ParameterError, match="Raise ε"):
        dp.release("htf", tiny, UNIT, 1.0, params={"budget_mode": "paper", "eps_prt_level": 1.0},
                   seed=1)
    with pytest.raises(ParameterError, match="Raise ε"):
        dp.release("htf", tiny, UNIT, 1e-4, seed=1)        # share mode: ε_height floor is 1e-4
    empty = dp.PointData([], [])
    rel = dp.release("htf", empty, UNIT, 1.0, seed=gen(2))
    _check_release(rel, 1.0)


def test_paper_mode_caps_an_unaffordable_height():
    # The old failure: in paper mode a noisy size can ask for more levels than ε pays for. The
    # size was drawn, then the plan raised: ε spent and not recorded, and the message showed the
    # data-derived height. Now the height is capped at the largest one the budget affords,
    # computed from public values before the draw, and the release goes through.
    eps, lvl = 1.0, 0.1
    h_afford = htf.affordable_height(eps, htf.PAPER_EPS_HEIGHT, 20, mode="paper", eps_prt_level=lvl)
    assert h_afford == 9                                  # 1e-4 + 9 * 0.1 < 1 <= 1e-4 + 10 * 0.1
    with pytest.raises(ParameterError):                    # what the old code ran into
        htf.plan_budget(eps, 10, htf.PAPER_EPS_HEIGHT, mode="paper", eps_prt_level=lvl)
    big = lambda kind, scale, size: np.full(size, 10 ** 9 if kind == "height" else 0)  # noqa: E731
    t = htf.build(clustered_matrix((64, 64), seed=1), eps, budget_mode="paper",
                  eps_prt_level=lvl, noise=big)
    assert t.info["h"] == t.info["h_afford"] == 9 < htf.estimate_height(t.info["noisy_size"], eps,
                                                                        h_max=t.info["h_max"])
    t.ledger.check(eps)
    # end to end with the default samplers: ~200k points ask for h = 14
    data, dom = dp.load_sample("city_200k")
    rel = dp.release("htf", data, dom, eps, params={"budget_mode": "paper", "eps_prt_level": lvl,
                                                    "base_cells": 256}, seed=gen(6))
    _check_release(rel, eps)
    info = rel.tree_info
    assert htf.estimate_height(info["noisy_size"], eps, h_max=info["h_max"]) > info["h"] == 9
    assert rel.ledger.total == pytest.approx(eps, abs=1e-12)
    assert "at most 9, the largest height" in rel.ledger.entries[0].note
    assert info["eps_data"] == pytest.approx(eps - 1e-4 - 9 * lvl)


def test_impossible_paper_request_refuses_before_any_draw():
    # even h = 1 does not fit (1e-4 + 1.0 >= 1): refused before anything is drawn, with a
    # message built from public inputs only (the same for every dataset, no size or height)
    messages = []
    for n in (37, 4321):
        F = np.zeros((16, 16))
        F[3, 5] = n
        rng = gen(7)
        state = rng.bit_generator.state
        draws = []
        with pytest.raises(ParameterError, match="Raise ε") as exc:
            htf.build(F, 1.0, rng, budget_mode="paper", eps_prt_level=1.0,
                      on_draw=lambda *a: draws.append(a))
        assert draws == [] and rng.bit_generator.state == state
        messages.append(str(exc.value))
        assert str(n) not in messages[-1]
    assert messages[0] == messages[1]
    rng = gen(8)
    state = rng.bit_generator.state
    data, dom = dp.load_sample("small_city_5k")
    with pytest.raises(ParameterError):
        dp.release("htf", data, dom, 0.5, params={"budget_mode": "paper", "eps_prt_level": 0.5},
                   seed=rng)
    assert rng.bit_generator.state == state


def test_spec_and_params():
    spec = dp.mechanisms()["htf"]
    assert spec.label == "HTF tree (homogeneity splits)" and spec.private
    assert spec.budget_parts == ("height", "partition", "counts")
    assert spec.default_split == (0.01, 0.15, 0.84)
    assert "event-level" in spec.guarantee.lower() and "add" in spec.guarantee.lower()
    assert spec.unit == ADD_REMOVE_POINT
    assert "not treated as public" in spec.guarantee and "ε_height" in spec.guarantee
    p = spec.resolve_params({})
    assert p["budget_mode"] == "share" and p["T"] == 3 and p["stop_count"] == 100
    assert p["stop_cells"] == 5 and p["c0"] == 10 and p["base_cells"] == 1024
    assert p["extent_first"] is False and p["combine_pruned"] is False
    assert p["split_rule"] == "midpoint"
    rule = next(q for q in spec.params if q.name == "split_rule")
    assert set(rule.choices) == {"midpoint", "search"} and "paper" in rule.help
    with pytest.raises(ParameterError):
        spec.resolve_params({"split_rule": "gated"})
    assert all(q.label and len(q.help) > 20 for q in spec.params)
    with pytest.raises(ParameterError):
        spec.resolve_params({"budget_mode": "magic"})


# ------------------------------------------------------------------ zero_sd (post-processing)
def test_infer_leaves_worked_example():
    """Every count draw + 1 (height: + 0), points in the western half of an 8 x 8 grid, ε 1:
    the recorded tree matches the visited nodes, and with zero_sd 1 the leaves of the empty
    half (noisy count 1, below one sd of their noise) are released as 0 while the leaves add up
    to the least-squares root estimate; as published (0) they keep their 1."""
    F = np.zeros((8, 8))
    F[:, :4] = 40.0
    plus_one = lambda kind, scale, size: np.zeros(size) if kind == "height" else np.ones(size)  # noqa: E731
    t = htf.build(F, 1.0, budget_mode="share", split_rule="midpoint", stop_count=10.0,
                  noise=plus_one)
    assert len(t.node_parent) == len(t.nodes) == len(t.node_y) and t.node_parent[0] == -1
    tree = Tree(t.nodes[:, :4], t.nodes[:, 4], t.node_parent)
    assert np.array_equal(np.sort(t.leaf_node), np.flatnonzero(tree.is_leaf))
    assert np.array_equal(t.nodes[t.leaf_node, :4], t.leaves)
    internal = ~tree.is_leaf
    assert np.array_equal(t.node_y[internal], box_sums(summed_area(F), t.nodes[internal, :4]) + 1)
    empty = box_sums(summed_area(F), t.leaves) == 0
    assert empty.any() and np.all(t.counts[empty] == 1.0)
    assert np.all(np.sqrt(t.leaf_var[empty]) > 1.0)             # 1 is not significant
    counts, zeroed = htf.infer_leaves(t, 1.0)
    assert np.all(counts[empty] == 0.0) and zeroed[empty].all() and np.all(counts >= 0)
    y = t.node_y.copy()
    var = t.node_var.copy()
    y[t.leaf_node], var[t.leaf_node] = t.counts, t.leaf_var
    x, _ = consistent(tree, y, var)
    assert counts.sum() == pytest.approx(x[0])


def test_zero_sd_release_and_default_off():
    rng = np.random.default_rng(0)
    pts = dp.PointData(rng.uniform(0.0, 0.5, 3000), rng.uniform(0.0, 1.0, 3000))
    p = {"base_cells": 64}
    off = dp.release("htf", pts, UNIT, 0.5, params=p, seed=np.random.default_rng(3))
    on = dp.release("htf", pts, UNIT, 0.5, params={**p, "zero_sd": 1.0},
                    seed=np.random.default_rng(3))
    assert htf.HTF.resolve_params({})["zero_sd"] == 0.0 and off.leaf_var is not None
    assert np.array_equal(on.leaves, off.leaves) and on.leaf_var is None
    assert np.all(on.counts >= 0) and on.diagnostics["leaves_zeroed"] > 0
    assert on.ledger.total == pytest.approx(off.ledger.total) == pytest.approx(0.5)
