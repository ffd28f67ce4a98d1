"""The one interval rule of every release: the half-width h with P(|noise| <= h) ~ level for
noise Σ w_i Z_i of independent discrete Laplace draws: exact for one term, simulated for a few
(and kept per release), the normal approximation for many."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ..noise import discrete_laplace_quantile, make_rng

HALF_WIDTH_CACHE = 1024   # simulated half-widths a release keeps (emptied when full)
MC_MAX_TERMS = 64   # up to this many noise terms an interval is simulated exactly


def noise_half_width(variance: float, terms=None, level: float = 0.95, n_sim: int = 20000,
                     seed: int = 0) -> float:
    """Half-width h with P(|noise| <= h) ~ level: the one interval rule of every release.

    With `terms` = (weights, scales) of independent discrete Laplace draws: one term's quantile
    is exact (`discrete_laplace_quantile`, as for shapes); up to MC_MAX_TERMS terms, Monte Carlo of
    Σ w_i Z_i with a fixed seed (no data is read, nothing is released, so the draws are numpy's
    difference of two geometric variables, the same distribution as the exact sampler's at a
    twentieth of its time); otherwise a normal approximation with the exact `variance` (CLT).
    """
    w, sc = nonzero_terms(terms)
    if sc.size == 1:
        return abs(float(w[0])) * discrete_laplace_quantile(float(sc[0]), level)
    if 1 < sc.size <= MC_MAX_TERMS:
        return float(np.quantile(np.abs(laplace_sim(make_rng(seed), sc, n_sim) @ w), level))
    return float(NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(variance))


def nonzero_terms(terms) -> tuple[np.ndarray, np.ndarray]:
    """(weights, scales) of the terms whose weight is not 0, as flat float arrays (both empty
    when `terms` is None)."""
    if terms is None:
        return np.empty(0), np.empty(0)
    w = np.asarray(terms[0], dtype=np.float64).ravel()
    keep = w != 0
    return w[keep], np.broadcast_to(np.asarray(terms[1], dtype=np.float64), w.shape)[keep]


def laplace_sim(rng, scales: np.ndarray, n: int) -> np.ndarray:
    """(n, len(scales)) discrete Laplace draws, P(z) ∝ exp(-|z| / scale), for simulation only:
    G1 - G2 with G geometric of success probability 1 - exp(-1/scale)."""
    p = -np.expm1(-1.0 / scales)
    return rng.geometric(p, size=(n, scales.size)) - rng.geometric(p, size=(n, scales.size))


def kept_half_width(cache: dict, var: float, terms, level: float, n_sim: int, seed: int) -> float:
    """`noise_half_width`, kept in a release's `cache` when it is simulated: Σ w_i Z_i has the
    law of its (|w_i|, scale_i) pairs in any order, so rectangles sharing them share one run
    (the weights rounded to 12 decimals, far below the simulation's own error)."""
    w, sc = nonzero_terms(terms)
    if 1 < sc.size <= MC_MAX_TERMS:
        w = np.round(np.abs(w), 12)
        order = np.lexsort((sc, w))
        w, sc = w[order], sc[order]
        key = (level, n_sim, seed, w.tobytes(), sc.tobytes())
        if key not in cache:
            if len(cache) >= HALF_WIDTH_CACHE:
                cache.clear()          # one call, safe beside other request threads
            cache[key] = noise_half_width(var, (w, sc), level, n_sim, seed)
        return cache[key]
    return noise_half_width(var, terms, level, n_sim, seed)
