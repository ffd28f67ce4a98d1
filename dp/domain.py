"""The public domain (a lon/lat box), city presets, projections and uniform grids on it.

The domain is public input: it comes from the user or a preset, never from the data, except
through `fit_to_data`, which warns and marks the result as leaky.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError, PrivacyLeakWarning

EARTH_RADIUS_M = 6_371_008.8
WGS84_A, WGS84_F = 6_378_137.0, 1 / 298.257223563
# WGS84's smallest radius of curvature (meridional, at the equator): a (1 - e^2) = 6,335,439 m
WGS84_MIN_RADIUS_M = WGS84_A * (1.0 - WGS84_F * (2.0 - WGS84_F))


@dataclass(frozen=True)
class Domain:
    """Axis-aligned public box in lon/lat degrees: [west, east] x [south, north]."""

    west: float
    south: float
    east: float
    north: float
    name: str = "custom"
    leaky: bool = False  # True when the box was fitted to the private data

    def __post_init__(self):
        vals = (self.west, self.south, self.east, self.north)
        if not all(isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(v) for v in vals):
            raise ParameterError(f"domain bounds must be finite numbers, got {vals}")
        if not (-180 <= self.west < self.east <= 180):
            raise ParameterError(
                f"domain needs -180 <= west < east <= 180 (longitude), got west={self.west}, east={self.east}")
        if not (-90 <= self.south < self.north <= 90):
            raise ParameterError(
                f"domain needs -90 <= south < north <= 90 (latitude), got south={self.south}, north={self.north}")

    @property
    def width(self) -> float:
        return self.east - self.west

    @property
    def height(self) -> float:
        return self.north - self.south

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        return (self.west, self.south, self.east, self.north)

    @property
    def area(self) -> float:
        """Area in square degrees (the space the uniformity assumption lives in, spec 000 P13)."""
        return self.width * self.height

    def contains(self, x, y, out: np.ndarray | None = None,
                 scratch: np.ndarray | None = None) -> np.ndarray:
        """Boolean mask of points inside the closed box (NaN is outside); written into `out`
        with `scratch` as a second bool array of x's shape when given (binning in blocks)."""
        x = np.asarray(x)
        y = np.asarray(y)
        if out is None:
            return (x >= self.west) & (x <= self.east) & (y >= self.south) & (y <= self.north)
        np.greater_equal(x, self.west, out=out)
        for v, op, bound in ((x, np.less_equal, self.east), (y, np.greater_equal, self.south),
                             (y, np.less_equal, self.north)):
            out &= op(v, bound, out=scratch)
        return out

    def size_m(self) -> tuple[float, float]:
        """(width, height) in metres at the box's mid latitude."""
        to_m = Projection(self)
        return self.width * to_m.mx, self.height * to_m.my

    def to_dict(self) -> dict:
        return {"west": self.west, "south": self.south, "east": self.east, "north": self.north,
                "name": self.name, "leaky": self.leaky}

    @classmethod
    def from_dict(cls, d: dict) -> "Domain":
        return cls(float(d["west"]), float(d["south"]), float(d["east"]), float(d["north"]),
                   name=d.get("name", "custom"), leaky=bool(d.get("leaky", False)))


def fit_to_data(x, y, pad: float = 1e-9) -> Domain:
    """Smallest box around the points. LEAKS: min/max of private data become public."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size == 0:
        raise ParameterError("cannot fit a domain to an empty dataset")
    warnings.warn("fit_to_data derives the public domain from the private data: the release is "
                  "no longer end-to-end differentially private", PrivacyLeakWarning, stacklevel=2)
    w, e = float(x.min()), float(x.max())
    s, n = float(y.min()), float(y.max())
    pad_x = max(pad, (e - w) * 1e-6)
    pad_y = max(pad, (n - s) * 1e-6)
    return Domain(max(-180.0, w - pad_x), max(-90.0, s - pad_y), min(180.0, e + pad_x), min(90.0, n + pad_y),
                  name="fitted to data (leaky)", leaky=True)


class Projection:
    """Equirectangular lon/lat <-> metres around the domain's mid latitude (cos-lat corrected)."""

    def __init__(self, domain: Domain):
        self.domain = domain
        lat0 = math.radians((domain.south + domain.north) / 2)
        self.my = math.pi * EARTH_RADIUS_M / 180.0
        self.mx = self.my * math.cos(lat0)

    def to_metres(self, lon, lat):
        return ((np.asarray(lon) - self.domain.west) * self.mx, (np.asarray(lat) - self.domain.south) * self.my)

    def to_lonlat(self, x_m, y_m):
        return (np.asarray(x_m) / self.mx + self.domain.west, np.asarray(y_m) / self.my + self.domain.south)


class ConservativeProjection(Projection):
    """Equirectangular lon/lat -> metres that never overstates the true distance between two
    points of the box: |F(p) - F(q)| <= geodesic distance on WGS84 (and on the mean sphere).

    x = R0 kx lon, y = R0 lat (radians, offset at the box's south-west corner), with
    R0 = a (1 - e^2) and kx = 2 asin(c sin(W/2)) / W, c = cos of the box's largest |latitude|,
    W its width in longitude. Why this is conservative for every pair:
    1. Ellipsoid to sphere: WGS84's line element M^2 dlat^2 + N^2 cos^2(lat) dlon^2 has both radii
       of curvature M, N >= R0, so every path is at least R0 times as long as the path with the
       same lat/lon on the unit sphere: d_WGS84 >= R0 sigma (sigma the haversine central angle).
    2. Sphere: hav sigma = hav dlat + cos lat1 cos lat2 hav dlon. g(h) = (2 asin sqrt h)^2 is
       convex (g' = 4 sigma / sin sigma grows) with g(0) = 0, hence superadditive, so
       sigma^2 >= dlat^2 + g(c^2 hav dlon) = dlat^2 + (2 asin(c sin(dlon/2)))^2.
    3. u -> asin(c sin u) is concave on [0, pi] and 0 at 0, so its slope from 0 is smallest at
       u = W/2: 2 asin(c sin(dlon/2)) >= kx dlon for all dlon in [0, W]. Together
       |F(p) - F(q)| = R0 sqrt(kx^2 dlon^2 + dlat^2) <= R0 sigma <= d_WGS84.
    Equality holds on the sphere for the corners (west, lat*) and (east, lat*) at the worst
    latitude, so kx is the largest valid scale given y = R0 lat; a narrow box gets kx ~ c, a wide
    one less (the geodesic between its far corners crosses nearer the pole). kx = 0 when the box
    touches a pole or spans all 360 degrees (its west and east edges are one meridian): then no
    map taking lon/lat rectangles to axis-aligned ones can separate longitudes safely.
    """

    def __init__(self, domain: Domain):
        self.domain = domain
        worst = max(abs(domain.south), abs(domain.north))
        c = math.sin(math.radians(90.0 - worst))                   # exactly 0 at a pole
        half = domain.width / 2.0
        sin_half = math.sin(math.radians(min(half, 180.0 - half)))  # exactly 0 for W = 360
        self.my = math.pi * WGS84_MIN_RADIUS_M / 180.0
        self.mx = self.my * 2.0 * math.asin(c * sin_half) / math.radians(domain.width)


class UniformGrid:
    """gx x gy equal cells (equal in degrees) over a domain; row j is latitude, column k longitude."""

    def __init__(self, domain: Domain, gx: int, gy: int | None = None):
        gy = gx if gy is None else gy
        if int(gx) != gx or int(gy) != gy or gx < 1 or gy < 1:
            raise ParameterError(f"grid size must be a positive integer, got {gx} x {gy}")
        self.domain = domain
        self.gx, self.gy = int(gx), int(gy)
        self.edges_x = np.linspace(domain.west, domain.east, self.gx + 1)
        self.edges_y = np.linspace(domain.south, domain.north, self.gy + 1)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.gy, self.gx)

    @property
    def n_cells(self) -> int:
        return self.gx * self.gy

    def cell_index(self, x, y):
        """Column k and row j of each point (spec 000 A0: half-open cells, last one closed)
        and a mask of points inside the domain; points outside get the nearest cell."""
        d = self.domain
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        k = _axis_cells(x, d.west, d.width, self.gx, _open(self.edges_x))
        j = _axis_cells(y, d.south, d.height, self.gy, _open(self.edges_y))
        return j, k, d.contains(x, y)

    def coarsens(self, fine: UniformGrid) -> bool:
        """True when each cell of this grid is a block of `fine`'s cells: the same domain, and
        each of this grid's lines one of fine's, bit for bit. A point's cell is then decided by
        the lines alone (`_axis_cells`; fine's cells far wider than the coordinates' rounding),
        so summing fine's counts in blocks (`pool`) is exact."""
        return (self.domain == fine.domain and fine.gx % self.gx == 0 and fine.gy % self.gy == 0
                and np.array_equal(fine.edges_x[::fine.gx // self.gx], self.edges_x)
                and np.array_equal(fine.edges_y[::fine.gy // self.gy], self.edges_y)
                and _wide(fine.edges_x) and _wide(fine.edges_y))

    def pool(self, fine_counts: np.ndarray) -> np.ndarray:
        """This grid's counts summed from those of a grid it coarsens (see `coarsens`)."""
        gy, gx = fine_counts.shape
        return fine_counts.reshape(self.gy, gy // self.gy, self.gx, gx // self.gx).sum(axis=(1, 3))

    def histogram(self, x, y, keep: np.ndarray | None = None) -> np.ndarray:
        """Exact count matrix H[j, k] (spec 000 A0) of the points (those where `keep` is True,
        when given); points outside the domain are skipped. Cell numbers are computed in blocks
        into arrays made once and reused (fresh temporaries of a block's size cost page faults
        on every allocation, about half the time), points not counted go to one extra bin that
        is dropped, and one np.bincount counts them all."""
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        d = self.domain
        flat = np.empty(x.size, dtype=np.intp)
        size = min(BIN_BLOCK, x.size)
        k, t, inside, m = np.empty(size, np.intp), np.empty(size), np.empty(size, bool), np.empty(size, bool)
        edges_x, edges_y = _open(self.edges_x), _open(self.edges_y)
        for s in range(0, x.size, BIN_BLOCK):
            xb, yb, out = x[s:s + BIN_BLOCK], y[s:s + BIN_BLOCK], flat[s:s + BIN_BLOCK]
            w = xb.size
            _axis_cells(yb, d.south, d.height, self.gy, edges_y, out, t[:w], m[:w])
            _axis_cells(xb, d.west, d.width, self.gx, edges_x, k[:w], t[:w], m[:w])
            out *= self.gx
            out += k[:w]
            d.contains(xb, yb, inside[:w], m[:w])
            if keep is not None:
                inside[:w] &= keep[s:s + BIN_BLOCK]
            out[np.logical_not(inside[:w], out=m[:w])] = self.n_cells
        counts = np.bincount(flat, minlength=self.n_cells + 1)[:self.n_cells]
        return counts.astype(np.float64).reshape(self.gy, self.gx)


def _wide(edges: np.ndarray) -> bool:
    """Cells at least a million times the rounding step of their coordinates (a millimetre at
    longitude 100): `_axis_cells` then moves a point at most one cell to its lines."""
    return bool(np.diff(edges).min() > 1e6 * np.spacing(np.abs(edges).max()))


BIN_BLOCK = 1 << 16   # points per block when binning: a block's temporaries fit in the cache


def _open(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) edge of each cell along an axis, the first lower and last upper infinite."""
    lower, upper = edges[:-1].copy(), edges[1:].copy()
    lower[0], upper[-1] = -np.inf, np.inf
    return lower, upper


def _axis_cells(v: np.ndarray, lo: float, span: float, n: int,
                edges: tuple[np.ndarray, np.ndarray], c: np.ndarray | None = None,
                t: np.ndarray | None = None, m: np.ndarray | None = None) -> np.ndarray:
    """The cell of each coordinate along one axis: the scaled offset clipped to [0, n - 1]
    (NaN to 0) and truncated, then moved by one where that disagrees with the cells' edges
    (`_open`), which queries, true counts and exports use (P12): the arithmetic can put a point
    lying exactly on a grid line in the neighbouring cell. The first lower and last upper edge
    are infinite, so no move leaves the axis. Written into `c` (intp), with `t` (float) and `m`
    (bool) as scratch, each of v's shape: made when not given."""
    c = np.empty(v.shape, np.intp) if c is None else c
    t = np.empty(v.shape) if t is None else t
    m = np.empty(v.shape, bool) if m is None else m
    np.subtract(v, lo, out=t)
    t *= n / span
    np.fmax(t, 0, out=t)   # fmax and fmin send NaN to the bound, like the floor of 0
    np.fmin(t, n - 1, out=t)
    np.copyto(c, t, casting="unsafe")          # truncated: t >= 0
    lower, upper = edges
    np.less(v, lower.take(c, out=t, mode="clip"), out=m)
    c -= m
    np.greater_equal(v, upper.take(c, out=t, mode="clip"), out=m)
    c += m
    np.minimum(c, n - 1, out=c)   # v = +inf
    return c
