"""Per-user privacy filters (spec 2.5) and the GP/CGP/zCDP conversions their budgets use (spec 2.1).

Kept apart from the mechanisms so that every ledger decision visibly depends on requested budgets
alone, never on data (spec P3).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError

UNITS = 1 << 40                 # a user's whole budget in ledger units (spec P11)


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
