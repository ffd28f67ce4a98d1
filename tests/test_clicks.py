"""Each spending click's request id kept in the server's database (`server.clicks`, issue 41's
last gap of item 3): a click is never run twice, even after the workspace that held its result
expired or was dropped; visitors' ids are bounded, an owner's are not dropped for them. On
SQLite and on PostgreSQL (the `make` fixture of the account store's tests)."""
import sqlalchemy as sa

from server import clicks, database, services, state, workspace
from server.store import RESERVED
from test_account_store import make  # noqa: F401 (an AccountStore on each engine)
from test_workspace import app_on, release_once  # noqa: F401 (an app on each store backend)
from test_store import config, redis_url  # noqa: F401
from helpers import new_sid


def sessions(store) -> set:
    """The sessions whose click ids the database holds."""
    with store.transaction() as conn:
        return set(conn.execute(sa.select(database.requests.c.session)).scalars())


def test_a_click_is_claimed_once_and_settled(make):  # noqa: F811
    store, sid = make(), new_sid()
    assert clicks.claim(store, sid, "a" * 32) is True
    assert clicks.claim(store, sid, "a" * 32) is False            # the same click again
    assert clicks.claim(store, new_sid(), "a" * 32) is True       # the same id from another page
    assert not clicks.settled(store, sid, "a" * 32)
    clicks.settle(store, sid, "a" * 32)
    assert clicks.settled(store, sid, "a" * 32)
    assert make().engine.url == store.engine.url and clicks.claim(make(), sid, "a" * 32) is False


def test_old_ids_go_and_visitors_are_bounded_but_not_the_owner(make, monkeypatch):  # noqa: F811
    store = make()
    owner = RESERVED + new_sid()
    clicks.claim(store, owner, "o" * 32)
    monkeypatch.setattr(clicks, "MAX_VISITOR_ROWS", 5)
    monkeypatch.setattr(clicks, "PRUNE_EVERY", 1)
    visitors = [new_sid() for _ in range(12)]
    for v in visitors:
        assert clicks.claim(store, v, "v" * 32)
    kept = sessions(store)
    assert owner in kept                                          # the owner's id is still known
    kept = [v for v in visitors if v in kept]
    assert len(kept) == 6 and kept == visitors[-6:]               # the newest: 5 kept, 1 added
    monkeypatch.setattr(clicks, "KEEP_SECONDS", -1)               # everything is old now
    clicks.claim(store, new_sid(), "n" * 32)
    assert clicks.claim(store, owner, "o" * 32)                   # gone after KEEP_SECONDS


def test_a_click_is_not_run_again_after_its_workspace_is_gone(app_on):  # noqa: F811
    """Before: request ids lived in the workspace, so a click repeated after the workspace
    expired (4 h idle) or was dropped ran, and charged, again."""
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    domain = state.sample("small_city_5k")[1]
    first = release_once(sid, "e" * 32, info, domain)
    assert "key" in first and len(state.account(sid, info["fingerprint"]).charges) == 1
    services.current().store.delete(workspace._key(sid))                       # expired, or dropped
    runs = []
    again = workspace.once(sid, "e" * 32, lambda: runs.append(1) or {"key": "second"})
    assert not runs and again == workspace.ANSWERED
    assert len(state.account(sid, info["fingerprint"]).charges) == 1
