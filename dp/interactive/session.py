"""The multi-query loop an analyst drives (spec 4.5, Mode A): `QuerySession` answers rectangles one
by one under per-user budgets, and `QueryResult` separates what an answer may show from owner-only
diagnostics.

Distances (spec P6). The mechanisms work in planar metres: by default
`dp.domain.ConservativeProjection`, an equirectangular map scaled for the box's worst latitude
and width that never places two points of the box farther apart than their true geodesic
distance on WGS84 (or on the mean sphere). The privacy loss between two locations is at most
rho (d_plane)^2 <= rho (d_geodesic)^2, so every guarantee below holds in real metres for any two
locations in the box. Lon/lat rectangles stay axis-aligned rectangles. `projection="mercator"`
(the paper's) inflates distances by sec(lat): its guarantee holds in Mercator metres only.

Randomness: a session draws 128 bits of OS entropy unless given a seed (`dp.noise.make_rng`);
its three worlds (answers, baseline, reference) get independent generators spawned from that one.
An integer seed makes every answer reproducible by anyone who knows it: for tests and demos only,
never private.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import noise
from ..domain import EARTH_RADIUS_M, ConservativeProjection, Domain
from ..errors import BudgetError, ParameterError
from ..points import PointData
from ..queries import Rect
from .budgeting import MAX_ROUNDS, SPLITS, STRATEGIES, _session_budget, allocate
from .elimination import LocalUsers, RangeOutcome, baseline_count, elimination_count
from .filters import UNITS, PrivacyFilter, cgp_epsilon_at, sigma_from_rho
from .geometry import THETA_MODES, _phi_score, _points_phi

METHODS = ("bm-pt", "bm-dist", "pm-pt", "pm-dist")
PROJECTIONS = ("local", "mercator")


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


def _points_inside(data: PointData, domain: Domain) -> tuple:
    """(lon, lat, user ids or None) of the points inside the public box, the only places where
    the session's metres never overstate true distances; ParameterError if there are none."""
    if not data.raw_points:
        raise ParameterError("an interactive session answers from each point's position, which "
                             "this data does not hold (counts on a grid, or regions): load the "
                             "points themselves (dp.load_points) to run one")
    inside = data.in_domain(domain)
    if not inside.any():
        raise ParameterError(f"no point of the data lies inside the box {domain.bounds}; choose "
                             "a box that contains the points to query")
    user = None if data.users is None else data.users.take(inside).strings()
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
    seed : as for `dp.noise.make_rng`: None (default) draws 128 bits of OS entropy; a numpy
        Generator is used as given (keeping it secret is the caller's job). An integer seed makes
        every answer reproducible by anyone who knows it: tests and demos only, never private
        (`private` is False). The three worlds get independent generators spawned from that one
        (`Generator.spawn`).

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
        # None: fresh OS entropy; a Generator: the caller's (private); an int: a reproducible demo
        self.private = seed is None or isinstance(seed, np.random.Generator)
        main_rng, base_rng, ref_rng = noise.make_rng(seed).spawn(3)
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
        self._rng = main_rng
        self.compare = compare
        self._base_rng = base_rng
        self._base_users = self.users.with_filter(PrivacyFilter(self.filter.budget, kind="cgp"))
        self.reference = reference
        self._ref_rng = ref_rng
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
