"""HTF's budget plan from public inputs alone: the height rule, the split of ε, the checks that
refuse a request before any draw, and the ledger entries of the size and of the tree."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...budget import Ledger, geometric_budgets
from ...errors import ParameterError
from .split import OBJECTIVE_SENSITIVITY, SPLIT_GRID, split_noise_scale

PAPER_EPS_HEIGHT = 1e-4          # [P] Sec. 5.2
DEFAULT_SPLIT = (0.01, 0.15, 0.84)
SPLIT_RULES = ("midpoint", "search")
DEFAULT_SPLIT_RULE = "midpoint"  # share mode; measured on DPBench: docs/mechanisms.md


# ------------------------------------------------------------------------- height and budgets
def grid_h_max(shape) -> int:
    """h_max = ceil(log2 N) + ceil(log2 M) (spec H3)."""
    N, M = shape
    return int(math.ceil(math.log2(N)) + math.ceil(math.log2(M)))


def estimate_height(n_noisy: float, eps_tot: float, c0: float = 10.0, h_max: int | None = None) -> int:
    """h = floor(log2(max(n_noisy, 1) * eps_tot / c0)), clamped to [1, h_max] (spec H2-H3)."""
    v = max(float(n_noisy), 1.0) * float(eps_tot) / float(c0)
    h = math.floor(math.log2(v)) if v > 0 else 1
    h = max(h, 1)
    return h if h_max is None else min(h, int(h_max))


def height_budget(epsilon: float, mode: str, split=DEFAULT_SPLIT) -> float:
    """eps_height: 1e-4 in paper mode; max(1e-4, split[0] * epsilon) in share mode (spec 4)."""
    if mode == "paper":
        return PAPER_EPS_HEIGHT
    if mode == "share":
        return max(PAPER_EPS_HEIGHT, split[0] * epsilon)
    raise ParameterError(f"budget_mode must be 'share' or 'paper', got {mode!r}")


def _budget_parts(epsilon: float, h: int, eps_height: float, mode: str, split,
                  eps_prt_level: float, rule: str = "search") -> tuple[float, float, float]:
    """(eps_prt_level, eps_prt, eps_data) for height h; no check, public inputs only.

    The midpoint rule reads no data to split, so it spends nothing on the partition: the
    partition share goes to the counts.
    """
    if rule == "midpoint":
        return 0.0, 0.0, epsilon - eps_height
    if mode == "paper":
        eps_prt = h * eps_prt_level
    elif mode == "share":
        eps_prt = split[1] * epsilon
        eps_prt_level = eps_prt / h if h else 0.0
    else:
        raise ParameterError(f"budget_mode must be 'share' or 'paper', got {mode!r}")
    if h == 0:
        eps_prt = 0.0
    return eps_prt_level, eps_prt, epsilon - eps_height - eps_prt


def _counts_left(epsilon: float, eps_data: float) -> bool:
    return eps_data > 1e-12 * epsilon


def plan_budget(epsilon: float, h: int, eps_height: float, *, mode: str = "share",
                split=DEFAULT_SPLIT, eps_prt_level: float = 1e-3,
                split_rule: str = "search") -> dict:
    """Partition and count budgets once h is known (spec 3.8 line 1, pitfall 18).

    Raises ParameterError if nothing is left for the counts (H4), saying what to change. `build`
    calls it only with heights `affordable_height` allows, so it never raises after a draw.
    """
    eps_prt_level, eps_prt, eps_data = _budget_parts(epsilon, h, eps_height, mode, split,
                                                     eps_prt_level, split_rule)
    if not _counts_left(epsilon, eps_data):
        if mode == "paper":
            need = eps_height + eps_prt
            raise ParameterError(
                f"HTF paper budget mode leaves nothing for the counts: ε = {epsilon:g} but the "
                f"dataset size takes ε_height = {eps_height:g} and the split level"
                f"{'s' if h != 1 else ''} take{'s' if h == 1 else ''} {h} × {eps_prt_level:g} = "
                f"{eps_prt:g}. Raise ε above {need:.6g}, lower the "
                f"partition ε per level below {(epsilon - eps_height) / max(h, 1):.3g}, or use "
                f"budget_mode 'share', which scales every part with ε")
        raise ParameterError(
            f"HTF share budget mode leaves nothing for the counts: ε = {epsilon:g}, ε_height = "
            f"{eps_height:g} (at least {PAPER_EPS_HEIGHT:g}) and partition {eps_prt:g}. Raise ε "
            f"above {(PAPER_EPS_HEIGHT / (1 - split[1]) if split[1] < 1 else 1):.3g} or give the "
            f"counts a larger share of the split")
    return {"h": int(h), "eps_height": float(eps_height), "eps_prt_level": float(eps_prt_level),
            "eps_prt": float(eps_prt), "eps_data": float(eps_data),
            "E": geometric_budgets(h, eps_data).tolist()}


def affordable_height(epsilon: float, eps_height: float, h_max: int, *, mode: str = "share",
                      split=DEFAULT_SPLIT, eps_prt_level: float = 1e-3,
                      split_rule: str = "search") -> int:
    """Largest height h <= h_max whose budget plan leaves something for the counts.

    Uses public inputs only, so it runs before any draw. Raises ParameterError (naming only those
    inputs) when even the smallest tree (h = 1, or 0 on a 1x1 grid) does not fit. In paper mode
    that is eps_height + h * eps_prt_level < epsilon; in share mode every height fits.
    """
    lo = min(1, int(h_max))
    plan_budget(epsilon, lo, eps_height, mode=mode, split=split, eps_prt_level=eps_prt_level,
                split_rule=split_rule)
    h = lo
    while h < h_max and _counts_left(epsilon, _budget_parts(epsilon, h + 1, eps_height, mode,
                                                            split, eps_prt_level,
                                                            split_rule)[2]):
        h += 1
    return h


# ------------------------------------------------------------------------ checks before any draw
def resolve_split_rule(budget_mode: str, split_rule: str | None) -> str:
    """The split rule a build uses: paper mode is the paper, so it always searches."""
    if budget_mode not in ("share", "paper"):
        raise ParameterError(f"budget_mode must be 'share' or 'paper', got {budget_mode!r}")
    if split_rule is None:
        return "search" if budget_mode == "paper" else DEFAULT_SPLIT_RULE
    if split_rule not in SPLIT_RULES:
        raise ParameterError(f"split_rule must be one of {list(SPLIT_RULES)}, got {split_rule!r}")
    if budget_mode == "paper" and split_rule != "search":
        raise ParameterError(f"budget_mode 'paper' reproduces the paper's split search; "
                             f"split_rule {split_rule!r} needs budget_mode 'share'")
    return split_rule


class _Limits(NamedTuple):
    """Public height limits, fixed before any draw: h_max, ε_height and the affordable height."""

    h_max: int
    eps_height: float
    h_afford: int


def _check_request(F, epsilon, budget_mode, split, eps_prt_level,
                   rule: str = "search") -> tuple[np.ndarray, _Limits]:
    """Refuse a bad count matrix, ε or budget before any draw, so that a refusal spends nothing.

    Returns F as float64 and the public height limits (feasibility from public inputs only).
    """
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or F.size == 0:
        raise ValueError("F must be a non-empty 2-D count matrix")
    if np.any(F < 0) or not np.array_equal(F, np.rint(F)):
        raise ValueError("F must hold non-negative whole counts (they get integer noise)")
    if not epsilon > 0:
        raise ParameterError(f"epsilon must be positive, got {epsilon}")
    h_max = grid_h_max(F.shape)
    eps_height = height_budget(epsilon, budget_mode, split)
    h_afford = affordable_height(epsilon, eps_height, h_max, mode=budget_mode, split=split,
                                 eps_prt_level=eps_prt_level, split_rule=rule)
    return F, _Limits(h_max, eps_height, h_afford)


# ------------------------------------------------------------------------------------ ledger
def _charge_height(led: Ledger, eps_height: float, c0: float, h_max: int, h_afford: int | None):
    """Charge the noisy dataset size (before it is drawn) and state the height rule it feeds."""
    cap = f"[1, h_max = {h_max}]"
    if h_afford is not None:
        cap += (f" and to at most {h_afford}, the largest height whose split levels the budget "
                "affords (paper mode; computed from ε, ε_height and ε per level alone)")
    led.charge("noisy dataset size (sets the tree height)", eps_height, 1.0, "discrete laplace",
               1.0 / eps_height,
               note=f"|D| + discrete Laplace(1/ε_height); the size is not public. "
                    f"h = ⌊log2(noisy size · ε / {c0:g})⌋ clamped to {cap}")


class _Charges:
    """The tree's entries (spec 4), each charged just before the first draw it pays for.

    Counts go root first: height i's entry is due at the first count draw at height i, or at an
    earlier draw of a node that stops above i, since that draw spends every height below its
    own. A split level is due at its first noisy objective value; the midpoint rule reads no
    data to split, so it has no split entries and its counts got the partition share
    (plan_budget). `rest` charges the levels no node reached: the amounts are fixed, since a
    refund would depend on the data.
    """

    def __init__(self, led: Ledger, plan: dict, T: int, rule: str = "search"):
        self.led, self.plan, self.T = led, plan, T
        self.count_due = plan["h"]                            # highest height not yet charged
        self.split_due = plan["h"] if rule == "search" else 0

    def counts(self, i: int, below: bool = False) -> None:
        """Before a count draw at height i; below: the draw also spends the heights under i."""
        h, E = self.plan["h"], self.plan["E"]
        while self.count_due >= (0 if below else i):
            j = self.count_due
            self.led.charge(f"node counts at height {j}" + (" (root)" if j == h else "")
                            + (" (partition leaves)" if j == 0 else ""), E[j], 1.0,
                            "discrete laplace", 1.0 / E[j],
                            note="discrete Laplace(1/ε_i) on each node count at this height "
                                 "(sensitivity 1, disjoint nodes); a region that stops higher up "
                                 "is recounted with the budget of the heights below it, so every "
                                 "path spends ε_data")
            self.count_due -= 1

    def split(self, i: int) -> None:
        """Before a noisy objective value of the split search at height i."""
        h, lvl, T = self.plan["h"], self.plan["eps_prt_level"], self.T
        while self.split_due >= i:
            g = self.split_due
            self.led.charge(f"split positions, level {h - g + 1} of {h} (height {g})", lvl,
                            OBJECTIVE_SENSITIVITY, "discrete laplace",
                            split_noise_scale(lvl / (2 * T + 1)),
                            note=f"discretised Laplace mechanism on at most 2T+1 = {2 * T + 1} "
                                 f"homogeneity objective values per node (sensitivity 2, rounded "
                                 f"to a grid of {SPLIT_GRID:g}), each at ε/{2 * T + 1}; nodes of "
                                 "a level are disjoint (parallel composition)")
            self.split_due -= 1

    def rest(self) -> None:
        """After the tree is grown: the levels it stopped above, split levels first."""
        self.split(1)
        self.counts(0, below=True)
