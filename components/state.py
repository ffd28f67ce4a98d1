"""Server-side state per browser session, kept in flask-caching; the browser holds only keys.

Uploaded datasets are stored under their content fingerprint and each session records which
fingerprint it owns, so one session can never reach another's upload. Releases are cached by
(data, domain, mechanism, params, epsilon split, seed). A fresh release (OS entropy, the
default) has a random token in place of the seed and exists only as its one cached copy; a
fixed-seed demo release can be rebuilt identically if the cache drops it.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import uuid

from flask_caching import Cache
from flask_caching.backends.simplecache import SimpleCache

import dp
from dp.samples import REGION_SAMPLES

cache = Cache()
DEFAULT_SAMPLE = "city_200k"
TIMEOUT = 4 * 3600
_samples: dict = {}          # name -> (PointData, Domain); public, shared by every session
_sample_by_fp: dict = {}     # fingerprint -> PointData of a sample


class _Passthrough:
    """Serializer that keeps the object itself: no pickling of large arrays on every get."""

    def dumps(self, value):
        return value

    def loads(self, value):
        return value


class ObjectCache(SimpleCache):
    """flask-caching's in-memory SimpleCache holding references instead of pickles, so a 1e6-point
    upload is not copied per request and keeps its memoised histograms between releases.
    Cached objects are treated as read-only."""

    serializer = _Passthrough()


def init_cache(server, config: dict):
    cache.init_app(server, config={
        "CACHE_TYPE": config.get("cache_type", "components.state.ObjectCache"),
        "CACHE_DEFAULT_TIMEOUT": TIMEOUT,
        "CACHE_THRESHOLD": config.get("cache_threshold", 2000),
    })


def new_session_id() -> str:
    return uuid.uuid4().hex


def sample(name: str):
    """(data, domain) of a built-in point or region sample, generated once per process."""
    if name not in _samples:
        data, domain = dp.load_region_sample(name) if name in REGION_SAMPLES else dp.load_sample(name)
        _samples[name] = (data, domain)
        _sample_by_fp[data.fingerprint] = data
    return _samples[name]


def data_kind(data) -> str:
    """'points' or 'regions': which mechanisms apply to this dataset."""
    return getattr(data, "kind", "points")


def dataset_summary(data, origin: str) -> dict:
    """What the browser may hold about the data: name, size, the loader's report; no points."""
    r = data.report
    return {"fingerprint": data.fingerprint, "name": data.name, "n": data.n, "origin": origin,
            "kind": data_kind(data),
            "summary": r.summary(), "dropped": r.dropped}


def use_sample(sid: str, name: str) -> dict:
    data, _ = sample(name)
    info = dataset_summary(data, f"sample:{name}")
    cache.set(f"session:{sid}:dataset", info)
    return info


def put_upload(sid: str, data) -> dict:
    cache.set(f"points:{data.fingerprint}", data)
    info = dataset_summary(data, "upload")
    cache.set(f"session:{sid}:dataset", info)
    return info


def points(sid: str | None, fingerprint: str):
    """The PointData with this fingerprint, if it is a sample or this session's own upload."""
    if fingerprint in _sample_by_fp:
        return _sample_by_fp[fingerprint]
    own = cache.get(f"session:{sid}:dataset") if sid else None
    if own and own["fingerprint"] == fingerprint:
        data = cache.get(f"points:{fingerprint}")
        if data is not None:
            return data
    raise LookupError("this session's dataset is no longer on the server (it expired or the "
                      "server restarted); upload it again or pick a sample")


def release_key(fingerprint, domain: dp.Domain, mechanism, params, split, epsilon, seed) -> str:
    """Cache key of a release. seed None means fresh OS entropy: the key then carries a random
    token instead (never shown), so each fresh release is a new draw that cannot be rebuilt."""
    tag = seed if seed is not None else "fresh:" + secrets.token_hex(16)
    return json.dumps([fingerprint, domain.to_dict(), mechanism, params, list(split), epsilon, tag],
                      sort_keys=True, default=str)


def key_fingerprint(key: str) -> str:
    """Fingerprint of the dataset a release key was made from."""
    return json.loads(key)[0]


def key_domain(key: str) -> dp.Domain:
    """The public domain a release key was made with."""
    return dp.Domain.from_dict(json.loads(key)[1])


def release(sid: str | None, key: str, create: bool = False):
    """The release for a key: from the cache, or built from the key's inputs.

    A fixed-seed demo is rebuilt identically whenever the cache dropped it. A fresh release
    (a "fresh:" token instead of a seed) is built only by the Release action (`create=True`,
    which also charges it); any other reader that misses it gets LookupError, so an expired
    fresh release is never silently redrawn (a second draw for the same charge would let a
    viewer average the noise away).
    """
    ck = "release:" + hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    rel = cache.get(ck)
    if rel is None:
        fp, dom, mech, params, split, eps, tag = json.loads(key)
        fresh = isinstance(tag, str)
        if fresh and not create:
            raise LookupError("this release is no longer on the server; release again "
                              "(a new draw spends ε again)")
        rel = dp.release(mech, points(sid, fp), dp.Domain.from_dict(dom), epsilon=eps,
                         split=split, params=params, seed=None if fresh else tag)
        cache.set(ck, rel)
    return rel
