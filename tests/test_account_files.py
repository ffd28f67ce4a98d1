"""Budget account files: signed with the server's key, and bounded in number."""
from __future__ import annotations

import json
import os
import time
import types

import pytest

from server import accounts
from server.accounts import (DAMAGED, DELETED, FULL_ACCOUNTS, IDLE_SECONDS, ROLLED_BACK, SERVER,
                             TAMPERED, VERSIONS, AccountStore)
from server.faults import Unavailable
from server.store import RESERVED

KEY = b"the server's key"


def sid(i: int) -> str:
    return f"{i:032x}"


def charge(eps: float = 1.0):
    return lambda acc: acc.charge("release", epsilon=eps)


def accounts_in(folder) -> list:
    return sorted(folder.glob("*.json"))


def age(path, seconds: float = IDLE_SECONDS + 60):
    old = time.time() - seconds
    os.utime(path, (old, old))


def refused(store, scope, fingerprint="fp", message=TAMPERED):
    """The account is refused with `message` when read and when charged."""
    with pytest.raises(Unavailable) as read:
        store.get(scope, fingerprint)
    assert str(read.value) == message
    with pytest.raises(Unavailable) as charged:
        store.update(scope, fingerprint, charge(0.5))
    assert str(charged.value) == message
    return True


def test_a_charge_survives_a_restart_with_the_same_key(tmp_path):
    AccountStore(tmp_path, key=KEY).update(sid(1), "fp", charge(2.5))
    again = AccountStore(tmp_path, key=KEY)              # a restarted server
    assert again.get(sid(1), "fp").spent == pytest.approx(2.5)
    again.update(sid(1), "fp", charge(1.0))
    assert AccountStore(tmp_path, key=KEY).get(sid(1), "fp").spent == pytest.approx(3.5)
    (path,) = accounts_in(tmp_path)
    stored = json.loads(path.read_text())
    assert set(stored) == {"account", "version", "mac"} and stored["version"] == 2
    assert len(stored["account"]["charges"]) == 2


def test_an_account_put_back_from_an_older_copy_is_refused_in_words(tmp_path):
    """Issue 41, item 11: an account file restored from an earlier copy (its own valid
    signature) was read as it stood, handing out spent budget again. The folder's record of
    versions refuses it, and charges nothing; the latest file read back is accepted again."""
    store = AccountStore(tmp_path, key=KEY)
    store.update(sid(1), "fp", charge(1.0))
    (path,) = accounts_in(tmp_path)
    older = path.read_bytes()
    store.update(sid(1), "fp", charge(3.0))
    latest = path.read_bytes()
    path.write_bytes(older)                                    # rolled back by hand
    assert refused(store, sid(1), "fp", ROLLED_BACK)
    assert path.read_bytes() == older                          # left as it was
    path.write_bytes(latest)                                   # the operator restores it
    assert store.get(sid(1), "fp").spent == pytest.approx(4.0)


def test_a_deleted_account_is_refused_not_read_as_a_fresh_budget(tmp_path):
    store = AccountStore(tmp_path, key=KEY)
    store.update(SERVER, "fp", charge(9.0))
    (path,) = accounts_in(tmp_path)
    kept = path.read_bytes()
    path.unlink()
    assert refused(store, SERVER, "fp", DELETED)
    assert not accounts_in(tmp_path)
    path.write_bytes(kept)
    assert store.get(SERVER, "fp").spent == pytest.approx(9.0)


def test_a_file_written_just_before_its_record_is_read_and_the_record_catches_up(tmp_path, monkeypatch):
    """A server stopped between writing the account and the record: the file is one version
    ahead, which is read as it is (never refused), and the next charge writes both."""
    store = AccountStore(tmp_path, key=KEY)
    store.update(sid(1), "fp", charge(1.0))
    monkeypatch.setattr(store, "_record_version", lambda name, version: None)   # stopped before it
    store.update(sid(1), "fp", charge(1.0))
    monkeypatch.undo()
    assert store.get(sid(1), "fp").spent == pytest.approx(2.0)
    store.update(sid(1), "fp", charge(1.0))
    assert store.get(sid(1), "fp").spent == pytest.approx(3.0)
    assert json.loads((tmp_path / VERSIONS).read_text())["versions"] == {store._name(sid(1), "fp"): 3}


@pytest.mark.parametrize("edit", ["spent lowered", "charges removed"])
def test_a_file_edited_by_hand_is_refused_and_left_as_it_was(tmp_path, edit):
    store = AccountStore(tmp_path, key=KEY)
    store.update(sid(1), "fp", charge(3.0))
    (path,) = accounts_in(tmp_path)
    stored = json.loads(path.read_text())
    if edit == "spent lowered":
        stored["account"]["charges"][0]["epsilon"] = 0.1
    else:
        stored["account"]["charges"] = []
    planted = json.dumps(stored).encode()              # valid JSON, carrying the old signature
    assert json.loads(planted) != json.loads(path.read_bytes())
    path.write_bytes(planted)
    assert refused(store, sid(1))
    assert "not reset" in TAMPERED and "nothing was charged" in TAMPERED
    assert path.read_bytes() == planted                 # never replaced by a fresh budget
    assert accounts_in(tmp_path) == [path]


def test_an_unsigned_file_of_the_old_format_is_refused(tmp_path):
    store = AccountStore(tmp_path, key=KEY)
    store.update(sid(1), "fp", charge(3.0))
    (path,) = accounts_in(tmp_path)
    old_format = json.dumps(json.loads(path.read_text())["account"]).encode()
    path.write_bytes(old_format)
    assert refused(store, sid(1))
    assert path.read_bytes() == old_format


def test_unparseable_json_is_still_damaged(tmp_path):
    store = AccountStore(tmp_path, key=KEY)
    store.update(sid(1), "fp", charge(3.0))
    (path,) = accounts_in(tmp_path)
    path.write_bytes(path.read_bytes()[:20])
    assert refused(store, sid(1), message=DAMAGED)


def test_a_valid_file_copied_over_another_accounts_name_is_refused(tmp_path):
    store = AccountStore(tmp_path, key=KEY)
    store.update(sid(1), "fp", lambda acc: None)         # an account with nothing spent
    fresh = accounts_in(tmp_path)
    store.update(sid(2), "fp", charge(3.0))
    (spent,) = set(accounts_in(tmp_path)) - set(fresh)
    assert store.get(sid(1), "fp").spent == 0           # both files check out before the copy
    spent.write_bytes(fresh[0].read_bytes())            # the fresh budget copied over the spent one
    assert refused(store, sid(2))
    assert store.get(sid(1), "fp").spent == 0


def test_a_store_with_another_key_refuses_existing_files(tmp_path):
    AccountStore(tmp_path, key=KEY).update(sid(1), "fp", charge(3.0))
    (path,) = accounts_in(tmp_path)
    before = path.read_bytes()
    assert refused(AccountStore(tmp_path, key=b"another key"), sid(1))
    assert refused(AccountStore(tmp_path), sid(1))      # no key: a random key of this process
    assert path.read_bytes() == before
    assert AccountStore(tmp_path, key=KEY).get(sid(1), "fp").spent == pytest.approx(3.0)


def test_server_scope_files_are_named_apart_and_shared_by_every_browser(tmp_path):
    store = AccountStore(tmp_path, key=KEY)
    store.update(SERVER, "fp", charge(2.0))
    store.update(sid(1), "fp", charge(1.0))
    names = sorted(p.name for p in accounts_in(tmp_path))
    assert len(names) == 2 and sum(n.startswith("server-") for n in names) == 1
    assert store.get(SERVER, "fp").spent == pytest.approx(2.0)
    assert store.get(sid(1), "fp").spent == pytest.approx(1.0)


def test_a_new_account_at_the_bound_removes_the_oldest_idle_session_account(tmp_path):
    store = AccountStore(tmp_path, key=KEY, max_accounts=2)        # browsers' accounts; the server's apart
    store.update(SERVER, "oldest", charge())
    store.update(sid(1), "fp", charge())
    store.update(sid(2), "fp", charge())
    server_file = next(p for p in accounts_in(tmp_path) if p.name.startswith("server-"))
    first = store._name(sid(1), "fp")
    for path in accounts_in(tmp_path):                  # all idle, the server's the oldest
        age(path, IDLE_SECONDS + (500 if path == server_file else 200 if path.stem == first else 100))
    store.update(sid(3), "fp", charge())
    left = {p.name for p in accounts_in(tmp_path)}
    assert len(left) == 3 and server_file.name in left and f"{first}.json" not in left
    assert f"{first}.lock" not in {p.name for p in tmp_path.iterdir()}   # its lock file went with it
    assert store.get(SERVER, "oldest").spent == 1.0 and store.get(sid(2), "fp").spent == 1.0
    assert store.get(sid(1), "fp").spent == 0          # removed: its session's upload is gone
    store.update(sid(3), "fp", charge())                # an existing account needs no room
    assert len(accounts_in(tmp_path)) == 3


def test_server_scope_accounts_are_never_removed_and_never_refused(tmp_path):
    store = AccountStore(tmp_path, key=KEY, max_accounts=2)
    store.update(SERVER, "a", charge())
    store.update(SERVER, "b", charge())
    store.update(sid(1), "fp", charge())
    store.update(sid(2), "fp", charge())                # the bound: two browsers' accounts
    servers = {p.name: p.read_bytes() for p in accounts_in(tmp_path) if p.name.startswith("server-")}
    for path in accounts_in(tmp_path):
        age(path, 10 * IDLE_SECONDS)
    store.update(sid(3), "fp", charge())                # room made from a browser's, not the server's
    assert {p.name: p.read_bytes() for p in accounts_in(tmp_path) if p.name.startswith("server-")} == servers
    assert len(accounts_in(tmp_path)) == 4
    store.update(sid(4), "fp", charge())                # browsers filling the bound, recently:
    with pytest.raises(Unavailable) as full:
        store.update(sid(5), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS
    store.update(SERVER, "c", charge())                 # an owner's new data is never refused
    assert store.get(SERVER, "c").spent == 1.0


@pytest.mark.parametrize("folder", [True, False], ids=["files", "memory"])
def test_visitors_filling_the_bound_never_refuse_an_owners_session(tmp_path, folder):
    """Issue 41, item 6: visitors' accounts filling the bound (the audit's 10,000 in 3 minutes)
    refused the owner too; an owner's session (its id marked `store.RESERVED`) releasing a
    sample now gets its account, and its accounts do not count towards the visitors' bound."""
    store = AccountStore(tmp_path if folder else None, key=KEY, max_accounts=3)
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
    if folder:
        assert sum(p.name.startswith(RESERVED) for p in accounts_in(tmp_path)) == 5


def test_at_the_bound_with_recent_accounts_a_new_one_is_refused_and_nothing_written(tmp_path):
    store = AccountStore(tmp_path, key=KEY, max_accounts=3)
    for i in range(3):
        store.update(sid(i), "fp", charge())
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(Unavailable) as full:
        store.update(sid(9), "fp", charge())
    assert str(full.value) == FULL_ACCOUNTS
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert store.get(sid(9), "fp").spent == 0
    store.update(sid(0), "fp", charge())                # existing accounts are still charged
    assert store.get(sid(0), "fp").spent == 2.0


def test_reading_unknown_accounts_creates_no_file(tmp_path):
    store = AccountStore(tmp_path, key=KEY, max_accounts=1)
    for i in range(5):
        assert store.get(sid(i), "fp").spent == 0
        assert store.get(SERVER, f"fp{i}").spent == 0
    assert list(tmp_path.iterdir()) == []
    store.update(sid(1), "fp", charge())                # reading did not count towards the bound
    assert [p.name for p in accounts_in(tmp_path)] == [f"{store._name(sid(1), 'fp')}.json"]


def test_a_refused_charge_on_a_new_account_leaves_no_lock_file(tmp_path):
    store = AccountStore(tmp_path, key=KEY, default_total=1.0)
    with pytest.raises(Exception, match="budget|exceed|remaining"):
        store.update(sid(1), "fp", charge(5.0))
    assert list(tmp_path.iterdir()) == []


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
    assert store.get(sid(9), "fp").spent == 0           # reading does not count towards the bound
    store.update(sid(3), "fp", charge())
    assert store.get(sid(3), "fp").spent == 2
