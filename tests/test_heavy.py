"""The pool of processes that builds releases (`server.heavy`): a pool whose process was killed
heals, the call it broke is refused in words (never retried, it may have charged) unless it is
idempotent (then run again in the new process), and a pool process ends with its worker."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import wait_until
from server import heavy


@pytest.fixture
def pools():
    made = heavy.HeavyPools(1)
    yield made
    made.shutdown()


def test_a_killed_pool_process_is_replaced_and_its_call_refused_in_words(pools):
    first = pools.run(os.getpid)
    assert first != os.getpid()
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not _alive(first), timeout=30)
    with pytest.raises(LookupError, match="stopped before it finished"):
        pools.run(os.getpid)
    second = pools.run(os.getpid)                 # healed: a new process answers
    assert second not in (first, os.getpid())
    assert pools.run(os.getpid) == second


def test_the_owners_work_never_waits_behind_visitors(pools, tmp_path):
    """The owner's tasks have a pool of their own, at a higher OS priority than visitors'
    releases, which come before visitors' background jobs: an owner's release does not queue
    behind a visitor's long task (one shared queue held it for 42 s)."""
    import threading
    release = tmp_path / "go"
    busy = threading.Thread(target=pools.run, args=(_wait_for, str(release)))   # a visitor's long task
    busy.start()
    owner_pid = pools.run(os.getpid, lane=heavy.OWNER)
    assert busy.is_alive()              # answered while the visitor's task waits (until told to end)
    release.touch()
    busy.join()
    assert owner_pid not in (pools.run(os.getpid), os.getpid())
    niceness = [pools.run(os.getpriority, os.PRIO_PROCESS, 0, lane=lane)
                for lane in (heavy.OWNER, heavy.VISITOR, heavy.BACKGROUND)]
    base = os.getpriority(os.PRIO_PROCESS, 0)          # the kernel keeps nice at most 19
    assert niceness == [min(base + heavy.NICE[lane], 19) for lane in (heavy.OWNER, heavy.VISITOR, heavy.BACKGROUND)]
    assert heavy.NICE[heavy.OWNER] < heavy.NICE[heavy.VISITOR] < heavy.NICE[heavy.BACKGROUND]


# in a pool process, its priority when it first imports this module: while unpickling its set-up,
# before any task (imports there take a second or more of CPU)
PRIORITY_AT_IMPORT = os.getpriority(os.PRIO_PROCESS, 0)


def _set_up() -> None:
    """A pool process's set-up from this module, so the process imports it as it starts."""


def _priority_at_import() -> int:
    return PRIORITY_AT_IMPORT


def test_a_pool_process_is_at_its_lanes_priority_before_it_imports_anything():
    # a process started at the worker's priority and lowered only in its set-up spent its
    # imports there: the background pool's start, while visitors' evaluations began, held the
    # owner's releases up to 3.8 s (`benchmarks/owner_priority.py`)
    pools = heavy.HeavyPools(1, initializer=_set_up)
    try:
        base = os.getpriority(os.PRIO_PROCESS, 0)
        assert [pools.run(_priority_at_import, lane=lane) for lane in heavy.NICE] == \
            [min(base + heavy.NICE[lane], 19) for lane in heavy.NICE]
    finally:
        pools.shutdown()


def _wait_for(path: str) -> None:
    """Block until `path` exists (at most two minutes): a task that ends when the test says."""
    end = time.monotonic() + 120
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.05)


def _kill_self_once(marker: str) -> int:
    """Die (SIGKILL) the first time, as a process killed mid-task; answer the second time."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid()


def test_an_idempotent_call_is_run_again_in_the_new_process(pools, tmp_path):
    marker = str(tmp_path / "died-once")
    pid = pools.run(_kill_self_once, marker, idempotent=True)
    assert os.path.exists(marker) and pid != os.getpid()
    os.remove(marker)
    with pytest.raises(heavy.Broken):                     # not idempotent: refused, not rerun
        pools.run(_kill_self_once, marker)


def test_a_pool_process_ends_when_its_worker_is_killed(tmp_path):
    worker = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, sys, time
        from server import heavy
        pools = heavy.HeavyPools(1)
        print(pools.run(os.getpid), flush=True)
        pools.run(time.sleep, 600)                       # killed mid-task
    """)], stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    child = int(worker.stdout.readline())
    assert _alive(child)
    time.sleep(0.5)                                        # the task has started
    worker.kill()                                          # SIGKILL: no clean-up runs
    worker.wait()
    wait_until(lambda: not _alive(child), timeout=10)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow          # worker processes: the quick suite leaves it to the full one
def test_a_pool_process_ends_when_its_worker_is_killed_while_it_starts(tmp_path):
    # the pool process is still importing its set-up (slow on a busy machine) when its worker
    # dies: it must not take the worker's successor (init) for the worker it watches
    (tmp_path / "slow_setup.py").write_text("import time\ntime.sleep(3)\n\ndef setup():\n    pass\n")
    worker = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import slow_setup
        from server import heavy
        pools = heavy.HeavyPools(1, initializer=slow_setup.setup)
        pools.warm()
        print(*pools.pool(heavy.OWNER)._processes, *pools.pool(heavy.VISITOR)._processes, flush=True)
        import time; time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    children = list(map(int, worker.stdout.readline().split()))      # the owner's pool's and the visitors'
    assert len(children) == 2
    worker.kill()                                          # before the children ran their set-up
    worker.wait()
    wait_until(lambda: not any(map(_alive, children)), timeout=30)
    assert not any(map(_alive, children))
