"""Growing the HTF tree: the noisy size that sets the height, then level by level Algorithm 3's
noisy counts and pruning and the split of the nodes that go on, each draw charged as it is made."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...budget import Ledger
from ...noise import discrete_laplace, discrete_laplace_variance, make_rng
from ...summed_area import box_sums, summed_area
from .plan import (DEFAULT_SPLIT, _charge_height, _Charges, _check_request, _Limits,
                   estimate_height, plan_budget, resolve_split_rule)
from .split import _LevelObjective, _noisy_objectives, _search, _split_axes, split_noise_scale


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
    1) from rng (a Generator); draw(scale, idx, below) replaces that sampler (the build's, which
    charges each draw as it makes it): below is True for the draws of stopping nodes, which spend
    the budget of the heights below i.
    """
    x = np.asarray(true_counts, dtype=np.float64)
    cells = np.asarray(cells)
    m = x.size
    if draw is None:
        gen = make_rng(rng, allow_int=False)
        draw = lambda scale, idx, below: discrete_laplace(gen, scale, idx.size)  # noqa: E731
    E = np.asarray(E, dtype=np.float64)
    ei = float(E[i])
    below = math.fsum(E[:i])                 # = eps_data - sum_{j >= i} E[j], exactly > 0 for i >= 1
    y = np.full(m, np.nan)
    value = np.full(m, np.nan)
    eps_final = np.full(m, np.nan)
    var = np.full(m, np.nan)
    all_idx = np.arange(m)
    if i == 0:                               # partition leaf [P-fix line 5]: release the E[0] draw
        y[:] = x + draw(1.0 / ei, all_idx, False)
        return {"pruned": np.ones(m, bool), "value": y.copy(), "eps_final": np.full(m, ei),
                "var": np.full(m, float(discrete_laplace_variance(1.0 / ei))), "y": y}
    tiny = (cells < stop_cells) | (cells == 1)
    pruned = np.zeros(m, bool)
    if extent_first:                         # 3.7 (a): data-independent stop, before the draw
        idx = np.flatnonzero(tiny)
        e_all = ei + below
        value[idx] = x[idx] + draw(1.0 / e_all, idx, True)
        eps_final[idx], var[idx] = e_all, discrete_laplace_variance(1.0 / e_all)
        pruned[idx] = True
        rest = np.flatnonzero(~tiny)
        y[rest] = x[rest] + draw(1.0 / ei, rest, False)
        stop = np.zeros(m, bool)
        stop[rest] = y[rest] <= stop_count
    else:
        y[:] = x + draw(1.0 / ei, all_idx, False)
        stop = (y <= stop_count) | tiny
    idx = np.flatnonzero(stop)
    if below <= 1e-12 * max(1.0, ei):        # pitfall 9: never a draw at budget 0
        raise AssertionError("no budget left for a pruned node's fresh count")
    fresh = x[idx] + draw(1.0 / below, idx, True)       # FRESH draw replaces the old one [P]
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
    ledger: Ledger = field(default_factory=Ledger)   # every charge, each made as it is drawn
    node_parent: np.ndarray | None = None    # (K,) index in `nodes` of each node's parent (-1: root)
    node_y: np.ndarray | None = None         # (K,) first noisy count of each node (nan: none drawn)
    node_var: np.ndarray | None = None       # (K,) its noise variance (nan: none drawn)
    leaf_node: np.ndarray | None = None      # (L,) index in `nodes` of each leaf


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
    first draw. Each entry of the returned ledger is charged just before the first draw it pays
    for (`_Charges`), and the levels the tree stops above after it is grown. Test hooks:
    noise(kind, scale, size) returns the noise to add to the exact values (kind "height", "count"
    or "split"); on_draw(kind, regions (m, 4), eps (m,)) sees every noisy draw with the region it
    reads.
    """
    rule = resolve_split_rule(budget_mode, split_rule)
    F, limits = _check_request(F, epsilon, budget_mode, split, eps_prt_level, rule)
    draws = _Draws(rng, noise, on_draw)
    ledger = Ledger()
    plan = _plan_tree(F, epsilon, limits, draws, ledger, budget_mode=budget_mode, split=split,
                      eps_prt_level=eps_prt_level, c0=c0, T=T, rule=rule)
    rules = _Rules(T=T, stop_count=stop_count, stop_cells=stop_cells,
                   extent_first=extent_first, combine_pruned=combine_pruned, split_rule=rule)
    charges = _Charges(ledger, plan.budget, T, rule)
    out = _grow(F, plan, draws, rules, charges)
    charges.rest()
    return out.tree(_tree_info(plan, rules, budget_mode, epsilon), ledger)


class _Draws:
    """Every noisy draw of one build, from one source, each reported to the on_draw hook.

    The source is the release's generator or, in tests, noise(kind, scale, size), which returns
    the noise to add; on_draw(kind, regions (m, 4), eps (m,)) sees each draw with its regions.
    The hooks handed to count_step and _search charge the ledger before each of their draws.
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

    def count_hook(self, R, i: int, charges: _Charges):
        """count_step's draw(scale, idx, below) for the nodes R at height i, charged as it draws
        (a draw for no node spends nothing)."""
        def draw(scale, idx, below):
            if idx.size:
                charges.counts(i, below)
            return self.count("count", scale, R[idx])
        return draw

    def split_hook(self, R, i: int, eps_eval: float, scale: float, charges: _Charges):
        """_search's perturb(idx, values) for the nodes R at height i, charged as it draws."""
        def perturb(idx, values):
            charges.split(i)
            return self.split(values, R[idx], eps_eval, scale)
        return perturb


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
    """H1-H4: noisy size -> height -> budgets; the size is charged to the ledger as it is drawn.

    The whole plan is fixed before the first split or count draw (h before eps_data, pitfall 18);
    the tree's entries are charged as the tree draws (`_Charges`).
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


def _count_level(R, tot, i: int, E, draws: _Draws, rules: _Rules, charges: _Charges) -> dict:
    """Algorithm 3 at height i: noisy counts of the nodes R (true counts tot), and the pruning."""
    cells = (R[:, 1] - R[:, 0]) * (R[:, 3] - R[:, 2])
    return count_step(tot, cells, i, E, stop_count=rules.stop_count, stop_cells=rules.stop_cells,
                      extent_first=rules.extent_first, combine_pruned=rules.combine_pruned,
                      draw=draws.count_hook(R, i, charges))


def _split_level(S, front: _Frontier, tot, i: int, plan: _TreePlan, draws: _Draws,
                 rules: _Rules, charges: _Charges) -> _Frontier:
    """Split every node of the frontier at height i; the next level.

    "search": Algorithm 1 at every node (private, paid by the level's charge, made at its first
    draw). "midpoint": every
    node is cut at the midpoint of its axis, floor(n / 2) lines in the first child; this reads
    no data. Algorithm 2's axis rule holds for both.
    """
    xs = _split_axes(front.R, i)
    obj = _LevelObjective(S, front, xs, tot)
    if rules.split_rule == "search":
        k, _ = _search(obj.n, obj, rules.T,
                       draws.split_hook(front.R, i, plan.eps_eval, plan.scale_split, charges))
    else:
        k = obj.n // 2
    return front.children(xs, k, obj.coord)


def _cat(parts, dt=np.float64) -> np.ndarray:
    return np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)


class _Leaves:
    """What the tree releases, gathered level by level: visited nodes and pruned leaves."""

    def __init__(self):
        (self.nodes, self.leaves, self.counts, self.eps, self.path, self.var,
         self.height, self.parent, self.y, self.y_var, self.leaf_node) = ([] for _ in range(11))
        self.n_seen = 0

    def visit(self, R, depth: int, parent) -> np.ndarray:
        """Record the nodes of one level with their depth and parents; returns their indices."""
        self.nodes.append(np.column_stack([R, np.full(len(R), depth)]))
        self.parent.append(np.asarray(parent, np.int64))
        idx = self.n_seen + np.arange(len(R))
        self.n_seen += len(R)
        return idx

    def collect(self, R, st: dict, i: int, E, idx) -> np.ndarray:
        """Keep count_step's pruned nodes at height i as leaves (and every node's first noisy
        count); returns the nodes to split."""
        pr = st["pruned"]
        y = st["y"]
        self.y.append(y)
        self.y_var.append(np.where(np.isnan(y), np.nan,
                                   float(discrete_laplace_variance(1.0 / float(E[i])))))
        if pr.any():
            self.leaf_node.append(idx[pr])
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
                       info=info, ledger=ledger, node_parent=_cat(self.parent, np.int64),
                       node_y=_cat(self.y), node_var=_cat(self.y_var),
                       leaf_node=_cat(self.leaf_node, np.int64))


def _grow(F, plan: _TreePlan, draws: _Draws, rules: _Rules, charges: _Charges) -> _Leaves:
    """Grow the tree top-down, one level per step (spec 3.8): count and prune, split the rest."""
    S = summed_area(F.astype(np.float64))
    front = _Frontier.root(F)
    out = _Leaves()
    parent = np.array([-1], np.int64)
    for i in range(plan.h, -1, -1):
        if len(front.R) == 0:
            break
        idx = out.visit(front.R, plan.h - i, parent)
        tot = box_sums(S, front.R)
        keep = out.collect(front.R, _count_level(front.R, tot, i, plan.E, draws, rules, charges),
                           i, plan.E, idx)
        if not keep.any():
            break
        front = _split_level(S, front.keep(keep), tot[keep], i, plan, draws, rules, charges)
        parent = np.repeat(idx[keep], 2)          # node j's children are 2j and 2j + 1
    return out


def _tree_info(plan: _TreePlan, rules: _Rules, budget_mode: str, epsilon: float) -> dict:
    """The released facts about the tree: the budget plan, the noisy size, the search noise
    (0 with the midpoint rule) and the split rule."""
    return dict(plan.budget, noisy_size=plan.n_noisy, h_afford=int(plan.limits.h_afford),
                T=int(rules.T), eps_eval=float(plan.eps_eval),
                split_noise_scale=float(plan.scale_split), budget_mode=budget_mode,
                eps_total=float(epsilon), h_max=int(plan.limits.h_max),
                split_rule=rules.split_rule)


