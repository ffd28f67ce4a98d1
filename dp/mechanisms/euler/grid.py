"""The public Euler grid (study square, cells, rectangle snapping), k and the sensitivity Δ.
Public parameters only, so the app can show them before any data is read (spec 004 2, 4.1)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import shapely

from ...domain import Domain, Projection, UniformGrid
from ...errors import ParameterError
from ...queries import Rect, as_rect_array
from .queries import answer_cells, signed_prefix

NEIGHBOURS = ("add/remove", "replace")
MAX_CELLS = 256
SNAP_TOL = 1e-9       # cells: a drawn edge this close to a grid line lies on it


# ------------------------------------------------------------------------ sensitivity
def k_cells(bound: float, cell: float) -> int:
    """k = ceil(B/d), robust to floating noise: k(2.1, 0.7) = 3 (spec pitfall 10)."""
    if not (bound > 0 and cell > 0):
        raise ParameterError(f"the region bound B and the cell size d must be positive, got "
                             f"B={bound}, d={cell}")
    return max(1, math.ceil(bound / cell - 1e-9))


def sensitivity(bound: float, cell: float, *, semantics: str = "open",
                neighbour: str = "add/remove", variant: str = "tight"):
    """L1 sensitivity of the Euler histogram (spec 004 section 4.1).

    open semantics: (2k+1)^2 ("tight") or Lemma 2's 4.5·k(k+1) ("lemma2"); closed semantics:
    (2·floor(B/d)+3)^2. Replace-one neighbours double it.
    """
    if neighbour not in NEIGHBOURS:
        raise ParameterError(f"neighbour must be one of {list(NEIGHBOURS)}, got {neighbour!r}")
    k = k_cells(bound, cell)
    if semantics == "closed":
        m = math.floor(bound / cell + 1e-9)
        base = (2 * m + 3) ** 2
    elif semantics != "open":
        raise ParameterError(f"semantics must be 'open' or 'closed', got {semantics!r}")
    elif variant == "lemma2":
        base = 9 * k * (k + 1) // 2      # 4.5 k (k+1) is an integer
    elif variant == "tight":
        base = (2 * k + 1) ** 2
    else:
        raise ParameterError(f"sensitivity variant must be 'tight' or 'lemma2', got {variant!r}")
    return base * (2 if neighbour == "replace" else 1)


def constraint_counts(n: int) -> dict:
    """Rows of each constraint family: C1 = 4n(n-1), C2 = 4(n-1)^2, C3 = (n-1)^2 (T9)."""
    return {"C1": 4 * n * (n - 1), "C2": 4 * (n - 1) ** 2, "C3": (n - 1) ** 2}


# ------------------------------------------------------------------------- the grid
@dataclass(frozen=True)
class EulerGrid:
    """The public grid: an n x n square of cells of side d (km) centred in the domain.

    `square` is the study square as a lon/lat box; the domain's projection is equirectangular,
    so equal-metre cells are equal-degree cells and `uniform_grid()` draws them exactly.
    """

    domain: Domain
    square: Domain
    n: int
    cell_km: float
    bound_km: float

    @property
    def side_km(self) -> float:
        return self.n * self.cell_km

    @property
    def k(self) -> int:
        return k_cells(self.bound_km, self.cell_km)

    @property
    def bound_cells(self) -> float:
        return self.bound_km / self.cell_km

    @property
    def shape(self) -> tuple[int, int]:
        m = 2 * self.n - 1
        return (m, m)

    def key(self) -> tuple:
        return (self.square.bounds, self.n, self.cell_km, self.bound_km)

    def uniform_grid(self) -> UniformGrid:
        return UniformGrid(self.square, self.n)

    def to_cells(self, lon, lat):
        """lon/lat -> grid units (cells; origin at the square's SW corner)."""
        s = self.square
        return ((np.asarray(lon, float) - s.west) / s.width * self.n,
                (np.asarray(lat, float) - s.south) / s.height * self.n)

    def to_lonlat(self, u, v):
        s = self.square
        return (s.west + np.asarray(u, float) * s.width / self.n,
                s.south + np.asarray(v, float) * s.height / self.n)

    def geometries_to_cells(self, geoms):
        s, n = self.square, self.n
        scale = np.array([n / s.width, n / s.height])
        origin = np.array([s.west, s.south])
        return shapely.transform(geoms, lambda c: (c - origin) * scale)

    def cell_rect(self, r0: int, r1: int, c0: int, c1: int) -> Rect:
        """The lon/lat rectangle of rows r0..r1 and columns c0..c1 (inclusive)."""
        lon, lat = self.to_lonlat(np.array([c0, c1 + 1]), np.array([r0, r1 + 1]))
        return Rect(float(lon[0]), float(lat[0]), float(lon[1]), float(lat[1]))

    def snap_cells(self, rects, mode: str = "outward") -> np.ndarray:
        """(q, 4) int [r0, r1, c0, c1] (inclusive) per rectangle; -1s where it misses the grid.

        Outward (the paper's semantics): every cell the rectangle overlaps; an edge lying on
        a grid line does not take the next cell (T16). Inward: only cells inside the
        rectangle, falling back to outward when none is.
        """
        if mode not in ("outward", "inward"):
            raise ParameterError(f"snap mode must be 'outward' or 'inward', got {mode!r}")
        r = as_rect_array(rects)
        u0, v0 = self.to_cells(r[:, 0], r[:, 1])
        u1, v1 = self.to_cells(r[:, 2], r[:, 3])
        out = _snap_outward(u0, u1, v0, v1, self.n)
        if mode == "inward":
            inner = np.column_stack([np.ceil(v0 - SNAP_TOL), np.floor(v1 + SNAP_TOL) - 1,
                                     np.ceil(u0 - SNAP_TOL), np.floor(u1 + SNAP_TOL) - 1])
            inner = _clip_cells(inner, self.n)
            ok = inner[:, 0] >= 0
            out[ok] = inner[ok]
        return out

    def snap(self, rect: Rect, mode: str = "outward") -> Rect | None:
        """The snapped rectangle (a union of whole cells) in lon/lat, or None off the grid."""
        r0, r1, c0, c1 = self.snap_cells(rect, mode)[0]
        return None if r0 < 0 else self.cell_rect(r0, r1, c0, c1)

    def answer(self, G, rects, mode: str = "outward") -> np.ndarray:
        """F - E + V on the snapped rectangles for any doubled-grid array (0 off the grid)."""
        return answer_cells(signed_prefix(G), self.snap_cells(rects, mode))

    def to_dict(self) -> dict:
        return {"cells_per_side": self.n, "cell_km": self.cell_km, "side_km": self.side_km,
                "bound_km": self.bound_km, "k": self.k, "square": self.square.to_dict()}


def _clip_cells(c, n):
    """Clip [r0, r1, c0, c1] rows to the grid; empty or off-grid rows become -1s."""
    c = np.asarray(c, float)
    empty = (c[:, 1] < c[:, 0]) | (c[:, 3] < c[:, 2]) | (c[:, 1] < 0) | (c[:, 3] < 0) | \
        (c[:, 0] > n - 1) | (c[:, 2] > n - 1)
    out = np.clip(c, 0, n - 1).astype(np.int64)
    out[empty] = -1
    return out


def _snap_outward(u0, u1, v0, v1, n):
    c0 = np.floor(u0 + SNAP_TOL)
    c1 = np.maximum(np.ceil(u1 - SNAP_TOL) - 1, c0)     # a zero-width box keeps its cell
    r0 = np.floor(v0 + SNAP_TOL)
    r1 = np.maximum(np.ceil(v1 - SNAP_TOL) - 1, r0)
    return _clip_cells(np.column_stack([r0, r1, c0, c1]), n)


def make_grid(domain: Domain, cells: int = 20, cell_km: float = 0.0,
              bound_km: float = 2.0) -> EulerGrid:
    """The public Euler grid for a domain (spec 004 section 2, pitfall 10).

    The study square is centred in the domain. With cell_km = 0 its side A is the domain's
    shorter side and d = A / cells; with cell_km = d > 0, n = floor(A_max / d) and A = n·d,
    so A/d is always an integer.
    """
    if not isinstance(domain, Domain):
        raise ParameterError(f"domain must be a dp.Domain, got {type(domain).__name__}")
    w_m, h_m = domain.size_m()
    a_max = min(w_m, h_m) / 1000.0
    if cell_km and cell_km > 0:
        n = math.floor(a_max / cell_km + 1e-9)
        if n < 1:
            raise ParameterError(f"cell size d = {cell_km:g} km is larger than the study square "
                                 f"({a_max:.3f} km, the domain's shorter side); choose d <= "
                                 f"{a_max:.3f} km")
        if n > MAX_CELLS:
            raise ParameterError(f"cell size d = {cell_km:g} km gives {n} cells per side, more "
                                 f"than {MAX_CELLS}; choose d >= {a_max / MAX_CELLS:.3g} km")
        d = float(cell_km)
    else:
        n = int(cells)
        if not 1 <= n <= MAX_CELLS:
            raise ParameterError(f"cells per side must be in [1, {MAX_CELLS}], got {cells}")
        d = a_max / n
    if not bound_km > 0:
        raise ParameterError(f"the region bound B must be positive, got {bound_km}")
    side_m = n * d * 1000.0
    proj = Projection(domain)
    x0, y0 = (w_m - side_m) / 2, (h_m - side_m) / 2
    west = domain.west + x0 / proj.mx
    south = domain.south + y0 / proj.my
    east = min(domain.east, west + side_m / proj.mx)
    north = min(domain.north, south + side_m / proj.my)
    square = Domain(west, south, east, north, name=f"{domain.name} (Euler study square)",
                    leaky=domain.leaky)
    return EulerGrid(domain, square, n, d, float(bound_km))
