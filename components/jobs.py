"""Background jobs for long evaluations: a thread per job, progress polled by the page.

A job lives in this process's memory and belongs to the browser session that started it: any
other session asking for it gets nothing, as if it did not exist. Finished results also go to
the owner's cache so the same evaluation on the same data is served instantly next time.
"""
from __future__ import annotations

import threading
import uuid

_jobs: dict[str, dict] = {}
_lock = threading.Lock()


def start(fn, owner: str, **kwargs) -> str:
    """Run fn(progress=..., should_stop=..., **kwargs) in a thread for `owner`; returns the job id."""
    job_id = uuid.uuid4().hex
    job = {"owner": owner, "done": 0, "total": 1, "finished": False, "cancelled": False, "result": None, "error": None}
    with _lock:
        _jobs[job_id] = job

    def progress(done, total):
        job["done"], job["total"] = done, total

    def run():
        try:
            job["result"] = fn(progress=progress, should_stop=lambda: job["cancelled"], **kwargs)
        except Exception as exc:   # reported to the page; the app keeps running
            job["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            job["finished"] = True

    threading.Thread(target=run, daemon=True, name=f"job-{job_id[:8]}").start()
    return job_id


def status(job_id: str | None, owner: str) -> dict | None:
    """The job's progress and result, or None if there is no such job for this owner."""
    job = _jobs.get(job_id) if job_id else None
    return job if job is not None and job["owner"] == owner else None


def cancel(job_id: str | None, owner: str):
    job = status(job_id, owner)
    if job:
        job["cancelled"] = True


def forget(job_id: str, owner: str):
    with _lock:
        if status(job_id, owner) is not None:
            _jobs.pop(job_id, None)
