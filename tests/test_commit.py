"""A release and its charge commit together (`server.releases`): the release is stored first,
then the charge and its release record in one transaction; a store or accounts that fail leave
neither, a stored release without both is never served, and a damaged account is refused, never
reset.

In one process, with the store's and the accounts' writes made to fail as a full disk or a
read-only folder would (tests/test_faults.py does the same to the running multi-worker server).
"""
from __future__ import annotations

import errno

import pytest

import dp
from helpers import account_bodies, new_sid, set_account_body
from server import releases, services, state
from server.faults import Unavailable

TILES = "http://127.0.0.1:9/{z}/{x}/{y}.png"


@pytest.fixture
def app_on(tmp_path):
    from app import create_app
    create_app({"tiles_url": TILES, "accounts_dir": str(tmp_path / "accounts"),
                "store_dir": str(tmp_path / "store")})
    return tmp_path


def fresh_key(sid: str, seed=None) -> tuple[dict, str]:
    info = state.use_sample(sid, "small_city_5k")
    domain = state.sample("small_city_5k")[1]
    return info, releases.release_key(info["fingerprint"], domain, "ug", {}, [0.05, 0.95], 0.5, seed)


def failing(exc: OSError):
    def fail(*args, **kwargs):
        raise exc
    return fail


def test_a_full_disk_at_the_release_write_charges_nothing_and_leaves_no_file(app_on, monkeypatch):
    sid = new_sid()
    info, key = fresh_key(sid)
    monkeypatch.setattr(services.current().store, "_write", failing(OSError(errno.ENOSPC, "No space left")))
    with pytest.raises(Unavailable, match="store is full .*nothing was charged"):
        releases.release(sid, key, create=True)
    assert state.account(sid, info["fingerprint"]).charges == []
    monkeypatch.undo()
    assert releases.release(sid, key, create=True) is not None          # space is back
    assert len(state.account(sid, info["fingerprint"]).charges) == 1


def test_accounts_that_cannot_be_written_keep_no_charge_and_no_release(app_on, monkeypatch):
    sid = new_sid()
    info, key = fresh_key(sid)
    monkeypatch.setattr(services.current().accounts, "_write", failing(Unavailable("accounts read-only")))
    with pytest.raises(Unavailable):
        releases.release(sid, key, create=True)
    monkeypatch.undo()
    assert state.account(sid, info["fingerprint"]).charges == []
    assert not services.current().store.has(releases._release_entry(sid, key))       # removed with its charge


def test_a_stored_release_that_no_charge_names_is_never_served(app_on):
    """As left by a builder killed between the store's write and the account's."""
    sid = new_sid()
    info, key = fresh_key(sid)
    data, domain = state.sample("small_city_5k")
    uncharged = dp.release("ug", data, domain, epsilon=0.5)
    assert services.current().store.set(releases._release_entry(sid, key), uncharged)
    with pytest.raises(LookupError, match="no longer on the server"):
        releases.release(sid, key)
    assert not services.current().store.has(releases._release_entry(sid, key))
    _, seeded = fresh_key(sid, seed=7)                # a demo's key: a read never builds (or charges) it
    assert services.current().store.set(releases._release_entry(sid, seeded), uncharged)
    with pytest.raises(LookupError, match="no longer on the server"):
        releases.release(sid, seeded)
    assert not services.current().store.has(releases._release_entry(sid, seeded))
    assert state.account(sid, info["fingerprint"]).charges == []
    rebuilt = releases.release(sid, seeded, create=True)            # Release: built and charged
    same = dp.release("ug", data, domain, epsilon=0.5, split=[0.05, 0.95], seed=7)
    whole = dp.Rect(domain.west, domain.south, domain.east, domain.north)
    assert rebuilt.answer(whole) == same.answer(whole)
    services.current().store.delete(releases._release_entry(sid, seeded))          # dropped: a read rebuilds it, free
    assert releases.release(sid, seeded).answer(whole) == same.answer(whole)
    assert [c.ref for c in state.account(sid, info["fingerprint"]).charges] == [seeded]


def test_a_damaged_account_is_refused_and_never_reset(app_on):
    sid = new_sid()
    info, key = fresh_key(sid)
    releases.release(sid, key, create=True)
    (name, good), = account_bodies(app_on / "accounts").items()
    damaged = good[:20]
    set_account_body(app_on / "accounts", name, damaged)
    with pytest.raises(Unavailable, match="damaged.*not reset"):
        state.account(sid, info["fingerprint"])
    _, other = fresh_key(sid)
    with pytest.raises(Unavailable, match="damaged"):
        releases.release(sid, other, create=True)
    assert account_bodies(app_on / "accounts")[name] == damaged


def test_half_written_files_of_a_killed_writer_are_removed(tmp_path):
    import os
    import time

    from server.file_store import STALE_TEMPORARY, FileStore
    cache = FileStore(tmp_path, 2**24, 2**20)
    assert cache.set("release:someone:k", {"a": 1})
    folder = next((tmp_path / "data").iterdir())
    old, new = folder / "a.__wz_cache", folder / "b.__wz_cache"
    old.write_bytes(b"half")
    new.write_bytes(b"being written")
    long_ago = time.time() - STALE_TEMPORARY - 1
    os.utime(old, (long_ago, long_ago))
    cache._purge_expired()                          # runs when the store needs room
    assert not old.exists() and new.exists()
    cache.remove_temporaries()                      # a server's start: nothing is being written
    assert not new.exists() and cache.get("release:someone:k") == {"a": 1}


def test_a_release_record_put_in_by_hand_serves_no_uncharged_release(app_on):
    """The commit point is a record and the charge it names, in the signed account: a record
    inserted by someone with the database's password, beside a release its killed builder
    stored without charging, serves nothing (the stored copy is dropped)."""
    import sqlalchemy as sa

    from server import database
    sid = new_sid()
    info, key = fresh_key(sid)
    entry = f"release:{sid}:{database.release_entry(key)}"
    assert services.current().store.set(entry, dp.release("ug", *state.sample("small_city_5k"), epsilon=0.5))
    accounts = services.current().accounts
    with accounts.engine.begin() as conn:
        conn.execute(sa.insert(database.releases).values(
            account=accounts._name(sid, state.account_key(state.points(sid, info["fingerprint"]))),
            entry=database.release_entry(key), session=sid, ref=key, epsilon=0.5, written=0.0))
    with pytest.raises(LookupError, match="no longer on the server"):
        releases.release(sid, key)
    assert services.current().store.get(entry) is None and state.account(sid, info["fingerprint"]).charges == []
