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


def test_the_half_width_is_the_noise_quantile_of_the_sum():
    # one region: the two-sided 95% quantile of one discrete Laplace(scale 2) draw, exactly
    # P(|Z| <= h) = 1 - 2 e^{-(h+1)/2} / (1 + e^{-1/2}) for whole h: the smallest h with >= 0.95
    a = math.exp(-1 / 2)
    exact = next(h for h in range(100) if 1 - 2 * a ** (h + 1) / (1 + a) >= 0.95)
    assert sum_half_width(np.array([2.0]), 0.95, 200_000, 0) == pytest.approx(exact, abs=1)
    assert sum_half_width(np.array([0.0, 0.0]), 0.95, 1000, 0) == 0.0            # exact counts
    # many regions: the normal approximation with the summed variance
    s = np.full(500, 3.0)
    var = float(dp.noise.discrete_laplace_variance(s).sum())
    assert sum_half_width(s, 0.95, 1000, 0) == pytest.approx(1.959964 * math.sqrt(var), rel=1e-6)


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
        lo, hi = rel.bounds(rects, n_sim=2000)
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
        buggy_hi = counts[inside].sum() + sum_half_width(rel.region_noise_scales()[inside], 0.95, 2000, 0)
        hits += truth <= buggy_hi
        assert rel.bounds([rect], n_sim=2000)[1][0] >= buggy_hi
    assert hits / 200 < 0.5


def test_hidden_zeros_count_as_the_threshold_above_and_the_floor_below():
    # PrivTree with zero_below: a released 0 hides a noisy count <= τ = zero_below / ε_counts.
    # The upper end counts every touched 0 as τ; the lower end takes k_β per hidden region
    # inside, k_β the least k with P(Z <= -k) = a^k / (1 + a) <= β (a = e^(-1/scale))
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
    lo, hi = rel.bounds([whole], n_sim=2000)
    h = sum_half_width(rel.leaf_scale, 0.95, 2000, 0)
    assert hi[0] == pytest.approx(rel.counts.sum() + tau[zero].sum() + h)
    beta = 0.05 / 4 / len(rel.counts)
    h_lo = sum_half_width(rel.leaf_scale, 0.975, 2000, 0)
    floor = laplace_floor(float(rel.leaf_scale.max()), beta) * zero.sum()
    assert lo[0] == pytest.approx(max(rel.counts.sum() - floor - h_lo, 0.0))
    assert lo[0] <= data.n <= hi[0]
