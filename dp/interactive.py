"""Interactive geo-private range queries with per-user budgets and savings reuse (spec 002).

Every point's owner is a user who keeps a location-privacy budget and answers queries locally
(simulated here). A user's location is protected with rho_B-CGP (Gaussian geo-privacy, rho in
1/m^2) w.r.t. distances in metres, up to a small rounding allowance (see below). Each rectangle
the analyst draws is answered on the spot:

    import dp
    data, domain = dp.load_sample("small_city_5k")
    session = dp.interactive.QuerySession(data, domain, sigma_m=100, planned_queries=10,
                                          strategy="gamma", method="pm-dist")
    res = session.ask(dp.Rect(-0.2, 51.45, -0.05, 51.55))
    res.answer, res.saving, res.n_halted           # private answer and public accounting
    res.true_count                                  # owner-only diagnostic

Pieces (spec sections in brackets):
- `PrivacyFilter` [2.5]: per-user integer ledgers; a request that would overshoot a user's
  budget halts that user for good. The same filter serves pure GP (epsilon per metre) and CGP
  (rho per square metre); only the unit differs.
- `allocate` [2.6]: the budgeting strategies none / even / gamma / linear over m planned
  queries, and the open-ended rule b = min(B/m, R) beyond m.
- `signed_distance`, `signed_distance_rotated`, `theta_shift` [4.1, 4.3].
- `baseline_count`, `elimination_count` [4.2, 4.4]: BM-pt, BM-dist and iterative elimination
  (PM-pt, PM-dist) with even or doubling round splits.
- `QuerySession` [4.5]: the multi-query loop, with a counterfactual baseline world and the
  one-shot full-budget reference release for comparison (owner-only simulations, never published).
- `kde_estimate`, `knn_query` [5] and the central-mode helpers [5, App C] are small extras.

Distances (spec P6). The mechanisms work in planar metres: by default
`dp.domain.ConservativeProjection`, an equirectangular map scaled for the box's worst latitude
and width that never places two points of the box farther apart than their true geodesic
distance on WGS84 (or on the mean sphere). The privacy loss between two locations is at most
rho (d_plane)^2 <= rho (d_geodesic)^2, so every guarantee below holds in real metres for any two
locations in the box. Lon/lat rectangles stay axis-aligned rectangles. `projection="mercator"`
(the paper's) inflates distances by sec(lat): its guarantee holds in Mercator metres only.

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

Randomness: a session draws 128 bits of OS entropy unless given a seed. An integer seed makes
every answer reproducible by anyone who knows it: for tests and demos only, never private.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import special

from . import noise
from .domain import EARTH_RADIUS_M, ConservativeProjection, Domain
from .errors import BudgetError, ParameterError
from .points import PointData
from .queries import Rect

UNITS = 1 << 40                 # a user's whole budget in ledger units (spec P11)
STRATEGIES = ("none", "even", "gamma", "linear")
METHODS = ("bm-pt", "bm-dist", "pm-pt", "pm-dist")
SPLITS = ("even", "doubling")
THETA_MODES = ("uniform-exact", "paper", "none")
PROJECTIONS = ("local", "mercator")
MAX_ROUNDS = 64                 # spec 7: cap c at 64
THETA_GRID = 256                # uniform-exact theta: distinct sigmas solved directly, else interpolated
COUNT_RHO_FLOOR = 2.0 ** -22    # central counts: rounds need rho above this (sigma < 1449, grid <= 1)


# ============================================================================ conversions
def rho_from_sigma(sigma_m):
    """CGP budget rho = 1/(2 sigma^2) (1/m^2) of Gaussian noise with std sigma metres (Lemma 3.4)."""
    sigma_m = np.asarray(sigma_m, dtype=np.float64)
    return 1.0 / (2.0 * sigma_m ** 2)


def sigma_from_rho(rho):
    """Per-coordinate noise std (metres) that spends rho: sigma = 1/sqrt(2 rho)."""
    return 1.0 / np.sqrt(2.0 * np.asarray(rho, dtype=np.float64))


def gp_to_cgp(epsilon):
    """Lemma 3.1: epsilon-GP implies (epsilon^2/2)-CGP."""
    return np.asarray(epsilon, dtype=np.float64) ** 2 / 2.0


def cgp_epsilon_at(rho, r_m, delta=1e-6):
    """Lemma 3.2, pairwise form (spec 2.1): two locations r metres apart are
    (eps_r, delta)-indistinguishable with eps_r = rho r^2 + 2 r sqrt(rho ln(1/delta))."""
    rho = np.asarray(rho, dtype=np.float64)
    r = np.asarray(r_m, dtype=np.float64)
    return rho * r ** 2 + 2.0 * r * np.sqrt(rho * math.log(1.0 / delta))


def rho_from_eps_delta(epsilon: float, delta: float) -> float:
    """Central mode (spec 7, Mode B): the zCDP rho matching (epsilon, delta)-DP."""
    L = math.log(1.0 / delta)
    return (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2


def eps_from_rho(rho: float, delta: float) -> float:
    """Inverse of `rho_from_eps_delta`: epsilon = rho + 2 sqrt(rho ln(1/delta))."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


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


# ============================================================================ exact noise
# ============================================================================ privacy filter
def _positive_budget(budget) -> np.ndarray:
    """Budgets as floats (one number or one per user), refused unless positive and finite."""
    b = np.asarray(budget, dtype=np.float64)
    if b.ndim > 1 or not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ParameterError("every user's budget must be a positive, finite number")
    return b


class PrivacyFilter:
    """Per-user privacy filters (spec 2.5, eq 7, Alg 1) as integer ledgers, vectorised.

    Each user i has a budget B_i (> 0): epsilon per metre for pure GP (`kind="gp"`) or rho per
    square metre for CGP (`kind="cgp"`). Ledgers count in units of B_i / 2^40 (spec P11), so
    a user's whole budget is exactly `UNITS` and the overshoot test is an integer comparison.
    A request of u units for user i is answered iff the user is not halted and
    spent_i + u <= UNITS; a request that would overshoot halts the user for good (Remark 2)
    and every later request returns nothing. Zero requests (the constant algorithm) never
    change any state and get no answer. Decisions use requests and budgets only, never data.
    """

    def __init__(self, budget, n_users: int | None = None, kind: str = "cgp", audit: bool = False):
        if kind not in ("gp", "cgp"):
            raise ParameterError(f"filter kind must be 'gp' or 'cgp', got {kind!r}")
        b = np.atleast_1d(_positive_budget(budget))
        if n_users is not None:
            if b.size not in (1, int(n_users)):
                raise ParameterError(f"{b.size} budgets for {int(n_users)} users; give one number "
                                     "or one per user")
            b = np.broadcast_to(b, (int(n_users),))
        self.kind = kind
        self.budget = np.array(b, dtype=np.float64)
        self.spent_units = np.zeros(b.size, dtype=np.int64)
        self.halted = np.zeros(b.size, dtype=bool)
        self.audit = audit
        self.log: list[tuple[np.ndarray, np.ndarray]] = []   # (users, units) per granted request

    def __len__(self) -> int:
        return int(self.budget.size)

    def to_units(self, amount, users=None) -> np.ndarray:
        """Amounts (epsilon or rho) as whole ledger units, rounded down (spec P11)."""
        b = self.budget if users is None else self.budget[users]
        u = np.floor(np.asarray(amount, dtype=np.float64) / b * UNITS)
        return np.clip(np.nan_to_num(u, nan=0.0, posinf=2.0 * UNITS), 0, 2.0 * UNITS).astype(np.int64)

    def from_units(self, units, users=None) -> np.ndarray:
        b = self.budget if users is None else self.budget[users]
        return np.asarray(units, dtype=np.float64) * (b / UNITS)

    def request(self, users, units, _unique: bool = False) -> np.ndarray:
        """Ask each user in `users` (distinct indices) to spend `units`; True where it answers."""
        users = np.asarray(users, dtype=np.intp)
        units = np.broadcast_to(np.asarray(units, dtype=np.int64), users.shape)
        if not _unique and np.unique(users).size != users.size:
            raise ParameterError("a filter request names each user at most once")
        if np.any(units < 0):
            raise ParameterError("requests must be non-negative")
        live = ~self.halted[users] & (units > 0)
        over = live & (self.spent_units[users] + units > UNITS)
        self.halted[users[over]] = True
        ok = live & ~over
        self.spent_units[users[ok]] += units[ok]
        if self.audit:
            self.log.append((users[ok].copy(), units[ok].copy()))
        return ok

    def request_amount(self, users, amount) -> np.ndarray:
        """`request` with amounts in epsilon or rho (rounded down to units)."""
        users = np.asarray(users, dtype=np.intp)
        return self.request(users, self.to_units(amount, users))

    @property
    def remaining_units(self) -> np.ndarray:
        return UNITS - self.spent_units

    @property
    def spent(self) -> np.ndarray:
        """Budget spent per user (epsilon or rho); public (a function of the transcript, P3)."""
        return self.from_units(self.spent_units)

    @property
    def remaining(self) -> np.ndarray:
        return self.from_units(self.remaining_units)

    def audit_spent_units(self) -> np.ndarray:
        """Sum of every logged granted request per user (needs audit=True)."""
        total = np.zeros(self.budget.size, dtype=np.int64)
        for users, units in self.log:
            np.add.at(total, users, units)
        return total


# ============================================================================ budgeting
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


# ============================================================================ geometry
def signed_distance(x, y, rect_m) -> np.ndarray:
    """phi_R (eq 11) for the axis-aligned R = [x0, x1] x [y0, y1]: minus the distance to the
    boundary inside (boundary included, phi = 0), plus the distance to R outside. 1-Lipschitz."""
    x0, y0, x1, y1 = (float(v) for v in rect_m)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dx = np.maximum(np.maximum(x0 - x, x - x1), 0.0)
    dy = np.maximum(np.maximum(y0 - y, y - y1), 0.0)
    depth = np.minimum(np.minimum(x - x0, x1 - x), np.minimum(y - y0, y1 - y))
    return np.where(depth >= 0, -np.maximum(depth, 0.0), np.hypot(dx, dy))


def signed_distance_rotated(x, y, vertices) -> np.ndarray:
    """phi_R for a rectangle given by its 4 vertices in order (App A)."""
    v = np.asarray(vertices, dtype=np.float64).reshape(4, 2)
    p = np.stack([np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)], axis=-1)

    def lam(a, b):
        e = v[b] - v[a]
        return ((p - v[a]) @ e) / (e @ e)

    l12, l23 = lam(0, 1), lam(1, 2)
    inside = (l12 >= 0) & (l12 <= 1) & (l23 >= 0) & (l23 <= 1)
    dist = np.full(p.shape[:-1], np.inf)
    for a in range(4):
        b = (a + 1) % 4
        t = np.clip(lam(a, b), 0.0, 1.0)
        q = v[a] + t[..., None] * (v[b] - v[a])
        dist = np.minimum(dist, np.linalg.norm(p - q, axis=-1))
    return np.where(inside, -dist, dist)


def theta_paper(L, W, w):
    """Closed-form threshold shift (App B, spec 4.3) for side lengths L, W and noise std w.

    Case 1, inner band non-empty: theta = [(L+W) - sqrt((L+W)^2 - 16 w^2)] / 4; otherwise
    (including when case 1 leaves L - 2w - 2theta <= 0 or W - 2w - 2theta <= 0) case 2:
    theta = w - [sqrt((L+W)^2 + 4LW) - (L+W)] / 4. Square corners, uniform density.
    """
    L, W, w = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (L, W, w)))
    s = L + W
    disc = s ** 2 - 16.0 * w ** 2
    t1 = (s - np.sqrt(np.maximum(disc, 0.0))) / 4.0
    t2 = w - (np.sqrt(s ** 2 + 4.0 * L * W) - s) / 4.0
    case1 = (np.minimum(L, W) > 2.0 * w) & (disc >= 0) & (L - 2 * w - 2 * t1 > 0) & (W - 2 * w - 2 * t1 > 0)
    return np.where(case1, t1, t2)


def _tail0(u):
    """int_u^inf Q(v) dv with Q the standard normal upper tail."""
    return np.exp(-u * u / 2.0) / math.sqrt(2.0 * math.pi) - u * special.ndtr(-u)


def _tail1(u):
    """int_u^inf v Q(v) dv."""
    return 0.5 * ((1.0 - u * u) * special.ndtr(-u) + u * np.exp(-u * u / 2.0) / math.sqrt(2.0 * math.pi))


def expected_inside_mass(theta, L, W, sigma):
    """int Phi((-theta - s)/sigma) P(s) ds for uniform density 1 around an L x W rectangle,
    with P(s) = 2(L+W) + 2 pi s outside (rounded offsets) and 2(L+W) + 8 s inside (spec 4.3):
    the expected BM-dist count at threshold -theta, in closed form."""
    theta, L, W, sigma = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                               for v in (theta, L, W, sigma)))
    a = 2.0 * (L + W)
    h = np.minimum(L, W) / 2.0
    u0 = theta / sigma
    outside = sigma * ((a - 2 * math.pi * theta) * _tail0(u0) + 2 * math.pi * sigma * _tail1(u0))
    ua = (theta - h) / sigma
    inside = sigma * ((a - 8.0 * theta) * (_tail0(ua) - _tail0(u0))
                      + 8.0 * sigma * (_tail1(ua) - _tail1(u0)))
    return outside + inside


def theta_uniform_exact(L, W, sigma, iters: int = 80):
    """Shift theta with expected_inside_mass(theta) = L W, by bisection (spec 4.3 [ext])."""
    L, W, sigma = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (L, W, sigma)))
    lo = -10.0 * sigma - (L + W)
    hi = 10.0 * sigma + (L + W)
    target = L * W
    for _ in range(iters):
        mid = (lo + hi) / 2.0
        big = expected_inside_mass(mid, L, W, sigma) > target
        lo = np.where(big, mid, lo)
        hi = np.where(big, hi, mid)
    return (lo + hi) / 2.0


def theta_shift(L, W, sigma, mode: str = "uniform-exact") -> np.ndarray:
    """BM-dist threshold shift per user (spec 4.3, P7, P14): 'paper' closed form,
    'uniform-exact' (bisection, cached by sigma rounded to 4 significant digits) or 'none'."""
    sigma = np.atleast_1d(np.asarray(sigma, dtype=np.float64))
    if mode == "none":
        return np.zeros_like(sigma)
    if mode == "paper":
        return theta_paper(L, W, sigma)
    if mode != "uniform-exact":
        raise ParameterError(f"theta_mode must be one of {THETA_MODES}, got {mode!r}")
    if sigma.size == 0:
        return sigma.copy()
    e = np.floor(np.log10(sigma)) - 3
    rounded = np.round(sigma / 10.0 ** e) * 10.0 ** e
    uniq, inv = np.unique(rounded, return_inverse=True)
    if uniq.size <= THETA_GRID:
        return theta_uniform_exact(L, W, uniq)[inv]
    # many distinct budgets (after reuse): theta/sigma is smooth in log sigma, so solve on a
    # log-spaced grid and interpolate (relative error far below the 4-digit rounding)
    grid = np.geomspace(uniq[0], uniq[-1], THETA_GRID)
    ratio = theta_uniform_exact(L, W, grid) / grid
    return (np.interp(np.log(uniq), np.log(grid), ratio) * uniq)[inv]


# ============================================================================ local users
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


def _phi_score(rect_m):
    return lambda xy: signed_distance(xy[:, 0], xy[:, 1], rect_m)


def _points_phi(z, rect_m):
    return signed_distance(z[:, 0], z[:, 1], rect_m)


# ============================================================================ elimination
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
        pos = req > 0                      # zero requests are skipped (constant algorithm)
        every = bool(pos.all())
        sel = slice(None) if every else np.flatnonzero(pos)
        ok, z = users.respond(idx[sel], req[sel], rng, score)
        refused = np.zeros(idx.size, dtype=bool)
        if not ok.all():                   # halted users keep what they answered before
            sel = np.flatnonzero(pos)[ok] if not every else np.flatnonzero(ok)
            refused[np.flatnonzero(pos)[~ok]] = True
        rho = req[sel] * unit_a[sel]
        cons_a[sel] += req[sel]
        rc_a[sel] += rho
        ws_a[sel] += (rho[:, None] * z) if score is None else rho * z
        known = rc_a > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            avg = ws_a / (rc_a[:, None] if score is None else rc_a)
            gh = g(avg) if score is None else avg
            w = radius / np.sqrt(2.0 * rc_a)
        lo_now = known & (gh + w < nu_high)
        hi_now = known & ~lo_now & (gh - w > nu_low)
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


# ============================================================================ session
@dataclass
class QueryResult:
    """One answered rectangle.

    Private (what an analyst may see): `answer` and all budget accounting: allocations, use,
    savings, spent/remaining, halted users and elimination rounds are functions of the
    transcript (spec P3). Arrays are per user (rho, 1/m^2) unless named per point.

    Owner-only diagnostics (simulations and NON-PRIVATE values; spec P12, P17):
    `true_count` and every error; `baseline_answer`, the answer of the baseline method
    (BM, same privatization, strategy none) in a separate simulated ledger; and
    `reference_answer`, from one noisy release of every point at the full budget B. Showing
    the two alternative worlds to an analyst would spend budget beyond B.
    """

    k: int
    rect: Rect
    rect_m: tuple
    method: str
    strategy: str
    answer: float
    answer_answering: float           # count over the points whose users answered
    n_points_answering: int
    allocated: np.ndarray             # per user, rho allocated to this query
    used: np.ndarray                  # per user, rho consumed
    saved: np.ndarray                 # allocated - used
    spent: np.ndarray                 # per user, total rho spent so far
    remaining: np.ndarray
    budget: np.ndarray
    n_halted: int                     # users halted by the filter so far (permanent)
    n_newly_halted: int
    n_low: int
    n_high: int
    n_rem: int
    elim_round: np.ndarray            # per point uint8, 0 = not eliminated
    rounds: int
    theta_mean: float
    seconds: float
    true_count: int = -1              # owner-only
    baseline_answer: float = float("nan")    # owner-only simulation
    reference_answer: float = float("nan")   # owner-only simulation

    # ---- summaries (public)
    @property
    def allocated_mean(self) -> float:
        return float(self.allocated.mean()) if self.allocated.size else 0.0

    @property
    def sigma_mean_m(self) -> float:
        """Noise std of the mean allocation, 1/sqrt(2 mean b) metres."""
        a = self.allocated_mean
        return float(sigma_from_rho(a)) if a > 0 else float("inf")

    @property
    def saving(self) -> float:
        """Per-query saving 1 - sum(used) / sum(allocated)."""
        tot = float(self.allocated.sum())
        return 1.0 - float(self.used.sum()) / tot if tot > 0 else 0.0

    @property
    def spent_fraction(self) -> np.ndarray:
        return self.spent / self.budget

    @property
    def rounds_histogram(self) -> np.ndarray:
        """Points eliminated in round t at index t; index 0 = never eliminated."""
        return np.bincount(self.elim_round, minlength=self.rounds + 1)

    # ---- owner-only
    def error(self, which: str = "answer") -> float:
        """|estimate - true| for 'answer', 'baseline' or 'reference'. OWNER ONLY."""
        v = {"answer": self.answer, "baseline": self.baseline_answer,
             "reference": self.reference_answer}[which]
        return abs(v - self.true_count)

    def relative_error(self, which: str = "answer") -> float:
        """|estimate - true| / max(true, 1) (spec 6). OWNER ONLY."""
        return self.error(which) / max(self.true_count, 1)

    def summary(self, owner: bool = False) -> dict:
        """Scalars for tables and plots; owner=True adds the true count, errors and the
        simulated comparisons."""
        sf = self.spent_fraction
        d = {"k": self.k, "west": self.rect.west, "south": self.rect.south,
             "east": self.rect.east, "north": self.rect.north,
             "width_m": self.rect_m[2] - self.rect_m[0], "height_m": self.rect_m[3] - self.rect_m[1],
             "method": self.method, "strategy": self.strategy, "answer": self.answer,
             "allocated_mean": self.allocated_mean, "sigma_mean_m": self.sigma_mean_m,
             "used_mean": float(self.used.mean()) if self.used.size else 0.0,
             "saving": self.saving, "spent_fraction_mean": float(sf.mean()) if sf.size else 0.0,
             "spent_fraction_max": float(sf.max()) if sf.size else 0.0,
             "remaining_fraction_mean": float(1 - sf.mean()) if sf.size else 0.0,
             "users_99pct_spent": int(np.count_nonzero(sf >= 0.99)),
             "n_halted": self.n_halted, "n_low": self.n_low, "n_high": self.n_high,
             "n_rem": self.n_rem, "n_points_answering": self.n_points_answering,
             "seconds": self.seconds}
        if owner:
            d.update(true_count=self.true_count, abs_error=self.error(),
                     rel_error=self.relative_error(), baseline_answer=self.baseline_answer,
                     baseline_rel_error=self.relative_error("baseline"),
                     reference_answer=self.reference_answer,
                     reference_rel_error=self.relative_error("reference"))
        return d


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


def _seed_streams(seed) -> tuple:
    """(private, three SeedSequences for the main, baseline and reference worlds): None draws
    OS entropy and a Generator 128 bits of its stream (private); an integer is reproducible."""
    if isinstance(seed, np.random.Generator):
        ss = np.random.SeedSequence(seed.integers(0, 2 ** 32, size=4))
    else:
        ss = np.random.SeedSequence(seed)          # None: fresh OS entropy
    return seed is None or isinstance(seed, np.random.Generator), ss.spawn(3)


def _points_inside(data: PointData, domain: Domain) -> tuple:
    """(lon, lat, user ids or None) of the points inside the public box, the only places where
    the session's metres never overstate true distances; ParameterError if there are none."""
    inside = data.in_domain(domain)
    if not inside.any():
        raise ParameterError(f"no point of the data lies inside the box {domain.bounds}; choose "
                             "a box that contains the points to query")
    user = None if data.user is None else data.user[inside]
    return data.x[inside], data.y[inside], user


def _check_choice(name, value, options):
    v = str(value).lower()
    if v not in options:
        raise ParameterError(f"{name} must be one of {options}, got {value!r}")
    return v


class QuerySession:
    """Interactive range counting under per-user CGP budgets (spec 4.5, Mode A).

    Parameters
    ----------
    data : PointData in lon/lat. Only the points inside `domain` take part, as in the
        releases (which do not count points outside the box): outside it the session's metres
        may overstate true distances. No point inside raises ParameterError. Without user ids
        each point is one user. With user ids one ledger per user: a user's allocation for a
        query is split equally over its points, and its charge is the sum of its points'
        charges (composition; spec 2.2, P15). Points without a user id share one ledger.
    domain : the public Domain (every user's possible locations). Its worst latitude and width
        fix the default projection `projection="local"` (`dp.domain.ConservativeProjection`,
        spec P6): two points of the box are never farther apart in it than their geodesic
        distance, so the guarantee holds in real (WGS84) metres. A box touching a pole or
        spanning all 360 degrees of longitude is refused (no rectangle-preserving map can keep
        longitudes apart there). `projection="mercator"` gives the paper's Web Mercator
        metres: NOT conservative, they inflate distances by sec(lat), so the guarantee then
        holds only in Mercator metres (rho per true metre^2 up to sec^2(lat) larger).
    budget : rho_B per user (1/m^2), a number or one per user (in order of `user_ids`, the
        users with a point in the box).
        Or give `sigma_m`, the noise std (metres) of spending the whole budget at once.
    planned_queries, strategy, gamma : budgeting over m planned queries (spec 2.6).
    method : 'pm-dist' (default), 'pm-pt', 'bm-dist' or 'bm-pt'.
    rounds, split, beta : elimination rounds c, 'doubling' or 'even' split, failure prob.
    theta_mode : 'uniform-exact' (default), 'paper' or 'none' for the distance methods.
    before_data : called once every public input has passed its checks and before the data is
        read: charge a budget here, so that even a refusal that depends on the data (no point in
        the box) is paid for.
    compare : also run the baseline world (BM, strategy none, own ledger) per query.
    reference : also keep the one-shot release of every point at the full budget.
        Both are owner-only simulations on copies of the users with their own ledgers and
        random streams: they spend nothing from the users' (public) ledgers and are not
        published, so the guarantee covers `answer` and the accounting only. Showing their
        answers to an analyst would be extra releases beyond B.
    seed : None (default) draws 128 bits of OS entropy; a numpy Generator supplies 128 bits
        (keeping it secret is the caller's job). An integer seed makes every answer reproducible
        by anyone who knows it: tests and demos only, never private (`private` is False). The
        three worlds get independent generators spawned from one SeedSequence.

    Within the plan (k <= m) every allocation fits in what the user has left, so the filter
    never fires. Past the plan each user gets min(B/m, R) (spec 2.6 [decision]); a user with
    nothing left is still asked for its nominal share, which its filter refuses: it is halted
    for good and answers nothing after that. Halted users' points are imputed at the answering
    points' inside rate (never counted as 'outside', spec P10; `answer_answering` is the raw
    count). When no user can answer, `ask` raises BudgetError; `set_planned_queries` raises m.
    """

    def __init__(self, data: PointData, domain: Domain, budget=None, *, sigma_m=None,
                 planned_queries: int = 10, strategy: str = "gamma", gamma: float = 0.5,
                 method: str = "pm-dist", rounds: int = 10, split: str = "doubling",
                 beta: float = 0.1, theta_mode: str = "uniform-exact", projection: str = "local",
                 compare: bool = True, reference: bool = True, seed=None, audit: bool = False,
                 before_data=None):
        # every public input is checked before the data is read; then `before_data()` runs
        # (e.g. charging a budget), so a refusal that depends on the data is always paid for
        budget = _session_budget(budget, sigma_m)
        self.strategy = _check_choice("strategy", strategy, STRATEGIES)
        self.method = _check_choice("method", method, METHODS)
        self.split = _check_choice("split", split, SPLITS)
        self.theta_mode = _check_choice("theta_mode", theta_mode, THETA_MODES)
        if not 0.0 <= gamma <= 1.0:
            raise ParameterError(f"gamma must be in [0, 1], got {gamma}")
        if not 0.0 < beta < 1.0:
            raise ParameterError(f"beta must be in (0, 1), got {beta}")
        if int(rounds) != rounds or not 1 <= rounds <= MAX_ROUNDS:
            raise ParameterError(f"rounds must be an integer in 1..{MAX_ROUNDS}, got {rounds}")
        self.gamma, self.beta, self.rounds = float(gamma), float(beta), int(rounds)
        self.planned_queries = self._check_m(planned_queries)
        if not isinstance(domain, Domain):
            raise ParameterError(f"domain must be a dp.Domain (the public box), got "
                                 f"{type(domain).__name__}")
        self.domain = domain
        self.projection = _check_choice("projection", projection, PROJECTIONS)
        self._proj = ConservativeProjection(domain)
        if self.projection == "local" and self._proj.mx == 0:
            raise ParameterError(
                f"the domain {domain.bounds} touches a pole or spans all 360 degrees of longitude: "
                "no projection keeping lon/lat rectangles axis-aligned can measure east-west "
                "distances there without overstating true ones; choose a box clear of the poles "
                "and narrower than 360 degrees")
        self.private, (s_main, s_base, s_ref) = _seed_streams(seed)
        if before_data is not None:
            before_data()
        lon, lat, user = _points_inside(data, domain)
        xm, ym = self._to_metres(lon, lat)
        xy = np.column_stack([xm, ym]).astype(np.float64)
        if user is None:
            self.user_ids = None
            owner = None
            n_users = len(lon)
        else:
            self.user_ids, owner = np.unique(user, return_inverse=True)
            owner = owner.astype(np.intp)
            n_users = self.user_ids.size
        self.filter = PrivacyFilter(budget, n_users, kind="cgp", audit=audit)
        self.users = LocalUsers(xy, owner, self.filter)
        self._owner = owner
        self._pts_per_user = (np.ones(n_users, dtype=np.int64) if owner is None
                              else np.bincount(owner, minlength=n_users).astype(np.int64))
        self._rng = np.random.default_rng(s_main)
        self.compare = compare
        self._base_rng = np.random.default_rng(s_base)
        self._base_users = self.users.with_filter(PrivacyFilter(self.filter.budget, kind="cgp"))
        self.reference = reference
        self._ref_rng = np.random.default_rng(s_ref)
        self._ref_points = None
        self.k = 0
        self.history: list[dict] = []        # one `QueryResult.summary(owner=True)` per query
        self.last: QueryResult | None = None

    # ---------------------------------------------------------------- setup helpers
    @staticmethod
    def _check_m(m):
        if int(m) != m or m < 1:
            raise ParameterError(f"planned_queries must be a positive integer, got {m}")
        return int(m)

    def set_planned_queries(self, m: int):
        """Change m mid-session (e.g. raise it to continue past the plan, spec 2.6)."""
        self.planned_queries = self._check_m(m)

    def _to_metres(self, lon, lat):
        """Session metres: conservative equirectangular ('local') or Web Mercator (paper)."""
        if self.projection == "local":
            return self._proj.to_metres(lon, lat)
        lon = np.asarray(lon, dtype=np.float64)
        lat = np.clip(np.asarray(lat, dtype=np.float64), -85.05112878, 85.05112878)
        x = EARTH_RADIUS_M * np.radians(lon)
        y = EARTH_RADIUS_M * np.log(np.tan(np.pi / 4 + np.radians(lat) / 2))
        return x, y

    def rect_metres(self, rect: Rect) -> tuple:
        """(x0, y0, x1, y1) in the session's metres; exact for axis-aligned lon/lat boxes
        (both projections map lon to x and lat to y separately)."""
        x0, y0 = self._to_metres(rect.west, rect.south)
        x1, y1 = self._to_metres(rect.east, rect.north)
        return (float(x0), float(y0), float(x1), float(y1))

    # ---------------------------------------------------------------- public state
    @property
    def n_users(self) -> int:
        return len(self.filter)

    @property
    def n_points(self) -> int:
        return self.users.n_points

    @property
    def budget(self) -> np.ndarray:
        return self.filter.budget

    @property
    def spent(self) -> np.ndarray:
        return self.filter.spent

    @property
    def remaining(self) -> np.ndarray:
        return self.filter.remaining

    @property
    def halted(self) -> np.ndarray:
        return self.filter.halted.copy()

    def snap_allowance(self) -> np.ndarray:
        """Per user, the rounding allowance s = sqrt(Q / B) metres of its answers so far
        (public: it depends on the requested budgets only)."""
        return np.sqrt(self.users.snap_sq / self.budget)

    def privacy_statement(self, radii=(10.0, 100.0, 1000.0), delta: float = 1e-6) -> dict:
        """eps_r at delta for two locations r metres apart, for the least protected user so far.

        Guarantee: for every user i and any two of its possible locations in the box d metres
        apart (the largest move over its points; geodesic WGS84 metres with the default
        projection, Mercator metres with 'mercator'), every Renyi divergence of the transcript
        so far satisfies D_alpha <= alpha B_i (d + s_i)^2 (s_i = `snap_allowance`, which grows
        slowly with each answer), so the two are (eps, delta)-indistinguishable with
        eps = cgp_epsilon_at(B_i, r + s_i, delta). Returned: max over users, per r. The noise
        is secret only if the seed is: with an integer seed (`private` False) nothing holds.
        """
        b, s = self.budget, self.snap_allowance()
        if b.size == 0:
            return {float(r): 0.0 for r in radii}
        return {float(r): float(np.max(cgp_epsilon_at(b, r + s, delta))) for r in radii}

    def history_table(self, owner: bool = False) -> dict:
        """Column -> list over the queries asked (errors and true counts only if owner)."""
        public = set(self.last.summary(False)) if self.last is not None else set()
        rows = self.history if owner else [{k: v for k, v in h.items() if k in public}
                                           for h in self.history]
        cols = list(rows[0]) if rows else []
        return {c: [r[c] for r in rows] for c in cols}

    # ---------------------------------------------------------------- the loop
    def _allocation_units(self, flt: PrivacyFilter, strategy: str, k: int) -> np.ndarray:
        b = allocate(strategy, float(UNITS), flt.remaining_units.astype(np.float64), k,
                     self.planned_queries, self.gamma)
        return np.minimum(np.floor(b).astype(np.int64), flt.remaining_units)

    def _point_units(self, user_units: np.ndarray, flt: PrivacyFilter) -> np.ndarray:
        """Per-point allocation: the user's share split over its points (rounded down).
        A user with nothing left is still asked for its nominal share B/m, which the filter
        refuses: the user is halted for good and answers nothing from now on."""
        nominal = UNITS // self.planned_queries
        u = np.where((user_units == 0) & (flt.remaining_units < nominal), nominal, user_units)
        if self._owner is None:
            return u
        return (u // self._pts_per_user)[self._owner]

    def _run(self, users: LocalUsers, rect_m, b_pt, method, rng) -> RangeOutcome:
        privatize = method.split("-")[1]
        if method.startswith("bm"):
            return baseline_count(users, rect_m, b_pt, privatize, rng=rng, theta_mode=self.theta_mode)
        return elimination_count(users, rect_m, b_pt, privatize, rng=rng, c=self.rounds,
                                 split=self.split, beta=self.beta, theta_mode=self.theta_mode)

    def _impute(self, out: RangeOutcome) -> float:
        """Unanswered points (halted users) are imputed at the answering points' inside rate,
        never as 'outside' (spec P10); equals the raw count when everyone answered."""
        if out.n_answered == self.n_points or out.n_answered == 0:
            return out.estimate
        return out.estimate * self.n_points / out.n_answered

    def ask(self, rect: Rect) -> QueryResult:
        """Answer one rectangle (lon/lat) privately; see `QueryResult` for what is private.

        Raises BudgetError when no user can answer any more (every budget used up or halted).
        """
        if not isinstance(rect, Rect):
            rect = Rect.from_bounds(rect)
        t0 = time.perf_counter()
        k = self.k + 1
        rect_m = self.rect_metres(rect)
        flt = self.filter
        if self.n_users and np.all(flt.halted | (flt.remaining_units == 0)):
            raise BudgetError("every user's budget is used up: no query can be answered any more")
        halted_before = int(flt.halted.sum())
        alloc_u = self._allocation_units(flt, self.strategy, k)
        b_pt = self._point_units(alloc_u, flt)
        spent_before = flt.spent_units.copy()
        out = self._run(self.users, rect_m, b_pt, self.method, self._rng)
        used_units = flt.spent_units - spent_before
        answer = self._impute(out)
        seconds = time.perf_counter() - t0
        n_halted = int(flt.halted.sum())
        alloc = flt.from_units(alloc_u)
        used = flt.from_units(used_units)
        res = QueryResult(
            k=k, rect=rect, rect_m=rect_m, method=self.method, strategy=self.strategy,
            answer=float(answer), answer_answering=float(out.estimate),
            n_points_answering=out.n_answered, allocated=alloc, used=used, saved=alloc - used,
            spent=flt.spent, remaining=flt.remaining, budget=flt.budget, n_halted=n_halted,
            n_newly_halted=n_halted - halted_before, n_low=out.n_low, n_high=out.n_high,
            n_rem=out.n_rem, elim_round=out.elim_round, rounds=self.rounds,
            theta_mean=out.theta_mean, seconds=seconds)
        # ---- owner-only diagnostics and simulated alternative worlds
        res.true_count = int(np.count_nonzero(self.users.owner_values(_phi_score(rect_m)) <= 0))
        if self.compare:
            res.baseline_answer = self._baseline(rect_m, k)
        if self.reference:
            res.reference_answer = self._reference(rect_m)
        self.k = k
        self.last = res
        self.history.append(res.summary(owner=True))
        return res

    def _baseline(self, rect_m, k) -> float:
        """BM with strategy none in its own simulated ledger; NaN once that world is used up.
        Owner-only: it spends nothing from the session's (public) ledger and is never published."""
        bu = self._base_users
        flt = bu.filter
        if np.all(flt.halted | (flt.remaining_units == 0)):
            return float("nan")
        alloc = self._allocation_units(flt, "none", k)
        b_pt = self._point_units(alloc, flt)
        out = baseline_count(bu, rect_m, b_pt, self.method.split("-")[1], rng=self._base_rng,
                             theta_mode=self.theta_mode)
        return float(self._impute(out))

    def _reference(self, rect_m) -> float:
        """Count of one noisy release of every point at the full budget (drawn once).
        Owner-only: its own ledger and random stream, never published."""
        if self._ref_points is None:
            flt = PrivacyFilter(self.filter.budget, kind="cgp")
            ref = self.users.with_filter(flt)
            full = np.full(self.n_users, UNITS, dtype=np.int64)
            b_pt = full if self._owner is None else (full // self._pts_per_user)[self._owner]
            ok, z = ref.respond(np.arange(self.n_points), b_pt, self._ref_rng)
            self._ref_points = z
        return float(np.count_nonzero(_points_phi(self._ref_points, rect_m) <= 0))

    def ask_many(self, rects) -> list[QueryResult]:
        """`ask` for each rectangle in turn (Rects or (q, 4) [west, south, east, north])."""
        arr = rects if (len(rects) and isinstance(rects[0], Rect)) else [Rect.from_bounds(r) for r in np.asarray(rects).reshape(-1, 4)]
        return [self.ask(r) for r in arr]


# ============================================================================ KDE and k-NN
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


# ============================================================================ central mode
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
    if not (rho > 0 and math.isfinite(rho)):
        raise ParameterError(f"rho must be positive and finite, got {rho}")
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
