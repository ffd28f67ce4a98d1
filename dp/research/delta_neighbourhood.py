"""Research functions for differential privacy under δ-neighbourhood (spec 001, Fang & Chang 2014).

Not app mechanisms and not part of the stable API (see `dp.research`): building blocks with
tests. Notation follows the spec; the distance threshold is `delta_dist` (δ in (ε, δ)-DP means
something else).

- Linear strategies (spec 2.1): standard and δ-sensitivity of A (the δ version includes the
  sources term N_S), neighbour structures for grids and for discrete point domains, and the
  workload variance (2Δ²/ε²)·diag(Q (AᵀA)⁻¹ Qᵀ).
- The graph/cut view and the greedy augmentation (spec 2.3, Algorithm 2).
- The 1-D cumulative strategy C_n (spec 2.2, Algorithm 1).
- Sorted 1-D points (spec 2.7) and the δ-capped smooth-sensitivity median (spec 2.8).
- Sustainable time-series budgets (spec 2.9): window sums, the offline allocation (Problem 1)
  and the online allocation (Problem 2 over sampled futures), in `delta_time_series`,
  re-exported here.

Noise. Counts get integer noise from the exact discrete Laplace sampler and real values
(sorted points, a median) the discretised Laplace mechanism of `dp.noise.laplace_real`, so no
low bits of a double reveal the data. Functions that draw take `rng`: a numpy Generator (used
as given), None (fresh OS entropy) or an int, which is for tests only: a fixed seed makes the
noise reproducible and so removable.

Half-open bins. For grid bins [x0, x1) the distance between two bins is attained only when
the gap between them is 0, so bins i, j are δ-neighbours iff gap < δ (strict). The spec's
"gap ≤ δ" is the closed-bin version; it adds pairs exactly δ apart and would give Δ = 2
instead of 1 for C_4 with δ one bin wide (test T1).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import isotonic_regression

from ..noise import discrete_laplace, laplace_real, make_rng
from .delta_time_series import (allocation_error, is_sustainable, offline_allocation,  # noqa: F401
                                online_allocation, uniform_allocation, window_matrix, window_sums)

__all__ = [
    "standard_sensitivity", "delta_sensitivity", "grid_neighbour_pairs", "grid_source_bins",
    "point_neighbours", "workload_variances", "cut_counts", "graph_edges", "greedy_augment",
    "cumulative_strategy", "cumulative_release", "cumulative_range", "cumulative_range_variance",
    "sorted_points_sensitivity", "sorted_points_release", "sorted_points_range_counts",
    "median_smooth_sensitivity", "smooth_median_release",
    "window_matrix", "window_sums", "is_sustainable", "allocation_error", "uniform_allocation",
    "offline_allocation", "online_allocation",
]

BOTTOM = -1     # the source vertex ⊥ in edge lists (spec 2.3)
MEDIAN_GRID_BITS = 24    # the smooth median is released on the public grid Λ·2^-24


# ============================================================ 2.1 linear strategies
def standard_sensitivity(A, bounded_only: bool = False) -> float:
    """Δ_A = max(max_{i,j} ‖a_i − a_j‖₁, max_i ‖a_i‖₁) over the columns a_i of A (spec 2.1).

    bounded_only: only the replace-one term (bounded DP, n public).
    """
    A = np.asarray(A, dtype=np.float64)
    r, k = A.shape
    step = max(1, 4_000_000 // max(1, r * k))           # bounded memory: columns i in blocks
    diff = max(float(np.abs(A[:, i:i + step, None] - A[:, None, :]).sum(axis=0).max())
               for i in range(0, k, step))
    return diff if bounded_only else float(max(diff, np.abs(A).sum(axis=0).max()))


def delta_sensitivity(A, pairs, source_bins=()) -> float:
    """Δ_δ(A) = max(max_{(i,j)∈N} ‖a_i − a_j‖₁, max_{i∈N_S} ‖a_i‖₁) (spec 2.1 with the N_S term).

    pairs: (P, 2) bin indices of δ-neighbouring bins N; source_bins: the bins N_S within δ of
    a source (empty when S = ∅, i.e. bounded neighbours).
    """
    A = np.asarray(A, dtype=np.float64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    src = np.asarray(list(source_bins), dtype=np.int64)
    best = 0.0
    step = max(1, 4_000_000 // max(1, A.shape[0]))    # bounded memory for big grids
    for lo in range(0, len(pairs), step):
        p = pairs[lo:lo + step]
        best = max(best, float(np.abs(A[:, p[:, 0]] - A[:, p[:, 1]]).sum(axis=0).max(initial=0.0)))
    if src.size:
        best = max(best, float(np.abs(A[:, src]).sum(axis=0).max()))
    return best


def grid_neighbour_pairs(shape, bin_width, delta_dist: float) -> np.ndarray:
    """δ-neighbouring pairs of a grid of half-open bins, flat row-major indices, (P, 2), a < b.

    Bins with index offsets (di, dj) have gap gx = max(0, |di| − 1)·wx (likewise gy); they are
    neighbours iff gx² + gy² < δ² or they touch (gap 0). For δ < w: the 8-neighbourhood.
    """
    ny, nx = shape
    wx, wy = (bin_width, bin_width) if np.isscalar(bin_width) else bin_width
    Dx = min(nx - 1, int(math.ceil(delta_dist / wx)) + 1)
    Dy = min(ny - 1, int(math.ceil(delta_dist / wy)) + 1)
    idx = np.arange(ny * nx).reshape(ny, nx)
    out = []
    for dj in range(0, Dy + 1):
        for di in range(-Dx, Dx + 1):
            if dj == 0 and di <= 0:
                continue
            gx = max(0, abs(di) - 1) * wx
            gy = max(0, dj - 1) * wy
            if not (gx == 0 and gy == 0) and not gx * gx + gy * gy < delta_dist * delta_dist:
                continue
            a = idx[:ny - dj, max(0, -di):nx - max(0, di)]
            b = idx[dj:, max(0, di):nx - max(0, -di)]
            out.append(np.column_stack([a.ravel(), b.ravel()]))
    return np.vstack(out) if out else np.zeros((0, 2), np.int64)


def grid_source_bins(shape, bin_width, delta_dist: float, sources) -> np.ndarray:
    """Bins (flat indices) whose closure lies within δ of some source point (x, y) (N_S).

    Uses the closed bin, so it may include a bin whose nearest point is on an open edge
    (conservative: a larger N_S can only raise Δ_δ).
    """
    ny, nx = shape
    wx, wy = (bin_width, bin_width) if np.isscalar(bin_width) else bin_width
    S = np.asarray(sources, dtype=np.float64).reshape(-1, 2)
    j, i = np.divmod(np.arange(ny * nx), nx)
    dx = np.maximum(np.maximum(i[:, None] * wx - S[None, :, 0], S[None, :, 0] - (i[:, None] + 1) * wx), 0)
    dy = np.maximum(np.maximum(j[:, None] * wy - S[None, :, 1], S[None, :, 1] - (j[:, None] + 1) * wy), 0)
    return np.flatnonzero((dx ** 2 + dy ** 2 <= delta_dist ** 2).any(axis=1))


def point_neighbours(points, delta_dist: float, sources=(), tol: float = 1e-12):
    """Discrete domain, one bin per point: (pairs with d ≤ δ, bins within δ of a source)."""
    P = np.asarray(points, dtype=np.float64)
    P = P[:, None] if P.ndim == 1 else P
    eps = tol * max(1.0, delta_dist)
    d = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    a, b = np.nonzero(np.triu(d <= delta_dist + eps, k=1))
    src = np.zeros(0, np.int64)
    S = np.asarray(sources, dtype=np.float64)
    if S.size:
        S = S.reshape(-1, P.shape[1])
        ds = np.sqrt(((P[:, None, :] - S[None, :, :]) ** 2).sum(-1))
        src = np.flatnonzero((ds <= delta_dist + eps).any(axis=1))
    return np.column_stack([a, b]), src


def workload_variances(A, Q, epsilon: float, sensitivity: float) -> np.ndarray:
    """Per-query noise variance of q·A⁺c̃: (2Δ²/ε²)·diag(Q (AᵀA)⁻¹ Qᵀ) (spec 2.1, P5).

    A must have full column rank.
    """
    A = np.asarray(A, dtype=np.float64)
    Q = np.atleast_2d(np.asarray(Q, dtype=np.float64))
    G = A.T @ A
    if np.linalg.matrix_rank(G) < G.shape[0]:
        raise ValueError("the strategy A does not have full column rank")
    X = np.linalg.solve(G, Q.T)
    return 2 * sensitivity ** 2 / epsilon ** 2 * np.einsum("qk,kq->q", Q, X)


# ============================================================ 2.3 graph / cut view, greedy
def graph_edges(pairs, source_bins=()) -> np.ndarray:
    """Edge list E = N ∪ {(i, ⊥) : i ∈ N_S}; ⊥ is encoded as -1."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    src = np.asarray(list(source_bins), dtype=np.int64)
    return np.vstack([pairs, np.column_stack([src, np.full(src.size, BOTTOM)])])


def _cuts(rows: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(r, e) boolean: does row (a set of bins) cut edge e (exactly one end inside; ⊥ in no set)."""
    R = np.atleast_2d(np.asarray(rows, dtype=bool))
    R = np.hstack([R, np.zeros((R.shape[0], 1), dtype=bool)])      # column -1 is ⊥
    u, v = edges[:, 0], edges[:, 1]
    return R[:, u] != R[:, v]


def cut_counts(rows, edges) -> np.ndarray:
    """C(e) = number of rows cutting edge e; for binary A, Δ_A = max_e C(e) (spec 2.3)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    rows = np.atleast_2d(np.asarray(rows, dtype=bool))
    if rows.shape[0] == 0:
        return np.zeros(len(edges), dtype=np.int64)
    return _cuts(rows, edges).sum(axis=0)


def greedy_augment(rows, candidates, edges, delta_star: int | None = None):
    """GREEDY(G, A, F, Δ*) of spec 2.3: add candidate sets while every cut stays ≤ Δ*.

    rows, candidates: boolean (r, k) / (f, k) bin-membership matrices; edges from
    `graph_edges`. Candidates are tried in order, repeatedly, until a pass adds nothing.
    Returns (augmented rows, Δ*); release them with Lap(Δ*/ε) per row.
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    R = [np.asarray(r, dtype=bool) for r in np.atleast_2d(np.asarray(rows, dtype=bool))]
    C = cut_counts(np.array(R), edges) if R else np.zeros(len(edges), np.int64)
    if delta_star is None:
        delta_star = int(C.max(initial=0))
    have = {r.tobytes() for r in R}
    cand = np.atleast_2d(np.asarray(candidates, dtype=bool))
    cand_cuts = _cuts(cand, edges)
    changed = True
    while changed:
        changed = False
        for a, cut in zip(cand, cand_cuts):
            if a.tobytes() in have:
                continue
            if C[cut].max(initial=0) + 1 <= delta_star:
                R.append(a.copy())
                have.add(a.tobytes())
                C[cut] += 1
                changed = True
    return np.array(R), delta_star


# ============================================================ 2.2 1-D cumulative strategy
def cumulative_strategy(n: int, source: str = "left") -> np.ndarray:
    """C_n: suffix sums (upper-triangular ones) for a source at the left end, prefix sums
    (lower-triangular) for a source at the right end (spec 2.2, P7)."""
    ones = np.ones((n, n))
    if source == "left":
        return np.triu(ones)
    if source == "right":
        return np.tril(ones)
    raise ValueError(f"source must be 'left' or 'right', got {source!r}")


def cumulative_release(counts, epsilon: float, delta_bins: int, rng, source: str = "left") -> np.ndarray:
    """ã = C_n c + discrete Laplace(δ_b/ε)^n (integers): Δ = δ_b under δ-neighbourhood with one
    source at the end. `counts` must be whole numbers."""
    c = np.asarray(counts)
    ints = np.rint(c).astype(np.int64)
    if not np.array_equal(ints, c):
        raise ValueError("cumulative_release needs whole-number counts")
    a = cumulative_strategy(len(ints), source).astype(np.int64) @ ints
    return a + discrete_laplace(make_rng(rng), delta_bins / epsilon, len(ints))


def cumulative_range(a_noisy, i, j, source: str = "left") -> np.ndarray:
    """Count of bins i..j (0-based, inclusive): ã_i − ã_{j+1} (ã_n := 0) for suffix sums;
    ã_j − ã_{i−1} (ã_{−1} := 0) for prefix sums. Vectorised over i, j; a_noisy may carry
    extra trailing axes (e.g. many draws as columns)."""
    a = np.asarray(a_noisy, dtype=np.float64)
    a = np.concatenate([a, np.zeros((1,) + a.shape[1:])])      # a[n] = 0, a[-1] = 0
    i, j = np.asarray(i), np.asarray(j)
    if source == "left":
        return a[i] - a[j + 1]
    return a[j] - a[i - 1]


def cumulative_range_variance(n: int, i, j, epsilon: float, delta_bins: int, source: str = "left"):
    """4δ_b²/ε² when the range needs two released values, 2δ_b²/ε² when one (spec 2.2).

    These are the spec's continuous-Laplace values; the discrete noise of `cumulative_release`
    has variance 2q/(1-q)², q = exp(-ε/δ_b), which is never larger than 2δ_b²/ε².
    """
    i, j = np.asarray(i), np.asarray(j)
    two = (j < n - 1) if source == "left" else (i > 0)
    return np.where(two, 4.0, 2.0) * delta_bins ** 2 / epsilon ** 2


# ============================================================ 2.7 sorted 1-D points
def sorted_points_sensitivity(delta_dist: float, domain_size: float = 1.0) -> float:
    """Δ = δΛ: replacing x by y with |x − y| ≤ δΛ changes the sorted vector by |x − y| in L1."""
    return delta_dist * domain_size


def sorted_points_release(x, epsilon: float, delta_dist: float, rng, domain_size: float = 1.0,
                          postprocess: bool = False) -> np.ndarray:
    """z̃ = sort(x) + Laplace noise of scale about δΛ/ε per value (spec 2.7, S = ∅ so n is public),
    on the public grid g = δΛ/1024 (`laplace_real`). `postprocess`: isotonic regression to
    non-decreasing values, then clip to [0, Λ] (privacy-free).

    Rounding is monotone, so the rounded sorted vector is the sorted vector of rounded points,
    and a replacement x → y changes it by |round(x) − round(y)| ≤ δΛ/g + 1 grid steps in L1:
    exactly the sensitivity `laplace_real` calibrates its noise to.
    """
    z = np.sort(np.asarray(x, dtype=np.float64))
    zt = laplace_real(make_rng(rng), z, sorted_points_sensitivity(delta_dist, domain_size), epsilon)
    if postprocess and zt.size:
        zt = np.clip(isotonic_regression(zt).x, 0.0, domain_size)
    return zt


def sorted_points_range_counts(z_noisy, lo, hi) -> np.ndarray:
    """#{i : lo ≤ z̃_i < hi} for each range (vectorised)."""
    z = np.sort(np.asarray(z_noisy, dtype=np.float64))
    return (np.searchsorted(z, np.asarray(hi, dtype=np.float64), side="left")
            - np.searchsorted(z, np.asarray(lo, dtype=np.float64), side="left"))


# ============================================================ 2.8 smooth-sensitivity median
def median_smooth_sensitivity(x, beta: float, domain_size: float = 1.0,
                              delta_dist: float | None = None) -> float:
    """β-smooth sensitivity of the median (n odd), Nissim-Raskhodnikova-Smith 2007:

        S(x) = max_{k=0..n} e^{−kβ} · max_{t=0..k+1} (x_{m*+t} − x_{m*+t−k−1}),

    x sorted, padded with 0 below index 1 and Λ above n, m* = (n+1)/2. With `delta_dist`
    (fraction of Λ) each inner term is capped at δΛ, the global δ-sensitivity (spec 2.8).
    """
    x = np.sort(np.asarray(x, dtype=np.float64))
    n = x.size
    if n % 2 != 1:
        raise ValueError(f"the median needs an odd number of points, got {n}")
    ms = (n + 1) // 2
    off = n                                      # xp[idx + off] = x_idx for idx in [-n, 2n+2]
    xp = np.concatenate([np.zeros(n + 1), x, np.full(n + 3, float(domain_size))])
    cap = math.inf if delta_dist is None else delta_dist * domain_size
    top = min(cap, float(domain_size))
    t = np.arange(n + 2)
    chunk = max(1, 2_000_000 // (n + 2))
    best = 0.0
    for k0 in range(0, n + 1, chunk):
        if math.exp(-k0 * beta) * top <= best:    # later k cannot beat the current maximum
            break
        k = np.arange(k0, min(n + 1, k0 + chunk))[:, None]
        hi = xp[ms + t[None, :] + off]
        lo = xp[np.maximum(ms + t[None, :] - k - 1 + off, 0)]
        A = np.where(t[None, :] <= k + 1, hi - lo, -np.inf).max(axis=1)
        best = max(best, float((np.exp(-k[:, 0] * beta) * np.minimum(cap, A)).max()))
    return best


def smooth_median_release(x, epsilon: float, failure_prob: float, rng, domain_size: float = 1.0,
                          delta_dist: float | None = None):
    """median + Laplace noise of scale S/α, α = ε/2, β = ε/(2 ln(2/δ')): (ε, δ')-DP (spec 2.8;
    δ' is `failure_prob`). Returns (noisy median, S, β).

    The median is rounded to the public grid g = Λ·2^-24 and gets discrete Laplace noise of scale
    (S/g + 1)/α grid steps (`laplace_real`): S/g + 1 is still β-smooth and bounds the local
    sensitivity of the rounded median, and the discrete Laplace keeps the sliding and dilation
    bounds NRS use (its normaliser tanh(1/2b) changes by at most the factor of the continuous 1/b).
    """
    beta = epsilon / (2 * math.log(2 / failure_prob))
    S = median_smooth_sensitivity(x, beta, domain_size, delta_dist)
    med = float(np.median(x))
    g = float(domain_size) * 2.0 ** -MEDIAN_GRID_BITS
    return float(laplace_real(make_rng(rng), med, S, epsilon / 2, granularity=g)), S, beta
