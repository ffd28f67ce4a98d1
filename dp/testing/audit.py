"""Privacy auditing: a stochastic tester of the ε claim and the floating-point (last-bits) check.

The stochastic tester follows the design of Google's differential-privacy stochastic tester
(Gilbert & McMillan, "Property testing for differential privacy", 2018) and DP-Sniper (Bichsel
et al., S&P 2021) and StatDP (Ding et al., CCS 2018): run a mechanism many times on two
neighbouring datasets, look at output events (the structure chosen, a count above a threshold),
and bound the privacy loss ln(P[E | D] / P[E | D']) from below with exact binomial confidence
intervals. Candidate events are picked on a first batch of runs and tested on a second,
independent batch (so the choice cannot overfit the sample), with a Bonferroni correction over
the picked events; the claim fails when the lower confidence bound of the loss exceeds ε.

`privtree_path_loss` computes instead of sampling: PrivTree's structure loss follows exactly from
the biased counts on the path of quadrants holding the added point (every other node's test is
the same under both datasets).

`float_laplace_impossible` reproduces Mironov's attack (CCS 2012) on numpy's floating-point
Laplace: it tells whether a released double could have come from a neighbouring count at all.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..noise import make_rng

Features = tuple        # (structure: hashable, answers: 1-D float array)


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit: the worst event's privacy-loss estimate and its lower bound."""

    epsilon: float
    event: str
    p: float                 # P[E | D] on the test batch
    p_neighbour: float       # P[E | D'] on the test batch
    loss: float              # point estimate of |ln(p / p')|
    loss_lower: float        # lower confidence bound (Bonferroni-corrected)
    runs: int                # runs per dataset in the test batch

    @property
    def passed(self) -> bool:
        return self.loss_lower <= self.epsilon

    def __str__(self):
        return (f"worst event {self.event}: P = {self.p:.4f} vs {self.p_neighbour:.4f}, loss "
                f"{self.loss:.3f} (lower bound {self.loss_lower:.3f}) vs claimed ε = {self.epsilon:g}")


def release_features(rel, rects, probes=()) -> Features:
    """What the tester looks at in a release: a signature of its exact structure, and numbers
    to threshold that stay comparable when every run has a new structure: the answers to
    `rects`, for each probe point (e.g. where the neighbours differ) the released value of the
    region holding it and that region's size in base cells (a tree's depth there), and the
    number of released regions (a coarse view of the structure, which a leaked N moves through
    a grid size or a tree height)."""
    g, ranges, values = rel.regions()
    ranges = np.asarray(ranges)
    structure = (g.gx, g.gy, ranges.tobytes())
    held = []
    for px, py in probes:
        j, k, _ = g.cell_index([px], [py])
        hit = (ranges[:, 0] <= j[0]) & (j[0] < ranges[:, 1]) & (ranges[:, 2] <= k[0]) & (k[0] < ranges[:, 3])
        if hit.any():
            r = ranges[hit][0]
            held += [float(np.asarray(values)[hit][0]), float((r[1] - r[0]) * (r[3] - r[2]))]
        else:
            held += [0.0, 0.0]
    numbers = np.concatenate([np.asarray(rel.answer_many(rects), dtype=np.float64), held, [len(ranges)]])
    return structure, numbers


def _features(run: Callable, seeds) -> tuple[list, np.ndarray]:
    """One release per seed, as (structures, numbers matrix): events read these arrays."""
    out = [run(make_rng(s)) for s in seeds]
    return [f[0] for f in out], np.array([f[1] for f in out])


def _events(sample_a, sample_b, n_thresholds: int = 9, n_structures: int = 10):
    """Candidate events as (name, indicator over a sample), from the pooled first-batch outputs:
    the most frequent structures, and each number above or below its pooled quantiles."""
    events = []
    freq: dict = {}
    for st in sample_a[0] + sample_b[0]:
        freq[st] = freq.get(st, 0) + 1
    if len(freq) > 1:
        top = sorted(freq, key=freq.get, reverse=True)[:n_structures]
        for i, st in enumerate(top):
            events.append((f"structure #{i} (seen {freq[st]} times)",
                           lambda sample, st=st: np.array([x == st for x in sample[0]])))
    nums = np.vstack([sample_a[1], sample_b[1]])
    for j in range(nums.shape[1]):
        for t in np.unique(np.quantile(nums[:, j], np.linspace(0.05, 0.95, n_thresholds))):
            events.append((f"number {j} >= {t:g}", lambda sample, j=j, t=t: sample[1][:, j] >= t))
            events.append((f"number {j} < {t:g}", lambda sample, j=j, t=t: sample[1][:, j] < t))
    return events


def _cp(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Clopper-Pearson two-sided (1 - alpha) interval for a binomial proportion."""
    from scipy import stats            # here: scipy.stats takes a second to import, and only audits need it
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def _log_ratio(a: float, b: float) -> float:
    if a == 0 and b == 0:
        return 0.0
    if b == 0:
        return math.inf
    if a == 0:
        return -math.inf
    return math.log(a / b)


def audit(run_d: Callable, run_d2: Callable, epsilon: float, runs: int = 1000, *,
          alpha: float = 0.01, top: int = 5, seed: int = 0, pick_runs: int | None = None) -> AuditResult:
    """Test the ε claim of a mechanism on one neighbouring pair (D, D').

    run_d(rng) and run_d2(rng) release on D and D' with the given Generator and return
    `release_features(...)`. `pick_runs` releases per dataset (default `runs`) pick the `top`
    events with the largest loss lower bound at 80% confidence; `runs` fresh releases per
    dataset then test them. Returns the worst tested event; `passed` is False when its lower
    bound (confidence 1 - alpha over all tested events) exceeds ε. The bound's width, so the
    tester's power, is set by `runs`; the picking batch only has to rank events.
    """
    pick_runs = runs if pick_runs is None else int(pick_runs)
    ss = np.random.SeedSequence(seed)
    s1, s2, s3, s4 = (c.generate_state(n) for c, n in zip(ss.spawn(4), (pick_runs, pick_runs, runs, runs)))
    a, b = _features(run_d, s1), _features(run_d2, s2)
    scored = []
    for name, ev in _events(a, b):       # rank by a conservative loss, so rare events do not win
        ka, kb = int(ev(a).sum()), int(ev(b).sum())
        (alo, ahi), (blo, bhi) = _cp(ka, pick_runs, 0.2), _cp(kb, pick_runs, 0.2)
        scored.append((max(_log_ratio(alo, bhi), _log_ratio(blo, ahi)), name, ev))
    scored.sort(key=lambda t: -t[0])
    chosen = scored[:top]
    a, b = _features(run_d, s3), _features(run_d2, s4)
    level = alpha / (2 * max(1, len(chosen)))        # two directions per event
    worst = None
    for _, name, ev in chosen:
        ka, kb = int(ev(a).sum()), int(ev(b).sum())
        (alo, ahi), (blo, bhi) = _cp(ka, runs, level), _cp(kb, runs, level)
        for num, den, lo_num, hi_den in ((ka, kb, alo, bhi), (kb, ka, blo, ahi)):
            lower = _log_ratio(lo_num, hi_den)
            point = abs(_log_ratio(num / runs, den / runs)) if num or den else 0.0
            if worst is None or lower > worst.loss_lower:
                worst = AuditResult(epsilon, name, ka / runs, kb / runs, point, lower, runs)
    return worst if worst is not None else AuditResult(epsilon, "none", 0, 0, 0, -math.inf, runs)


# ------------------------------------------------------------------- PrivTree's exact loss
def _log_split_stop(a: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """(ln P(Z > a), ln P(Z <= a)) for integer a and Z discrete Laplace with P(k) ∝ q^|k|:
    the smaller side is the tail P(Z >= k) = q^k / (1 + q), k >= 1, the other its complement."""
    a = np.asarray(a, dtype=np.float64)
    tail = np.where(a >= 0, a + 1, -a) * math.log(q) - math.log1p(q)
    rest = np.log1p(-np.exp(tail))
    return np.where(a >= 0, tail, rest), np.where(a >= 0, rest, tail)


def privtree_stop_log_probs(path_counts, eps_tree: float, theta: int, fanout: int = 4) -> np.ndarray:
    """ln P(the path of nested quadrants holding one point stops at depth d), d = 0..H, for
    PrivTree on data whose depth-d node on that path holds `path_counts[d]` points (the last
    node a single cell, never tested). Built from the code's own pieces: λ and δ
    (`privtree_constants`), the biased count, and the sampler's rounded-up scale."""
    from ..mechanisms.privtree import privtree_biased_count, privtree_constants
    from ..noise import rational_scale
    lam, delta = privtree_constants(eps_tree, fanout)
    t, s = rational_scale(lam)
    c = np.asarray(path_counts, dtype=np.int64)
    b = privtree_biased_count(c[:-1], np.arange(len(c) - 1), theta, delta)
    split, stop = _log_split_stop(theta - b, math.exp(-s / t))
    return np.concatenate([[0.0], np.cumsum(split)]) + np.append(stop, 0.0)


def privtree_path_loss(path_counts, eps_tree: float, theta: int, fanout: int = 4) -> np.ndarray:
    """The exact privacy loss of PrivTree's split decisions, |ln P_D / P_D'| for each depth at
    which the probe's path can stop, D' = D plus one point in the path's last cell: only the
    path's nodes are tested differently. ε_tree-DP needs every entry at most ε_tree (Zhang, Xiao
    & Xie 2016, Theorem 3.2), so a wrong δ shows as a loss above it."""
    c = np.asarray(path_counts, dtype=np.int64)
    return np.abs(privtree_stop_log_probs(c, eps_tree, theta, fanout)
                  - privtree_stop_log_probs(c + 1, eps_tree, theta, fanout))


# ------------------------------------------------------------------- last-bits (Mironov) check
def _numpy_laplace_values(u: np.ndarray, scale: float) -> np.ndarray:
    """numpy's Laplace transform of uniforms u in [0, 1) (legacy-compatible formula)."""
    with np.errstate(divide="ignore"):
        return np.where(u >= 0.5, -scale * np.log(2.0 - u - u), scale * np.log(u + u))


def float_laplace_reachable(values, counts, scale: float, window: int = 64) -> np.ndarray:
    """True where a double `value` equals count + numpy-Laplace(scale) for some 53-bit uniform.

    Inverts the transform to the nearest uniforms on numpy's 2^-53 grid and tries `window`
    grid steps either side; the set of doubles c + L reachable this way differs for c and c + 1.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    c = np.broadcast_to(np.asarray(counts, dtype=np.float64), v.shape).ravel()
    lap = v - c
    u0 = np.where(lap >= 0, 1.0 - np.exp(-lap / scale) / 2.0, np.exp(lap / scale) / 2.0)
    k0 = np.floor(u0 * 2.0 ** 53)
    steps = np.arange(-window, window + 1, dtype=np.float64)
    u = np.clip((k0[:, None] + steps) / 2.0 ** 53, 0.0, 1.0 - 2.0 ** -53)
    return np.any(c[:, None] + _numpy_laplace_values(u, scale) == v[:, None], axis=1)


def float_laplace_impossible(values, true_counts, scale: float) -> float:
    """Fraction of released doubles reachable from the true counts but NOT from counts + 1.

    Each such value has infinite privacy loss: it proves the cell did not hold one more point.
    """
    here = float_laplace_reachable(values, true_counts, scale)
    there = float_laplace_reachable(values, np.asarray(true_counts) + 1.0, scale)
    return float(np.mean(here & ~there)) if here.size else 0.0


def integer_valued(values: Sequence[float]) -> bool:
    """True when every released value is a whole number (the support of integer noise)."""
    v = np.asarray(values, dtype=np.float64)
    return bool(np.all(np.isfinite(v)) and np.all(v == np.rint(v)))
