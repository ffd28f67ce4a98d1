"""A bounded pool per process for heavy work (building releases), so cheap callbacks stay fast.

A request that builds a release waits here for one of `max_workers` threads; the other request
threads of the worker stay free for cheap callbacks (answering a rectangle on a cached release).
Pool threads run at a lower OS priority (nice), so on a busy machine the CPU goes to the cheap
requests first and the heavy ones take what is left.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

DEFAULT_WORKERS = 1
NICE = 10

_lock = threading.Lock()
_workers = DEFAULT_WORKERS
_pool: ThreadPoolExecutor | None = None      # made on first use, so never before a fork


def lower_priority():
    """Lower this thread's scheduling priority (Linux: a thread has its own nice value)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    except (AttributeError, OSError):      # not Linux, or not allowed: run at normal priority
        pass


def configure(max_workers: int = DEFAULT_WORKERS) -> None:
    """Set how many heavy tasks run at once in this process; an earlier pool finishes its tasks."""
    global _pool, _workers
    if int(max_workers) < 1:
        raise ValueError(f"heavy workers must be at least 1, got {max_workers!r}")
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False)
            _pool = None
        _workers = int(max_workers)


def run(fn, *args, **kwargs):
    """fn(*args, **kwargs) on a pool thread; waits for its result (or its exception)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_workers, thread_name_prefix="heavy",
                                       initializer=lower_priority)
        future = _pool.submit(fn, *args, **kwargs)
    return future.result()
