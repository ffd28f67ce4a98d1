"""Background jobs for long evaluations: a bounded pool of worker threads, progress polled by the page.

At most `max_workers` jobs run at once (the app's `eval_workers` setting, 2 by default); a job
waiting for a free worker reports itself as queued, and the page says so. The workers are
threads of this process rather than Dash's background callbacks (DiskcacheManager), because the
session's datasets and releases live in this process's memory until a shared store exists.

A job belongs to the browser session that started it: any other session asking for it gets
nothing, as if it did not exist. Finished results also go to the owner's cache so the same
evaluation on the same data is served instantly next time.
"""
from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

DEFAULT_WORKERS = 2

_jobs: dict[str, dict] = {}
_lock = threading.Lock()
_workers = DEFAULT_WORKERS
_pool: ThreadPoolExecutor | None = None      # made on the first job, with _workers threads


def configure(max_workers: int = DEFAULT_WORKERS) -> None:
    """Set how many jobs run at once; called when an app is made, which gets a pool of its own.
    An earlier pool is shut down: the jobs it already holds still run (or wait) there, new
    ones go to the new pool."""
    global _pool, _workers
    n = int(max_workers)
    if n < 1:
        raise ValueError(f"evaluation workers must be at least 1, got {max_workers!r}")
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False)
            _pool = None
        _workers = n


def _executor() -> ThreadPoolExecutor:
    """The pool (call with _lock held)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_workers, thread_name_prefix="eval-job")
    return _pool


def start(fn, owner: str, **kwargs) -> str:
    """Queue fn(progress=..., should_stop=..., **kwargs) in the pool for `owner`; returns the job id."""
    job_id = uuid.uuid4().hex
    job = {"owner": owner, "queued": True, "done": 0, "total": 1, "finished": False,
           "cancelled": False, "result": None, "error": None, "future": None}

    def progress(done, total):
        job["done"], job["total"] = done, total

    def run():
        job["queued"] = False
        try:
            if not job["cancelled"]:          # cancelled just as a worker picked it up
                job["result"] = fn(progress=progress, should_stop=lambda: job["cancelled"], **kwargs)
        except Exception as exc:   # reported to the page; the app keeps running
            job["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            job["finished"] = True

    with _lock:
        _jobs[job_id] = job
        job["future"] = _executor().submit(run)
    return job_id


def status(job_id: str | None, owner: str) -> dict | None:
    """The job's progress and result, or None if there is no such job for this owner."""
    job = _jobs.get(job_id) if job_id else None
    return job if job is not None and job["owner"] == owner else None


def cancel(job_id: str | None, owner: str):
    """Ask a running job to stop after its current step; a queued one never starts."""
    job = status(job_id, owner)
    if job:
        job["cancelled"] = True
        if job["future"].cancel():            # still waiting for a worker
            job["queued"], job["finished"] = False, True


def forget(job_id: str, owner: str):
    with _lock:
        if status(job_id, owner) is not None:
            _jobs.pop(job_id, None)


def cancel_all() -> None:
    """Stop every job (the server is shutting down): running ones stop after their current
    step, so the process does not wait for long evaluations to finish before it exits."""
    with _lock:
        for job in list(_jobs.values()):
            job["cancelled"] = True
            job["future"].cancel()
