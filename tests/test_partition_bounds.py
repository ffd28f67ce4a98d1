"""The assumption-free interval (`dp.partition_bounds`): between the noisy sums of the regions
wholly inside a rectangle and of the regions it touches, widened by each sum's noise."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dp
from dp.partition_bounds import laplace_floor, partition_bounds, sum_half_width

BOX = dp.Domain(0.0, 0.0, 1.0, 1.0, name="unit")


def corner_points(n_per_cell: int = 40, cells: int = 4) -> dp.PointData:
    """Every cell's points packed in its south-west corner: the worst case for the even spread
    inside cells, so an answer that assumes it is far off where a rectangle cuts cells."""
    step = 1.0 / cells
    j, k = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
    x = np.repeat(k.ravel() * step + 0.01 * step, n_per_cell)
    y = np.repeat(j.ravel() * step + 0.01 * step, n_per_cell)
    return dp.PointData(x, y)


def test_an_exact_grid_gives_the_inner_and_touched_counts():
    # a 4 x 4 grid with no noise (exact counts; not private, a check of the sums): the rectangle
    # [0.1, 0.6] x [0, 0.5] holds cell column 1 whole in rows 0-1 (2 cells, 80 points) and touches
    # columns 0-2 in rows 0-1 (6 cells, 240 points); its true count (corners at 0.0025 + 0.25 k)
    # is the 80 points of columns 1, and 2's corner at 0.5025 is outside: 80
    data = corner_points()
    rel = dp.release("best_nonpriv", data, BOX, 1.0, params={"grid_sizes": [4]})
    rect = dp.Rect(0.1, 0.0, 0.6, 0.5)
    lo, hi = rel.bounds([rect])
    assert (lo[0], hi[0]) == (80.0, 240.0)
    assert lo[0] <= data.true_count(rect, BOX) <= hi[0]


def test_the_half_width_is_the_exact_quantile_of_the_sum():
    # one region: P(|Z| <= h) = 1 - 2 a^(h+1) / (1 + a), a = e^(-1/scale), for discrete Laplace;
    # the half-width is the least whole h with that >= 0.95, exactly
    for scale in (0.3, 2.0, 25.0):
        a = math.exp(-1 / scale)
        exact = next(h for h in range(1000) if 1 - 2 * a ** (h + 1) / (1 + a) >= 0.95)
        assert sum_half_width(np.array([scale]), 0.95) == exact
    assert sum_half_width(np.array([0.0, 0.0]), 0.95) == 0                    # exact counts
    # two regions: the convolution written out, P(|Z1 + Z2| <= h) summed over z1
    a = math.exp(-1 / 3.0)
    p = lambda z: (1 - a) / (1 + a) * a ** abs(z)                      # noqa: E731
    within = lambda h: sum(p(z) * sum(p(w) for w in range(-h - z, h - z + 1)) for z in range(-400, 401))  # noqa: E731
    h = sum_half_width(np.array([3.0, 3.0]), 0.95)
    assert within(h) >= 0.95 > within(h - 1)
    # many regions (256 at scale 0.12, ε about 8): the integer sum's quantile, where the
    # normal rule's half-width covers far less than 95% (the review's case: 0.85)
    s = np.full(256, 0.12)
    rng = np.random.default_rng(0)
    q = -np.expm1(-1 / 0.12)
    sums = (rng.geometric(q, (200_000, 256)) - rng.geometric(q, (200_000, 256))).sum(1)
    h = sum_half_width(s, 0.95)
    # 200,000 draws: the coverage's standard error is below 0.0005, so 4 of them apart
    assert np.mean(np.abs(sums) <= h) >= 0.95 - 0.002
    assert np.mean(np.abs(sums) <= h - 1) < 0.95 + 0.002
    normal = 1.959964 * math.sqrt(float(dp.noise.discrete_laplace_variance(s).sum()))
    assert np.mean(np.abs(sums) <= normal) < 0.9


@pytest.mark.slow
@pytest.mark.parametrize("name,params", [("identity", {"grid_size": 4}), ("privtree", {"base_cells": 64}),
                                         ("privtree", {"base_cells": 64, "zero_below": 5.0})])
def test_coverage_holds_where_the_even_spread_fails(name, params):
    # corner-packed points, rectangles that cut cells: over 400 releases the interval holds the
    # true count at least 95% of the time, less 4 binomial standard deviations (0.044), while
    # the noise-only interval around the even-spread answer misses far more often
    data = corner_points()
    rects = [dp.Rect(0.1, 0.0, 0.6, 0.5), dp.Rect(0.0, 0.3, 0.9, 0.8), dp.Rect(0.26, 0.26, 0.74, 0.74)]
    truth = np.array([data.true_count(r, BOX) for r in rects])
    runs, hits, noise_hits = 400, np.zeros(3), np.zeros(3)
    for s in range(runs):
        rel = dp.release(name, data, BOX, 0.5, params=params, seed=np.random.default_rng(s))
        lo, hi = rel.bounds(rects)
        hits += (lo <= truth) & (truth <= hi)
        noise_hits += [a <= t <= b for (a, b), t in zip((rel.interval(r, n_sim=2000) for r in rects), truth)]
    tol = 4 * math.sqrt(0.95 * 0.05 / runs)
    assert np.all(hits / runs >= 0.95 - tol), hits / runs
    assert np.min(noise_hits / runs) < 0.5, noise_hits / runs


@pytest.mark.parametrize("name,params", [("full_quadtree", {}), ("quadtree", {"height": 3}), ("dawa", {})])
def test_releases_without_independent_region_noise_say_so(name, params):
    # jointly fitted counts (consistency, least squares) have no assumption-free interval:
    # NaN, never a made-up one
    rel = dp.release(name, corner_points(), BOX, 1.0, params=params, seed=np.random.default_rng(1))
    assert rel.region_noise_scales() is None
    lo, hi = partition_bounds(rel, [dp.Rect(0.1, 0.1, 0.6, 0.6)])
    assert np.isnan(lo).all() and np.isnan(hi).all()


@pytest.mark.slow
def test_a_planted_bug_that_drops_the_touched_cells_is_caught():
    # the interval's upper end must count every region the rectangle touches; counting only the
    # regions inside it (a plausible slip) loses coverage on the corner-packed points
    data = corner_points()
    rect = dp.Rect(0.0, 0.0, 0.6, 0.6)        # touches 9 cells, holds 4, true count 9 x 40
    truth = data.true_count(rect, BOX)
    hits = 0
    for s in range(200):
        rel = dp.release("identity", data, BOX, 0.5, params={"grid_size": 4}, seed=np.random.default_rng(s))
        grid, ranges, counts = rel.regions()
        r0, r1, c0, c1 = ranges.T
        inside = (r1 <= 2) & (c1 <= 2)
        buggy_hi = counts[inside].sum() + sum_half_width(rel.region_noise_scales()[inside], 0.95)
        hits += truth <= buggy_hi
        assert rel.bounds([rect])[1][0] >= buggy_hi
    assert hits / 200 < 0.5


def test_hidden_zeros_count_as_the_threshold_above_and_the_floor_below():
    # PrivTree with zero_below: a released 0 hides a noisy count <= τ = zero_below / ε_counts.
    # The upper end counts every touched 0 as ⌊τ⌋; the lower end takes k_β - 1 per hidden
    # region inside, k_β the least k with P(Z <= -k) = a^k / (1 + a) <= β (a = e^(-1/scale))
    a = math.exp(-1 / 4.0)
    k = laplace_floor(4.0, 0.001)
    assert a ** k / (1 + a) <= 0.001 < a ** (k - 1) / (1 + a)
    data = corner_points()
    rel = dp.release("privtree", data, BOX, 1.0, params={"base_cells": 64, "zero_below": 5.0},
                     seed=np.random.default_rng(3))
    tau = rel.zero_threshold()
    assert tau is not None and np.allclose(tau, 5.0 * rel.leaf_scale)
    zero = rel.counts == 0
    assert zero.any()
    whole = dp.Rect(0, 0, 1, 1)                       # every leaf inside and touched
    lo, hi = rel.bounds([whole])
    h = sum_half_width(rel.leaf_scale, 0.95)
    assert hi[0] == pytest.approx(rel.counts.sum() + np.floor(tau[zero]).sum() + h)
    beta = 0.05 / 4 / len(rel.counts)
    h_lo = sum_half_width(rel.leaf_scale, 0.975)
    floor = (laplace_floor(float(rel.leaf_scale.max()), beta) - 1) * zero.sum()
    assert lo[0] == pytest.approx(max(rel.counts.sum() - floor - h_lo, 0.0))
    assert lo[0] <= data.n <= hi[0]


def test_no_range_where_its_premise_fails():
    # user-level: the counts are of each user's kept points, so the upper end would be wrong
    # (the review's case: one user with 500 points got [0, 27] against 504)
    rng = np.random.default_rng(4)
    x, y = rng.uniform(0.1, 0.2, 500), rng.uniform(0.1, 0.2, 500)
    users = dp.PointData(x, y, user=np.zeros(500, dtype=np.int64))
    rel = dp.release("identity", users, BOX, 1.0, params={"grid_size": 4}, max_points_per_user=5,
                     seed=np.random.default_rng(1))
    assert np.isnan(rel.bounds([dp.Rect(0, 0, 0.5, 0.5)])).all()
    # counts re-binned from a grid whose lines are not the release's (12 x 12 counts, 8 x 8 grid)
    counts = dp.CountData(np.ones((12, 12)) * 100, BOX)
    rel = dp.release("identity", counts, BOX, 1.0, params={"grid_size": 8}, seed=np.random.default_rng(1))
    assert np.isnan(rel.bounds([dp.Rect(0, 0, 0.5, 0.5)])).all()
    rel = dp.release("identity", counts, BOX, 1.0, params={"grid_size": 6}, seed=np.random.default_rng(1))
    lo, hi = rel.bounds([dp.Rect(0, 0, 0.5, 0.5)])                 # 6 divides 12: it holds
    assert lo[0] <= 3600 <= hi[0]
    # points clamped into the box (the bounded grid) and a grid chosen on true answers (leaky)
    pts = corner_points()
    for name, params in (("bounded_grid", {"bins_per_side": 4}),
                         ("leaky", {"grid_sizes": [2, 4]})):
        rel = dp.release(name, pts, BOX, 1.0, params=params, seed=np.random.default_rng(1))
        assert np.isnan(rel.bounds([dp.Rect(0, 0, 0.5, 0.5)])).all(), name
    # a rectangle of no width on the box's closed east edge touches the last column
    on_edge = dp.PointData(np.full(30, 1.0), np.full(30, 0.5))
    rel = dp.release("best_nonpriv", on_edge, BOX, 1.0, params={"grid_sizes": [4]})
    lo, hi = rel.bounds([dp.Rect(1.0, 0.0, 1.0, 1.0)])
    assert lo[0] == 0 and hi[0] == 30 == on_edge.true_counts([dp.Rect(1.0, 0.0, 1.0, 1.0)], BOX)[0]
