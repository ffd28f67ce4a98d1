"""Bounded pools of processes for heavy work (building releases, parsing uploads), so cheap
callbacks stay fast and visitors' work never holds up the owner's.

A request that builds a release hands it to one of `max_workers` processes of its worker's own
pool (`HeavyPools`, kept in the server's services) and waits; the worker's request threads stay free for cheap callbacks (answering a
rectangle on a cached release), and the heavy processes, at a lower OS priority (nice), cannot
hold the request threads' interpreter lock or get the CPU before them. There is one pool per
lane: the owner's work never queues behind visitors' (a dozen visitor uploads held an owner's
release for 42 s in one shared queue), visitors' long background jobs (evaluations, plans)
never queue beside their releases, and the CPU goes to the owner's processes first, then to
visitors' releases, then to visitors' background jobs (`NICE`). The pool processes reach the same shared store and budget
accounts as the workers (their `initializer`). With 0 workers heavy work runs in the calling
thread (one process: tests, the Python API, the dev server). A pool whose process died is
replaced at once, and a pool process ends when its worker does.
"""
from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

DEFAULT_WORKERS = 0
OWNER, VISITOR, BACKGROUND = "owner", "visitor", "background"     # the lanes
NICE = {OWNER: 5, VISITOR: 10, BACKGROUND: 15}    # their OS priorities (higher: the CPU comes later)


def lane_of(owner: bool) -> str:
    """The lane of a request's releases, map layers and uploads: the owner's or visitors'."""
    return OWNER if owner else VISITOR


PARENT_CHECK = 0.5        # seconds between a pool process's checks that its worker is alive


def _start(parent, initializer, initargs):
    """A pool process (already at its lane's priority, `_LaneProcess`): a watch on its worker (the
    process `parent` that made the pool: when a process starts slowly, its worker may be gone
    already, and asking for its parent now would name the process that inherited it), then
    the caller's set-up."""
    threading.Thread(target=_end_with_parent, args=(parent,), daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


def _end_with_parent(parent: int) -> None:
    """End this pool process when the worker that made it is gone (killed, even by SIGKILL,
    which runs no clean-up): its parent then changes, and nobody would collect its results."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK)
    os._exit(1)


class _LaneProcess(multiprocessing.context.SpawnProcess):
    """A spawned pool process that takes its lane's priority (`nice`, absolute) as soon as it
    exists: it then imports the app for a second or more, and at the worker's own priority that
    took the CPU from the owner's releases while visitors' first evaluations started their pool
    (`benchmarks/owner_priority.py`)."""

    nice = 0

    def start(self):
        super().start()
        try:
            os.setpriority(os.PRIO_PROCESS, self.pid, self.nice)
        except OSError:     # ended already (its pool finds it broken), or not allowed here: it
            pass            # then runs at the worker's priority rather than not at all


class _SpawnAt(multiprocessing.context.SpawnContext):
    """The "spawn" context, its processes at priority `nice`."""

    def __init__(self, nice: int):
        super().__init__()
        self.nice = nice

    def Process(self, *args, **kwargs):     # what ProcessPoolExecutor calls to make one
        process = _LaneProcess(*args, **kwargs)
        process.nice = self.nice
        return process


BROKEN = ("a process building releases on the server stopped before it finished; a new one has "
          "been started, so try again")


class Broken(LookupError):
    """The pool process running a task died (killed, out of memory); the pool was replaced."""


class HeavyPools:
    """One process's pools, one per lane, each of `max_workers` processes made on first use
    (never before a fork), set up by initializer(*initargs); 0 workers: heavy work runs in the
    calling thread."""

    def __init__(self, max_workers: int = DEFAULT_WORKERS, initializer=None, initargs=()):
        if int(max_workers) < 0:
            raise ValueError(f"heavy workers must be 0 or more, got {max_workers!r}")
        self.workers, self._setup = int(max_workers), (initializer, initargs)
        self._lock = threading.Lock()
        self._pools: dict[str, ProcessPoolExecutor] = {}

    def pool(self, lane: str = VISITOR) -> ProcessPoolExecutor | None:
        """This process's pool for one lane, made on first use (None with 0 workers), its
        processes NICE[lane] below this one's priority."""
        with self._lock:
            if self.workers and lane not in self._pools:
                nice = os.getpriority(os.PRIO_PROCESS, 0) + NICE[lane]
                self._pools[lane] = ProcessPoolExecutor(max_workers=self.workers, initializer=_start,
                                                        initargs=(os.getpid(), *self._setup),
                                                        mp_context=_SpawnAt(nice))
            return self._pools.get(lane)

    def lanes(self) -> set[str]:
        """The lanes whose pools this process has started (their work came here)."""
        with self._lock:
            return set(self._pools)

    def warm(self) -> None:
        """Start the owner's and the visitors' pools now, without waiting (a worker just booted):
        the first release then does not wait for them to start."""
        for lane in (OWNER, VISITOR):
            pool = self.pool(lane)
            if pool is not None:
                for _ in range(self.workers):
                    pool.submit(os.getpid)

    def run(self, fn, *args, idempotent: bool = False, lane: str = VISITOR):
        """fn(*args) in a process of the lane's pool (fn and args picklable), or inline with 0
        workers; waits for its result (or its exception). A pool whose process died (killed,
        out of memory) is replaced; an `idempotent` task (one that charges nothing) is then run
        once more in the new pool, any other is refused with Broken(BROKEN): it may have charged
        a budget before it died, and only its caller can tell (see `server.releases.release`)."""
        for attempt in (1, 2):
            pool = self.pool(lane)
            if pool is None:
                return fn(*args)
            try:
                return pool.submit(fn, *args).result()
            except BrokenProcessPool:
                self._discard(pool)
                if not idempotent or attempt == 2:
                    raise Broken(BROKEN) from None

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        """Forget a broken pool (the next call makes a new one) and let its processes go."""
        with self._lock:
            for lane in [k for k, v in self._pools.items() if v is pool]:
                del self._pools[lane]
        pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Let the pools finish their running tasks and go (new ones are made when needed). It
        waits for the pools' processes to end: a worker leaves none behind, and Python's own
        exit hook does not then wake a pool whose pipe is already closed (a traceback at every
        exit)."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)
