"""CountData: points already counted on a fine grid over a public box (the owner's side).

Data too big for memory is aggregated where it lives (`dp.aggregate`) into a base histogram,
and the grid, tree and DAWA mechanisms release from it as they would from the points: they
only ever read histograms, which a base histogram gives by summing its cells. Mechanisms that
need each point's coordinates (shifted grids, interactive sessions) refuse it.
"""
from __future__ import annotations

import hashlib
import io
import math
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .domain import Domain, UniformGrid
from .errors import DataError
from .points import LoadReport
from .queries import as_rect_array
from .summed_area import rect_integrals, summed_area

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
                 report: LoadReport | None = None, name: str = "counts",
                 points_hash: bytes | None = None):
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
        self.points_hash = points_hash   # dp.points.multiset_hash of the points counted, if known
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

    @property
    def coordinates_fingerprint(self) -> str:
        """The budget account's key: that of the points counted (as PointData.coordinates_
        fingerprint gives it, so counting the same files on another grid, or loading them as
        points, spends from one budget), or the counts' own hash when the points are unknown."""
        if self.points_hash is None:
            return self.fingerprint
        return hashlib.blake2b(b"points" + self.points_hash, digest_size=12).hexdigest()

    @property
    def finest(self) -> tuple[int, int]:
        """(columns, rows) of the base grid: no mechanism's grid may be finer (public)."""
        return self.grid.gx, self.grid.gy

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
        rectangle cuts count in proportion to the area it covers (not rounded: one more point
        moves an answer by at most 1, as a private tuning score assumes). NON-PRIVATE: for the
        data owner's comparisons only. `domain` clips as for PointData."""
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
        total = rect_integrals(self._sat, np.column_stack([u[:, 0], v[:, 0], u[:, 1], v[:, 1]]))
        empty = (r[:, 2] <= r[:, 0]) | (r[:, 3] <= r[:, 1])
        return np.where(empty, 0.0, np.maximum(total, 0.0))

    def true_count(self, rect, domain: Domain | None = None) -> float:
        """Count in one rectangle (see true_counts). NON-PRIVATE: for the data owner only."""
        return float(self.true_counts(rect, domain)[0])

    def sample(self, k: int, seed: int = 0) -> np.ndarray:
        """No points to show: counts hold none (an empty (0, 2) array for the owner's layer)."""
        return np.zeros((0, 2))

    def save(self, path) -> None:
        """Write the counts, their box (name and leak flag too), the bound per user and the
        points' hash to a .npz file (`load_counts`)."""
        d = self.domain
        np.savez_compressed(path, format=np.array(FORMAT), counts=self.counts,
                            bounds=np.array(d.bounds, dtype=np.float64), box_name=np.array(d.name),
                            leaky=np.array(d.leaky), points_per_user=np.array(self.points_per_user or 0),
                            points_hash=np.frombuffer(self.points_hash or b"", dtype=np.uint8))


def load_counts(source, name: str | None = None, max_bytes: int | None = None) -> CountData:
    """Read counts saved by `CountData.save` (a path, or the file's bytes) into a CountData.
    Every array's header is checked first (`_check_headers`): its type, shape and size in bytes,
    so a small file cannot unpack into a huge one nor hold anything but the arrays expected;
    with `max_bytes`, the arrays together must unpack to at most that many bytes (a server
    charges an upload by what it expands to, before expanding it). The bound per user is what
    the file declares; the report says so."""
    f = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else Path(source)
    wrong, unpacked = _read_npz(f, _check_headers)
    if wrong:
        raise DataError(wrong)
    if max_bytes is not None and unpacked > max_bytes:
        raise DataError(f"the counts unpack to {unpacked / 1e6:,.1f} MB, more than the "
                        f"{max_bytes / 1e6:,.1f} MB this server keeps for one browser's data; "
                        "count on a coarser grid (python -m dp aggregate --cells) or ask the "
                        "server's owner for more room (--store-mb)")
    counts, bounds, k, box_name, leaky, key = _read_npz(f, _arrays)
    w, s, e, n = (float(b) for b in bounds)
    label = name or (Path(source).stem if not isinstance(source, (bytes, bytearray)) else "counts")
    total = int(np.asarray(counts).sum())
    report = LoadReport("counts file", total, total)
    if k:
        report.notes.append(f"at most {k} points per user, as the file declares (bounded when the "
                            "counts were made; not something a counts file lets us check)")
    return CountData(counts, Domain(w, s, e, n, name=box_name, leaky=leaky), points_per_user=k or None,
                     report=report, name=label, points_hash=key or None)


def _read_npz(f, read):
    """read(f), with what goes wrong reading a file said in words."""
    try:
        return read(f)
    except FileNotFoundError:
        raise DataError(f"no such file: {f}") from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error,
            NotImplementedError, RuntimeError):   # zipfile: a method or flag it cannot read, encryption
        raise DataError("not a counts file: expected a .npz written by CountData.save (with "
                        f"format {FORMAT!r}, counts, bounds and points_per_user)") from None
    finally:
        if isinstance(f, io.BytesIO):
            f.seek(0)


def _arrays(f) -> tuple:
    """(counts, bounds, points per user, box name, leaky, points' hash) of a saved .npz."""
    with np.load(f, allow_pickle=False) as z:
        if "format" not in z.files or str(z["format"]) != FORMAT:
            raise ValueError
        return (z["counts"], z["bounds"], int(z["points_per_user"].item()),     # shape () or (1,)
                str(z["box_name"].item()), bool(z["leaky"].item()), z["points_hash"].tobytes())


# What each array of a counts file may be, checked from its header before any is unpacked:
# (kinds of dtype, shapes allowed (an int: any shape of that many dimensions), most elements,
# most bytes, what is expected in words). Object and structured dtypes are never allowed.
MAX_NAME_CHARS = 200            # a box's name (and the format tag): a short text
MAX_HASH_BYTES = 64             # the points' hash is 24 bytes (dp.points.multiset_hash)
SCALAR = ((), (1,))
_EXPECTED = {
    "format": ("U", SCALAR, 1, 4 * MAX_NAME_CHARS, f"the text {FORMAT!r}"),
    "counts": ("iuf", 2, MAX_CELLS, MAX_CELLS * 8,
               f"a 2-D matrix of numbers (int, uint or float, at most 8 bytes each), not more "
               f"than the {MAX_CELLS:,} cells a base histogram may have"),
    "bounds": ("biuf", ((4,),), 4, 4 * 8, "4 numbers (west, south, east, north)"),
    "box_name": ("U", SCALAR, 1, 4 * MAX_NAME_CHARS,
                 f"a text (unicode) of at most {MAX_NAME_CHARS} characters"),
    "leaky": ("biuf", SCALAR, 1, 8, "one true/false value"),
    "points_per_user": ("biuf", SCALAR, 1, 8, "one whole number"),
    "points_hash": ("u", 1, MAX_HASH_BYTES, MAX_HASH_BYTES, f"at most {MAX_HASH_BYTES} bytes (uint8)"),
}


def _check_headers(f) -> tuple[str | None, int]:
    """(what is wrong with a .npz's arrays, the bytes they unpack to), read from their headers
    alone (no array is unpacked): each must be one `_EXPECTED` names, of a type, shape and size
    in bytes it allows. None when all are as expected (missing ones are found when the arrays
    are read)."""
    unpacked = 0
    with zipfile.ZipFile(f) as z:
        for member in z.namelist():
            field = member[:-4] if member.endswith(".npy") else member
            if field not in _EXPECTED:
                return (f"the counts file holds an unexpected entry {member!r}; a counts file "
                        f"holds only {', '.join(_EXPECTED)} (written by CountData.save)", unpacked)
            with z.open(member) as fh:
                version = np.lib.format.read_magic(fh)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read(fh)
            wrong = _wrong_array(field, shape, dtype)
            if wrong:
                return wrong, unpacked
            unpacked += math.prod(shape) * dtype.itemsize
    return None, unpacked


def _wrong_array(field: str, shape: tuple, dtype: np.dtype) -> str | None:
    """Why an array of `shape` and `dtype` (from its header) cannot be the counts file's
    `field`, or None."""
    kinds, shapes, most, most_bytes, expected = _EXPECTED[field]
    elements = math.prod(shape)
    size = elements * dtype.itemsize          # Python ints: no overflow
    fits_shape = len(shape) == shapes if isinstance(shapes, int) else tuple(shape) in shapes
    if (dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None
            or dtype.kind not in kinds or not fits_shape or elements > most or size > most_bytes):
        return (f"the counts file's {field!r} is an array of shape {tuple(shape)} and type "
                f"{dtype} ({size:,} bytes unpacked): expected {expected}")
    return None


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
