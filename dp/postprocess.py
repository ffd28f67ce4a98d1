"""Post-processing of noisy hierarchical counts, for any tree of `dp.mechanisms.trees.Tree`.

A tree here is nodes in breadth-first order (depth non-decreasing) with `regions` (K, 4) half-open
base-cell ranges [r0, r1) x [c0, c1), `parent` (-1 for the root), `depth`, `is_leaf` and
`level_bounds()`; the children of a node tile it. The functions read only noisy counts and
their public variances, so everything here is post-processing: it costs no privacy budget.
Loops run over tree levels only, never over nodes.

- `consistent`: least-squares (inverse-variance) consistency of Hay, Rastogi, Miklau & Suciu,
  "Boosting the accuracy of differentially private histograms through consistency", VLDB 2010,
  in the form for any tree and per-node variances (as with the geometric level budgets of
  Cormode, Procopiuc, Srivastava, Shen & Yu, "Differentially private spatial decompositions",
  ICDE 2012), plus the variance of every estimate.
- `nonnegative`: top-down non-negativity that keeps every parent equal to the sum of its children.
- `zero_insignificant`: zero every node whose estimate is not significantly above zero, with its
  subtree.
- `redistribute`: hand each parent's value to its children that carry mass, in proportion, and
  paint a small kept region whose children were all zeroed over its cells, so zeroing removes
  the noise of empty regions without removing their mass: the leaves add up to the root.
- `infer`: the four in that order, the full quadtree's inference, offered to every tree that
  noises all its nodes (quadtree, kd-tree) as their `zero_sd` setting.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import math

import numpy as np

if TYPE_CHECKING:        # trees.py imports this module; the type is only named here
    from .mechanisms.trees import Tree


def consistent(tree: "Tree", y, var) -> tuple[np.ndarray, np.ndarray]:
    """Hay et al. (2010) least-squares consistency on any tree: (x, v).

    y: every node's noisy count, var: its noise variance (independent noises). Bottom-up, an
    internal node's estimate from its own subtree is Z_v = w y_v + (1 - w) Σ Z_u with
    w = (1/var_v) / (1/var_v + 1/Σ V_u), of variance V_v = var_v Σ V_u / (var_v + Σ V_u) (a leaf:
    Z = y, V = var); top-down, x_u = Z_u + V_u / Σ V_w · (x_v − Σ Z_w) over the children w of u's
    parent v, and x_root = Z_root. With a uniform fanout f and per-height budgets this is the
    α_j = f^j ε_j² / E_j of Hay et al. and Cormode et al. (2012) (their geometric budgets).

    Returns x, consistent estimates of every node (each internal node equals the sum of its
    children, to rounding), and v, the noise variance of each x: v_root = V_root, then top-down
    v_u = V_u + (V_u / Σ V_w)² (v_v − Σ V_w) (the Rauch-Tung-Striebel smoother's variance, exact
    for this linear least-squares estimate; v <= V <= var): the noise of each fitted count. x is
    unbiased for the true counts.
    """
    y = np.asarray(y, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    Z, V = y.copy(), var.copy()
    starts = tree.level_bounds()
    leaf = tree.is_leaf
    child_sums = {}
    for d in range(tree.height, 0, -1):                       # bottom-up
        lo, hi = starts[d], starts[d + 1]
        plo, phi = starts[d - 1], starts[d]
        p = tree.parent[lo:hi] - plo
        sz = np.bincount(p, Z[lo:hi], minlength=phi - plo)
        sv = np.bincount(p, V[lo:hi], minlength=phi - plo)
        child_sums[d] = (sz, sv)
        own = var[plo:phi]
        internal = ~leaf[plo:phi]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = sv / (own + sv)                               # weight of the node's own count
            zc = w * y[plo:phi] + (1.0 - w) * sz
            vc = own * sv / (own + sv)
        Z[plo:phi] = np.where(internal, zc, Z[plo:phi])
        V[plo:phi] = np.where(internal, vc, V[plo:phi])
    X = Z.copy()
    P = V.copy()
    for d in range(1, tree.height + 1):                       # top-down
        lo, hi = starts[d], starts[d + 1]
        plo = starts[d - 1]
        p = tree.parent[lo:hi] - plo
        sz, sv = child_sums[d]
        resid = X[tree.parent[lo:hi]] - sz[p]
        X[lo:hi] = Z[lo:hi] + V[lo:hi] / sv[p] * resid
        g = V[lo:hi] / sv[p]
        P[lo:hi] = V[lo:hi] + g * g * (P[tree.parent[lo:hi]] - sv[p])
    return X, np.maximum(P, 0.0)


def _cells(regions: np.ndarray) -> np.ndarray:
    return (regions[:, 1] - regions[:, 0]) * (regions[:, 3] - regions[:, 2])


def nonnegative(tree: "Tree", x) -> np.ndarray:
    """Top-down non-negativity that keeps the tree consistent (post-processing of `consistent`).

    The root is clipped at 0. Then, level by level, a node's children are clipped at 0 and
    scaled to add up to the parent's (already non-negative) value; when every child clipped to 0
    and the parent is positive, the parent's value is split among its children in proportion to
    their numbers of base cells. So every value is >= 0, every internal node equals the sum of
    its children, and an input that is already non-negative and consistent comes back unchanged
    (up to rounding). Non-negativity as a post-processing step of hierarchical counts follows
    Hay et al. (VLDB 2010) and Cormode et al. (ICDE 2012); this proportional top-down form is a
    choice (it never moves mass across a node's boundary).
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.maximum(x, 0.0)
    starts = tree.level_bounds()
    cells = _cells(tree.regions).astype(np.float64)
    for d in range(1, tree.height + 1):
        lo, hi = starts[d], starts[d + 1]
        plo, phi = starts[d - 1], starts[d]
        par = tree.parent[lo:hi]
        p = par - plo
        c = out[lo:hi]                                        # children, clipped
        s = np.bincount(p, c, minlength=phi - plo)
        area = np.bincount(p, cells[lo:hi], minlength=phi - plo)
        parent = out[par]
        with np.errstate(invalid="ignore", divide="ignore"):
            scaled = c * (parent / s[p])
            by_area = parent * (cells[lo:hi] / area[p])
        out[lo:hi] = np.where(s[p] > 0, scaled, np.where(parent > 0, by_area, 0.0))
    return out


def zero_insignificant(tree: "Tree", x, sd, k: float) -> tuple[np.ndarray, np.ndarray]:
    """Zero every node whose estimate is below k standard deviations (x < k·sd), with its whole
    subtree: (new x, mask of the zeroed nodes).

    A node that cannot be told from an empty region at that level of significance is released
    as empty, down to its finest cells: the noise of the many empty cells of sparse data goes,
    at the price of a bias towards 0 on small true counts (the thresholding of hierarchical
    estimates as in Cormode et al., ICDE 2012, and Hay et al., VLDB 2010). Vectorised per level:
    a node is zeroed when it is insignificant or its parent was zeroed. The ancestors of a
    zeroed node keep their values, so the tree is no longer consistent until `redistribute`.
    """
    x = np.asarray(x, dtype=np.float64)
    z = x < float(k) * np.asarray(sd, dtype=np.float64)
    starts = tree.level_bounds()
    for d in range(1, tree.height + 1):
        lo, hi = starts[d], starts[d + 1]
        z[lo:hi] |= z[tree.parent[lo:hi]]
    return np.where(z, 0.0, x), z


PAINT_CELLS = 4         # a kept region of at most this many base cells (2 x 2) with no kept
                        # region inside it is painted uniformly over its cells


def redistribute(tree: "Tree", x, zeroed, paint_cells: int | None = PAINT_CELLS) -> np.ndarray:
    """Hand every parent's value down to the regions that carry mass, so the leaves add up to
    the root: (new estimate of every node).

    x: non-negative estimates (`nonnegative`); zeroed: `zero_insignificant`'s mask. A kept
    region whose children were all zeroed (an *orphan*) is *small* when it has at most
    `paint_cells` base cells (2 x 2 by default). Bottom-up, a kept node *carries* mass when it is
    a leaf, a small orphan, or has a child that carries; a kept node that does not (a larger
    orphan, or a node with only larger orphans below) is treated as zeroed. Top-down, a parent's
    value goes to its carrying children in proportion to their values, and a small orphan's
    value is painted over its cells in proportion to their numbers of cells, down to the
    leaves. So the zeroed regions' mass and a larger orphan's mass move to the carrying regions
    beside them inside the same parent, every internal node equals the sum of its children,
    and the leaves add up to the root's value. When a significant root has nothing below it
    that carries (thin spread-out data at small ε: no leaf and no small region significant),
    every orphan is painted whatever its size, so the released total is the root's estimate,
    not 0 (a 19,435-point uniform spread at ε 0.05 was released as all zeros in 19 of 20
    releases). Only a root that is itself insignificant gives an all-zero release.
    Post-processing.

    paint_cells=None is the earlier rule, kept for the quadtree's and kd-tree's `zero_sd`: each
    parent's value goes to its kept children in proportion, and an orphan keeps its value while
    its subtree stays 0 (its mass is lost from the leaves). On those trees the rule above was
    measured mixed, so it is not their setting (quadtree, `zero_sd` 1, seeds 1-3, ε 0.1:
    checkin 21.2 -> 21.8, BeijingTaxiS 10.7 -> 11.0; ε 1: cabspottingS 4.6 -> 4.3, city_200k
    2.5 -> 0.9; `benchmarks/README.md`).

    Measured with the full quadtree (`benchmarks/README.md`, its inference), peers.py's protocol,
    seeds 1-3, MRE % at ε 0.1 / 1, before -> now: checkin 9.6 / 3.8 -> 9.6 / 3.8, BeijingTaxiS
    5.6 / 1.0 -> 4.8 / 0.9, cabspottingS 18.2 / 6.6 -> 17.5 / 5.5, city_200k 63.0 / 26.7 ->
    39.4 / 4.3, small_city_5k 98.8 / 75.9 -> 98.8 / 58.1 (seeds 1-10 at seven ε: no worse on
    the matrices, within the seeds' spread). Before, an orphan kept its value while its cells
    stayed 0, so its mass was lost from the leaves: 1,397-1,609 of small_city_5k's 5,000 points
    were released at ε 1 (seeds 0-2), now 5,064-5,176. Painting every orphan, however large,
    is best on the samples (city_200k 17.7 / 1.6) but paints whole empty areas on the matrices
    (checkin at ε 0.1 16.3, BeijingTaxiS 14.0), and so does handing it down by the children's
    estimates before the zeroing (16.2, 11.3); painting up to 4 x 4 cells is better on the
    samples (36.9 / 2.3, 55.0 at ε 1) but has heavier tails on the matrices (the adaptive
    mechanism on BeijingTaxiS at ε 0.1, seeds 1-10: 6.7 against 4.9), up to 8 x 8 cells is
    worse there (checkin at ε 0.1 16.4).
    """
    if paint_cells is None:
        return _redistribute_to_kept(tree, x, zeroed)
    x = np.asarray(x, dtype=np.float64)
    kept = ~np.asarray(zeroed, dtype=bool)
    n = tree.n_nodes
    starts = tree.level_bounds()
    cells = _cells(tree.regions).astype(np.float64)
    kept_child = np.bincount(tree.parent[1:], kept[1:], minlength=n) > 0
    carries = kept & (tree.is_leaf | (~kept_child & (cells <= paint_cells)))
    for d in range(tree.height, 0, -1):                       # bottom-up
        lo, hi = starts[d], starts[d + 1]
        plo, phi = starts[d - 1], starts[d]
        below = np.bincount(tree.parent[lo:hi] - plo, carries[lo:hi], minlength=phi - plo) > 0
        carries[plo:phi] |= kept[plo:phi] & below
    top = slice(starts[0], starts[1])
    if np.any(kept[top] & ~carries[top]):       # a significant total that nothing below carries:
        return redistribute(tree, x, zeroed, math.inf)    # paint every orphan, lose nothing
    out = np.where(carries, x, 0.0)
    painted = carries & ~tree.is_leaf & ~kept_child           # small orphans, then their subtrees
    for d in range(1, tree.height + 1):                       # top-down
        lo, hi = starts[d], starts[d + 1]
        plo, phi = starts[d - 1], starts[d]
        par = tree.parent[lo:hi]
        p = par - plo
        c = out[lo:hi]
        s = np.bincount(p, c, minlength=phi - plo)[p]
        area = np.bincount(p, cells[lo:hi], minlength=phi - plo)[p]
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(s > 0, c / s, 0.0)
        paint = painted[par]
        out[lo:hi] = out[par] * np.where(paint, cells[lo:hi] / area, share)
        painted[lo:hi] |= paint
    return out


def _redistribute_to_kept(tree: "Tree", x, zeroed) -> np.ndarray:
    """`redistribute` with paint_cells=None: top-down, a parent's value goes to its kept
    children in proportion to their values; an orphan keeps its value, its subtree stays 0."""
    out = np.where(zeroed, 0.0, np.asarray(x, dtype=np.float64))
    starts = tree.level_bounds()
    for d in range(1, tree.height + 1):
        lo, hi = starts[d], starts[d + 1]
        plo, phi = starts[d - 1], starts[d]
        par = tree.parent[lo:hi]
        c = out[lo:hi]
        s = np.bincount(par - plo, c, minlength=phi - plo)[par - plo]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[lo:hi] = np.where(s > 0, c * (out[par] / s), 0.0)
    return out


def infer(tree: "Tree", y, var, zero_sd: float | None, paint_cells: int | None = PAINT_CELLS
          ) -> tuple[np.ndarray, np.ndarray]:
    """consistent -> nonnegative -> zero_insignificant at zero_sd standard deviations of each
    node's own noise (0: no zeroing) -> redistribute (with `paint_cells`); None: consistency
    alone (the trees' smoothing as published). Returns (estimate of every node, mask of zeroed
    nodes).

    The test is against the node's own count's noise (sqrt(var)), not the smaller variance of
    its least-squares estimate: measured on the DPBench matrices (seeds 1-3) this with
    redistribution cut the full quadtree's error 1.3-2.7 times (`benchmarks/README.md`)."""
    x, _ = consistent(tree, y, var)
    if zero_sd is None:
        return x, np.zeros(tree.n_nodes, dtype=bool)
    nn = nonnegative(tree, x)
    _, zeroed = zero_insignificant(tree, nn, np.sqrt(np.asarray(var, dtype=np.float64)), zero_sd)
    return redistribute(tree, nn, zeroed, paint_cells), zeroed
