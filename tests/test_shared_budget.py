"""Two app processes on different ports (two hosts behind one proxy, as deployment.md says),
each with its own accounts folder holding the same key, sharing one PostgreSQL database and one
Redis store: a browser moving between them keeps its workspace and spends one budget, and a
release the owner publishes on one is served by the other (issue 42).
"""
from __future__ import annotations

import secrets

import pytest

import requests

from components import ids
from helpers import database_charges, page_request
from test_faults import OWNER_TOKEN, Server, owner_browser, release, spent_line, text, visitor
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
    a, b = (Server(tmp_path / side, "--database-url", url, "--redis-url", redis_url,
                   "--owner-token", OWNER_TOKEN) for side in "ab")
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
        owner = owner_browser(a)
        assert release(owner).startswith("Released")
        owner.comps[ids.PUBLISH_TITLE]["value"] = "Shared across hosts"
        owner.act(ids.PUBLISH_BUTTON, "n_clicks", 1)
        status = text(owner.comps[ids.PUBLISH_STATUS].get("children"))
        assert status.startswith("Published at /r/"), status
        pid = status.split("/r/")[1].split()[0]
        assert public_body(b.url, pid).count("Shared across hosts") >= 1     # served by the other host
    finally:
        logs = [s.stop() for s in (a, b)]
        proc.terminate()
        proc.wait(timeout=10)
    for log in logs:
        assert "Traceback" not in log, log[-3000:]


def public_body(base: str, pid: str) -> str:
    """The public page of a published release as a fresh visitor's browser gets it: the shell
    (and its session cookie), then the callback that renders the page from the address."""
    with requests.Session() as s:
        assert s.get(f"{base}/r/{pid}", timeout=60).status_code == 200
        answer = s.post(f"{base}/_dash-update-component", json=page_request(f"/r/{pid}"), timeout=120,
                        headers={"Origin": base})
        assert answer.status_code == 200, answer.text[:500]
        return answer.text
