"""Each budget account's lock, held while it is read, changed and written: a thread-lock stripe
in the process, and across processes a lock file per account beside SQLite or, on PostgreSQL,
an advisory lock (across hosts too). `server.accounts` holds one `AccountLocks`."""
from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from contextlib import contextmanager, suppress
from pathlib import Path

import sqlalchemy as sa

from .faults import speaking

DATABASE = "budget accounts database"    # how errors name the place that failed
STRIPES = 64


def _lock_id(name: str) -> int:
    """A signed 64-bit number for an account's advisory lock on PostgreSQL."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def open_locked(path: Path, block: bool = True):
    """The open file `path` holding its exclusive flock, or None when `block` is False and it
    is held. A lock file removed while waiting for it is opened again (its remover held it)."""
    while True:
        with speaking(DATABASE):
            fh = open(path, "a")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
                same = os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino
            except BlockingIOError:         # held elsewhere (only when not blocking)
                fh.close()
                return None
            except FileNotFoundError:       # removed by its last holder: lock the new one
                same = False
            except BaseException:
                fh.close()
                raise
        if same:
            return fh
        fh.close()


class AccountLocks:
    """The locks of the accounts of one database: `engine` on PostgreSQL takes advisory locks;
    else `folder` (None: accounts in this process's memory, thread locks alone) holds the lock
    files."""

    def __init__(self, engine, folder: Path | None):
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        # a bounded set of per-name locks, re-entrant: making room under a new account's stripe
        # may meet an idle account of the same stripe, which no other thread can then be using
        self.stripes = [threading.RLock() for _ in range(STRIPES)]
        self.files = folder if folder is not None and not self.postgres else None
        if self.files:
            with speaking(DATABASE):
                self.files.mkdir(exist_ok=True)

    def stripe(self, name: str) -> threading.RLock:
        return self.stripes[hash(name) % len(self.stripes)]

    @contextmanager
    def held(self, name: str):
        """The account's lock across threads, processes and (on PostgreSQL) hosts, held while
        it is read, changed and written; yields the connection to read and write it on (on
        PostgreSQL the one holding the lock, else None)."""
        with self.stripe(name):
            if self.postgres:
                with speaking(DATABASE), self.engine.connect() as conn:
                    conn.execute(sa.select(sa.func.pg_advisory_lock(_lock_id(name))))
                    conn.commit()
                    try:
                        yield conn
                    finally:
                        with speaking(DATABASE):
                            conn.rollback()
                            conn.execute(sa.select(sa.func.pg_advisory_unlock(_lock_id(name))))
                            conn.commit()
            elif self.files:
                with open_locked(self.files / f"{name}.lock"):
                    yield None
            else:
                yield None

    def try_hold(self, name: str, conn, held) -> bool:
        """Take the lock of an account another may be using without waiting, for the rest of
        the transaction `conn` (`held`: an ExitStack closed after it); False if it is held."""
        stripe = self.stripe(name)
        if not stripe.acquire(blocking=False):
            return False
        held.callback(stripe.release)
        if self.postgres:
            return bool(conn.execute(sa.select(sa.func.pg_try_advisory_xact_lock(_lock_id(name)))).scalar())
        if self.files:
            fh = open_locked(self.files / f"{name}.lock", block=False)
            if fh is None:
                return False
            held.callback(fh.close)
        return True

    def forget(self, name: str) -> None:
        """Remove an account's lock file (the account is gone, or was never written)."""
        if self.files:
            with suppress(OSError):
                (self.files / f"{name}.lock").unlink(missing_ok=True)
