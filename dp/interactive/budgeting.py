"""How much budget each query and each elimination round gets (spec 2.6, 3), and the bounds that
size them: Gaussian widths (Lemma 6.1) and the rounding allowance of the exact noise.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from .filters import _positive_budget, rho_from_sigma

STRATEGIES = ("none", "even", "gamma", "linear")
SPLITS = ("even", "doubling")
MAX_ROUNDS = 64                 # spec 7: cap c at 64


def gaussian_radius(k: int, beta):
    """r_k(beta) with P(|Z| > sigma r_k(beta)) <= beta for Z ~ N(0, sigma^2 I_k) (Lemma 6.1).

    k = 1: sqrt(2 ln(2/beta)) (Chernoff); k = 2: sqrt(2 ln(1/beta)) (exact); otherwise the
    Laurent-Massart bound sqrt(k + 2 sqrt(k ln(1/beta)) + 2 ln(1/beta)).
    """
    lb = np.log(1.0 / np.asarray(beta, dtype=np.float64))
    if k == 1:
        return np.sqrt(2.0 * (lb + math.log(2.0)))
    if k == 2:
        return np.sqrt(2.0 * lb)
    return np.sqrt(k + 2.0 * np.sqrt(k * lb) + 2.0 * lb)


def snap_allowance_bound(budget, draws, dims: int = 2):
    """Largest rounding allowance s (metres) after `draws` answers of `dims` numbers each, at
    budget rho_B: sigma_B sqrt(dims draws) / 1024 (each draw adds at most dims 2^-21 to Q)."""
    return np.sqrt(dims * np.asarray(draws, dtype=np.float64) / np.asarray(budget, dtype=np.float64)
                   * 2.0 ** -21)


def allocate(strategy: str, budget, remaining, k: int, m: int, gamma: float = 0.5) -> np.ndarray:
    """Allocation b_{i,k} of query k (1-based) of m planned (spec 2.6), per user.

    With R the remaining budget and S = R - (m-k+1) B/m the savings pool:
    none b = B/m; even b = R/(m-k+1); gamma b = B/m + gamma S;
    linear b = B/m + (k-1)/(m-1) S. For k > m (open-ended sessions, spec decision)
    b = min(B/m, R). The result is always clipped to [0, R], so the filter never fires.
    """
    if strategy not in STRATEGIES:
        raise ParameterError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if int(m) != m or m < 1 or int(k) != k or k < 1:
        raise ParameterError(f"need integers k >= 1 and m >= 1, got k={k}, m={m}")
    if not 0.0 <= gamma <= 1.0:
        raise ParameterError(f"gamma must be in [0, 1], got {gamma}")
    B = np.asarray(budget, dtype=np.float64)
    R = np.asarray(remaining, dtype=np.float64)
    base = B / m
    if k > m:
        b = base + 0 * R
    elif strategy == "none":
        b = base + 0 * R
    elif strategy == "even":
        b = R / (m - k + 1)
    else:
        g = gamma if strategy == "gamma" else ((k - 1) / (m - 1) if m > 1 else 1.0)
        b = base + g * (R - (m - k + 1) * base)
    return np.clip(b, 0.0, np.maximum(R, 0.0))


def split_weights(c: int, split: str) -> np.ndarray:
    """Fractions of an allocation spent in rounds 1..c (spec 3): even 1/c each; doubling
    2^(t-1)/(2^c - 1)."""
    if int(c) != c or not 1 <= c <= MAX_ROUNDS:
        raise ParameterError(f"rounds must be an integer in 1..{MAX_ROUNDS}, got {c}")
    if split == "even":
        return np.full(int(c), 1.0 / c)
    if split == "doubling":
        t = np.arange(int(c), dtype=np.float64)
        return np.exp2(t - c) / -np.expm1(-c * math.log(2.0))
    raise ParameterError(f"split must be one of {SPLITS}, got {split!r}")


def split_units(b_units, c: int, split: str) -> np.ndarray:
    """Round requests in ledger units, shape (len(b), c): rounds 1..c-1 are rounded down and
    the last round takes the rest, so each row sums to b exactly (spec 9 case 3)."""
    b = np.asarray(b_units, dtype=np.int64)
    w = split_weights(c, split)
    out = np.floor(b[:, None].astype(np.float64) * w[None, :]).astype(np.int64)
    out[:, -1] = b - out[:, :-1].sum(axis=1)
    return out


def _session_budget(budget, sigma_m) -> np.ndarray:
    """rho_B per user from exactly one of `budget` (rho) or `sigma_m` (metres), checked."""
    if (budget is None) == (sigma_m is None):
        raise ParameterError("give exactly one of budget (rho per user) or sigma_m (metres)")
    if budget is None:
        s = np.asarray(sigma_m, dtype=np.float64)
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ParameterError(f"sigma_m must be positive, got {sigma_m}")
        budget = rho_from_sigma(s)
    return _positive_budget(budget)
