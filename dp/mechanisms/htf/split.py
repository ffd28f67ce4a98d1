"""HTF's split search: the homogeneity objective (Eq. O), the corrected Algorithm 1 run for a
whole level of nodes at once, and the owner-only diagnostic of how much the search can see."""
from __future__ import annotations

import math

import numpy as np

from ...noise import laplace_real, make_rng
from ...summed_area import box_sums

OBJECTIVE_SENSITIVITY = 2.0      # Theorem 1: |delta o_k| < 2
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


# ------------------------------------------------------------------------ one level of the tree
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
    of (c - mu), and the side sums come from the summed-area table S. `front` is the level's
    frontier: its nodes R and their non-zero cells (er, ec, ev, each cell's node en).
    """

    def __init__(self, S, front, xs, tot):
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

