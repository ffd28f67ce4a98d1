"""DAWA's private partition (Li, Hay & Miklau, PVLDB 2014, section 3) on aligned dyadic intervals.

A bucket B of the Hilbert-ordered vector x costs dev(B) + 1/ε2: dev(B) = Σ_{i∈B} |x_i − mean_B|
is the error of spreading B's count evenly over its cells, 1/ε2 the expected error of the noisy
count B gets in the estimation step. The partition minimising the total cost is found by dynamic
programming over the candidate intervals; the costs it compares are noisy.

Candidates (as the paper's efficient variant): intervals whose length is a power of two and whose
start is a multiple of it, at the levels ℓ (length 2^ℓ) of `candidate_levels`: all ℓ = 1..2k
("dyadic": aligned squares and 2:1 halves of squares), or even ℓ only ("squares"). Single cells
(ℓ = 0) are always candidates and cost exactly 1/ε2 (their deviation is 0 whatever the data).

Sensitivity (derived here; neighbours add or remove one point). Adding a point to cell j of an
interval of length L moves its mean by 1/L: |x_j − mean| changes by at most 1 − 1/L, each of the
other L − 1 terms by at most 1/L, so dev changes by at most Δ_ℓ = 2(1 − 2^−ℓ). The point lies in
exactly one candidate per level, so the vector of all candidate deviations has L1 sensitivity
Δ = Σ_ℓ Δ_ℓ (30.00 for k = 8 with all 16 levels, 15.33 with the 8 square levels). The
deviations are computed exactly in integers (L·dev = Σ|L x_i − S|), rounded to the public grid
g = 2^−8 and given integer discrete Laplace noise in grid units (`laplace_real`); rounding can
widen each changed value by one grid step, so the rounded vector's sensitivity is Δ/g + K for K
noisy levels, and the noise scale is (Δ/g + K)/ε1 grid units, (Δ + K g)/ε1 in counts. The noisy
deviation vector is then ε1-DP, and everything after it (clamping at 0, the DP) is
post-processing. The reference implementation instead scores every sliding window of each
power-of-two length with Laplace((2 − 1/L − 1/n)/ε1) noise; a point lies in about 2n of those
windows, so that noise is not covered by this sensitivity argument and is not used here.
"""
from __future__ import annotations

import numpy as np

from ...errors import ParameterError
from ...noise import laplace_real

GRID_BITS = 8
GRID = 2.0 ** -GRID_BITS        # public grid of the noisy deviations (in counts)
SHAPES = ("dyadic", "squares")


def candidate_levels(k: int, shapes: str = "dyadic") -> tuple[int, ...]:
    """Levels ℓ >= 1 (interval length 2^ℓ) of the candidates on a 2^k x 2^k grid; the top level
    2k (the whole grid) is always one of them."""
    if shapes == "dyadic":
        return tuple(range(1, 2 * k + 1))
    if shapes == "squares":
        return tuple(range(2, 2 * k + 1, 2))
    raise ParameterError(f"bucket shapes must be one of {list(SHAPES)}, got {shapes!r}")


def level_sensitivity(level: int) -> float:
    """Δ_ℓ = 2(1 − 2^−ℓ): how much one added or removed point moves dev of a length-2^ℓ interval."""
    return 2.0 * (1.0 - 2.0 ** -level)


def cost_sensitivity(levels) -> float:
    """L1 sensitivity of the deviations of all candidates: one candidate per level holds the point."""
    return float(sum(level_sensitivity(l) for l in levels))


def deviation_units(xh: np.ndarray, levels) -> dict[int, np.ndarray]:
    """Exact deviation of every aligned interval at each level, rounded (half up) to grid units.

    With L = 2^ℓ and S the interval's sum, L·dev = Σ|L x_i − S| is an integer, so
    dev / g = (L·dev) 2^GRID_BITS / L is rounded in integer arithmetic: no float bit of the
    data reaches the noise step.
    """
    x = np.asarray(xh, dtype=np.int64)
    out = {}
    for lvl in levels:
        L = 1 << lvl
        b = x.reshape(-1, L)
        D = np.abs(L * b - b.sum(1, keepdims=True)).sum(1)          # L·dev, exact
        out[lvl] = ((D << GRID_BITS) + (L >> 1)) >> lvl               # round(dev / g)
    return out


def noisy_deviations(rng, xh, levels, eps1: float, ledger, noise=None) -> dict[int, np.ndarray]:
    """ε1-DP noisy deviations (in counts) of all candidates, charged to `ledger` in this call.

    Test hook: `noise(kind, scale, shape)` returns the integer noise (grid units) instead of the
    discrete Laplace draw; the charge is made either way.
    """
    units = deviation_units(xh, levels)
    K = len(levels)
    delta = cost_sensitivity(levels)
    sens = delta + (K - 1) * GRID          # laplace_real adds one grid step: K in all
    scale_units = (sens / GRID + 1.0) / eps1
    flat = np.concatenate([units[l] for l in levels])
    ledger.charge("DAWA partition: noisy bucket deviations", eps1, delta + K * GRID,
                  "discrete laplace",
                  scale_units * GRID,
                  note=f"{flat.size:,} aligned dyadic Hilbert intervals at {K} levels; each point is "
                       f"in one per level, L1 sensitivity Σ 2(1 − 2^−ℓ) = {delta:.4g}, plus one grid "
                       f"step per level for the rounding to a grid of {GRID:g} and given discrete Laplace noise of scale "
                       f"(Δ/g + K)/ε = {scale_units * GRID:.4g} counts; only the partition chosen "
                       "from them is released")
    if noise is None:
        noisy = laplace_real(rng, flat * GRID, sens, eps1, GRID)
    else:
        noisy = (flat + np.asarray(noise("deviation", scale_units, flat.shape))) * GRID
    out, at = {}, 0
    for lvl in levels:
        m = units[lvl].size
        out[lvl] = noisy[at:at + m]
        at += m
    return out


def best_partition(dev: dict, levels, n: int, kappa: float, clamp: bool = True):
    """Partition of [0, n) into candidates minimising Σ (dev(B) + kappa), by dynamic programming.

    `dev[ℓ]` holds the (noisy) deviation of each aligned interval of level ℓ; single cells have
    deviation 0. With `clamp`, a noisy deviation below 0 counts as 0 (a deviation is never
    negative; this is the reference implementation's rule and keeps sums of negative noise from
    favouring many small buckets). Aligned candidates nest, so the optimum over all partitions is
    best(v) = min(cost(v), Σ best(children)) from the bottom level up; a tie keeps the larger
    bucket. Returns (starts, levels, total cost) with starts ascending.
    """
    levels = tuple(sorted(levels))
    if not levels or n != 1 << levels[-1]:
        raise ParameterError("the candidate levels must end at the whole vector (2^top = n)")
    best = np.full(n, float(kappa))
    keep = {}
    prev = 0
    for lvl in levels:
        child = best.reshape(-1, 1 << (lvl - prev)).sum(1)
        d = np.asarray(dev[lvl], dtype=np.float64)
        own = (np.maximum(d, 0.0) if clamp else d) + kappa
        keep[lvl] = own <= child
        best = np.where(keep[lvl], own, child)
        prev = lvl
    starts, lv = [], []
    active = np.zeros(1, dtype=np.int64)                 # node indices at the current level
    chain = (0,) + levels
    for i in range(len(chain) - 1, 0, -1):
        lvl, below = chain[i], chain[i - 1]
        leaf = keep[lvl][active]
        starts.append(active[leaf] << lvl)
        lv.append(np.full(int(leaf.sum()), lvl))
        g = 1 << (lvl - below)
        active = (active[~leaf][:, None] * g + np.arange(g)).ravel()
    starts.append(active)
    lv.append(np.zeros(active.size, dtype=np.int64))
    starts = np.concatenate(starts).astype(np.int64)
    lv = np.concatenate(lv).astype(np.int64)
    order = np.argsort(starts)
    return starts[order], lv[order], float(best[0])
