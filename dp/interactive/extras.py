"""Small extras of spec 5 and App C built on the same pieces: private KDE and k-NN by elimination,
and the central-mode threshold test with early stopping. Tested, not used by the dashboard.
"""
from __future__ import annotations

import math

import numpy as np

from .. import noise
from ..constraints import positive_finite
from ..errors import ParameterError
from .budgeting import gaussian_radius, split_weights
from .elimination import LocalUsers, eliminate

COUNT_RHO_FLOOR = 2.0 ** -22    # central counts: rounds need rho above this (sigma < 1449, grid <= 1)


def kde_estimate(users: LocalUsers, p, h: float, b_units, *, privatize: str = "pt",
                 method: str = "pm", c: int = 10, split: str = "doubling", beta: float = 0.1,
                 r_mult: float = 3.0, rng) -> tuple[float, np.ndarray]:
    """Gaussian KDE at p (metres), f = (1/n) sum exp(-|x-p|^2/(2h^2)) (spec 5, Alg 7).

    'bm' privatizes every point once; 'pm' runs one-sided NIE with g = |x - p|,
    nu_low = r = r_mult h, and uses only the points not eliminated. Returns (f_hat, cons_units).
    """
    p = np.asarray(p, dtype=np.float64)
    n = users.n_points
    if n == 0:
        return 0.0, np.zeros(0, dtype=np.int64)
    score = None if privatize == "pt" else (lambda xy: np.hypot(*(xy - p).T))

    def kern(est):
        if privatize == "pt":
            d2 = np.sum((est - p) ** 2, axis=1)
        else:
            d2 = np.maximum(est, 0.0) ** 2
        return np.exp(-d2 / (2 * h * h))

    b_units = np.asarray(b_units, dtype=np.int64)
    if method == "bm":
        ok, z = users.respond(np.arange(n), b_units, rng, score)
        return float(kern(z).sum() / n), np.where(ok, b_units, 0)
    g = (lambda z: np.hypot(*(z - p).T)) if privatize == "pt" else None
    el = eliminate(users, b_units, c, split, beta / (c * n), score=score, g=g,
                   nu_low=r_mult * h, nu_high=-np.inf, rng=rng)
    rem = np.flatnonzero(el.rem)
    return float(kern(el.est[rem]).sum() / n), el.cons_units


def knn_query(users: LocalUsers, p, k: int, b_units, *, privatize: str = "dist", c: int = 10,
              split: str = "doubling", beta: float = 0.1, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """k nearest neighbours of p by interactive elimination (Alg 5 / Alg 8).

    Returns (chosen indices, candidate set I at the end, cons_units). Ties break by lower index.
    """
    p = np.asarray(p, dtype=np.float64)
    n = users.n_points
    b_units = np.asarray(b_units, dtype=np.int64)
    score = None if privatize == "pt" else (lambda xy: np.hypot(*(xy - p).T))
    radius = float(gaussian_radius(2 if privatize == "pt" else 1, beta / (c * max(n, 1))))
    w_frac = split_weights(c, split)
    cons = np.zeros(n, dtype=np.int64)
    rho_cum = np.zeros(n)
    wsum = np.zeros((n, 2) if score is None else n)
    active = np.arange(n)

    def estimates(idx):
        rc = rho_cum[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            avg = wsum[idx] / (rc[:, None] if score is None else rc)
            gh = np.hypot(*(avg - p).T) if score is None else avg
            w = radius / np.sqrt(2.0 * rc)
        return np.where(rc > 0, gh, 0.0), w

    for t in range(1, c + 1):
        b = b_units[active]
        req = (np.floor(b.astype(np.float64) * w_frac[t - 1]).astype(np.int64) if t < c
               else b - cons[active])
        pos = req > 0
        ask, r_ask = active[pos], req[pos]
        ok, z = users.respond(ask, r_ask, rng, score)
        got, r_got = ask[ok], r_ask[ok]
        rho = users.rho_of(got, r_got)
        cons[got] += r_got
        rho_cum[got] += rho
        wsum[got] += (rho[:, None] * z) if score is None else rho * z
        active = np.setdiff1d(active, ask[~ok], assume_unique=True)   # halted users leave
        if active.size <= k:
            break
        gh, w = estimates(active)
        u_star = np.partition(gh + w, k - 1)[k - 1]      # k-th smallest right end point
        active = active[gh - w <= u_star]
        if active.size <= k:
            break
    active = active[rho_cum[active] > 0]
    gh, _ = estimates(active)
    order = np.lexsort((active, gh))
    return active[order[:k]], active, cons


def threshold_test(count: int, tau: float, rho: float, *, c: int = 10, split: str = "doubling",
                   beta: float = 0.1, rng) -> dict:
    """Central 'is count >= tau?' with early stopping (App C, Alg 9) under rho-zCDP.

    Each round t releases the integer count plus exact discrete Gaussian noise of variance
    >= 1/(2 rho_t) (`noise.gaussian_real`): with sigma_t < 1449 its grid is 2^-j <= 1, so the
    count lies on it (no snapping) and a change of 1 is an integer shift of 2^j grid steps,
    hence rho_t-zCDP exactly (CKS20). Rounds with rho_t <= COUNT_RHO_FLOOR are merged into the
    next. The curator keeps the rho-weighted average of (noisy count - tau) and stops once
    |avg| > sqrt(ln(2/beta')/rho_1:t), beta' = beta/c. Returns decision, rounds used, rho spent.
    """
    if not float(count).is_integer():
        raise ParameterError("threshold_test needs an integer count")
    rho = positive_finite("rho", rho)
    w_frac = split_weights(c, split)
    rhos, acc = [], 0.0
    for t in range(c):
        acc += rho * w_frac[t] if t < c - 1 else rho - sum(rhos) - acc
        if acc > COUNT_RHO_FLOOR:
            rhos.append(acc)
            acc = 0.0
    if not rhos:
        raise ParameterError(f"rho = {rho:g} is below {COUNT_RHO_FLOOR:g}, the exact sampler's floor")
    rhos[-1] += acc
    radius = float(gaussian_radius(1, beta / c))
    total = cum = 0.0
    for t, r in enumerate(rhos, start=1):
        # the factor 1 + 2^-40 covers the rounding of 1/sqrt(2 r)
        noisy, _ = noise.gaussian_real(rng, float(count), (1.0 + 2.0 ** -40) / math.sqrt(2.0 * r))
        total += r * (float(noisy) - tau)
        cum += r
        avg = total / cum
        if abs(avg) > radius / math.sqrt(2 * cum) or t == len(rhos):
            return {"above": bool(avg >= 0), "rounds": t, "rho_spent": cum, "estimate": avg + tau}
    raise AssertionError("unreachable")
