"""HTF: the Homogeneous Tree Framework (Shaham, Ghinita, Ahuja, Krumm, Shahabi, SIGSpatial 2021).

Spec 003. Points are binned into a fixed, public base grid F (row 0 = south, column 0 = west).
A binary tree is grown top-down over F. Split axes alternate with the node's height. Each split
position is the one whose two children are most homogeneous (least summed absolute deviation
from each child's mean, Eq. O). It is picked privately by a short noisy search (Algorithm 1: at
most 2T+1 noisy objective values, sensitivity 2). The tree height comes from a noisy dataset
size (H1-H4). Counts are spent top-down on a geometric schedule (Eq. G). A node whose noisy
count is small, or whose region is tiny, becomes a leaf and gets a fresh count with the rest of
its path's budget (Algorithm 3). Only the leaves are released.

Implementation notes (see the spec for the [P]/[P-fix]/[REC] tags):
- Noise is exact and integer wherever the data are integer: the dataset size and every node
  count get discrete Laplace noise (sensitivity 1). The real-valued objective values get the
  discretised Laplace mechanism (rounded to a public grid, then integer noise in grid units), so
  no low bit of any released or compared value depends on the data. The split search only
  compares those noisy values, so it is post-processing.
- The exact dataset size is never public: it is spent on (eps_height) and only its noisy value
  sets the height. Every feasibility check runs on public inputs before the first draw; after
  it nothing can fail. In paper mode the height is capped at the largest height the budget
  affords (computed from public values), instead of refusing once the size was spent on.
- The corrected Algorithm 1 (spec 3.3) is used: offsets fixed, each candidate gets one noisy
  value per call (memoised), and the winner's noisy value is carried forward, never redrawn.
- The tree is built lazily and level by level (spec 3.8). Only nodes that Algorithm 3 does not
  prune are split, so this is equivalent in distribution to running Algorithm 2 on the full
  tree followed by Algorithm 3. All nodes of one level are processed together with numpy: the
  count draws, the pruning rule and every step of the split search are vectorised over nodes,
  and objective values come from the non-zero cells of the active nodes (for counts c >= 0,
  sum |c - mu| = 2 * sum over c > mu of (c - mu), so empty cells never need to be visited).
- Budgets are indexed by height (root = h, partition leaves = 0). Every node at height i has
  already spent sum_{j >= i} E[j] on its path, so the path-local accumulator of Algorithm 3 is a
  function of the height alone. A pruned node's fresh draw uses sum_{j < i} E[j], so each
  leaf's path spends exactly eps_data.
- Two budget modes. "paper": eps_height = 1e-4, a fixed partition budget per level and the rest
  for counts (Sec. 5). "share" (default): the MechanismSpec split (height, partition, counts)
  scales every part with epsilon. With eps_height = 1e-4 the noisy size is off by about +-10^4
  points, so for uploads much smaller than 10^5 points the paper mode picks a meaningless height
  (spec 4, last paragraph). Share mode therefore is the default.
- Two split rules (share mode; paper mode always searches). "search" is the paper's
  Algorithm 1. "midpoint" (default) cuts every node at the middle of its axis (Algorithm 2's
  axis rule kept): it reads no data, so it spends nothing on the partition and the partition
  share goes to the counts. Why: the search is noise-dominated. At the root of the 200k-point
  sample city (1024 grid) the exact objective spans ~9,300 over all split positions (less over
  the few the search compares) while one noisy value has sd ~13,200 at ε 0.1 (1,850 at ε 1),
  and the signal shrinks with the node, so below ~1e5-1e6 points per node the cut is close to
  random and often leaves a child a quarter of the side or less. On the DPBench matrices
  midpoint had 1.7-5.5x lower error at ε 0.1 and 1 (README). Even the exact (non-private)
  homogeneity cut at the top levels only did not beat midpoint there, so a rule that searches
  only where the noisy count says the signal exceeds the noise was measured and not kept: it
  still pays the partition budget and was worse than midpoint in every case.
  `root_split_snr` gives the owner the root's signal-to-noise ratio (non-private diagnostic).
- Randomness: one numpy Generator per release, passed in; nothing here seeds a generator.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..budget import Ledger, geometric_budgets
from ..errors import ParameterError
from ..noise import discrete_laplace, discrete_laplace_variance, laplace_real, make_rng
from ..summed_area import box_sums, summed_area
from .base import ADD_REMOVE_POINT, MechanismSpec, Param
from .leaves import LeafRelease, base_shape, square_base_grid

PAPER_EPS_HEIGHT = 1e-4          # [P] Sec. 5.2
DEFAULT_SPLIT = (0.01, 0.15, 0.84)
OBJECTIVE_SENSITIVITY = 2.0      # Theorem 1: |delta o_k| < 2
SPLIT_RULES = ("midpoint", "search")
DEFAULT_SPLIT_RULE = "midpoint"  # share mode; chosen from the DPBench measurements (README)
SPLIT_GRID = OBJECTIVE_SENSITIVITY / 1024   # public grid the noisy objective values live on
_CHUNK = 1 << 22                 # elements per broadcast block in `objectives`


# ----------------------------------------------------------------------------- objective (Eq. O)
def _lines(X, axis: int) -> np.ndarray:
    """X as lines along the split direction: axis 0 (x-split) cuts columns, axis 1 cuts rows."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {X.shape}")
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 (x-split) or 1 (y-split), got {axis!r}")
    return X.T if axis == 0 else X


def objective(X, k: int, axis: int) -> float:
    """Homogeneity objective o_k (Eq. O) of splitting X after k lines; reference implementation.

    axis 1 (y-split): the first child is rows [0, k) (the southern part); axis 0 (x-split): the
    first child is columns [0, k) (the western part). k = 0 or k = n leaves one side empty, which
    contributes 0 (the paper's "no split" candidate).
    """
    Y = _lines(X, axis)
    n = Y.shape[0]
    if not 0 <= k <= n:
        raise ValueError(f"split index k must be in [0, {n}], got {k}")
    out = 0.0
    for part in (Y[:k], Y[k:]):
        if part.size:
            out += float(np.abs(part - part.mean()).sum())
    return out


def objectives(X, axis: int, ks=None) -> np.ndarray:
    """o_k for many candidates at once (default: every proper split k = 1..n-1).

    Efficient form of spec 3.1: sum |c - mu| = sum over non-zero c of |c - mu| + (#zeros) |mu|.
    Side means come from prefix sums of the line totals; the non-zero cells are compared with
    every candidate's means by broadcasting, in blocks of candidates (no loop over cells).
    """
    Y = _lines(X, axis)
    n, W = Y.shape
    ks = np.arange(1, n, dtype=np.int64) if ks is None else np.atleast_1d(np.asarray(ks, np.int64))
    if ks.size and (ks.min() < 0 or ks.max() > n):
        raise ValueError(f"split indices must be in [0, {n}]")
    P = np.concatenate([[0.0], np.cumsum(Y.sum(axis=1))])
    li, _ = np.nonzero(Y)
    val = Y[li, _]
    Z = np.concatenate([[0], np.cumsum(np.bincount(li, minlength=n))])   # non-zeros before line k
    cells1, cells2 = ks * W, (n - ks) * W
    with np.errstate(invalid="ignore", divide="ignore"):
        mu1 = np.where(cells1 > 0, P[ks] / cells1, 0.0)
        mu2 = np.where(cells2 > 0, (P[n] - P[ks]) / cells2, 0.0)
    zeros = (cells1 - Z[ks]) * np.abs(mu1) + (cells2 - (Z[n] - Z[ks])) * np.abs(mu2)
    dev = np.zeros(ks.size)
    step = max(1, _CHUNK // max(1, val.size))
    for s in range(0, ks.size, step):      # blocks of candidates, never a loop over cells
        kc = ks[s:s + step]
        side1 = li[None, :] < kc[:, None]
        mu = np.where(side1, mu1[s:s + step, None], mu2[s:s + step, None])
        dev[s:s + step] = np.abs(val[None, :] - mu).sum(axis=1)
    return dev + zeros


# ------------------------------------------------------------------- Algorithm 1 (corrected)
_TIE = 1e-9


def _le(a, b):
    """a <= b, counting values equal up to floating-point rounding as ties.

    Applied to the noisy values only, so it is post-processing. It matters only in the
    noise-free limit: there the paper's tie rule (prefer k, then k1, then k2) then decides the
    same way whichever summation order computed the objective (exact ties are common for the
    piecewise-linear objective on small integer matrices).
    """
    return a <= b + _TIE * (1.0 + np.minimum(np.abs(a), np.abs(b)))


def split_noise_scale(eps_eval: float) -> float:
    """Laplace scale, in objective units, of one noisy objective value at budget eps_eval.

    The discretised mechanism rounds to SPLIT_GRID, which can widen a neighbour's difference by
    one grid step: the noise covers sensitivity 2 + SPLIT_GRID.
    """
    return (OBJECTIVE_SENSITIVITY + SPLIT_GRID) / eps_eval


def _noisy_objectives(rng, values, eps_eval: float) -> np.ndarray:
    """Objective values through the discretised Laplace mechanism (sensitivity 2, eps_eval each)."""
    return laplace_real(rng, values, OBJECTIVE_SENSITIVITY, eps_eval, SPLIT_GRID)


def _search(n, evaluate, T: int, perturb, trace: list | None = None):
    """Corrected Algorithm 1 (spec 3.3) for m independent nodes at once.

    n:         (m,) extents along the split axis, each >= 2
    evaluate:  evaluate(idx, ks) -> exact o_k of nodes idx at candidates ks (arrays)
    perturb:   perturb(idx, values) -> the noisy release of those values (one per node idx)
    Returns (k, evals): chosen split per node (1 <= k <= n-1) and its number of noisy evaluations
    (<= 2T+1). Each node's evaluations are memoised, so a candidate is perturbed at most once;
    everything after `perturb` is post-processing of its outputs.
    """
    n = np.asarray(n, dtype=np.int64).reshape(-1)
    m = n.size
    if m and n.min() < 2:
        raise ValueError("a split needs at least 2 lines along the split axis")
    l = np.ones(m, np.int64)
    r = n - 1
    k = (l + r) // 2
    memo_k = np.full((m, 2 * T + 1), -1, np.int64)
    memo_v = np.zeros((m, 2 * T + 1))
    cnt = np.zeros(m, np.int64)

    def noisy(idx, ks):
        vals = np.asarray(perturb(idx, evaluate(idx, ks)), dtype=np.float64).reshape(idx.size)
        memo_k[idx, cnt[idx]] = ks
        memo_v[idx, cnt[idx]] = vals
        cnt[idx] += 1
        if trace is not None:
            trace.extend(int(v) for v in ks)
        return vals

    o = noisy(np.arange(m), k) if m else np.zeros(0)
    active = np.ones(m, bool)
    for _ in range(T):
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        kk = k[idx]
        k1 = (l[idx] + kk) // 2
        k2 = -((-(kk + r[idx])) // 2)                      # ceil((k + r) / 2)
        hit1 = memo_k[idx] == k1[:, None]
        hit2 = memo_k[idx] == k2[:, None]
        new1 = (k1 != kk) & ~hit1.any(1)
        new2 = (k2 != kk) & ~hit2.any(1)
        go = new1 | new2                                   # line 10: no new candidate -> stop
        active[idx[~go]] = False
        if not go.any():
            break
        idx, kk, k1, k2, new1, new2, hit1, hit2 = (a[go] for a in (idx, kk, k1, k2, new1, new2,
                                                                     hit1, hit2))
        rows = np.arange(idx.size)
        # line 11: +inf for "same as centre", the memo for a known candidate, else one new value
        v1 = np.where(k1 != kk, memo_v[idx, hit1.argmax(1)], np.inf)
        v2 = np.where(k2 != kk, memo_v[idx, hit2.argmax(1)], np.inf)
        if new1.any():
            v1[rows[new1]] = noisy(idx[new1], k1[new1])
        if new2.any():
            v2[rows[new2]] = noisy(idx[new2], k2[new2])
        oc = o[idx]
        centre = _le(oc, v1) & _le(oc, v2)                 # ties: prefer k, then k1, then k2
        w1 = ~centre & _le(v1, v2)
        w2 = ~centre & ~w1
        l[idx[centre]], r[idx[centre]] = k1[centre], k2[centre]
        r[idx[w1]], k[idx[w1]], o[idx[w1]] = kk[w1], k1[w1], v1[w1]    # carried, not redrawn
        l[idx[w2]], k[idx[w2]], o[idx[w2]] = kk[w2], k2[w2], v2[w2]
    return k, cnt


def get_split_point(X, eps_level: float, axis: int, T: int, rng=None, *, noise=None,
                    trace: list | None = None, size: int | None = None):
    """Private split index of X along `axis` (spec 3.3, corrected Algorithm 1).

    Spends eps_level on the node: at most 2T+1 objective values through the discretised Laplace
    mechanism, eps_level/(2T+1) each. rng: a numpy Generator (None: fresh OS entropy). Test hook:
    `noise(scale, size)` returns noise to add to the EXACT objective values instead (scale as in
    `split_noise_scale`; tests count its calls). `trace` receives the evaluated candidates in
    order. With `size`, returns that many independent runs on the same X (an array).
    """
    Y = _lines(X, axis)
    n = Y.shape[0]
    if n < 2:
        raise ValueError(f"cannot split along axis {axis}: only {n} line(s)")
    if not eps_level > 0:
        raise ValueError(f"eps_level must be positive, got {eps_level}")
    eps_eval = eps_level / (2 * T + 1)
    if noise is None:
        gen = make_rng(rng, allow_int=False)
        perturb = lambda idx, v: _noisy_objectives(gen, v, eps_eval)  # noqa: E731
    else:
        scale = split_noise_scale(eps_eval)
        perturb = lambda idx, v: v + np.asarray(noise(scale, v.size), np.float64)  # noqa: E731
    cache: dict[int, float] = {}

    def evaluate(idx, ks):
        u, inv = np.unique(ks, return_inverse=True)
        todo = [int(v) for v in u if int(v) not in cache]
        if todo:
            cache.update(zip(todo, objectives(X, axis, todo).tolist()))
        return np.array([cache[int(v)] for v in u])[inv]

    m = 1 if size is None else int(size)
    k, _ = _search(np.full(m, n), evaluate, T, perturb, trace)
    return int(k[0]) if size is None else k


def baseline_split(X, eps_level: float, axis: int, rng: np.random.Generator) -> int:
    """Reference B1 (spec 3.2): every k = 1..n-1 gets eps_level/(n-1); only for ablations."""
    o = objectives(X, axis)
    return int(np.argmin(_noisy_objectives(make_rng(rng, allow_int=False), o, eps_level / o.size))) + 1


def objective_profile(X, axis: int, ks=None) -> np.ndarray:
    """Exact o_k at sorted split indices ks (default: every k = 1..n-1), for owner diagnostics.

    Costs O(len(ks) * distinct values + cells). For counts c >= 0, sum |c - mu| = 2 * sum over
    c > mu of (c - mu), and only non-zero cells can exceed a mean >= 0, so each side is
    summarised by how many of its cells hold each distinct value (prefix sums over the
    candidates, in blocks to bound memory).
    """
    Y = _lines(X, axis)
    n, W = Y.shape
    ks = np.arange(1, n, dtype=np.int64) if ks is None else np.asarray(ks, np.int64).reshape(-1)
    if ks.size and (ks.min() < 1 or ks.max() > n - 1 or np.any(np.diff(ks) <= 0)):
        raise ValueError(f"split indices must be increasing and in [1, {n - 1}]")
    if np.any(Y < 0):
        return objectives(X, axis, ks)
    li, ci = np.nonzero(Y)                       # li is sorted (row-major order)
    vals, vi = np.unique(Y[li, ci], return_inverse=True)
    vi = vi.ravel()
    V = vals.size
    out = np.zeros(ks.size)
    if V == 0 or not ks.size:
        return out
    g = np.searchsorted(ks, li, side="right")    # a cell in line li is below every k_t, t >= g
    total = np.bincount(vi, minlength=V).astype(np.float64)
    run = np.zeros(V)

    def side(cnt, cells):
        """2 * sum over cells above the mean of (c - mu), for each row of value counts."""
        wsum = cnt * vals
        mu = wsum.sum(axis=1) / cells
        pad = np.zeros((len(cnt), 1))
        suf_c = np.concatenate([np.cumsum(cnt[:, ::-1], axis=1)[:, ::-1], pad], axis=1)
        suf_w = np.concatenate([np.cumsum(wsum[:, ::-1], axis=1)[:, ::-1], pad], axis=1)
        j = np.searchsorted(vals, mu, side="right")          # first value above the mean
        rows = np.arange(len(cnt))
        return 2.0 * np.maximum(suf_w[rows, j] - mu * suf_c[rows, j], 0.0)

    step = max(1, 1_000_000 // V)
    for a in range(0, ks.size, step):
        b = min(a + step, ks.size)
        lo, hi = np.searchsorted(g, [a, b])
        H = np.bincount((g[lo:hi] - a) * V + vi[lo:hi], minlength=(b - a) * V)
        cnt = run + H.reshape(b - a, V).cumsum(axis=0)        # value counts in lines < k_t
        run = cnt[-1].copy()
        k = ks[a:b]
        out[a:b] = side(cnt, k * W) + side(total - cnt, (n - k) * W)
    return out


ROOT_PROFILE_WORK = 2e7          # cap on positions x distinct values for the root diagnostic


def root_split_snr(F, h: int, eps_eval: float) -> dict:
    """NON-PRIVATE owner diagnostic: can the paper's search see anything at the root?

    The range of the root's exact objective over the split positions on the root's axis
    (Algorithm 2; every position, unless that would be slow: see ROOT_PROFILE_WORK), divided by
    the sd of one noisy objective value, split_noise_scale(eps_eval) * sqrt(2), where eps_eval
    is what the search gets per value at this ε and budget. Near or below 1 the search's choice
    is close to random. Reads the exact counts: never export it. It is computed after the
    release, from F and public values, and changes nothing in it.
    """
    F = np.asarray(F, dtype=np.float64)
    if h < 1 or not eps_eval > 0 or F.size < 2:
        return {}
    xs = _split_axes(np.array([[0, F.shape[0], 0, F.shape[1]]], np.int64), h)[0]
    n = F.shape[1] if xs else F.shape[0]
    # every position, unless the grid has very many lines and distinct counts: then evenly
    # spaced ones (the range is then a lower bound); the default grids always use all of them
    distinct = max(1, np.unique(F[F > 0]).size)
    m = int(min(n - 1, max(33, ROOT_PROFILE_WORK // distinct)))
    ks = np.unique(np.linspace(1, n - 1, m).round().astype(np.int64))
    o = objective_profile(F, 0 if xs else 1, ks)
    spread = float(o.max() - o.min()) if o.size else 0.0
    sd = split_noise_scale(eps_eval) * math.sqrt(2.0)
    return {"root_split_snr": spread / sd, "root_split_objective_range": spread,
            "root_split_noise_sd": sd, "root_split_positions": int(ks.size)}


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


# ---------------------------------------------------------------------------- count step (Alg. 3)
def _eps_for_variance(var) -> np.ndarray:
    """Budget of the single discrete Laplace draw with variance `var` (inverts 2q/(1-q)^2)."""
    v = np.asarray(var, dtype=np.float64)
    return -np.log1p(-(np.sqrt(2.0 * v + 1.0) - 1.0) / v)


def count_step(true_counts, cells, i: int, E, *, stop_count: float, stop_cells: int,
               extent_first: bool = False, combine_pruned: bool = False, draw=None, rng=None):
    """Algorithm 3 at one height for a vector of disjoint nodes (spec 3.7 and 3.8 lines 4-7).

    Returns a dict of arrays: pruned (node becomes a leaf), value (released count of a leaf),
    eps_final (budget of the released value, or of the single draw with the same variance),
    var (noise variance of value), y (the first noisy count, nan where none was drawn). cells =
    region size in base cells (1 means 1x1). Counts get discrete Laplace(1/eps) noise (sensitivity
    1) from rng (a Generator); draw(kind, scale, idx) replaces that sampler (test hook).
    """
    x = np.asarray(true_counts, dtype=np.float64)
    cells = np.asarray(cells)
    m = x.size
    if draw is None:
        gen = make_rng(rng, allow_int=False)
        draw = lambda kind, scale, idx: discrete_laplace(gen, scale, idx.size)  # noqa: E731
    E = np.asarray(E, dtype=np.float64)
    ei = float(E[i])
    below = math.fsum(E[:i])                 # = eps_data - sum_{j >= i} E[j], exactly > 0 for i >= 1
    y = np.full(m, np.nan)
    value = np.full(m, np.nan)
    eps_final = np.full(m, np.nan)
    var = np.full(m, np.nan)
    all_idx = np.arange(m)
    if i == 0:                               # partition leaf [P-fix line 5]: release the E[0] draw
        y[:] = x + draw("count", 1.0 / ei, all_idx)
        return {"pruned": np.ones(m, bool), "value": y.copy(), "eps_final": np.full(m, ei),
                "var": np.full(m, float(discrete_laplace_variance(1.0 / ei))), "y": y}
    tiny = (cells < stop_cells) | (cells == 1)
    pruned = np.zeros(m, bool)
    if extent_first:                         # 3.7 (a): data-independent stop, before the draw
        idx = np.flatnonzero(tiny)
        e_all = ei + below
        value[idx] = x[idx] + draw("count", 1.0 / e_all, idx)
        eps_final[idx], var[idx] = e_all, discrete_laplace_variance(1.0 / e_all)
        pruned[idx] = True
        rest = np.flatnonzero(~tiny)
        y[rest] = x[rest] + draw("count", 1.0 / ei, rest)
        stop = np.zeros(m, bool)
        stop[rest] = y[rest] <= stop_count
    else:
        y[:] = x + draw("count", 1.0 / ei, all_idx)
        stop = (y <= stop_count) | tiny
    idx = np.flatnonzero(stop)
    if below <= 1e-12 * max(1.0, ei):        # pitfall 9: never a draw at budget 0
        raise AssertionError("no budget left for a pruned node's fresh count")
    fresh = x[idx] + draw("count", 1.0 / below, idx)       # FRESH draw replaces the old one [P]
    v_fresh = float(discrete_laplace_variance(1.0 / below))
    if combine_pruned:                       # 3.7 (b): inverse-variance weighting of both draws
        # Post-processing of two released integer draws. var is the variance of the weighted sum
        # of the two independent noises. For a node stopped by its count, y was selected
        # (y <= stop_count): that truncation biases its noise downwards, and the bias is not
        # part of var.
        v_first = float(discrete_laplace_variance(1.0 / ei))
        value[idx] = (v_fresh * y[idx] + v_first * fresh) / (v_first + v_fresh)
        var[idx] = v_first * v_fresh / (v_first + v_fresh)
        eps_final[idx] = _eps_for_variance(var[idx])
    else:
        value[idx] = fresh
        var[idx] = v_fresh
        eps_final[idx] = below
    pruned[idx] = True
    return {"pruned": pruned, "value": value, "eps_final": eps_final, "var": var, "y": y}


# ----------------------------------------------------------------------------- fused build (3.8)
@dataclass
class HTFTree:
    """Result of `build`: the released leaves and the public facts about the tree."""

    leaves: np.ndarray          # (L, 4) [r0, r1, c0, c1)
    counts: np.ndarray          # (L,) released noisy counts
    eps_final: np.ndarray       # (L,) budget of each released count (see count_step)
    eps_path: np.ndarray        # (L,) budget spent on the leaf's root-to-leaf path (= eps_data)
    leaf_var: np.ndarray        # (L,) noise variance of each released count
    leaf_height: np.ndarray     # (L,) height at which each leaf stopped
    nodes: np.ndarray           # (K, 5) [r0, r1, c0, c1, depth] of every visited node
    info: dict = field(default_factory=dict)   # h, noisy size and the budget plan (all released)
    ledger: Ledger = field(default_factory=Ledger)   # every charge, made before its draws


def build(F, epsilon: float, rng=None, *, budget_mode: str = "share", split=DEFAULT_SPLIT,
          eps_prt_level: float = 1e-3, T: int = 3, stop_count: float = 100.0,
          stop_cells: int = 5, c0: float = 10.0, extent_first: bool = False,
          combine_pruned: bool = False, split_rule: str | None = None, noise=None,
          on_draw=None) -> HTFTree:
    """HTF on a whole-count matrix F (rows south -> north), spending exactly `epsilon` (spec 3.8).

    rng: the release's numpy Generator (None: fresh OS entropy). split_rule: "search" (the
    paper's Algorithm 1) or "midpoint" (every node cut at the middle of its axis, no partition
    budget); None means "search" in paper mode and DEFAULT_SPLIT_RULE in share mode, and paper
    mode accepts only the search. Every check that can refuse runs on public inputs before the
    first draw, and each step is charged to the returned ledger before its draws. Test hooks: noise(kind, scale, size) returns the noise to
    add to the exact values (kind "height", "count" or "split"); on_draw(kind, regions (m, 4),
    eps (m,)) sees every noisy draw with the region it reads.
    """
    rule = resolve_split_rule(budget_mode, split_rule)
    F, limits = _check_request(F, epsilon, budget_mode, split, eps_prt_level, rule)
    draws = _Draws(rng, noise, on_draw)
    ledger = Ledger()
    plan = _plan_tree(F, epsilon, limits, draws, ledger, budget_mode=budget_mode, split=split,
                      eps_prt_level=eps_prt_level, c0=c0, T=T, rule=rule)
    rules = _Rules(T=T, stop_count=stop_count, stop_cells=stop_cells,
                   extent_first=extent_first, combine_pruned=combine_pruned, split_rule=rule)
    out = _grow(F, plan, draws, rules)
    return out.tree(_tree_info(plan, rules, budget_mode, epsilon), ledger)


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


class _Draws:
    """Every noisy draw of one build, from one source, each reported to the on_draw hook.

    The source is the release's generator or, in tests, noise(kind, scale, size), which returns
    the noise to add; on_draw(kind, regions (m, 4), eps (m,)) sees each draw with its regions.
    """

    def __init__(self, rng, noise, on_draw):
        self.gen = make_rng(rng, allow_int=False) if noise is None else None
        self.noise = noise
        self.on_draw = on_draw

    def _seen(self, kind, R, eps):
        if self.on_draw is not None:
            self.on_draw(kind, R, np.full(len(R), float(eps)))

    def count(self, kind, scale, R) -> np.ndarray:
        """Integer noise of `scale` for the counts of regions R (sensitivity 1)."""
        z = (discrete_laplace(self.gen, scale, len(R)) if self.noise is None
             else np.asarray(self.noise(kind, scale, len(R)), dtype=np.float64).reshape(len(R)))
        self._seen(kind, R, 1.0 / scale)
        return z

    def split(self, values, R, eps_eval: float, scale: float) -> np.ndarray:
        """Noisy objective values of the nodes R (discretised Laplace, eps_eval each)."""
        out = (_noisy_objectives(self.gen, values, eps_eval) if self.noise is None
               else values + np.asarray(self.noise("split", scale, len(R)), np.float64))
        self._seen("split", R, eps_eval)
        return out

    def count_hook(self, R):
        """count_step's draw(kind, scale, idx) for the nodes R."""
        return lambda kind, scale, idx: self.count(kind, scale, R[idx])

    def split_hook(self, R, eps_eval: float, scale: float):
        """_search's perturb(idx, values) for the nodes R."""
        return lambda idx, values: self.split(values, R[idx], eps_eval, scale)


@dataclass(frozen=True)
class _TreePlan:
    """The height and the budget plan, fixed before the first split or count draw."""

    budget: dict            # plan_budget's result: h, eps_height, eps_prt_level, eps_prt, ...
    E: np.ndarray           # count budget per height (root = h, partition leaves = 0)
    n_noisy: int            # the noisy dataset size that set h (released)
    eps_eval: float         # budget of one noisy objective value (0 if h = 0)
    scale_split: float      # its noise scale in objective units (0 if h = 0)
    limits: _Limits

    @property
    def h(self) -> int:
        return self.budget["h"]


def _plan_tree(F, epsilon, limits: _Limits, draws: _Draws, ledger: Ledger, *, budget_mode,
               split, eps_prt_level, c0, T, rule: str = "search") -> _TreePlan:
    """H1-H4: noisy size -> height -> budgets, each charged to the ledger before its draws.

    The height is charged before the noisy size is drawn; the whole tree plan before the first
    split or count draw (h before eps_data, pitfall 18).
    """
    h_max, eps_height, h_afford = limits
    _charge_height(ledger, eps_height, c0, h_max, h_afford if budget_mode == "paper" else None)
    full = np.array([[0, F.shape[0], 0, F.shape[1]]], np.int64)
    n_noisy = int(F.sum() + np.rint(draws.count("height", 1.0 / eps_height, full)[0]))
    h = min(estimate_height(n_noisy, epsilon, c0, h_max), h_afford)
    plan = plan_budget(epsilon, h, eps_height, mode=budget_mode, split=split,
                       eps_prt_level=eps_prt_level, split_rule=rule)   # never raises: h <= h_afford
    searched = h > 0 and plan["eps_prt_level"] > 0
    eps_eval = plan["eps_prt_level"] / (2 * T + 1) if searched else 0.0
    scale_split = split_noise_scale(eps_eval) if searched else 0.0
    _charge_tree(ledger, plan, T, rule)
    return _TreePlan(plan, np.array(plan["E"]), n_noisy, eps_eval, scale_split, limits)


@dataclass(frozen=True)
class _Rules:
    """The public growth parameters: search steps T, Algorithm 3's stopping rules, split rule."""

    T: int
    stop_count: float
    stop_cells: int
    extent_first: bool
    combine_pruned: bool
    split_rule: str = "search"


@dataclass(frozen=True)
class _Frontier:
    """The nodes of one level and the non-zero cells inside them (each cell knows its node)."""

    R: np.ndarray           # (m, 4) [r0, r1, c0, c1) of each node
    er: np.ndarray          # row of each non-zero cell (32-bit: less memory traffic)
    ec: np.ndarray          # its column
    ev: np.ndarray          # its count
    en: np.ndarray          # index of its node in R

    @classmethod
    def root(cls, F) -> _Frontier:
        """The root (the whole grid) holding every non-zero cell of F."""
        er, ec = np.nonzero(F)
        ev = F[er, ec]
        R = np.array([[0, F.shape[0], 0, F.shape[1]]], np.int64)
        return cls(R, er.astype(np.int32), ec.astype(np.int32), ev, np.zeros(er.size, np.int32))

    def keep(self, keep) -> _Frontier:
        """Drop the pruned nodes and their cells, and renumber the nodes that split."""
        sel = keep[self.en]
        return _Frontier(self.R[keep], self.er[sel], self.ec[sel], self.ev[sel],
                         (np.cumsum(keep) - 1)[self.en[sel]])

    def children(self, xs, k, coord) -> _Frontier:
        """Node j split after k lines: child 2j = [start, start + k), child 2j+1 = the rest."""
        R = self.R
        first, second = R.copy(), R.copy()
        first[xs, 3] = second[xs, 2] = R[xs, 2] + k[xs]
        first[~xs, 1] = second[~xs, 0] = R[~xs, 0] + k[~xs]
        out = np.empty((2 * len(R), 4), np.int64)
        out[0::2], out[1::2] = first, second
        en = 2 * self.en + (coord >= k.astype(np.int32)[self.en])
        return _Frontier(out, self.er, self.ec, self.ev, en)


def _count_level(R, tot, i: int, E, draws: _Draws, rules: _Rules) -> dict:
    """Algorithm 3 at height i: noisy counts of the nodes R (true counts tot), and the pruning."""
    cells = (R[:, 1] - R[:, 0]) * (R[:, 3] - R[:, 2])
    return count_step(tot, cells, i, E, stop_count=rules.stop_count, stop_cells=rules.stop_cells,
                      extent_first=rules.extent_first, combine_pruned=rules.combine_pruned,
                      draw=draws.count_hook(R))


def _split_axes(R, i: int) -> np.ndarray:
    """Algorithm 2's axis rule, True for an x-split: height mod 2 (0 = x), switched if extent 1."""
    rows, cols = R[:, 1] - R[:, 0], R[:, 3] - R[:, 2]
    ax = np.full(len(R), i % 2, np.int64)
    ax[(ax == 0) & (cols == 1)] = 1
    ax[(ax == 1) & (rows == 1)] = 0
    return ax == 0


class _LevelObjective:
    """Exact objective o_k (Eq. O) of all splitting nodes of a level, the evaluator of `_search`.

    Reads only the nodes' non-zero cells: for counts c >= 0, sum |c - mu| = 2 * sum over c > mu
    of (c - mu), and the side sums come from the summed-area table S.
    """

    def __init__(self, S, front: _Frontier, xs, tot):
        R, en = front.R, front.en
        rows, cols = R[:, 1] - R[:, 0], R[:, 3] - R[:, 2]
        self.S, self.R, self.xs, self.tot, self.en, self.ev = S, R, xs, tot, en, front.ev
        self.n = np.where(xs, cols, rows)                 # lines along the split axis
        self.W = np.where(xs, rows, cols)                 # cells per line
        start = np.where(xs, R[:, 2], R[:, 0])
        self.coord = (np.where(xs[en], front.ec, front.er)
                      - start[en].astype(np.int32))       # each cell's line along the axis
        self.en2 = 2 * en

    def __call__(self, idx, ks) -> np.ndarray:
        """o_k of the nodes idx at their candidates ks."""
        R, xs, en, m = self.R, self.xs, self.en, len(self.R)
        kf = np.ones(m, np.int32)
        kf[idx] = ks
        first = R.copy()
        first[xs, 3] = R[xs, 2] + kf[xs]
        first[~xs, 1] = R[~xs, 0] + kf[~xs]
        s1 = box_sums(self.S, first)
        mu = np.empty((m, 2))
        mu[:, 0] = (self.tot - s1) / ((self.n - kf) * self.W)     # second child
        mu[:, 1] = s1 / (kf * self.W)                             # first child
        d = self.ev - mu.ravel()[self.en2 + (self.coord < kf[en])]
        np.maximum(d, 0.0, out=d)
        o = 2.0 * np.bincount(en, weights=d, minlength=m)       # sum|c-mu| = 2 sum_{c>mu}(c-mu)
        return o[idx]


def _split_level(S, front: _Frontier, tot, i: int, plan: _TreePlan, draws: _Draws,
                 rules: _Rules) -> _Frontier:
    """Split every node of the frontier at height i; the next level.

    "search": Algorithm 1 at every node (private, paid by the level's charge). "midpoint": every
    node is cut at the midpoint of its axis, floor(n / 2) lines in the first child; this reads
    no data. Algorithm 2's axis rule holds for both.
    """
    xs = _split_axes(front.R, i)
    obj = _LevelObjective(S, front, xs, tot)
    if rules.split_rule == "search":
        k, _ = _search(obj.n, obj, rules.T,
                       draws.split_hook(front.R, plan.eps_eval, plan.scale_split))
    else:
        k = obj.n // 2
    return front.children(xs, k, obj.coord)


def _cat(parts, dt=np.float64) -> np.ndarray:
    return np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)


class _Leaves:
    """What the tree releases, gathered level by level: visited nodes and pruned leaves."""

    def __init__(self):
        (self.nodes, self.leaves, self.counts, self.eps, self.path, self.var,
         self.height) = ([] for _ in range(7))

    def visit(self, R, depth: int) -> None:
        """Record the nodes of one level with their depth."""
        self.nodes.append(np.column_stack([R, np.full(len(R), depth)]))

    def collect(self, R, st: dict, i: int, E) -> np.ndarray:
        """Keep count_step's pruned nodes at height i as leaves; returns the nodes to split."""
        pr = st["pruned"]
        if pr.any():
            L = int(pr.sum())
            self.leaves.append(R[pr])
            self.counts.append(st["value"][pr])
            self.eps.append(st["eps_final"][pr])
            self.var.append(st["var"][pr])
            self.height.append(np.full(L, i))
            acc = math.fsum(E[i:])           # path-local spend so far, a function of the height
            self.path.append(np.full(L, acc + math.fsum(E[:i]) if i else acc))
        return ~pr

    def tree(self, info: dict, ledger: Ledger) -> HTFTree:
        """Assemble the HTFTree from the gathered levels."""
        return HTFTree(leaves=np.concatenate(self.leaves).astype(np.int64).reshape(-1, 4),
                       counts=_cat(self.counts), eps_final=_cat(self.eps),
                       eps_path=_cat(self.path), leaf_var=_cat(self.var),
                       leaf_height=_cat(self.height, np.int64),
                       nodes=np.concatenate(self.nodes).astype(np.int64).reshape(-1, 5),
                       info=info, ledger=ledger)


def _grow(F, plan: _TreePlan, draws: _Draws, rules: _Rules) -> _Leaves:
    """Grow the tree top-down, one level per step (spec 3.8): count and prune, split the rest."""
    S = summed_area(F.astype(np.float64))
    front = _Frontier.root(F)
    out = _Leaves()
    for i in range(plan.h, -1, -1):
        if len(front.R) == 0:
            break
        out.visit(front.R, plan.h - i)
        tot = box_sums(S, front.R)
        keep = out.collect(front.R, _count_level(front.R, tot, i, plan.E, draws, rules), i,
                           plan.E)
        if not keep.any():
            break
        front = _split_level(S, front.keep(keep), tot[keep], i, plan, draws, rules)
    return out


def _tree_info(plan: _TreePlan, rules: _Rules, budget_mode: str, epsilon: float) -> dict:
    """The released facts about the tree: the budget plan, the noisy size, the search noise
    (0 with the midpoint rule) and the split rule."""
    return dict(plan.budget, noisy_size=plan.n_noisy, h_afford=int(plan.limits.h_afford),
                T=int(rules.T), eps_eval=float(plan.eps_eval),
                split_noise_scale=float(plan.scale_split), budget_mode=budget_mode,
                eps_total=float(epsilon), h_max=int(plan.limits.h_max),
                split_rule=rules.split_rule)


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


def _charge_tree(led: Ledger, plan: dict, T: int, rule: str = "search") -> None:
    """One entry per split level and one per height's counts (spec 4), charged before the tree.

    The midpoint rule reads no data to split: no split entries, and its counts got the
    partition share (plan_budget).
    """
    h = plan["h"]
    lvl = plan["eps_prt_level"]
    for j in range(h if rule == "search" else 0):
        led.charge(f"split positions, level {j + 1} of {h} (height {h - j})", lvl,
                   OBJECTIVE_SENSITIVITY, "discrete laplace",
                   split_noise_scale(lvl / (2 * T + 1)),
                   note=f"discretised Laplace mechanism on at most 2T+1 = {2 * T + 1} homogeneity "
                        f"objective values per node (sensitivity 2, rounded to a grid of "
                        f"{SPLIT_GRID:g}), each at ε/{2 * T + 1}; nodes of a level are disjoint "
                        "(parallel composition)")
    E = plan["E"]
    for i in range(h, -1, -1):
        led.charge(f"node counts at height {i}" + (" (root)" if i == h else "")
                   + (" (partition leaves)" if i == 0 else ""), E[i], 1.0, "discrete laplace",
                   1.0 / E[i],
                   note="discrete Laplace(1/ε_i) on each node count at this height (sensitivity "
                        "1, disjoint nodes); a region that stops higher up is recounted with the "
                        "budget of the heights below it, so every path spends ε_data")


class HTFRelease(LeafRelease):
    """LeafRelease plus the released tree facts (h, noisy size, plan) and each leaf's budget."""

    def __init__(self, *args, tree_info: dict | None = None, eps_final=None, **kw):
        super().__init__(*args, **kw)
        self.tree_info = dict(tree_info or {})
        self.eps_final = None if eps_final is None else np.asarray(eps_final, np.float64)

    def metadata(self) -> dict:
        meta = super().metadata()
        meta["tree"] = dict(self.tree_info)
        return meta

    def to_geojson(self) -> dict:
        gj = super().to_geojson()
        if self.eps_final is not None:
            for f, e in zip(gj["features"], self.eps_final.tolist()):
                f["properties"]["eps_final"] = e
        return gj


# ----------------------------------------------------------------------------------- release
def release_htf(data, domain, epsilon, split, params, rng):
    base = square_base_grid(domain, params["base_cells"])
    t0 = time.perf_counter()
    F = data.histogram(base)
    t1 = time.perf_counter()
    tree = build(F, epsilon, rng, budget_mode=params["budget_mode"], split=split,
                 eps_prt_level=params["eps_prt_level"], T=params["T"],
                 stop_count=params["stop_count"], stop_cells=params["stop_cells"],
                 c0=params["c0"], extent_first=params["extent_first"],
                 combine_pruned=params["combine_pruned"],
                 split_rule=None if params["budget_mode"] == "paper" else params["split_rule"])
    t2 = time.perf_counter()
    info = tree.info
    spent = (info["eps_height"], info["eps_prt"], info["eps_data"])
    effective = tuple(s / epsilon for s in spent)     # what was actually spent, per part
    info = dict(info, n_leaves=int(len(tree.leaves)), n_nodes=int(len(tree.nodes)),
                base_grid={"cols": base.gx, "rows": base.gy})
    # NON-PRIVATE, owner only (never exported): the root search's signal-to-noise, at the
    # search's per-value budget for this ε and budget (also when the midpoint rule was used)
    T = params["T"]
    search_lvl = _budget_parts(epsilon, info["h"], info["eps_height"], params["budget_mode"],
                               split, params["eps_prt_level"], "search")[0]
    diagnostics = {"binning_seconds": t1 - t0, "build_seconds": t2 - t1,
                   **root_split_snr(F, info["h"], search_lvl / (2 * T + 1))}
    # a combined count is not one draw: its interval falls back to the variance
    leaf_scale = None if params["combine_pruned"] else 1.0 / tree.eps_final
    return HTFRelease(HTF, domain, epsilon, effective, params, tree.ledger, base, tree.leaves,
                      tree.counts, leaf_var=tree.leaf_var, eps_path=tree.eps_path,
                      nodes=tree.nodes, leaf_scale=leaf_scale, tree_info=info,
                      eps_final=tree.eps_final, noisy_size=info["noisy_size"],
                      diagnostics=diagnostics)


HTF = MechanismSpec(
    name="htf", label="HTF tree (homogeneity splits)",
    description="Binary tree over a fine grid with noisy leaf counts (Shaham et al. 2021). By "
                "default each region is cut at its middle, which costs no privacy budget. The "
                "paper's private search for the cut that makes both halves most even is an "
                "option (and is always used in paper mode), but its noise swamps the "
                "differences it compares unless a region holds hundreds of thousands to "
                "millions of points.",
    guarantee="ε-differential privacy for adding or removing one point (unbounded neighbours): "
              "event-level without user ids; with user ids, user-level for one user with at most "
              "k points (see privacy_level). The dataset size is not treated as public: a share "
              "ε_height of ε buys a noisy size (discrete Laplace, sensitivity 1) that sets the "
              "tree height and is released with the tree. Counts get exact discrete Laplace "
              "noise. Midpoint cuts read no data; searched split positions come from a "
              "discretised Laplace mechanism. The box and the base grid are public and never "
              "derived from the data.",
    unit=ADD_REMOVE_POINT,
    params=(
        Param("base_cells", int, 1024, "Base grid cells (longer side)",
              "The tree splits a fixed grid laid over the map box; this many cells on the "
              "box's longer side, with square cells. The paper uses 1024; fewer is faster and "
              "coarser.", min=2, max=4096),
        Param("budget_mode", str, "share", "Budget mode",
              "share: ε is divided by the split below (dataset size, split positions, counts), "
              "so it works for any upload size. paper: the paper's fixed amounts (0.0001 for "
              "the dataset size, 'Partition ε per level' per tree level, the rest for counts); "
              "the split is then ignored, and regions are always cut by the paper's search. "
              "The size noise is about ±10,000 points, so use it only for uploads of 100,000 "
              "points or more. If the noisy size asks for more levels than ε can pay for, the "
              "tree gets the most levels ε affords.",
              choices=("share", "paper")),
        Param("split_rule", str, DEFAULT_SPLIT_RULE, "Where regions are cut",
              "How each region is cut in two (share mode; paper mode always uses the paper's "
              "search). midpoint (recommended): cut in the middle. This looks at no data, so "
              "the partition share of ε goes to the counts instead. search: the paper's noisy "
              "search for the cut that leaves both halves most even. Its noise is larger than "
              "the differences it compares unless a region holds hundreds of thousands to "
              "millions of points, so most cuts land almost at random; on the benchmark data "
              "it was 1.7 to 5.5 times less accurate than midpoint. The owner-only diagnostic "
              "'root_split_snr' shows the signal-to-noise ratio of the search at the top "
              "region.",
              choices=SPLIT_RULES),
        Param("eps_prt_level", float, 1e-3, "Partition ε per level (paper mode)",
              "Privacy budget spent on choosing the split positions of each tree level, in "
              "paper mode only (the paper uses 0.0005 or 0.001).", min=1e-9, max=10.0),
        Param("T", int, 3, "Search steps T",
              "How often the split search halves its interval. Each region compares at most "
              "2T+1 noisy candidates: more steps find finer splits, but each comparison gets "
              "less budget. The paper uses 3.", min=1, max=12),
        Param("stop_count", float, 100.0, "Stop count",
              "A region stops splitting when its noisy count is at most this many points "
              "(the paper uses 100, and studies 10 to 100).", min=-1e12, max=1e12),
        Param("stop_cells", int, 5, "Stop size (cells)",
              "A region with fewer base cells than this is not split further (paper: 5).",
              min=1, max=1 << 24),
        Param("c0", float, 10.0, "Height constant c0",
              "The tree height is ⌊log2(noisy size × ε / c0)⌋, i.e. about size·ε/c0 leaves "
              "(paper: 10).", min=1e-6, max=1e9),
        Param("extent_first", bool, False, "Check region size first",
              "Improvement, off in the paper: decide 'too small to split' before drawing the "
              "region's noisy count, so its final count gets more budget. Still private."),
        Param("combine_pruned", bool, False, "Combine both counts of stopped regions",
              "Improvement, off in the paper: when a region stops, average its two noisy "
              "counts weighted by their precision instead of discarding the first. Less noise, "
              "but a slight downward bias for regions stopped because their first count was "
              "small."),
    ),
    budget_parts=("height", "partition", "counts"), default_split=DEFAULT_SPLIT,
    finest_grid=base_shape, release=release_htf)

SPECS = (HTF,)
