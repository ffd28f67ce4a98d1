"""Shifted equi-width grids under δ-neighbourhood privacy, and the bounded uniform-grid baseline.

Fang & Chang, "Differential Privacy with δ-Neighbourhood for Spatial and Dynamic Datasets"
(ASIA CCS 2014), spec 001 sections 1, 2.4-2.6 and 4.

`shifted_grids` (spec 2.4, with the P1 correction):
- m = max(1, min(floor(w/δ), m_max)) grids, step s = w/m >= δ; grid g is grid 0 shifted
  diagonally by g*s. Taken together the grid lines of all m grids form the fine lattice s*Z on
  each axis, so a move with |dx|, |dy| <= δ <= s crosses at most one x-line and one y-line and
  changes the bins of at most two grids: joint δ-sensitivity 4 (2 when m = 1).
- Every point gets ONE integer fine index u = floor(x/s) per axis; its bin in grid g is
  floor((u - g)/m) + 1, computed with integer maths (P13).
- Discrete Laplace noise of scale Δ/ε (integer, exact sampler) on every bin of every grid, ε
  NOT split across grids (P15): one ledger entry. The grids depend only on w, δ and the box,
  never on the number of points n; n is not protected by this relation (a move keeps it) and
  is not exported.
- Range queries: the average over grids of each grid's uniformity estimate (eq. 8), with
  border bins divided by their area inside the box (the [rec] of P9, default) or by the full
  bin area (the paper's literal version, `denominator="full"`).
- Noise variance of a query: (V/m²) Σ_g (Σ_i fx_g[i]²)(Σ_j fy_g[j]²) with V the discrete
  Laplace variance at scale Δ/ε (spec 2.5 has 2Δ²/ε², the continuous value, an upper bound on V).

`bounded_grid` (spec 2.6): one uniform grid with discrete Laplace noise of scale 2/ε per cell,
ε-DP under the replace-one relation, under which the dataset size is public (never exported).

Geometry. The public box is projected to metres with `dp.Projection`, with the east-west scale
taken at the box latitude farthest from the equator (spec 4), so projected distances never
exceed true distances inside the box and δ needs no inflation. Points are clamped into the box
(clamping is 1-Lipschitz), never dropped: under bounded neighbours a dropped point is a
removal. For a point outside the box the guarantee concerns its clamped position. The fine
lattice tiles the box exactly: U_x = floor(W/s) cells of width W/U_x >= s across, likewise in
y, so bins may be very slightly wider than the requested w (never narrower, which keeps
s_x, s_y >= δ). This lattice is a `UniformGrid` on the domain and is the
rendering form of the release (spec 2.5, "fine-lattice form").
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from ..budget import Ledger
from ..domain import Domain, UniformGrid
from ..errors import ParameterError
from ..noise import discrete_laplace_variance
from ..queries import Rect, as_rect_array
from ..rect_features import RectFeatures
from ..summed_area import rect_integrals, summed_area
from .base import MOVE_POINT, Capabilities, MechanismSpec, Param, Release
from .half_width import MC_MAX_TERMS
from .bounded_grid import (BOUNDED_GRID, BOUNDED_KIND, P_BIN_KM, P_BINS_PER_SIDE,  # noqa: F401
                           BoundedGridRelease, release_bounded_grid)  # (re-exported: releases pickled
                                                                      # before the split name them here)
from .shifted_lattice import BoxMetres, ShiftedLattice, resolve_bin_width

# Marker the app reads to tell guarantees apart (ε under δ-neighbourhood is not standard ε).
GUARANTEE_KIND = "delta-neighbourhood"

MAX_DISPLAY_SIDE = 1024       # spec 4: display raster at most 1024 x 1024 cells
MAX_GEOJSON_FEATURES = 100_000


def equivalent_standard_epsilon(epsilon: float, m: int) -> dict:
    """Spec 1 [derived]: relocation (2m/Δ)ε and presence/absence (m/Δ)ε, Δ = 4 (2 when m = 1)."""
    delta_sens = 2 if m == 1 else 4
    return {"relocation": 2 * m * epsilon / delta_sens, "presence": m * epsilon / delta_sens}


# ------------------------------------------------------------------------- estimator helpers
def _sum_sq_fractions(t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Σ_i f_i² where f_i = |[t0, t1] ∩ [i, i+1]| (unit bins in t): the closed form of spec 2.5."""
    t1 = np.maximum(t1, t0)
    i0, i1 = np.floor(t0), np.floor(t1)
    same = i0 == i1
    split = (i0 + 1 - t0) ** 2 + (t1 - i1) ** 2 + np.maximum(i1 - i0 - 1, 0)
    return np.where(same, (t1 - t0) ** 2, split)


def _fractions(t0: float, t1: float, n_bins: int) -> np.ndarray:
    """Overlap fractions f_i = |[t0, t1] ∩ [i, i+1]| for one query (vector over bins)."""
    i = np.arange(n_bins)
    return np.clip(np.minimum(t1, i + 1) - np.maximum(t0, i), 0.0, None)


def _fraction_matrix(t: np.ndarray, n_bins: int) -> np.ndarray:
    """Rows: consecutive intervals [t[a], t[a+1]]; columns: bins; entries: overlap fractions."""
    i = np.arange(n_bins)[None, :]
    return np.clip(np.minimum(t[1:, None], i + 1) - np.maximum(t[:-1, None], i), 0.0, None)


# ------------------------------------------------------------------------------ the release
class ShiftedGridsRelease(Release):
    """Noisy counts of m shifted grids; answers average the grids (spec 2.5).

    counts: (m, by, bx) raw noisy counts (never clipped, P19); bins outside the box are 0
    (they hold no point by construction and carry no noise). noise_scale: the discrete Laplace
    scale Δ/ε of every in-box count (None when exact).
    """

    guarantee_kind = GUARANTEE_KIND

    def __init__(self, spec, domain, epsilon, split, params, ledger, box: BoxMetres,
                 lattice: ShiftedLattice, counts, noise_scale: float | None,
                 denominator: str = "clipped", **kw):
        super().__init__(spec, domain, epsilon, split, params, ledger, **kw)
        self.box = box
        self.lattice = lattice
        self.counts = np.asarray(counts, dtype=np.float64)
        self.noise_scale = noise_scale
        self.denominator = denominator
        self._sats = None
        self._knots = None
        self._raster = None

    # ---------------------------------------------------------------- structure
    @property
    def n_grids(self) -> int:
        return self.lattice.m

    @property
    def m(self) -> int:
        return self.lattice.m

    @property
    def sensitivity(self) -> int:
        return self.lattice.sensitivity

    @cached_property
    def fine_grid(self) -> UniformGrid:
        """The fine s x s lattice as a UniformGrid on the domain (row 0 = south)."""
        return UniformGrid(self.domain, self.lattice.ux, self.lattice.uy)

    @cached_property
    def display_grid(self) -> UniformGrid:
        """The fine lattice, or a coarser grid with at most 1024 cells per side (spec 4)."""
        ux, uy = self.lattice.ux, self.lattice.uy
        if max(ux, uy) <= MAX_DISPLAY_SIDE:
            return self.fine_grid
        f = MAX_DISPLAY_SIDE / max(ux, uy)
        return UniformGrid(self.domain, max(1, round(ux * f)), max(1, round(uy * f)))

    def _grid_knots(self):
        if self._knots is None:
            L = self.lattice
            self._knots = [(L.knots(0, g, self.denominator), L.knots(1, g, self.denominator))
                           for g in range(L.m)]
        return self._knots

    def _grid_sats(self):
        if self._sats is None:
            self._sats = summed_area(self.counts.astype(np.float64))
        return self._sats

    def _fine_rects(self, rects):
        """Rectangles as fine-lattice coordinates (x0, y0, x1, y1), clipped to the box."""
        r = as_rect_array(rects)
        d, L = self.domain, self.lattice
        x = np.clip((r[:, [0, 2]] - d.west) / d.width * L.ux, 0.0, L.ux)
        y = np.clip((r[:, [1, 3]] - d.south) / d.height * L.uy, 0.0, L.uy)
        x[:, 1] = np.maximum(x[:, 1], x[:, 0])
        y[:, 1] = np.maximum(y[:, 1], y[:, 0])
        return x[:, 0], y[:, 0], x[:, 1], y[:, 1]

    def _t(self, rects):
        """Per grid: bin coordinates (tx0, ty0, tx1, ty1) of every rectangle."""
        x0, y0, x1, y1 = self._fine_rects(rects)
        for (kx, tx), (ky, ty) in self._grid_knots():
            yield (np.interp(x0, kx, tx), np.interp(y0, ky, ty),
                   np.interp(x1, kx, tx), np.interp(y1, ky, ty))

    # ---------------------------------------------------------------- answers
    def answer_many(self, rects) -> np.ndarray:
        """Averaged estimator (eq. 8): (1/m) Σ_g Σ_b f_{g,b} c̃_{g,b}, O(m) per rectangle."""
        S = self._grid_sats()
        out = np.zeros(len(as_rect_array(rects)))
        for g, (tx0, ty0, tx1, ty1) in enumerate(self._t(rects)):
            out += rect_integrals(S[g], np.column_stack([tx0, ty0, tx1, ty1]))
        return out / self.m

    def answer_per_grid(self, rects) -> np.ndarray:
        """(m, q) per-grid estimates Σ_ij fx_g[i] fy_g[j] c̃_g[j, i], from explicit fractions.

        The mean over axis 0 is `answer_many` (an independent computation, kept for checks).
        """
        out = []
        for g, (tx0, ty0, tx1, ty1) in enumerate(self._t(rects)):
            fx = np.clip(np.minimum(tx1[:, None], np.arange(1, self.lattice.bx + 1))
                         - np.maximum(tx0[:, None], np.arange(self.lattice.bx)), 0, None)
            fy = np.clip(np.minimum(ty1[:, None], np.arange(1, self.lattice.by + 1))
                         - np.maximum(ty0[:, None], np.arange(self.lattice.by)), 0, None)
            out.append(np.einsum("qj,ji,qi->q", fy, self.counts[g], fx))
        return np.array(out)

    def noise_variance(self, rects) -> np.ndarray:
        """Closed form (spec 2.5): (V/m²) Σ_g (Σ_i fx_g[i]²)(Σ_j fy_g[j]²), V the per-bin variance."""
        q = len(as_rect_array(rects))
        if not self.noise_scale:
            return np.zeros(q)
        acc = np.zeros(q)
        for tx0, ty0, tx1, ty1 in self._t(rects):
            acc += _sum_sq_fractions(tx0, tx1) * _sum_sq_fractions(ty0, ty1)
        return discrete_laplace_variance(self.noise_scale) * acc / self.m ** 2

    def noise_terms(self, rect: Rect):
        """The noise is Σ_g Σ_b (f_{g,b}/m) Z_{g,b}; only listed while few enough to simulate."""
        if not self.noise_scale:
            return None
        coef = []
        for tx0, ty0, tx1, ty1 in self._t(rect):
            fx = _fractions(tx0[0], tx1[0], self.lattice.bx)
            fy = _fractions(ty0[0], ty1[0], self.lattice.by)
            coef.append(np.outer(fy[fy > 0], fx[fx > 0]).ravel() / self.m)
            if sum(len(c) for c in coef) > MC_MAX_TERMS:
                return None
        return (np.concatenate(coef) if coef else np.zeros(0)), self.noise_scale

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(grids=self.m)

    def describe(self) -> str:
        return f"{self.m} shifted grids of {self.lattice.bx}×{self.lattice.by} bins"

    # ---------------------------------------------------------------- rendering
    def raster(self):
        """Expected count per display cell, and the display grid (row 0 = south).

        On the fine lattice this is the spec's F[u, v] = (1/m) Σ_g c̃_g[bin_g(u, v)] / n_in(bin)
        (n_in = m² with full denominators); on a coarser display grid each cell is the range
        query of eq. (8) over that cell. Values are raw (may be negative, P19).
        """
        if self._raster is None:
            from scipy import sparse       # here, not at `import dp`: scipy's first import is slow
            L, G = self.lattice, self.display_grid
            ex = np.linspace(0.0, L.ux, G.gx + 1)
            ey = np.linspace(0.0, L.uy, G.gy + 1)
            out = np.zeros((G.gy, G.gx))
            for g, ((kx, tx), (ky, ty)) in enumerate(self._grid_knots()):
                Ax = sparse.csr_matrix(_fraction_matrix(np.interp(ex, kx, tx), L.bx))   # (gx, bx)
                Ay = sparse.csr_matrix(_fraction_matrix(np.interp(ey, ky, ty), L.by))   # (gy, by)
                left = Ay @ self.counts[g]                                              # (gy, bx)
                out += np.asarray((Ax @ left.T).T)
            self._raster = out / L.m
        return self._raster, self.display_grid

    def regions(self):
        """(display grid, one [r, r+1, c, c+1) range per cell, expected count per cell)."""
        values, grid = self.raster()
        j, k = np.divmod(np.arange(grid.n_cells), grid.gx)
        return grid, np.column_stack([j, j + 1, k, k + 1]), values.ravel()

    def _display_edges(self, axis: int, g: int):
        """Fine edges of grid g's in-box bins mapped to display-grid cell edges (rounded)."""
        L, G = self.lattice, self.display_grid
        lo, hi = L.axis_edges(axis)
        U, P = (L.ux, G.gx) if axis == 0 else (L.uy, G.gy)
        keep = np.flatnonzero(hi[g] > lo[g])
        if P == U:
            return keep, lo[g][keep], hi[g][keep]
        return keep, np.rint(lo[g][keep] * P / U).astype(np.int64), np.rint(hi[g][keep] * P / U).astype(np.int64)

    def grid_regions(self, i: int):
        """Grid i of the series on the display grid: ((L, 4) ranges [r0, r1, c0, c1), noisy counts).

        The regions tile the box. On a coarsened display grid, bin edges are rounded to the
        nearest display edge and bins that round to nothing are left out (display only).
        """
        if not 0 <= int(i) < self.m:
            raise ParameterError(f"grid index must be in 0..{self.m - 1}, got {i}")
        i = int(i)
        kx, x0, x1 = self._display_edges(0, i)
        ky, y0, y1 = self._display_edges(1, i)
        J, I = np.meshgrid(np.arange(len(ky)), np.arange(len(kx)), indexing="ij")
        J, I = J.ravel(), I.ravel()
        regions = np.column_stack([y0[J], y1[J], x0[I], x1[I]]).astype(np.int64)
        counts = self.counts[i][ky[J], kx[I]]
        ok = (regions[:, 1] > regions[:, 0]) & (regions[:, 3] > regions[:, 2])
        return regions[ok], counts[ok]

    def fine_regions(self, i: int):
        """Grid i's in-box bins on the fine lattice: ((L, 4) ranges [r0, r1, c0, c1), counts)."""
        J, I, ranges = self._in_box_bins(i)
        return ranges, self.counts[i][J, I]

    def _in_box_bins(self, i: int):
        """Grid i's in-box bins: row and column indices, and their fine ranges [r0, r1, c0, c1)."""
        lx, hx = self.lattice.axis_edges(0)
        ly, hy = self.lattice.axis_edges(1)
        kx = np.flatnonzero(hx[i] > lx[i])
        ky = np.flatnonzero(hy[i] > ly[i])
        J, I = (a.ravel() for a in np.meshgrid(ky, kx, indexing="ij"))
        return J, I, np.column_stack([ly[i][J], hy[i][J], lx[i][I], hx[i][I]]).astype(np.int64)

    def bounds(self, rects, level: float = 0.95):
        """Each grid's own range over its bins (`dp.partition_bounds.region_bounds`, points
        clamped onto the box's edge left out of the lower end) at level 1 − (1 − level)/m, and
        their intersection, which holds with probability >= level (union bound)."""
        from ..partition_bounds import intersect_bounds, region_bounds
        if not self.bounds_hold:
            q = len(as_rect_array(rects))
            return np.full(q, np.nan), np.full(q, np.nan)
        grid, scale = self.fine_grid, float(self.noise_scale or 0.0)

        def part(i):
            ranges, counts = self.fine_regions(i)
            return lambda lvl: region_bounds(self.domain, grid, ranges, counts, scale, rects, lvl,
                                             clamped=True)
        return intersect_bounds([part(i) for i in range(self.m)], level)

    def bin_bounds(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Grid i's in-box bins: row and column indices, [west, south, east, north] (clipped), counts."""
        L, d = self.lattice, self.domain
        J, I, ranges = self._in_box_bins(i)
        r0, r1, c0, c1 = ranges.T
        fx = d.width / L.ux
        fy = d.height / L.uy
        b = np.column_stack([d.west + c0 * fx, d.south + r0 * fy, d.west + c1 * fx, d.south + r1 * fy])
        b[:, 2] = np.where(c1 == L.ux, d.east, b[:, 2])
        b[:, 3] = np.where(r1 == L.uy, d.north, b[:, 3])
        return J, I, b, self.counts[i][J, I]

    # ---------------------------------------------------------------- export
    def metadata(self) -> dict:
        meta = super().metadata()
        L, eps = self.lattice, self.epsilon
        eq = equivalent_standard_epsilon(eps, L.m)
        delta_km = L.delta / 1000
        meta.update({
            "guarantee_kind": GUARANTEE_KIND,
            "guarantee_for_this_release": guarantee_for(eps, delta_km, L.m),
            "delta_km": delta_km,
            "bin_km": L.bin_width / 1000,
            "bin_km_x": L.m * L.sx / 1000,
            "bin_km_y": L.m * L.sy / 1000,
            "lattice_step_km": [L.sx / 1000, L.sy / 1000],
            "m": L.m,
            "m_uncapped": L.m_uncapped,
            "bins_per_grid": [L.bx, L.by],
            "fine_lattice": [L.ux, L.uy],
            "sensitivity": L.sensitivity,
            "noise_scale": self.noise_scale,
            "noisy_values": int(self.lattice.in_box.sum()),
            "denominator": self.denominator,
            "equivalent_standard_epsilon": eq,
            "epsilon_split": "single release: ε is not split across the grids",
            "projection": {"kind": "equirectangular", "phi_ref_deg": self.box.phi_ref,
                           "metres_per_degree_lon": self.box.mx, "metres_per_degree_lat": self.box.my,
                           "note": "east-west scale at the box latitude farthest from the equator, "
                                   "so projected distances never exceed true distances in the box"},
        })
        return meta

    def features(self) -> RectFeatures:
        """Bins of every grid with their noisy counts (grid 0 only above 100,000 bins in all),
        plus metadata and the complete noisy counts as arrays. Nothing here reads raw data."""
        n_feat = int(self.lattice.in_box.sum())
        shown = range(self.m) if n_feat <= MAX_GEOJSON_FEATURES else range(1)
        bins = [self.bin_bounds(g) for g in shown]
        g = np.concatenate([np.full(len(J), k) for k, (J, *_) in zip(shown, bins)])
        J, I, b, c = (np.concatenate(x) for x in zip(*bins))
        meta = self.metadata()
        meta["features_cover_grids"] = list(shown)
        grids = self.counts.astype(object)
        grids[~self.lattice.in_box] = None
        meta["grids"] = grids.tolist()
        meta["grids_note"] = ("grids[g][row][col]: noisy count of bin (row, col) of grid g; null for "
                              "bins outside the box. Bin (row, col) of grid g covers fine cells "
                              "[(col-1)m+g, col*m+g) x [(row-1)m+g, row*m+g) of the fine lattice.")
        return RectFeatures(b, {"grid": g, "row": J.astype(np.int64), "col": I.astype(np.int64),
                                "noisy_count": c.astype(np.float64)}, meta)


def guarantee_for(epsilon: float, delta_km: float, m: int) -> str:
    """The four guarantee sentences of spec 1 with this release's numbers filled in."""
    eq = equivalent_standard_epsilon(epsilon, m)
    return (f"{epsilon:g}-DP under δ-neighbourhood (δ = {delta_km:g} km, Euclidean, no sources): "
            f"one person's location being anywhere within {delta_km:g} km of its true position "
            f"changes output probabilities by at most a factor of e^{epsilon:g}. "
            f"Protection falls off with distance: for alternatives r away the factor is "
            f"e^({epsilon:g}·⌈r/δ⌉), and for this release (m = {m} grids) never worse than "
            f"e^{eq['relocation']:g} for relocation or e^{eq['presence']:g} for presence/absence "
            f"(equivalent standard ε {eq['relocation']:g} and {eq['presence']:g}). "
            f"{SIZE_SENTENCE} "
            "This ε is not comparable with the ε of the standard-DP mechanisms (grid, HTF, trees); "
            "at equal ε those mechanisms give the stronger guarantee.")


# ------------------------------------------------------------------------- the mechanisms
def plan(domain: Domain, params: dict) -> tuple[BoxMetres, ShiftedLattice]:
    """The public box in metres and the shifted lattice that `params` give on it (no data)."""
    box = BoxMetres.of(domain)
    w = resolve_bin_width(box, params)
    return box, ShiftedLattice.build(box.width, box.height, w, params["delta_km"] * 1000.0,
                                     params["m_max"])


def explain(domain: Domain, params: dict, epsilon: float) -> str:
    """The equivalent standard ε the app shows next to the slider (spec 001 section 1)."""
    _, lattice = plan(domain, params)
    eq = equivalent_standard_epsilon(epsilon, lattice.m)
    return (f"m = {lattice.m} grid{'s' if lattice.m > 1 else ''} · equivalent standard ε: "
            f"{eq['relocation']:.3g} for relocation, {eq['presence']:.3g} for presence "
            f"(δ-neighbourhood ε = {epsilon:g} is not comparable with the other mechanisms' ε)")


def presence_epsilon(domain: Domain, params: dict, epsilon: float) -> float:
    """ε for adding or removing one point (spec 1 [derived]): what a budget account charges."""
    return equivalent_standard_epsilon(epsilon, plan(domain, params)[1].m)["presence"]


def release_shifted_grids(data, domain, epsilon, split, params, rng):
    """Spec 2.4: m shifted grids, discrete Laplace(Δ/ε) on every in-box bin of each grid, one charge."""
    box, lattice = plan(domain, params)
    x, y = box.to_metres(domain, data.x, data.y)
    u, v = lattice.fine_index(x, y)
    exact = lattice.counts(u, v)
    eps = epsilon * split[-1]
    scale = lattice.sensitivity / eps
    mask = lattice.in_box
    ledger = Ledger()
    noisy = np.zeros(exact.shape, dtype=np.int64)
    noisy[mask] = ledger.noisy_counts(
        rng, exact[mask], eps, "noisy bin counts of all grids (one joint release)",
        sensitivity=lattice.sensitivity,
        note=f"m = {lattice.m} grids of {lattice.by}×{lattice.bx} bins ({int(mask.sum()):,} in "
             f"the box); joint δ-sensitivity {lattice.sensitivity} (a δ-move changes at most two "
             "grids); ε is not split across grids")
    clamped = int(np.count_nonzero(~domain.contains(data.x, data.y)))
    return ShiftedGridsRelease(SHIFTED_GRIDS, domain, epsilon, split, params, ledger, box, lattice,
                               noisy, scale, params["denominator"],
                               diagnostics={"points_clamped_into_box": clamped})


SIZE_SENTENCE = (
    "Neighbouring datasets differ by one point moved by at most δ, so they have the same size: "
    "the number of points n is not protected by this guarantee (it is treated as public, and no "
    "budget is spent on it) but it is never exported; each grid's noisy counts add up to n plus "
    "noise.")

SHIFTED_GUARANTEE = (
    "ε-DP under δ-neighbourhood (δ = the distance threshold you set, Euclidean, no sources): one "
    "person's location being anywhere within δ of its true position changes output probabilities "
    "by at most a factor of e^ε. "
    "Protection falls off with distance: for alternatives r away the factor is e^(ε·⌈r/δ⌉), and "
    "for this mechanism never worse than e^(ε·m/2) for relocation or e^(ε·m/4) for "
    "presence/absence (m = number of grids; ε and ε/2 when m = 1), shown as the equivalent "
    "standard ε. "
    f"{SIZE_SENTENCE} "
    "This ε is not comparable with the ε of the standard-DP mechanisms (grid, HTF, trees) on the "
    "same screen: at equal ε those mechanisms give the stronger guarantee.")

SHIFTED_GRIDS = MechanismSpec(
    needs_points=True,
    name="shifted_grids", label="Shifted grids (δ-neighbourhood)",
    description="m = ⌊w/δ⌋ copies of an equi-width grid, each shifted diagonally by w/m, all "
                "released with discrete Laplace noise at the joint sensitivity 4 (ε is not "
                "split across grids); range queries average the grids (Fang & Chang 2014). "
                "Protects small moves (up to δ) most; see the guarantee.",
    guarantee=SHIFTED_GUARANTEE, unit=MOVE_POINT, explain=explain,
    add_remove_epsilon=presence_epsilon,
    params=(Param("delta_km", float, 0.1, "Distance threshold δ (km)",
                  "Moves of one person's location by up to this distance are protected at ε; "
                  "farther alternatives get weaker protection (ε per δ of distance).",
                  min=1e-4, max=5000.0),
            P_BIN_KM, P_BINS_PER_SIDE,
            Param("m_max", int, 16, "Cap on the number of grids",
                  "At most this many shifted grids. Fewer grids stay private for moves up to δ "
                  "and only lose accuracy, but each grid adds ε/4 to what adding or removing a "
                  "point costs (the budget account's charge, m·ε/4): 16 keeps that at 4ε, so the "
                  "default runs at ε = 1 on every preset box within the default budget of 10 "
                  "(128 grids on a country-sized box would need 32).", min=1, max=1024),
            Param("denominator", str, "clipped", "Border bins",
                  "clipped: a bin sticking out of the box is divided by its area inside the box "
                  "(the whole box then sums to n in expectation); full: by the full bin area "
                  "(the paper's literal version).", choices=("clipped", "full"))),
    release=release_shifted_grids)

SPECS = (SHIFTED_GRIDS, BOUNDED_GRID)
