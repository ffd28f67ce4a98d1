"""Plan before spending: the ε each mechanism needs for a stated accuracy, from public data only.

The owner states what they need, e.g. "rectangles of about 1% of the box within ±50 people,
95% of the time", and gets, per mechanism, the least ε on a ladder from 0.01 to 10 that meets
it on a synthetic twin: a clustered synthetic city (`dp.typical_error.synthetic_points`) of a
public assumed size in the same public box. The simulated releases use fixed seeds and are
never published; the owner's data, its size and its bounding box are never read, so planning
costs no ε. Error is the absolute difference between a release's answer and the twin's true
count over random rectangles of that area (`dp.random_workload`), taken at the stated quantile
over rectangles and releases; it falls as ε grows, so the ladder is searched by bisection.

Planning on a twin is a forecast, not a promise: real data that is more or less clustered than
the twin has more or less of the even-spread error; `typical_error` explains the same caveat.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .domain import Domain
from .errors import ParameterError
from .mechanisms import mechanisms, release
from .queries import random_workload
from .typical_error import DEFAULT_POINTS, synthetic_points

LADDER = tuple(float(f"{e:.3g}") for e in np.logspace(-2, 1, 19))   # 0.01 … 10, ratio 10^(1/6)
N_QUERIES, REPETITIONS = 200, 3


@dataclass(frozen=True)
class Plan:
    """What one mechanism needs: `epsilon` (None when even the top of the ladder misses the
    target) and the error at the stated level it gave there, on the twin."""

    mechanism: str
    epsilon: float | None
    error: float
    target: float

    @property
    def met(self) -> bool:
        return self.epsilon is not None


UNFORECASTABLE = {"adaptive": "it picks its method from the data, so a twin picks another one"}


def plannable(kind: str = "points") -> list[str]:
    """The mechanisms a plan covers: private, for this kind of data, with a standard ε (shifted
    grids' δ-neighbourhood ε is not comparable), and not UNFORECASTABLE (on the shared city
    data the adaptive mechanism's real error was up to 7 times the twin's forecast:
    benchmarks/plan_forecast.py)."""
    return [k for k, s in mechanisms(private_only=True).items()
            if s.data_kind == kind and s.comparable and s.name != "bounded_grid" and k not in UNFORECASTABLE]


class Twin:
    """The synthetic twin and its rectangles, made once for every mechanism of a plan."""

    def __init__(self, domain: Domain, area_frac: float, n_points: int = DEFAULT_POINTS, seed: int = 0):
        if not 0 < area_frac <= 1:
            raise ParameterError(f"the rectangles' share of the box must be above 0% and at most "
                                 f"100%, got {100 * area_frac:g}%")
        if int(n_points) < 1:
            raise ParameterError(f"the assumed number of points must be at least 1, got {n_points}")
        self.domain, self.seed = domain, seed
        self.data = synthetic_points(domain, int(n_points), seed=[seed, 0])
        self.rects = random_workload(domain, N_QUERIES, area_frac=area_frac, rng=[seed, 1])
        self.truth = self.data.true_counts(self.rects, domain)

    def release(self, mechanism: str, epsilon: float, params=None, split=None, rep: int = 0):
        """A simulated release of the twin (fixed seed: never published)."""
        return release(mechanism, self.data, self.domain, epsilon, split=split, params=params,
                       seed=[self.seed, 2, rep])

    def error(self, mechanism: str, epsilon: float, level: float, params=None, split=None) -> float:
        """The `level` quantile of |answer − true| over the rectangles and REPETITIONS releases."""
        errs = [np.abs(self.release(mechanism, epsilon, params, split, r).answer_many(self.rects) - self.truth)
                for r in range(REPETITIONS)]
        return float(np.quantile(np.concatenate(errs), level))


def epsilon_for(twin: Twin, mechanism: str, target: float, level: float = 0.95, params=None,
                split=None, points_per_user: int | None = None) -> Plan:
    """The least ε of LADDER whose error at `level` is at most `target` people on the twin.
    With `points_per_user` k the mechanism runs at ε/k per point, as a user-level release does."""
    if not target > 0:
        raise ParameterError(f"the error you can accept must be above 0 people, got {target:g}")
    if not 0 < level < 1:
        raise ParameterError(f"the share of the time must be between 0% and 100%, got {100 * level:g}%")
    k = points_per_user or 1
    cache: dict[int, float] = {}

    def err(i: int) -> float:
        if i not in cache:
            cache[i] = twin.error(mechanism, LADDER[i] / k, level, params, split)
        return cache[i]

    top = len(LADDER) - 1
    if err(top) > target:
        return Plan(mechanism, None, err(top), target)
    lo, hi = -1, top                         # err(hi) <= target; every index <= lo misses it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if err(mid) <= target:
            hi = mid
        else:
            lo = mid
    return Plan(mechanism, LADDER[hi], err(hi), target)


def plan(domain: Domain, area_frac: float, target: float, level: float = 0.95,
         n_points: int = DEFAULT_POINTS, names=None, points_per_user: int | None = None,
         progress=None, should_stop=None) -> list[Plan]:
    """`epsilon_for` for every mechanism in `names` (default: `plannable()`) on one twin, the
    cheapest first (those that miss the target last). `progress(done, total)` is called after
    each mechanism; when `should_stop()` turns true the mechanisms planned so far are returned."""
    names = list(names or plannable())
    twin = Twin(domain, area_frac, n_points)
    out = []
    for i, name in enumerate(names):
        if should_stop and should_stop():
            break
        out.append(epsilon_for(twin, name, target, level, points_per_user=points_per_user))
        if progress:
            progress(i + 1, len(names))
    return sorted(out, key=lambda p: (not p.met, p.epsilon or 0.0, p.error))
