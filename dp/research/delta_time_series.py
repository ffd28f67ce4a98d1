"""Sustainable time-series budgets under δ-neighbourhood (spec 001 section 2.9, Fang & Chang 2014).

A person's value at one step may stand in for theirs up to δ steps away, so every window of δ
consecutive steps may spend at most ε in all (Theorem 2): window sums, the offline allocation of
the steps' budgets (Problem 1, log-barrier Newton) and the online one over sampled futures
(Problem 2). Research code beside `dp.research.delta_neighbourhood`, which re-exports it; not
part of the stable API.
"""
from __future__ import annotations

import math

import numpy as np

from ..noise import make_rng

__all__ = ["window_matrix", "window_sums", "is_sustainable", "allocation_error", "uniform_allocation",
           "offline_allocation", "online_allocation"]


def window_matrix(n: int, delta_steps: int) -> np.ndarray:
    """(K, n) 0/1 matrix of the windows {k, ..., k+δ−1}, k = 0..n−δ (P18: from k = 0).

    A horizon shorter than δ has one window holding every step.
    """
    starts = np.arange(max(n - delta_steps, 0) + 1)
    t = np.arange(n)
    return ((t[None, :] >= starts[:, None]) & (t[None, :] < starts[:, None] + delta_steps)).astype(float)


def window_sums(eps, delta_steps: int) -> np.ndarray:
    """Σ_{i=1..δ} ε_{k+i} for every window (Theorem 2's condition is all ≤ ε)."""
    e = np.asarray(eps, dtype=np.float64)
    return window_matrix(e.size, delta_steps) @ e


def is_sustainable(eps, epsilon: float, delta_steps: int, tol: float = 1e-9) -> bool:
    e = np.asarray(eps, dtype=np.float64)
    return bool(np.all(e >= -tol) and np.all(window_sums(e, delta_steps) <= epsilon + tol))


def allocation_error(w, eps) -> float:
    """Σ_t w_t / ε_t² (Laplace variance, constants in w); steps with w_t = 0 cost nothing."""
    w = np.asarray(w, dtype=np.float64)
    e = np.asarray(eps, dtype=np.float64)
    pos = w > 0
    if np.any(e[pos] <= 0):
        return math.inf
    return float(np.sum(w[pos] / e[pos] ** 2))


def uniform_allocation(n: int, epsilon: float, delta_steps: int) -> np.ndarray:
    """Baseline e_I: ε_t = ε/δ forever (error δ²Σw/ε²)."""
    return np.full(n, epsilon / delta_steps)


def _barrier_batch(W: np.ndarray, M: np.ndarray, R: np.ndarray, rel_gap: float = 1e-11):
    """Minimise Σ_t W[b,t]/x_t² s.t. M x ≤ R[b], x > 0, for every row b (log-barrier Newton).

    W (B, n) ≥ 0, M (K, n) 0/1 with every column in some row, R (B, K) > 0. Steps with W = 0
    stay variables (they tend to 0; the objective ignores them). Returns (x, objective).
    The duality gap at the end is at most rel_gap times the objective.
    """
    B, n = W.shape
    K = M.shape[0]
    cnt = np.maximum(M.sum(axis=1), 1)
    x = np.min(np.where(M.T[None, :, :] > 0, (R / cnt)[:, None, :], np.inf), axis=2) * 0.5
    f = lambda x: (W / x ** 2).sum(axis=1)

    def phi(x, tau):
        s = R - x @ M.T
        with np.errstate(invalid="ignore", divide="ignore"):
            val = tau * f(x) - np.log(s).sum(1) - np.log(x).sum(1)
        bad = (s <= 0).any(1) | (x <= 0).any(1)
        return np.where(bad, np.inf, val)

    zero = W.sum(axis=1) == 0                 # nothing to minimise: any feasible x is optimal
    tau = np.where(zero, 1.0, (n + K) / np.maximum(f(x), 1e-300))
    for _outer in range(60):
        for _newton in range(60):
            s = R - x @ M.T
            g = tau[:, None] * (-2 * W / x ** 3) + (1 / s) @ M - 1 / x
            H = np.einsum("kt,bk,ku->btu", M, 1 / s ** 2, M)
            H[:, np.arange(n), np.arange(n)] += tau[:, None] * 6 * W / x ** 4 + 1 / x ** 2
            dx = -np.linalg.solve(H, g[:, :, None])[:, :, 0]
            dec = -(g * dx).sum(1)
            conv = dec < 1e-10
            if np.all(conv):
                break
            ds = dx @ M.T
            with np.errstate(divide="ignore", invalid="ignore"):
                amax = np.minimum(np.where(dx < 0, -x / dx, np.inf).min(1),
                                  np.where(ds > 0, s / ds, np.inf).min(1))
            alpha = np.minimum(1.0, 0.99 * amax)
            p0 = phi(x, tau)
            slack = 1e-13 * np.abs(p0)              # rounding of phi at large tau
            for _ls in range(60):
                trial = x + alpha[:, None] * dx
                ok = (phi(trial, tau) <= p0 - 0.25 * alpha * dec + slack) | conv
                if ok.all():
                    break
                alpha = np.where(ok, alpha, alpha * 0.5)
            x = np.where(conv[:, None], x, x + alpha[:, None] * dx)
        if np.all(zero | ((n + K) / tau <= rel_gap * f(x))):
            break
        tau = np.where(zero, tau, tau * 50)
    return x, f(x)


def offline_allocation(w, epsilon: float, delta_steps: int, fixed=None):
    """Problem 1 (spec 2.9): minimise Σ w_t/ε_t² s.t. every δ-window sums to ≤ ε, ε_t ≥ 0.

    ε_t = 0 where w_t = 0. `fixed` commits ε_1..ε_k (Problem 2 of the online algorithm).
    Convex; solved by an interior-point (log-barrier Newton) method started strictly inside
    the feasible set. Returns (ε, error); error is inf when the fixed prefix leaves no budget
    for a step with w_t > 0.
    """
    w = np.asarray(w, dtype=np.float64)
    n = w.size
    fixed = np.zeros(0) if fixed is None else np.asarray(fixed, dtype=np.float64)
    k = fixed.size
    eps = np.zeros(n)
    eps[:k] = fixed
    free = np.flatnonzero((w > 0) & (np.arange(n) >= k))
    M = window_matrix(n, delta_steps)
    resid = epsilon - M[:, :k] @ fixed
    if np.any(resid < -1e-9 * epsilon):
        raise ValueError("the fixed prefix already exceeds ε in some window")
    if free.size:
        Mf = M[:, free]
        use = Mf.sum(axis=1) > 0
        if np.any(resid[use] <= 1e-12 * epsilon):
            return eps, math.inf
        x, _ = _barrier_batch(w[free][None, :] / epsilon ** 2, Mf[use],
                              (resid[use] / epsilon)[None, :])
        eps[free] = x[0] * epsilon
    return eps, allocation_error(w, eps)


def online_allocation(w, epsilon: float, delta_steps: int, p: float | None = None, sampler=None,
                      n_samples: int = 1000, candidates=None, rng=None) -> np.ndarray:
    """Online allocation (spec 2.9): at step i, with ε_1..ε_{i−1} committed and w_1..w_i known,
    commit the candidate e minimising the mean optimal error over sampled futures.

    - futures w_{i+1..n}: `sampler(rng, n_samples, length)`, default i.i.d. Bernoulli(p);
    - candidates: default {0, 0.01, ..., 1.00}·ε [rec: with 0]; infeasible values are skipped,
      0 is forced when w_i = 0, and the largest feasible value is always a candidate [rec], so
      a step with w_i > 0 never gets 0 when budget is left;
    - each candidate's score: Problem 1 with ε_1..ε_{i−1} and ε_i = e fixed, solved for every
      distinct sampled future (common random numbers across candidates).
    w is only read up to step i when deciding step i. `rng` draws the sampled futures (an int
    seed is for tests only). Returns the committed ε (feasible).
    """
    w = np.asarray(w, dtype=np.float64)
    n = w.size
    gen = make_rng(rng)
    if sampler is None:
        if p is None:
            raise ValueError("give the Bernoulli probability p or a sampler")
        sampler = lambda g, N, L: (g.random((N, L)) < p).astype(np.float64)
    cand = np.round(np.arange(0, 101) * 0.01, 2) * epsilon if candidates is None \
        else np.asarray(candidates, dtype=np.float64)
    M = window_matrix(n, delta_steps)
    eps = np.zeros(n)
    for i in range(n):
        if w[i] <= 0:
            continue
        mine = M[:, i] > 0
        room = epsilon - (M[mine][:, :i] @ eps[:i]).max()
        if room <= 0:
            continue
        cs = np.unique(np.append(cand[(cand > 0) & (cand <= room + 1e-12)], room))
        L = n - i - 1
        if L == 0:
            eps[i] = cs.max()          # nothing left to save budget for: largest feasible value
            continue
        fut = sampler(gen, n_samples, L)
        pats, counts = np.unique(fut, axis=0, return_counts=True)
        future_rows = M[:, i + 1:].sum(axis=1) > 0
        Mf = M[future_rows][:, i + 1:]
        base = epsilon - M[future_rows][:, :i] @ eps[:i]
        inc = M[future_rows][:, i]
        scores = np.empty(cs.size)
        Wb = np.repeat(pats[None, :, :], cs.size, axis=0).reshape(-1, L)
        Rb = np.repeat((base[None, :] - cs[:, None] * inc[None, :]), len(pats), axis=0)
        # windows with no budget left: infinite error if a future step inside has weight,
        # otherwise the constraint only binds weight-0 steps and can be relaxed
        empty = Rb <= 1e-12 * epsilon
        dead = (empty[:, :, None] & (Mf[None, :, :] > 0) & (Wb[:, None, :] > 0)).any(axis=(1, 2))
        Rb = np.where(empty, epsilon, Rb)
        val = np.full(len(Wb), math.inf)
        live = ~dead
        if live.any():
            _, obj = _barrier_batch(Wb[live] / epsilon ** 2, Mf, Rb[live] / epsilon, rel_gap=1e-8)
            val[live] = obj
        val = val.reshape(cs.size, len(pats))
        with np.errstate(invalid="ignore"):
            scores = w[i] / cs ** 2 + (val * counts[None, :]).sum(axis=1) / counts.sum()
        eps[i] = cs[int(np.argmin(scores))] if np.isfinite(scores).any() else cs.min()
    return eps
