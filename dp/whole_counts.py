"""Whole, non-negative people from noisy counts, keeping their total: post-processing, no ε.

Released counts are unbiased but can be negative or fractional (−1.3 people, 84,744.8 people).
`whole_nonnegative` turns them into whole numbers >= 0 that add up to the released total,
rounded (and at least 0), in two steps:

1. The Euclidean projection onto {x >= 0, Σx = T}: x_i = max(y_i − θ, 0) with the one θ that
   makes the sum T (the closest such vector in least squares; the "Norm-Sub" step of Wang et al.,
   "Locally differentially private frequency estimation with consistency", NDSS 2020). Negative
   noise in empty regions is absorbed by lowering every positive count by the same θ, so the
   total stays what was released rather than growing as plain clipping would make it.
2. Largest-remainder rounding: every value is rounded down, and the T − Σ⌊x⌋ largest remainders
   get one more person, so the sum is exactly T. Equal remainders (whole counts less one θ all
   have the same) go to the larger values, then by position: never a drift towards the cells
   listed first.

Only released values are read, so the result is as private as the release it comes from.
"""
from __future__ import annotations

import numpy as np


def simplex_projection(y, total: float) -> np.ndarray:
    """max(y − θ, 0) with θ such that the result sums to `total` (>= 0): the closest vector
    with non-negative entries and that sum. Sort-based, O(n log n), no loop over entries."""
    y = np.asarray(y, dtype=np.float64)
    if total < 0:
        raise ValueError("the total of non-negative counts cannot be negative")
    if y.size == 0:
        return y.copy()
    if total == 0:
        return np.zeros_like(y)
    u = np.sort(y)[::-1]
    cssv = np.cumsum(u) - total
    k = np.arange(1, y.size + 1)
    rho = np.nonzero(u - cssv / k > 0)[0][-1]        # the last index kept positive
    theta = cssv[rho] / (rho + 1)
    return np.maximum(y - theta, 0.0)


def largest_remainder(x, total: int) -> np.ndarray:
    """Whole numbers that sum to `total`: ⌊x⌋, plus one for the largest remainders (x >= 0 with
    Σx = total, up to rounding)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.floor(x).astype(np.int64)
    short = int(total) - int(out.sum())          # >= 0: Σ⌊x⌋ <= Σx = total
    # largest remainder first (rounded: float dust is no reason); equal remainders, which whole
    # counts less one θ all have, go to the larger values, not to the first positions
    order = np.lexsort((-x, -np.round(x - out, 9)))
    out[order[:short]] += 1
    return out


def whole_nonnegative(y, total: float | None = None) -> np.ndarray:
    """Whole numbers >= 0 closest to the noisy counts `y` that sum to `total` (default: Σy),
    rounded to a whole number and at least 0. See the module's docstring."""
    y = np.asarray(y, dtype=np.float64)
    t = int(max(0, round(float(y.sum() if total is None else total))))
    return largest_remainder(simplex_projection(y, t), t)


def add_people(features: list) -> None:
    """Give every GeoJSON feature with a "noisy_count" a "people" property: the whole,
    non-negative counts of its collection (one per grid of a series of grids, by the "grid"
    property), keeping each collection's rounded total. In place."""
    groups: dict = {}
    for i, f in enumerate(features):
        props = f["properties"]
        if "noisy_count" in props:
            groups.setdefault(props.get("grid"), []).append(i)
    for members in groups.values():
        people = whole_nonnegative([features[i]["properties"]["noisy_count"] for i in members])
        for i, p in zip(members, people.tolist()):
            features[i]["properties"]["people"] = p
