"""Two app processes on different ports (two hosts behind one proxy, as deployment.md says),
each with its own accounts folder holding the same key, sharing one PostgreSQL database and one
Redis store: a browser moving between them keeps its workspace and spends one budget (issue 42).
"""
from __future__ import annotations

import secrets

import pytest

from helpers import database_charges
from test_faults import Server, release, spent_line, visitor
from test_store import start_redis

from load import open_page  # noqa: E402 (benchmarks/ is on the path through test_faults)

pytestmark = pytest.mark.slow


def test_two_servers_on_one_database_and_one_redis_share_one_budget(tmp_path, postgres):
    proc, redis_url = start_redis(tmp_path, "--save", "", "--appendonly", "yes")
    url = postgres.database()
    key = secrets.token_bytes(32)
    for side in "ab":
        (tmp_path / side / "accounts").mkdir(parents=True)
        (tmp_path / side / "accounts" / "session.key").write_bytes(key)   # copied to each host
    a, b = (Server(tmp_path / side, "--database-url", url, "--redis-url", redis_url) for side in "ab")
    try:
        browser = visitor(a)
        assert release(browser).startswith("Released")
        first = database_charges(url)
        assert len(first) == 1
        on_a = spent_line(browser)
        assert "Spent" in on_a, on_a
        browser.client.base = b.url                   # the proxy sends the next request to b
        open_page(browser)
        assert spent_line(browser) == on_a            # the same account, read from the database
        assert release(browser).startswith("Released")
        assert len(database_charges(url)) == 2                 # one account, charged once on each host
        browser.client.base = a.url
        open_page(browser)
        assert spent_line(browser) != on_a and spent_line(browser).startswith("Spent")
        assert not list((tmp_path / "a" / "accounts").glob("*.sqlite3"))   # nothing kept apart
    finally:
        logs = [s.stop() for s in (a, b)]
        proc.terminate()
        proc.wait(timeout=10)
    for log in logs:
        assert "Traceback" not in log, log[-3000:]
