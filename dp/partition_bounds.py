"""A 95% interval for a rectangle's true count that assumes nothing about the data.

A release made of disjoint regions (grid cells, tree leaves) whose released counts each carry
one independent discrete Laplace draw of known scale answers a rectangle by spreading counts
evenly inside regions, which can be far off whatever the noise (an empty rectangle inside a
dense leaf). But counts are never negative, so the true count of a rectangle lies between the
true count of the regions wholly inside it and that of the regions it touches. Each of those
is its released sum minus a known noise: the noise's two-sided `level` half-width bounds each
side with probability (1 − level)/2 at most, so by the union bound

    [Σ inside − h_inside, Σ touched + h_touched]   (the lower end clipped at 0)

holds the true count with probability at least `level`, for any data. It reads only the
release (post-processing). Releases whose counts were fitted jointly (consistency, least
squares, Euler's LP) have no such interval (`Release.region_noise_scales()` is None).

Counts zeroed by a threshold τ on their own noisy value (PrivTree's `zero_below`) hide the
noisy count, so each end is bounded on a set fixed before the noise (the regions inside, or
touched), never on the kept ones (their noise is not centred on zero):
- upper: a released 0 stands for a noisy count of at most τ, so the touched sum counts it as τ;
- lower: a released 0 stands for a noisy count above −k whenever every noise draw inside is
  above −k, which fails with probability at most β = (1 − level)/4 when each draw falls to −k
  or below with probability β / (regions inside); the sum's half-width then takes the other
  (1 − level)/4, so the lower end still fails with probability at most (1 − level)/2.
"""
from __future__ import annotations

import math

import numpy as np

from .noise import discrete_laplace_variance
from .queries import as_rect_array

def cell_coords(domain, grid, rects) -> np.ndarray:
    """Rectangles as fractional cell coordinates [x0, y0, x1, y1] of a grid over the domain."""
    r = as_rect_array(rects)
    x = np.clip((r[:, [0, 2]] - domain.west) / domain.width * grid.gx, 0, grid.gx)
    y = np.clip((r[:, [1, 3]] - domain.south) / domain.height * grid.gy, 0, grid.gy)
    return np.column_stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]])


def sum_half_width(scales: np.ndarray, level: float, n_sim: int, seed: int) -> float:
    """Half-width h with P(|Σ Z_i| <= h) ~ level for independent discrete Laplace Z_i."""
    from .mechanisms.base import noise_half_width     # base imports this module's users
    scales = scales[scales > 0]
    if scales.size == 0:
        return 0.0
    var = float(discrete_laplace_variance(scales).sum())
    return noise_half_width(var, (np.ones(scales.size), scales), level, n_sim, seed)


def laplace_floor(scale: float, beta: float) -> int:
    """The least whole k with P(Z <= -k) <= beta for discrete Laplace(scale): P(Z >= k) =
    a^k / (1 + a), a = e^(-1/scale)."""
    a = math.exp(-1.0 / scale)
    return max(0, math.ceil(math.log(beta * (1 + a)) / math.log(a)))


def partition_bounds(rel, rects, level: float = 0.95, n_sim: int = 20000, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) per rectangle, holding its true count with probability >= level whatever
    the data; NaN for releases without independent per-region noise."""
    q = len(as_rect_array(rects))
    scales = rel.region_noise_scales()
    if scales is None:
        return np.full(q, np.nan), np.full(q, np.nan)
    grid, ranges, counts = rel.regions()
    counts = np.asarray(counts, dtype=np.float64).ravel()
    scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), counts.shape)
    tau = rel.zero_threshold()
    zero = np.zeros(counts.shape, dtype=bool) if tau is None else counts == 0
    upper = counts if tau is None else np.where(zero, tau, counts)
    # with hidden zeros the lower end splits its share between the sum and the floor
    lower_level = level if tau is None else 1 - (1 - level) / 2
    r0, r1, c0, c1 = np.asarray(ranges).T
    lo, hi = np.empty(q), np.empty(q)
    for i, (x0, y0, x1, y1) in enumerate(cell_coords(rel.domain, grid, rects)):
        inside = (c0 >= x0) & (c1 <= x1) & (r0 >= y0) & (r1 <= y1)
        touched = (c0 < x1) & (c1 > x0) & (r0 < y1) & (r1 > y0)
        floor = 0.0
        hidden = zero & inside
        if hidden.any():
            beta = (1 - level) / 4 / inside.sum()
            floor = laplace_floor(float(scales[hidden].max()), beta) * hidden.sum()
        lo[i] = max(counts[inside].sum() - floor
                    - sum_half_width(scales[inside], lower_level, n_sim, seed), 0.0)
        hi[i] = upper[touched].sum() + sum_half_width(scales[touched], level, n_sim, seed)
    return lo, hi
