"""The users' side (simulated local model) and the range counts run against it: the baselines
BM-pt / BM-dist and iterative elimination PM-pt / PM-dist (spec 4.2, 4.4; Alg 4, 6).

Privacy notes. Elimination decisions read only the users' noisy outputs (spec P2): the raw
coordinates live in `LocalUsers`, whose `respond` passes each request through the filter and
returns noisy values only. Filter decisions depend on requested budgets alone, never on data
(P3). The failure probability beta affects utility only, never privacy (P4).

Noise (spec P16). A float Gaussian added to a coordinate leaks through the low bits of the
double (Mironov 2012), so every answer is exact: the value (point or score) is snapped to a
public power-of-two grid g (sigma/g in [1024, 2048), the grid of `noise.gaussian_real`) and
g times an exact discrete Gaussian with standard deviation >= sigma is added; the output is an
integer multiple of g. Snapping moves a value by at most g/2 per coordinate, so two locations
d apart look at most d + g sqrt(k) apart to a draw of k numbers. Summed over a user's draws
(rho_t charged each), the Renyi divergence of order alpha is at most alpha (sqrt(rho) d +
sqrt(Q))^2 <= alpha B (d + s)^2 with Q = sum_t rho_t k g_t^2 and s = sqrt(Q / B) metres
(Cauchy-Schwarz); each draw adds at most k 2^-21 to Q, so s <= sigma_B sqrt(k T) / 1024 after
T draws. `QuerySession.privacy_statement` states the guarantee with this allowance. The
elimination widths keep the Gaussian bounds: the discrete noise is sub-Gaussian with variance
below g^2 sigma2 <= sigma^2 (1 + 2^-19) and snapping shifts a value by at most sigma/2048 per
coordinate, a negligible effect on utility only (P4).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import noise
from .budgeting import gaussian_radius, split_weights
from .filters import UNITS, PrivacyFilter
from .geometry import _phi_score, _points_phi, theta_shift


class LocalUsers:
    """The users' side (simulated local model, spec P2): true locations in metres, kept here.

    `respond` is the only way analyst-side code reads the data: every request goes through
    the filter, and granted users return a noisy value (their point, or a public score of it).
    A user with several points answers for all of them; its charge is the sum (composition,
    Thm 5.1 with the max metric over a user's points). `snap_sq` holds, per user, the public
    Q = sum over its draws of rho_t k g_t^2 (rounding allowance, see the module notes).
    """

    def __init__(self, xy_m: np.ndarray, owner: np.ndarray | None, flt: PrivacyFilter):
        self._xy = xy_m
        self.owner = owner               # point -> user index, or None for one point per user
        self.filter = flt
        self.n_points = int(xy_m.shape[0])
        self.n_users = len(flt)
        self._unit_rho = flt.budget / UNITS if owner is None else (flt.budget / UNITS)[owner]
        self.snap_sq = np.zeros(self.n_users)

    def with_filter(self, flt: PrivacyFilter) -> "LocalUsers":
        """The same users with another ledger: an alternative world (spec P12)."""
        return LocalUsers(self._xy, self.owner, flt)

    def rho_of(self, points, units) -> np.ndarray:
        """rho that `units` ledger units stand for, per point (its user's scale)."""
        return np.asarray(units, dtype=np.float64) * self._unit_rho[points]

    def respond(self, points, units, rng: np.random.Generator, score=None):
        """Round request: point p spends units[p] of its user's ledger. Returns (ok, z): ok marks
        the points that answered (filter passed, units > 0); z holds their noisy answers in
        order, x (n_ok, 2) if `score` is None, else score(x), snapped to a grid g and plus g
        times exact discrete Gaussian noise of std >= 1/sqrt(2 rho) per coordinate."""
        points = np.asarray(points, dtype=np.intp)
        units = np.asarray(units, dtype=np.int64)
        if self.owner is None:
            ok = self.filter.request(points, units, _unique=True)
        else:
            own = self.owner[points]
            req = np.bincount(own, weights=units.astype(np.float64), minlength=self.n_users)
            users = np.flatnonzero(req > 0)
            granted = np.zeros(self.n_users, dtype=bool)
            granted[users] = self.filter.request(users, req[users].astype(np.int64), _unique=True)
            ok = granted[own] & (units > 0)
        pts = points[ok]
        rho = self.rho_of(pts, units[ok])
        values = self._xy[pts] if score is None else score(self._xy[pts])
        z, g = noise.gaussian_real(rng, values, 1.0 / np.sqrt(2.0 * rho))
        dims = 1 if values.ndim == 1 else values.shape[1]
        np.add.at(self.snap_sq, pts if self.owner is None else self.owner[pts], rho * dims * g * g)
        return ok, z

    # ---- owner-only: non-private diagnostics, never shown to an analyst
    def owner_values(self, score) -> np.ndarray:
        """score(x) at the true locations. NON-PRIVATE (owner diagnostics only)."""
        return score(self._xy)


@dataclass
class Elimination:
    """Outcome of one iterative-elimination run (Alg 4), per point; all public (P3)."""

    answered: np.ndarray      # bool: the point's user answered round 1
    low: np.ndarray           # bool: eliminated as certainly below nu_high (e.g. inside R)
    high: np.ndarray          # bool: eliminated as certainly above nu_low (e.g. outside R)
    rem: np.ndarray           # bool: answered, never eliminated (spent its whole allocation)
    cons_units: np.ndarray    # int64 ledger units consumed
    rho_cum: np.ndarray       # rho actually received (sum of the rounds answered)
    est: np.ndarray           # rho-weighted average answer: (n, 2) points or (n,) scores
    elim_round: np.ndarray    # uint8: round of elimination, 0 = not eliminated


def _ask_round(users: LocalUsers, idx, req, rng, score) -> tuple:
    """One round of requests to the active points `idx` (zero requests are skipped: the constant
    algorithm). Returns (sel, z, refused): `sel` picks the slots that answered, in the order of
    the answers z; `refused` marks the slots whose user was halted (they keep what they answered
    before and leave)."""
    pos = req > 0
    every = bool(pos.all())
    sel = slice(None) if every else np.flatnonzero(pos)
    ok, z = users.respond(idx[sel], req[sel], rng, score)
    refused = np.zeros(idx.size, dtype=bool)
    if not ok.all():
        sel = np.flatnonzero(pos)[ok] if not every else np.flatnonzero(ok)
        refused[np.flatnonzero(pos)[~ok]] = True
    return sel, z, refused


def _eliminated(ws, rc, score, g, radius, nu_low, nu_high) -> tuple:
    """The elimination test on the rho-weighted sums `ws` over received rho `rc`: (low, high)
    masks with est + w < nu_high and est - w > nu_low, w = radius / sqrt(2 rc). Points that
    have not answered yet (rc = 0) stay."""
    known = rc > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = ws / (rc[:, None] if score is None else rc)
        gh = g(avg) if score is None else avg
        w = radius / np.sqrt(2.0 * rc)
    lo = known & (gh + w < nu_high)
    hi = known & ~lo & (gh - w > nu_low)
    return lo, hi


def eliminate(users: LocalUsers, b_units, c: int, split: str, beta_prime: float, *,
              score=None, g=None, nu_low: float = 0.0, nu_high: float = 0.0,
              rng: np.random.Generator, points=None) -> Elimination:
    """Non-interactive iterative elimination (Alg 4) over `points` (default: all).

    Point privatization (T_pt) when `score` is None: users return noisy points, the analyst
    estimates g(x) as g(average) with width r_2(beta')/sqrt(2 rho_1:t). Value privatization
    (T_val) otherwise: users return score(x) + noise, the width is r_1(beta')/sqrt(2 rho_1:t).
    A point leaves as `low` when est + w < nu_high, as `high` when est - w > nu_low. Only the
    noisy answers, the budgets and public parameters are read here (spec P2).
    """
    n = users.n_points
    pts = np.arange(n) if points is None else np.asarray(points, dtype=np.intp)
    b_units = np.asarray(b_units, dtype=np.int64)
    w_frac = split_weights(c, split)
    radius = float(gaussian_radius(2 if score is None else 1, beta_prime))
    shape = (lambda k: (k, 2)) if score is None else (lambda k: (k,))
    low = np.zeros(n, dtype=bool)
    high = np.zeros(n, dtype=bool)
    cons = np.zeros(n, dtype=np.int64)
    rho_cum = np.zeros(n)
    wsum = np.zeros(shape(n))
    elim_round = np.zeros(n, dtype=np.uint8)
    # state of the points still active, kept compact (one slot per active point)
    idx = pts
    b_a = b_units[pts]
    unit_a = users._unit_rho[pts]
    cons_a = np.zeros(idx.size, dtype=np.int64)
    rc_a = np.zeros(idx.size)
    ws_a = np.zeros(shape(idx.size))

    def retire(mask):
        out = idx[mask]
        cons[out] = cons_a[mask]
        rho_cum[out] = rc_a[mask]
        wsum[out] = ws_a[mask]

    for t in range(1, int(c) + 1):
        if idx.size == 0:
            break
        if t < c:
            req = np.floor(b_a * w_frac[t - 1]).astype(np.int64)
        else:   # the last round takes what is left, so the rounds sum to b exactly
            req = b_a - cons_a
        sel, z, refused = _ask_round(users, idx, req, rng, score)
        rho = req[sel] * unit_a[sel]
        cons_a[sel] += req[sel]
        rc_a[sel] += rho
        ws_a[sel] += (rho[:, None] * z) if score is None else rho * z
        lo_now, hi_now = _eliminated(ws_a, rc_a, score, g, radius, nu_low, nu_high)
        done = lo_now | hi_now
        low[idx[lo_now]] = True
        high[idx[hi_now]] = True
        elim_round[idx[done]] = t
        leave = done | refused
        if leave.any():
            retire(leave)
            keep = ~leave
            idx, b_a, unit_a, cons_a, rc_a, ws_a = (a[keep] for a in (idx, b_a, unit_a, cons_a, rc_a, ws_a))
    retire(np.ones(idx.size, dtype=bool))
    answered = rho_cum > 0
    rem = answered & ~low & ~high
    with np.errstate(divide="ignore", invalid="ignore"):
        est = wsum / (rho_cum[:, None] if score is None else rho_cum)
    return Elimination(answered, low, high, rem, cons, rho_cum, est, elim_round)


@dataclass
class RangeOutcome:
    """One private range count: the estimate and per-point accounting (all public)."""

    estimate: float           # count over answering points (+ imputation, see QuerySession)
    n_answered: int
    n_low: int
    n_high: int
    n_rem: int
    cons_units: np.ndarray
    elim_round: np.ndarray
    answered: np.ndarray
    theta_mean: float = 0.0


def _final_count(est, rect_m, rho, privatize, theta_mode):
    """Decide each point from its full-allocation average (Alg 6 lines 5-6, or BM line 2)."""
    if privatize == "pt":
        return np.count_nonzero(_points_phi(est, rect_m) <= 0), 0.0
    L, W = rect_m[2] - rect_m[0], rect_m[3] - rect_m[1]
    theta = theta_shift(L, W, 1.0 / np.sqrt(2.0 * rho), theta_mode) if rho.size else np.zeros(0)
    return np.count_nonzero(est <= -theta), float(theta.mean()) if theta.size else 0.0


def baseline_count(users: LocalUsers, rect_m, b_units, privatize: str, *, rng,
                   theta_mode: str = "uniform-exact") -> RangeOutcome:
    """BM-pt / BM-dist (spec 4.2): every point answers once with its whole allocation."""
    n = users.n_points
    pts = np.arange(n)
    b_units = np.asarray(b_units, dtype=np.int64)
    score = None if privatize == "pt" else _phi_score(rect_m)
    ok, z = users.respond(pts, b_units, rng, score)
    got = pts[ok]
    cnt, th = _final_count(z, rect_m, users.rho_of(got, b_units[got]), privatize, theta_mode)
    cons = np.where(ok, b_units, 0)
    return RangeOutcome(float(cnt), int(ok.sum()), 0, 0, int(ok.sum()), cons,
                        np.zeros(n, dtype=np.uint8), ok, th)


def elimination_count(users: LocalUsers, rect_m, b_units, privatize: str, *, rng, c: int = 10,
                      split: str = "doubling", beta: float = 0.1,
                      theta_mode: str = "uniform-exact") -> RangeOutcome:
    """PM-pt / PM-dist (Alg 6): NIE with g = phi_R, nu_low = nu_high = 0, beta' = beta/(c n);
    count = |I_low| + the baseline rule on the full-budget averages of I_rem."""
    n = users.n_points
    beta_prime = beta / (c * max(n, 1))
    score = None if privatize == "pt" else _phi_score(rect_m)
    g = (lambda z: _points_phi(z, rect_m)) if privatize == "pt" else None
    el = eliminate(users, b_units, c, split, beta_prime, score=score, g=g, rng=rng)
    rem = np.flatnonzero(el.rem)
    cnt, th = _final_count(el.est[rem], rect_m, el.rho_cum[rem], privatize, theta_mode)
    return RangeOutcome(float(el.low.sum() + cnt), int(el.answered.sum()), int(el.low.sum()),
                        int(el.high.sum()), int(rem.size), el.cons_units, el.elim_round,
                        el.answered, th)
