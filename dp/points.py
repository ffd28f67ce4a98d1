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

    def dropped_text(self) -> str:
        """The rows dropped, reason by reason: '1 row with a missing coordinate; 3 rows with ...'."""
        return "; ".join(f"{n:,} row{why[4:]}" if n == 1 and why.startswith("rows ") else f"{n:,} {why}"
                         for why, n in self.dropped.items())

    def summary(self) -> str:
        cols = ", ".join(f"{k}={v!r}" for k, v in self.columns.items())
        text = f"{self.rows_loaded:,} of {self.rows_read:,} rows loaded from {self.source_format}"
        if cols:
            text += f" (columns: {cols})"
        if self.dropped:
            text += "; dropped: " + self.dropped_text()
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


_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
HASH_BLOCK = 1 << 16      # points per block when hashing: temporaries stay in the CPU cache


def _splitmix(h: np.ndarray, tmp: np.ndarray | None = None) -> np.ndarray:
    """splitmix64's finaliser, in place on uint64 (`tmp`: scratch of h's size, made when not
    given): every input bit changes about half the output bits, so sums of these values do not
    cancel for different points."""
    tmp = np.empty_like(h) if tmp is None else tmp
    for shift, mix in ((30, _MIX1), (27, _MIX2), (31, None)):
        np.right_shift(h, np.uint64(shift), out=tmp)
        h ^= tmp
        if mix is not None:
            h *= mix
    return h


def _bits(v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float64 values as a uint64 copy of their bits (into `out` when given), -0.0 as 0.0
    (equal coordinates, one hash)."""
    out = np.empty(v.shape, np.uint64) if out is None else out
    np.add(v, 0.0, out=out.view(np.float64))
    return out


def multiset_hash(x: np.ndarray, y: np.ndarray, users: "UserIds | None" = None,
                  seed: int = 0) -> bytes:
    """An order-invariant 136-bit hash of the points (x, y[, user id]): two independent 64-bit
    mixes per point summed mod 2^64, and the count. Rows in another order give the same hash
    (one budget account however a file is shuffled); any moved point changes it. One vectorised
    pass in blocks, into two block arrays made once (fresh temporaries per block cost page
    faults where malloc hands memory back early, as in Dask's workers: 3.7 times the time), no
    sort."""
    s1 = s2 = 0
    salt = np.uint64(seed * 0x9E3779B97F4A7C15 % 2**64)
    ids = None if users is None else _key_hashes(users.keys)
    size = min(HASH_BLOCK, x.size)
    h_block, t_block = np.empty(size, np.uint64), np.empty(size, np.uint64)
    for i in range(0, x.size, HASH_BLOCK):
        h = _bits(y[i:i + HASH_BLOCK], h_block[:min(HASH_BLOCK, x.size - i)])
        t = t_block[:h.size]
        h += salt
        _splitmix(h, t)
        if ids is not None:
            h ^= np.take(ids, users.codes[i:i + HASH_BLOCK], out=t)
            _splitmix(h, t)
        h ^= _bits(x[i:i + HASH_BLOCK], t)
        _splitmix(h, t)
        s1 += int(h.sum(dtype=np.uint64))   # an array sum wraps mod 2^64
        h += _GOLDEN
        _splitmix(h, t)
        s2 += int(h.sum(dtype=np.uint64))
    return np.array([s1 % 2**64, s2 % 2**64, x.size], dtype="<u8").tobytes()


def _key_hashes(keys: np.ndarray) -> np.ndarray:
    """A uint64 hash per canonical user id string (independent of the array's str width):
    its length, then its code points mixed in one column at a time across all ids."""
    codes = np.ascontiguousarray(keys).view(np.uint32).reshape(len(keys), keys.dtype.itemsize // 4)
    lens = np.char.str_len(keys).astype(np.uint64)
    h = _splitmix(lens + _GOLDEN)
    for j in range(codes.shape[1]):   # one pass per character position, vectorised over ids
        nxt = _splitmix(h ^ codes[:, j].astype(np.uint64))
        h = np.where(j < lens, nxt, h)
    return h


@dataclass(frozen=True)
class UserIds:
    """User ids as int codes (one per point) into `keys`, the sorted distinct ids in canonical
    form (`user_keys`): consumers group by code; the strings exist once per user, not per point."""

    codes: np.ndarray
    keys: np.ndarray

    @classmethod
    def of(cls, user) -> "UserIds":
        """Canonical codes of any id column. Arrow and numpy string columns are reduced to their
        distinct values first (hashing in C), so only those go through the numpy string
        canonicalisation; other inputs (None, NaN, numbers in an object array) go through it whole."""
        if isinstance(user, cls):
            return user
        import pyarrow as pa            # here, not at `import dp`: most sessions never need it
        import pyarrow.compute as pc
        if isinstance(user, np.ndarray) and user.dtype.kind == "U":
            user = pa.array(user)
        if isinstance(user, (pa.Array, pa.ChunkedArray)):
            distinct = pc.unique(user)
            index = pc.index_in(user, value_set=distinct)
            index = (index.combine_chunks() if isinstance(index, pa.ChunkedArray) else index)
            keys, remap = np.unique(user_keys(distinct.to_numpy(zero_copy_only=False)),
                                    return_inverse=True)
            codes = remap.astype(_code_type(len(keys)))[index.to_numpy()]
        else:
            keys, codes = np.unique(user_keys(user), return_inverse=True)
            codes = codes.astype(_code_type(len(keys)))
        return cls(codes, keys)

    def take(self, which) -> "UserIds":
        """The ids of the points selected by `which` (a mask or indices); the same keys."""
        return UserIds(self.codes[which], self.keys)

    def strings(self) -> np.ndarray:
        """The canonical id of every point (a str array, '' where missing)."""
        return self.keys[self.codes]

    def missing(self) -> np.ndarray:
        """Per point: True where there is no user id."""
        if len(self.keys) and self.keys[0] == "":    # sorted: '' comes first
            return self.codes == 0
        return np.zeros(len(self.codes), bool)


def _code_type(n_keys: int):
    """The narrowest integer type for codes into n_keys ids."""
    return np.int32 if n_keys < 2**31 else np.int64


class PointData:
    """Private points in lon/lat degrees, in the order given (file order for an upload).

    Exact answers are for the data owner only; mechanisms read the data via `histogram`, which
    needs no order. Exact range counts sort a copy by longitude the first time they are asked
    (memoised). User ids, if any, are kept as codes into canonical ids (`UserIds`).
    The points never change after construction (the arrays are read-only), so exact
    histograms and true counts are memoised (bounded): tuning, Phase 2 and repeated releases
    ask for the same ones.
    """

    kind = "points"      # which mechanisms apply (MechanismSpec.data_kind)
    raw_points = True    # each point's coordinates are here (dp.CountData has only counts)
    finest = None        # no resolution limit on the grids mechanisms read (dp.CountData has one)

    def __init__(self, x, y, user=None, report: LoadReport | None = None, name: str = "points",
                 *, copy: bool = True):
        """`copy=False`: the caller hands over float64 arrays it owns and will not change (the
        loader's), which saves a copy of 16 bytes per point."""
        self.x = np.array(x, dtype=np.float64, copy=copy or None)
        self.y = np.array(y, dtype=np.float64, copy=copy or None)
        if self.x.shape != self.y.shape or self.x.ndim != 1:
            raise ValueError("x and y must be 1-d arrays of the same length")
        self.x.flags.writeable = self.y.flags.writeable = False
        self.users = None if user is None else UserIds.of(user)
        self.report = report or LoadReport("array", len(self.x), len(self.x))
        self.name = name
        self._fingerprint = None
        self._coords_fingerprint = None
        self._by_lon = None
        self._hists: dict = {}
        self._counts: dict = {}

    def __len__(self) -> int:
        return int(self.x.size)

    @property
    def n(self) -> int:
        return len(self)

    @property
    def user(self) -> np.ndarray | None:
        """Canonical user id per point (str array, '' where missing), or None without ids.
        Built on each call: code that groups users should read `users.codes`."""
        return None if self.users is None else self.users.strings()

    def __repr__(self) -> str:
        return f"PointData({self.name!r}, n={self.n:,})"

    @property
    def fingerprint(self) -> str:
        """Content hash used as a cache key (never shown to data consumers).

        User ids count (each point's canonical id is hashed into its point), so a user-level and
        an event-level load of the same coordinates are different datasets to the caches; budget
        accounts key by `coordinates_fingerprint` instead, so they share one budget. Like it,
        independent of the row order.
        """
        if self._fingerprint is None:
            if self.users is None:
                self._fingerprint = self.coordinates_fingerprint
            else:
                h = hashlib.blake2b(b"points with user ids", digest_size=12)
                h.update(multiset_hash(self.x, self.y, self.users, seed=1))
                self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def coordinates_fingerprint(self) -> str:
        """Hash of the coordinates alone: the key of the dataset's budget account, whatever
        user id column it is loaded with (the same people share one budget), and whatever the
        order of its rows (shuffling a file must not open a fresh budget)."""
        if self._coords_fingerprint is None:
            h = hashlib.blake2b(b"points", digest_size=12)
            h.update(multiset_hash(self.x, self.y))
            self._coords_fingerprint = h.hexdigest()
        return self._coords_fingerprint

    def _sorted_by_lon(self) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) sorted by longitude, made once when exact range counts are first asked."""
        if self._by_lon is None:
            order = stable_order(self.x)
            self._by_lon = (self.x[order], self.y[order])
        return self._by_lon

    def in_domain(self, domain: Domain) -> np.ndarray:
        return domain.contains(self.x, self.y)

    def count_in(self, domain: Domain) -> int:
        """Points inside the closed box `domain` (what a release counts)."""
        return int(np.count_nonzero(self.in_domain(domain)))

    def histogram(self, grid: UniformGrid) -> np.ndarray:
        """Exact counts on a grid (spec 000 A0); a fresh copy, so callers may modify it. Kept
        per grid; a grid that a kept one refines is summed from it, without binning again."""
        key = (grid.domain, grid.gx, grid.gy)
        H = self._hists.get(key)
        if H is None:
            # a snapshot: other threads (a shared sample) may add and drop entries meanwhile
            fine = next((h for k, h in list(self._hists.items()) if grid.coarsens(UniformGrid(*k))), None)
            H = grid.histogram(self.x, self.y) if fine is None else grid.pool(fine)
            if H.size <= MEMO_CELLS:
                self._hists[key] = H
                while True:                   # the oldest go first; snapshots, as above
                    kept = list(self._hists.items())
                    if sum(h.size for _, h in kept) <= MEMO_CELLS:
                        break
                    self._hists.pop(kept[0][0], None)
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
        xs, ys_all = self._sorted_by_lon()
        lo = np.searchsorted(xs, r[:, 0], side="left")
        hi = np.where(close_e, np.searchsorted(xs, r[:, 2], side="right"),
                      np.searchsorted(xs, r[:, 2], side="left"))
        out = np.zeros(len(r), dtype=np.int64)
        for q in range(len(r)):   # one slice per query; the work inside is vectorised
            if hi[q] <= lo[q] or r[q, 1] > r[q, 3]:
                continue
            ys = ys_all[lo[q]:hi[q]]
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
