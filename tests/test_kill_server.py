"""The whole server (`python app.py`: master and workers) killed with SIGKILL at random points of
a release (before one of its durable writes, drawn at random), 50 times (25 with the accounts in
SQLite, 25 in PostgreSQL), each followed by a restart on the same store and database (issue 42):
the charges always equal the release records (written in one transaction), every record's
release is in the store, and the reopened page shows the newest release paid for.

The server runs with `--heavy-workers 0`, so a release is built in the worker that took the
click: with a heavy pool the same code commits in a pool process, which the kill takes as well,
and every restart would spend five seconds starting that pool before the release could be hit.
"""
from __future__ import annotations

import random
import threading

import pytest
import sqlalchemy as sa

from components import ids
from helpers import database_charges
from server import database, sessions
from server.file_store import FileStore
from test_faults import Server, release, visitor

from load import open_page  # noqa: E402 (benchmarks/ is on the path through test_faults)

pytestmark = pytest.mark.slow
KILLS = 25             # on each engine
SEED = 20261130
OPTIONS = ("--heavy-workers", "0", "--workers", "2", "--default-budget", "1000")   # 50 releases of ε 1 fit


def records(engine) -> list[tuple[str, str]]:
    """(session, ref) of every release record in the server's database, oldest first."""
    t = database.releases
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(t.c.session, t.c.ref).order_by(t.c.written))]


def kept(folder, session: str, ref: str) -> bool:
    """True when the store holds the release `ref` of `session` (read with the server's key)."""
    secret = sessions.session_secret(folder / "accounts")
    store = FileStore(folder / "store", 2**30, 0, key=sessions.derive_key(secret, "store"))
    return store.has(f"release:{session}:{database.release_entry(ref)}")


def shown_key(b) -> str | None:
    """The key of the release the page shows (None: none)."""
    return (b.comps[ids.RELEASE].get("data") or {}).get("key")


def writes_seen(server: Server) -> int:
    return (server.faults / "writes-seen").stat().st_size if (server.faults / "writes-seen").exists() else 0


def click_killed_before_write(server: Server, b, n: int) -> None:
    """Press Release with the server armed to die (SIGKILL, every process) before its n-th
    durable write from now (a store write or a database commit); a release that makes fewer
    is answered, and the server is killed after it."""
    (server.faults / "writes-seen").unlink(missing_ok=True)
    server.arm("kill-at-write", str(n))
    clicking = threading.Thread(target=_click, args=(b,), daemon=True)
    clicking.start()
    clicking.join(timeout=120)
    server.disarm("kill-at-write")
    server.kill()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_killing_the_whole_server_at_any_point_of_a_release_leaves_charges_equal_to_records(tmp_path, request, engine):
    """Between two durable writes the files on disk do not change (a store entry is renamed into
    place whole, a commit is atomic), so killing before each write covers every state a kill at
    any moment can leave: the kills fall before a write drawn at random from all of a release's."""
    if engine == "postgresql":
        url = request.getfixturevalue("postgres").database()
    else:
        url = f"sqlite:///{tmp_path / 'accounts' / database.SQLITE_FILE}"
    options = (*OPTIONS, "--database-url", url) if engine == "postgresql" else OPTIONS
    db = sa.create_engine(url)
    rng, outcomes = random.Random(SEED + len(engine)), []
    server = Server(tmp_path, *options)
    b = visitor(server)
    try:
        server.arm("kill-at-write", str(10**9))       # count the writes of one release, unharmed
        assert release(b).startswith("Released")
        writes = writes_seen(server)
        assert writes >= 3, writes          # at least the release, the commit of its charge, the workspace
        for attempt in range(KILLS):
            before = len(records(db))
            n = rng.randint(0, writes)
            click_killed_before_write(server, b, n)
            recorded = records(db)
            assert sorted(c["ref"] for c in database_charges(url)) == sorted(ref for _, ref in recorded), attempt
            assert all(kept(tmp_path, session, ref) for session, ref in recorded), attempt
            outcomes.append((n, len(recorded) - before))
            server = Server(tmp_path, *options)
            b.client.base = server.url
            open_page(b)
            assert shown_key(b) == recorded[-1][1], attempt      # the newest paid for, found again
    finally:
        log = server.stop()
        db.dispose()
    assert "Traceback" not in log, log[-3000:]
    # a kill before write n keeps the release exactly when n is past the commit: kills fell on
    # both sides of it, and the same point always ends the same way
    charged = {n for n, kept_one in outcomes if kept_one}
    assert charged and len(charged) < len({n for n, _ in outcomes}), outcomes
    assert all(kept_one == (n >= min(charged)) for n, kept_one in outcomes), sorted(outcomes)
    assert len(records(db)) == 1 + len([n for n, kept_one in outcomes if kept_one])


def _click(b) -> None:
    """Press Release; a kill cuts the request off."""
    try:
        release(b)
    except Exception:        # noqa: BLE001 (the connection dies with the server)
        pass
