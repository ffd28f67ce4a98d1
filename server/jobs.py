"""Background jobs (evaluations, plans, counts of server files, releases): bounded pools of
worker threads, progress polled by the page.

The owner's jobs and visitors' jobs have pools of their own, so an owner's job never waits
behind visitors': at most `max_workers` of each run at once in each process (the app's
`eval_workers` setting, 2 by default); a job waiting for a free worker reports itself as queued,
and the page says so. Visitors may hold at most VISITOR_JOBS jobs of one kind (queued or
running) in a process, and one session at most SESSION_JOBS of one kind; more are refused in
words. An owner's job runs in a thread of the worker process that got its start request; a
visitor's is handed from there to the background lane of `server.heavy` (processes at the lowest
priority), so visitors' evaluations never take the CPU from the owner's releases or anyone's
page. A quick job (a release) runs in a thread for either role: its heavy part goes to its
role's lane by itself. A job's state (queued, progress, result, a cancellation request) is an
entry of the shared store, so any process can run, report or cancel it. `Jobs` holds one
process's threads (kept in the server's services).

A job belongs to the browser session that started it: its key names the session, so any other
session asking for it gets nothing, as if it did not exist. Finished results also go to the
owner's cache so the same evaluation on the same data is served instantly next time.
"""
from __future__ import annotations

import os
import pickle
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import nullcontext

import flask

from . import heavy, services, sessions, state
from .faults import Unavailable

DEFAULT_WORKERS = 2
QUICK_WORKERS = 4             # threads per role for quick jobs (releases), which mostly wait on `heavy`
VISITOR_JOBS = 8              # visitors' jobs of one kind queued or running in one process, at most
VISITOR_QUICK_JOBS = 32       # the same for a quick kind (releases: tens of milliseconds each)
SESSION_JOBS = 2              # one session's of one kind, at most
BUSY = ("the server is doing as much of this for visitors as it can; try again when one of "
        "yours (or someone else's) has finished")
PROGRESS_EVERY = 0.5          # seconds between progress writes (and cancellation checks) of a job
LOST = ("the server process running it stopped before it finished (the server was restarted or "
        "a worker replaced): reload the page to see what it kept (a release charged before it "
        "stopped is shown then; the budget ledger lists every charge) before running it again")
UNKEPT = ("it ran, but the server could not keep its result (its store is full or failing): reload "
          "the page to see what it kept (the budget ledger lists every charge)")

def _key(job_id: str, owner: str) -> str:
    return f"job:{owner}:{job_id}"


def _update(key: str, **changes) -> dict | None:
    """Change a job's stored state under its lock (any process); None if it was forgotten."""
    store = services.current().store
    with store.lock(key):
        job = store.get(key)
        if job is not None:
            job = {**job, **changes}
            store.set(key, job)
        return job


class Jobs:
    """One process's job threads: a pool per role and kind of job (an evaluation, a plan, a
    count: one never waits behind another kind) of `max_workers` threads each, made on its first
    job, and the jobs this process started (their futures), for the bounds and stops."""

    def __init__(self, max_workers: int = DEFAULT_WORKERS):
        if int(max_workers) < 1:
            raise ValueError(f"evaluation workers must be at least 1, got {max_workers!r}")
        self.workers = int(max_workers)
        self._local: dict[str, tuple] = {}    # job id -> (its future, its store key, owner role, session, kind)
        self._lock = threading.Lock()
        self._pools: dict[tuple, ThreadPoolExecutor] = {}   # per (role (owner: True), kind)
        self.stopping = threading.Event()

    def _executor(self, role: bool, kind: str, quick: bool) -> ThreadPoolExecutor:
        """The pool of the owner's (`role` True) or visitors' jobs of this kind, of QUICK_WORKERS
        threads at least for a quick kind (call with _lock held)."""
        if (role, kind) not in self._pools:
            self._pools[role, kind] = ThreadPoolExecutor(
                max_workers=max(self.workers, QUICK_WORKERS) if quick else self.workers,
                thread_name_prefix=f"{'owner' if role else 'visitor'}-{kind}")
        return self._pools[role, kind]

    def _refuse_visitor(self, owner: str, kind: str, quick: bool) -> None:
        """LookupError (BUSY) when visitors hold VISITOR_JOBS jobs of this kind here
        (VISITOR_QUICK_JOBS of a quick one), or this session SESSION_JOBS (call with _lock held):
        a visitor's release never waits for room behind its evaluations."""
        theirs = [sid for _f, _k, role, sid, of in self._local.values() if not role and of == kind]
        if len(theirs) >= (VISITOR_QUICK_JOBS if quick else VISITOR_JOBS) or theirs.count(owner) >= SESSION_JOBS:
            raise LookupError(BUSY)

    def start(self, fn, owner: str, job_id: str | None = None, kind: str = "job", quick: bool = False,
              **kwargs) -> str:
        """Queue fn(progress=..., should_stop=..., **kwargs) in its role's pool of its `kind` for
        `owner` (the session), as `job_id` (a new one by default); returns the job id. A `quick`
        job (a release: its heavy part goes to its role's lane of `server.heavy` by itself) runs
        in a thread for visitors too, not in the background lane. LookupError (state.FULL) if the
        store has no room for the job's state, (BUSY) if visitors' jobs are at their bound."""
        job_id = job_id or uuid.uuid4().hex
        key = _key(job_id, owner)
        role = sessions.is_owner()              # the job runs with the role of the request that started it
        found = services.current()
        if not found.store.set(key, {"queued": True, "done": 0, "total": 1, "progress": None,
                                     "finished": False, "cancelled": False, "result": None,
                                     "error": None, "raised": None, "worker": this_process()}):
            raise LookupError(state.FULL)

        app = flask.current_app._get_current_object() if flask.has_app_context() else None

        def run():      # in the app context of the request that started it: its services
            with app.app_context() if app is not None else nullcontext():
                try:
                    if role or quick:
                        _work(key, role, owner, fn, kwargs)
                    else:      # a visitor's: in the background lane, after everyone's releases
                        found.heavy.run(_work, key, role, owner, fn, kwargs, lane=heavy.BACKGROUND,
                                        idempotent=True)
                except Exception as exc:   # the lane's process died twice: reported to the page
                    _update(key, error=f"{type(exc).__name__}: {exc}", raised=_keepable(exc), finished=True)
                finally:
                    with self._lock:
                        self._local.pop(job_id, None)

        with self._lock:
            if not role:
                try:
                    self._refuse_visitor(owner, kind, quick)
                except LookupError:
                    found.store.delete(key)
                    raise
            self._local[job_id] = (self._executor(role, kind, quick).submit(run), key, role, owner, kind)
        return job_id

    def status(self, job_id: str | None, owner: str) -> dict | None:
        """The job's progress and result, or None if there is no such job for this owner. A job
        whose worker process is gone (killed, restarted) is finished then, with LOST as its error."""
        if not job_id:
            return None
        key, store = _key(job_id, owner), services.current().store
        job = store.get(key)
        if job is not None and not job["finished"] and gone(job.get("worker")):
            job = _update(key, finished=True, error=LOST, raised=LookupError(LOST))
        return job

    def cancel(self, job_id: str | None, owner: str):
        """Ask a running job to stop after its current step; a queued one never starts. Works
        from any process: the flag is in the store; a job still queued is marked finished at once."""
        if not job_id:
            return
        key, store = _key(job_id, owner), services.current().store
        with store.lock(key):
            job = store.get(key)
            if job is None or job["finished"]:
                return
            job = {**job, "cancelled": True}
            if job["queued"]:
                job["queued"], job["finished"] = False, True
            store.set(key, job)
        with self._lock:
            local = self._local.get(job_id)
            if local is not None and local[0].cancel():   # never started: it no longer counts
                self._local.pop(job_id)

    def forget(self, job_id: str, owner: str):
        if job_id:
            services.current().store.delete(_key(job_id, owner))

    def cancel_all(self) -> None:
        """Stop this process's jobs (the server is shutting down): running ones stop after their
        current step, so the process does not wait for long evaluations to finish before it exits."""
        self.stopping.set()
        with self._lock:
            running = list(self._local.values())
        for future, key, *_ in running:
            future.cancel()
            try:                       # a visitor's job in a background process reads this flag
                _update(key, cancelled=True)
            except Unavailable:        # the store is gone already: its process ends with this one
                pass

    def stop_all(self, timeout: float = 120.0) -> None:
        """Stop this process's jobs (`cancel_all`), wait until they have ended (at most `timeout`
        s), then take new ones again: a test that traces memory process-wide must not start or
        stop tracing while a job thread allocates (CPython 3.11's tracemalloc can crash then)."""
        self.cancel_all()
        with self._lock:
            futures = [entry[0] for entry in self._local.values()]
        wait(futures, timeout=timeout)
        self.stopping.clear()


class _Progress:
    """A job's progress written to its store entry, and its cancellation read from there (at
    most every PROGRESS_EVERY seconds), so any process can run the job and any can report it.
    Called as progress(done, total); `show(value)` keeps a value for the page to show."""

    def __init__(self, key: str):
        self.key, self.wrote, self.read, self.stop = key, 0.0, 0.0, False

    def __call__(self, done, total):
        if time.monotonic() - self.wrote >= PROGRESS_EVERY or done >= total:
            self.wrote = self.read = time.monotonic()
            job = _update(self.key, done=done, total=total)
            self.stop = job is None or job["cancelled"]

    def show(self, value) -> None:
        """Keep `value` (what the page shows of the job's progress) in the job's state, at most
        every PROGRESS_EVERY seconds (the page polls about as often)."""
        if time.monotonic() - self.wrote >= PROGRESS_EVERY:
            self.wrote = self.read = time.monotonic()
            job = _update(self.key, progress=value)
            self.stop = job is None or job["cancelled"]

    def should_stop(self, fresh: bool = False) -> bool:
        """True once the job was cancelled (or the server is stopping): read from the store at
        most every PROGRESS_EVERY seconds, or now if `fresh` (before a step that cannot be undone)."""
        if fresh or time.monotonic() - self.read >= PROGRESS_EVERY:
            self.read = time.monotonic()
            job = services.current().store.get(self.key)
            self.stop = job is None or job["cancelled"]
        return self.stop or services.current().jobs.stopping.is_set()


def this_process() -> tuple:
    """(host, boot, process id namespace, process id, its start time): which worker runs a job,
    told apart from a later process that got the same id, and from containers sharing a host
    name (each its own namespace of process ids)."""
    return (*_machine(), os.getpid(), _started(os.getpid()))


def _machine() -> tuple:
    """(host name, this boot's id, this process's namespace of process ids): where a process id
    names the same process."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        boot = namespace = None
    return socket.gethostname(), boot, namespace


def _started(pid: int) -> str | None:
    """When process `pid` started (Linux's clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def gone(worker) -> bool:
    """True when the worker process that ran a job, on this machine and in this namespace of
    process ids, no longer exists (a job elsewhere is taken to be alive: only there can one tell)."""
    if not worker or len(worker) != 5 or None in worker[:3]:
        return False
    *where, pid, started = worker
    return tuple(where) == _machine() and _started(pid) != started


def _keepable(exc: Exception) -> Exception | None:
    """The exception itself if the store can keep it (it pickles), else None (its text is kept)."""
    try:
        pickle.loads(pickle.dumps(exc))      # some exceptions pickle but cannot be read back
    except Exception:
        return None
    return exc


def _work(key: str, role: bool, sid: str, fn, kwargs: dict) -> None:
    """Run a queued job with the role and session of the request that started it (in a job
    thread, or a process of the background lane), its result or error written to its store entry."""
    job = _update(key, queued=False)
    if job is None or job["cancelled"]:       # forgotten or cancelled while it waited
        _update(key, finished=True)
        return
    result = error = raised = None
    p = _Progress(key)
    try:
        with sessions.acting(role, sid):
            result = fn(progress=p, should_stop=p.should_stop, **kwargs)
    except Exception as exc:   # reported to the page; the app keeps running
        error, raised = f"{type(exc).__name__}: {exc}", _keepable(exc)
    finally:
        if not _finish(key, result=result, error=error, raised=raised):     # no room for its result
            _finish(key, result=None, error=UNKEPT, raised=LookupError(UNKEPT))


def _finish(key: str, **changes) -> bool:
    """Write a job's end to its store entry; False if the store refused it (no room)."""
    store = services.current().store
    with store.lock(key):
        job = store.get(key)
        return job is None or bool(store.set(key, {**job, **changes, "finished": True}))
