"""DAWA 2-D (Li, Hay & Miklau 2014): Hilbert order, the private partition, GreedyH / H2, the
least-squares fit and the release."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

import dp
from dp.mechanisms import dawa as D
from dp.mechanisms.dawa import greedyh as G
from dp.mechanisms.dawa import partition as P
from dp.mechanisms.dawa.hilbert import hilbert_cells, hilbert_vector, interval_rects
from dp.mechanisms.leaves import paint
from dp.noise import discrete_laplace_variance

UNIT = dp.Domain(0.0, 0.0, 1.0, 1.0)


def zero_noise(kind, scale, shape):
    return np.zeros(shape, dtype=np.int64)


@pytest.fixture(scope="module")
def city():
    return dp.load_sample("small_city_5k")


# ---------------------------------------------------------------------------- Hilbert order
@pytest.mark.parametrize("k", range(0, 7))
def test_hilbert_is_a_bijection_with_unit_steps(k):
    row, col = hilbert_cells(k)
    side = 1 << k
    flat = row * side + col
    assert np.array_equal(np.sort(flat), np.arange(side * side))          # every cell once
    assert np.all(np.abs(np.diff(row)) + np.abs(np.diff(col)) == 1)        # neighbours follow


@pytest.mark.parametrize("k", [2, 3, 5])
def test_aligned_hilbert_intervals_are_aligned_squares_and_halves(k):
    row, col = hilbert_cells(k)
    for lvl in range(2 * k + 1):
        L = 1 << lvl
        starts = np.arange(0, 1 << (2 * k), L)
        rects = interval_rects(k, starts, np.full(starts.size, L))
        h, w = rects[:, 1] - rects[:, 0], rects[:, 3] - rects[:, 2]
        assert np.all(h * w == L)                                        # exactly its own cells
        m = lvl // 2
        if lvl % 2 == 0:                                                  # 2^m x 2^m, aligned
            assert np.all((h == 1 << m) & (w == 1 << m))
            assert np.all(rects[:, 0] % (1 << m) == 0) and np.all(rects[:, 2] % (1 << m) == 0)
        else:                                                             # two sibling quadrants
            assert np.all(np.sort(np.column_stack([h, w]), 1) == [1 << m, 2 << m])
    # the vector read in Hilbert order holds the matrix's values
    F = np.arange(16 * 16).reshape(16, 16)
    assert np.array_equal(hilbert_vector(F), F[hilbert_cells(4)])


# ---------------------------------------------------------------------------- partition
def brute_force(dev, levels, n, kappa):
    """Minimum of Σ (max(dev, 0) + kappa) over every partition of [0, n) into candidates."""
    cand = {0: np.zeros(n)}
    cand.update({l: np.asarray(dev[l]) for l in levels})

    best = {n: 0.0}
    for start in range(n - 1, -1, -1):                # best cost of [start, n)
        options = []
        for lvl, d in cand.items():
            L = 1 << lvl
            if start % L == 0 and start + L <= n:
                options.append(max(d[start // L], 0.0) + kappa + best[start + L])
        best[start] = min(options)
    return best[0]


def partition_cost(dev, starts, lvls, kappa):
    return sum((max(float(dev[l][s >> l]), 0.0) if l else 0.0) + kappa for s, l in zip(starts, lvls))


@pytest.mark.parametrize("shapes", P.SHAPES)
@pytest.mark.parametrize("seed", range(6))
def test_dp_partition_matches_brute_force(shapes, seed):
    rng = np.random.default_rng(seed)
    k = 2
    n = 1 << (2 * k)
    levels = P.candidate_levels(k, shapes)
    x = rng.poisson(rng.choice([0.5, 5, 40]), n) * rng.integers(0, 2, n)
    exact = {l: u * P.GRID for l, u in P.deviation_units(x, levels).items()}
    noisy = {l: rng.normal(0, 8, n >> l) for l in levels}                 # negatives clamp to 0
    for dev, kappa in ((exact, 1.0), (exact, 6.0), (noisy, 2.0)):
        starts, lvls, total = P.best_partition(dev, levels, n, kappa)
        assert total == pytest.approx(brute_force(dev, levels, n, kappa))
        assert partition_cost(dev, starts, lvls, kappa) == pytest.approx(total)
        ends = starts + (1 << lvls)
        assert starts[0] == 0 and ends[-1] == n and np.array_equal(starts[1:], ends[:-1])
        assert set(lvls.tolist()) <= {0, *levels}


def test_flat_vector_is_one_bucket_and_spikes_are_cut_out():
    levels = P.candidate_levels(3, "dyadic")
    x = np.full(64, 7)
    dev = {l: u * P.GRID for l, u in P.deviation_units(x, levels).items()}
    starts, lvls, _ = P.best_partition(dev, levels, 64, 1.0)
    assert starts.tolist() == [0] and lvls.tolist() == [6]
    x[37] = 500
    dev = {l: u * P.GRID for l, u in P.deviation_units(x, levels).items()}
    starts, lvls, _ = P.best_partition(dev, levels, 64, 1.0)
    assert [37, 0] in np.column_stack([starts, lvls]).tolist()           # the spike alone


def test_deviation_units_are_exact():
    rng = np.random.default_rng(3)
    x = rng.poisson(30, 1 << 10)
    levels = P.candidate_levels(5, "dyadic")
    units = P.deviation_units(x, levels)
    for lvl in levels:
        b = x.reshape(-1, 1 << lvl).astype(float)
        dev = np.abs(b - b.mean(1, keepdims=True)).sum(1)
        assert np.allclose(units[lvl], np.floor(dev / P.GRID + 0.5))


@pytest.mark.parametrize("shapes", P.SHAPES)
def test_deviation_sensitivity_bound_holds(shapes):
    # adding one point anywhere moves each level's deviation by at most 2(1 − 2^−ℓ), the
    # whole vector by at most Δ, and the rounded units by at most Δ/g + K
    rng = np.random.default_rng(4)
    k = 3
    levels = P.candidate_levels(k, shapes)
    delta = P.cost_sensitivity(levels)
    for x in (rng.poisson(3, 64), rng.poisson(0.3, 64) * 50, np.zeros(64, np.int64)):
        u = P.deviation_units(x, levels)
        for j in range(64):
            y = x.copy()
            y[j] += 1
            v = P.deviation_units(y, levels)
            moves = [np.abs(v[l] - u[l]).sum() * P.GRID for l in levels]
            assert all(m <= P.level_sensitivity(l) + P.GRID for m, l in zip(moves, levels))
            assert sum(np.abs(v[l] - u[l]).sum() for l in levels) <= delta / P.GRID + len(levels)
    assert P.cost_sensitivity(P.candidate_levels(8, "dyadic")) == pytest.approx(
        sum(2 * (1 - 2.0 ** -l) for l in range(1, 17)))


def test_noisy_deviations_have_the_stated_scale():
    # the noise in grid units is discrete Laplace((Δ/g + K)/ε1): its sample variance lies
    # within 5 standard errors (sd of s² ≈ σ² sqrt(5/n) for Laplace, kurtosis 6)
    rng = np.random.default_rng(11)
    k, eps1 = 5, 0.7
    levels = P.candidate_levels(k, "dyadic")
    x = np.random.default_rng(1).poisson(9, 1 << (2 * k))
    units = P.deviation_units(x, levels)
    z = []
    for _ in range(12):
        ledger = dp.Ledger()
        out = P.noisy_deviations(rng, x, levels, eps1, ledger)
        z.append(np.concatenate([out[l] / P.GRID - units[l] for l in levels]))
    z = np.concatenate(z)
    assert np.array_equal(z, np.rint(z))                                  # on the grid
    scale = (P.cost_sensitivity(levels) / P.GRID + len(levels)) / eps1
    var = float(discrete_laplace_variance(scale))
    assert abs(z.var() / var - 1) < 5 * math.sqrt(5 / z.size)
    assert abs(z.mean()) < 5 * math.sqrt(var / z.size)
    entry = ledger.entries[0]
    assert entry.scale == pytest.approx(scale * P.GRID)
    # the ledger states the noised vector's sensitivity: Δ plus one grid step per level
    assert entry.sensitivity == pytest.approx(P.cost_sensitivity(levels) + len(levels) * P.GRID)


# ---------------------------------------------------------------------------- GreedyH, H2, LS
def strategy_matrix(t: G.StrategyTree, n: int) -> np.ndarray:
    rows = np.zeros((t.n_nodes, n))
    for i in range(t.n_nodes):
        rows[i, t.lo[i]:t.hi[i]] = t.weight[i]
    return rows[t.weight > 0]


@pytest.mark.parametrize("n", [1, 2, 5, 13, 32])
def test_strategy_weights_sum_to_one_on_every_path(n):
    Q = np.random.default_rng(n).uniform(0, 1, (20, n))
    for t in (G.greedyh_tree(lambda lo, hi: Q[:, lo:hi], n), G.h2_tree(n)):
        s = t.path_sums()[t.leaf]
        assert s.max() <= 1.0 and s.max() == pytest.approx(1.0, abs=1e-11)
        assert np.all(t.weight >= 0) and np.all(t.weight[t.leaf] > 0)
        assert np.allclose(s, s.max())                   # no path is left with budget unspent
    h2 = G.h2_tree(n)
    assert np.allclose(h2.path_sums()[h2.leaf], h2.path_sums()[h2.leaf].max())


@pytest.mark.parametrize("n", [3, 8, 11])
def test_greedyh_error_matches_the_matrix_formula(n):
    # the recursive (Sherman-Morrison) error of the chosen strategy equals tr(QᵀQ (AᵀA)⁻¹)
    rng = np.random.default_rng(n)
    Q = rng.uniform(0, 1, (30, n)) * (rng.uniform(0, 1, (30, n)) < 0.6)
    pgrid = 1.0 - np.arange(100) / 100
    dec: dict = {}
    root = G._summarize(lambda lo, hi: Q[:, lo:hi], 0, n, pgrid, dec)
    t = G.greedyh_tree(lambda lo, hi: Q[:, lo:hi], n)
    A = strategy_matrix(t, n) / t.path_sums()[t.leaf].max()      # unit total weight per path
    err = np.trace(Q.T @ Q @ np.linalg.inv(A.T @ A))
    assert err == pytest.approx(float(root.err[0]), rel=1e-6)


def test_greedyh_measures_buckets_the_workload_cannot_tell_apart_once():
    # buckets 4..7 are covered alike by every query (here: by none): one measured group
    Q = np.zeros((6, 8))
    Q[:, :4] = np.random.default_rng(0).uniform(0, 1, (6, 4))
    t = G.greedyh_tree(lambda lo, hi: Q[:, lo:hi], 8)
    groups = [(a, b) for a, b, lf in zip(t.lo, t.hi, t.leaf) if lf]
    assert (4, 8) in groups and all(b - a == 1 for a, b in groups if a < 4)


def test_least_squares_equals_weighted_lstsq():
    rng = np.random.default_rng(5)
    n = 9
    t = G.h2_tree(n)
    t.weight[2] = 0.0                                              # one node not measured
    y = rng.normal(0, 3, t.n_nodes) + rng.integers(0, 20, t.n_nodes)
    var = np.where(t.weight > 0, rng.uniform(0.5, 4, t.n_nodes), np.inf)
    x = G.least_squares(t, y, var)
    A = np.zeros((t.n_nodes, n))
    for i in range(t.n_nodes):
        A[i, t.lo[i]:t.hi[i]] = 1
    m = np.isfinite(var)
    w = 1 / np.sqrt(var[m])
    leaf_est, *_ = np.linalg.lstsq(A[m] * w[:, None], y[m] * w, rcond=None)
    assert np.allclose(x, A @ leaf_est)


# ---------------------------------------------------------------------------- release
def test_ledger_sums_to_epsilon_and_names_sensitivities(city):
    data, dom = city
    rel = dp.release("dawa", data, dom, 0.8, params={"base_cells": 64}, seed=np.random.default_rng(1))
    assert rel.ledger.total == pytest.approx(0.8, rel=1e-12)
    steps = rel.ledger.entries
    assert len(steps) == 2 and all(e.sensitivity > 0 and e.private for e in steps)
    assert steps[0].epsilon == pytest.approx(0.2) and steps[1].epsilon == pytest.approx(0.6)
    levels = P.candidate_levels(6)     # Δ plus one grid step per level (the rounding)
    assert steps[0].sensitivity == pytest.approx(P.cost_sensitivity(levels) + len(levels) * P.GRID)
    assert steps[1].sensitivity == 1.0


def test_release_end_to_end_on_small_city(city):
    data, dom = city
    rel = dp.release("dawa", data, dom, 1.0, seed=np.random.default_rng(2))
    assert isinstance(rel, D.DawaRelease) and rel.private
    grid, leaves, counts = rel.regions()
    assert grid.shape == (256, 256)
    assert np.allclose(paint(grid.shape, leaves, np.ones(len(leaves))), 1.0)   # a tiling
    h, w = leaves[:, 1] - leaves[:, 0], leaves[:, 3] - leaves[:, 2]
    assert np.all((h == w) | (h == 2 * w) | (w == 2 * h))          # squares and halves
    assert counts.sum() == pytest.approx(data.n, rel=0.05)
    assert rel.answer(dp.Rect(*dom.bounds)) == pytest.approx(counts.sum())
    assert np.all(rel.eps_path == 1.0) and math.isnan(rel.noise_variance(dp.Rect(*dom.bounds))[0])
    reg, cnt = rel.partition_at(0)
    assert len(reg) == 1 and cnt.sum() == pytest.approx(counts.sum())
    meta = json.loads(rel.to_json())["properties"]
    assert meta["workload"] == {"kind": "random", "queries": 1000, "query_area": 0.05,
                                "workload_seed": 0}
    assert "bucket_counts" not in json.dumps(meta)
    # the estimate follows the data: a dense quarter gets more than a sparse one
    q = [dp.Rect(dom.west + a * dom.width / 2, dom.south + b * dom.height / 2,
                 dom.west + (a + 1) * dom.width / 2, dom.south + (b + 1) * dom.height / 2)
         for a in (0, 1) for b in (0, 1)]
    true = data.true_counts(q, dom)
    assert np.argmax(rel.answer_many(q)) == np.argmax(true)


def test_uniform_data_gives_one_or_few_buckets():
    c = (np.arange(16) + 0.5) / 16
    X, Y = np.meshgrid(c, c)
    data = dp.PointData(np.repeat(X.ravel(), 5), np.repeat(Y.ravel(), 5))   # 5 per cell
    params = D.DAWA.resolve_params({"base_cells": 16})
    exact = D.release_dawa(data, UNIT, 1.0, (0.25, 0.75), params, None, noise=zero_noise)
    assert exact.n_leaves == 1 and exact.counts[0] == pytest.approx(data.n)
    sizes = [dp.release("dawa", data, UNIT, 1.0, params={"base_cells": 16},
                        seed=np.random.default_rng(s)).n_leaves for s in range(40)]
    # every deviation is 0: a bucket is merged whenever its noise is <= 1/ε2, about half the
    # time at each level (measured: mean 3.3 buckets of 256 cells, median 1-2)
    assert np.mean(sizes) < 8 and np.median(sizes) <= 2


@pytest.mark.parametrize("strategy", G.STRATEGIES)
def test_noiseless_answers_on_the_base_grid_are_bucket_averages(city, strategy):
    data, dom = city
    # the published fit (zero_sd 0): zeroing would clear exact counts below one noise sd
    params = D.DAWA.resolve_params({"base_cells": 32, "strategy": strategy, "zero_sd": 0.0})
    rel = D.release_dawa(data, dom, 2.0, (0.25, 0.75), params, None, noise=zero_noise)
    F = data.histogram(rel.base)
    raster, _ = rel.raster()
    if strategy == "h2":                      # every bucket measured: its exact average
        expect = paint(F.shape, rel.leaves, rel.diagnostics["bucket_counts"] / rel.leaf_areas())
        assert np.allclose(raster, expect)
        assert np.allclose(rel.counts, rel.diagnostics["bucket_counts"])
    assert raster.sum() == pytest.approx(F.sum())
    # a cell-aligned query over whole buckets gets the exact count of the data in it
    ex, ey = rel.base.edges_x, rel.base.edges_y
    r0, r1, c0, c1 = rel.leaves[np.argmax(rel.leaf_areas())]
    if strategy == "h2":
        ans = rel.answer(dp.Rect(ex[c0], ey[r0], ex[c1], ey[r1]))
        assert ans == pytest.approx(F[r0:r1, c0:c1].sum())


def test_explicit_workload_and_its_metadata(city):
    data, dom = city
    rects = dp.queries.random_workload(dom, 50, area_frac=0.02, rng=np.random.default_rng(9))
    rel = dp.release("dawa", data, dom, 1.0, params={"base_cells": 64}, workload=rects,
                     seed=np.random.default_rng(3))
    assert rel.private and rel.ledger.total == pytest.approx(1.0)
    assert rel.metadata()["workload"] == {"kind": "explicit", "queries": 50}
    demo = dp.release("dawa", data, dom, 1.0, params={"base_cells": 64}, workload=rects, seed=4)
    assert demo.reproducible_demo and not demo.private
    with pytest.raises(dp.ParameterError):
        dp.release("dawa", data, dom, 1.0, workload=np.zeros((0, 4)))
    with pytest.raises(dp.ParameterError, match="takes no workload"):
        dp.release("privtree", data, dom, 1.0, workload=rects)
    with pytest.raises(dp.ParameterError):
        dp.release("dawa", data, dom, 1.0, params={"base_cells": 100})


@pytest.mark.parametrize("bad", [np.zeros((0, 4)), [[0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0, 1.0]],
                                 [[0.0, 0.0, np.nan, 1.0]], "abc"])
def test_malformed_workload_refused_before_any_draw(city, bad):
    # a refusal reads nothing and draws nothing: the generator is untouched
    data, dom = city
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    with pytest.raises(dp.ParameterError, match="workload: expected one or more rectangles"):
        dp.release("dawa", data, dom, 1.0, workload=bad, seed=rng)
    assert rng.bit_generator.state == state


def test_spec_is_registered_with_its_parts():
    spec = dp.mechanisms()["dawa"]
    assert spec.budget_parts == ("partition", "counts") and spec.default_split == (0.25, 0.75)
    assert spec.unit == "add/remove one point" and "add/remove one point" in spec.guarantee
    assert {p.name for p in spec.params} >= {"base_cells", "strategy", "workload_queries",
                                              "query_area", "workload_seed"}


def test_brute_force_helper_enumerates_all_partitions():
    # sanity of the helper itself: 8 cells, dyadic candidates, every partition listed
    levels = (1, 2, 3)
    dev = {1: np.zeros(4), 2: np.zeros(2), 3: np.zeros(1)}
    count = 0
    for cuts in itertools.product([0, 1], repeat=7):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [8]
        ok = all((b - a) & (b - a - 1) == 0 and a % (b - a) == 0 for a, b in zip(bounds, bounds[1:]))
        count += ok
    assert count == 26          # partitions of 8 into aligned dyadic intervals
    assert brute_force(dev, levels, 8, 1.0) == 1.0


# ------------------------------------------------------------- zeroing insignificant groups
def test_zero_groups_worked_example():
    """Two groups of 4 cells under an unmeasured root, noisy counts 100 and 1 with variance 4
    (sd 2): at zero_sd 1 the second is not significant (1 < 2), so it is released as empty and
    its count goes to its neighbour: 101 and 0, the total kept. At 0: non-negativity alone."""
    t = G.StrategyTree(lo=np.array([0, 0, 1]), hi=np.array([2, 1, 2]), parent=np.array([-1, 0, 0]),
                       depth=np.array([0, 1, 1]), weight=np.array([0.0, 1.0, 1.0]),
                       leaf=np.array([False, True, True]))
    y = np.array([0.0, 100.0, 1.0])
    var = np.array([np.inf, 4.0, 4.0])
    x = G.least_squares(t, y, var)
    assert np.allclose(x, [101.0, 100.0, 1.0])
    area = np.array([4.0, 4.0])
    out, zeroed = D.zero_groups(t, x, var, area, 1.0)
    assert np.allclose(out, [101.0, 101.0, 0.0]) and zeroed.tolist() == [False, False, True]
    out, zeroed = D.zero_groups(t, x, var, area, 0.0)
    assert np.allclose(out, x) and not zeroed.any()
    neg = G.least_squares(t, np.array([0.0, 10.0, -4.0]), var)          # clipped, total kept
    out, _ = D.zero_groups(t, neg, var, area, 0.0)
    assert np.allclose(out, [6.0, 6.0, 0.0])


def test_zero_sd_releases_empty_areas_as_empty():
    """Points in the western half only (ε 0.2, seed 2: 34 of 45 buckets in the empty east): at
    zero_sd 1 (the default) the empty eastern half carries 53 points against 230 of noise and every count is >= 0, where the least-squares
    estimates of 0 (as published) are noise; the same noise gives the same total (the zeroed
    mass moves to the kept neighbours)."""
    rng = np.random.default_rng(0)
    pts = dp.PointData(rng.uniform(0.0, 0.5, 4000), rng.uniform(0.0, 1.0, 4000))
    p = {"base_cells": 32, "workload_queries": 50}
    on = dp.release("dawa", pts, UNIT, 0.2, params=p, seed=np.random.default_rng(2))
    off = dp.release("dawa", pts, UNIT, 0.2, params={**p, "zero_sd": 0.0},
                     seed=np.random.default_rng(2))
    assert np.array_equal(on.leaves, off.leaves)                   # the same partition
    assert np.all(on.counts >= 0) and off.counts.min() < 0
    east = on.leaves[:, 2] >= 16
    assert on.counts[east].sum() < 0.5 * np.abs(off.counts[east]).sum()
    assert on.counts.sum() == pytest.approx(off.counts.sum(), rel=1e-9)
