"""The server-side store every worker process shares: bounded in bytes, split by session.

Keys name their session ("kind:session:rest"); a session's entries count against its own
quota (SESSION_SHARE of the store's bytes, PER_SESSION entries), its oldest dropped first but
never its workspace (`PINNED`: the record of its paid requests goes only when it expires), and
all visitors' sessions together hold at most VISITOR_SHARE of the bytes, so the owner's
sessions (`RESERVED`) always find room that visitors cannot take. At
the store's byte bound a session with too little of its own to drop is refused (`set` returns
False) instead of anyone else being evicted, so one browser can never push out, read or time
another's entries. Two backends: a folder (`server.file_store`: flask-caching's FileSystemCache, one
sub-folder per session) and Redis (`server.redis_store`). In front of either sits a small per-process copy (`FrontCache`), so a
release is unpickled once per worker, not on every request; a dataset's point arrays are
memory-mapped from the folder store (one copy in the page cache for every worker). Every
entry's pickle carries an HMAC of the server's key and the entry's key, checked before it is
unpickled: an entry planted in the folder or in Redis (unpickling runs code), or moved to another
session's key, is read as missing.
"""
from __future__ import annotations

import hashlib
import hmac
import pickle
import secrets
import threading
from collections import OrderedDict
from contextlib import contextmanager

from .faults import speaking

SESSION_SHARE = 4        # a session may hold up to 1/SESSION_SHARE of the store's bytes
PER_SESSION = 64         # and at most this many entries
VISITOR_SHARE = 0.75     # all visitors' sessions together hold at most this share of the store's
                         # bytes: the rest is the owner's, whom visitors can never lock out
RESERVED = "owner-"      # the start of an owner's session id (`server.state`): not a visitor's
PINNED = frozenset({"workspace"})   # kinds never dropped to make room: a session's workspace
                                    # (its request ids and release records) goes only when it expires
LOCK_TIMEOUT = 120       # seconds a Redis lock is held at most (a crashed worker's lock expires)
MAC_BYTES = 32                # each entry's pickle is sealed by an HMAC-SHA256 of the server's key
_PROCESS_KEY = secrets.token_bytes(32)   # the seal's key when none is given: this process's own


def owner(key: str) -> str:
    """The session a key belongs to ("kind:session:rest"), or "" for shared entries."""
    parts = key.split(":", 2)
    return parts[1] if len(parts) == 3 else ""


def reserved(who: str) -> bool:
    """True for an owner's session, which may use the store's share kept from visitors."""
    return who.startswith(RESERVED)


def _droppable(entries: list, but=None) -> list:
    """The entries of `_own` that may be dropped to make room, oldest first (not `but`, not pinned)."""
    return [e for e in entries if e[0] != but and e[1] not in PINNED]


def kind(key: str) -> str:
    """The kind of entry a key names (dataset, release, job, live, ...)."""
    return key.split(":", 1)[0]


class FrontCache:
    """A per-process LRU of unpickled values, bounded by their pickled size. Each entry keeps the
    stored version it was read at: a changed or deleted entry in the shared store is never served."""

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.used = 0
        self._items: OrderedDict = OrderedDict()      # key -> (version, value, nbytes)
        self._lock = threading.Lock()

    def get(self, key: str, version):
        with self._lock:
            item = self._items.get(key)
            if item is None or item[0] != version:
                return None
            self._items.move_to_end(key)
            return item[1]

    def put(self, key: str, version, value, nbytes: int):
        with self._lock:
            self._drop(key)
            if nbytes > self.max_bytes:
                return
            while self.used + nbytes > self.max_bytes:
                self._drop(next(iter(self._items)))
            self._items[key] = (version, value, nbytes)
            self.used += nbytes

    def drop(self, key: str):
        with self._lock:
            self._drop(key)

    def _drop(self, key: str):
        item = self._items.pop(key, None)
        if item is not None:
            self.used -= item[2]


class SessionQuota:
    """The policy both backends share: per-session quotas, a byte bound, refusal, the front cache.

    A backend supplies: `_version(key)`, `_load(key)` -> (value, bytes in memory, version),
    `_write(key, (pickle, buffers), timeout)` -> version, `_remove(key)`, `_own(owner)` -> [(handle, kind, bytes)] oldest first,
    `_drop(handle)`, `_usage(visitors)` (bytes held, by visitors' sessions only or by all), `_purge_expired()`, `_guard()` (a lock across
    processes around changes of sizes) and `_lock(key)` (a lock across processes for one key).
    Every public method turns the backend's failures (a full or read-only disk, Redis down)
    into `faults.Unavailable`, a message saying so.
    """

    def _setup_quota(self, max_bytes: int, front_bytes: int, key: bytes | None):
        self._key = key or _PROCESS_KEY
        self.max_bytes = int(max_bytes)
        self.session_bytes = self.max_bytes // SESSION_SHARE
        self.visitor_bytes = int(self.max_bytes * VISITOR_SHARE)
        self.front = FrontCache(front_bytes)

    def get(self, key: str):
        with speaking("store"):
            return self._get(key)

    def _get(self, key: str):
        version = self._version(key)
        if version is None:
            self.front.drop(key)
            return None
        value = self.front.get(key, version)
        if value is None:
            loaded = self._load(key)
            if loaded is None:
                return None
            value, nbytes, version = loaded
            self.front.put(key, version, value, nbytes)
        return value

    def has(self, key: str) -> bool:
        with speaking("store"):
            return self._version(key) is not None

    @contextmanager
    def lock(self, key: str):
        """A lock on one key across threads and processes (see the backend's `_lock`)."""
        held = self._lock(key)
        with speaking("store"):
            held.__enter__()
        try:
            yield
        finally:
            with speaking("store"):
                held.__exit__(None, None, None)

    def room_for(self, who: str, nbytes: int | None = None) -> bool:
        """True if an entry of `who` of `nbytes` (default: 1% of the store) can be stored
        without evicting anyone else's: it fits the session's share, and the store's room with
        all of `who`'s droppable entries dropped holds it (a few small entries of its own are
        not room for a release)."""
        nbytes = self.max_bytes // 100 if nbytes is None else nbytes
        with speaking("store"), self._guard():
            freed = sum(e[2] for e in _droppable(self._own(who)))
            return nbytes <= self.session_bytes and not self._over(self._usages(who), freed, nbytes)

    def _usages(self, who: str) -> tuple[int, int | None]:
        """(bytes the store holds, bytes all visitors hold; None for an owner's session, which
        the visitors' share does not bound), read once per decision."""
        return self._usage(), None if reserved(who) else self._usage(visitors=True)

    def _over(self, usages: tuple, freed: int, n: int) -> bool:
        """True when `n` more bytes, once `freed` of the writer's own are dropped, would pass a bound:
        the store's, or for a visitor the share all visitors together may hold."""
        total, visitors = usages
        return total - freed + n > self.max_bytes or (
            visitors is not None and visitors - freed + n > self.visitor_bytes)

    def set(self, key: str, value, timeout=None) -> bool:
        """Store, dropping the owner's own oldest entries past its quota or at the store's bound;
        refuse (False) rather than evict another session's entry. A failed write (a full disk,
        Redis down) raises `faults.Unavailable` and leaves no part of the entry behind."""
        with speaking("store"):
            return self._set(key, value, timeout)

    def _set(self, key: str, value, timeout) -> bool:
        payload, n = self._dumps(key, value)
        who = owner(key)
        if n > self.session_bytes:
            return False
        with self._guard():
            entries, handle = self._own(who), self._handle(key)
            mine = _droppable(entries, but=handle)
            replaced = sum(e[2] for e in entries if e[0] == handle)
            kept = [e for e in entries if e[0] != handle and e[1] in PINNED]
            mine_bytes = sum(e[2] for e in mine + kept)
            drop = 0
            while drop < len(mine) and (len(mine) + len(kept) - drop + 1 > PER_SESSION
                                        or mine_bytes + n > self.session_bytes):
                mine_bytes -= mine[drop][2]
                drop += 1
            freed = replaced + sum(e[2] for e in mine[:drop])
            if self._over(self._usages(who), freed, n):
                self._purge_expired()
                mine, usages = _droppable(self._own(who), but=handle), self._usages(who)
                freed = replaced + sum(e[2] for e in mine[:drop])
                while drop < len(mine) and self._over(usages, freed, n):
                    freed += mine[drop][2]
                    drop += 1
                if self._over(usages, freed, n):
                    return False
            for handle, _, _ in mine[:drop]:
                self._drop(handle)
            version = self._write(key, payload, timeout)
        self.front.put(key, version, value, n)
        return True

    def _dumps(self, key: str, value) -> tuple:
        """((sealed pickle, out-of-band buffers), bytes in all): everything in the pickle here."""
        blob = self._seal(key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        return (blob, []), len(blob)

    def _mac(self, key: str, blob) -> bytes:
        return hmac.new(self._key, key.encode() + b"\0" + blob, hashlib.sha256).digest()

    def _seal(self, key: str, blob: bytes) -> bytes:
        """The pickle with its HMAC in front (bound to the entry's key)."""
        return self._mac(key, blob) + blob

    def _unseal(self, key: str, sealed: bytes):
        """The pickle of a sealed entry, or None when its HMAC is not this server's for this
        key (planted, changed or moved): it is never unpickled."""
        blob = memoryview(sealed)[MAC_BYTES:]
        return blob if hmac.compare_digest(self._mac(key, blob), sealed[:MAC_BYTES]) else None

    def delete(self, key: str) -> bool:
        self.front.drop(key)
        with speaking("store"), self._guard():
            self._remove(key)
        return True

    def trim(self, who: str, of_kind: str, keep: int):
        """Drop `who`'s oldest entries of one kind until `keep` are left (its own, nobody else's)."""
        with speaking("store"), self._guard():
            mine = [e for e in self._own(who) if e[1] == of_kind]
            for handle, _, _ in mine[:max(len(mine) - keep, 0)]:
                self._drop(handle)
