"""A bounded pool of processes for heavy work (building releases), so cheap callbacks stay fast.

A request that builds a release hands it to one of `max_workers` processes of its worker's own
pool and waits; the worker's request threads stay free for cheap callbacks (answering a
rectangle on a cached release), and the heavy processes, at a lower OS priority (nice), cannot
hold the request threads' interpreter lock or get the CPU before them. The pool processes reach
the same shared store and budget accounts as the workers (their `initializer`). With 0 workers
heavy work runs in the calling thread (one process: tests, the Python API, the dev server).
A pool whose process died is replaced at once, and a pool process ends when its worker does.
"""
from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

DEFAULT_WORKERS = 0
NICE = 10
PARENT_CHECK = 0.5        # seconds between a pool process's checks that its worker is alive

_lock = threading.Lock()
_workers = DEFAULT_WORKERS
_setup: tuple = (None, ())
_pool: ProcessPoolExecutor | None = None      # made on first use, so never before a fork


def _start(parent, initializer, initargs):
    """A pool process: a lower priority than the request threads, a watch on its worker (the
    process `parent` that made the pool: when a process starts slowly, its worker may be gone
    already, and asking for its parent now would name the process that inherited it), then
    the caller's set-up."""
    os.nice(NICE)
    threading.Thread(target=_end_with_parent, args=(parent,), daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


def _end_with_parent(parent: int) -> None:
    """End this pool process when the worker that made it is gone (killed, even by SIGKILL,
    which runs no clean-up): its parent then changes, and nobody would collect its results."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK)
    os._exit(1)


def configure(max_workers: int = DEFAULT_WORKERS, initializer=None, initargs=()) -> None:
    """Set how many heavy tasks run at once in this process's pool, and how a pool process
    sets itself up; an earlier pool finishes the tasks it has."""
    global _workers, _setup
    if int(max_workers) < 0:
        raise ValueError(f"heavy workers must be 0 or more, got {max_workers!r}")
    shutdown()
    with _lock:
        _workers, _setup = int(max_workers), (initializer, initargs)


def shutdown() -> None:
    """Let this process's pool finish its running tasks and go (a new one is made when needed).
    It waits for the pool's processes to end: a worker leaves none behind, and Python's own exit
    hook does not then wake a pool whose pipe is already closed (a traceback at every exit)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=True, cancel_futures=True)
            _pool = None


def _current() -> ProcessPoolExecutor | None:
    """This process's pool, made on first use (None with 0 workers)."""
    global _pool
    with _lock:
        if _workers and _pool is None:
            _pool = ProcessPoolExecutor(max_workers=_workers, initializer=_start,
                                        initargs=(os.getpid(), *_setup),
                                        mp_context=multiprocessing.get_context("spawn"))
        return _pool


def warm() -> None:
    """Start the pool's processes now, without waiting (a worker just booted): the first
    release then does not wait for them to start."""
    pool = _current()
    if pool is not None:
        for _ in range(_workers):
            pool.submit(os.getpid)


BROKEN = ("a process building releases on the server stopped before it finished; a new one has "
          "been started, so try again")


class Broken(LookupError):
    """The pool process running a task died (killed, out of memory); the pool was replaced."""


def run(fn, *args, idempotent: bool = False):
    """fn(*args) in a pool process (fn and args picklable), or inline with 0 workers; waits for
    its result (or its exception). A pool whose process died (killed, out of memory) is
    replaced; an `idempotent` task (one that charges nothing) is then run once more in the new
    pool, any other is refused with Broken(BROKEN): it may have charged a budget before it
    died, and only its caller can tell (see `state.release`)."""
    for attempt in (1, 2):
        pool = _current()
        if pool is None:
            return fn(*args)
        try:
            return pool.submit(fn, *args).result()
        except BrokenProcessPool:
            _discard(pool)
            if not idempotent or attempt == 2:
                raise Broken(BROKEN) from None


def _discard(pool: ProcessPoolExecutor) -> None:
    """Forget a broken pool (the next call makes a new one) and let its processes go."""
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)
