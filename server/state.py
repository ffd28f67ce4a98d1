"""Server-side state per browser session, kept on the server; the browser holds only keys.

Each browser has a session id (`server.sessions`: a hash of its signed cookie); the server keys
everything by it: uploaded datasets, releases, evaluations, interactive sessions and budget accounts.
A lookup names its session in the key itself, so another browser's entries are never read,
never hit and take no part in any timing (a forged key only ever reaches the forger's own
entries). Built-in samples are public and shared.

Releases are cached by (session, data, domain, mechanism, params, epsilon split, seed). A fresh
release (OS entropy, the default) has a random token in place of the seed and exists only as
its one cached copy; a fixed-seed demo release can be rebuilt identically, at no new cost.
Every release is charged to the session's `dp.Accountant` for its dataset (see `accounts`).
A release and its charge commit together: the release is stored first and the charge written
after (the commit point); a stored release that no charge names (its builder was killed, or the
accounts could not be written) is discarded when read, so a crash or a full disk at any point
leaves both or neither.

Cached objects are never changed in place: a release derived from a cached one (an Euler
release at another consistency stage) is cached under its own entry, next to its release's.
Everything lives in a store all worker processes share (`server.store`: a folder or
Redis, bounded in bytes, a quota per session); building a release runs in the bounded pool of
`server.heavy`, so cheap callbacks are not stuck behind it.
"""
from __future__ import annotations

import atexit
import copyreg
import hashlib
import pickle
import secrets
import shutil
import tempfile
import threading
from contextlib import contextmanager


import dp
from dp.samples import REGION_SAMPLES

from . import heavy, published, sessions, store
from .accounts import SERVER, AccountStore
from .faults import Unavailable
from .release_key import ReleaseKey

cache: store.SessionQuota      # the shared store, made by init_cache
accounts = AccountStore()
DEFAULT_SAMPLE = "city_200k"
TIMEOUT = 4 * 3600
DEFAULT_STORE_MB = 1024      # bytes the shared store holds (on disk or in Redis)
DEFAULT_MEMORY_MB = 128      # unpickled copies each worker process keeps in front of it
LIVE_PER_SESSION = 3         # interactive sessions one browser keeps; its oldest dropped first
OWNERS_ONLY = ("only the data owner can do this on this server: the person who started it opens "
               "the owner link it printed")
UPLOADS_OFF = ("uploads on this server are for its data owner only; explore the samples and the "
               "published releases (the gallery at /r/)")
FULL = ("the server is holding as much as it can for other visitors right now; try again in a "
        "while (nothing was charged)")
_samples: dict = {}          # name -> (PointData, Domain); public, shared by every session
_sample_by_fp: dict = {}     # fingerprint -> PointData of a sample


def _registered_spec(name: str):
    return dp.mechanisms()[name]


def _reduce_spec(spec):
    """Pickle a registered mechanism spec as its name (releases refer to their spec, and a spec
    holds functions that do not pickle); any other spec as usual."""
    if dp.mechanisms().get(spec.name) is spec:
        return _registered_spec, (spec.name,)
    return spec.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


copyreg.pickle(dp.MechanismSpec, _reduce_spec)


def init_cache(server, config: dict) -> dict:
    """Configure the shared store and the budget accounts, and install the session cookies and
    the owner link on the server (`sessions.Sessions`); returns the settings a heavy-pool
    process needs to reach the same store (`configure`)."""
    secret = sessions.session_secret(config.get("accounts_dir"))
    settings = configure({**config, "store_dir": config.get("store_dir") or _temporary_folder(),
                          "published_dir": config.get("published_dir") or _temporary_folder()}, secret)
    sessions.Sessions(secret, config.get("owner_token_hash"), bool(config.get("secure_cookies", False)),
                      bool(config.get("public_uploads", True))).install(server)
    return settings


def configure(config: dict, secret: bytes | None = None) -> dict:
    """Open the shared store and the budget accounts of these settings in this process, signed
    with keys derived from the server's `secret` (by default the one kept beside the accounts).

    The store is Redis when `redis_url` is set, else the folder `store_dir`, bounded by
    `store_mb` and `memory_mb` of unpickled copies per process (see `server.store`)."""
    global accounts, cache
    secret = secret or sessions.session_secret(config.get("accounts_dir"))
    max_bytes = int(float(config.get("store_mb", DEFAULT_STORE_MB)) * 2**20)
    front_bytes = int(float(config.get("memory_mb", DEFAULT_MEMORY_MB)) * 2**20)
    if config.get("redis_url"):
        from .redis_store import RedisStore
        cache = RedisStore(config["redis_url"], max_bytes, front_bytes, default_timeout=TIMEOUT,
                           key=sessions.derive_key(secret, "store"))
    else:
        cache = store.FileStore(config["store_dir"], max_bytes, front_bytes, default_timeout=TIMEOUT,
                                key=sessions.derive_key(secret, "store"))
    accounts = AccountStore(config.get("accounts_dir"), config.get("default_budget", 10.0),
                            key=sessions.derive_key(secret, "accounts"), url=config.get("database_url"))
    if config.get("published_dir"):
        published.configure(config["published_dir"], sessions.derive_key(secret, "published"))
    return {k: config.get(k) for k in ("redis_url", "store_dir", "store_mb", "memory_mb",
                                       "accounts_dir", "database_url", "default_budget", "published_dir")
            if k in config}


def _temporary_folder() -> str:
    """A fresh folder for a store nobody configured (tests, the Python API), removed at exit."""
    folder = tempfile.mkdtemp(prefix="dp-store-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def load_samples() -> None:
    """Make every built-in sample now (the app does this before gunicorn forks, so every worker
    and heavy-pool process starts with them: about a second, from their fixed seeds)."""
    for name in [*dp.SAMPLES, *REGION_SAMPLES]:
        sample(name)


def sample(name: str):
    """(data, domain) of a built-in point or region sample, generated once per process from its
    fixed seed, so every process makes the same data with the same fingerprint."""
    if name not in _samples:
        data, domain = dp.load_region_sample(name) if name in REGION_SAMPLES else dp.load_sample(name)
        _samples[name] = (data, domain)
        _sample_by_fp[data.fingerprint] = data
    return _samples[name]


def sample_of(fingerprint: str) -> str | None:
    """The built-in sample's name for a fingerprint made in this process; None for other data."""
    return next((name for name, (data, _) in _samples.items() if data.fingerprint == fingerprint), None)


def dataset_summary(data, origin: str) -> dict:
    """What the browser may hold about the data: name, size, the loader's report; no points.
    `kind` ('points' or 'regions', `data.kind`) says which mechanisms apply; `counts` marks
    points counted on a grid (dp.CountData), with the public box they were counted over."""
    r = data.report
    counts = data.kind == "points" and not data.raw_points
    return {"fingerprint": data.fingerprint, "name": data.name, "n": data.n, "origin": origin,
            "kind": data.kind,
            "users": (data.users if data.kind == "points" else data.user) is not None,
            "counts": counts, "box": list(data.domain.bounds) if counts else None,
            "per_user": data.points_per_user if counts else None,
            "summary": r.summary(), "dropped": r.dropped, "warnings": list(r.warnings)}


def account_key(data) -> str:
    """Which budget account a dataset spends from: its coordinates, whatever user ids it was
    loaded with, so loading the same people with or without a user column shares one budget."""
    return data.coordinates_fingerprint


def sample_name(info: dict) -> str | None:
    """The built-in sample a dataset summary names (its origin "sample:NAME"), else None."""
    origin = info.get("origin", "")
    return origin.split(":", 1)[1] if origin.startswith("sample:") else None


def use_sample(sid: str, name: str) -> dict:
    data, _ = sample(name)
    return dataset_summary(data, f"sample:{name}")


def put_upload(sid: str, data) -> dict:
    """Keep an upload for this session only; re-uploading the same file finds the same account.
    An owner's upload is the server's data, as if opened from its folder: it spends from the
    server's one account for these points, whichever way and by whichever owner link they came."""
    if sessions.is_owner():
        return {**put_server_data(sid, data), "origin": "upload"}
    if not sessions.public_uploads():
        raise LookupError(UPLOADS_OFF)
    if not cache.set(f"dataset:{sid}:{data.fingerprint}", data):
        raise LookupError(FULL)
    return dataset_summary(data, "upload")


def put_server_data(sid: str, data) -> dict:
    """Keep data read from the server's data folder in an owner's workspace. It spends from the
    server's one account for these points (`scope`), whichever owner's browser releases it."""
    if not sessions.is_owner():
        raise LookupError(OWNERS_ONLY)
    if not cache.set(f"serverdata:{sid}:{data.fingerprint}", data):
        raise LookupError(FULL)
    return dataset_summary(data, "server")


def scope(sid: str, fingerprint: str) -> str:
    """Whose budget a dataset spends: the server's (`accounts.SERVER`) for data an owner opened
    from the server's folder or uploaded, else this browser session's (samples, a visitor's
    uploads). Derived on the server from where the data is kept, never from anything the page
    sends."""
    return SERVER if cache.has(f"serverdata:{sid}:{fingerprint}") else sid


def spending(sid: str, fingerprint: str) -> tuple[str, str]:
    """(scope, account key) a spend on this dataset charges, checked in the request: the
    server's data is spent by owners only (LookupError otherwise)."""
    where = scope(sid, fingerprint)
    if where == SERVER and not sessions.is_owner():
        raise LookupError(OWNERS_ONLY)
    return where, account_key(points(sid, fingerprint))


def points(sid: str | None, fingerprint: str):
    """The data with this fingerprint, if it is a public sample or in this session's workspace
    (its own upload, or server data an owner opened)."""
    if fingerprint in _sample_by_fp:
        return _sample_by_fp[fingerprint]
    data = cache.get(f"dataset:{sid}:{fingerprint}") if sid else None
    if data is None and sid and sessions.is_owner():       # the server's data: for owners only
        data = cache.get(f"serverdata:{sid}:{fingerprint}")
    if data is None and len(_samples) < len(dp.SAMPLES) + len(REGION_SAMPLES):
        load_samples()                      # a process that has not made them all yet
        data = _sample_by_fp.get(fingerprint)
    if data is None:
        raise LookupError("this session's dataset is no longer on the server (it expired or the "
                          "server restarted); upload it again or pick a sample")
    return data


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
    return f"release:{sid}:" + hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def release(sid: str | None, key: str, create: bool = False):
    """The release for a key: from this session's cache, or built from the key's inputs.

    Building goes through the dataset's account: `create=True` (the Release action) charges a
    fresh draw, and is refused with BudgetError beyond the total. A fixed-seed demo is rebuilt
    identically whenever the cache dropped it, charged once for all rebuilds. Any other reader
    that misses a fresh release gets LookupError: an expired fresh release is never silently
    redrawn (a second draw for the same charge would let a viewer average the noise away).
    """
    ck = _release_entry(sid, key)
    rel = cache.get(ck)
    if rel is not None and not committed(sid, key):
        cache.delete(ck)                             # its builder died before charging it
        rel = None
    if rel is None:
        k = ReleaseKey.parse(key)
        fp = k.fingerprint
        if not create and (k.seed is None or not committed(sid, key)):
            raise LookupError("this release is no longer on the server; release again "
                              "(a new draw spends ε again)")    # only a charged demo is rebuilt
        spending(sid, fp) if create else points(sid, fp)   # a new spend: owners only on theirs
        if not cache.room_for(sid):
            raise LookupError(FULL)                  # refused before anything is charged
        rel = _build_or_settle(sid, key)
    return rel


def _build_or_settle(sid: str, key: str):
    """Build a release in the heavy pool. If the process building it died, settle what it left:
    a release stored and charged is the answer; otherwise nothing was charged (an uncharged
    release is dropped) and the build is tried once more in a new process."""
    for attempt in (1, 2):
        try:
            heavy_call(_build_release, sid, key)
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
    rel = cache.get(ck)
    if committed(sid, key):
        if rel is None:
            raise LookupError("this release was charged (see the budget ledger) but the server "
                              "could not keep it: it is full or its store failed")
        return rel
    if rel is not None:
        cache.delete(ck)
    return None


def unrecorded_release(sid: str, fingerprint: str, domain: dp.Domain, recorded) -> str | None:
    """The key of this session's newest charged release of this data on this domain when it is
    in the store but not among the `recorded` keys: its worker stopped between the charge (the
    commit) and the workspace's record of it, so the page would offer an older one as the last
    paid for. None when the newest such release is recorded, or none is kept."""
    charges = accounts.get(scope(sid, fingerprint), account_key(points(sid, fingerprint))).charges
    for ref in dict.fromkeys(c.ref for c in reversed(charges)):     # newest first, each once
        try:
            k = ReleaseKey.parse(ref)
            if k.fingerprint != fingerprint or k.box != domain:
                continue
        except (TypeError, ValueError, KeyError, IndexError):          # not a release key
            continue
        if ref in recorded:
            return None
        if cache.has(_release_entry(sid, ref)):                        # this session's, kept
            return ref
    return None


_committed_keys: set = set()      # release keys this process has seen committed (charges stay)


def committed(sid: str, key: str) -> bool:
    """True if the session's account for the key's data holds a charge naming this release
    (the charge is the commit point of a release; charges are never removed)."""
    if (sid, key) in _committed_keys:
        return True
    fp = key_fingerprint(key)
    if not any(c.ref == key for c in accounts.get(scope(sid, fp), account_key(points(sid, fp))).charges):
        return False
    if len(_committed_keys) > 100_000:
        _committed_keys.clear()
    _committed_keys.add((sid, key))
    return True


def heavy_call(fn, *args, idempotent: bool = False):
    """fn(*args) in the heavy pool of this request's role (`server.heavy`), in a process that has
    made the same built-in samples as this one (their fingerprints then name the same public data); an
    `idempotent` task (it charges nothing) is run again if its process died."""
    owner = sessions.is_owner()
    return heavy.run(_with_samples, sorted(_samples), owner, fn, *args, idempotent=idempotent,
                     lane=heavy.lane_of(owner))


def _with_samples(names: list, owner: bool, fn, *args):
    for name in names:
        sample(name)
    with sessions.acting(owner):         # the role of the request that asked
        return fn(*args)


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
    data = points(sid, k.fingerprint)
    entry, stored = _release_entry(sid, key), []

    def draw_and_keep(acc):
        rel = acc.release(k.mechanism, data, k.box, epsilon=k.epsilon, split=k.split,
                          params=k.params, seed=k.seed, ref=key, max_points_per_user=k.points_per_user)
        if not cache.set(entry, rel):
            raise Unavailable(NO_ROOM)       # accounts.update writes no charge then
        stored.append(True)
        return rel
    try:
        accounts.update(scope(sid, k.fingerprint), account_key(data), draw_and_keep)
    except Unavailable:
        if stored:
            try:
                cache.delete(entry)          # stored, but its charge could not be written
            except Unavailable:
                pass                         # discarded when read: no charge names it
        raise


def _build_stage(sid: str, key: str, stage: str):
    """Derive and store a release at another Euler stage (in a heavy-pool process, or inline);
    returns it only when the store refused it."""
    derived = release(sid, key).with_stage(stage)
    return None if cache.set(f"{_release_entry(sid, key)}:stage={stage}", derived) else derived


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
            derived = cache.get(entry)
            if derived is None:               # refused when the server is full: not kept, still shown
                derived = heavy_call(_build_stage, sid, key, stage, idempotent=True) or cache.get(entry)
    finally:
        with _derive_guard:
            lock, readers = _deriving[entry]
            if readers > 1:
                _deriving[entry] = (lock, readers - 1)
            else:
                del _deriving[entry]
    return derived


def account(sid: str, fingerprint: str) -> dp.Accountant:
    """A copy of the budget account a dataset of this session spends from (`scope`); the
    dataset is named by its fingerprint and must be a sample or in this session's workspace."""
    return accounts.get(scope(sid, fingerprint), account_key(points(sid, fingerprint)))


def charge(sid: str, fingerprint: str, change):
    """Change the account a dataset of this session spends from (`accounts.update`), in a
    request: refused for the server's data unless this browser is an owner."""
    return accounts.update(*spending(sid, fingerprint), change)


def check_live_room(sid: str):
    """Refuse (LookupError) a new live object when the store is full of other sessions' entries:
    nobody's session is pushed out by another's. A session's own oldest go first."""
    if not cache.room_for(sid):
        raise LookupError(FULL)


def put_live(sid: str, obj) -> str:
    """Keep a mutable, session-owned object (an interactive session) and return its token.

    Live objects are store entries of their session, so any worker process can continue them
    (see `live`). A session keeps at most LIVE_PER_SESSION; beyond that its own least recently
    used one is dropped, never another session's; a full store refuses (LookupError).
    """
    token = secrets.token_hex(16)
    cache.trim(sid, "live", LIVE_PER_SESSION - 1)
    if not cache.set(f"live:{sid}:{token}", obj):
        raise LookupError(FULL)
    return token


@contextmanager
def live(sid: str, token: str):
    """This session's live object, held under its lock across processes while the caller
    changes it, then written back to the store (even after an error: whatever it spent stays
    spent). LookupError if there is no such object for this session."""
    key = f"live:{sid}:{token}"
    with cache.lock(key):
        obj = cache.get(key)
        if obj is None:
            raise LookupError("the session expired on the server; start a new one")
        try:
            yield obj
        finally:
            if not cache.set(key, obj):          # never left behind in an older state
                cache.delete(key)
