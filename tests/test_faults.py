"""Faults injected into the server a user runs (`python app.py`: 3 gunicorn workers, one heavy
process each), driven through the page's own callbacks over HTTP, with the accounts and the
store checked after each fault (the faults around a charge on SQLite and on PostgreSQL): a charge stands only with its stored release, a killed
heavy process heals, and every failure reaches the page in words (never an HTTP 500).

The faults are planted by a `sitecustomize` module this file writes and puts on the server's
PYTHONPATH, so they act in every process of it (master, workers, heavy processes): a heavy
process kills itself just before or just after the account's write (the charge's commit), the
store's disk fills up (ENOSPC while writing), the accounts database turns read-only (SQLite's
read-only error at the write), the whole server is killed before its n-th durable write. Each fault is armed by a file in a folder the test owns, and disarmed by removing it.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from components import ids
from helpers import account_bodies, account_charges, database_charges, free_port, set_account_body, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from app_latency import Browser  # noqa: E402
from load import Http, open_page  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
OFFLINE_TILES = "http://127.0.0.1:9/{z}/{x}/{y}.png"

FAULTS = '''
"""Test-only faults, armed by files in $DP_TEST_FAULTS (see tests/test_faults.py)."""
import errno, multiprocessing, os, signal, types

FOLDER = os.environ.get("DP_TEST_FAULTS")


def _take(name):
    """True once per arming: the file is removed by whoever acts on it first."""
    try:
        os.remove(os.path.join(FOLDER, name))
        return True
    except FileNotFoundError:
        return False


def _armed(name):
    return os.path.exists(os.path.join(FOLDER, name))


if FOLDER:
    from server import accounts, file_store, store

    _account_write = accounts.AccountStore._write

    def _write(self, name, acc, *rest):
        heavy = multiprocessing.parent_process() is not None
        if heavy and _take("kill-before-charge"):
            os.kill(os.getpid(), signal.SIGKILL)
        _account_write(self, name, acc, *rest)
        if heavy and _take("kill-after-charge"):
            os.kill(os.getpid(), signal.SIGKILL)
    accounts.AccountStore._write = _write

    _account_put = accounts.AccountStore._put

    def _put(self, *a):
        if _armed("accounts-read-only"):
            import sqlite3, sqlalchemy
            raise sqlalchemy.exc.OperationalError(
                "UPDATE accounts", {}, sqlite3.OperationalError("attempt to write a readonly database"))
        return _account_put(self, *a)
    accounts.AccountStore._put = _put

    class _FillingFile:
        """A file that takes half of what is written to it, then finds the disk full."""
        def __init__(self, fh):
            self.fh = fh
        def write(self, data):
            self.fh.write(bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        def __getattr__(self, name):
            return getattr(self.fh, name)
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            self.fh.close()

    _store_write = file_store.FileStore._write

    def _store_write_filling(self, key, payload, timeout):
        full = _armed("disk-full") and store.kind(key) in open(os.path.join(FOLDER, "disk-full")).read()
        file_store.os = types.SimpleNamespace(**{**vars(os), "fdopen": lambda fd, mode: _FillingFile(
            os.fdopen(fd, mode))}) if full else os
        try:
            return _store_write(self, key, payload, timeout)
        finally:
            file_store.os = os
    file_store.FileStore._write = _store_write_filling

    def _before_a_durable_write(*_):
        """Count each store write and database commit while "kill-at-write" is armed (in
        "writes-seen"); before the one after the armed number, SIGKILL the whole server."""
        try:
            with open(os.path.join(FOLDER, "kill-at-write")) as armed:
                limit = int(armed.read())
        except (FileNotFoundError, ValueError):      # not armed (or disarmed meanwhile)
            return
        with open(os.path.join(FOLDER, "writes-seen"), "a") as seen:
            seen.write("x")
        if os.path.getsize(os.path.join(FOLDER, "writes-seen")) > limit:
            os.killpg(os.getpgrp(), signal.SIGKILL)

    _filling = file_store.FileStore._write

    def _store_write_counted(self, key, payload, timeout):
        _before_a_durable_write()
        return _filling(self, key, payload, timeout)
    file_store.FileStore._write = _store_write_counted
    import sqlalchemy
    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "commit", _before_a_durable_write)
'''


class Server:
    """`python app.py --workers 3` on a free port, its store, accounts and published releases
    in `folder`, the faults of this file planted (armed by files in folder/faults)."""

    def __init__(self, folder: Path, *extra: str):
        self.folder, self.port = folder, free_port()
        self.database_url = extra[extra.index("--database-url") + 1] if "--database-url" in extra else None
        self.url = f"http://127.0.0.1:{self.port}"
        self.faults = folder / "faults"
        self.faults.mkdir(parents=True, exist_ok=True)      # a restart reuses the folder
        (folder / "site").mkdir(exist_ok=True)
        (folder / "site" / "sitecustomize.py").write_text(textwrap.dedent(FAULTS))
        env = {**os.environ, "DP_TEST_FAULTS": str(self.faults),
               "PYTHONPATH": os.pathsep.join([str(folder / "site"), str(ROOT)])}
        self.proc = subprocess.Popen(
            [sys.executable, "app.py", "--port", str(self.port), "--workers", "3",
             "--store-dir", str(folder / "store"), "--accounts-dir", str(folder / "accounts"),
             "--published-dir", str(folder / "published"), "--tiles-url", OFFLINE_TILES, *extra],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)                # its own process group: `kill` takes it whole
        wait_until(lambda: self.up() or self.proc.poll() is not None, timeout=90)
        assert self.proc.poll() is None, self.proc.stdout.read()

    def up(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/_dash-layout", timeout=10):
                return True
        except OSError:
            return False

    def arm(self, fault: str, text: str = "") -> None:
        """Arm a fault: its file appears whole (written aside, then renamed)."""
        (self.faults / f".{fault}").write_text(text)
        os.replace(self.faults / f".{fault}", self.faults / fault)

    def disarm(self, fault: str) -> None:
        (self.faults / fault).unlink(missing_ok=True)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.communicate(timeout=60)[0]

    def kill(self) -> str:
        """SIGKILL to every process of the server at once (master, workers, heavy processes),
        unless a fault did it already: no clean-up runs anywhere. Its output until then."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.communicate(timeout=60)[0]


OWNER_TOKEN = "faults-test-owner-token-000000001"


def faults_server(folder: Path, *extra: str) -> Server:
    """The server of this file's tests, with an owner link and a data folder holding counts of
    5,000 points of the default sample, over its box (`city.npz`)."""
    import dp
    data, box = dp.load_sample("city_200k")
    (folder / "data").mkdir()
    (folder / "trips.csv").write_text("lon,lat\n" + "".join(f"{x:.7f},{y:.7f}\n" for x, y in zip(data.x[:5000], data.y[:5000])))
    dp.aggregate(str(folder / "trips.csv"), box, 1024).save(folder / "data" / "city.npz")
    return Server(folder, "--owner-token", OWNER_TOKEN, "--data-dir", str(folder / "data"), *extra)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = faults_server(tmp_path_factory.mktemp("faults"))
    yield s
    log = s.stop()
    assert "Traceback" not in log, log[-3000:]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def either(request, tmp_path_factory):
    """The server of this file's tests, and one like it with its accounts in PostgreSQL: each
    guarantee checked on both engines."""
    if request.param == "sqlite":
        yield request.getfixturevalue("server")
        return
    s = faults_server(tmp_path_factory.mktemp("faults-pg"), "--database-url",
                      request.getfixturevalue("postgres").database())
    yield s
    log = s.stop()
    assert "Traceback" not in log, log[-3000:]


def accounts_of(server: Server):
    """Where the server keeps its accounts: its database URL, or its accounts folder (SQLite)."""
    return server.database_url or server.folder / "accounts"


def read_only(server: Server, on: bool) -> None:
    """Make the accounts' database read-only (or writable again): for SQLite a fault planted in
    the server (the error SQLite gives), for PostgreSQL the database itself, its connections
    ended so the server's pool opens new ones under the new default."""
    if server.database_url is None:
        server.arm("accounts-read-only") if on else server.disarm("accounts-read-only")
        return
    import sqlalchemy as sa
    url = sa.engine.make_url(server.database_url)
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER DATABASE {url.database} SET default_transaction_read_only = "
                                 f"{'on' if on else 'off'}")
            conn.exec_driver_sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 f"WHERE datname = '{url.database}'")
    finally:
        admin.dispose()


def visitor(server: Server) -> Browser:
    """A new browser session with the page open (on the built-in sample)."""
    b = Browser(Http(server.url, timeout=120))
    open_page(b)
    return b


def text(node) -> str:
    """The visible text of a component tree as a Dash response holds it."""
    if node is None or isinstance(node, bool):
        return ""
    if isinstance(node, (str, int, float)):
        return str(node)
    if isinstance(node, list):
        return "".join(text(n) for n in node)
    return text(node.get("props", {}).get("children"))


def release(b: Browser) -> str:
    """Press Release (a click with a fresh request id, as the page makes one); the status line."""
    b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
    return text(b.comps[ids.RELEASE_STATUS].get("children"))


def alert(b: Browser) -> str:
    """The server alert's text if it is shown."""
    return "" if b.comps[ids.SERVER_ALERT].get("hidden", True) else \
        text(b.comps[ids.SERVER_ALERT_TEXT].get("children"))


def charges(server: Server) -> list:
    """Every charge in every account (a damaged one is skipped here, read by its test), in the
    server's SQLite file or its PostgreSQL database."""
    if server.database_url is None:
        return account_charges(server.folder / "accounts")
    return database_charges(server.database_url)


def stored_releases(server: Server) -> int:
    return len(list((server.folder / "store" / "data").glob("*/release-*")))


def temporaries(server: Server) -> list:
    return [p for p in (server.folder / "store").rglob("*") if p.name.endswith(".__wz_cache")]


def test_a_heavy_process_killed_before_its_charge_leaves_neither_and_the_click_is_answered(either):
    server = either
    b = visitor(server)
    before, kept = len(charges(server)), stored_releases(server)
    server.arm("kill-before-charge")
    status = release(b)
    assert not (server.faults / "kill-before-charge").exists()      # the fault did fire
    assert status.startswith("Released"), status                   # retried in a new process
    assert len(charges(server)) == before + 1 and stored_releases(server) == kept + 1
    assert release(b).startswith("Released")                        # the worker serves again
    assert len(charges(server)) == before + 2 and stored_releases(server) == kept + 2


def test_a_heavy_process_killed_right_after_its_charge_keeps_both_once(either):
    server = either
    b = visitor(server)
    before, kept = len(charges(server)), stored_releases(server)
    server.arm("kill-after-charge")
    status = release(b)
    assert not (server.faults / "kill-after-charge").exists()
    assert status.startswith("Released"), status                   # settled: charged and stored
    assert len(charges(server)) == before + 1 and stored_releases(server) == kept + 1


def test_a_full_disk_charges_nothing_says_so_and_recovers_when_space_returns(either):
    server = either
    b = visitor(server)
    before, kept = len(charges(server)), stored_releases(server)
    server.arm("disk-full", "release")                # only the release's own write fails
    status = release(b)
    assert status.startswith("Not released") and "is full" in status, status
    assert "nothing was charged" in status
    assert len(charges(server)) == before and stored_releases(server) == kept
    assert temporaries(server) == []                  # the half-written file was removed
    server.arm("disk-full", "release workspace dataset job live")    # every write fails
    status = release(b)
    assert status.startswith("Not released") and "is full" in status, status
    assert len(charges(server)) == before
    server.disarm("disk-full")
    assert release(b).startswith("Released")
    assert len(charges(server)) == before + 1 and stored_releases(server) == kept + 1


def test_a_read_only_accounts_database_charges_nothing_and_keeps_no_release(either):
    server = either
    b = visitor(server)
    before, kept = len(charges(server)), stored_releases(server)
    read_only(server, True)
    try:
        status = release(b)
    finally:                                          # later tests need a writable database
        read_only(server, False)
    assert status.startswith("Not released") and "accounts database cannot be written" in status, status
    assert "nothing was charged" in status
    assert len(charges(server)) == before and stored_releases(server) == kept
    assert temporaries(server) == []
    assert release(b).startswith("Released")
    assert len(charges(server)) == before + 1 and stored_releases(server) == kept + 1


def test_a_truncated_account_is_refused_in_words_and_its_budget_never_reset(either):
    server = either
    b = visitor(server)
    assert release(b).startswith("Released")
    name, good = list(account_bodies(accounts_of(server)).items())[-1]
    damaged = good[: len(good) // 2]
    set_account_body(accounts_of(server), name, damaged)
    open_page(b)                                      # a reload: no HTTP 500, a message
    said = text(b.comps[ids.RELEASE_STATUS].get("children")) + alert(b)
    assert "damaged" in said and "not reset" in said, said
    status = release(b)
    assert status.startswith("Not released") and "damaged" in status, status
    assert account_bodies(accounts_of(server))[name] == damaged    # never replaced by a fresh budget


def owner_browser(server: Server) -> Browser:
    """A new browser that opened the owner link, with the page open."""
    b = Browser(Http(server.url, timeout=120))
    b.client.get(f"/owner?token={OWNER_TOKEN}")
    open_page(b)
    return b


def spent_line(b: Browser) -> str:
    return text(b.comps[ids.ACCOUNT_SUMMARY].get("children"))


def test_the_owner_uploading_the_counts_it_serves_spends_their_one_budget(either):
    """Issue 41, item 8, through gunicorn: counts the owner opens from the data folder and the
    same file uploaded by another owner link's browser spend one account (the upload got a
    fresh one: 0 of 10 spent beside 9 of 10)."""
    server = either
    import base64
    owner = owner_browser(server)
    owner.comps[ids.SERVER_PATH]["value"] = "city.npz"
    owner.act(ids.SERVER_OPEN, "n_clicks", 1)
    assert "5,000 points counted" in text(owner.comps[ids.UPLOAD_STATUS].get("children"))
    eps = owner.comps[ids.EPSILON_VALUE]["value"]
    assert release(owner).startswith("Released")
    spent = spent_line(owner)
    assert spent.startswith(f"Spent ε = {eps:g} of 10 "), spent
    other = owner_browser(server)
    npz = (server.folder / "data" / "city.npz").read_bytes()
    other.act(ids.UPLOAD, "contents", "data:application/octet-stream;base64," + base64.b64encode(npz).decode(),
              {(ids.UPLOAD, "filename"): "city.npz"})
    assert "Loaded city.npz" in text(other.comps[ids.UPLOAD_STATUS].get("children"))
    assert spent_line(other) == spent                  # the server's account of these counts
    assert release(other).startswith("Released")
    open_page(owner)
    assert spent_line(owner).startswith(f"Spent ε = {2 * eps:g} of 10 "), spent_line(owner)


def test_requests_without_a_session_cookie_create_no_account_on_the_real_server(either):
    """Issue 41, item 6, through gunicorn: "Raise total" sent without a session cookie (the
    audit sent 10,000 in 3 minutes, which filled the bound of accounts for 4 hours) is refused
    each time and creates no account; a visitor then releases as before."""
    from concurrent.futures import ThreadPoolExecutor
    server = either

    import requests

    from helpers import dash_call
    from server import state

    class NoCookies:
        """An HTTP client that never keeps a cookie, in the shape `dash_call` uses."""
        def get(self, path):
            r = requests.get(server.url + path, timeout=60)
            r.get_json = r.json
            return r

        def post(self, path, json):
            return requests.post(server.url + path, json=json, timeout=60)

    values = {f"{ids.ACCOUNT_CONFIRM}.submit_n_clicks": 1, f"{ids.ACCOUNT_RAISE_VALUE}.value": 12,
              f"{ids.DATASET}.data": state.use_sample("any", state.DEFAULT_SAMPLE)}   # as the page sends it
    before = account_bodies(accounts_of(server))
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: dash_call(NoCookies(), f"{ids.ACCOUNT_TICK}.data", values), range(300)))
    assert {a.status_code for a in answers} == {403}
    assert all("no session with this server" in a.text for a in answers[:5]), answers[0].text
    assert account_bodies(accounts_of(server)) == before
    assert release(visitor(server)).startswith("Released")


def redis_server(port: int, folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", str(folder), "--save", "", "--appendonly", "yes"],
                            stdout=subprocess.DEVNULL)
    import redis
    client = redis.Redis(port=port)
    wait_until(lambda: _pings(client), timeout=20)
    return proc


def _pings(client) -> bool:
    import redis
    try:
        return client.ping()
    except redis.exceptions.ConnectionError:
        return False


@pytest.mark.skipif(not any(os.access(os.path.join(p, "redis-server"), os.X_OK)
                            for p in os.environ.get("PATH", "").split(os.pathsep)),
                    reason="redis-server is not installed (the README's test command installs it)")
def test_redis_going_down_speaks_and_the_page_works_again_after(tmp_path):
    import redis
    port = free_port()
    db = redis_server(port, tmp_path)
    server = Server(tmp_path / "app", "--redis-url", f"redis://127.0.0.1:{port}/0")
    try:
        b = visitor(server)
        assert release(b).startswith("Released")
        before = len(charges(server))
        redis.Redis(port=port).shutdown(save=True)       # Redis stops (its data saved)
        db.wait(timeout=30)
        shown = release(b)          # on the open page: words, no HTTP 500 (the release's job
        assert "Redis" in alert(b), alert(b)     # cannot start: the banner says why, and the
        assert release(b) == shown               # status line still tells the release on the map)
        assert len(charges(server)) == before
        fresh = Browser(Http(server.url, timeout=120))
        open_page(fresh)                                 # a new visit: the page says why
        assert "Redis" in text(fresh.tree["props"]["children"]), fresh.tree
        db = redis_server(port, tmp_path)                # back, with what it saved
        time.sleep(0.5)
        assert release(b).startswith("Released")
        assert len(charges(server)) == before + 1
        open_page(fresh)
        assert ids.RELEASE_STATUS in fresh.comps
    finally:
        log = server.stop()
        db.terminate()
        db.wait(timeout=30)
    assert "Traceback" not in log, log[-3000:]


def test_the_owners_workspace_and_paid_click_survive_a_hundred_visitors_filling_the_store(tmp_path):
    """Issue 41, item 3, on the real server: 100 fresh visitor cookies each uploading their own
    points fill the visitors' part of a 16 MB store (about 24 MB of uploads pass through it);
    the owner's page then still opens on its paid release (no new spend) and the same Release
    click sent again is answered from its request id, not charged twice (the audit's 70
    cookies evicted the owner's workspace and the click was charged again). Items 2 and 5 on
    the same server: a Parquet bomb and a body of empty lists are refused before expanding."""
    import base64
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from server import file_store, sessions, workspace
    token = "o" * 32
    s = Server(tmp_path / "flood", "--store-mb", "16", "--owner-token", token)
    try:
        owner = Browser(Http(s.url, timeout=120))
        owner.client.get(f"/owner?token={token}")
        open_page(owner)
        assert release(owner).startswith("Released")
        click = dict(owner.comps[ids.RELEASE_REQUEST]["data"])
        paid = len(charges(s))

        def flood(i: int) -> str:
            rng = np.random.default_rng(i)
            xy = np.column_stack([rng.uniform(-74.0, -73.9, 15_000), rng.uniform(40.7, 40.8, 15_000)])
            csv = "lon,lat\n" + "".join(f"{x:.6f},{y:.6f}\n" for x, y in xy)
            v = Browser(Http(s.url, timeout=120))
            v.open()
            v.act(ids.UPLOAD, "contents", "data:text/csv;base64," + base64.b64encode(csv.encode()).decode(),
                  {(ids.UPLOAD, "filename"): f"v{i}.csv"})
            return text(v.comps[ids.UPLOAD_STATUS].get("children"))
        with ThreadPoolExecutor(4) as pool:
            said = list(pool.map(flood, range(100)))
        assert sum("Loaded" in t for t in said) >= 50, said[:3]      # most were kept a while
        stored = sum(p.stat().st_size for p in (s.folder / "store").rglob("*") if p.is_file())
        assert stored > 10 * 2**20                                   # the visitors filled their part
        # the owner's workspace, as the server keeps it, still records the paid click's request id
        kept = file_store.FileStore(s.folder / "store", 10**9, 0, key=sessions.derive_key(
            sessions.session_secret(s.folder / "accounts"), "store"))
        me = sessions.sid_of(owner.client.session.cookies[sessions.COOKIE], "owner")
        record = kept.get(workspace._key(me))
        assert record is not None and click["id"] in record["requests"], record
        again = Browser(owner.client)                                # the owner's page, reloaded
        open_page(again)
        shown = text(again.comps[ids.RELEASE_STATUS].get("children"))
        assert "already paid for" in shown, shown
        again.act(ids.RELEASE_REQUEST, "data", click)                # the same click, sent again
        assert len(charges(s)) == paid
        # items 2 and 5 on this server: a 25 KB Parquet file unpacking to 400 MB is refused in
        # words before it is decoded; a body of 199,990 empty lists before it is parsed
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq
        buf = io.BytesIO()
        pq.write_table(pa.table({"lon": np.full(400_000, -73.95), "lat": np.full(400_000, 40.75),
                                 "user_id": pa.array(["u" * 1000] * 400_000)}), buf, compression="zstd")
        v = Browser(Http(s.url, timeout=120))
        v.open()
        v.act(ids.UPLOAD, "contents", "data:application/octet-stream;base64," +
              base64.b64encode(buf.getvalue()).decode(), {(ids.UPLOAD, "filename"): "bomb.parquet"})
        said = text(v.comps[ids.UPLOAD_STATUS].get("children"))
        assert "columns unpack to 40" in said and "MB, more than the 4.2 MB" in said, said
        answer = v.client.post("/_dash-update-component", b"[" + b",".join([b"[]"] * 199_990) + b"]",
                               "application/json")
        assert answer.status_code == 400 and "lists and objects" in answer.get_data(as_text=True)
    finally:
        log = s.stop()
    assert "Traceback" not in log, log[-3000:]
