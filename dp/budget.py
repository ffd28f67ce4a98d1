"""The privacy ledger: every noisy draw that reads the data is charged here."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from .errors import BudgetError, ParameterError
from .noise import count_noise, discrete_laplace, exponential_mechanism


@dataclass(frozen=True)
class LedgerEntry:
    """One charged step: what was drawn, at which epsilon, against which sensitivity."""

    step: str
    epsilon: float
    sensitivity: float
    noise: str = "discrete laplace"  # discrete laplace | discrete gaussian | exponential | none
    scale: float | None = None      # noise scale actually used, e.g. sensitivity / epsilon
    private: bool = True            # False for steps that read the data without any guarantee
    note: str = ""


FIXED_SEED_STEP = "fixed seed (reproducible demo)"
FIXED_SEED_NOTE = ("reproducible demo: NOT private, the noise can be removed by anyone who knows "
                   "or guesses the seed")
GROUP_STEP = "user-level: at most {k} points per user (group privacy)"
GROUP_NOTE = ("each user keeps at most {k} points, chosen at random by a public rule; every step "
              "above ran at 1/{k} of the ε shown, with the noise scale shown, and states its ε "
              "and sensitivity for one user (× {k}): an ε/{k}-DP step is ε-DP for groups of {k} "
              "points")


class Ledger:
    """Sequential-composition ledger of one release; `total` must equal the requested epsilon."""

    def __init__(self):
        self.entries: list[LedgerEntry] = []

    def charge(self, step: str, epsilon: float, sensitivity: float, noise: str = "discrete laplace",
               scale: float | None = None, note: str = "") -> LedgerEntry:
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise BudgetError(f"step {step!r} must spend a positive, finite epsilon, got {epsilon}")
        entry = LedgerEntry(step, float(epsilon), float(sensitivity), noise, scale, True, note)
        self.entries.append(entry)
        return entry

    def noisy_counts(self, rng, counts, epsilon: float, step: str, sensitivity: float = 1.0,
                     note: str = "") -> np.ndarray:
        """Charge `step`, then return integer counts + discrete Laplace(sensitivity/epsilon).

        The draw and its charge happen in this one call, so no mechanism can draw without
        paying; the charge comes first, so a failure after it still counts as spent.
        """
        c = np.asarray(counts)
        ints = np.rint(c).astype(np.int64)
        if not np.array_equal(ints, c):
            raise ValueError(f"{step}: counts must be whole numbers to get integer noise")
        self.charge(step, epsilon, sensitivity, "discrete laplace", sensitivity / epsilon, note)
        return ints + count_noise(rng, epsilon, sensitivity, ints.shape)

    def noise_source(self, rng, step: str, epsilon: float, sensitivity: float, scale: float,
                     note: str = ""):
        """Charge `step`, then return its sampler, size -> integer discrete Laplace(scale) draws,
        for a mechanism that draws inside a loop (a tree growing). The sampler does not count its
        calls: the mechanism's own argument (parallel composition over a level's disjoint
        nodes, PrivTree's depth-independent cost) must cover every draw it makes with it."""
        self.charge(step, epsilon, sensitivity, "discrete laplace", scale, note)
        return lambda size: discrete_laplace(rng, scale, size)

    def select(self, rng, scores, epsilon: float, sensitivity: float, step: str, choices,
               note: str = "") -> tuple[int, np.ndarray]:
        """Charge `step`, then pick one of `choices` by the exact exponential mechanism on
        `scores`; returns (index, the owner-only ideal probabilities). The choice is released."""
        self.charge(step, epsilon, sensitivity, "exponential", None, note)
        idx, probs = exponential_mechanism(rng, scores, epsilon, sensitivity)
        self.entries[-1] = replace(self.entries[-1],
                                   note=f"{note}; chose {choices[idx]} of {list(choices)}")
        return idx, probs

    def noisy_size(self, rng, n: int, epsilon: float, purpose: str) -> int:
        """A noisy dataset size N + discrete Laplace(1/ε), charged here (N has sensitivity 1).

        Rules that need N (a grid size, a tree height, a sanity bound) use this, never N; it is
        released as the noisy dataset size.
        """
        return int(self.noisy_counts(rng, int(n), epsilon, f"noisy dataset size ({purpose})",
                                     note="discrete Laplace(1/ε) on the number of points; "
                                          "released as the noisy dataset size"))

    def restate_per_group(self, k: int) -> LedgerEntry:
        """Group privacy: restate the charges of a run at ε/k for a group of k points (ε and
        sensitivity × k, noise scale as drawn), then say so in an entry that spends nothing."""
        self.entries = [replace(e, epsilon=e.epsilon * k, sensitivity=e.sensitivity * k)
                        if e.private else e for e in self.entries]
        entry = LedgerEntry(GROUP_STEP.format(k=k), 0.0, 0.0, "none (public rule)", None, True,
                            GROUP_NOTE.format(k=k))
        self.entries.append(entry)
        return entry

    def record_leak(self, step: str, note: str) -> LedgerEntry:
        """Record a step that used the data with no DP guarantee (e.g. a domain fitted to data)."""
        entry = LedgerEntry(step, 0.0, math.inf, "none", None, False, note)
        self.entries.append(entry)
        return entry

    def record_fixed_seed(self) -> LedgerEntry:
        """Record that a fixed seed made the noise reproducible: the release is a demo, not private."""
        return self.record_leak(FIXED_SEED_STEP, FIXED_SEED_NOTE)

    @property
    def fixed_seed(self) -> bool:
        """True when a fixed seed made the noise reproducible (and so removable)."""
        return any(e.step == FIXED_SEED_STEP for e in self.entries)

    @property
    def total(self) -> float:
        return math.fsum(e.epsilon for e in self.entries)

    @property
    def private(self) -> bool:
        """True when no step leaked."""
        return all(e.private for e in self.entries)

    def check(self, epsilon: float, rel_tol: float = 1e-9):
        """Refuse a release whose charges do not sum to the epsilon the user chose."""
        if not math.isclose(self.total, epsilon, rel_tol=rel_tol, abs_tol=1e-12):
            raise BudgetError(f"ledger sums to {self.total!r} but the release was asked to spend "
                              f"{epsilon!r}")

    def to_list(self) -> list[dict]:
        return [asdict(e) for e in self.entries]

    def __iter__(self):
        return iter(self.entries)

    def __len__(self):
        return len(self.entries)

    def __repr__(self):
        rows = ", ".join(f"{e.step}={e.epsilon:g}" for e in self.entries)
        return f"Ledger({rows}; total={self.total:g})"


def geometric_budgets(h: int, eps: float, fanout: int = 2) -> np.ndarray:
    """ε per tree level for heights i = 0 (leaves) .. h (root), summing to eps: spec 003 Eq. (G)
    generalised to fanout f (f = 2 is HTF's Eq. (G), f = 4 a quadtree's).

    Minimising Σ_i f^(h-i) / ε_i² (the count variance summed over all nodes of every level)
    subject to Σ_i ε_i = eps gives ε_i ∝ f^((h-i)/3): ε_i = r^(h-i) eps (r - 1) / (r^(h+1) - 1)
    with r = f^(1/3); the last-bit rounding of the sum is cancelled so the ledger adds up.
    """
    if h < 0:
        raise ParameterError(f"tree height must be >= 0, got {h}")
    r = float(fanout) ** (1.0 / 3.0)
    i = np.arange(h + 1, dtype=np.float64)
    E = r ** (h - i) * eps * (r - 1.0) / (r ** (h + 1) - 1.0)
    return E * (eps / math.fsum(E))
