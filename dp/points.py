"""PointData: the private point set (owner side) with exact, vectorised range counts."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .domain import Domain, UniformGrid
from .noise import make_rng
from .queries import Rect, as_rect_array

MEMO_CELLS = 1 << 22      # exact histograms kept per dataset: at most this many cells (32 MB)
MEMO_WORKLOADS = 64       # exact answer vectors kept per dataset


@dataclass
class LoadReport:
    """What a loader read: rows, columns used and rows dropped with the reason for each."""

    source_format: str
    rows_read: int
    rows_loaded: int
    columns: dict = field(default_factory=dict)   # role -> column name, e.g. {"lon": "lng"}
    dropped: dict = field(default_factory=dict)   # reason -> count
    notes: list = field(default_factory=list)
    warnings: list = field(default_factory=list)  # what the owner should check before releasing

    @property
    def rows_dropped(self) -> int:
        return int(sum(self.dropped.values()))

    def summary(self) -> str:
        cols = ", ".join(f"{k}={v!r}" for k, v in self.columns.items())
        text = f"{self.rows_loaded:,} of {self.rows_read:,} rows loaded from {self.source_format}"
        if cols:
            text += f" (columns: {cols})"
        if self.dropped:
            text += "; dropped: " + "; ".join(f"{n:,} {why}" for why, n in self.dropped.items())
        for note in self.notes:
            text += f"; {note}"
        return text


_SIGN = np.uint64(1 << 63)
_LOW63 = np.uint64((1 << 63) - 1)
SORT_BLOCK = 1 << 20      # values per block when building sort keys: small temporaries


def _sortable(v: np.ndarray) -> np.ndarray:
    """Finite float64 values as uint64 in the same order (-0.0 and 0.0 equal): the sign bit
    set for positives, every bit flipped for negatives."""
    b = np.add(v, 0.0).view(np.uint64)   # + 0.0 turns -0.0 into 0.0
    m = b >> np.uint64(63)
    m *= _LOW63
    m |= _SIGN
    b ^= m
    return b


def stable_order(x: np.ndarray) -> np.ndarray:
    """np.argsort(x, kind="stable") at the speed of np.sort on 64-bit integers (several times
    faster than an argsort for millions of values): each pass sorts keys that hold the group
    of equal leading value bits so far, the next value bits and the original index, until all
    bits are used. Small, non-finite or enormous inputs take np.argsort."""
    n = x.size
    bits_n = max(n - 1, 1).bit_length()
    if n < 1 << 16 or 2 * bits_n > 52 or not np.isfinite(x).all():
        return np.argsort(x, kind="stable")
    key = np.empty(n, dtype=np.uint64)
    for s in range(0, n, SORT_BLOCK):
        key[s:s + SORT_BLOCK] = _sortable(x[s:s + SORT_BLOCK])
    lowest = key.min()
    key -= lowest
    index_mask = np.uint64((1 << bits_n) - 1)
    shift = max(int(key.max()).bit_length() - (64 - bits_n), 0)
    key >>= np.uint64(shift)
    key <<= np.uint64(bits_n)
    for s in range(0, n, SORT_BLOCK):
        key[s:s + SORT_BLOCK] |= np.arange(s, min(s + SORT_BLOCK, n), dtype=np.uint64)
    key.sort()
    while shift:
        step = min(shift, 64 - 2 * bits_n)
        shift -= step
        order = key & index_mask
        key >>= np.uint64(bits_n)
        np.cumsum(key[1:] != key[:-1], out=key[1:])   # rank of each group of equal prefixes
        key[0] = 0
        key <<= np.uint64(step + bits_n)
        for s in range(0, n, SORT_BLOCK):
            o = order[s:s + SORT_BLOCK]
            low = _sortable(x[o])
            low -= lowest
            low >>= np.uint64(shift)
            low &= np.uint64((1 << step) - 1)
            low <<= np.uint64(bits_n)
            low |= o
            key[s:s + SORT_BLOCK] |= low
        del order
        key.sort()
    key &= index_mask
    return key.view(np.int64)


MISSING_IDS = ["", "na", "n/a", "nan", "null", "none"]   # how files spell "no user id"


def user_keys(user) -> np.ndarray:
    """User ids as stripped strings, '' where missing (None, NaN, blank, NA, null), whole numbers
    without a decimal point, in the narrowest str
    dtype: one canonical form, so every consumer agrees on who is who and none pools missing
    ids as a user "None"."""
    u = np.asarray(user)
    if u.dtype.kind == "f":                          # 7.0 and 7 are the same user
        whole = np.isfinite(u) & (u == np.floor(u))
        keys = np.where(whole, np.where(whole, u, 0).astype(np.int64).astype(str), u.astype(str))
    else:
        keys = u.astype(str)
    keys = np.char.strip(keys)
    if u.dtype.kind not in "USf":
        keys[np.equal(u, None) | (u != u)] = ""      # u != u: float NaN
    keys[np.isin(np.char.lower(keys), MISSING_IDS)] = ""
    return keys.astype(f"U{max(int(np.char.str_len(keys).max(initial=0)), 1)}")


class PointData:
    """Private points in lon/lat degrees, kept sorted by longitude for fast exact counts.

    Exact answers are for the data owner only; mechanisms read the data via `histogram`.
    User ids, if any, are kept in canonical form (`user_keys`): strings, '' where missing.
    The points never change after construction, so exact histograms and true counts are
    memoised (bounded): tuning, Phase 2 and repeated releases ask for the same ones.
    """

    kind = "points"      # which mechanisms apply (MechanismSpec.data_kind)
    raw_points = True    # each point's coordinates are here (dp.CountData has only counts)

    def __init__(self, x, y, user=None, report: LoadReport | None = None, name: str = "points"):
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        order = stable_order(x)
        self.x = x[order]
        self.y = y[order]
        self.user = None if user is None else user_keys(user)[order]   # before the shuffle: fast
        self.report = report or LoadReport("array", len(x), len(x))
        self.name = name
        self._fingerprint = None
        self._coords_fingerprint = None
        self._hists: dict = {}
        self._counts: dict = {}

    def __len__(self) -> int:
        return int(self.x.size)

    @property
    def n(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        return f"PointData({self.name!r}, n={self.n:,})"

    @property
    def fingerprint(self) -> str:
        """Content hash used as a cache key (never shown to data consumers).

        User ids count (in point order, canonical form), so a user-level and an event-level
        load of the same coordinates are different datasets to the caches; budget accounts
        key by `coordinates_fingerprint` instead, so they share one budget.
        """
        if self._fingerprint is None:
            if self.user is None:
                self._fingerprint = self.coordinates_fingerprint
            else:
                h = hashlib.blake2b(self.coordinates_fingerprint.encode(), digest_size=12)
                h.update(f"user ids {self.user.dtype.str}".encode())
                h.update(self.user.tobytes())
                self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def coordinates_fingerprint(self) -> str:
        """Hash of the coordinates alone: the key of the dataset's budget account, whatever
        user id column it is loaded with (the same people share one budget)."""
        if self._coords_fingerprint is None:
            h = hashlib.blake2b(digest_size=12)
            h.update(self.x.tobytes())
            h.update(self.y.tobytes())
            self._coords_fingerprint = h.hexdigest()
        return self._coords_fingerprint

    def in_domain(self, domain: Domain) -> np.ndarray:
        return domain.contains(self.x, self.y)

    def count_in(self, domain: Domain) -> int:
        """Points inside the closed box `domain` (what a release counts)."""
        return int(np.count_nonzero(self.in_domain(domain)))

    def histogram(self, grid: UniformGrid) -> np.ndarray:
        """Exact counts on a grid (spec 000 A0); a fresh copy, so callers may modify it."""
        key = (grid.domain, grid.gx, grid.gy)
        H = self._hists.get(key)
        if H is None:
            H = grid.histogram(self.x, self.y)
            if H.size <= MEMO_CELLS:
                self._hists[key] = H
                while sum(h.size for h in self._hists.values()) > MEMO_CELLS:
                    self._hists.pop(next(iter(self._hists)), None)
        return H.copy()

    def true_counts(self, rects, domain: Domain | None = None) -> np.ndarray:
        """Exact counts of points in each rectangle, half-open [w, e) x [s, n).

        With a domain, rectangles are clipped to it and an edge lying on the domain's east or
        north side is closed, matching the histogram's last cell (spec 000 P12), so a grid's
        cell-aligned answers and these counts agree exactly.
        """
        r = as_rect_array(rects)
        key = (r.tobytes(), domain)
        if key in self._counts:
            return self._counts[key].copy()
        close_e = np.zeros(len(r), bool)
        close_n = np.zeros(len(r), bool)
        if domain is not None:
            r = r.copy()
            r[:, 0] = np.maximum(r[:, 0], domain.west)
            r[:, 1] = np.maximum(r[:, 1], domain.south)
            close_e = r[:, 2] >= domain.east
            close_n = r[:, 3] >= domain.north
            r[:, 2] = np.minimum(r[:, 2], domain.east)
            r[:, 3] = np.minimum(r[:, 3], domain.north)
        lo = np.searchsorted(self.x, r[:, 0], side="left")
        hi = np.where(close_e, np.searchsorted(self.x, r[:, 2], side="right"),
                      np.searchsorted(self.x, r[:, 2], side="left"))
        out = np.zeros(len(r), dtype=np.int64)
        for q in range(len(r)):   # one slice per query; the work inside is vectorised
            if hi[q] <= lo[q] or r[q, 1] > r[q, 3]:
                continue
            ys = self.y[lo[q]:hi[q]]
            top = ys <= r[q, 3] if close_n[q] else ys < r[q, 3]
            out[q] = np.count_nonzero((ys >= r[q, 1]) & top)
        if len(self._counts) >= MEMO_WORKLOADS:
            self._counts.pop(next(iter(self._counts)), None)
        self._counts[key] = out
        return out.copy()

    def true_count(self, rect: Rect, domain: Domain | None = None) -> int:
        """Exact count in one rectangle. NON-PRIVATE: for the data owner's comparison only."""
        return int(self.true_counts(rect, domain)[0])

    def sample(self, k: int, seed: int = 0) -> np.ndarray:
        """Up to k raw points as an (m, 2) array, for the owner-only map layer."""
        rng = make_rng(seed)
        idx = rng.choice(self.n, size=min(k, self.n), replace=False) if self.n else np.zeros(0, int)
        return np.column_stack([self.x[idx], self.y[idx]])
