"""LeafRelease: a partition of a base grid into rectangular leaves, each with a noisy count.

Every tree-shaped mechanism (HTF, quadtree, kd-tree, PrivTree, AG) releases this. Leaves are
half-open cell ranges [r0, r1) x [c0, c1) of a public base grid (row 0 = south). Answers use the
uniformity assumption inside each leaf (spec 003 Eq. Q), computed exactly for any fractional
rectangle from a summed-area table of the leaf density (bilinear in the corner coordinates).
"""
from __future__ import annotations

import math

import numpy as np

from ..domain import Domain, Projection, UniformGrid
from ..queries import Rect, as_rect_array, cell_coords
from ..rect_features import RectFeatures
from ..summed_area import box_sums, rect_integrals, summed_area
from .base import Capabilities, Release


def square_base_grid(domain: Domain, max_side: int = 1024) -> UniformGrid:
    """Base grid whose cells are (nearly) square in metres, max_side cells on the longer side."""
    w, h = domain.size_m()
    if w >= h:
        return UniformGrid(domain, max_side, max(1, round(max_side * h / w)))
    return UniformGrid(domain, max(1, round(max_side * w / h)), max_side)


def base_shape(domain: Domain, params: dict) -> tuple[int, int]:
    """(columns, rows) of a tree's base grid (`base_cells` on the longer side), for
    MechanismSpec.finest_grid."""
    base = square_base_grid(domain, params["base_cells"])
    return base.gx, base.gy


def paint(shape, regions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Array of `shape` where each region [r0, r1) x [c0, c1) holds its value (regions disjoint).

    Vectorised with a 2-D difference array: +v at (r0, c0) and (r1, c1), -v at the other corners.
    """
    rows, cols = shape
    diff = np.zeros((rows + 1, cols + 1))
    r0, r1, c0, c1 = (regions[:, i] for i in range(4))
    np.add.at(diff, (r0, c0), values)
    np.add.at(diff, (r0, c1), -values)
    np.add.at(diff, (r1, c0), -values)
    np.add.at(diff, (r1, c1), values)
    return diff.cumsum(0).cumsum(1)[:rows, :cols]


class LeafRelease(Release):
    """Leaves with noisy counts on a public base grid; see the module docstring.

    leaves:    (L, 4) int array [r0, r1, c0, c1) in base-grid cells, disjoint, tiling the grid
    counts:    (L,) released noisy counts (raw, never clipped)
    leaf_var:  (L,) noise variance of each count when the counts' noise is independent, else None
    leaf_scale: (L,) discrete Laplace scale of each count when it is one raw draw (for intervals)
    eps_path:  (L,) epsilon spent on the root-to-leaf path (for hover and the ledger check)
    nodes:     optional (K, 5) int array [r0, r1, c0, c1, depth] of every node of the released tree
               (leaves included), for the level-by-level "watch it grow" view
    """

    draws = None            # the nodes' own draws before a joint fit (`node_draws`), never exported
    hidden_below = None     # (L,) where a threshold zeroed noisy counts up to it (PrivTree's zero_below)
    _leaf_frame = None      # (leaves as floats, 1 / leaf areas), made at the first interval
    _last_fractions = None  # (the last rectangle in base cells, its overlap fractions)

    def __init__(self, spec, domain, epsilon, split, params, ledger, base: UniformGrid,
                 leaves, counts, leaf_var=None, eps_path=None, nodes=None, leaf_scale=None,
                 draws=None, **kw):
        super().__init__(spec, domain, epsilon, split, params, ledger, **kw)
        self.base = base
        self.leaves = np.asarray(leaves, dtype=np.int64).reshape(-1, 4)
        self.counts = np.asarray(counts, dtype=np.float64)
        self.leaf_var = None if leaf_var is None else np.asarray(leaf_var, dtype=np.float64)
        self.leaf_scale = None if leaf_scale is None else np.asarray(leaf_scale, dtype=np.float64)
        self.eps_path = None if eps_path is None else np.asarray(eps_path, dtype=np.float64)
        self.nodes = None if nodes is None else np.asarray(nodes, dtype=np.int64).reshape(-1, 5)
        self.draws = draws
        self._sat = None
        self._is_leaf = None

    # ------------------------------------------------------------------ structure
    @property
    def n_leaves(self) -> int:
        return len(self.leaves)

    def leaf_areas(self) -> np.ndarray:
        """Leaf areas in base cells."""
        return (self.leaves[:, 1] - self.leaves[:, 0]) * (self.leaves[:, 3] - self.leaves[:, 2])

    def raster(self):
        """Noisy count per base cell (each leaf's count spread evenly), and the base grid."""
        dens = self.counts / self.leaf_areas()
        return paint(self.base.shape, self.leaves, dens), self.base

    def regions(self):
        return self.base, self.leaves, self.counts

    def leaf_bounds(self, regions=None) -> np.ndarray:
        """(L, 4) [west, south, east, north] in degrees of leaves (or of other cell regions)."""
        reg = self.leaves if regions is None else np.asarray(regions)[:, :4]
        ex, ey = self.base.edges_x, self.base.edges_y
        return np.column_stack([ex[reg[:, 2]], ey[reg[:, 0]], ex[reg[:, 3]], ey[reg[:, 1]]])

    def max_depth(self) -> int:
        return int(self.nodes[:, 4].max()) if self.nodes is not None and len(self.nodes) else 0

    def partition_at(self, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Regions of the tree cut at `depth` and their released counts (sums of leaves below).

        Pure post-processing of released leaves: nodes at that depth plus leaves above it.
        """
        if self.nodes is None:
            return self.leaves, self.counts
        d = self.nodes[:, 4]
        if self._is_leaf is None:
            self._is_leaf = self._node_is_leaf()
        region_is_leaf = self._is_leaf
        pick = (d == depth) | (region_is_leaf & (d < depth))
        regions = self.nodes[pick, :4]
        return regions, self._region_sums(regions)

    def _node_is_leaf(self) -> np.ndarray:
        """Which nodes are released leaves (matched by region, vectorised via integer keys)."""
        k = max(self.base.gx, self.base.gy) + 1

        def key(r):
            return ((r[:, 0] * k + r[:, 1]) * k + r[:, 2]) * k + r[:, 3]
        return np.isin(key(self.nodes[:, :4]), key(self.leaves))

    def _region_sums(self, regions) -> np.ndarray:
        return box_sums(self._cell_sat(), regions)

    def _cell_sat(self) -> np.ndarray:
        if self._sat is None:
            self._sat = summed_area(self.raster()[0])
        return self._sat

    # ------------------------------------------------------------------ answers
    def answer_many(self, rects) -> np.ndarray:
        """Spec 003 Eq. (Q): sum of leaf counts times the fraction of each leaf inside the query
        (the leaves' counts spread evenly over their base cells: `summed_area.rect_integrals`)."""
        return rect_integrals(self._cell_sat(), cell_coords(self.domain, self.base, rects))

    def overlap_fractions(self, rect: Rect) -> np.ndarray:
        """Fraction of each leaf's area inside one rectangle, shape (L,), read-only. The last
        rectangle's is kept: an interval asks for it twice (variance, then the noise terms)."""
        key = tuple(cell_coords(self.domain, self.base, rect)[0].tolist())
        last = self._last_fractions
        if last is not None and last[0] == key:
            return last[1]
        if self._leaf_frame is None:        # the leaves as floats and their areas, made once
            lv = self.leaves.astype(np.float64)
            self._leaf_frame = (lv, 1.0 / self.leaf_areas())
        lv, inv_area = self._leaf_frame
        x0, y0, x1, y1 = key
        ox = np.minimum(lv[:, 3], x1) - np.maximum(lv[:, 2], x0)
        oy = np.minimum(lv[:, 1], y1) - np.maximum(lv[:, 0], y0)
        out = np.maximum(ox, 0.0, out=ox) * np.maximum(oy, 0.0, out=oy) * inv_area
        out.flags.writeable = False
        self._last_fractions = (key, out)
        return out

    def noise_variance(self, rects) -> np.ndarray:
        """Σ_L a_L² var_L, a_L the fraction of leaf L inside each rectangle, when the leaves'
        noises are independent (leaf_var set); NaN when the counts were post-processed jointly."""
        r = as_rect_array(rects)
        if self.leaf_var is None:
            return np.full(len(r), math.nan)
        return np.array([(self.overlap_fractions(q) ** 2 * self.leaf_var).sum() for q in r])

    def region_noise_scales(self):
        return None if self.leaf_scale is None or self.leaf_var is None else self.leaf_scale

    def node_draws(self):
        return self.draws

    def zero_threshold(self):
        return self.hidden_below

    def noise_terms(self, rect: Rect):
        """With one discrete Laplace draw per leaf (leaf_scale), the noise is Σ_L a_L Z_L."""
        if self.leaf_scale is None or self.leaf_var is None:
            return None
        return self.overlap_fractions(rect), self.leaf_scale

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(depths=self.max_depth() if self.nodes is not None else 0,
                            budget_layer=self.eps_path is not None)

    def describe(self) -> str:
        return f"{self.n_leaves:,} leaves"

    # ------------------------------------------------------------------ export
    def features(self) -> RectFeatures:
        """Leaf rectangles with noisy counts, area and path epsilon; nothing read from raw data."""
        b = self.leaf_bounds()
        cols = {"leaf": np.arange(len(b)), "noisy_count": self.counts, "area_km2": self._areas_km2(b)}
        if self.eps_path is not None:
            cols["eps_path"] = self.eps_path
        meta = self.metadata()
        meta["base_grid"] = {"cols": self.base.gx, "rows": self.base.gy}
        return RectFeatures(b, cols, meta)

    def _areas_km2(self, bounds) -> np.ndarray:
        p = Projection(self.domain)
        return (bounds[:, 2] - bounds[:, 0]) * p.mx * (bounds[:, 3] - bounds[:, 1]) * p.my / 1e6
