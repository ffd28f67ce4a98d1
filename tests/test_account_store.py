"""Budget accounts in the server's database (SQLite and PostgreSQL alike): signed with the
server's key, versioned, bounded in number, shared by processes and hosts, and brought over from
0.10's account files once."""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
import time
import types

import pytest
import sqlalchemy as sa

import dp

from server import accounts, database
from server.account_import import IMPORTED, RECORD_TAMPERED
from server.accounts import (CHANGED, DAMAGED, DELETED, FULL_ACCOUNTS, IDLE_SECONDS, ROLLED_BACK,
                             SERVER, TAMPERED, UNCHARGED, AccountStore, _canonical)
from server.faults import Unavailable
from server.store import RESERVED

KEY = b"the server's key"


def sid(i: int) -> str:
    return f"{i:032x}"


def charge(eps: float = 1.0):
    return lambda acc: acc.charge("release", epsilon=eps)


@pytest.fixture(params=["sqlite", "postgresql"])
def make(request, tmp_path):
    """AccountStore(**kw) on one database of each engine, fresh for every test: SQLite in the
    accounts folder, or a new PostgreSQL database (the folder then keeps only the key's file)."""
    url = request.getfixturevalue("postgres").database() if request.param == "postgresql" else None

    def store(**kw):
        kw.setdefault("key", KEY)
        return AccountStore(tmp_path, url=url, **kw)
    store.engine = request.param
    return store


def rows(store) -> dict:
    """name -> the account row, as stored."""
    with store.engine.connect() as conn:
        return {r.name: r for r in conn.execute(sa.select(database.accounts))}


def put(store, name, **values):
    """Change an account's row by hand (as someone with the database's password could)."""
    with store.engine.begin() as conn:
        conn.execute(database.accounts.update().where(database.accounts.c.name == name).values(**values))


def age(store, name, seconds: float = IDLE_SECONDS + 60):
    put(store, name, written=time.time() - seconds)


def refused(store, scope, fingerprint="fp", message=TAMPERED):
    """The account is refused with `message` when read and when charged."""
    with pytest.raises(Unavailable) as read:
        store.get(scope, fingerprint)
    assert str(read.value) == message
    with pytest.raises(Unavailable) as charged:
        store.update(scope, fingerprint, charge(0.5))
    assert str(charged.value) == message
    return True


def test_a_datasets_fingerprint_is_the_one_earlier_versions_keyed_its_account_by():
    """Budget accounts are keyed by the data's fingerprint: a new way of computing it that gave
    other bits would open a fresh budget for data already spent on after an upgrade. The values
    are those of 0.17.0 (the hash's blocks, -0.0, user ids)."""
    import numpy as np
    x = np.linspace(-1, 1, 150_001)
    y = np.cos(7 * x)
    x[:10] = -0.0
    assert dp.PointData(x, y).coordinates_fingerprint == "785a7e8b79d05efb05292c08"
    assert dp.PointData(x, y, user=(np.arange(x.size) % 97).astype(str)).fingerprint == "fe82792daf556cd22bdd7d71"


def test_a_charge_survives_a_restart_with_the_same_key(make):
    make().update(sid(1), "fp", charge(2.5))
    again = make()                                       # a restarted server
    assert again.get(sid(1), "fp").spent == pytest.approx(2.5)
    again.update(sid(1), "fp", charge(1.0))
    assert make().get(sid(1), "fp").spent == pytest.approx(3.5)
    (row,) = rows(again).values()
    assert row.version == 2 and len(json.loads(row.body)["charges"]) == 2


def test_an_account_put_back_from_an_older_copy_is_refused_in_words(make):
    """Issue 41, item 11: an account restored from an earlier copy (its own valid signature)
    would hand out spent budget again; the record of versions refuses it and charges nothing,
    and the latest one put back is accepted again."""
    store = make()
    store.update(sid(1), "fp", charge(1.0))
    (name, older), = rows(store).items()
    store.update(sid(1), "fp", charge(3.0))
    latest = rows(store)[name]
    put(store, name, body=older.body, version=older.version, mac=older.mac)    # rolled back by hand
    assert refused(store, sid(1), "fp", ROLLED_BACK)
    assert rows(store)[name].version == older.version                          # left as it was
    put(store, name, body=latest.body, version=latest.version, mac=latest.mac)
    assert store.get(sid(1), "fp").spent == pytest.approx(4.0)


def test_a_deleted_account_is_refused_not_read_as_a_fresh_budget(make):
    store = make()
    store.update(SERVER, "fp", charge(9.0))
    (name, kept), = rows(store).items()
    with store.engine.begin() as conn:
        conn.execute(database.accounts.delete())
    assert refused(store, SERVER, "fp", DELETED)
    assert rows(store) == {}
    with store.engine.begin() as conn:
        conn.execute(database.accounts.insert().values(**kept._asdict()))
    assert store.get(SERVER, "fp").spent == pytest.approx(9.0)


@pytest.mark.parametrize("edit", ["spent lowered", "charges removed", "unsigned", "copied"])
def test_an_account_changed_by_hand_is_refused_and_left_as_it_was(make, edit):
    store = make()
    store.update(sid(1), "fp", charge(3.0))
    store.update(sid(2), "fp", lambda acc: None)          # an account with nothing spent
    name, fresh = store._name(sid(1), "fp"), rows(store)[store._name(sid(2), "fp")]
    body = json.loads(rows(store)[name].body)
    if edit == "spent lowered":
        body["charges"][0]["epsilon"] = 0.1
        put(store, name, body=json.dumps(body))           # valid JSON, carrying the old signature
    elif edit == "charges removed":
        put(store, name, body=json.dumps({**body, "charges": []}))
    elif edit == "unsigned":
        put(store, name, mac="")
    else:                                                  # the fresh budget copied over the spent one
        put(store, name, body=fresh.body, mac=fresh.mac)
    planted = rows(store)[name]
    assert refused(store, sid(1))
    assert "not reset" in TAMPERED and "nothing was charged" in TAMPERED
    assert rows(store)[name] == planted                   # never replaced by a fresh budget
    assert store.get(sid(2), "fp").spent == 0


def test_an_unparseable_account_is_damaged(make):
    store = make()
    store.update(sid(1), "fp", charge(3.0))
    put(store, store._name(sid(1), "fp"), body='{"total": 10, "char')
    assert refused(store, sid(1), message=DAMAGED)


def test_a_store_with_another_key_refuses_existing_accounts(make):
    make().update(sid(1), "fp", charge(3.0))
    before = rows(make())
    assert refused(make(key=b"another key"), sid(1))
    assert rows(make()) == before
    assert make().get(sid(1), "fp").spent == pytest.approx(3.0)


def test_a_row_written_by_another_process_outside_the_lock_is_not_overwritten(make, monkeypatch):
    """The write is conditional on the version read: a change made meanwhile (which the lock
    rules out) is refused in words, never lost."""
    store = make()
    store.update(sid(1), "fp", charge(1.0))
    real = store._read

    def read_then_lose_the_race(name, conn=None):
        got = real(name, conn)
        make().update(sid(1), "fp", charge(2.0))           # another writer, without the lock
        return got
    monkeypatch.setattr(store.locks, "held", lambda name: contextlib.nullcontext())
    monkeypatch.setattr(store, "_read", read_then_lose_the_race)
    with pytest.raises(Unavailable) as lost:
        store.update(sid(1), "fp", charge(4.0))
    assert str(lost.value) == CHANGED
    assert make().get(sid(1), "fp").spent == pytest.approx(3.0)


def test_server_scope_accounts_are_named_apart_and_shared_by_every_browser(make):
    store = make()
    store.update(SERVER, "fp", charge(2.0))
    store.update(sid(1), "fp", charge(1.0))
    names = sorted(rows(store))
    assert len(names) == 2 and sum(n.startswith("server-") for n in names) == 1
    assert store.get(SERVER, "fp").spent == pytest.approx(2.0)
    assert store.get(sid(1), "fp").spent == pytest.approx(1.0)


def test_a_new_account_at_the_bound_removes_the_oldest_idle_session_account(make, tmp_path):
    store = make(max_accounts=2)                         # browsers' accounts; the server's apart
    store.update(SERVER, "oldest", charge())
    store.update(sid(1), "fp", charge())
    store.update(sid(2), "fp", charge())
    first = store._name(sid(1), "fp")
    for name in rows(store):                             # all idle, the server's the oldest
        age(store, name, IDLE_SECONDS + (500 if name.startswith("server-") else 200 if name == first else 100))
    store.update(sid(3), "fp", charge())
    left = set(rows(store))
    assert len(left) == 3 and first not in left and any(n.startswith("server-") for n in left)
    if make.engine == "sqlite":                          # its lock file went with it
        assert not (tmp_path / accounts.LOCKS / f"{first}.lock").exists()
    assert store.get(SERVER, "oldest").spent == 1.0 and store.get(sid(2), "fp").spent == 1.0
    assert store.get(sid(1), "fp").spent == 0           # removed, with its record: a fresh budget
    store.update(sid(3), "fp", charge())                # an existing account needs no room
    assert len(rows(store)) == 3


def test_server_scope_accounts_are_never_removed_and_never_refused(make):
    store = make(max_accounts=2)
    store.update(SERVER, "a", charge())
    store.update(SERVER, "b", charge())
    store.update(sid(1), "fp", charge())
    store.update(sid(2), "fp", charge())                # the bound: two browsers' accounts
    servers = {n: r for n, r in rows(store).items() if n.startswith("server-")}
    for name in rows(store):
        age(store, name, 10 * IDLE_SECONDS)
    servers = {n: r for n, r in rows(store).items() if n.startswith("server-")}
    store.update(sid(3), "fp", charge())                # room made from a browser's, not the server's
    assert {n: r for n, r in rows(store).items() if n.startswith("server-")} == servers
    assert len(rows(store)) == 4
    store.update(sid(4), "fp", charge())                # browsers filling the bound, recently:
    with pytest.raises(Unavailable) as full:
        store.update(sid(5), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS
    store.update(SERVER, "c", charge())                 # an owner's new data is never refused
    assert store.get(SERVER, "c").spent == 1.0


def test_an_account_in_use_is_not_removed_to_make_room(make):
    """An idle account whose lock is held (a release being charged to it right now) stays."""
    store = make(max_accounts=1)
    store.update(sid(1), "fp", charge())
    age(store, store._name(sid(1), "fp"))
    inside, done = threading.Event(), threading.Event()

    def slow(acc):
        inside.set()
        done.wait(30)
        acc.charge("release", epsilon=1.0)
    t = threading.Thread(target=store.update, args=(sid(1), "fp", slow))
    t.start()
    assert inside.wait(30)
    try:
        with pytest.raises(Unavailable) as full:
            make(max_accounts=1).update(sid(2), "fp", charge())   # another process, same database
        assert str(full.value) == FULL_ACCOUNTS
    finally:
        done.set()
        t.join(30)
    assert store.get(sid(1), "fp").spent == 2.0


@pytest.mark.parametrize("kind", ["database", "memory"])
def test_an_idle_account_sharing_the_new_ones_lock_stripe_is_still_removed(make, kind):
    """Accounts share 64 thread-lock stripes by their name's hash, which Python salts per
    process: a new account whose stripe an idle one shared (1 in 64) was refused as if the
    store were full, a flaky test. Here every name shares one stripe."""
    store = make(max_accounts=1) if kind == "database" else AccountStore(key=KEY, max_accounts=1)
    store.locks.stripes = store.locks.stripes[:1]
    store.update(sid(1), "fp", charge())
    if kind == "database":
        age(store, store._name(sid(1), "fp"))
    else:
        with store._tx() as conn:
            conn.execute(database.accounts.update().values(written=time.time() - IDLE_SECONDS - 60))
    store.update(sid(2), "fp", charge())
    assert list(rows(store)) == [store._name(sid(2), "fp")]


@pytest.mark.parametrize("kind", ["database", "memory"])
def test_visitors_filling_the_bound_never_refuse_an_owners_session(make, kind):
    """Issue 41, item 6: visitors' accounts filling the bound refused the owner too; an owner's
    session (its id marked `store.RESERVED`) releasing a sample now gets its account, and its
    accounts do not count towards the visitors' bound."""
    store = make(max_accounts=3) if kind == "database" else AccountStore(key=KEY, max_accounts=3)
    for i in range(3):
        store.update(sid(i), "fp", charge())
    with pytest.raises(Unavailable) as full:
        store.update(sid(9), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS
    for i in range(5):                                   # owner links' sessions, each a sample
        store.update(f"{RESERVED}{sid(i)}", "sample", charge())
        assert store.get(f"{RESERVED}{sid(i)}", "sample").spent == 1.0
    with pytest.raises(Unavailable):                    # and they left the visitors' bound as it was
        store.update(sid(9), "fp", charge())
    assert sum(n.startswith(RESERVED) for n in rows(store)) == 5


@pytest.mark.parametrize("kind", ["database", "memory"])
def test_accounts_holding_no_charge_make_room_for_a_new_visitor(make, kind):
    """Issue 41, item 6 with cookies: a script that loads the page (a signed cookie) and raises
    its total, 10,000 times, filled the bound for 4 hours. An account holding no charge
    forgets nothing spent when it goes, so it makes room at once; charged ones still wait."""
    store = make(max_accounts=3) if kind == "database" else AccountStore(key=KEY, max_accounts=3)
    assert _canonical(dp.Accountant(2.0).to_dict()).decode().startswith(UNCHARGED)
    store.update(sid(0), "fp", charge())
    for i in (1, 2):                                     # raised totals, nothing spent
        store.update(sid(i), "fp", lambda acc: acc.raise_total(50.0, confirm=True))
    store.update(sid(9), "fp", charge())                 # admitted: one raised-only account went
    assert store.get(sid(9), "fp").spent == 1.0 and store.get(sid(0), "fp").spent == 1.0
    assert len(rows(store)) == 3
    store.update(sid(8), "fp", charge())                 # the other one goes too
    with pytest.raises(Unavailable) as full:             # now every account holds a charge
        store.update(sid(7), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS


def test_at_the_bound_with_recent_accounts_a_new_one_is_refused_and_nothing_written(make):
    store = make(max_accounts=3)
    for i in range(3):
        store.update(sid(i), "fp", charge())
    before = rows(store)
    with pytest.raises(Unavailable) as full:
        store.update(sid(9), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS
    assert rows(store) == before
    assert store.get(sid(9), "fp").spent == 0
    store.update(sid(0), "fp", charge())                # existing accounts are still charged
    assert store.get(sid(0), "fp").spent == 2.0


def test_reading_unknown_accounts_creates_nothing_and_a_refused_new_one_leaves_no_lock(make, tmp_path):
    store = make(max_accounts=1, default_total=1.0)
    for i in range(5):
        assert store.get(sid(i), "fp").spent == 0
        assert store.get(SERVER, f"fp{i}").spent == 0
    with pytest.raises(Exception, match="budget|exceed|remaining"):
        store.update(sid(7), "fp", charge(5.0))
    assert rows(store) == {}
    assert not list((tmp_path / accounts.LOCKS).glob("*")) if make.engine == "sqlite" else True
    store.update(sid(1), "fp", charge())                # reading did not count towards the bound
    assert list(rows(store)) == [store._name(sid(1), "fp")]


def test_concurrent_charges_from_two_servers_on_one_database_cannot_overspend(make):
    """Two stores on one database (two hosts on PostgreSQL, two workers on SQLite), eight
    threads each, each charge 0.6 of a total of 3: exactly five go through."""
    stores = [make(default_total=3.0), make(default_total=3.0)]
    results = []

    def spend(store):
        try:
            store.update(SERVER, "f", charge(0.6))
            results.append("ok")
        except Exception as e:                          # noqa: BLE001 (a BudgetError expected)
            results.append(type(e).__name__)
    threads = [threading.Thread(target=spend, args=(stores[i % 2],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == ["BudgetError"] * 11 + ["ok"] * 5
    assert stores[0].get(SERVER, "f").spent == pytest.approx(3.0)


def test_a_store_failing_on_a_redis_lock_keeps_no_charge(make):
    """A Redis lock not had in time while keeping the release is the store failing, like
    `Unavailable`: the release is not kept, so its charge is not either."""
    from redis.exceptions import LockError
    store = make()

    def draw_and_keep(acc):
        acc.charge("release", epsilon=1.0)
        raise LockError("Unable to acquire lock within the time specified")
    with pytest.raises(LockError):
        store.update(sid(1), "fp", draw_and_keep)
    assert store.get(sid(1), "fp").spent == 0 and rows(store) == {}


def test_on_postgresql_an_update_holds_one_connection(postgres):
    """The connection holding an account's advisory lock is the one it is read and written on:
    two per update ran the pool dry under many threads (a wait, then an error not in words)."""
    store = AccountStore(key=KEY, url=postgres.database())
    most = []
    sa.event.listen(store.engine.pool, "checkout",
                    lambda *a: most.append(store.engine.pool.checkedout()))
    store.update(SERVER, "fp", charge())                # a new account: read, room, write
    store.update(SERVER, "fp", charge())
    assert most and max(most) == 1 and store.engine.pool.checkedout() == 0


@pytest.mark.slow          # threads charging and reading on a PostgreSQL server: 9 s
def test_on_postgresql_reads_beside_charges_never_look_rolled_back(postgres):
    """An account and its version record are read in one statement: read in two, a charge
    committed between them made a healthy account look rolled back (or deleted) about once in
    a hundred reads."""
    url = postgres.database()
    writer, reader = AccountStore(key=KEY, url=url), AccountStore(key=KEY, url=url)
    writer.update(SERVER, "fp", charge(0.001))
    stop, errors = threading.Event(), []

    def keep_charging():
        while not stop.is_set():
            writer.update(SERVER, "fp", charge(0.001))
    t = threading.Thread(target=keep_charging)
    t.start()
    try:
        for _ in range(1500):
            try:
                reader.get(SERVER, "fp")
            except Unavailable as e:
                errors.append(str(e))
    finally:
        stop.set()
        t.join(30)
    assert errors == []


def test_on_postgresql_an_account_charged_while_room_is_made_is_not_removed(postgres, monkeypatch):
    """Another host charges an idle account between the listing of idle accounts and its
    removal: the removal checks again, so the charge stays and the new account is refused."""
    url = postgres.database()
    here, there = AccountStore(key=KEY, url=url, max_accounts=1), AccountStore(key=KEY, url=url)
    here.update(sid(1), "fp", charge(1.0))
    age(here, here._name(sid(1), "fp"))
    try_lock = here.locks.try_hold

    def charged_meanwhile(name, conn, held):
        there.update(sid(1), "fp", charge(5.0))          # committed before the lock is tried
        return try_lock(name, conn, held)
    monkeypatch.setattr(here.locks, "try_hold", charged_meanwhile)
    with pytest.raises(Unavailable) as full:
        here.update(sid(2), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS
    assert there.get(sid(1), "fp").spent == pytest.approx(6.0)


def test_a_database_of_a_newer_schema_is_refused_in_words(make):
    store = make()
    with store.engine.begin() as conn:
        conn.execute(database.schema_version.update().values(version=len(database.MIGRATIONS) + 1))
    with pytest.raises(Unavailable, match="newer version of this app"):
        make()


def released(ref: str, eps: float = 1.0, session: str = "s1", fail: Exception | None = None):
    """A change charging a release named `ref` and recording it, as `server.releases` does;
    `fail` raised after the record is appended (a store that could not keep it)."""
    def change(acc, records):
        acc.charge("release", epsilon=eps, ref=ref)
        records.append((session, ref, eps))
        if fail:
            raise fail
    return change


def update_recording(store, scope, change):
    records = []
    return store.update(scope, "fp", lambda acc: change(acc, records), records)


def test_a_release_record_is_written_with_its_charge_and_never_without_it(make):
    store = make()
    update_recording(store, sid(1), released("key-a"))
    with pytest.raises(Unavailable):
        update_recording(store, sid(1), released("key-b", fail=Unavailable("the store is full")))
    with pytest.raises(ValueError):                      # a failure that may depend on the data:
        update_recording(store, sid(1), released("key-c", fail=ValueError("mechanism failed")))
    assert [c.ref for c in store.get(sid(1), "fp").charges] == ["key-a", "key-c"]
    assert store.recorded(sid(1), "fp", "key-a") and store.recorded(sid(1), "fp", "key-c")
    assert not store.recorded(sid(1), "fp", "key-b")     # refused: neither charge nor record
    assert not store.recorded(sid(2), "fp", "key-a")     # another account's release
    update_recording(store, sid(1), released("key-d", session="s2"))
    assert store.records(sid(1), "fp", "s1") == ["key-c", "key-a"]       # newest first
    assert store.records(sid(1), "fp", "s2") == ["key-d"]


def test_an_account_removed_to_make_room_takes_its_release_records(make):
    store = make(max_accounts=1)
    update_recording(store, sid(1), released("key-a"))
    age(store, store._name(sid(1), "fp"))
    store.update(sid(2), "fp", charge())                 # removes sid(1)'s idle account
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(database.releases)).scalar() == 0


def test_a_database_of_schema_2_gets_a_record_for_each_charge_naming_a_release(make):
    """Migration 3 (release records) on a database whose charges were the records until then:
    every charge with a ref gets its record, so releases made before the upgrade stay readable."""
    store = make()
    store.update(sid(1), "fp", lambda acc: acc.charge("release", epsilon=0.5, ref="key-a"))
    store.update(sid(1), "fp", charge(0.25))             # no release named: no record
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE releases")
        conn.exec_driver_sql("DROP TABLE published")          # a database of schema 2 had none
        conn.exec_driver_sql("DROP TABLE unpublished")        # of these three
        conn.execute(database.schema_version.update().values(version=2))
    again = make()
    assert again.recorded(sid(1), "fp", "key-a") and again.records(sid(1), "fp", "") == ["key-a"]
    with again.engine.connect() as conn:
        assert conn.execute(sa.select(database.releases.c.epsilon)).scalars().all() == [0.5]


def test_the_in_memory_store_obeys_the_bound(monkeypatch):
    store = AccountStore(max_accounts=2)                # browsers' accounts; the server's apart
    earlier = time.time() - IDLE_SECONDS - 60
    monkeypatch.setattr(accounts, "time", types.SimpleNamespace(time=lambda: earlier))
    store.update(SERVER, "fp", charge())
    store.update(sid(1), "fp", charge())
    monkeypatch.setattr(accounts, "time", types.SimpleNamespace(time=lambda: earlier + 10))
    store.update(sid(2), "fp", charge())
    monkeypatch.undo()
    store.update(sid(3), "fp", charge())                # removes sid(1), the oldest session one
    assert [store.get(s, "fp").spent for s in (SERVER, sid(1), sid(2), sid(3))] == [1, 0, 1, 1]
    store.update(sid(4), "fp", charge())                # removes sid(2); the server's stays
    with pytest.raises(Unavailable) as full:            # only recent and server accounts left
        store.update(sid(5), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS
    assert [store.get(s, "fp").spent for s in (SERVER, sid(2), sid(3), sid(4), sid(5))] == [1, 0, 1, 1, 0]
    store.update(sid(3), "fp", charge())
    assert store.get(sid(3), "fp").spent == 2


# 0.10 kept one signed JSON file per account and a signed record of versions; the first start
# of this version moves them into the database as they were.

def old_mac(name: str, account: dict, version: int | None) -> str:
    """0.10's signature of an account file (its name with .json, its version, the account)."""
    head = f"{name}.json\n" if version is None else f"{name}.json\n{version}\n"
    body = json.dumps(account, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(KEY, head.encode() + body, hashlib.sha256).hexdigest()


def old_file(folder, name, spent: float, version: int | None, key_ok: bool = True, ref=None):
    acc = dp.Accountant(10.0)
    if spent:
        acc.charge("release", epsilon=spent, ref=ref)
    account = acc.to_dict()
    stored = {"account": account, "mac": old_mac(name, account, version) if key_ok else "0" * 64}
    if version is not None:
        stored["version"] = version
    (folder / f"{name}.json").write_text(json.dumps(stored))


def old_record(folder, versions: dict, key_ok: bool = True):
    mac = old_mac(".versions", versions, None) if key_ok else "0" * 64
    (folder / ".versions").write_text(json.dumps({"versions": versions, "mac": mac}))


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_account_files_of_0_10_move_into_the_database_once_as_they_were(tmp_path, request, engine):
    url = request.getfixturevalue("postgres").database() if engine == "postgresql" else None
    probe = AccountStore(key=KEY)
    spent, unversioned, rolled, forged = (probe._name(sid(i), "fp") for i in range(4))
    server = probe._name(SERVER, "fp")
    old_file(tmp_path, spent, 2.5, 3, ref="key-of-a-release")
    old_file(tmp_path, unversioned, 1.0, None)           # written by 0.9, before versions
    old_file(tmp_path, rolled, 1.0, 1)                   # put back from an older copy
    old_file(tmp_path, forged, 0.0, 2, key_ok=False)
    old_file(tmp_path, server, 7.0, 5)
    old_record(tmp_path, {spent: 3, rolled: 4, server: 5})
    (tmp_path / f"{spent}.lock").write_text("")
    stores = [AccountStore(tmp_path, key=KEY, url=url) for _ in range(2)]   # two workers starting
    assert stores[1].get(sid(0), "fp").spent == pytest.approx(2.5)
    assert stores[0].get(sid(1), "fp").spent == pytest.approx(1.0)
    assert stores[0].get(SERVER, "fp").spent == pytest.approx(7.0)
    assert stores[0].recorded(sid(0), "fp", "key-of-a-release")       # its release stays servable
    assert refused(stores[0], sid(2), message=ROLLED_BACK)
    assert refused(stores[0], sid(3), message=TAMPERED)
    stores[0].update(sid(0), "fp", charge(1.0))
    assert AccountStore(tmp_path, key=KEY, url=url).get(sid(0), "fp").spent == pytest.approx(3.5)
    assert not list(tmp_path.glob("*.json")) and not (tmp_path / ".versions").exists()
    assert len(list((tmp_path / IMPORTED).glob("*.json"))) == 5
    assert len(rows(stores[0])) == 5                     # imported once


def test_a_0_10_record_without_this_servers_signature_stops_the_import_in_words(tmp_path):
    probe = AccountStore(key=KEY)
    old_file(tmp_path, probe._name(sid(0), "fp"), 2.5, 3)
    old_record(tmp_path, {probe._name(sid(0), "fp"): 3}, key_ok=False)
    with pytest.raises(Unavailable) as stopped:
        AccountStore(tmp_path, key=KEY)
    assert str(stopped.value) == RECORD_TAMPERED
    assert (tmp_path / f"{probe._name(sid(0), 'fp')}.json").exists()      # nothing moved
