"""CountData: points already counted on a fine grid over a public box (the owner's side).

Data too big for memory is aggregated where it lives (`dp.aggregate`) into a base histogram,
and the grid, tree and DAWA mechanisms release from it as they would from the points: they
only ever read histograms, which a base histogram gives by summing its cells. Mechanisms that
need each point's coordinates (shifted grids, interactive sessions) refuse it.
"""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np

from .domain import Domain, UniformGrid
from .errors import DataError
from .points import LoadReport
from .queries import as_rect_array
from .summed_area import summed_area

DEFAULT_CELLS = 1024     # base cells per side: the trees' default base grid is a coarsening of it
MAX_CELLS = 1 << 26      # 64 M cells (512 MB of int64 counts): finer is refused
FORMAT = "dp-counts-1"   # written into saved files, checked when read


class CountData:
    """Exact counts H[j, k] of points per cell of a public grid (row j latitude, column k
    longitude), optionally with each user's points bounded to `points_per_user` beforehand.

    Like PointData its exact answers are for the data owner only; mechanisms read it through
    `histogram`. Cells are the finest resolution there is: a grid whose lines are not base
    lines gets each base cell whole in the grid cell holding its centre.
    """

    kind = "points"          # which mechanisms apply (MechanismSpec.data_kind)
    raw_points = False       # mechanisms with MechanismSpec.needs_points refuse it
    user = users = None      # no ids per point: contributions were bounded when counting

    def __init__(self, counts, domain: Domain, *, points_per_user: int | None = None,
                 report: LoadReport | None = None, name: str = "counts"):
        if not isinstance(domain, Domain):
            raise DataError(f"counts need the public box they were made over as a dp.Domain, "
                            f"got {type(domain).__name__}")
        H = np.asarray(counts)
        if H.ndim != 2 or H.size == 0:
            raise DataError(f"counts must be a 2-D matrix of cells (rows: latitude, columns: "
                            f"longitude), got an array of shape {H.shape}")
        CountData.check_size(H.shape[1], H.shape[0])
        if H.dtype.kind not in "iuf" or (H.dtype.kind == "f" and not np.isfinite(H).all()):
            raise DataError("counts must be finite numbers")
        whole = np.rint(H).astype(np.int64)
        if not np.array_equal(whole, H) or (whole < 0).any():
            raise DataError("counts must be whole numbers of at least 0 (points per cell)")
        if points_per_user is not None and (int(points_per_user) != points_per_user
                                            or points_per_user < 1):
            raise DataError(f"points_per_user must be a whole number of at least 1, got "
                            f"{points_per_user!r}")
        self.counts = whole
        self.counts.setflags(write=False)
        self.domain = domain
        self.grid = UniformGrid(domain, whole.shape[1], whole.shape[0])
        self.points_per_user = None if points_per_user is None else int(points_per_user)
        total = int(whole.sum())
        self.report = report or LoadReport("counts", total, total)
        self.name = name
        self._sat = None
        self._fingerprint = None

    @staticmethod
    def check_size(gx: int, gy: int) -> None:
        """Refuse a base grid of more than MAX_CELLS cells, saying what to do instead."""
        if gx * gy > MAX_CELLS:
            raise DataError(f"{gx} x {gy} cells is more than the {MAX_CELLS:,} a base histogram "
                            "may have; aggregate on a coarser grid")

    def __len__(self) -> int:
        return int(self.counts.sum())

    @property
    def n(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        gy, gx = self.counts.shape
        return f"CountData({self.name!r}, {gx}x{gy} cells, n={self.n:,})"

    @property
    def fingerprint(self) -> str:
        """Content hash (box, cells, bound per user, counts): a cache and budget-account key."""
        if self._fingerprint is None:
            h = hashlib.blake2b(digest_size=12)
            h.update(repr((self.domain.bounds, self.counts.shape, self.points_per_user)).encode())
            h.update(self.counts.tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    coordinates_fingerprint = fingerprint

    def count_in(self, domain: Domain) -> int:
        """Points inside `domain` (exact for the counts' own box; pro rata at cell level otherwise)."""
        if domain.bounds == self.domain.bounds:
            return self.n
        return int(self.true_counts([domain.bounds], None)[0])

    def histogram(self, grid: UniformGrid) -> np.ndarray:
        """Counts on `grid` (a grid over the same box, no finer than the base on either axis):
        each base cell goes whole to the grid cell holding its centre, so the sums are exact
        when the grid's lines are base lines (e.g. 1024 to 256 cells). A fresh float copy."""
        if grid.domain.bounds != self.domain.bounds:
            raise DataError(f"these counts were made over the box {self.domain.bounds}; a "
                            f"release must use that same box, not {grid.domain.bounds}")
        gy, gx = self.counts.shape
        if grid.gx > gx or grid.gy > gy:
            raise DataError(f"the mechanism needs a {grid.gx} x {grid.gy} grid, finer than the "
                            f"counts' {gx} x {gy} cells: aggregate on at least that many cells "
                            "(dp.aggregate(..., cells=...)) or choose a coarser setting")
        if (grid.gx, grid.gy) == (gx, gy):
            return self.counts.astype(np.float64)
        by_col = _sum_cells(self.counts, _centre_cells(self.grid.edges_x, grid.edges_x), grid.gx, 1)
        return _sum_cells(by_col, _centre_cells(self.grid.edges_y, grid.edges_y), grid.gy, 0
                          ).astype(np.float64)

    def true_counts(self, rects, domain: Domain | None = None) -> np.ndarray:
        """Counts in each rectangle at cell resolution: whole cells inside count fully, cells the
        rectangle cuts count in proportion to the area it covers, rounded to whole points.
        NON-PRIVATE: for the data owner's comparisons only. `domain` clips as for PointData."""
        r = as_rect_array(rects).copy()
        if domain is not None:
            r[:, 0::2] = np.clip(r[:, 0::2], domain.west, domain.east)
            r[:, 1::2] = np.clip(r[:, 1::2], domain.south, domain.north)
        if self._sat is None:
            self._sat = summed_area(self.counts, whole=True).astype(np.float64)
        gy, gx = self.counts.shape
        d = self.domain
        u = np.clip((r[:, 0::2] - d.west) / d.width * gx, 0, gx)     # west, east in cell units
        v = np.clip((r[:, 1::2] - d.south) / d.height * gy, 0, gy)   # south, north
        corner = lambda a, b: _bilinear(self._sat, v[:, b], u[:, a])   # noqa: E731
        total = corner(1, 1) - corner(0, 1) - corner(1, 0) + corner(0, 0)
        empty = (r[:, 2] <= r[:, 0]) | (r[:, 3] <= r[:, 1])
        return np.where(empty, 0, np.rint(np.maximum(total, 0))).astype(np.int64)

    def true_count(self, rect, domain: Domain | None = None) -> int:
        """Count in one rectangle (see true_counts). NON-PRIVATE: for the data owner only."""
        return int(self.true_counts(rect, domain)[0])

    def sample(self, k: int, seed: int = 0) -> np.ndarray:
        """No points to show: counts hold none (an empty (0, 2) array for the owner's layer)."""
        return np.zeros((0, 2))

    def save(self, path) -> None:
        """Write the counts, their box and the bound per user to a .npz file (`load_counts`)."""
        np.savez_compressed(path, format=np.array(FORMAT), counts=self.counts,
                            bounds=np.array(self.domain.bounds, dtype=np.float64),
                            points_per_user=np.array(self.points_per_user or 0))


def load_counts(source, name: str | None = None) -> CountData:
    """Read counts saved by `CountData.save` (a path, or the file's bytes) into a CountData."""
    try:
        f = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else Path(source)
        with np.load(f, allow_pickle=False) as z:
            if "format" not in z.files or str(z["format"]) != FORMAT:
                raise ValueError
            counts, bounds, k = z["counts"], z["bounds"], int(z["points_per_user"])
    except FileNotFoundError:
        raise DataError(f"no such file: {source}") from None
    except (OSError, ValueError, KeyError, EOFError):
        raise DataError("not a counts file: expected a .npz written by CountData.save (with "
                        f"format {FORMAT!r}, counts, bounds and points_per_user)") from None
    w, s, e, n = (float(b) for b in bounds)
    label = name or (Path(source).stem if not isinstance(source, (bytes, bytearray)) else "counts")
    return CountData(counts, Domain(w, s, e, n), points_per_user=k or None,
                     report=LoadReport("counts file", int(counts.sum()), int(counts.sum())),
                     name=label)


def _centre_cells(base_edges: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The cell of `edges` holding the centre of each base cell (non-decreasing)."""
    centres = (base_edges[:-1] + base_edges[1:]) / 2
    return np.clip(np.searchsorted(edges, centres, side="right") - 1, 0, len(edges) - 2)


def _sum_cells(H: np.ndarray, cells: np.ndarray, n: int, axis: int) -> np.ndarray:
    """Sums of H's slices along `axis` into n groups (`cells`, non-decreasing), by differences of
    a running sum: exact in int64, and an empty group is 0."""
    run = np.concatenate([np.zeros_like(H.take([0], axis)), H.cumsum(axis)], axis)
    bounds = np.searchsorted(cells, np.arange(n + 1), side="left")
    return np.diff(run.take(bounds, axis), axis=axis)


def _bilinear(S: np.ndarray, v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """S at fractional (row v, column u): exact for a summed-area table of cells with counts
    spread evenly inside them, whose integral is bilinear within each cell."""
    j = np.minimum(v.astype(np.int64), S.shape[0] - 2)
    i = np.minimum(u.astype(np.int64), S.shape[1] - 2)
    fv, fu = v - j, u - i
    return ((1 - fv) * ((1 - fu) * S[j, i] + fu * S[j, i + 1])
            + fv * ((1 - fu) * S[j + 1, i] + fu * S[j + 1, i + 1]))
