"""Tree competitors of HTF (spec 003 section 5.3): the quadtree and kd-tree here, with the tree
machinery AG (`ag`), PrivTree (`privtree`) and the full quadtree share.

Every mechanism here releases a LeafRelease on a public base grid (`base_cells` cells on the
longer side, cells square in metres). Node regions are half-open cell ranges [r0, r1) x [c0, c1)
with row 0 = south (spec 003 section 2). Exact counts of any region come from one 2-D prefix sum
of the base matrix, so nothing loops over points or cells; loops run over tree levels only.

Conventions shared by the trees (decisions the sources leave open are marked "choice"):

- Neighbours: add/remove one point; a count has sensitivity 1. The dataset size N is not
  public: where a rule needs it (automatic height, AG's first grid) a noisy size
  N + discrete Laplace(1/ε_size) is drawn with its own share of ε and released.
- Counts are integers and get integer (discrete Laplace) noise, so no float bit depends on the
  data. Noisy counts are kept raw (negative values included, spec 003 section 6 item 19).
- depth: root = 0. height = h - depth, where h is the tree height; budgets are indexed by height.
- A node that cannot be split any further (one base cell) stops early. Its count then gets the
  budget of every level below it, so each root-to-leaf path spends exactly the counts budget
  (choice; the same rule as HTF's pruned leaves).
- Smoothing is the inverse-variance (least-squares) consistency of Hay et al. for any tree:
  bottom-up Z_v = w Y_v + (1 - w) sum Z_u with w = (1/var_v) / (1/var_v + 1/sum V_u), then
  top-down x_u = Z_u + V_u / sum V_w (x_v - sum Z_w). With a uniform fanout f, per-height
  budgets and variances proportional to 1/eps^2 this is exactly spec 003's
  alpha_j = f^j eps_j^2 / E_j and the 1/f share of the residual; the general form also covers
  thin nodes with fewer children, early leaves, and the discrete Laplace variances used here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..budget import Ledger, geometric_budgets
from ..errors import ParameterError
from ..noise import count_noise, discrete_laplace_variance
from ..partition_bounds import NodeDraws
from ..postprocess import infer
from ..summed_area import box_sums, summed_area
from .base import ADD_REMOVE_POINT, MechanismSpec, Param
from .leaves import LeafRelease, base_shape, square_base_grid

SIZE_PART = "dataset size"
GUARANTEE_UNIT = (f"ε-differential privacy, unit of privacy: {ADD_REMOVE_POINT} (neighbouring "
                  "datasets differ by one point, added or removed)")


# ============================================================================ shared machinery
def uniform_budgets(h: int, eps: float) -> np.ndarray:
    """E[i] = eps / (h + 1) at every height."""
    return np.full(h + 1, eps / (h + 1))


def level_budgets(h: int, eps: float, mode: str, fanout: int) -> np.ndarray:
    if mode == "geometric":
        return geometric_budgets(h, eps, fanout)
    if mode == "uniform":
        return uniform_budgets(h, eps)
    raise ParameterError(f"count budget must be 'geometric' or 'uniform', got {mode!r}")


@dataclass
class Tree:
    """Nodes in breadth-first order (depth non-decreasing); parent = -1 for the root."""

    regions: np.ndarray   # (K, 4) int64 [r0, r1, c0, c1)
    depth: np.ndarray     # (K,) int64
    parent: np.ndarray    # (K,) int64

    @property
    def n_nodes(self) -> int:
        return len(self.depth)

    @property
    def is_leaf(self) -> np.ndarray:
        has_child = np.zeros(self.n_nodes, dtype=bool)
        has_child[self.parent[self.parent >= 0]] = True
        return ~has_child

    @property
    def height(self) -> int:
        return int(self.depth.max())

    def level_bounds(self) -> np.ndarray:
        """starts[d] .. starts[d + 1] is the index range of the nodes at depth d."""
        return np.searchsorted(self.depth, np.arange(self.height + 2))

    def nodes(self) -> np.ndarray:
        """(K, 5) [r0, r1, c0, c1, depth] for LeafRelease.nodes."""
        return np.column_stack([self.regions, self.depth])


class _TreeBuilder:
    """Collects one level of nodes at a time (breadth-first)."""

    def __init__(self, shape):
        gy, gx = shape
        self.levels = [np.array([[0, gy, 0, gx]], dtype=np.int64)]
        self.parents = [np.array([-1], dtype=np.int64)]
        self.offset = 0          # global index of the first node of the last level

    @property
    def frontier(self) -> np.ndarray:
        return self.levels[-1]

    def add_level(self, children: np.ndarray, parent_local: np.ndarray):
        self.parents.append(self.offset + np.asarray(parent_local, dtype=np.int64))
        self.offset += len(self.levels[-1])
        self.levels.append(np.asarray(children, dtype=np.int64).reshape(-1, 4))

    def tree(self) -> Tree:
        depth = np.concatenate([np.full(len(l), d, dtype=np.int64) for d, l in enumerate(self.levels)])
        return Tree(np.concatenate(self.levels), depth, np.concatenate(self.parents))


def splittable(regions: np.ndarray) -> np.ndarray:
    """A node can be split while it has more than one base cell."""
    return (regions[:, 1] - regions[:, 0] > 1) | (regions[:, 3] - regions[:, 2] > 1)


def quad_children(regions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """4-way split at the middle row and column (children SW, SE, NW, NE; empty ones dropped).

    The southern/western child gets floor(U/2) rows / floor(V/2) columns; a side of one cell is
    not split, so thin nodes get 2 children. Returns (children, index of each child's parent).
    """
    r0, r1, c0, c1 = regions.T
    U, V = r1 - r0, c1 - c0
    rm = np.where(U > 1, r0 + U // 2, r1)
    cm = np.where(V > 1, c0 + V // 2, c1)
    ch = np.stack([np.column_stack([r0, rm, c0, cm]), np.column_stack([r0, rm, cm, c1]),
                   np.column_stack([rm, r1, c0, cm]), np.column_stack([rm, r1, cm, c1])], axis=1)
    par = np.repeat(np.arange(len(regions)), 4)
    ch = ch.reshape(-1, 4)
    keep = (ch[:, 1] > ch[:, 0]) & (ch[:, 3] > ch[:, 2])
    return ch[keep], par[keep]


def node_budgets(tree: Tree, h: int, E: np.ndarray) -> np.ndarray:
    """Count budget of every node: E[h - depth], and for a leaf all budget left on its path."""
    height = h - tree.depth
    eps = E[height].copy()
    cum = np.cumsum(E)                     # cum[i] = E[0] + ... + E[i]
    leaf = tree.is_leaf
    eps[leaf] = cum[height[leaf]]
    return eps


def noisy_node_counts(ledger: Ledger, rng, tree: Tree, S: np.ndarray, E: np.ndarray, what: str,
                      extra: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Charge one entry per level (root first), then draw every node's exact count + discrete
    Laplace(1/ε_node) in the same call: (integer noisy counts, their variances). A leaf that
    stops above the bottom level also gets the budgets of the levels below it (`node_budgets`).
    """
    h = tree.height
    eps_node = node_budgets(tree, h, E)
    for i in range(h, -1, -1):
        ledger.charge(f"{what} counts, height {i} (depth {h - i})", float(E[i]), 1.0,
                      "discrete laplace", 1.0 / float(E[i]),
                      note="discrete Laplace(1/ε_i) on every node of the level; the nodes of a "
                      "level are disjoint" + ("; leaves that stop early also get the budget of "
                      "the levels below them" if i == 0 else "") + (extra if i == h else ""))
    y = box_sums(S, tree.regions) + count_noise(rng, eps_node)
    return y, discrete_laplace_variance(1.0 / np.asarray(eps_node, dtype=np.float64))


def tree_draws(tree: Tree, y: np.ndarray, E: np.ndarray) -> NodeDraws:
    """The nodes' own draws of `noisy_node_counts(..., tree, S, E, ...)`, for the ranges."""
    return NodeDraws(tree.regions, tree.parent, np.asarray(y), 1.0 / node_budgets(tree, tree.height, E),
                     tree.is_leaf)


def _base(data, domain, params):
    base = square_base_grid(domain, params["base_cells"])
    F = data.histogram(base)
    return base, F, summed_area(F, whole=True)


def _auto_height(n: int, epsilon: float, per_level_bits: float, h_max: int) -> int:
    """floor(log2(N̂ eps / 10) / bits), clamped to [1, h_max]: HTF's height rule on a noisy size N̂."""
    x = max(n * epsilon / 10.0, 1.0)
    return int(min(max(math.floor(math.log2(x) / per_level_bits + 1e-12), 1), h_max))


def _max_quad_height(shape) -> int:
    return max(1, math.ceil(math.log2(max(shape))))


def _max_kd_height(shape) -> int:
    gy, gx = shape
    return max(1, math.ceil(math.log2(gy)) + math.ceil(math.log2(gx)))


def _size_or_counts(ledger, rng, S, epsilon, split, height, purpose):
    """(noisy size or None, ε left for the counts, note): a fixed height needs no size, and its
    share of ε then goes to the counts, so the ledger still sums to ε."""
    if height:
        return None, epsilon * split[0], (f"; the height is fixed, so the dataset-size share "
                                          f"({100 * split[0]:.3g}% of ε) is spent on the counts")
    return ledger.noisy_size(rng, round(S[-1, -1]), epsilon * split[0], purpose), 0.0, ""


P_BASE = Param("base_cells", int, 1024, "Base grid (cells on the longer side)",
               "The fixed public grid all regions are made of; cells are square in metres. 1024 "
               "as in the HTF paper; fewer cells run faster.", min=8, max=4096)


def zero_sd_param(default: float, zero: str, measured: str) -> Param:
    """The `zero_sd` setting of the trees whose every node is noised (`dp.postprocess.infer`);
    `zero` says what 0 means for that tree."""
    return Param("zero_sd", float, default, "Zero below (standard deviations)",
                 "After consistency, the estimates are made non-negative from the top down and a "
                 "region whose estimate is below this many standard deviations of its own "
                 "count's noise is released as empty, with everything inside it, its parent's "
                 "count going to the regions beside it that were kept: removes the noise of empty "
                 f"areas at the price of dropping small true counts. 0 = {zero}. " + measured,
                 min=0.0, max=10.0)


P_ZERO = zero_sd_param(0.0, "off (consistency only, as published)", "0 as published. 1 cut the quadtree's error 8-43 times on the "
                             "mostly empty DPBench matrices (checkin at ε 0.1: 21.2% against "
                             "209.9%) and raised it on a city spread over its box (0.8% to "
                             "2.5% at ε 1); the kd-tree changed little.")
P_BUDGET = Param("budget", str, "geometric", "Count budget per level",
                 "geometric: more ε near the leaves, ε_i ∝ f^((h−i)/3) (least total noise "
                 "variance over all nodes); uniform: the same ε at every level.",
                 choices=("geometric", "uniform"))


# ================================================================================== quadtree
def quadtree_partition(shape, h: int) -> Tree:
    """Data-independent quadtree of height h on the base grid (nodes of one cell stop early)."""
    b = _TreeBuilder(shape)
    for _ in range(h):
        f = b.frontier
        idx = np.flatnonzero(splittable(f))
        if idx.size == 0:
            break
        ch, par = quad_children(f[idx])
        b.add_level(ch, idx[par])
    return b.tree()


def release_quadtree(data, domain, epsilon, split, params, rng):
    base, F, S = _base(data, domain, params)
    h_max = _max_quad_height(base.shape)
    ledger = Ledger()
    n_hat, eps_moved, extra = _size_or_counts(ledger, rng, S, epsilon, split, params["height"],
                                              "sets the tree height")
    h = params["height"] or _auto_height(max(n_hat, 1), epsilon, 2.0, h_max)
    tree = quadtree_partition(base.shape, min(h, h_max))
    h = tree.height
    eps_counts = epsilon * split[1] + eps_moved
    E = level_budgets(h, eps_counts, params["budget"], 4)
    y, var = noisy_node_counts(ledger, rng, tree, S, E, "quadtree", extra)
    x, _ = infer(tree, y, var, params["zero_sd"] or None,   # 0: as published
                 paint_cells=None)    # the earlier redistribution (postprocess.redistribute)
    leaf = tree.is_leaf
    return LeafRelease(QUADTREE, domain, epsilon, split, params, ledger, base, tree.regions[leaf],
                       x[leaf], leaf_var=None, eps_path=np.full(leaf.sum(), epsilon),
                       nodes=tree.nodes(), noisy_size=n_hat, draws=tree_draws(tree, y, E),
                       diagnostics={"height": h, "n_nodes": tree.n_nodes, "level_eps": E.tolist()})


QUADTREE = MechanismSpec(
    name="quadtree", label="Quadtree (Cormode et al.)",
    description="Splits every region into four equal quarters down to a fixed height, adds "
                "discrete Laplace noise to the count of every node, then makes the levels "
                "consistent (Cormode et al. 2012; smoothing of Hay et al. 2010). The leaves are "
                "released.",
    guarantee=f"{GUARANTEE_UNIT}, with ε = ε_size + ε_counts: the splits do not look at the "
              "data, and the count budgets along any root-to-leaf path add up to ε_counts. The "
              "dataset size N is not public: with automatic height a noisy dataset size (5% of ε "
              "by default) sets the height; with a fixed height N is not used and that share "
              "goes to the counts.",
    unit=ADD_REMOVE_POINT,
    params=(P_BASE,
            Param("height", int, 0, "Tree height (0 = automatic)",
                  "Levels of 4-way splits below the root. 0 picks ⌊log₂(N̂·ε/10)/2⌋, N̂ a noisy "
                  "dataset size, so there are about N̂·ε/10 leaves as in the UG rule.",
                  min=0, max=12),
            P_BUDGET, P_ZERO),
    budget_parts=(SIZE_PART, "counts"), default_split=(0.05, 0.95),
    finest_grid=base_shape, release=release_quadtree)


# =================================================================================== kd-tree
def kd_split_positions(S, regions, use_x, noise) -> np.ndarray:
    """Private median split k (cells in the first child) of every region: report noisy max.

    Candidates k = 1 .. n - 1 along the axis, integer utility w(k) = -|2 first(k) - n_node| with
    the exact counts. Adding or removing a point in the node changes 2 first(k) - n_node by
    exactly 1, so w has sensitivity 1, and the k with the largest w(k) + discrete Laplace(2/eps_m)
    (lowest k on ties) is eps_m-DP: the usual report-noisy-max proof, with noise of scale
    2 Delta / eps for a utility that is not monotone, holds for integer noise and a fixed
    tie-break, since for fixed other draws k wins iff its draw reaches an integer threshold that
    moves by at most 2 between neighbours. Nodes of a level are disjoint (parallel composition);
    all regions are done at once with a segment argmax. `noise(size)` draws discrete
    Laplace(2/eps_m), charged by the caller's ledger (`Ledger.noise_source`).
    """
    r0, r1, c0, c1 = regions.T
    n_ax = np.where(use_x, c1 - c0, r1 - r0)
    lens = n_ax - 1
    seg = np.repeat(np.arange(len(regions)), lens)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    k = np.arange(lens.sum()) - np.repeat(starts, lens) + 1
    ux = use_x[seg]
    rhi = np.where(ux, r1[seg], r0[seg] + k)
    chi = np.where(ux, c0[seg] + k, c1[seg])
    first = S[rhi, chi] - S[r0[seg], chi] - S[rhi, c0[seg]] + S[r0[seg], c0[seg]]
    n_node = box_sums(S, regions)
    score = -np.abs(2 * first - n_node[seg]) + noise(seg.size)
    order = np.lexsort((-score, seg))      # stable: within a node, the lowest k wins ties
    return k[order[starts]]


def kd_axis(regions, height: int) -> np.ndarray:
    """True for an x-split (columns): axis = height mod 2 with 0 = x as in HTF; a side of one
    cell forces the other axis."""
    U = regions[:, 1] - regions[:, 0]
    V = regions[:, 3] - regions[:, 2]
    want_x = height % 2 == 0
    return (V > 1) & (want_x | (U <= 1))


def kdtree_partition(S, shape, noise) -> Tree:
    """kd-tree of height len(noise) with private medians: noise[d] draws the median noise of
    depth d (the nodes of a level are disjoint)."""
    b = _TreeBuilder(shape)
    h = len(noise)
    for d in range(h):
        f = b.frontier
        idx = np.flatnonzero(splittable(f))
        if idx.size == 0:
            break
        reg = f[idx]
        use_x = kd_axis(reg, h - d)
        k = kd_split_positions(S, reg, use_x, noise[d])
        r0, r1, c0, c1 = reg.T
        first = np.where(use_x[:, None], np.column_stack([r0, r1, c0, c0 + k]),
                         np.column_stack([r0, r0 + k, c0, c1]))
        second = np.where(use_x[:, None], np.column_stack([r0, r1, c0 + k, c1]),
                          np.column_stack([r0 + k, r1, c0, c1]))
        ch = np.stack([first, second], axis=1).reshape(-1, 4)
        b.add_level(ch, np.repeat(idx, 2))
    return b.tree()


def release_kdtree(data, domain, epsilon, split, params, rng):
    base, F, S = _base(data, domain, params)
    h_max = _max_kd_height(base.shape)
    ledger = Ledger()
    n_hat, eps_moved, extra = _size_or_counts(ledger, rng, S, epsilon, split, params["height"],
                                              "sets the tree height")
    h = min(params["height"] or _auto_height(max(n_hat, 1), epsilon, 1.0, h_max), h_max)
    eps_prt, eps_counts = epsilon * split[1], epsilon * split[2] + eps_moved
    eps_m = eps_prt / h
    noise = [ledger.noise_source(rng, f"kd-tree medians, depth {d}", eps_m, 1.0, 2.0 / eps_m,
                                 note="report noisy max over the split positions of every node "
                                      "of the level: utility −|2·(first-child count) − (node "
                                      "count)| (sensitivity 1) + discrete Laplace(2/ε_m); "
                                      "partition budget spread evenly over the levels")
             for d in range(h)]
    tree = kdtree_partition(S, base.shape, noise)
    ht = tree.height          # = h unless every node became a single cell earlier
    E = level_budgets(ht, eps_counts, params["budget"], 2)
    y, var = noisy_node_counts(ledger, rng, tree, S, E, "kd-tree", extra)
    x, _ = infer(tree, y, var, params["zero_sd"] or None,   # 0: as published
                 paint_cells=None)    # the earlier redistribution (postprocess.redistribute)
    leaf = tree.is_leaf
    eps_path = epsilon - eps_prt + eps_m * tree.depth[leaf]
    return LeafRelease(KDTREE, domain, epsilon, split, params, ledger, base, tree.regions[leaf],
                       x[leaf], leaf_var=None, eps_path=eps_path, nodes=tree.nodes(),
                       noisy_size=n_hat, draws=tree_draws(tree, y, E),
                       diagnostics={"height": h, "n_nodes": tree.n_nodes, "level_eps": E.tolist(),
                                    "median_eps_per_level": eps_m})


KDTREE = MechanismSpec(
    name="kdtree", label="kd-tree (Cormode et al.)",
    description="Splits regions in two at a privately chosen median, alternating x and y, to a "
                "fixed height; then noisy counts at every node made consistent (Cormode et al. "
                "2012; smoothing of Hay et al. 2010). The leaves are released.",
    guarantee=f"{GUARANTEE_UNIT}, with ε = ε_size + ε_medians + ε_counts: the medians use "
              "report noisy max with discrete Laplace noise (ε_medians spread over the levels) "
              "and the count budgets along any root-to-leaf path add up to ε_counts. The "
              "dataset size N is not public: with automatic height a noisy dataset size (5% of ε "
              "by default) sets the height; with a fixed height N is not used and that share "
              "goes to the counts.",
    unit=ADD_REMOVE_POINT,
    params=(P_BASE,
            Param("height", int, 0, "Tree height (0 = automatic)",
                  "Levels of 2-way splits below the root. 0 picks ⌊log₂(N̂·ε/10)⌋, HTF's height "
                  "rule on a noisy dataset size N̂.", min=0, max=24),
            P_BUDGET, P_ZERO),
    budget_parts=(SIZE_PART, "medians", "counts"), default_split=(0.05, 0.15, 0.80),
    finest_grid=base_shape, release=release_kdtree)


SPECS = (QUADTREE, KDTREE)
