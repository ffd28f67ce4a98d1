"""Server-side state per browser session, kept on the server; the browser holds only keys.

Each browser has a session id (`server.sessions`: a hash of its signed cookie); the server keys
everything by it: uploaded datasets, releases, evaluations, interactive sessions and budget accounts.
A lookup names its session in the key itself, so another browser's entries are never read,
never hit and take no part in any timing (a forged key only ever reaches the forger's own
entries). Built-in samples are public and shared.

Everything lives in a store all worker processes share (`server.store`: a folder or Redis,
bounded in bytes, a quota per session), opened with the budget accounts by `server.services`.
This module keeps the samples and the datasets; `server.releases` keeps the releases and
commits each with its charge, `server.live` the interactive sessions.
"""
from __future__ import annotations

import copyreg
import pickle

import dp
from dp.samples import REGION_SAMPLES

from . import heavy, services, sessions
from .accounts import SERVER

DEFAULT_SAMPLE = "city_200k"
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
    if not services.current().store.set(f"dataset:{sid}:{data.fingerprint}", data):
        raise LookupError(FULL)
    return dataset_summary(data, "upload")


def put_server_data(sid: str, data) -> dict:
    """Keep data read from the server's data folder in an owner's workspace. It spends from the
    server's one account for these points (`scope`), whichever owner's browser releases it."""
    if not sessions.is_owner():
        raise LookupError(OWNERS_ONLY)
    if not services.current().store.set(f"serverdata:{sid}:{data.fingerprint}", data):
        raise LookupError(FULL)
    return dataset_summary(data, "server")


def scope(sid: str, fingerprint: str) -> str:
    """Whose budget a dataset spends: the server's (`accounts.SERVER`) for data an owner opened
    from the server's folder or uploaded, else this browser session's (samples, a visitor's
    uploads). Derived on the server from where the data is kept, never from anything the page
    sends."""
    return SERVER if services.current().store.has(f"serverdata:{sid}:{fingerprint}") else sid


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
    data = services.current().store.get(f"dataset:{sid}:{fingerprint}") if sid else None
    if data is None and sid and sessions.is_owner():       # the server's data: for owners only
        data = services.current().store.get(f"serverdata:{sid}:{fingerprint}")
    if data is None and len(_samples) < len(dp.SAMPLES) + len(REGION_SAMPLES):
        load_samples()                      # a process that has not made them all yet
        data = _sample_by_fp.get(fingerprint)
    if data is None:
        raise LookupError("this session's dataset is no longer on the server (it expired or the "
                          "server restarted); upload it again or pick a sample")
    return data


def heavy_call(fn, *args, idempotent: bool = False):
    """fn(*args) in the heavy pool of this request's role (`server.heavy`), in a process that has
    made the same built-in samples as this one (their fingerprints then name the same public data); an
    `idempotent` task (it charges nothing) is run again if its process died."""
    owner = sessions.is_owner()
    return services.current().heavy.run(_with_samples, sorted(_samples), owner, fn, *args,
                                        idempotent=idempotent, lane=heavy.lane_of(owner))


def _with_samples(names: list, owner: bool, fn, *args):
    for name in names:
        sample(name)
    with sessions.acting(owner):         # the role of the request that asked
        return fn(*args)


def account(sid: str, fingerprint: str) -> dp.Accountant:
    """A copy of the budget account a dataset of this session spends from (`scope`); the
    dataset is named by its fingerprint and must be a sample or in this session's workspace."""
    return services.current().accounts.get(scope(sid, fingerprint), account_key(points(sid, fingerprint)))


def charge(sid: str, fingerprint: str, change):
    """Change the account a dataset of this session spends from (`AccountStore.update`), in a
    request: refused for the server's data unless this browser is an owner."""
    return services.current().accounts.update(*spending(sid, fingerprint), change)
