"""DAWA's estimation step: a hierarchical strategy over the buckets, noisy counts, least squares.

The strategy is a binary tree over the buckets in Hilbert order (a node covers buckets
[lo, hi), children split at lo + (hi − lo) // 2). Each node measured with weight w gets the
integer count of its buckets plus discrete Laplace(1/(w ε2)) noise. Weights along every
root-to-leaf path add up to at most 1, and a point changes one count per level by 1, so the counts are
ε2-DP (sequential composition along the path, parallel across a level).

- GreedyH (Li, Hay & Miklau 2014, section 4): bottom-up, each node chooses the share 1 − p of
  its subtree's weight it keeps (its children get p, p on a grid of 1/granularity) to minimise
  the workload's expected squared error inside its subtree, given the children's strategies.
  With u = (A_c^T A_c)^−1 1 of the children (A_c their weighted queries at unit budget),
  K = 1^T u, err_c the children's errors and v_c = Q_c u_c the workload Q applied to u, the
  Sherman-Morrison update gives err(p) = (Σ err_c − w² ‖Σ v_c‖² / (p² + w² K)) / p², w = 1 − p,
  and the node's own u = (concatenated u_c) / (p² + w² K). A subtree whose buckets every query
  covers in the same fraction (identical workload columns; always so for one bucket) is
  measured as one count: the workload cannot tell its buckets apart. Only ‖·‖, sums and
  vectors of length |Q| per node are kept, so the cost is O(|Q| · buckets), in blocks.
  (The reference implementation also damps the cross terms by 2^(−depth/2); here the error
  is the exact one of the local problem.)
- H2 (the paper's baseline, Hay et al. 2010): the same tree with the same weight 1/(h + 1) at
  every level; a leaf above the bottom level keeps the weights of the levels below it.

The estimate is the least-squares (inverse-variance) fit of the tree: bottom-up
Z_v = (y_v/V_v + S/SV)/(1/V_v + 1/SV) with S, SV the sums of the children's Z, V (a node of
weight 0 is not measured: Z_v = S), then top-down x_c = Z_c + V_c/SV (x_v − S). A measured
group of buckets is split among them in proportion to their areas.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BLOCK = 1024                 # buckets whose workload columns are held at once
STRATEGIES = ("greedyh", "h2")


@dataclass
class StrategyTree:
    """Nodes in breadth-first order: bucket range [lo, hi), parent (−1 for the root), depth,
    weight (share of ε2; 0 = not measured) and whether it is a leaf (one measured group)."""

    lo: np.ndarray
    hi: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    weight: np.ndarray
    leaf: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.lo)

    def path_sums(self) -> np.ndarray:
        """Σ of the weights on each node's root path (children follow parents in BFS order)."""
        s = self.weight.copy()
        for i in range(1, len(s)):
            s[i] += s[self.parent[i]]
        return s


def _mid(lo, hi):
    return lo + (hi - lo) // 2


@dataclass
class _Summary:
    """Per node (columns): v = Q u, K = 1^T u, err, lump (identical columns), rep (one column)."""

    v: np.ndarray
    k: np.ndarray
    err: np.ndarray
    lump: np.ndarray
    rep: np.ndarray

    def take(self, idx):
        return _Summary(self.v[:, idx], self.k[idx], self.err[idx], self.lump[idx], self.rep[:, idx])


def _leaf_summary(Q: np.ndarray) -> _Summary:
    c = Q.shape[1]
    return _Summary(Q, np.ones(c), (Q * Q).sum(0), np.ones(c, dtype=bool), Q)


def _combine(left: _Summary, right: _Summary, pgrid: np.ndarray) -> tuple[_Summary, np.ndarray]:
    """Parents of (left[i], right[i]) pairs: their summaries and chosen p (NaN if lumped)."""
    same = left.lump & right.lump & np.all(left.rep == right.rep, axis=0)
    K = left.k + right.k
    serr = left.err + right.err
    V = left.v + right.v
    m = (V * V).sum(0)
    p = pgrid[:, None]
    w2 = (1.0 - p) ** 2
    e = (serr - w2 * m / (p * p + w2 * K)) / (p * p)               # (grid, nodes)
    i = e.argmin(0)
    pb = pgrid[i]
    s = 1.0 / (pb * pb + (1.0 - pb) ** 2 * K)
    rep_err = (left.rep * left.rep).sum(0)
    out = _Summary(np.where(same, left.rep, s * V), np.where(same, 1.0, s * K),
                   np.where(same, rep_err, e[i, np.arange(e.shape[1])]), same, left.rep)
    return out, np.where(same, np.nan, pb)


def _block(Qfn, lo: int, hi: int, pgrid, dec: dict) -> _Summary:
    """Summaries of the subtree on [lo, hi), level by level from the bottom (vectorised)."""
    Q = Qfn(lo, hi)
    levels = [(np.array([lo]), np.array([hi]))]
    while True:
        a, b = levels[-1]
        inner = b - a > 1
        if not inner.any():
            break
        a, b = a[inner], b[inner]
        mid = _mid(a, b)
        levels.append((np.column_stack([a, mid]).ravel(), np.column_stack([mid, b]).ravel()))
    below = None
    for a, b in reversed(levels):
        single = b - a == 1
        cur = _leaf_summary(np.zeros((Q.shape[0], len(a))))
        cols = a[single] - lo
        cur.v[:, single] = Q[:, cols]
        cur.err[single] = (Q[:, cols] ** 2).sum(0)
        cur.rep = cur.v.copy()
        if below is not None:
            n_in = int((~single).sum())
            par, p = _combine(below.take(np.arange(0, 2 * n_in, 2)),
                              below.take(np.arange(1, 2 * n_in, 2)), pgrid)
            inner = np.flatnonzero(~single)
            cur.v[:, inner], cur.k[inner], cur.err[inner] = par.v, par.k, par.err
            cur.lump[inner], cur.rep[:, inner] = par.lump, par.rep
            dec.update(zip(zip(a[inner].tolist(), b[inner].tolist()), p.tolist()))
        below = cur
    return below


def _summarize(Qfn, lo: int, hi: int, pgrid, dec: dict) -> _Summary:
    if hi - lo <= BLOCK:
        return _block(Qfn, lo, hi, pgrid, dec)
    mid = _mid(lo, hi)
    par, p = _combine(_summarize(Qfn, lo, mid, pgrid, dec), _summarize(Qfn, mid, hi, pgrid, dec),
                      pgrid)
    dec[(lo, hi)] = float(p[0])
    return par


def _tree(n: int, keep) -> StrategyTree:
    """Breadth-first tree over [0, n); keep(lo, hi, depth) -> (weight kept, share to children)
    or None for a leaf, which keeps everything that reaches it."""
    lo, hi, par, dep, wt, leaf, reach = [0], [n], [-1], [0], [], [], [1.0]
    i = 0
    while i < len(lo):
        a, b, d, r = lo[i], hi[i], dep[i], reach[i]
        rule = keep(a, b, d) if b - a > 1 else None
        if rule is None:
            wt.append(r)
            leaf.append(True)
        else:
            own, share = rule
            wt.append(r * own)
            leaf.append(False)
            m = _mid(a, b)
            lo += [a, m]
            hi += [m, b]
            par += [i, i]
            dep += [d + 1, d + 1]
            reach += [r * share, r * share]
        i += 1
    t = StrategyTree(np.array(lo), np.array(hi), np.array(par), np.array(dep),
                     np.array(wt, dtype=np.float64), np.array(leaf))
    # exact rounding of the path sums: scale so the largest is 1, with a 2^-40 margin
    t.weight *= (1.0 - 2.0 ** -40) / t.path_sums()[t.leaf].max()
    return t


def greedyh_tree(Qfn, n: int, granularity: int = 100) -> StrategyTree:
    """GreedyH's tree over n buckets; Qfn(lo, hi) gives the workload's (|Q|, hi − lo) coverage
    fractions of buckets lo..hi−1. Reads no data: only the public workload and the partition."""
    pgrid = 1.0 - np.arange(granularity) / granularity            # p = 1, 0.99, ..., 0.01
    dec: dict = {}
    _summarize(Qfn, 0, n, pgrid, dec)

    def keep(a, b, d):
        p = dec[(a, b)]
        return None if math.isnan(p) else (1.0 - p, p)
    return _tree(n, keep)


def h2_tree(n: int) -> StrategyTree:
    """The binary tree over n buckets with weight 1/(h + 1) per level (h = its height): a node
    at depth d keeps 1/(h + 1 − d) of the (h + 1 − d)/(h + 1) that reaches it."""
    h = max(0, math.ceil(math.log2(n))) if n > 1 else 0
    return _tree(n, lambda a, b, d: (1.0 / (h + 1 - d), (h - d) / (h + 1 - d)))


def least_squares(t: StrategyTree, y: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Inverse-variance least-squares estimate of every node's count (see the module notes);
    var = inf marks a node that was not measured."""
    prec = np.where(np.isfinite(var), 1.0 / var, 0.0)
    Z = np.where(prec > 0, np.asarray(y, dtype=np.float64), 0.0)
    V = np.asarray(var, dtype=np.float64).copy()
    N, H = t.n_nodes, int(t.depth.max())
    sums = {}
    for d in range(H - 1, -1, -1):
        ch = np.flatnonzero(t.depth == d + 1)
        S = np.bincount(t.parent[ch], Z[ch], minlength=N)
        SV = np.bincount(t.parent[ch], V[ch], minlength=N)
        sums[d] = (S, SV)
        idx = np.flatnonzero((t.depth == d) & ~t.leaf)
        inv = prec[idx] + 1.0 / SV[idx]
        Z[idx] = (Z[idx] * prec[idx] + S[idx] / SV[idx]) / inv
        V[idx] = 1.0 / inv
    X = Z.copy()
    for d in range(1, H + 1):
        ch = np.flatnonzero(t.depth == d)
        S, SV = sums[d - 1]
        p = t.parent[ch]
        X[ch] = Z[ch] + V[ch] / SV[p] * (X[p] - S[p])
    return X
