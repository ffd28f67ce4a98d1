"""The shared store: bounded in bytes, a quota per session, and state that crosses processes.

Every test runs against both backends: a folder (FileStore) and Redis (RedisStore, on a
redis-server this module starts on a free loopback port; skipped if the binary is absent).
Two-process tests start a second app in a spawned process, as a second gunicorn worker would be.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import re
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest

import dp
from server import file_store, services, sessions, store
from server.redis_store import RedisStore
from helpers import free_port, new_sid, wait_until

REDIS = shutil.which("redis-server")


def start_redis(folder, *options) -> tuple[subprocess.Popen, str]:
    """A throwaway redis-server on a free loopback port, keeping its files in `folder`, with
    these options (persistence), once it answers: (process, URL)."""
    if REDIS is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    import redis
    port = free_port()
    proc = subprocess.Popen([REDIS, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                             *options], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)

    def up():
        try:
            return client.ping()
        except redis.ConnectionError:
            return False
    wait_until(up)
    return proc, url


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A throwaway redis-server persisting to an append-only file in a temporary folder."""
    proc, url = start_redis(tmp_path_factory.mktemp("redis"), "--save", "", "--appendonly", "yes")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(params=["file", "redis"])
def config(request, tmp_path):
    """App settings for a store of each backend, fresh for every test."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        RedisStore(url, 1, 0).clear()
        return {"redis_url": url}
    return {"store_dir": str(tmp_path / "store")}


def make_store(config: dict, max_bytes: int, front_bytes: int = 10**6) -> store.SessionQuota:
    if "redis_url" in config:
        return RedisStore(config["redis_url"], max_bytes, front_bytes)
    return file_store.FileStore(config["store_dir"], max_bytes, front_bytes)


def entry_bytes(config, value) -> int:
    """What one entry of this value takes in the store (its pickle and the backend's header)."""
    probe = make_store(config, 10**9)
    probe.set("release:probe:1", value)
    n = probe._usage()
    probe.delete("release:probe:1")
    return n


def test_a_session_past_its_byte_quota_drops_its_own_oldest(config):
    blob = bytes(1000)
    s = make_store(config, max_bytes=4 * 3 * entry_bytes(config, blob))   # a session holds 3
    assert s.set("release:other:1", blob)
    for i in range(10):
        assert s.set(f"release:me:{i}", blob)
    assert [s.get(f"release:me:{i}") is not None for i in range(10)] == [False] * 7 + [True] * 3
    assert s.get("release:other:1") == blob
    assert not s.set("dataset:me:huge", bytes(s.session_bytes))      # bigger than a quota: refused
    assert s.get("release:me:9") == blob                              # and nothing dropped for it


def test_the_store_never_holds_more_than_its_bound(config):
    s = make_store(config, max_bytes=40_000)
    stored = [i for i in range(100) if s.set(f"release:s{i}:1", bytes(2000))]
    assert 0 < len(stored) < 100 and s._usage() <= s.max_bytes
    assert all(s.get(f"release:s{i}:1") is not None for i in stored)   # refused, not evicted


def test_the_front_cache_is_bounded_and_never_serves_a_changed_entry(config):
    one, other = make_store(config, 10**7, front_bytes=5000), make_store(config, 10**7)
    for i in range(10):
        one.set(f"release:a:{i}", bytes(1000))
    assert one.front.used <= 5000 and len(one.front._items) < 10
    first = one.get("release:a:9")
    assert one.get("release:a:9") is first                    # a copy kept, not unpickled again
    other.set("release:a:9", b"changed")                      # another process replaces it
    assert one.get("release:a:9") == b"changed"
    other.delete("release:a:9")
    assert one.get("release:a:9") is None


def test_a_dataset_is_read_memory_mapped_by_another_process(tmp_path):
    data = dp.PointData(np.linspace(0, 1, 300_000), np.linspace(1, 2, 300_000), name="big.csv")
    file_store.FileStore(tmp_path, 10**9, 10**9).set("dataset:me:big", data)
    other = file_store.FileStore(tmp_path, 10**9, 10**9).get("dataset:me:big")   # another worker
    assert other.fingerprint == data.fingerprint and np.array_equal(other.x, data.x)
    assert not other.x.flags.writeable and not other.x.flags.owndata      # a view of the map
    rel = dp.release("ug", other, dp.Domain(0, 1, 1, 2), epsilon=1.0, seed=1)
    assert rel.counts.sum() > 0


def test_the_front_cache_counts_a_datasets_arrays_not_only_its_pickle(tmp_path):
    """Issue 41, item 10: a dataset's arrays are stored apart and memory-mapped; the front cache
    counted only the small pickle beside them (about 400 bytes for 8 MB of points), so
    --memory-mb never bounded what it held, nor let a dropped file's pages go. Counted in full,
    a dataset larger than the front cache is not kept in it, and smaller ones fill it."""
    data = dp.PointData(np.linspace(0, 1, 500_000), np.linspace(1, 2, 500_000), name="big.csv")  # 8 MB
    one = file_store.FileStore(tmp_path, 10**9, 5_000_000)
    assert one.set("dataset:me:big", data)
    other = file_store.FileStore(tmp_path, 10**9, 5_000_000)                     # another worker
    assert other.get("dataset:me:big").fingerprint == data.fingerprint
    for cache in (one.front, other.front):
        assert "dataset:me:big" not in cache._items and cache.used == 0
    small = dp.PointData(np.linspace(0, 1, 100_000), np.linspace(1, 2, 100_000))          # 1.6 MB
    assert other.set("dataset:me:small", small)
    assert other.front.used >= small.x.nbytes + small.y.nbytes


class _Planted:
    """What an attacker with write access to the folder or to Redis would store: unpickling it
    runs code (here it only sets a mark)."""

    def __reduce__(self):
        return exec, ("import builtins; builtins.PLANTED_RAN = True",)


def test_a_planted_or_moved_entry_is_never_unpickled(config):
    """Issue 41, item 11: store entries were plain pickles, so one planted in the store's folder
    or in Redis ran code in every worker that read it. Entries are sealed by the server's key
    (and their own key): a planted one, or a sealed one moved to another session's key, reads
    as missing, and a store of another key reads nothing of this one's."""
    import builtins
    s = make_store(config, 10**7)
    evil = pickle.dumps(_Planted(), protocol=pickle.HIGHEST_PROTOCOL)
    s._write("workspace:victim:page", (evil, []), None)           # planted by the backend's writer
    assert s.get("workspace:victim:page") is None
    assert not hasattr(builtins, "PLANTED_RAN")
    s.set("release:mine:1", {"counts": [1, 2]})
    sealed, _ = s._dumps("release:mine:1", {"counts": [1, 2]})
    s._write("release:victim:1", sealed, None)                    # a sealed entry, moved
    assert s.get("release:victim:1") is None and s.get("release:mine:1") == {"counts": [1, 2]}
    other_key = (RedisStore(config["redis_url"], 10**7, 0, key=b"k" * 32) if "redis_url" in config
                 else file_store.FileStore(config["store_dir"], 10**7, 0, key=b"k" * 32))
    assert other_key.get("release:mine:1") is None


def _second_worker(config, sid, commands, replies):
    """Another worker process: it uploads, starts a job and an interactive object, then answers."""
    from app import create_app
    from server import live, state
    create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", **config})
    data = dp.PointData([-0.12, -0.10, -0.11], [51.50, 51.51, 51.52], name="mine.csv")
    info = state.put_upload(sid, data)

    def job(progress, should_stop):
        step = 0
        while not should_stop():
            step += 1
            progress(step, 10**6)
            time.sleep(0.02)
        return step
    replies.put((info["fingerprint"], services.current().jobs.start(job, owner=sid), live.put_live(sid, {"asked": 0})))
    while (command := commands.get(timeout=120)) != "exit":
        with live.live(sid, command) as obj:
            replies.put(dict(obj))


@pytest.mark.slow          # worker processes: the quick suite leaves it to the full one
def test_state_crosses_worker_processes(config, tmp_path):
    from app import create_app
    from server import live, state
    config = {**config, "accounts_dir": str(tmp_path / "accounts")}   # the server's key, shared
    create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", **config})
    sid, stranger = new_sid(), new_sid()
    ctx = multiprocessing.get_context("spawn")
    commands, replies = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=_second_worker, args=(config, sid, commands, replies))
    worker.start()
    try:
        fp, job, token = replies.get(timeout=120)
        assert state.points(sid, fp).n == 3                       # its upload, read here
        with pytest.raises(LookupError):
            state.points(stranger, fp)
        wait_until(lambda: (services.current().jobs.status(job, sid) or {}).get("done", 0) > 0)
        assert not services.current().jobs.status(job, sid)["finished"] and services.current().jobs.status(job, stranger) is None
        services.current().jobs.cancel(job, sid)                                     # cancelled from this process
        wait_until(lambda: services.current().jobs.status(job, sid)["finished"])
        st = services.current().jobs.status(job, sid)
        assert st["finished"] and st["cancelled"] and st["result"] >= 1
        with live.live(sid, token) as obj:                       # its live object, changed here
            obj["asked"] += 1
        with pytest.raises(LookupError):
            with live.live(stranger, token):
                pass
        commands.put(token)
        assert replies.get(timeout=60) == {"asked": 1}            # and seen there
    finally:
        commands.put("exit")
        worker.join(timeout=60)
        if worker.is_alive():
            worker.terminate()
    assert worker.exitcode == 0


@pytest.mark.slow          # worker processes: the quick suite leaves it to the full one
def test_releases_and_map_layers_are_built_in_a_heavy_pool_process(config, tmp_path):
    from app import create_app
    from components import map_panel
    from server import heavy, releases, state
    create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "heavy_workers": 1,
                "accounts_dir": str(tmp_path / "accounts"), **config})
    try:
        sid = new_sid()
        assert state.heavy_call(os.getpid) != os.getpid()           # another process
        info = state.use_sample(sid, "small_city_5k")
        domain = dp.load_sample("small_city_5k")[1]
        key = releases.release_key(info["fingerprint"], domain, "ug", {}, [0.05, 0.95], 0.5, None)
        rel = releases.release(sid, key, create=True)                  # charged there, stored, read here
        assert releases.release(sid, key) is rel and rel.private
        assert state.account(sid, info["fingerprint"]).spent == pytest.approx(0.5)
        children, _, _, box = state.heavy_call(map_panel.layers, sid, key, "private", None, None, 0, [], [])
        assert children and box == rel.domain
        with pytest.raises(LookupError):                            # another session: nothing
            state.heavy_call(map_panel.layers, new_sid(), key, "private", None, None, 0, [], [])
    finally:
        services.current().heavy.shutdown()


def _where(progress, should_stop):
    """A job that says which process ran it, at what OS priority."""
    progress(1, 1)
    return os.getpid(), os.getpriority(os.PRIO_PROCESS, 0)


@pytest.mark.slow          # worker processes: the quick suite leaves it to the full one
def test_a_visitors_job_runs_in_the_background_lane_an_owners_in_its_worker(config, tmp_path):
    """Visitors' evaluations and plans run in processes at the lowest priority (six of them,
    in the worker's threads, slowed an owner's release from 0.05 s to 50 s); the owner's run
    in the worker as before."""
    from app import create_app
    from server import heavy
    create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "heavy_workers": 1,
                "accounts_dir": str(tmp_path / "accounts"), **config})
    try:
        sid, here = new_sid(), (os.getpid(), os.getpriority(os.PRIO_PROCESS, 0))
        results = []
        for owner in (False, True):
            with sessions.acting(owner):
                job = services.current().jobs.start(_where, owner=sid)
            wait_until(lambda: services.current().jobs.status(job, sid)["finished"], timeout=120)
            st = services.current().jobs.status(job, sid)
            assert st["error"] is None and st["done"] == 1
            results.append(tuple(st["result"]))
        visitor, owner = results
        assert owner == here
        assert visitor[0] != os.getpid() and visitor[1] == min(here[1] + heavy.NICE[heavy.BACKGROUND], 19)
    finally:
        services.current().heavy.shutdown()


_held = threading.Event()


def _hold(progress, should_stop):
    """A job that runs until the test lets it go."""
    _held.wait(60)
    progress(1, 1)
    return "held"


def test_an_owners_job_never_waits_behind_visitors_and_visitors_jobs_are_bounded(tmp_path):
    """The audit's item 4: the owner's count of its server data waited behind visitors'
    evaluations in one first-in-first-out pool. Visitors' jobs fill their pool (and queue
    behind it) while the owner's job runs at once in its own; one session may hold at most
    SESSION_JOBS jobs, all visitors VISITOR_JOBS, more are refused in words; a cancelled queued
    job no longer counts."""
    from app import create_app
    from server import jobs
    create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "eval_workers": 1,
                "accounts_dir": str(tmp_path / "accounts"), "store_dir": str(tmp_path / "store")})
    _held.clear()
    try:
        sids = [new_sid() for _ in range(jobs.VISITOR_JOBS // jobs.SESSION_JOBS)]
        with sessions.acting(False):
            held = [(services.current().jobs.start(_hold, owner=sid), sid) for sid in sids for _ in range(jobs.SESSION_JOBS)]
            with pytest.raises(LookupError, match=re.escape(jobs.BUSY)):
                services.current().jobs.start(_hold, owner=new_sid())                      # all visitors' bound
        me = new_sid()
        with sessions.acting(True):
            mine = services.current().jobs.start(_where, owner=me)
        wait_until(lambda: services.current().jobs.status(mine, me)["finished"], timeout=30)
        assert services.current().jobs.status(mine, me)["error"] is None
        assert sum(services.current().jobs.status(j, sid)["queued"] for j, sid in held) == len(held) - 1   # one runs
        with sessions.acting(False):
            services.current().jobs.cancel(*held[1])                                        # the first session's queued one
            with pytest.raises(LookupError, match=re.escape(jobs.BUSY)):
                services.current().jobs.start(_hold, owner=sids[1])                         # one session's bound
            services.current().jobs.start(_hold, owner=sids[0])                             # room again for the first
    finally:
        _held.set()
        services.current().jobs.stop_all()


def _which_store(progress, should_stop):
    """A job that says which store its services have (the folder behind it)."""
    progress(1, 1)
    return str(services.current().store._root)


@pytest.mark.slow          # two apps: the quick suite leaves it to the full one
def test_a_job_runs_with_the_services_of_the_app_that_started_it(tmp_path):
    """Services live on their Flask app: a job started in a request of one app keeps using that
    app's store after another app was made in the same process (whose services a thread outside
    any request would otherwise find)."""
    from app import create_app
    first, second = ({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "store_dir": str(tmp_path / name)}
                     for name in ("first", "second"))
    app = create_app(first)
    sid = new_sid()
    with app.server.test_request_context("/"), sessions.acting(True):
        create_app(second)                         # made while the first one serves
        job = services.current().jobs.start(_which_store, owner=sid)
        wait_until(lambda: (services.current().jobs.status(job, sid) or {}).get("finished"), timeout=30)
        assert services.current().jobs.status(job, sid)["result"] == first["store_dir"]
    assert services.current().store._root == tmp_path / "second"     # outside any request: the last made


def test_every_mechanisms_release_goes_through_the_store(tmp_path):
    from server import state  # noqa: F401  (registers how releases' specs pickle)
    points, regions = dp.load_sample("small_city_5k"), dp.load_region_sample("home_ranges_3k")
    one, other = file_store.FileStore(tmp_path, 10**9, 10**9), file_store.FileStore(tmp_path, 10**9, 0)
    for name, spec in dp.mechanisms().items():
        data, domain = regions if spec.data_kind == "regions" else points
        rel = dp.release(name, data, domain, epsilon=1.0, seed=1)
        assert one.set(f"release:me:{name}", rel), name
        back = other.get(f"release:me:{name}")               # unpickled by another worker
        rect = dp.Rect(*domain.bounds)
        assert back.spec is rel.spec and back.answer(rect) == rel.answer(rect), name


def test_visitors_filling_the_store_leave_the_owners_share(config):
    """All visitors together hold at most VISITOR_SHARE of the store: an owner link's session
    (`store.RESERVED`) still stores its data when they have filled their part (the audit's 25
    visitor cookies filled 1 GiB and locked the owner out for 4 hours)."""
    blob = bytes(900)
    entry = entry_bytes(config, blob)
    small = make_store(config, 8 * entry)
    visitors = 0
    while small.set(f"dataset:{new_sid()}-{visitors}:1", blob):
        visitors += 1
    assert visitors == int(8 * store.VISITOR_SHARE)                 # refused at their share
    owner = store.RESERVED + new_sid()
    assert small.room_for(owner, entry)
    assert small.set(f"serverdata:{owner}:1", blob) and small.set(f"workspace:{owner}:page", blob)
    assert small._usage(visitors=True) == visitors * entry and small._usage() == (visitors + 2) * entry


def test_a_redis_that_evicts_entries_is_refused_and_one_that_hides_its_settings_is_warned_of(tmp_path, caplog):
    """A Redis at its maxmemory with an evicting policy would drop paid releases whose charges
    stay; one whose CONFIG is disabled cannot be checked, which the server says in its log."""
    import redis
    proc, url = start_redis(tmp_path, "--appendonly", "yes", "--maxmemory", "100mb",
                            "--maxmemory-policy", "allkeys-lru")
    try:
        with pytest.raises(ValueError, match=r"maxmemory-policy allkeys-lru\): it would drop paid releases"):
            RedisStore(url, 10**6, 0)
        redis.Redis.from_url(url).config_set("maxmemory-policy", "noeviction")
        assert RedisStore(url, 10**6, 0).eviction() == "noeviction"
    finally:
        proc.kill()
        proc.wait(timeout=10)
    (tmp_path / "hidden").mkdir()
    proc, url = start_redis(tmp_path / "hidden", "--appendonly", "yes", "--rename-command", "CONFIG", "")
    try:
        with caplog.at_level("WARNING", logger="server.store"):
            hidden = RedisStore(url, 10**6, 0)
        assert hidden.persists() is None and hidden.eviction() is None
        assert "cannot check that it keeps its data" in caplog.text
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_redis_that_keeps_nothing_across_a_restart_is_refused_in_words(tmp_path):
    """Paid releases live in the store and charges in the accounts: a Redis without persistence
    would lose the first on a restart and keep the second, silently."""
    import redis
    proc, url = start_redis(tmp_path, "--save", "", "--appendonly", "no")
    try:
        with pytest.raises(ValueError, match="keeps nothing across a restart"):
            RedisStore(url, 10**6, 0)
        redis.Redis.from_url(url).config_set("save", "3600 1")      # snapshots will do
        assert RedisStore(url, 10**6, 0).persists()
    finally:
        proc.kill()
        proc.wait(timeout=10)
