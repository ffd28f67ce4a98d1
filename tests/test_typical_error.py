"""The typical total error is measured on public synthetic data and behaves as theory says.

Tolerances come from the sampling distribution of a median: for n draws with density f at the
median m, the sample median's standard deviation is about 1 / (2 f sqrt(n)); checks allow 4.5
of them.
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import dp
from dp import typical_error as te

DOMAIN = dp.PRESETS["London"]
Z_MEDIAN = 0.6745          # median of |N(0, 1)|
SDS = 4.5


def median_sd(n: int, density: float) -> float:
    """Standard deviation of the median of n draws with this density at the median."""
    return 1.0 / (2.0 * density * math.sqrt(n))


def test_area_bucket_is_the_nearest_rung_on_a_log_scale():
    assert te.area_bucket(0.01) == 2.0 ** -7            # log2(1/0.01) = 6.64
    assert te.area_bucket(0.25) == 0.25 and te.area_bucket(1.0) == 1.0
    assert te.area_bucket(3.0) == 1.0                   # larger than the box: the whole box
    assert te.area_bucket(1e-9) == te.AREA_BUCKETS[0]   # tinier than the ladder: its smallest
    for a in np.geomspace(te.AREA_BUCKETS[0], 1, 50):
        assert abs(math.log2(te.area_bucket(a) / a)) <= 0.5 + 1e-12
    with pytest.raises(dp.ParameterError, match="positive"):
        te.area_bucket(0.0)


def test_synthetic_points_are_public_and_inside_the_box():
    for shape in te.SHAPES:
        pts = te.synthetic_points(DOMAIN, 5000, shape, seed=3)
        assert pts.n == 5000 and "synthetic" in pts.name
        assert DOMAIN.west <= pts.x.min() and pts.x.max() <= DOMAIN.east
        assert DOMAIN.south <= pts.y.min() and pts.y.max() <= DOMAIN.north
        again = te.synthetic_points(DOMAIN, 5000, shape, seed=3)
        assert np.array_equal(pts.x, again.x) and np.array_equal(pts.y, again.y)
    with pytest.raises(dp.ParameterError, match="shape"):
        te.synthetic_points(DOMAIN, 10, "ring")


def test_the_simulation_takes_no_user_data():
    """Only public settings go in: no data, no size or bounding box read from one."""
    names = set(inspect.signature(te.typical_errors).parameters)
    assert not names & {"data", "points", "n", "true_counts", "bbox"}
    a = te.typical_errors("ug", DOMAIN, 1.0, n_points=2000, area_fracs=(0.01,), repetitions=2)
    b = te.typical_errors("ug", DOMAIN, 1.0, n_points=2000, area_fracs=(0.01,), repetitions=2)
    assert a == b                                       # fixed seeds: a reproducible simulation


def test_even_spread_error_matches_the_binomial_spread():
    """`uniform` (one total spread evenly) on uniform points at a large ε: a rectangle holding a
    share a of the box has Binomial(N, a) points against an answer of N·a, so the median
    absolute error is 0.6745·sqrt(N a (1 − a)). Small rectangles rarely overlap, so the 400
    errors are close to independent draws."""
    n, a, q = 1_000_000, 2.0 ** -10, 400
    got = te.typical_errors("uniform", DOMAIN, 10.0, n_points=n, shape="uniform", area_fracs=(a,),
                            n_queries=q, repetitions=1)[a]
    sigma = math.sqrt(n * a * (1 - a))
    density = 2 * math.exp(-Z_MEDIAN ** 2 / 2) / math.sqrt(2 * math.pi) / sigma   # of |N(0, σ²)|
    assert abs(got - Z_MEDIAN * sigma) < SDS * median_sd(q, density)


def test_noise_error_matches_the_laplace_median():
    """On the whole box the even-spread error vanishes and the error is the noise |Z|, with Z
    discrete Laplace of scale 1/ε: its median is ln(4 / (1 + e^-ε)) / ε (about ln 2 / ε)."""
    eps, reps = 0.02, 400
    got = te.typical_errors("uniform", DOMAIN, eps, n_points=1000, area_fracs=(1.0,), n_queries=1,
                            repetitions=reps)[1.0]
    expected = math.log(4 / (1 + math.exp(-eps))) / eps
    density = eps * 2 * math.exp(-eps * expected) / (1 + math.exp(-eps))      # of |Z| there
    assert abs(got - expected) < SDS * median_sd(reps, density) + 1          # +1: integer draws


def test_total_error_exceeds_the_noise_only_spread_on_clustered_data():
    """The point of the column: on clustered points the even-spread assumption adds error that
    the noise-only interval does not show (here many times its typical size)."""
    a = 2.0 ** -6
    clustered = te.typical_errors("uniform", DOMAIN, 1.0, n_points=20_000, area_fracs=(a,))[a]
    flat = te.typical_errors("uniform", DOMAIN, 1.0, n_points=20_000, shape="uniform",
                             area_fracs=(a,))[a]
    data = te.synthetic_points(DOMAIN, 20_000)
    rel = dp.release("uniform", data, DOMAIN, 1.0, seed=0)
    rects = dp.random_workload(DOMAIN, 50, area_frac=a, rng=1)
    noise_only = Z_MEDIAN * float(np.median(np.sqrt(rel.noise_variance(rects))))
    assert clustered > 100 * noise_only and clustered > 5 * flat


def test_every_rung_is_measured_and_errors_grow_with_the_area():
    out = te.typical_errors("privtree", DOMAIN, 1.0, n_points=5000, repetitions=2, n_queries=100)
    assert list(out) == list(te.AREA_BUCKETS)
    assert all(v >= 0 for v in out.values())
    assert out[1.0 / 16] > out[te.AREA_BUCKETS[0]]
    with pytest.raises(dp.ParameterError, match="at least 1 point"):
        te.typical_errors("ug", DOMAIN, 1.0, n_points=0)
