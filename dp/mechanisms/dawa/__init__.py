"""DAWA for 2-D points (Li, Hay & Miklau, "A Data- and Workload-Aware Algorithm for Range
Queries Under Differential Privacy", PVLDB 2014), as DPBench runs it: the histogram of a public
2^k x 2^k base grid read in Hilbert order, then DAWA's two steps on that vector.

1. Partition (ε1 = split[0]·ε): buckets are aligned dyadic Hilbert intervals (aligned squares and
   2:1 halves of squares, so every bucket is one rectangle of the base grid) chosen to minimise
   Σ (noisy deviation + 1/ε2); see `partition` for the candidates and the sensitivity.
2. Estimation (ε2 = split[1]·ε): the bucket counts are measured with a hierarchical strategy
   (GreedyH, weighted for the workload, or H2 with the same weight per level), integer discrete
   Laplace noise on every measured count, and fitted by least squares; each bucket's estimate is
   spread evenly over its cells. See `greedyh`.
3. Post-processing (`zero_sd`, 1 by default; 0 = as published): the fit made non-negative down
   the hierarchy, groups below zero_sd sd of their own count's noise released as empty and their
   count handed to the kept neighbouring buckets (`zero_groups`). Measured with peers.py's
   protocol, seeds 1-3, MRE % at ε 0.1 / 1, published -> 1: checkin 56.4 / 5.3 -> 39.0 / 4.6,
   BeijingTaxiS 88.8 / 11.1 -> 83.4 / 10.1, cabspottingS 60.3 / 8.0 -> 46.8 / 5.5, city_200k
   7.97 / 1.17 -> 7.94 / 1.15, small_city_5k 71.9 / 14.3 -> 71.8 / 14.3 (benchmarks/README.md).

The workload is public: random rectangles (`random_workload`, drawn from the workload seed) or a
list of rectangles given to `release_for_workload`. It reads no data. The dataset size is never
used. The release is a LeafRelease whose leaves are the buckets; the counts are fitted jointly,
so no per-answer variance is stated (NaN), as for the quadtree.
"""
from __future__ import annotations

import numpy as np

from ...budget import Ledger
from ...domain import UniformGrid
from ...errors import ParameterError
from ...noise import count_noise, discrete_laplace_variance
from ...partition_bounds import NodeDraws
from ...postprocess import nonnegative, redistribute, zero_insignificant
from ...queries import as_rect_array, random_workload
from ..base import ADD_REMOVE_POINT, MechanismSpec, Param
from ..leaves import LeafRelease
from ..trees import Tree
from . import greedyh, hilbert, partition
from .greedyh import STRATEGIES, StrategyTree, greedyh_tree, h2_tree, least_squares
from .hilbert import hilbert_cells, interval_rects
from .partition import SHAPES, best_partition, candidate_levels, noisy_deviations

BASE_SIDES = (8, 16, 32, 64, 128, 256, 512, 1024)


class DawaRelease(LeafRelease):
    """DAWA's buckets as leaves; the metadata also says which public workload shaped them."""

    def __init__(self, *args, workload_info: dict, **kw):
        super().__init__(*args, **kw)
        self.workload_info = workload_info

    def metadata(self) -> dict:
        meta = super().metadata()
        meta["workload"] = dict(self.workload_info)
        return meta

    def describe(self) -> str:
        return f"{self.n_leaves:,} DAWA buckets"


def workload_cells(rects, domain, side: int) -> np.ndarray:
    """Rectangles [west, south, east, north] as fractional base-cell coordinates
    [x0, y0, x1, y1] on the side x side grid, clipped to it."""
    r = as_rect_array(rects)
    x = np.clip((r[:, [0, 2]] - domain.west) / domain.width * side, 0, side)
    y = np.clip((r[:, [1, 3]] - domain.south) / domain.height * side, 0, side)
    return np.column_stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]])


def coverage(qc: np.ndarray, rects: np.ndarray) -> np.ndarray:
    """(|Q|, B) fraction of each bucket rectangle [r0, r1, c0, c1) inside each query (cell units)."""
    r0, r1, c0, c1 = (rects[None, :, i].astype(np.float64) for i in range(4))
    x0, y0, x1, y1 = (qc[:, i, None] for i in range(4))
    oy = np.clip(np.minimum(r1, y1) - np.maximum(r0, y0), 0.0, None)
    ox = np.clip(np.minimum(c1, x1) - np.maximum(c0, x0), 0.0, None)
    return oy * ox / ((r1 - r0) * (c1 - c0))


def strategy_tree(name: str, qc: np.ndarray, rects: np.ndarray) -> StrategyTree:
    """The measurement tree over the buckets: GreedyH for the workload `qc`, or H2."""
    if name == "h2":
        return h2_tree(len(rects))
    if name == "greedyh":
        return greedyh_tree(lambda lo, hi: coverage(qc, rects[lo:hi]), len(rects))
    raise ParameterError(f"strategy must be one of {list(STRATEGIES)}, got {name!r}")


def hilbert_nodes(k: int, starts, levels, step: int) -> np.ndarray:
    """(K, 5) [r0, r1, c0, c1, depth] of the partition tree: every candidate that holds a bucket
    (the buckets and their ancestors), depth = (2k − level) / step, for the growth view."""
    lvl_cell = np.repeat(levels, 1 << levels)                       # bucket level of each cell
    out = []
    for lvl in range(2 * k, -1, -step):
        j = np.flatnonzero(lvl_cell[:: 1 << lvl] <= lvl)
        rect = interval_rects(k, j << lvl, np.full(j.size, 1 << lvl))
        out.append(np.column_stack([rect, np.full(j.size, (2 * k - lvl) // step)]))
    return np.concatenate(out)


def zero_groups(tree: StrategyTree, x, var, area, zero_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """The strategy tree's least-squares estimates x made non-negative and cleared of
    insignificant groups: (new estimate of every node, mask of the zeroed nodes).

    Post-processing of the released noisy counts (`dp.postprocess`): top-down non-negativity,
    then every node whose estimate is below zero_sd standard deviations of its own count's noise
    (sqrt(var); an unmeasured node, var = inf, is never zeroed by its own test) is zeroed with
    its subtree, and each parent's value goes to its children that carry mass
    (`redistribute`: the zeroed mass moves to the neighbouring buckets in Hilbert order inside
    the same parent, a kept group of at most 4 base cells with every child zeroed is painted
    over its cells). `area`: base cells of each bucket. zero_sd 0: non-negativity alone.
    """
    acum = np.concatenate([[0.0], np.cumsum(np.asarray(area, dtype=np.float64))])
    cells = (acum[tree.hi] - acum[tree.lo]).astype(np.int64)
    zeros = np.zeros(tree.n_nodes, dtype=np.int64)
    # each node as a strip of its number of base cells: the post-processing reads only the
    # cell counts of the regions, and the tree structure
    t = Tree(np.column_stack([zeros, cells, zeros, zeros + 1]), tree.depth.astype(np.int64),
             tree.parent.astype(np.int64))
    nn = nonnegative(t, x)
    if not zero_sd > 0:
        return nn, np.zeros(tree.n_nodes, dtype=bool)
    sd = np.where(np.isfinite(var), np.sqrt(np.where(np.isfinite(var), var, 0.0)), 0.0)
    _, zeroed = zero_insignificant(t, nn, sd, zero_sd)
    return redistribute(t, nn, zeroed), zeroed


def measured_draws(tree: StrategyTree, y, eps_node, buckets) -> NodeDraws | None:
    """The measured nodes' own draws for the ranges (`dp.partition_bounds`): each measured node
    is its buckets' exact count plus one discrete Laplace(1/(w ε2)) draw; a node that was not
    measured is left out and its measured children hang from its nearest measured ancestor.
    None when a leaf group was not measured (the touched buckets could not all be covered)."""
    measured = tree.weight > 0
    if not measured[tree.leaf].all():
        return None
    anc = np.full(tree.n_nodes, -1, dtype=np.int64)        # nearest measured ancestor
    for d in range(1, int(tree.depth.max()) + 1):
        idx = np.flatnonzero(tree.depth == d)
        p = tree.parent[idx]
        anc[idx] = np.where(measured[p], p, anc[p])
    keep = np.flatnonzero(measured)
    new = np.full(tree.n_nodes, -1, dtype=np.int64)
    new[keep] = np.arange(len(keep))
    lo, hi = tree.lo[keep], tree.hi[keep]
    owner = np.repeat(np.arange(len(keep)), hi - lo)        # each node's buckets, for its box
    member = np.arange(owner.size) - np.repeat(np.cumsum(hi - lo) - (hi - lo), hi - lo) + np.repeat(lo, hi - lo)
    box = np.column_stack([np.full(len(keep), np.iinfo(np.int64).max), np.zeros(len(keep), np.int64)] * 2)
    for j, fold in enumerate((np.minimum, np.maximum, np.minimum, np.maximum)):
        fold.at(box[:, j], owner, buckets[member, j])
    return NodeDraws(box, np.where(anc[keep] >= 0, new[np.maximum(anc[keep], 0)], -1),
                     np.asarray(y)[keep], 1.0 / np.asarray(eps_node), tree.leaf[keep],
                     buckets=np.asarray(buckets), span=np.column_stack([lo, hi]))


def release_dawa(data, domain, epsilon, split, params, rng, *, workload=None, noise=None):
    """DAWA release (see the module docstring). `workload`: explicit public rectangles instead
    of the random one. Test hook: `noise(kind, scale, shape)` replaces every draw (kind
    "deviation" in grid units, "count" per measured node); the ledger is charged either way."""
    side = params["base_cells"]
    k = side.bit_length() - 1
    if side != 1 << k:
        raise ParameterError(f"DAWA's base grid needs a power-of-two side, got {side}")
    eps1, eps2 = epsilon * split[0], epsilon * split[1]
    kappa = 1.0 / eps2
    grid = UniformGrid(domain, side, side)
    F = data.histogram(grid)
    row, col = hilbert_cells(k)
    xh = np.rint(F[row, col]).astype(np.int64)
    ledger = Ledger()

    levels = candidate_levels(k, params["shapes"])
    dev = noisy_deviations(rng, xh, levels, eps1, ledger, noise)
    starts, blevels, _ = best_partition(dev, levels, xh.size, kappa)
    rects = interval_rects(k, starts, 1 << blevels)
    area = (1 << blevels).astype(np.float64)

    if workload is None:
        qrects = random_workload(domain, params["workload_queries"], area_frac=params["query_area"],
                                 rng=params["workload_seed"])
        info = {"kind": "random", "queries": params["workload_queries"],
                "query_area": params["query_area"], "workload_seed": params["workload_seed"]}
    else:
        qrects = as_rect_array(workload)
        if len(qrects) == 0:
            raise ParameterError("an explicit DAWA workload needs at least one rectangle")
        info = {"kind": "explicit", "queries": len(qrects)}
    qc = workload_cells(qrects, domain, side)
    tree = strategy_tree(params["strategy"], qc, rects)

    cum = np.concatenate([[0], np.cumsum(xh)])
    ends = np.append(starts[1:], xh.size)
    bucket_counts = cum[ends] - cum[starts]
    bcum = np.concatenate([[0], np.cumsum(bucket_counts)])
    true_nodes = bcum[tree.hi] - bcum[tree.lo]
    measured = tree.weight > 0
    eps_node = eps2 * tree.weight[measured]
    ledger.charge(f"DAWA bucket counts ({params['strategy']})", eps2, 1.0, "discrete laplace",
                  None,
                  note=f"{int(measured.sum()):,} counts of bucket ranges on a binary tree over "
                       f"{len(starts):,} buckets, each + discrete Laplace(1/(w ε)); the weights w "
                       "on every root-to-leaf path add up to at most 1 and a point is in one "
                       "range per level")
    if noise is None:
        z = count_noise(rng, eps_node, 1.0)
    else:
        z = np.asarray(noise("count", 1.0 / eps_node, eps_node.shape))
    y = np.zeros(tree.n_nodes)
    y[measured] = true_nodes[measured] + z
    var = np.full(tree.n_nodes, np.inf)
    var[measured] = discrete_laplace_variance(1.0 / eps_node)
    x = least_squares(tree, y, var)
    zeroed = np.zeros(tree.n_nodes, dtype=bool)
    if params["zero_sd"] > 0:
        x, zeroed = zero_groups(tree, x, var, area, params["zero_sd"])

    # a measured group of buckets is split among them by area
    leaves = np.flatnonzero(tree.leaf)
    leaves = leaves[np.argsort(tree.lo[leaves])]                   # in bucket order
    group = np.repeat(leaves, tree.hi[leaves] - tree.lo[leaves])   # group of each bucket
    garea = np.bincount(group, area, minlength=tree.n_nodes)
    est = x[group] * area / garea[group]

    step = 1 if params["shapes"] == "dyadic" else 2
    nodes = hilbert_nodes(k, starts, blevels, step)
    return DawaRelease(DAWA, domain, epsilon, split, params, ledger, grid, rects, est,
                       leaf_var=None, eps_path=np.full(len(rects), epsilon), nodes=nodes,
                       workload_info=info, draws=measured_draws(tree, y, eps_node, rects),
                       diagnostics={"buckets": len(rects), "strategy_nodes": tree.n_nodes,
                                    "measured_nodes": int(measured.sum()),
                                    "groups_zeroed": int(zeroed[tree.leaf].sum()),
                                    "bucket_counts": bucket_counts})


DAWA = MechanismSpec(
    name="dawa", label="DAWA (Li, Hay & Miklau)",
    description="Reads a fine grid in Hilbert order, privately merges cells into buckets whose "
                "counts are nearly even (aligned squares and half-squares), then measures the "
                "bucket counts with a hierarchy weighted for a workload of range queries and "
                "fits them by least squares (Li, Hay & Miklau 2014, 2-D as in DPBench).",
    guarantee=f"ε-differential privacy, unit of privacy: {ADD_REMOVE_POINT} (neighbouring "
              "datasets differ by one point, added or removed), with ε = ε_partition + "
              "ε_counts: the bucket deviations of all candidate intervals get discrete Laplace "
              "noise for their L1 sensitivity Σ 2(1 − 2^−ℓ) over the candidate levels, and the "
              "weighted hierarchical counts spend at most ε_counts on every point's path. The "
              "workload is public and the dataset size is never used.",
    unit=ADD_REMOVE_POINT,
    params=(Param("base_cells", int, 256, "Base grid (cells per side)",
                  "The public 2^k × 2^k grid read in Hilbert order; buckets are made of its "
                  "cells. 256 as in DPBench.", choices=BASE_SIDES),
            Param("shapes", str, "dyadic", "Bucket shapes",
                  "dyadic: aligned squares and their halves (every power-of-two length of the "
                  "Hilbert order); squares: aligned squares only, half the partition noise.",
                  choices=SHAPES),
            Param("strategy", str, "greedyh", "Measurement strategy",
                  "greedyh: hierarchy weighted greedily for the workload (DAWA); h2: the same "
                  "binary hierarchy with equal weight per level.", choices=STRATEGIES),
            Param("workload_queries", int, 1000, "Workload size",
                  "Number of random public rectangles the weights are tuned for.",
                  min=1, max=10000),
            Param("query_area", float, 0.05, "Workload query area (fraction)",
                  "Area of each workload rectangle as a fraction of the domain.",
                  min=1e-4, max=1.0),
            Param("workload_seed", int, 0, "Workload seed",
                  "Seed of the public random workload (it never looks at the data).",
                  min=0, max=2**31 - 1),
            Param("zero_sd", float, 1.0, "Zero below (standard deviations)",
                  "After the least-squares fit, the estimates are made non-negative from the top "
                  "of the measurement hierarchy down, a group of buckets whose estimate is below "
                  "this many standard deviations of its own count's noise is released as empty, "
                  "and its count goes to the neighbouring buckets (in Hilbert order) that were "
                  "kept, so the total stays. Post-processing: no privacy cost. 0 = off, as "
                  "published. 1 was measured best: on the DPBench matrices (seeds 1-3) it cut the "
                  "error at ε 0.1 / 1 from 56.4 / 5.3 to 39.0 / 4.6 on checkin, 88.8 / 11.1 to "
                  "83.4 / 10.1 on BeijingTaxiS, 60.3 / 8.0 to 46.8 / 5.5 on cabspottingS, and "
                  "left the spread-out samples as they were (city_200k 8.0 / 1.17 to 7.9 / "
                  "1.15); 1.5 and 2 are better on the matrices and worse on the samples.",
                  min=0.0, max=10.0)),
    budget_parts=("partition", "counts"), default_split=(0.25, 0.75), workload_aware=True,
    finest_grid=lambda domain, p: (p["base_cells"], p["base_cells"]), release=release_dawa)

SPECS = (DAWA,)

__all__ = ["DAWA", "DawaRelease", "SPECS", "greedyh", "hilbert", "partition", "release_dawa"]
