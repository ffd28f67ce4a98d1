"""A 95% interval for a rectangle's true count that assumes nothing about the data.

A release made of disjoint regions (grid cells, tree leaves) whose released counts each carry
one independent discrete Laplace draw of known scale answers a rectangle by spreading counts
evenly inside regions, which can be far off whatever the noise (an empty rectangle inside a
dense leaf). But counts are never negative, so the true count of a rectangle lies between the
true count of the regions wholly inside it and that of the regions it touches. Each of those
is its released sum minus a known noise: the noise's two-sided `level` half-width bounds each
side with probability (1 − level)/2 at most, so by the union bound

    [Σ inside − h_inside, Σ touched + h_touched]   (the lower end clipped at 0)

holds the true count with probability at least `level`, for any data, for a rectangle chosen
without looking at the release (picking the rectangle whose count looks highest is another
question). The half-widths come from the exact distribution of the sum of the draws (`sum_pmf`),
so they hold at any ε. It reads only the release (post-processing).

Trees whose counts are fitted jointly (the quadtree, kd-tree, full quadtree and AG make their
levels consistent by least squares) keep every node's own draw before the fitting (`NodeDraws`,
`Release.node_draws`): the exact count of the node's region plus one independent discrete
Laplace draw of known scale. The same argument then runs on nodes (`node_bounds`): the leaves
wholly inside a rectangle, and the leaves it touches, are each given by a combination of node
draws with far fewer draws than leaves. A node stands for its leaves; and since a node is the
disjoint union of its children (the tree's consistency), it also stands, less its children's
other parts, for the part of it inside (or outside) a region. Each end takes the signed
combination of least noise variance (`_Covers`): a huge rectangle's inside is the root
less the few nodes outside it rather than the many nodes inside. A sum of independent discrete
Laplace draws with signs has the law of the unsigned sum (each draw is symmetric), so its
quantile stays exact. The fitted counts are not used, so the range need not be centred on the
answer. Every choice reads only the public scales and tree, never the draws it sums. (AG's
level-1 cells were split by reading their own draws: given the draws of the cells not inside a
rectangle, which draws each end sums is fixed, and they are independent and symmetric, so each
end holds given those, hence overall; a cell not inside, and any node above it, never stands
for its leaves.)

When no region lies wholly inside a rectangle (fixed by the release's structure, not its
draws) the lower end is 0 with certainty, so the upper end takes the whole 1 − level
(`upper_level`): one-sided at 5% rather than 2.5%.

DAWA's measured nodes are groups of buckets in Hilbert order, not rectangles: a node is inside
a rectangle when all its buckets are, touched when one is; a node that was not measured
(weight 0) is left out and its measured descendants hang from its nearest measured ancestor.

No interval (NaN) where its premise fails (`Release.bounds_hold`, `region_noise_scales`,
`node_draws`): counts fitted jointly with no own draws kept (Euler's LP); user-level releases (the
counts are of each user's kept points, not of all points); counts re-binned from a grid whose
lines are not the release's; points clamped into the box (the bounded grid); a grid chosen by
comparing its draws with true answers (leaky).

Counts zeroed by a threshold τ on their own noisy value (PrivTree's `zero_below`) hide the
noisy count, so each end is bounded on a set fixed before the noise (the regions inside, or
touched), never on the kept ones (their noise is not centred on zero):
- upper: a released 0 stands for a noisy count of at most ⌊τ⌋, so the touched sum counts it so;
- lower: a released 0 stands for a noisy count of at least −(k − 1) whenever every noise draw
  inside is above −k, which fails with probability at most β = (1 − level)/4 when each draw
  falls to −k or below with probability β / (regions inside); the sum's half-width then takes
  the other (1 − level)/4, so the lower end still fails with probability at most (1 − level)/2.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .queries import as_rect_array, cell_coords


class NodeDraws(NamedTuple):
    """Every node's own noisy count, before any fitting: its exact count plus one independent
    discrete Laplace draw of scale `scales` (a node inside another has a `parent`)."""
    regions: np.ndarray     # (K, 4) int64 [r0, r1, c0, c1) in base cells
    parent: np.ndarray      # (K,) index of the node it lies in, −1 for a top node
    counts: np.ndarray      # (K,) integer noisy counts
    scales: np.ndarray      # (K,) discrete Laplace scales
    leaf: np.ndarray        # (K,) bool: a released region
    # nodes that are not rectangles (DAWA's groups of buckets in Hilbert order): each node is
    # the buckets span[k, 0] .. span[k, 1] − 1 of `buckets` ((B, 4) rectangles), and `regions`
    # holds only their bounding boxes
    buckets: np.ndarray | None = None
    span: np.ndarray | None = None
    # nodes whose children were chosen by reading the node's own draw (AG splits a cell by its
    # noisy count): such a node's draw is not taken in place of its leaves when the rectangle only
    # touches them all, since it was kept for being low or high (None: no such node)
    shaped_by_own_draw: np.ndarray | None = None


def _node_membership(draws: NodeDraws, rect, grid) -> tuple[np.ndarray, np.ndarray]:
    """(node wholly inside the rectangle, node touched by it) for every node."""
    if draws.buckets is None:
        return _inside_and_touched(np.asarray(draws.regions), rect, grid)
    inside, touched = _inside_and_touched(np.asarray(draws.buckets), rect, grid)
    lo, hi = np.asarray(draws.span).T
    ci = np.concatenate([[0], np.cumsum(inside)])
    ct = np.concatenate([[0], np.cumsum(touched)])
    return ci[hi] - ci[lo] == hi - lo, ct[hi] - ct[lo] > 0


TAIL_SD = 12.0     # the exact sum's support is cut this many standard deviations out (plus 40 scales)


@functools.lru_cache(maxsize=64)
def _log_phi(scale: float, n: int) -> np.ndarray:
    """log φ(t) of one discrete Laplace(scale) draw at t = 2πk/n, k = 0 .. n − 1:
    φ(t) = (1 − a)² / (1 − 2a cos t + a²), a = e^(−1/scale). Kept: queries share their scales."""
    a = math.exp(-1.0 / scale)
    t = 2 * np.pi * np.arange(n) / n
    return 2 * math.log1p(-a) - np.log1p(-2 * a * np.cos(t) + a * a)


@functools.lru_cache(maxsize=4096)
def _half_width(scales: tuple, multiplicity: tuple, level: float) -> int:
    """Least whole h with P(|Σ Z| <= h) >= level, Z independent discrete Laplace: the sum's
    exact distribution from the product of the draws' characteristic functions (`_log_phi`),
    inverted by FFT."""
    a = np.exp(-1.0 / np.asarray(scales))
    m = np.asarray(multiplicity, dtype=np.float64)
    sd = math.sqrt(float((m * 2 * a / (1 - a) ** 2).sum()))
    reach = int(math.ceil(TAIL_SD * sd + 40 * max(scales)))
    n = 1 << max(4, (2 * reach + 1).bit_length())
    log_phi = sum(k * _log_phi(s, n) for s, k in zip(scales, multiplicity))
    pmf = np.fft.ifft(np.exp(log_phi)).real
    covered = pmf[0] + 2 * np.cumsum(pmf[1:reach + 1])       # P(|S| <= h) for h = 1 .. reach
    if pmf[0] >= level:
        return 0
    return int(np.searchsorted(covered, level - 1e-12) + 1)


def sum_half_width(scales: np.ndarray, level: float) -> int:
    """Half-width h with P(|Σ Z_i| <= h) >= level for independent discrete Laplace Z_i, exact."""
    scales = np.asarray(scales, dtype=np.float64)
    scales = scales[scales > 0]
    if scales.size == 0:
        return 0
    unique, counts = np.unique(scales, return_counts=True)
    return _half_width(tuple(unique.tolist()), tuple(counts.tolist()), float(level))


def laplace_floor(scale: float, beta: float) -> int:
    """The least whole k with P(Z <= -k) <= beta for discrete Laplace(scale): P(Z >= k) =
    a^k / (1 + a), a = e^(-1/scale)."""
    a = math.exp(-1.0 / scale)
    return max(0, math.ceil(math.log(beta * (1 + a)) / math.log(a)))


def _axis(lo_cell, hi_cell, x0, x1, size):
    """Regions touching [x0, x1) along one axis; a rectangle of no width on the box's closed
    far edge touches the last regions."""
    return ((lo_cell < x1) & (hi_cell > x0)) | ((x0 >= size) & (hi_cell == size))


def _inside_and_touched(regions, rect, grid) -> tuple[np.ndarray, np.ndarray]:
    """Which regions ((K, 4) [r0, r1, c0, c1) base cells) lie wholly inside a rectangle (x0, y0,
    x1, y1 in base cells) and which it touches."""
    r0, r1, c0, c1 = regions.T
    x0, y0, x1, y1 = rect
    inside = (c0 >= x0) & (c1 <= x1) & (r0 >= y0) & (r1 <= y1) & (x1 > x0) & (y1 > y0)
    return inside, _axis(c0, c1, x0, x1, grid.gx) & _axis(r0, r1, y0, y1, grid.gy)


def partition_bounds(rel, rects, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) per rectangle, holding its true count with probability >= level whatever
    the data; NaN where the release has no such interval."""
    q = len(as_rect_array(rects))
    draws = rel.node_draws() if rel.bounds_hold else None
    if draws is not None:
        return ordered(*node_bounds(rel.domain, rel.regions()[0], draws, rects, level))
    scales = rel.region_noise_scales() if rel.bounds_hold else None
    if scales is None:
        return np.full(q, np.nan), np.full(q, np.nan)
    grid, ranges, counts = rel.regions()
    return ordered(*region_bounds(rel.domain, grid, ranges, counts, scales, rects, level,
                                   tau=rel.zero_threshold(), clamped=rel.clamps_into_box))


def ordered(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Never an empty range: an upper end below the lower one (negative noisy counts on empty
    ground, as PrivTree's leaves at small ε) is raised to it. A true count below the old upper
    end is also below the new one, so the coverage can only grow."""
    return lo, np.fmax(hi, lo)


def region_bounds(domain, grid, ranges, counts, scales, rects, level: float, tau=None,
                  clamped: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) per rectangle over disjoint regions (cell ranges of `grid`) each with its
    own draw of scale `scales`. `tau`: the zeroing threshold (`Release.zero_threshold`).
    `clamped`: points outside the box were moved onto its edge, so a region on the box's edge
    may hold points that lie in no rectangle; the lower end leaves such regions out (the upper
    end may count them: it only grows)."""
    q = len(as_rect_array(rects))
    counts = np.asarray(counts, dtype=np.float64).ravel()
    scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), counts.shape)
    zero = np.zeros(counts.shape, dtype=bool) if tau is None else counts == 0
    upper = counts if tau is None else np.where(zero, np.floor(tau), counts)
    # with hidden zeros the lower end splits its share between the sum and the floor
    lower_level = level if tau is None else 1 - (1 - level) / 2
    ranges = np.asarray(ranges)
    edge = edge_regions(ranges, grid) if clamped else np.zeros(len(ranges), dtype=bool)
    lo, hi = np.empty(q), np.empty(q)
    for i, rect in enumerate(cell_coords(domain, grid, rects)):
        inside, touched = _inside_and_touched(ranges, rect, grid)
        inside &= ~edge
        floor = 0.0
        hidden = zero & inside
        if hidden.any():
            beta = (1 - level) / 4 / inside.sum()
            floor = max(laplace_floor(float(scales[hidden].max()), beta) - 1, 0) * hidden.sum()
        lo[i] = max(counts[inside].sum() - floor - sum_half_width(scales[inside], lower_level), 0.0)
        hi[i] = upper[touched].sum() + sum_half_width(scales[touched], upper_level(level, inside.any()))
    return lo, hi


def upper_level(level: float, any_inside: bool) -> float:
    """The two-sided level of the upper end's half-width: `level` when the lower end has a sum
    that may fail (each end then fails with probability at most (1 − level)/2), 1 − 2(1 − level)
    when nothing lies inside (the lower end is 0 with certainty, so the upper end's one-sided
    tail may take all of 1 − level)."""
    return level if any_inside else 1 - 2 * (1 - level)


def edge_regions(ranges, grid) -> np.ndarray:
    """Regions ((K, 4) cell ranges of `grid`) on the box's edge, where a release that clamps
    points into the box put the points from outside it."""
    r = np.asarray(ranges)
    return (r[:, 0] == 0) | (r[:, 2] == 0) | (r[:, 1] == grid.gy) | (r[:, 3] == grid.gx)


def intersect_bounds(parts, level: float) -> tuple[np.ndarray, np.ndarray]:
    """One range from m ranges each holding at level 1 − (1 − level)/m (`parts`: a callable
    level -> (lo, hi), one per partition): all hold together with probability >= level by the
    union bound, so their intersection does (shifted grids: one partition per grid)."""
    m = len(parts)
    each = [part(1 - (1 - level) / m) for part in parts]
    lo = np.max([b[0] for b in each], axis=0)
    hi = np.min([b[1] for b in each], axis=0)
    return ordered(lo, hi)


def node_bounds(domain, grid, draws: NodeDraws, rects, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) per rectangle from the nodes' own draws. The lower end covers the leaves
    wholly inside the rectangle, the upper end the leaves it touches (a node all of whose
    leaves it touches stands for them, as on a kd-tree's edges); each by the signed
    combination of draws of least noise variance (`_Covers`), widened by its exact noise
    quantile."""
    covers = _Covers.of(draws)
    leaf, shaped = covers.leaf, covers.shaped
    tree = covers.tree
    leaves = tree.leaves_below(leaf)
    c = cell_coords(domain, grid, rects)
    lo, hi = np.empty(len(c)), np.empty(len(c))
    for i, rect in enumerate(c):
        inside, touched = _node_membership(draws, rect, grid)
        n_in, n_touched = tree.leaves_below(leaf & inside), tree.leaves_below(leaf & touched)
        # a node shaped by its own draw counts as all touched by its place alone (inside the
        # rectangle), and so does any node above it: whether all its leaves are touched reads
        # its draw through its shape
        out_of_place = shaped & ~leaf & ~inside
        all_touched = np.where(shaped & ~leaf, inside, n_touched == leaves)
        if out_of_place.any():
            all_touched &= ~tree.above(out_of_place)
        below, h_below = covers.sum(covers.signed(inside, n_in == 0), level)
        above, h_above = covers.sum(covers.signed(all_touched, n_touched == 0),
                                    upper_level(level, bool(n_in.any())))
        lo[i] = max(below - h_below, 0.0)
        hi[i] = above + h_above
    return lo, hi


class _Covers(NamedTuple):
    """A tree's draws ready for signed covers: each node's cheapest way to give its whole self
    (its own draw or its children's, by noise variance; `best`), with that cover's noisy sum
    (`whole_sum`) and draws per distinct scale (`whole_draws`), fixed once per release. Every
    choice reads only the public scales and tree, never the draws."""
    tree: "_Levels"
    counts: np.ndarray
    var: np.ndarray
    leaf: np.ndarray
    shaped: np.ndarray
    own: np.ndarray          # a node that gives its whole self by its own draw only
    subtract: np.ndarray     # a node that may give a part as its draw less its children's others
    best: np.ndarray
    whole_sum: np.ndarray
    whole_draws: np.ndarray  # (K, U) draws of each distinct scale in the node's whole cover
    scale_of: np.ndarray     # (K,) index of the node's scale among `scales`
    scales: np.ndarray       # (U,) distinct scales
    first: np.ndarray        # children of node k: kids[first[k]:first[k + 1]]
    kids: np.ndarray

    @classmethod
    def of(cls, draws: NodeDraws) -> "_Covers":
        counts = np.asarray(draws.counts, dtype=np.float64)
        n = len(counts)
        leaf = np.asarray(draws.leaf, dtype=bool)
        shaped = np.zeros(n, bool) if draws.shaped_by_own_draw is None else np.asarray(draws.shaped_by_own_draw, bool)
        tree = _Levels.of(np.asarray(draws.parent))
        scales = np.asarray(draws.scales, dtype=np.float64)
        var = _variance(scales)
        own = leaf | shaped
        # the node and every node below it are the unions of their children (tiled), and it is
        # neither shaped by its draw nor above one (a shaped node's costs would read its draw
        # through its shape)
        gap = ~leaf & ~_tiled(tree, draws)
        subtract = ~leaf & ~gap & ~tree.above(gap) & ~shaped & ~tree.above(shaped)
        uniq, scale_of = np.unique(scales, return_inverse=True)
        best = var.copy()
        whole_sum = counts.copy()
        whole_draws = np.zeros((n, len(uniq)), dtype=np.int64)
        kid_var, kid_sum, kid_draws = np.zeros(n), np.zeros(n), np.zeros((n, len(uniq)), np.int64)
        for idx in tree.levels[::-1]:
            takes_own = own[idx] | (var[idx] <= kid_var[idx])
            best[idx] = np.where(takes_own, var[idx], kid_var[idx])
            whole_sum[idx] = np.where(takes_own, counts[idx], kid_sum[idx])
            whole_draws[idx] = np.where(takes_own[:, None], 0, kid_draws[idx])
            whole_draws[idx[takes_own], scale_of[idx[takes_own]]] += 1
            child = idx[tree.parent[idx] >= 0]
            up = tree.parent[child]
            kid_var += np.bincount(up, weights=best[child], minlength=n)
            kid_sum += np.bincount(up, weights=whole_sum[child], minlength=n)
            np.add.at(kid_draws, up, whole_draws[child])
        kids = np.argsort(tree.parent, kind="stable")
        kids = kids[tree.parent[kids] >= 0]
        first = np.searchsorted(tree.parent[kids], np.arange(n + 1))
        return cls(tree, counts, var, leaf, shaped, own, subtract, best, whole_sum, whole_draws,
                   scale_of, uniq, first, kids)

    def signed(self, full: np.ndarray, empty: np.ndarray) -> tuple:
        """The signed combination of least noise variance whose regions add up to a region R
        made of leaves (`full`/`empty`: the node lies wholly in R / out of it): (nodes taken by
        their own draw, their signs, nodes taken whole by their cover `whole_sum`, their signs).
        Only nodes partly in R need a choice: bottom up, each one's cheapest way to give its part
        in R (`inn`) and out of R (`out`): its children's parts, its own draw (for a part that is
        all of it), or its draw less its children's other parts; then top down, signs."""
        partial = ~full & ~empty
        inn = np.where(full, self.best, 0.0)
        out = np.where(empty, self.best, 0.0)
        how_in, how_out = {}, {}                 # 1 children, 2 own draw less the children
        levels = [idx[partial[idx]] for idx in self.tree.levels]
        for idx in levels[::-1]:
            if idx.size == 0:
                continue
            lo, n_kids = self.first[idx], self.first[idx + 1] - self.first[idx]
            whose = np.repeat(np.arange(idx.size), n_kids)
            kids = self.kids[np.arange(whose.size) - np.repeat(np.cumsum(n_kids) - n_kids, n_kids) + lo[whose]]
            kin = np.bincount(whose, weights=inn[kids], minlength=idx.size)
            kout = np.bincount(whose, weights=out[kids], minlength=idx.size)
            sub = self.subtract[idx]
            v = self.var[idx]
            for cost, how, kids_same, kids_other in ((inn, how_in, kin, kout), (out, how_out, kout, kin)):
                other = np.where(sub, v + kids_other, np.inf)
                choice = np.where(other < kids_same, 2, 1)
                cost[idx] = np.minimum(other, kids_same)
                how.update(zip(idx.tolist(), choice.tolist()))
        own_nodes, own_signs, whole_nodes, whole_signs = [], [], [], []
        # (node, sign, wants its part in R): start from the top nodes
        todo = [(k, 1.0, True) for k in self.tree.levels[0].tolist()]
        while todo:
            k, w, want_in = todo.pop()
            if (full[k] and want_in) or (empty[k] and not want_in):
                whole_nodes.append(k)
                whole_signs.append(w)
                continue
            if (empty[k] and want_in) or (full[k] and not want_in):
                continue
            how = (how_in if want_in else how_out)[k]
            kids = self.kids[self.first[k]:self.first[k + 1]].tolist()
            if how == 2:
                own_nodes.append(k)
                own_signs.append(w)
                todo.extend((c, -w, not want_in) for c in kids)
            else:
                todo.extend((c, w, want_in) for c in kids)
        return (np.asarray(own_nodes, np.int64), np.asarray(own_signs),
                np.asarray(whole_nodes, np.int64), np.asarray(whole_signs))

    def sum(self, cover: tuple, level: float) -> tuple[float, int]:
        """(the signed noisy sum of a cover, its exact `level` half-width)."""
        own_nodes, own_signs, whole_nodes, whole_signs = cover
        total = float(own_signs @ self.counts[own_nodes] + whole_signs @ self.whole_sum[whole_nodes])
        draws = self.whole_draws[whole_nodes].sum(axis=0)
        draws += np.bincount(self.scale_of[own_nodes], minlength=len(self.scales))
        keep = (draws > 0) & (self.scales > 0)
        if not keep.any():
            return total, 0
        return total, _half_width(tuple(self.scales[keep].tolist()), tuple(draws[keep].tolist()), float(level))


def _variance(scales: np.ndarray) -> np.ndarray:
    """Each draw's variance, 2a / (1 − a)², a = e^(−1/scale); 0 for an exact count."""
    a = np.exp(-1.0 / np.where(scales > 0, scales, 1.0))
    return np.where(scales > 0, 2 * a / (1 - a) ** 2, 0.0)


def _tiled(tree: "_Levels", draws: NodeDraws) -> np.ndarray:
    """Per node, whether its children tile it (a node less its children's draws is then the
    part of it they leave out): their sizes, in base cells or buckets, add up to its own."""
    if draws.span is not None:
        size = np.diff(np.asarray(draws.span), axis=1)[:, 0]
    else:
        r = np.asarray(draws.regions)
        size = (r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])
    size = size.astype(np.int64)
    child = tree.parent >= 0
    kids = np.bincount(tree.parent[child], weights=size[child], minlength=len(size))
    return kids == size


class _Levels(NamedTuple):
    """A forest's nodes by depth (index arrays, root level first), for sums up and flags down."""
    parent: np.ndarray
    levels: list

    @classmethod
    def of(cls, parent: np.ndarray) -> "_Levels":
        depth = np.zeros(len(parent), dtype=np.int64)
        up = parent.copy()
        while (up >= 0).any():
            depth += up >= 0
            up = np.where(up >= 0, parent[np.maximum(up, 0)], -1)
        return cls(parent, [np.flatnonzero(depth == d) for d in range(int(depth.max(initial=0)) + 1)])

    def leaves_below(self, marked: np.ndarray) -> np.ndarray:
        """Per node, how many marked leaves lie in it (itself included)."""
        n = np.asarray(marked, dtype=np.int64).copy()
        for idx in self.levels[:0:-1]:
            n += np.bincount(self.parent[idx], weights=n[idx], minlength=len(n)).astype(np.int64)
        return n

    def above(self, marked: np.ndarray) -> np.ndarray:
        """Per node, whether a marked node lies strictly below it."""
        return self.leaves_below(marked) > np.asarray(marked, dtype=np.int64)
