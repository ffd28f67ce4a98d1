"""The HTF mechanism as the registry sees it: its release (leaves, tree facts, owner-only
diagnostics) and its MechanismSpec with the parameters a user can set."""
from __future__ import annotations

import time

import numpy as np

from ...postprocess import infer
from ..base import ADD_REMOVE_POINT, MechanismSpec, Param
from ..leaves import LeafRelease, base_shape, square_base_grid
from ..trees import Tree
from .growth import HTFTree, build
from .plan import DEFAULT_SPLIT, DEFAULT_SPLIT_RULE, SPLIT_RULES, _budget_parts
from .split import root_split_snr


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

    def features(self):
        table = super().features()
        if self.eps_final is not None:
            table.columns["eps_final"] = np.asarray(self.eps_final, dtype=np.float64)
        return table


# ------------------------------------------------------------------------------ post-processing
def infer_leaves(tree: HTFTree, zero_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """The leaves' counts after `dp.postprocess.infer` over every visited node: (counts, mask
    of the zeroed leaves).

    Every node's first noisy count (drawn at its height's budget, already paid for) and each
    leaf's released count are made consistent by least squares (Hay et al. 2010), non-negative
    from the top down, every node below zero_sd standard deviations of its own count's noise is
    zeroed with its subtree and each parent's value goes to its children that carry mass, so
    the leaves add up to the root's estimate. Post-processing: no privacy cost. An internal
    node's count was drawn and found above the stop count, so near that count it is biased
    upwards; dropping those counts from the fit (within 2 or 3 sd of the stop count) was
    measured no better.

    Measured (`benchmarks/README.md`, peers.py's protocol, midpoint rule, seeds 1-3, MRE % at
    ε 0.1 / 1, as published -> zero_sd 1): checkin 46.4 / 27.6 -> 38.0 / 27.4, BeijingTaxiS
    38.0 / 17.4 -> 24.0 / 17.3, cabspottingS 39.1 / 7.5 -> 26.4 / 7.1, city_200k 8.7 / 0.93 ->
    5.5 / 0.84, small_city_5k 46.1 / 15.5 -> 46.3 / 15.4.
    """
    t = Tree(tree.nodes[:, :4], tree.nodes[:, 4], tree.node_parent)
    y, var = tree.node_y.copy(), tree.node_var.copy()
    y[tree.leaf_node], var[tree.leaf_node] = tree.counts, tree.leaf_var
    x, zeroed = infer(t, y, var, zero_sd)
    return x[tree.leaf_node], zeroed[tree.leaf_node]


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
    counts, leaf_var = tree.counts, tree.leaf_var
    if params["zero_sd"] > 0:                 # counts fitted jointly: no per-leaf variance
        counts, zeroed = infer_leaves(tree, params["zero_sd"])
        leaf_var = leaf_scale = None
        diagnostics["leaves_zeroed"] = int(zeroed.sum())
    return HTFRelease(HTF, domain, epsilon, effective, params, tree.ledger, base, tree.leaves,
                      counts, leaf_var=leaf_var, eps_path=tree.eps_path,
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
        Param("zero_sd", float, 0.0, "Zero below (standard deviations)",
              "Improvement, off in the paper: the noisy counts of every region the tree "
              "visited (already paid for) are made consistent with the leaves by least "
              "squares, made non-negative from the top down, a region whose estimate is below "
              "this many standard deviations of its own count's noise is released as empty and "
              "its parent's count goes to the regions beside it that were kept, so the total "
              "stays. Post-processing: no privacy cost. 0 = off, as published. 1 cut the error "
              "on the mostly empty DPBench matrices at ε 0.1 (checkin 46.4% to 38.0%, "
              "BeijingTaxiS 38.0% to 24.0%, cabspottingS 39.1% to 26.4%) and on a 200,000-point "
              "city (8.7% to 5.5%); at ε 1 it changed little (27.6% to 27.4% on checkin), and "
              "on a 5,000-point city at ε 0.1 it was 46.3% against 46.1%, so it is not the "
              "default.", min=0.0, max=10.0),
    ),
    budget_parts=("height", "partition", "counts"), default_split=DEFAULT_SPLIT,
    finest_grid=base_shape, release=release_htf)

SPECS = (HTF,)
