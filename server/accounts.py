"""Server-side budget accounts: one `dp.Accountant` per (browser session, dataset fingerprint).

Accounts outlive page reloads and cache evictions: they are never evicted, and with a folder
configured each is a JSON file (written atomically, locked across processes), so a server
restart does not hand out a fresh budget either. Every change is read, copied, changed and
written back under the account's lock, so two tabs cannot overspend by racing, and no stored
object is ever changed in place. A folder that cannot be written and a damaged account file
are refused with `faults.Unavailable` (a message): an unreadable account is never silently
replaced by a fresh budget.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path

import dp

from .faults import Unavailable, speaking

DAMAGED = ("this dataset's budget account on the server is damaged and cannot be read. Its budget "
           "is not reset: nothing can be charged to it until the server's operator restores it "
           "from a backup (nothing was charged)")


class AccountStore:
    """Accountants keyed by (session id, dataset fingerprint); in memory or in a folder."""

    def __init__(self, folder: str | os.PathLike | None = None,
                 default_total: float = dp.accountant.DEFAULT_TOTAL):
        self.folder = Path(folder) if folder else None
        if self.folder:
            self.folder.mkdir(parents=True, exist_ok=True)
        self.default_total = float(default_total)
        self._memory: dict[str, dict] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @staticmethod
    def _name(sid: str, fingerprint: str) -> str:
        return hashlib.blake2b(f"{sid}:{fingerprint}".encode(), digest_size=16).hexdigest()

    @contextmanager
    def _locked(self, name: str):
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if self.folder is None:
                yield
                return
            with speaking("budget accounts folder"):
                fh = open(self.folder / f"{name}.lock", "w")
            with fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)

    def _read(self, name: str) -> dp.Accountant:
        if self.folder is None:
            d = self._memory.get(name)
        else:
            path = self.folder / f"{name}.json"
            with speaking("budget accounts folder"):
                text = path.read_text() if path.exists() else None
            try:
                d = json.loads(text) if text is not None else None
                return dp.Accountant.from_dict(d) if d is not None else dp.Accountant(self.default_total)
            except (ValueError, TypeError, KeyError, AttributeError):
                raise Unavailable(DAMAGED) from None
        return dp.Accountant.from_dict(d) if d else dp.Accountant(self.default_total)

    def _write(self, name: str, acc: dp.Accountant):
        d = acc.to_dict()
        if self.folder is None:
            self._memory[name] = d
            return
        tmp = self.folder / f"{name}.json.tmp"
        try:
            with speaking("budget accounts folder"):
                tmp.write_text(json.dumps(d))
                os.replace(tmp, self.folder / f"{name}.json")
        except Unavailable:             # the charge is not kept: the account is as it was
            tmp.unlink(missing_ok=True)
            raise

    def get(self, sid: str, fingerprint: str) -> dp.Accountant:
        """A copy of the account (a fresh one at the default total if none exists yet)."""
        name = self._name(sid, fingerprint)
        with self._locked(name):
            return self._read(name)

    def update(self, sid: str, fingerprint: str, change):
        """Run change(accountant) on a copy under the account's lock; store it unless it raised.

        A BudgetError or ParameterError raised before anything was charged leaves the account
        as it was; a charge made before a later failure is kept (the failure may depend on the
        data), so the copy is stored whenever it gained charges, except after `Unavailable`: the
        server failed to keep the output (a full disk, Redis down), which no data decides, and
        the output is never shown, so the charge is dropped with it. Writing the account is
        the commit point of everything `change` did.
        """
        name = self._name(sid, fingerprint)
        with self._locked(name):
            acc = self._read(name)
            before = len(acc.charges)
            try:
                result = change(acc)
            except Unavailable:
                raise
            except Exception:
                if len(acc.charges) > before:
                    self._write(name, acc)
                raise
            self._write(name, acc)
            return result
