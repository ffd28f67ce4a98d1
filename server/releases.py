"""Releases kept per browser session, and their commit with the charge that pays for them.

Releases are cached by (session, data, domain, mechanism, params, epsilon split, seed) under a
`ReleaseKey`. A fresh release (OS entropy, the default) has a random token in place of the
seed and exists only as its one cached copy; a fixed-seed demo release can be rebuilt
identically, at no new cost. Every release is charged to the session's `dp.Accountant` for its
dataset (`services.current().accounts`). A release and its charge commit together: the release is stored
first, then the charge and the release's record are written in one transaction of the
database (the commit point); a stored release without a record (its builder was killed, or the
accounts could not be written) is discarded when read, so a crash or a full disk at any point
leaves both or neither.

Cached objects are never changed in place: a release derived from a cached one (an Euler
release at another consistency stage) is cached under its own entry, next to its release's.
Building a release runs in the bounded pool of `server.heavy`, so cheap callbacks are not stuck
behind it.
"""
from __future__ import annotations

import threading

import dp

from . import heavy, services, state
from .database import release_entry
from .faults import Unavailable
from .release_key import ReleaseKey

def release_key(fingerprint, domain: dp.Domain, mechanism, params, split, epsilon, seed,
                points_per_user: int | None = None) -> str:
    """The text of a new release's key (`ReleaseKey.make`: seed None is fresh randomness)."""
    return ReleaseKey.make(fingerprint, domain, mechanism, params, split, epsilon, seed,
                           points_per_user).text


def key_fingerprint(key: str) -> str:
    """Fingerprint of the dataset a release key was made from."""
    return ReleaseKey.parse(key).fingerprint


def key_domain(key: str) -> dp.Domain:
    """The public domain a release key was made with."""
    return ReleaseKey.parse(key).box


def comparison_key(key: str, mechanism: str) -> str:
    """Key of a release of another mechanism, at its default split and parameters, on the same
    data, domain, ε, points per user and randomness as `key`'s release: the same fixed seed, or
    fresh randomness with a new token of its own (so it is a new draw, charged as one)."""
    k = ReleaseKey.parse(key)
    spec = dp.mechanisms()[mechanism]
    return release_key(k.fingerprint, k.box, mechanism, spec.resolve_params({}), spec.default_split,
                       k.epsilon, k.seed, k.points_per_user)


def _release_entry(sid: str, key: str) -> str:
    return f"release:{sid}:" + release_entry(key)


def release(sid: str | None, key: str, create: bool = False):
    """The release for a key: from this session's cache, or built from the key's inputs.

    Building goes through the dataset's account: `create=True` (the Release action) charges a
    fresh draw, and is refused with BudgetError beyond the total. A fixed-seed demo is rebuilt
    identically whenever the cache dropped it, charged once for all rebuilds. Any other reader
    that misses a fresh release gets LookupError: an expired fresh release is never silently
    redrawn (a second draw for the same charge would let a viewer average the noise away).
    """
    ck = _release_entry(sid, key)
    rel = services.current().store.get(ck)
    if rel is not None and not committed(sid, key):
        services.current().store.delete(ck)                       # its builder died before charging it
        rel = None
    if rel is None:
        k = ReleaseKey.parse(key)
        fp = k.fingerprint
        if not create and (k.seed is None or not committed(sid, key)):
            raise LookupError("this release is no longer on the server; release again "
                              "(a new draw spends ε again)")    # only a charged demo is rebuilt
        state.spending(sid, fp) if create else state.points(sid, fp)   # a new spend: owners only on theirs
        if not services.current().store.room_for(sid):
            raise LookupError(state.FULL)            # refused before anything is charged
        rel = _build_or_settle(sid, key)
    return rel


def _build_or_settle(sid: str, key: str):
    """Build a release in the heavy pool. If the process building it died, settle what it left:
    a release stored and charged is the answer; otherwise nothing was charged (an uncharged
    release is dropped) and the build is tried once more in a new process."""
    for attempt in (1, 2):
        try:
            state.heavy_call(_build_release, sid, key)
            return _settled(sid, key)
        except heavy.Broken:
            rel = _settled(sid, key)
            if rel is not None:
                return rel
            if attempt == 2:
                raise LookupError(heavy.BROKEN + " (nothing was charged)") from None


def _settled(sid: str, key: str):
    """The stored release of a key if its charge was committed, else None (an uncommitted one
    is removed); LookupError, saying so, if it was charged but is not in the store."""
    ck = _release_entry(sid, key)
    rel = services.current().store.get(ck)
    if committed(sid, key):
        if rel is None:
            raise LookupError("this release was charged (see the budget ledger) but the server "
                              "could not keep it: it is full or its store failed")
        return rel
    if rel is not None:
        services.current().store.delete(ck)
    return None


def unrecorded_release(sid: str, fingerprint: str, domain: dp.Domain, recorded) -> str | None:
    """The key of this session's newest charged release of this data on this domain when it is
    in the store but not among the `recorded` keys: its worker stopped between the charge (the
    commit) and the workspace's record of it, so the page would offer an older one as the last
    paid for. None when the newest such release is recorded, or none is kept."""
    for ref in services.current().accounts.records(state.scope(sid, fingerprint),
                                      state.account_key(state.points(sid, fingerprint)), sid):
        k = ReleaseKey.parse(ref)
        if k.fingerprint != fingerprint or k.box != domain:
            continue
        if ref in recorded:
            return None
        if services.current().store.has(_release_entry(sid, ref)):                  # still kept
            return ref
    return None


_committed_keys: set = set()      # release keys this process has seen committed (records stay)


def committed(sid: str, key: str) -> bool:
    """True if a charge to the session's account for the key's data paid for this release: its
    record, written with the charge (the commit point of a release), exists, and the account,
    read under its signature (a changed, rolled-back or deleted one is refused in words), holds
    the charge: a record put in by hand serves nothing."""
    if (sid, key) in _committed_keys:
        return True
    fp = key_fingerprint(key)
    where, account = state.scope(sid, fp), state.account_key(state.points(sid, fp))
    accounts = services.current().accounts
    if not (accounts.recorded(where, account, key) and any(c.ref == key for c in accounts.get(where, account).charges)):
        return False
    if len(_committed_keys) > 100_000:
        _committed_keys.clear()
    _committed_keys.add((sid, key))
    return True


NO_ROOM = ("the release is larger than the room the server has left for this browser, so it "
           "was not kept, and nothing was charged: close other tabs of this page to free room, or "
           "try a coarser setting")


def _build_release(sid: str, key: str) -> None:
    """Charge and build the release of a key and store it (in a heavy-pool process, or inline):
    under the account's lock the release is drawn on a copy of the account, stored, and only
    then is the account written (`accounts.update`'s commit). A store that fails (full disk,
    Redis down), refuses it for room, or accounts that cannot be written leave neither the
    charge nor the release (`Unavailable`): a charge stands only with a release kept. Refusing
    for room depends on the release's size, so on the data, but only the person releasing
    sees it, and may see the data (the owner, or a visitor's own upload or a public sample);
    nothing is published."""
    k = ReleaseKey.parse(key)
    data = state.points(sid, k.fingerprint)
    entry, stored, records = _release_entry(sid, key), [], []

    def draw_and_keep(acc):
        rel = acc.release(k.mechanism, data, k.box, epsilon=k.epsilon, split=k.split,
                          params=k.params, seed=k.seed, ref=key, max_points_per_user=k.points_per_user)
        if not services.current().store.set(entry, rel):
            raise Unavailable(NO_ROOM)       # `AccountStore.update` writes no charge then
        stored.append(True)
        records.append((sid, key, next((c.epsilon for c in reversed(acc.charges) if c.ref == key), 0.0)))
        return rel
    try:
        services.current().accounts.update(state.scope(sid, k.fingerprint), state.account_key(data), draw_and_keep,
                              records)
    except Unavailable:
        if stored:
            try:
                services.current().store.delete(entry)          # stored, but its charge could not be written
            except Unavailable:
                pass                         # discarded when read: no charge names it
        raise


def _build_stage(sid: str, key: str, stage: str):
    """Derive and store a release at another Euler stage (in a heavy-pool process, or inline);
    returns it only when the store refused it."""
    derived = release(sid, key).with_stage(stage)
    return None if services.current().store.set(f"{_release_entry(sid, key)}:stage={stage}", derived) else derived


_derive_guard = threading.Lock()
_deriving: dict = {}          # cache entry -> (lock, readers): one derivation of an entry at a time


def staged_release(sid: str | None, key: str, stage: str | None):
    """The release for a key answering at an Euler consistency stage (None: its own stage).

    `with_stage` makes a new release and leaves the cached one as it is; the new one is cached
    under its own entry (the release's, plus ":stage=..."), in this session's namespace only,
    so the LinProg of a stage runs once per release. Reading it first reads the release itself
    (`release`), so the same ownership rules and errors apply.
    """
    rel = release(sid, key)
    if stage is None or stage == rel.capabilities.stage:
        return rel
    entry = f"{_release_entry(sid, key)}:stage={stage}"
    with _derive_guard:
        lock, readers = _deriving.get(entry, (threading.Lock(), 0))
        _deriving[entry] = (lock, readers + 1)
    try:
        with lock:                            # a second reader waits for the first one's result
            derived = services.current().store.get(entry)
            if derived is None:               # refused when the server is full: not kept, still shown
                derived = state.heavy_call(_build_stage, sid, key, stage, idempotent=True) or services.current().store.get(entry)
    finally:
        with _derive_guard:
            lock, readers = _deriving[entry]
            if readers > 1:
                _deriving[entry] = (lock, readers - 1)
            else:
                del _deriving[entry]
    return derived
