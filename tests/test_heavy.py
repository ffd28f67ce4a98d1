"""The pool of processes that builds releases (`server.heavy`): a pool whose process was killed
heals, the call it broke is refused in words (never retried, it may have charged), and the next
call runs in a new process."""
from __future__ import annotations

import os
import signal

import pytest

from helpers import wait_until
from server import heavy


@pytest.fixture
def pool():
    heavy.configure(1)
    yield
    heavy.configure(0)


def test_a_killed_pool_process_is_replaced_and_its_call_refused_in_words(pool):
    first = heavy.run(os.getpid)
    assert first != os.getpid()
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not _alive(first), timeout=30)
    with pytest.raises(LookupError, match="stopped before it finished"):
        heavy.run(os.getpid)
    second = heavy.run(os.getpid)                 # healed: a new process answers
    assert second not in (first, os.getpid())
    assert heavy.run(os.getpid) == second


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
