"""The data owner's total privacy budget for one dataset, across releases and interactive sessions.

Composition rule (stated to users as is):
- releases are pure ε-DP and compose by basic composition: their ε add up;
- interactive sessions are ρ-zCDP (per user, at a stated distance); their ρ add up (zCDP
  composition) and the sum is converted once to (ε, δ)-DP with ε = ρ + 2·sqrt(ρ·ln(1/δ))
  (Bun & Steinke 2016, Prop. 1.3);
- the account's spend is ε_releases + ε(ρ_sessions, δ), which is (spend, δ)-DP by basic
  composition of approximate DP (δ is 0 while no session has been charged).

A request that would take the spend past the total is refused before anything is drawn. A
request identical to an earlier one (the same `key`: a fixed-seed demo rebuilt exactly) is the
same output and costs nothing again; a fresh draw is a new output and costs again. The total
can only be raised, and only with `confirm=True`: every raise weakens the promise to the people
in the data. Modelled on diffprivlib's BudgetAccountant (check, then spend), Tumult Analytics'
Session (every query charged to one budget) and OpenDP's odometers (spend so far, never reset).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

from .errors import BudgetError, ParameterError, positive_finite
from .mechanisms import mechanisms, release

DEFAULT_TOTAL = 10.0
DEFAULT_DELTA = 1e-6
TOLERANCE = 1e-9              # relative slack for float sums at the cap (diffprivlib's "slack")
COMPOSITION_RULE = ("basic composition: the ε of releases add up; interactive sessions are "
                    "ρ-zCDP, their ρ add up and are converted once to ε at δ "
                    "(ε = ρ + 2√(ρ ln 1/δ)); the spend is the sum of both")


def epsilon_from_rho(rho: float, delta: float = DEFAULT_DELTA) -> float:
    """(ε, δ)-DP implied by ρ-zCDP: ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke, Prop. 1.3)."""
    if rho <= 0:
        return 0.0
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@dataclass(frozen=True)
class Charge:
    """One spend on the account: a release (pure ε) or an interactive session (zCDP ρ)."""

    label: str
    epsilon: float = 0.0        # pure ε, basic composition
    rho: float = 0.0            # zCDP ρ, added then converted at the account's δ
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
    def spent_epsilon(self) -> float:
        """ε of the releases (basic composition)."""
        return math.fsum(c.epsilon for c in self.charges)

    @property
    def spent_rho(self) -> float:
        """ρ of the interactive sessions (zCDP composition)."""
        return math.fsum(c.rho for c in self.charges)

    @property
    def spent(self) -> float:
        """The account's spend in ε: releases plus the sessions' ρ converted at δ."""
        return self.spend_with(0.0, 0.0)

    @property
    def remaining(self) -> float:
        return max(self.total - self.spent, 0.0)

    @property
    def uses_delta(self) -> bool:
        """True once an interactive session was charged: the guarantee is then (ε, δ)."""
        return self.spent_rho > 0

    @property
    def private(self) -> bool:
        """False once any charged output was not private (a fixed-seed demo, a fitted box)."""
        return all(c.private for c in self.charges)

    def spend_with(self, epsilon: float = 0.0, rho: float = 0.0) -> float:
        """What the spend would be after a further charge of (ε, ρ)."""
        return self.spent_epsilon + epsilon + epsilon_from_rho(self.spent_rho + rho, self.delta)

    def has(self, key: str | None) -> bool:
        return key is not None and any(c.key == key for c in self.charges)

    # ------------------------------------------------------------------ spending
    def check(self, epsilon: float = 0.0, rho: float = 0.0, key: str | None = None):
        """Refuse (BudgetError) a charge that would take the spend past the total."""
        if self.has(key):
            return
        after = self.spend_with(epsilon, rho)
        if after > self.total * (1 + TOLERANCE):
            need = after - self.spent
            raise BudgetError(
                f"refused: this needs ε = {need:.4g} but only {self.remaining:.4g} of this "
                f"dataset's total budget of {self.total:g} is left (spent {self.spent:.4g}). "
                "Lower ε, or raise the total budget, which weakens the guarantee for everyone "
                "in the data.")

    def charge(self, label: str, epsilon: float = 0.0, rho: float = 0.0, key: str | None = None,
               private: bool = True, note: str = "", ref: str | None = None) -> Charge | None:
        """Check, then record one charge; returns None when `key` was already paid for."""
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
                seed=None, key: str | None = None, ref: str | None = None, **kwargs):
        """`dp.release` charged to this account: refused beyond the total, charged before drawing.

        The charge stays if the mechanism fails after reading the data (the failure could
        depend on it). A fixed integer seed with a `key` seen before rebuilds the same output
        at no new cost; with `seed=None` (fresh randomness) every call is a new draw and costs.
        `ref` names the output in the charge (e.g. the caller's cache key) and never skips one.
        """
        spec = mechanisms().get(name)
        if spec is None:
            raise ParameterError(f"unknown mechanism {name!r}; choose one of {sorted(mechanisms())}")
        spec.resolve_split(split)            # public inputs are checked before anything is charged
        spec.resolve_params(params)
        if seed is None:
            key = None          # a fresh draw is never the same output as an earlier one
        charged = self.charge(spec.label, positive_finite("ε", epsilon), key=key,
                              note="fresh randomness" if seed is None else "fixed seed", ref=ref)
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
        return (f"Accountant(spent={self.spent:.4g} of {self.total:g}, "
                f"{len(self.charges)} charge{'s' if len(self.charges) != 1 else ''})")

