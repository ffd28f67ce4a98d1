"""Euler histograms for users' convex regions (paper 004, Fanaeepour & Rubinstein).

One convex region ("body") per user. An Euler histogram stores, on an n x n grid, a count per
face (cell), per interior edge and per interior vertex: the number of bodies that touch it. For
a query made of whole cells, faces - edges + vertices inside the query is exactly the number of
bodies meeting it (spec 004 section 3). The pipeline:

- Euler: the exact counts H, stored as the (2n-1) x (2n-1) "doubled grid" G (section 2):
  G[2r, 2c] face, G[2r, 2c+1] vertical edge, G[2r+1, 2c] horizontal edge, G[2r+1, 2c+1] vertex.
  Open touch semantics (positive-area overlap) for faces; edges and vertices are derived from
  the faces (section 3.2), which is exact for convex bodies and keeps the sensitivity tight.
- DiffPriv: discrete Laplace noise of scale Δ/ε (integer, exact sampler) on every component,
  negatives truncated to 0 (section 4). The grid depends only on public parameters; the number
  of users is neither used nor exported.
- LinProg: least-absolute-deviation fit under the consistency constraints C1-C3 (section 5).
- Round: snap, round half up, repair, and check that no constraint is violated (section 6).

Public parameters: the study square (the largest square centred in the domain, or n·d when a
cell size is given), the cell size d = A/n, the region bound B and the neighbour model. With
k = ceil(B/d) a body touches at most a (k+1) x (k+1) block, so Δ = (2k+1)^2 (Lemma 2's looser
4.5·k(k+1) is an option); replace-one neighbours double Δ (section 4.1). `plan()` computes these
before any data is read, for the app to show.

LinProg runs in one HiGHS call (scipy.optimize.linprog), which reports no progress of its own;
`EulerRelease.compute(stage, progress=...)` calls `progress(message, fraction)` at the stage
boundaries, so a caller can show an indeterminate indicator and cache the result.
"""
from __future__ import annotations

import copy
import functools
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import shapely
from scipy.optimize import linprog

from ..budget import Ledger
from ..domain import Domain, Projection, UniformGrid
from ..errors import ParameterError
from ..noise import discrete_laplace, discrete_laplace_variance
from ..queries import Rect, as_rect_array
from .base import USER_REGION, MechanismSpec, Param, Release, noise_half_width

STAGES = ("diffpriv", "linprog", "round")
STAGE_LABELS = {"exact": "Euler (exact, not private)", "diffpriv": "DiffPriv",
                "linprog": "LinProg", "round": "Round"}
NEIGHBOURS = ("add/remove", "replace")
MAX_CELLS = 256
RHO = 1e-6            # buffer of zero-area bodies, in cells (rho = 1e-6 d, section 3.2)
SNAP_TOL = 1e-9       # cells: a drawn edge this close to a grid line lies on it
CHUNK = 1 << 21       # elements per vectorised block of the face-touch test
GUARD_NOTE = "footprint guard: clipped to the k+1 rows/columns with the largest area"


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


def plan(domain: Domain, params: dict | None = None, epsilon: float | None = None) -> dict:
    """Everything public about an Euler release before it runs (no data is read).

    Returns n, d, A, B, k, the sensitivity Δ (and Lemma 2's value), the discrete Laplace scale
    Δ/ε when epsilon is given, the histogram and LP sizes, and notes for the user.
    """
    p = EULER.resolve_params(params)
    g = make_grid(domain, p["cells"], p["cell_km"], p["bound_km"])
    delta = sensitivity(p["bound_km"], g.cell_km, neighbour=p["neighbour"],
                        variant=p["sensitivity"])
    n = g.n
    cc = constraint_counts(n) if p["include_c3"] else {**constraint_counts(n), "C3": 0}
    m = (2 * n - 1) ** 2
    out = {
        "cells_per_side": n, "cell_km": g.cell_km, "side_km": g.side_km,
        "bound_km": p["bound_km"], "k": g.k, "sensitivity": delta,
        "sensitivity_tight": sensitivity(p["bound_km"], g.cell_km, neighbour=p["neighbour"]),
        "sensitivity_lemma2": sensitivity(p["bound_km"], g.cell_km, neighbour=p["neighbour"],
                                          variant="lemma2"),
        "neighbour": p["neighbour"], "components": m,
        "faces": n * n, "edges": 2 * n * (n - 1), "vertices": (n - 1) ** 2,
        "constraints": cc, "lp_variables": 2 * m if p["norm"] == "l1" else m + 1,
        "lp_rows": 2 * m + sum(cc.values()), "square": g.square.to_dict(),
        "notes": [],
    }
    if epsilon is not None:
        out["epsilon"] = float(epsilon)
        out["scale"] = delta / float(epsilon)
    w_m, h_m = domain.size_m()
    if abs(w_m - h_m) > 1e-6 * max(w_m, h_m) or g.side_km * 1000 < min(w_m, h_m) * (1 - 1e-9):
        out["notes"].append(f"the study square ({g.side_km:.3f} km) is centred in the domain "
                            f"({w_m / 1000:.3f} x {h_m / 1000:.3f} km); regions outside it are "
                            "not counted")
    if p["neighbour"] == "replace":
        out["notes"].append("replace-one neighbours: Δ doubled")
    if g.k >= 6:
        out["notes"].append(f"k = {g.k}: Δ grows as (2B/d)^2; a coarser d or a smaller B "
                            "lowers the noise (spec pitfall 19)")
    return out


def explain(domain: Domain, params: dict, epsilon: float) -> str:
    """k, the sensitivity and the noise scale the app shows before release (no data read)."""
    p = plan(domain, params, epsilon)
    text = (f"{p['cells_per_side']}×{p['cells_per_side']} cells of {p['cell_km']:.3g} km; "
            f"k = ⌈B/d⌉ = {p['k']}; sensitivity Δ = {p['sensitivity']:g}; discrete Laplace scale "
            f"Δ/ε = {p['scale']:.3g} on each of {p['components']:,} counts")
    return "; ".join([text] + p["notes"])


# -------------------------------------------------------------------- convex bodies
class ConvexBodies:
    """Convex bodies as ragged vertex rings (no closing vertex), for vectorised tests.

    `touch_*` use the separating-axis theorem: the interiors of two convex polygons are
    disjoint iff one of their edge normals separates them, so a body meets an axis-aligned box
    iff the bounding boxes overlap and no edge normal of the body separates it from the box.
    Points and segments ("degenerate") are tested as closed sets.
    """

    def __init__(self, coords, start, count, degenerate, geoms=None):
        self.coords = np.asarray(coords, float).reshape(-1, 2)
        self.start = np.asarray(start, np.int64)
        self.count = np.asarray(count, np.int64)
        self.degenerate = np.asarray(degenerate, bool)
        self.geoms = geoms
        n = len(self.count)
        if n and self.count.min() < 1:
            raise ValueError("every body needs at least one vertex")
        if n:
            lo = np.minimum.reduceat(self.coords, self.start, axis=0)
            hi = np.maximum.reduceat(self.coords, self.start, axis=0)
            self.bounds = np.column_stack([lo, hi])
            body = np.repeat(np.arange(n), self.count)
            nxt = np.arange(len(self.coords)) + 1
            last = self.start + self.count - 1
            nxt[last] = self.start
            a, b = self.coords, self.coords[nxt]
            o = self.coords[self.start][body]
            cross = (a[:, 0] - o[:, 0]) * (b[:, 1] - o[:, 1]) - (b[:, 0] - o[:, 0]) * (a[:, 1] - o[:, 1])
            self.area2 = np.bincount(body, cross, minlength=n)
        else:
            self.bounds = np.zeros((0, 4))
            self.area2 = np.zeros(0)
        self.orient = np.where(self.area2 < 0, -1.0, 1.0)

    def __len__(self):
        return len(self.count)

    @classmethod
    def from_geometries(cls, geoms) -> "ConvexBodies":
        """From shapely Polygons (convex), LineStrings and Points; zero-area polygons count as
        degenerate. Other types raise ValueError."""
        geoms = np.asarray(geoms, dtype=object)
        n = len(geoms)
        if n == 0:
            return cls(np.zeros((0, 2)), np.zeros(0, int), np.zeros(0, int), np.zeros(0, bool), geoms)
        tid = shapely.get_type_id(geoms)
        if np.any(~np.isin(tid, (0, 1, 3))) or np.any(shapely.is_empty(geoms)):
            raise ValueError("convex bodies must be non-empty Polygons, LineStrings or Points")
        poly = tid == 3
        parts = geoms.copy()
        parts[poly] = shapely.get_exterior_ring(geoms[poly])
        coords, idx = shapely.get_coordinates(parts, return_index=True)
        cnt = np.bincount(idx, minlength=n)
        first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        pos = np.arange(len(idx)) - first[idx]
        keep = ~(poly[idx] & (pos == cnt[idx] - 1))      # drop each ring's closing vertex
        coords, idx = coords[keep], idx[keep]
        cnt = np.bincount(idx, minlength=n)
        start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        out = cls(coords, start, cnt, ~poly, geoms)
        out.degenerate |= out.area2 == 0
        return out

    def subset(self, idx) -> "ConvexBodies":
        idx = np.asarray(idx, np.int64)
        cnt = self.count[idx]
        start = np.concatenate([[0], np.cumsum(cnt)[:-1]]).astype(np.int64)
        flat = np.repeat(self.start[idx] - start, cnt) + np.arange(cnt.sum())
        return ConvexBodies(self.coords[flat], start, cnt, self.degenerate[idx],
                            None if self.geoms is None else self.geoms[idx])

    def edges(self, idx):
        """Outward edge normals (nx, ny), offsets h (relative to each body's first vertex, o)
        and a validity mask, padded to the largest vertex count among `idx`."""
        cnt = self.count[idx]
        V = int(cnt.max()) if len(cnt) else 1
        pos = np.arange(V)[None, :]
        st = self.start[idx][:, None]
        c = cnt[:, None]
        a = self.coords[st + np.minimum(pos, c - 1)]
        b = self.coords[st + np.where(pos + 1 < c, pos + 1, 0)]
        o = self.coords[self.start[idx]]
        ex, ey = b[..., 0] - a[..., 0], b[..., 1] - a[..., 1]
        valid = (pos < c) & ((ex != 0) | (ey != 0))
        s = self.orient[idx][:, None]
        nx, ny = ey * s, -ex * s
        h = nx * (a[..., 0] - o[:, None, 0]) + ny * (a[..., 1] - o[:, None, 1])
        return nx, ny, h, valid, o

    def touch_rect(self, rect, idx=None) -> np.ndarray:
        """Bool per body (of idx): the body meets the rectangle [w, s, e, n] (open semantics
        for bodies with area, closed for points and segments)."""
        w, s, e, n = (float(v) for v in rect)
        idx = np.arange(len(self)) if idx is None else np.asarray(idx, np.int64)
        bx = self.bounds[idx]
        deg = self.degenerate[idx]
        cand = np.where(deg, (bx[:, 0] <= e) & (bx[:, 2] >= w) & (bx[:, 1] <= n) & (bx[:, 3] >= s),
                        (bx[:, 0] < e) & (bx[:, 2] > w) & (bx[:, 1] < n) & (bx[:, 3] > s))
        out = np.zeros(len(idx), bool)
        ci = np.flatnonzero(cand)
        for part in np.array_split(ci, max(1, len(ci) // 20000)):
            if not len(part):
                continue
            nx, ny, h, valid, o = self.edges(idx[part])
            mb = nx * (np.where(nx > 0, w, e) - o[:, None, 0]) + \
                ny * (np.where(ny > 0, s, n) - o[:, None, 1])
            closed = deg[part][:, None]
            sep = np.where(closed, mb > h, mb >= h) & valid
            out[part] = ~sep.any(axis=1)
        return out

    def cell_ranges(self, n: int, closed=False):
        """Candidate cells per body in grid units: rows r0..r1, columns c0..c1 (inclusive),
        clipped to the grid; open: cells whose interior meets the bounding box."""
        b = self.bounds
        if np.ndim(closed) == 0:
            closed = np.full(len(self), bool(closed))
        c0 = np.where(closed, np.ceil(b[:, 0]) - 1, np.floor(b[:, 0]))
        c1 = np.where(closed, np.floor(b[:, 2]), np.ceil(b[:, 2]) - 1)
        r0 = np.where(closed, np.ceil(b[:, 1]) - 1, np.floor(b[:, 1]))
        r1 = np.where(closed, np.floor(b[:, 3]), np.ceil(b[:, 3]) - 1)
        lim = lambda v: np.clip(v, -1, n).astype(np.int64)   # noqa: E731
        r0, r1, c0, c1 = (np.maximum(lim(r0), 0), np.minimum(lim(r1), n - 1),
                          np.maximum(lim(c0), 0), np.minimum(lim(c1), n - 1))
        return r0, r1, c0, c1

    def touch_blocks(self, n: int, closed: bool = False, idx=None):
        """Yield (body indices, r0, c0, T) with T[b, i, j] = body b touches face
        (r0[b]+i, c0[b]+j): the face-touch sets, vectorised per bounding-box block.

        Bodies are grouped by block shape and vertex-count class so each group is one
        (bodies x edges x rows x cols) array of at most CHUNK elements.
        """
        r0, r1, c0, c1 = self.cell_ranges(n, closed)
        hh, ww = r1 - r0 + 1, c1 - c0 + 1
        ok = (hh > 0) & (ww > 0)
        if idx is not None:
            m = np.zeros(len(self), bool)
            m[idx] = True
            ok &= m
        ids = np.flatnonzero(ok)
        if not len(ids):
            return
        vclass = np.ceil(np.log2(np.maximum(self.count[ids], 1))).astype(np.int64)
        key = (hh[ids] * (n + 1) + ww[ids]) * 64 + vclass
        order = np.argsort(key, kind="stable")
        ids, key = ids[order], key[order]
        bounds = np.flatnonzero(np.diff(key)) + 1
        for grp in np.split(ids, bounds):
            h, w = int(hh[grp[0]]), int(ww[grp[0]])
            V = int(self.count[grp].max())
            step = max(1, CHUNK // (h * w * V))
            for i in range(0, len(grp), step):
                b = grp[i:i + step]
                nx, ny, hv, valid, o = self.edges(b)
                cols = c0[b][:, None] + np.arange(w)[None, :] - o[:, 0:1]     # (B, w)
                rows = r0[b][:, None] + np.arange(h)[None, :] - o[:, 1:2]     # (B, h)
                X = nx[..., None] * cols[:, None, :] + np.minimum(nx, 0)[..., None]
                Y = ny[..., None] * rows[:, None, :] + np.minimum(ny, 0)[..., None]
                mb = Y[..., :, None] + X[..., None, :]                        # (B, V, h, w)
                hv4 = hv[..., None, None]
                sep = (mb > hv4) if closed else (mb >= hv4)
                sep &= valid[..., None, None]
                yield b, r0[b], c0[b], ~sep.any(axis=1)


# ---------------------------------------------------------------------- Euler build
def derive(T) -> np.ndarray:
    """Doubled-grid footprint from face-touch masks (..., h, w) -> (..., 2h-1, 2w-1) (3.2)."""
    T = np.asarray(T, bool)
    h, w = T.shape[-2:]
    D = np.zeros(T.shape[:-2] + (2 * h - 1, 2 * w - 1), bool)
    D[..., 0::2, 0::2] = T
    D[..., 0::2, 1::2] = T[..., :, :-1] & T[..., :, 1:]
    D[..., 1::2, 0::2] = T[..., :-1, :] & T[..., 1:, :]
    D[..., 1::2, 1::2] = T[..., :-1, :-1] & T[..., 1:, :-1] & T[..., :-1, 1:] & T[..., 1:, 1:]
    return D


def _as_geoms(bodies):
    if isinstance(bodies, ConvexBodies):
        return bodies.geoms
    return np.asarray(bodies, dtype=object)


def _buffer_degenerate(geoms):
    """Zero-area bodies buffered by rho = 1e-6 d (grid units), section 3.2."""
    geoms = np.asarray(geoms, dtype=object).copy()
    if not len(geoms):
        return geoms, np.zeros(0, bool)
    deg = (shapely.get_type_id(geoms) != 3) | (shapely.area(geoms) == 0)
    if deg.any():
        geoms[deg] = shapely.buffer(geoms[deg], RHO, quad_segs=2)
    return geoms, deg


def _guard(T, r0, c0, k, geoms, b):
    """Footprint guard (3.2): a touch set spanning more than k+1 rows (columns) is cut to the
    k+1 consecutive rows (columns) where the body has the largest area, ties to the lower
    index. For open semantics the clipped body's touch set is T restricted to the window.
    Returns the number of bodies clipped."""
    m = k + 1
    rows_any, cols_any = T.any(axis=2), T.any(axis=1)

    def span(a):
        first = np.argmax(a, axis=1)
        last = a.shape[1] - 1 - np.argmax(a[:, ::-1], axis=1)
        return first, last - first + 1

    fr, sr = span(rows_any)
    fc, sc = span(cols_any)
    bad = np.flatnonzero((sr > m) | (sc > m))
    for i in bad:   # rare: only floating noise or buffered zero-area bodies get here
        g = geoms[b[i]]
        keep_r = np.zeros(T.shape[1], bool)
        keep_c = np.zeros(T.shape[2], bool)
        lo, hi = shapely.bounds(g)[[0, 2]]
        if sr[i] > m:
            starts = np.arange(fr[i], fr[i] + sr[i] - m + 1)
            wins = shapely.intersection(g, shapely.box(lo - 1, r0[i] + starts, hi + 1,
                                                       r0[i] + starts + m))
            score = shapely.area(wins) + 1e-12 * shapely.length(wins)
            j = int(starts[np.argmax(score)])
            keep_r[j:j + m] = True
            g = shapely.intersection(g, shapely.box(lo - 1, r0[i] + j, hi + 1, r0[i] + j + m))
        else:
            keep_r[:] = True
        if sc[i] > m:
            blo, bhi = shapely.bounds(g)[[1, 3]]
            starts = np.arange(fc[i], fc[i] + sc[i] - m + 1)
            wins = shapely.intersection(g, shapely.box(c0[i] + starts, blo - 1,
                                                       c0[i] + starts + m, bhi + 1))
            score = shapely.area(wins) + 1e-12 * shapely.length(wins)
            j = int(starts[np.argmax(score)])
            keep_c[j:j + m] = True
        else:
            keep_c[:] = True
        T[i] &= keep_r[:, None] & keep_c[None, :]
    return len(bad)


def face_masks(bodies, n: int, *, semantics: str = "open", k: int | None = None) -> np.ndarray:
    """(N, n, n) face-touch masks T(x) per body, in grid units (cells of side 1 from the
    origin). Zero-area bodies are buffered by rho under open semantics; with k the footprint
    guard is applied. For tests and small data; `euler_build` never materialises this."""
    geoms = _as_geoms(bodies)
    if semantics == "open":
        geoms, _ = _buffer_degenerate(geoms)
    cb = ConvexBodies.from_geometries(geoms)
    out = np.zeros((len(cb), n, n), bool)
    for b, r0, c0, T in cb.touch_blocks(n, closed=semantics == "closed"):
        if k is not None:
            _guard(T, r0, c0, k, cb.geoms, b)
        h, w = T.shape[1:]
        ii = r0[:, None] + np.arange(h)
        jj = c0[:, None] + np.arange(w)
        out[b[:, None, None], ii[:, :, None], jj[:, None, :]] = T
    return out


def _is_axis_rect(cb: ConvexBodies) -> np.ndarray:
    """Bodies that are axis-aligned rectangles with positive area (the fast path)."""
    out = np.zeros(len(cb), bool)
    four = np.flatnonzero((cb.count == 4) & ~cb.degenerate)
    if not len(four):
        return out
    v = cb.coords[cb.start[four][:, None] + np.arange(4)]
    bx = cb.bounds[four]
    onx = (v[..., 0] == bx[:, None, 0]) | (v[..., 0] == bx[:, None, 2])
    ony = (v[..., 1] == bx[:, None, 1]) | (v[..., 1] == bx[:, None, 3])
    out[four] = onx.all(1) & ony.all(1) & (bx[:, 2] > bx[:, 0]) & (bx[:, 3] > bx[:, 1])
    return out


def euler_build(bodies, n: int, *, k: int | None = None, semantics: str = "open",
                return_stats: bool = False):
    """Exact Euler histogram G ((2n-1) x (2n-1) int64) of convex bodies in grid units.

    Algorithm 1 with the touch sets computed per body bounding box (vectorised), edges and
    vertices derived from faces, axis-aligned rectangles through a 2-D difference array, and
    the footprint guard when k is given. `bodies`: shapely geometries (convex Polygons,
    LineStrings, Points) in grid units, or a ConvexBodies with geometries.
    """
    if semantics not in ("open", "closed"):
        raise ParameterError(f"semantics must be 'open' or 'closed', got {semantics!r}")
    geoms = _as_geoms(bodies)
    m = 2 * n - 1
    stats = {"bodies": int(len(geoms)), "guard_clipped": 0, "rectangles": 0, "touching": 0}
    if semantics == "open":
        geoms, deg = _buffer_degenerate(geoms)
        stats["buffered"] = int(deg.sum())
    cb = ConvexBodies.from_geometries(geoms)
    flat = np.zeros(m * m, np.int64)
    r0, r1, c0, c1 = cb.cell_ranges(n, semantics == "closed")
    fast = _is_axis_rect(cb) if semantics == "open" else np.zeros(len(cb), bool)
    fast &= (r1 >= r0) & (c1 >= c0)
    if k is not None:
        fast &= (r1 - r0 + 1 <= k + 1) & (c1 - c0 + 1 <= k + 1)
    if fast.any():   # difference array over the doubled grid, one cumsum
        diff = np.zeros((m + 1, m + 1), np.int64)
        a0, a1, b0, b1 = 2 * r0[fast], 2 * r1[fast] + 1, 2 * c0[fast], 2 * c1[fast] + 1
        np.add.at(diff, (a0, b0), 1)
        np.add.at(diff, (a0, b1), -1)
        np.add.at(diff, (a1, b0), -1)
        np.add.at(diff, (a1, b1), 1)
        flat += diff.cumsum(0).cumsum(1)[:m, :m].ravel()
        stats["rectangles"] = int(fast.sum())
        stats["touching"] += int(fast.sum())
    rest = np.flatnonzero(~fast)
    for b, br0, bc0, T in cb.touch_blocks(n, semantics == "closed", idx=rest):
        if k is not None:
            stats["guard_clipped"] += _guard(T, br0, bc0, k, cb.geoms, b)
        stats["touching"] += int(T.any(axis=(1, 2)).sum())
        D = derive(T)
        h2, w2 = D.shape[1:]
        ii = 2 * br0[:, None] + np.arange(h2)
        jj = 2 * bc0[:, None] + np.arange(w2)
        pos = ii[:, :, None] * m + jj[:, None, :]
        flat += np.bincount(pos[D], minlength=m * m)
    G = flat.reshape(m, m)
    return (G, stats) if return_stats else G


def _diameters(geoms) -> np.ndarray:
    """Exact diameters (largest vertex-to-vertex distance) of polygons."""
    cb = ConvexBodies.from_geometries(geoms)
    out = np.zeros(len(cb))
    vclass = np.ceil(np.log2(np.maximum(cb.count, 1))).astype(int)
    for vc in np.unique(vclass):
        ids = np.flatnonzero(vclass == vc)
        V = int(cb.count[ids].max())
        step = max(1, CHUNK // (V * V))
        for i in range(0, len(ids), step):
            b = ids[i:i + step]
            P = cb.coords[cb.start[b][:, None] + np.minimum(np.arange(V), cb.count[b][:, None] - 1)]
            d2 = ((P[:, :, None, :] - P[:, None, :, :]) ** 2).sum(-1)
            out[b] = np.sqrt(d2.max(axis=(1, 2)))
    return out


def prepare_bodies(geoms, n: int, bound_cells: float):
    """Per-record pre-processing of bodies in grid units (spec 004 section 7 steps 1-2).

    Zero-area bodies are buffered by rho; bodies are clipped to the study square [0, n]^2
    and dropped without a positive-area overlap; a body with diameter above B is clipped to
    the disc of diameter B about its centroid. Returns (geoms, kept index, stats).
    """
    geoms, deg = _buffer_degenerate(geoms)
    stats = {"regions": int(len(geoms)), "zero_area_buffered": int(deg.sum())}
    if not len(geoms):
        stats.update(outside_square=0, clipped_to_square=0, clipped_to_bound=0)
        return geoms, np.zeros(0, np.int64), stats
    bx = shapely.bounds(geoms)
    out_sq = (bx[:, 0] < 0) | (bx[:, 1] < 0) | (bx[:, 2] > n) | (bx[:, 3] > n)
    if out_sq.any():
        geoms[out_sq] = shapely.clip_by_rect(geoms[out_sq], 0.0, 0.0, float(n), float(n))
    keep = shapely.area(geoms) > 0
    stats["outside_square"] = int((~keep).sum())
    stats["clipped_to_square"] = int((out_sq & keep).sum())
    idx = np.flatnonzero(keep)
    geoms = geoms[idx]
    multi = shapely.get_type_id(geoms) != 3     # clipping a convex body gives one polygon,
    if multi.any():                               # but rounding could split it: keep the hull
        geoms[multi] = shapely.convex_hull(geoms[multi])
    bx = shapely.bounds(geoms)
    diag = np.hypot(bx[:, 2] - bx[:, 0], bx[:, 3] - bx[:, 1])
    cand = np.flatnonzero(diag > bound_cells)
    clipped = 0
    if len(cand):
        too_big = cand[_diameters(geoms[cand]) > bound_cells * (1 + 1e-12)]
        if len(too_big):
            disc = shapely.buffer(shapely.centroid(geoms[too_big]), bound_cells / 2 * (1 - 1e-9),
                                  quad_segs=16)
            geoms[too_big] = shapely.convex_hull(shapely.intersection(geoms[too_big], disc))
            clipped = len(too_big)
    stats["clipped_to_bound"] = clipped
    return geoms, idx, stats


# ------------------------------------------------------------------------- queries
def signed_prefix(G) -> np.ndarray:
    """2-D prefix sums of sigma ⊙ G with a zero first row and column (3.3)."""
    G = np.asarray(G)
    m = G.shape[0]
    sign = np.where((np.add.outer(np.arange(m), np.arange(m)) % 2) == 0, 1, -1)
    S = G * sign
    P = np.zeros((m + 1, m + 1), dtype=np.float64 if G.dtype.kind == "f" else np.int64)
    P[1:, 1:] = S.cumsum(0).cumsum(1)
    return P


def answer_cells(P, cells) -> np.ndarray:
    """N(Q) for cell ranges [r0, r1, c0, c1] (inclusive) from a signed prefix array;
    rows of -1 (off the grid) answer 0."""
    c = np.atleast_2d(np.asarray(cells, np.int64))
    ok = c[:, 0] >= 0
    r0, r1, c0, c1 = (np.where(ok, c[:, i], 0) for i in range(4))
    a, b, cc, d = 2 * r0, 2 * r1 + 1, 2 * c0, 2 * c1 + 1
    v = P[b, d] - P[a, d] - P[b, cc] + P[a, cc]
    return np.where(ok, v, 0)


def query(G, r0: int, r1: int, c0: int, c1: int):
    """N(Q) for rows r0..r1 and columns c0..c1 (inclusive): the direct signed sum (3.3)."""
    G = np.asarray(G)
    block = G[2 * r0:2 * r1 + 1, 2 * c0:2 * c1 + 1]
    i, j = np.indices(block.shape)
    return (block * np.where((i + j) % 2 == 0, 1, -1)).sum()


# ----------------------------------------------------------------- DiffPriv (Alg. 2)
def diffpriv(H, epsilon: float, delta: float, rng, truncate: bool = True) -> np.ndarray:
    """H + discrete Laplace(Δ/ε) on every component (including zeros), negatives truncated to 0.

    H holds integer counts and the noise is integer, so no low bits of a double carry the
    counts; the caller charges the ledger before calling this.
    """
    H = np.asarray(H)
    ints = np.rint(H).astype(np.int64)
    if not np.array_equal(ints, H):
        raise ParameterError("DiffPriv needs whole-number counts")
    noisy = ints + discrete_laplace(rng, delta / epsilon, ints.shape)
    return np.maximum(noisy, 0) if truncate else noisy


# ------------------------------------------------------------ constraints, LinProg
def _parts(G):
    G = np.asarray(G)
    return G[0::2, 0::2], G[0::2, 1::2], G[1::2, 0::2], G[1::2, 1::2]   # F, Ev, Eh, V


def split_components(G) -> dict:
    """faces (n, n), vertical edges (n, n-1), horizontal edges (n-1, n), vertices (n-1, n-1)
    of a doubled-grid array (copies): e.g. for drawing the exact histogram's faces."""
    F, Ev, Eh, V = _parts(G)
    return {"faces": F.copy(), "vertical_edges": Ev.copy(), "horizontal_edges": Eh.copy(),
            "vertices": V.copy()}


def violations(G, tol: float = 1e-9) -> dict:
    """Violated rows per family: C1 edge <= each incident face, C2 vertex <= each incident
    edge, C3 the 2x2 Euler count around each vertex >= 0 (section 5.1)."""
    F, Ev, Eh, V = _parts(np.asarray(G, dtype=np.float64))
    c1 = sum(int((a > tol).sum()) for a in (Ev - F[:, :-1], Ev - F[:, 1:], Eh - F[:-1], Eh - F[1:]))
    c2 = sum(int((a > tol).sum()) for a in (V - Ev[:-1], V - Ev[1:], V - Eh[:, :-1], V - Eh[:, 1:]))
    c3 = -(F[:-1, :-1] + F[:-1, 1:] + F[1:, :-1] + F[1:, 1:]) + \
        (Ev[:-1] + Ev[1:] + Eh[:, :-1] + Eh[:, 1:]) - V
    return {"C1": c1, "C2": c2, "C3": int((c3 > tol).sum())}


@functools.lru_cache(maxsize=8)
def constraint_matrix(n: int, include_c3: bool = True):
    """Sparse C with one row per constraint "C @ vec(G) <= 0" (section 5.3), and the row
    slice of each family. Do not modify the returned matrix (it is cached)."""
    m = 2 * n - 1
    I = np.arange(m * m).reshape(m, m)
    v = I[1::2, 1::2]
    fam = {
        "C1": [(I[0::2, 1::2], I[0::2, 0:-1:2]), (I[0::2, 1::2], I[0::2, 2::2]),
               (I[1::2, 0::2], I[0:-1:2, 0::2]), (I[1::2, 0::2], I[2::2, 0::2])],
        "C2": [(v, I[2::2, 1::2]), (v, I[0:-1:2, 1::2]), (v, I[1::2, 0:-1:2]), (v, I[1::2, 2::2])],
    }
    rows, cols, vals, slices, r = [], [], [], {}, 0
    for name in ("C1", "C2"):
        r_start = r
        for a, b in fam[name]:
            a, b = a.ravel(), b.ravel()
            ri = np.arange(r, r + a.size)
            rows += [ri, ri]
            cols += [a, b]
            vals += [np.ones(a.size), -np.ones(a.size)]
            r += a.size
        slices[name] = slice(r_start, r)
    if include_c3:
        ri = np.arange(r, r + v.size)
        terms = [(I[0:-1:2, 0:-1:2], -1), (I[0:-1:2, 2::2], -1), (I[2::2, 0:-1:2], -1),
                 (I[2::2, 2::2], -1), (I[0:-1:2, 1::2], 1), (I[2::2, 1::2], 1),
                 (I[1::2, 0:-1:2], 1), (I[1::2, 2::2], 1), (v, -1)]
        for idx, s in terms:
            rows.append(ri)
            cols.append(idx.ravel())
            vals.append(np.full(v.size, float(s)))
        slices["C3"] = slice(r, r + v.size)
        r += v.size
    if not rows:   # n = 1: a single face and no constraint
        return sp.csr_matrix((0, m * m)), {"C1": slice(0, 0), "C2": slice(0, 0), "C3": slice(0, 0)}
    C = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(r, m * m))
    return C, slices


def repair(G) -> np.ndarray:
    """Lower each edge to its smaller incident face, then each vertex to its smallest incident
    edge (section 6): only decreases values, so C1 and C2 hold and C3 follows."""
    G = np.array(G, dtype=np.float64)
    F, Ev, Eh, V = _parts(G)
    G[0::2, 1::2] = np.minimum(Ev, np.minimum(F[:, :-1], F[:, 1:]))
    G[1::2, 0::2] = np.minimum(Eh, np.minimum(F[:-1], F[1:]))
    _, Ev, Eh, _ = _parts(G)
    G[1::2, 1::2] = np.minimum.reduce([V, Ev[:-1], Ev[1:], Eh[:, :-1], Eh[:, 1:]])
    return G


def linprog_lad(Hp, *, include_c3: bool = True, norm: str = "l1", progress=None):
    """LinProg (Algorithm 3): min ||H'' - H'||_1 (or ||.||_inf) s.t. C1-C3 and H'' >= 0.

    One sparse HiGHS solve. The solution is polished within the solver's tolerance (negatives
    to 0, then `repair`), so the released H'' violates nothing; the largest change is in
    info["polish"]. Returns (H'', info).
    """
    Hp = np.asarray(Hp, dtype=np.float64)
    m = Hp.shape[0]
    n = (m + 1) // 2
    M = m * m
    t0 = time.perf_counter()
    if progress:
        progress("building the linear program", 0.0)
    C, _ = constraint_matrix(n, include_c3)
    Id = sp.identity(M, format="csr")
    h = Hp.ravel()
    if norm == "l1":
        k = M
        c = np.concatenate([np.zeros(M), np.ones(M)])
        top = sp.hstack([-Id, -Id])
        mid = sp.hstack([Id, -Id])
    elif norm == "linf":
        k = 1
        c = np.concatenate([np.zeros(M), [1.0]])
        ones = sp.csr_matrix(np.ones((M, 1)))
        top = sp.hstack([-Id, -ones])
        mid = sp.hstack([Id, -ones])
    else:
        raise ParameterError(f"norm must be 'l1' or 'linf', got {norm!r}")
    A = sp.vstack([top, mid, sp.hstack([C, sp.csr_matrix((C.shape[0], k))])], format="csr")
    b = np.concatenate([-h, h, np.zeros(C.shape[0])])
    if progress:
        progress("solving (HiGHS)", 0.1)
    res = linprog(c, A_ub=A, b_ub=b, bounds=(0, None), method="highs")
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"LinProg failed: HiGHS status {res.status} ({res.message})")
    raw = res.x[:M].reshape(m, m)
    H2 = repair(np.maximum(raw, 0.0))
    info = {"status": int(res.status), "message": str(res.message), "objective": float(res.fun),
            "seconds": time.perf_counter() - t0, "polish": float(np.abs(H2 - raw).max()),
            "rows": int(A.shape[0]), "variables": int(A.shape[1]), "norm": norm,
            "include_c3": include_c3}
    if progress:
        progress("done", 1.0)
    return H2, info


def round_consistent(H2) -> np.ndarray:
    """Round (Algorithm 4, hardened): clip at 0, snap to 6 decimals, round half up, repair,
    and refuse to return a histogram that violates any constraint."""
    x = np.round(np.maximum(np.asarray(H2, dtype=np.float64), 0.0), 6)
    H3 = repair(np.floor(x + 0.5))
    bad = violations(H3, tol=0.0)
    if any(bad.values()):
        raise RuntimeError(f"Round left constraint violations {bad}")
    return H3


# -------------------------------------------------------------------------- release
class EulerRelease(Release):
    """A private Euler histogram with its three public stages.

    `answer(rect)` snaps the rectangle outward (or inward, by the `snap` parameter) and
    returns the selected stage's F - E + V clamped at 0; `answer_raw` keeps the sign. Only
    noisy, public values live here: the exact histogram belongs to the data
    (RegionData.euler_histogram).
    """

    def __init__(self, spec, domain, epsilon, split, params, ledger, egrid: EulerGrid,
                 noisy, scale: float, delta: float, stage: str = "round", **kw):
        super().__init__(spec, domain, epsilon, split, params, ledger, **kw)
        self.egrid = egrid
        self.noise_scale = float(scale)
        self.sensitivity = delta
        self._store = {"values": {"diffpriv": np.asarray(noisy, np.float64)}, "prefix": {},
                       "info": {}}
        self._stage = stage

    # --------------------------------------------------------------- stages
    @property
    def stage(self) -> str:
        return self._stage

    @property
    def stages_computed(self) -> tuple:
        return tuple(s for s in STAGES if s in self._store["values"])

    def compute(self, stage: str, progress=None) -> np.ndarray:
        """The stage's doubled-grid values, running LinProg / Round on first use (both are
        post-processing of DiffPriv's output, so they spend no budget)."""
        if stage not in STAGES:
            raise ParameterError(f"stage must be one of {list(STAGES)}, got {stage!r}")
        vals = self._store["values"]
        if stage not in vals:
            if stage in ("linprog", "round") and "linprog" not in vals:
                H2, info = linprog_lad(vals["diffpriv"], include_c3=self.params.get("include_c3", True),
                                       norm=self.params.get("norm", "l1"), progress=progress)
                vals["linprog"] = H2
                self._store["info"]["linprog"] = info
            if stage == "round":
                t0 = time.perf_counter()
                vals["round"] = round_consistent(vals["linprog"])
                self._store["info"]["round"] = {"seconds": time.perf_counter() - t0}
        return vals[stage]

    def with_stage(self, stage: str, progress=None) -> "EulerRelease":
        """The same release answering from another stage (shares every computed stage)."""
        self.compute(stage, progress)
        other = copy.copy(self)
        other._stage = stage
        other.params = {**self.params, "stage": stage}
        return other

    def values(self, stage: str | None = None) -> np.ndarray:
        return self.compute(stage or self._stage)

    def stage_info(self, stage: str | None = None) -> dict:
        return dict(self._store["info"].get(stage or self._stage, {}))

    def _prefix(self, stage=None):
        stage = stage or self._stage
        P = self._store["prefix"].get(stage)
        if P is None:
            P = self._store["prefix"][stage] = signed_prefix(self.compute(stage))
        return P

    def violations(self, stage: str | None = None) -> dict:
        return violations(self.compute(stage or self._stage))

    def violation_table(self) -> dict:
        """{stage: {C1, C2, C3, total, rows}} for every computed stage."""
        rows = constraint_counts(self.egrid.n)
        out = {}
        for s in self.stages_computed:
            v = self.violations(s)
            out[s] = {**v, "total": sum(v.values()), "rows": rows}
        return out

    # -------------------------------------------------------------- queries
    def snap_cells(self, rects) -> np.ndarray:
        return self.egrid.snap_cells(rects, self.params.get("snap", "outward"))

    def snap(self, rect: Rect) -> Rect | None:
        """The rectangle actually answered: the union of cells it snaps to (None off-grid)."""
        return self.egrid.snap(rect, self.params.get("snap", "outward"))

    def answer_raw_many(self, rects, stage: str | None = None) -> np.ndarray:
        return answer_cells(self._prefix(stage), self.snap_cells(rects)).astype(np.float64)

    def answer_raw(self, rect: Rect, stage: str | None = None) -> float:
        """F - E + V of the stage on the snapped rectangle, before clamping (diagnostics)."""
        return float(self.answer_raw_many(rect, stage)[0])

    def answer_many(self, rects) -> np.ndarray:
        """Private answers on the snapped rectangles, clamped at 0 (spec pitfall 6)."""
        return np.maximum(self.answer_raw_many(rects), 0.0)

    def answer_cells(self, cells, stage: str | None = None) -> np.ndarray:
        """Raw answers for cell ranges [r0, r1, c0, c1] (inclusive)."""
        return answer_cells(self._prefix(stage), cells).astype(np.float64)

    def noise_variance(self, rects) -> np.ndarray:
        """DiffPriv's noise variance before truncation: V(λ)·(2p-1)(2q-1), V the discrete Laplace
        variance (section 4.2 gives 2λ², the continuous value, an upper bound on V)."""
        c = self.snap_cells(rects)
        p = c[:, 1] - c[:, 0] + 1
        q = c[:, 3] - c[:, 2] + 1
        v = discrete_laplace_variance(self.noise_scale)
        return np.where(c[:, 0] >= 0, v * (2 * p - 1) * (2 * q - 1), 0.0)

    def interval(self, rect: Rect, level: float = 0.95, n_sim: int = 20000, seed: int = 0):
        """DiffPriv stage: answer +- the quantile of the untruncated noise, a signed sum of
        (2p-1)(2q-1) discrete Laplace(λ) draws (`noise_half_width`; it reads no data). LinProg
        and Round fit all counts jointly: no closed form, (nan, nan)."""
        est = self.answer(rect)
        if self._stage != "diffpriv":
            return (math.nan, math.nan)
        r0, r1, c0, c1 = self.snap_cells(rect)[0]
        if r0 < 0:
            return est, est
        terms = (2 * (r1 - r0) + 1) * (2 * (c1 - c0) + 1)
        half = noise_half_width(np.ones(terms), self.noise_scale, level, n_sim, seed)
        return est - half, est + half

    # ------------------------------------------------------------ sparse data
    @property
    def mean_face(self) -> float:
        return float(self.values()[0::2, 0::2].mean())

    @property
    def sparse_data(self) -> bool:
        """Released average face count below λ (spec pitfall 9): answers are biased upward.

        Computed from the released stage only (post-processing), so it may be exported."""
        return self.mean_face < self.noise_scale

    @property
    def sparse_warning(self) -> str | None:
        if not self.sparse_data:
            return None
        return (f"Sparse data: the released average face count ({self.mean_face:.1f}) is below "
                f"the noise scale λ = {self.noise_scale:g}. Truncating noise at 0 and the LP "
                "push counts up here, so answers overestimate; use larger cells, a smaller "
                "bound B or a larger ε.")

    # ------------------------------------------------------------ structure
    def components(self, stage: str | None = None) -> dict:
        """faces (n, n), vertical edges (n, n-1), horizontal edges (n-1, n), vertices (n-1, n-1)."""
        return split_components(self.values(stage))

    def raster(self):
        return self.values()[0::2, 0::2].copy(), self.egrid.uniform_grid()

    def regions(self):
        n = self.egrid.n
        r, c = np.divmod(np.arange(n * n), n)
        return self.egrid.uniform_grid(), np.column_stack([r, r + 1, c, c + 1]), \
            self.values()[0::2, 0::2].ravel().copy()

    def edges_layer(self, stage: str | None = None):
        """(segments (K, 2, 2) of lon/lat end points, values (K,)) of all interior edges:
        vertical ones first (row-major), then horizontal ones."""
        n = self.egrid.n
        G = self.values(stage)
        r, c = np.divmod(np.arange(n * (n - 1)), n - 1) if n > 1 else (np.zeros(0, int),) * 2
        xv = c + 1                                    # vertical edge at x = c+1, y in [r, r+1]
        seg_v = np.stack([np.column_stack(self.egrid.to_lonlat(xv, r)),
                          np.column_stack(self.egrid.to_lonlat(xv, r + 1))], axis=1)
        rh, ch = np.divmod(np.arange((n - 1) * n), n) if n > 1 else (np.zeros(0, int),) * 2
        yh = rh + 1                                   # horizontal edge at y = r+1, x in [c, c+1]
        seg_h = np.stack([np.column_stack(self.egrid.to_lonlat(ch, yh)),
                          np.column_stack(self.egrid.to_lonlat(ch + 1, yh))], axis=1)
        vals = np.concatenate([G[0::2, 1::2].ravel(), G[1::2, 0::2].ravel()])
        return np.concatenate([seg_v.reshape(-1, 2, 2), seg_h.reshape(-1, 2, 2)]), vals

    def vertices_layer(self, stage: str | None = None):
        """(points (K, 2) lon/lat, values (K,)) of all interior vertices, row-major."""
        n = self.egrid.n
        r, c = np.divmod(np.arange((n - 1) ** 2), max(n - 1, 1))
        pts = np.column_stack(self.egrid.to_lonlat(c + 1, r + 1))
        return pts, self.values(stage)[1::2, 1::2].ravel().copy()

    # ------------------------------------------------------------- export
    def euler_metadata(self) -> dict:
        meta = {**self.egrid.to_dict(), "sensitivity": self.sensitivity,
                "scale": self.noise_scale, "neighbour": self.params.get("neighbour"),
                "stage": self._stage, "stages": list(self.stages_computed),
                "violations": self.violation_table(),
                "mean_face": self.mean_face, "sparse_warning": self.sparse_warning}
        lp = self._store["info"].get("linprog")
        if lp:
            meta["linprog"] = {k: lp[k] for k in ("status", "objective", "rows", "variables",
                                                  "norm", "include_c3")}
        return meta

    def metadata(self) -> dict:
        meta = super().metadata()
        meta["euler"] = self.euler_metadata()
        return meta

    def to_geojson(self) -> dict:
        """Faces (Polygons), interior edges (LineStrings) and vertices (Points) with the
        selected stage's values, plus public metadata. Nothing here reads the raw data."""
        g = self.egrid
        n = g.n
        G = self.values()
        feats = []
        r, c = np.divmod(np.arange(n * n), n)
        (w, s), (e, nn) = g.to_lonlat(c, r), g.to_lonlat(c + 1, r + 1)
        for i, (ww, ss, ee, no, rr, cc) in enumerate(zip(w.tolist(), s.tolist(), e.tolist(),
                                                          nn.tolist(), r.tolist(), c.tolist())):
            feats.append({"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [
                [[ww, ss], [ee, ss], [ee, no], [ww, no], [ww, ss]]]},
                "properties": {"element": "face", "row": rr, "col": cc,
                               "i": 2 * rr, "j": 2 * cc, "count": float(G[2 * rr, 2 * cc])}})
        segs, vals = self.edges_layer()
        nv = n * (n - 1)
        for t, (sg, v) in enumerate(zip(segs.tolist(), vals.tolist())):
            if t < nv:
                rr, cc = divmod(t, n - 1)
                i, j = 2 * rr, 2 * cc + 1
            else:
                rr, cc = divmod(t - nv, n)
                i, j = 2 * rr + 1, 2 * cc
            feats.append({"type": "Feature", "geometry": {"type": "LineString", "coordinates": sg},
                          "properties": {"element": "edge", "i": i, "j": j, "count": v}})
        pts, vals = self.vertices_layer()
        for t, (pt, v) in enumerate(zip(pts.tolist(), vals.tolist())):
            rr, cc = divmod(t, n - 1)
            feats.append({"type": "Feature", "geometry": {"type": "Point", "coordinates": pt},
                          "properties": {"element": "vertex", "i": 2 * rr + 1, "j": 2 * cc + 1,
                                         "count": v}})
        return {"type": "FeatureCollection", "features": feats, "properties": self.metadata()}


# ------------------------------------------------------------------ the mechanism
def release_euler(data, domain, epsilon, split, params, rng):
    """Spec 004 section 7: exact Euler histogram -> DiffPriv (all ε) -> LinProg -> Round."""
    g = make_grid(domain, params["cells"], params["cell_km"], params["bound_km"])
    delta = sensitivity(g.bound_km, g.cell_km, neighbour=params["neighbour"],
                        variant=params["sensitivity"])
    eps = epsilon * split[0]
    scale = delta / eps
    H, prep = data.euler_histogram(g, with_stats=True)
    ledger = Ledger()
    ledger.charge("noisy Euler histogram (faces, edges, vertices)", eps, delta,
                  "discrete laplace", scale,
                  note=f"{H.size} components on {g.n}x{g.n} cells, discrete Laplace(Δ/ε) on "
                       f"every one, k = {g.k}, Δ = {delta} ({params['neighbour']}); LinProg and "
                       "Round are post-processing")
    noisy = diffpriv(H, eps, delta, rng)
    rel = EulerRelease(EULER, domain, epsilon, split, params, ledger, g, noisy, scale, delta,
                       stage=params["stage"], diagnostics={"preprocessing": prep})
    if params["stage"] != "diffpriv":
        try:
            rel.compute(params["stage"])
        except RuntimeError as exc:     # post-processing failed after the draw: the spend stands,
            rel = rel.with_stage("diffpriv")      # so release DiffPriv's output rather than nothing
            rel.diagnostics = {**rel.diagnostics, "post_processing_failed": str(exc)}
    return rel


EULER = MechanismSpec(
    name="euler", label="Euler histogram (users' regions)",
    description="Counts the users whose region meets a rectangle without counting a region once "
                "per cell: discrete Laplace noise on every face, edge and vertex count of an "
                "Euler histogram, then a least-absolute-deviation LP and rounding make the "
                "counts consistent (Fanaeepour & Rubinstein). Rectangles snap to whole cells.",
    guarantee="ε-differential privacy for adding or removing one user's region (one region per "
              "user, clipped to the public bound B): the presence of any one user, and so the "
              "number of users, is protected; that number is neither used nor exported. With "
              "neighbour = replace, Δ is doubled and ε-DP also holds for replacing one user's "
              "region. Every count gets integer (discrete Laplace) noise; LinProg and Round are "
              "post-processing.",
    unit=USER_REGION,
    params=(
        Param("cells", int, 20, "Cells per side n",
              "n = A/d: the study square (the largest square centred in the domain) is cut into "
              "n x n cells. Ignored when a cell size d is given.", min=1, max=MAX_CELLS),
        Param("cell_km", float, 0.0, "Cell size d (km)",
              "0: d = A/n. Otherwise the square's side becomes n·d with n = floor(A/d), so A/d "
              "is an integer. Set d to the smallest query worth answering.", min=0.0, max=1e4),
        Param("bound_km", float, 2.0, "Region bound B (km)",
              "Public bound on each region's diameter; larger regions are clipped to a disc of "
              "diameter B. k = ceil(B/d) and Δ = (2k+1)².", min=1e-3, max=1e4),
        Param("neighbour", str, "add/remove", "Neighbouring datasets",
              "add/remove: one user's region added or removed (Δ); replace: one region replaced "
              "by another (2Δ).", choices=NEIGHBOURS),
        Param("sensitivity", str, "tight", "Sensitivity constant",
              "tight: (2k+1)², the paper's experiments; lemma2: 4.5·k(k+1), Lemma 2's bound.",
              choices=("tight", "lemma2")),
        Param("stage", str, "round", "Answer from stage",
              "diffpriv: noisy counts; linprog: consistent LP fit; round: integer and "
              "consistent (covert). Later stages are free post-processing.", choices=STAGES),
        Param("include_c3", bool, True, "Include C3 in the LP",
              "C3 (2x2 Euler counts >= 0) is implied by C1 and H'' >= 0; dropping it gives the "
              "same optimum with a smaller LP."),
        Param("norm", str, "l1", "LP norm", "l1: least absolute deviations (the MLE under "
              "Laplace noise); linf: Program (3), for comparison.", choices=("l1", "linf")),
        Param("snap", str, "outward", "Snap rectangles",
              "outward: every cell the rectangle overlaps (the paper); inward: only cells "
              "inside it, outward when there are none.", choices=("outward", "inward")),
    ),
    data_kind="regions",
    release=release_euler,
    explain=lambda domain, params, epsilon: explain(domain, params, epsilon))

SPECS = (EULER,)
