"""Full quadtree with inference ("mechanism A"): every level of a quadtree from the whole box down
to single base cells gets noisy counts, then least-squares consistency, non-negativity and
significance zeroing, all post-processing (`dp.postprocess`).

- Tree: `quadtree_partition(base.shape, h_max)`, data-independent, down to single cells (nodes
  of one cell stop early, as in the quadtree).
- Budgets: ε_d ∝ ratio^d at depth d (root d = 0), normalised so that Σ_d ε_d = ε: a point lies
  in exactly one node per level, so by sequential composition over the levels (parallel within a
  level) the release is ε-DP; a node of one cell that stops early also gets the budgets of the
  levels below it (`node_budgets`), so every root-to-cell path spends ε. Geometric budgets
  growing with depth as in Cormode et al. (ICDE 2012), whose optimum for a quadtree is
  ratio 4^(1/3) ≈ 1.59; 1.7 was measured best with the inference below.
- Counts: exact integer counts + discrete Laplace(1/ε_node), one ledger entry per level.
- Then `dp.postprocess.infer`: `consistent` (Hay et al., VLDB 2010), `nonnegative` (top-down),
  `zero_insignificant` (a node whose estimate is below zero_sd standard deviations of its own
  count's noise is zeroed with its subtree) and `redistribute` (each parent's value goes to its
  children that carry mass; a kept region of at most 2 x 2 cells whose children were all zeroed
  is painted uniformly over its cells, a larger one's value goes to the regions beside it, and
  when nothing below a significant root carries, every such region is painted), so the leaves
  add up to the root's estimate and thin spread-out data are never released as all zeros. The leaves (single cells) are released. The dataset
  size is never used.
"""
from __future__ import annotations

import math

import numpy as np

from ..budget import Ledger
from ..postprocess import infer
from ..summed_area import summed_area
from .base import ADD_REMOVE_POINT, MechanismSpec, Param
from .leaves import LeafRelease, base_shape, square_base_grid
from .trees import (GUARANTEE_UNIT, Tree, _max_quad_height, noisy_node_counts, quadtree_partition,
                    tree_draws, zero_sd_param)


def depth_budgets(h: int, eps: float, ratio: float) -> np.ndarray:
    """ε per depth d = 0 (root) .. h, ε_d ∝ ratio^d, summing to eps (last-bit rounding of the
    sum cancelled so the ledger adds up)."""
    d = np.arange(h + 1, dtype=np.float64)
    E = float(ratio) ** d
    E = E * (eps / math.fsum(E))
    return E * (eps / math.fsum(E))


def full_quadtree_counts(ledger: Ledger, rng, S: np.ndarray, shape, eps: float, ratio: float
                         ) -> tuple[Tree, np.ndarray, np.ndarray, np.ndarray]:
    """The only step that reads the data: the full tree on `shape` and its noisy counts, charged
    one ledger entry per level. Returns (tree, ε per depth, integer noisy counts, variances)."""
    tree = quadtree_partition(shape, _max_quad_height(shape))
    h = tree.height
    E_depth = depth_budgets(h, eps, ratio)
    y, var = noisy_node_counts(ledger, rng, tree, S, E_depth[::-1].copy(), "full quadtree",
                               extra=f"; ε per level ∝ {ratio:g}^depth, summing to ε along "
                                     "every root-to-cell path")
    return tree, E_depth, y, var


def release_full_quadtree(data, domain, epsilon, split, params, rng):
    base = square_base_grid(domain, params["base_cells"])
    S = summed_area(data.histogram(base), whole=True)
    ledger = Ledger()
    tree, E_depth, y, var = full_quadtree_counts(ledger, rng, S, base.shape, epsilon * split[0],
                                                 params["ratio"])
    x, zeroed = infer(tree, y, var, params["zero_sd"])
    leaf = tree.is_leaf
    return LeafRelease(FULL_QUADTREE, domain, epsilon, split, params, ledger, base,
                       tree.regions[leaf], x[leaf], leaf_var=None,
                       eps_path=np.full(int(leaf.sum()), epsilon), nodes=tree.nodes(),
                       draws=tree_draws(tree, y, E_depth[::-1].copy()),
                       diagnostics={"height": tree.height, "n_nodes": tree.n_nodes,
                                    "level_eps": E_depth.tolist(),
                                    "nodes_zeroed": int(zeroed.sum()),
                                    "leaves_zeroed": int(zeroed[leaf].sum())})


FULL_QUADTREE = MechanismSpec(
    name="full_quadtree", label="Full quadtree + inference (Hay, Cormode)",
    description="Noisy counts at every level of a quadtree, from the whole box down to single "
                "base cells, with more ε on the finer levels (Cormode et al. 2012); then the "
                "levels are made consistent by least squares (Hay et al. 2010), made "
                "non-negative from the top down, every region whose estimate is not "
                "significantly above zero is released as empty, and its parent's count goes to "
                "its siblings that were kept (a small significant region with nothing "
                "significant inside is spread evenly over its cells), so the total is kept. The "
                "single cells are released. Made for large data concentrated in part of the "
                "box; where points spread thinly over the box, few regions are significant and "
                "the count is placed coarsely (see its setting).",
    guarantee=f"{GUARANTEE_UNIT}: the tree does not look at the data, every level's counts get "
              "discrete Laplace noise with ε_d ∝ ratio^depth, and a point lies in one node per "
              "level, so the budgets along any root-to-cell path add up to ε. Consistency, "
              "non-negativity and zeroing are post-processing. The dataset size N is never "
              "used, so it costs nothing.",
    unit=ADD_REMOVE_POINT,
    params=(Param("base_cells", int, 256, "Base grid (cells on the longer side)",
                  "The fixed public grid all regions are made of; cells are square in metres. The "
                  "tree goes all the way down to single cells, so its size and depth follow this: "
                  "256 (87,381 nodes, 9 levels) is the setting measured on the DPBench matrices; "
                  "1024 as in the other trees would spread ε over 11 levels and 1.4 million "
                  "nodes, with more noise per level and 16 times the work.", min=8, max=4096),
            Param("ratio", float, 1.7, "Budget ratio per level",
                  "ε of a level is this many times the ε of the level above it (1 = the same at "
                  "every level); 4^(1/3) ≈ 1.59 minimises the total variance of a quadtree "
                  "(Cormode et al. 2012) before inference; 1.7 was measured best with it on "
                  "the DPBench matrices (1.5 and 1.9 close, 2.1 worse).", min=1.0, max=4.0),
            zero_sd_param(1.5, "no zeroing (non-negativity still applies)",
                          "1.5 measured best on the DPBench matrices (millions of points; 1.25 "
                          "and 1.75 close, 1 worse on BeijingTaxiS). Where points spread thinly "
                          "over the box, zeroing places their count coarsely (a 5,000-point city "
                          "sample at ε = 1: 58% mean relative error against 25% with 0): use 0 "
                          "there.")),
    budget_parts=("counts",), default_split=(1.0,),
    finest_grid=base_shape, release=release_full_quadtree)


SPECS = (FULL_QUADTREE,)
