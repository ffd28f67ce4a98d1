"""The geometry of the shifted grids (spec 001 sections 2.4 and 4): the public box in projected
metres and the m shifted grids indexed through one fine lattice, so a move of at most δ crosses
at most one line per axis. Used by `shifted_grids`; reads no data."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..domain import Domain, Projection
from ..errors import ParameterError

MAX_BINS = 5_000_000          # spec 4: refuse above about 5e6 released values (m(K+1)^2)
REL_TOL = 1e-9                # tolerance in floor(w/δ) and floor(W/s): 0.3 km / 0.1 km gives m = 3
POLE_LIMIT_DEG = 89.0


@dataclass(frozen=True)
class BoxMetres:
    """The public box in projected metres: x = (lon - west) * mx, y = (lat - south) * my."""

    width: float
    height: float
    mx: float
    my: float
    phi_ref: float     # latitude (degrees) where the east-west scale is taken

    @classmethod
    def of(cls, domain: Domain) -> "BoxMetres":
        phi_ref = max(abs(domain.south), abs(domain.north))
        if phi_ref > POLE_LIMIT_DEG:
            raise ParameterError(f"the box reaches latitude {phi_ref:g}°: east-west distances "
                                 f"cannot be measured near a pole; use a box within ±{POLE_LIMIT_DEG:g}°")
        p = Projection(domain)
        mid = math.radians((domain.south + domain.north) / 2)
        mx = p.mx * math.cos(math.radians(phi_ref)) / math.cos(mid)
        return cls(domain.width * mx, domain.height * p.my, mx, p.my, phi_ref)

    def to_metres(self, domain: Domain, lon, lat):
        """Projected metres, clamped into [0, W] x [0, H] (points are never dropped)."""
        x = (np.asarray(lon, dtype=np.float64) - domain.west) * self.mx
        y = (np.asarray(lat, dtype=np.float64) - domain.south) * self.my
        return (np.clip(np.nan_to_num(x), 0.0, self.width), np.clip(np.nan_to_num(y), 0.0, self.height))


def resolve_bin_width(box: BoxMetres, params: dict) -> float:
    """w in metres: `bin_km` when positive (it takes precedence), else longer side / bins_per_side."""
    bin_km = params.get("bin_km") or 0.0
    if bin_km > 0:
        return float(bin_km) * 1000.0
    k = int(params.get("bins_per_side") or 0)
    if k < 1:
        raise ParameterError("Bins per side: give a bin width in km or at least one bin per side")
    return max(box.width, box.height) / k


@dataclass(frozen=True)
class ShiftedLattice:
    """The m shifted grids over a W x H box (metres), indexed through the fine lattice.

    Fine cells: ux x uy, widths sx = W/ux and sy = H/uy (both >= s >= δ). Grid g has bins
    i = 0..bx-1 on x covering fine cells [(i-1)m + g, i*m + g) (clipped to the box), likewise
    on y. Bins outside the box on both sides are part of the index range but hold no point.
    """

    width: float
    height: float
    bin_width: float     # requested w (metres)
    delta: float         # δ (metres)
    m: int
    m_uncapped: int
    ux: int
    uy: int

    @classmethod
    def build(cls, width: float, height: float, bin_width: float, delta: float,
              m_max: int = 128) -> "ShiftedLattice":
        if not (delta > 0 and math.isfinite(delta)):
            raise ParameterError(f"δ must be a positive distance, got {delta}")
        if not (bin_width > 0 and math.isfinite(bin_width)):
            raise ParameterError(f"bin width must be positive, got {bin_width}")
        ratio = bin_width / delta
        if ratio * (1 + REL_TOL) < 1:
            raise ParameterError(
                f"bin width ({bin_width / 1000:.4g} km) must be at least δ ({delta / 1000:.4g} km): "
                "with bins narrower than δ one move crosses several grid lines and the shifted-grid "
                "sensitivity 4 no longer holds; widen the bins or lower δ")
        m_unc = int(math.floor(ratio * (1 + REL_TOL)))
        m = max(1, min(m_unc, int(m_max)))
        s = bin_width / m
        ux = max(1, int(math.floor(width / s * (1 + REL_TOL))))
        uy = max(1, int(math.floor(height / s * (1 + REL_TOL))))
        lat = cls(float(width), float(height), float(bin_width), float(delta), m, m_unc, ux, uy)
        if lat.n_values > MAX_BINS:
            raise ParameterError(
                f"{m} grids of {lat.by}×{lat.bx} bins = {lat.n_values:,} noisy values exceeds "
                f"{MAX_BINS:,}: increase δ or the bin width, or lower the cap on the number of grids")
        return lat

    # ---------------------------------------------------------------- derived sizes
    @property
    def sx(self) -> float:
        return self.width / self.ux

    @property
    def sy(self) -> float:
        return self.height / self.uy

    @property
    def step(self) -> float:
        """Nominal shift step s = w/m (the lattice steps sx, sy are at least this)."""
        return self.bin_width / self.m

    @property
    def bx(self) -> int:
        return (self.ux - 1) // self.m + 2

    @property
    def by(self) -> int:
        return (self.uy - 1) // self.m + 2

    @property
    def n_values(self) -> int:
        return self.m * self.bx * self.by

    @property
    def sensitivity(self) -> int:
        """Joint δ-sensitivity of the whole series (spec 2.4 step 5)."""
        return 2 if self.m == 1 else 4

    # ---------------------------------------------------------------- bins
    def fine_coords(self, x_m, y_m):
        """Continuous fine-lattice coordinates of metre positions, clipped to the box."""
        fx = np.clip(np.asarray(x_m, dtype=np.float64) / self.sx, 0.0, self.ux)
        fy = np.clip(np.asarray(y_m, dtype=np.float64) / self.sy, 0.0, self.uy)
        return fx, fy

    def fine_index(self, x_m, y_m):
        """Integer fine index (u, v) of each point; points outside the box are clamped (spec 4)."""
        x = np.nan_to_num(np.asarray(x_m, dtype=np.float64))
        y = np.nan_to_num(np.asarray(y_m, dtype=np.float64))
        u = np.clip(np.floor(x / self.sx), 0, self.ux - 1).astype(np.int64)
        v = np.clip(np.floor(y / self.sy), 0, self.uy - 1).astype(np.int64)
        return u, v

    def bin_of(self, u, g: int):
        """Bin index of fine index u in grid g: floor((u - g)/m) + 1, integer maths (P13)."""
        return (np.asarray(u, dtype=np.int64) - g) // self.m + 1

    def bins(self, u, v):
        """(i, j) bin indices of every point in every grid, shapes (m, N)."""
        g = np.arange(self.m)[:, None]
        u = np.asarray(u, dtype=np.int64)[None, :]
        v = np.asarray(v, dtype=np.int64)[None, :]
        return (u - g) // self.m + 1, (v - g) // self.m + 1

    def counts(self, u, v) -> np.ndarray:
        """Exact counts c_g[j, i] of all grids, shape (m, by, bx) (NON-PRIVATE)."""
        out = np.zeros((self.m, self.by, self.bx), dtype=np.int64)
        for g in range(self.m):
            flat = self.bin_of(v, g) * self.bx + self.bin_of(u, g)
            out[g] = np.bincount(flat, minlength=self.by * self.bx).reshape(self.by, self.bx)
        return out

    def axis_edges(self, axis: int):
        """(lo, hi) fine edges of every bin of every grid on one axis, clipped to the box: (m, B)."""
        U, B = (self.ux, self.bx) if axis == 0 else (self.uy, self.by)
        g = np.arange(self.m)[:, None]
        i = np.arange(B)[None, :]
        return np.clip((i - 1) * self.m + g, 0, U), np.clip(i * self.m + g, 0, U)

    @cached_property
    def in_box(self) -> np.ndarray:
        """(m, by, bx) mask of bins that meet the box (the only ones that can hold points)."""
        lx, hx = self.axis_edges(0)
        ly, hy = self.axis_edges(1)
        return ((hy > ly)[:, :, None]) & ((hx > lx)[:, None, :])

    def knots(self, axis: int, g: int, denominator: str = "clipped"):
        """Piecewise-linear map from fine coordinate to bin coordinate t for grid g.

        Inside bin i, t = i + (x - left_i) / width_i: with clipped denominators left/width are
        those of the bin's part inside the box; with full ones, the unclipped bin (width m).
        The overlap fraction of a query with bin i is then the t-length of [i, i+1] it covers.
        """
        lo, hi = self.axis_edges(axis)
        lo, hi = lo[g], hi[g]
        pos = np.flatnonzero(hi > lo)
        first, last = int(pos[0]), int(pos[-1])
        x = np.append(lo[pos], hi[last]).astype(np.float64)
        t = first + np.arange(len(pos) + 1, dtype=np.float64)
        if denominator == "full":
            U = self.ux if axis == 0 else self.uy
            t[0] = first + (0 - ((first - 1) * self.m + g)) / self.m
            t[-1] = last + (U - ((last - 1) * self.m + g)) / self.m
        return x, t

    def denominators(self, denominator: str = "clipped") -> np.ndarray:
        """(m, by, bx) bin areas in fine cells used as denominators (0 outside the box)."""
        if denominator == "full":
            return np.where(self.in_box, float(self.m * self.m), 0.0)
        lx, hx = self.axis_edges(0)
        ly, hy = self.axis_edges(1)
        return ((hy - ly)[:, :, None] * (hx - lx)[:, None, :]).astype(np.float64)
