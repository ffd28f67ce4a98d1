"""Whole, non-negative people from noisy counts (issue 26, item 4): `dp.whole_counts`."""
import itertools

import numpy as np
import pytest

from dp.whole_counts import largest_remainder, simplex_projection, whole_nonnegative


def test_worked_example():
    """y = (5, −1.3, 2.2, 0.4), total 6.3 -> T = 6. Projection: θ with Σ max(y − θ, 0) = 6 over
    the kept entries 5 and 2.2 is θ = (5 + 2.2 − 6) / 2 = 0.6 (0.4 − 0.6 < 0, so 0.4 drops out):
    (4.4, 0, 1.6, 0). Largest remainders: floors (4, 0, 1, 0) sum to 5; the larger remainder
    (0.6 of 1.6) gets the sixth person: (4, 0, 2, 0)."""
    y = np.array([5.0, -1.3, 2.2, 0.4])
    np.testing.assert_allclose(simplex_projection(y, 6), [4.4, 0.0, 1.6, 0.0])
    assert whole_nonnegative(y).tolist() == [4, 0, 2, 0]


def test_projection_is_the_closest_non_negative_vector_with_that_sum():
    """Checked against a brute-force search over a fine lattice of candidates in 3 dimensions."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        y = rng.normal(1.0, 2.0, 3)
        t = float(max(0.5, round(y.sum())))
        x = simplex_projection(y, t)
        assert (x >= 0).all() and x.sum() == pytest.approx(t)
        step = t / 60
        best = min(np.sum((np.array([a, b, t - a - b]) - y) ** 2)
                   for a, b in itertools.product(np.arange(0, t + 1e-9, step), repeat=2) if a + b <= t + 1e-9)
        assert np.sum((x - y) ** 2) <= best + 1e-9


def test_whole_counts_keep_the_total_and_are_non_negative():
    rng = np.random.default_rng(2)
    for n in (1, 7, 1000):
        y = rng.laplace(0.0, 10.0, n) + rng.poisson(3.0, n)
        w = whole_nonnegative(y)
        assert w.dtype == np.int64 and (w >= 0).all()
        assert w.sum() == max(0, round(y.sum()))


def test_already_whole_non_negative_counts_come_back_unchanged():
    y = np.array([0, 3, 12, 0, 1], dtype=float)
    assert whole_nonnegative(y).tolist() == [0, 3, 12, 0, 1]


def test_negative_total_gives_no_people_and_empty_input_stays_empty():
    assert whole_nonnegative(np.array([-3.0, 1.0])).tolist() == [0, 0]
    assert whole_nonnegative(np.array([])).tolist() == []
    with pytest.raises(ValueError):
        simplex_projection(np.array([1.0]), -1)


def test_largest_remainder_never_gives_more_than_the_total():
    x = np.array([0.3333333333333333] * 3)
    assert largest_remainder(x, 1).tolist() == [1, 0, 0]
    assert largest_remainder(np.array([2.0000000001, 0.9999999999]), 3).tolist() == [2, 1]


@pytest.mark.parametrize("mech", ["ug", "e2epriv", "privtree", "htf", "dawa", "shifted_grids",
                                  "full_quadtree", "adaptive"])
def test_every_export_gives_whole_non_negative_people_with_the_released_total(small, mech):
    """`Release.to_json`: per collection (per grid of a series of grids) the people are whole,
    >= 0, add up to the rounded released total, and sit beside the unbiased noisy counts."""
    import json
    import dp
    data, domain = small
    rel = dp.release(mech, data, domain, epsilon=0.5, seed=np.random.default_rng(3))
    feats = json.loads(rel.to_json())["features"]
    groups = {}
    for f in feats:
        p = f["properties"]
        assert isinstance(p["people"], int) and p["people"] >= 0
        g = groups.setdefault(p.get("grid"), [0.0, 0])
        g[0] += p["noisy_count"]
        g[1] += p["people"]
    assert groups and all(people == max(0, round(noisy)) for noisy, people in groups.values())


def test_equal_remainders_go_to_the_larger_counts_not_the_first_positions():
    """Whole noisy counts less one θ share one remainder: (3, 9, −2, 5) with total 15 keeps 3, 9, 5
    less θ = 2/3: (2.33, 8.33, 0, 4.33); floors sum 14, and the fifteenth person goes to the 9."""
    assert whole_nonnegative(np.array([3.0, 9.0, -2.0, 5.0])).tolist() == [2, 9, 0, 4]
