"""The data owner's total privacy budget for one dataset, across releases and interactive sessions.

Releases and interactive sessions protect different units, so the account keeps one line for
each and caps both at the total (stated to users as is):
- **releases** protect adding or removing one point (event level) or one user with all their
  points (user level); they are pure ε-DP and compose by basic composition: their ε add up. A
  mechanism whose own ε is for another relation (shifted grids: a move of at most δ) is
  charged its add/remove equivalent;
- **interactive sessions** (paper 002) protect where a known participant is: a user's location
  against one r metres away. They are ρ-zCDP for that unit; their ρ add up (zCDP composition)
  and the sum is converted once to (ε, δ)-DP with ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke
  2016, Prop. 1.3). They do not hide whether someone takes part.
Adding the two lines would state a guarantee under no single unit, so they are not added.

A request that would take either line past the total is refused before anything is drawn. A
fixed-seed release identical to an earlier one is the same output and costs nothing again; a
fresh draw is a new output and costs again. The total can only be raised, and only with
`confirm=True`: every raise weakens the promise to the people in the data. Modelled on
diffprivlib's BudgetAccountant (check, then spend), Tumult Analytics' Session (every query
charged to one budget) and OpenDP's odometers (spend so far, never reset).
"""
from __future__ import annotations

import json
import math
import numbers
import time
from dataclasses import asdict, dataclass

import numpy as np

from .constraints import positive_finite
from .errors import BudgetError, ParameterError
from .mechanisms import check_inputs, mechanisms, release

DEFAULT_TOTAL = 10.0
DEFAULT_DELTA = 1e-6
TOLERANCE = 1e-9              # relative slack for float sums at the cap (diffprivlib's "slack")
COMPOSITION_RULE = ("releases: basic composition, their ε add up (shifted grids at their "
                    "add/remove equivalent); interactive sessions, which protect a user's location "
                    "rather than presence, in their own line: their ρ add up (zCDP) and are "
                    "converted once to ε at δ (ε = ρ + 2√(ρ ln 1/δ)); each line is capped at the total")


def epsilon_from_rho(rho: float, delta: float = DEFAULT_DELTA) -> float:
    """(ε, δ)-DP implied by ρ-zCDP: ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke, Prop. 1.3)."""
    if rho <= 0:
        return 0.0
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@dataclass(frozen=True)
class Charge:
    """One spend on the account: a release (pure ε) or an interactive session (zCDP ρ)."""

    label: str
    epsilon: float = 0.0        # a release's pure ε for add/remove; basic composition
    rho: float = 0.0            # a session's zCDP ρ for a location move; added, then converted
    key: str | None = None      # identical keys are one output, charged once
    private: bool = True        # False: a demo or leaky release; the guarantee no longer holds
    note: str = ""
    at: float = 0.0             # unix time of the charge
    ref: str | None = None      # the caller's name for the output (a cache key); never skips a charge


class Accountant:
    """Total budget of one dataset and every charge against it (see the module docstring)."""

    def __init__(self, total: float = DEFAULT_TOTAL, delta: float = DEFAULT_DELTA, charges=()):
        self.total = positive_finite("total budget ε", total)
        if not 0 < delta < 1:
            raise ParameterError(f"δ must be in (0, 1), got {delta}")
        self.delta = float(delta)
        self.charges: list[Charge] = list(charges)

    # ------------------------------------------------------------------ what has been spent
    @property
    def spent(self) -> float:
        """ε of the releases (basic composition), for adding or removing one point or user."""
        return math.fsum(c.epsilon for c in self.charges)

    @property
    def spent_rho(self) -> float:
        """ρ of the interactive sessions (zCDP composition)."""
        return math.fsum(c.rho for c in self.charges)

    @property
    def session_spent(self) -> float:
        """The sessions' ρ converted once to ε at the account's δ (for a user's location)."""
        return epsilon_from_rho(self.spent_rho, self.delta)

    @property
    def remaining(self) -> float:
        """ε left for releases."""
        return max(self.total - self.spent, 0.0)

    @property
    def session_remaining(self) -> float:
        return max(self.total - self.session_spent, 0.0)

    @property
    def private(self) -> bool:
        """False once any charged output was not private (a fixed-seed demo, a fitted box)."""
        return all(c.private for c in self.charges)

    def has(self, key: str | None) -> bool:
        return key is not None and any(c.key == key for c in self.charges)

    # ------------------------------------------------------------------ spending
    def check(self, epsilon: float = 0.0, rho: float = 0.0):
        """Refuse (BudgetError) a charge that would take either line past the total."""
        if self.spent + epsilon > self.total * (1 + TOLERANCE):
            raise BudgetError(
                f"refused: this release needs ε = {epsilon:.4g} but only {self.remaining:.4g} of "
                f"this dataset's total budget of {self.total:g} is left (spent {self.spent:.4g}). "
                "Lower ε, or raise the total budget, which weakens the guarantee for everyone in "
                "the data.")
        after = epsilon_from_rho(self.spent_rho + rho, self.delta)
        if rho and after > self.total * (1 + TOLERANCE):
            raise BudgetError(
                f"refused: this session would take the interactive sessions' spend to ε = "
                f"{after:.4g} (at δ = {self.delta:g}), past this dataset's total budget of "
                f"{self.total:g} (spent {self.session_spent:.4g}). Use a larger σ, or raise the "
                "total budget, which weakens the guarantee for everyone in the data.")

    def charge(self, label: str, epsilon: float = 0.0, rho: float = 0.0, private: bool = True,
               note: str = "", ref: str | None = None) -> Charge:
        """Check, then record one charge (a release's ε or a session's ρ)."""
        return self._charge(label, epsilon, rho, None, private, note, ref)

    def _charge(self, label, epsilon, rho, key, private, note, ref) -> Charge | None:
        """`charge`, except that a `key` this account has seen (the same fixed-seed output,
        identified by `release` itself, never by a caller) is not charged again: None."""
        if epsilon < 0 or rho < 0 or not (math.isfinite(epsilon) and math.isfinite(rho)):
            raise ParameterError(f"a charge needs finite ε ≥ 0 and ρ ≥ 0, got ε={epsilon}, ρ={rho}")
        if epsilon == 0 and rho == 0:
            raise ParameterError("a charge must spend something (ε or ρ)")
        if self.has(key):
            return None
        self.check(epsilon, rho)
        c = Charge(label, float(epsilon), float(rho), key, bool(private), note, time.time(), ref)
        self.charges.append(c)
        return c

    def release(self, name: str, data, domain, epsilon: float = 1.0, split=None, params=None,
                seed=None, ref: str | None = None, **kwargs):
        """`dp.release` charged to this account: refused beyond the total, charged before drawing.

        The charge is the release's ε for adding or removing one point or user (shifted grids:
        their add/remove equivalent). It stays if the mechanism fails after reading the data
        (the failure could depend on it). An integer seed rebuilds the same output for the same
        inputs, charged once; `seed=None` (fresh randomness) or a Generator is a new draw that
        costs every time. `ref` names the output in the charge (e.g. a cache key).
        """
        spec = mechanisms().get(name)
        if spec is None:
            raise ParameterError(f"unknown mechanism {name!r}; choose one of {sorted(mechanisms())}")
        epsilon = positive_finite("ε", epsilon)
        split = spec.resolve_split(split)        # public inputs are checked before any charge
        params = spec.resolve_params(params)
        check_inputs(spec, data, domain, params)
        cost = release_cost(name, domain, epsilon, params)
        key = _identical_key(name, data, domain, epsilon, split, params, seed, kwargs)
        note = "fresh randomness" if key is None else "fixed seed"
        if cost != epsilon:
            note += f"; its own ε = {epsilon:g} is for {spec.unit}: charged its add/remove equivalent"
        charged = self._charge(spec.label, cost, 0.0, key, True, note, ref)
        rel = release(name, data, domain, epsilon=epsilon, split=split, params=params, seed=seed,
                      **kwargs)
        if charged is not None and not rel.private:
            self.charges[self.charges.index(charged)] = Charge(**{**asdict(charged), "private": False})
        return rel

    def raise_total(self, new_total: float, confirm: bool = False):
        """Raise the total budget; lowering is refused, and raising needs `confirm=True`."""
        new_total = positive_finite("total budget ε", new_total)
        if new_total < self.total:
            raise ParameterError(f"the total budget can only be raised (it is {self.total:g}); "
                                 f"{new_total:g} would take back a promise already made")
        if not confirm:
            raise ParameterError("raising the total budget weakens the guarantee for everyone in "
                                 "the data; confirm to raise it")
        self.total = new_total

    # ------------------------------------------------------------------ storage
    def to_dict(self) -> dict:
        return {"total": self.total, "delta": self.delta,
                "charges": [asdict(c) for c in self.charges]}

    @classmethod
    def from_dict(cls, d: dict) -> "Accountant":
        return cls(d["total"], d["delta"], [Charge(**c) for c in d["charges"]])

    def copy(self) -> "Accountant":
        return Accountant(self.total, self.delta, self.charges)

    def __repr__(self):
        return (f"Accountant(releases {self.spent:.4g}, sessions {self.session_spent:.4g} of {self.total:g}, "
                f"{len(self.charges)} charge{'s' if len(self.charges) != 1 else ''})")



def release_cost(name: str, domain, epsilon: float, params=None) -> float:
    """ε a budget account charges for a release: its ε for adding or removing one point or user
    (shifted grids: their add/remove equivalent, from public inputs only)."""
    spec = mechanisms()[name]
    if spec.add_remove_epsilon is None:
        return float(epsilon)
    return spec.add_remove_epsilon(domain, spec.resolve_params(params), float(epsilon))


def _identical_key(name, data, domain, epsilon, split, params, seed, kwargs) -> str | None:
    """What makes a fixed-seed release the same output again; None for fresh draws."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        return None
    return json.dumps([name, data.fingerprint, domain.to_dict(), epsilon, list(split), params,
                       int(seed), kwargs], sort_keys=True, default=_whole)


def _whole(value):
    """JSON for arrays (e.g. a workload) in full: str() would abbreviate long ones with '…',
    making different arguments look identical."""
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)
