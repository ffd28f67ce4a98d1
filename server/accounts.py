"""Server-side budget accounts: one `dp.Accountant` per (scope, dataset fingerprint).

A scope is a browser session id, or `SERVER` for data that lives on the server and belongs to
its owner (one account per dataset, whatever the browser). With a folder configured each account
is a JSON file signed with the server's key (HMAC over the account and its file name), written
atomically and locked across processes, so a server restart does not hand out a fresh budget and
a file changed or copied by hand is refused. Every change is read, copied, changed and written
back under the account's lock, so two tabs cannot overspend by racing, and no stored object is
ever changed in place. The store holds at most `max_accounts` visitors' accounts: a new one may
push out visitors' accounts idle longer than the store keeps a session's upload; the server's
accounts and those of an owner's sessions neither count nor go, so visitors filling the bound
never keep an owner from releasing. Each account file carries a version, and the folder keeps
a signed record of every account's latest version (VERSIONS): an account file put back from an
older copy, or deleted, is refused in words instead of read as an older or fresh budget (a
copy of the whole folder, record included, cannot be told from the real one).
A folder that cannot be written, a damaged or unsigned account file and a full store are
refused with `faults.Unavailable` (a message): an unreadable account is never silently
replaced by a fresh budget.
"""
from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import dp

from .faults import Unavailable, speaking
from .store import RESERVED, reserved

SERVER = "server"               # the scope of the server's own data: one account per dataset
MAX_ACCOUNTS = 10_000
IDLE_SECONDS = 4 * 3600         # the store's entry lifetime (`state.TIMEOUT`): the upload is gone
FOLDER = "budget accounts folder"
VERSIONS = ".versions"          # the folder's signed record of each account's latest version

DAMAGED = ("this dataset's budget account on the server is damaged and cannot be read. Its budget "
           "is not reset: nothing can be charged to it until the server's operator restores it "
           "from a backup (nothing was charged)")
TAMPERED = ("this dataset's budget account on the server does not carry the server's signature: "
            "it was changed outside the app (or copied from another account) and is refused. Its "
            "budget is not reset: nothing can be charged to it until the server's operator "
            "restores it from a backup (nothing was charged)")
ROLLED_BACK = ("this dataset's budget account on the server is older than the server's record of "
               "it: it was put back from an earlier copy, which would hand out spent budget again. "
               "It is refused: nothing can be charged to it until the server's operator restores "
               "its latest version (nothing was charged)")
DELETED = ("this dataset's budget account was deleted from the server's folder, which would hand "
           "out a fresh budget: it is refused until the server's operator restores it from a "
           "backup (nothing was charged)")
FULL_ACCOUNTS = ("the server keeps as many budget accounts as it can right now; try again later "
                 "(nothing was charged)")


def _owners(name: str) -> bool:
    """True for an account (file) name made for the server's data or an owner's session."""
    return name.startswith(("server-", RESERVED))


def _canonical(account: dict) -> bytes:
    return json.dumps(account, sort_keys=True, separators=(",", ":")).encode()


class AccountStore:
    """Accountants keyed by (scope, dataset fingerprint); in memory or in a folder.

    `key` signs the account files: every process sharing a folder must pass the same key (the
    server's), or each refuses the others' files. None: a random key of this process, which
    suits accounts kept in memory only."""

    def __init__(self, folder: str | os.PathLike | None = None,
                 default_total: float = dp.accountant.DEFAULT_TOTAL,
                 key: bytes | None = None, max_accounts: int = MAX_ACCOUNTS):
        self.folder = Path(folder) if folder else None
        if self.folder:
            self.folder.mkdir(parents=True, exist_ok=True)
        self.default_total = float(default_total)
        self.max_accounts = int(max_accounts)
        self._key = key if key is not None else secrets.token_bytes(32)
        self._memory: dict[str, tuple[float, dict]] = {}     # name -> (last written, account)
        self._stripes = [threading.Lock() for _ in range(64)]  # a bounded set of per-name locks
        self._guard = threading.Lock()                          # the in-memory store's own lock

    @staticmethod
    def _name(scope: str, fingerprint: str) -> str:
        """The account's file name: a digest, marked when the bound on visitors' accounts
        does not apply to it (the server's, an owner session's)."""
        digest = hashlib.blake2b(f"{scope}:{fingerprint}".encode(), digest_size=16).hexdigest()
        return (f"server-{digest}" if scope == SERVER
                else f"{RESERVED}{digest}" if reserved(scope) else digest)

    def _mac(self, name: str, account: dict, version: int | None = None) -> str:
        """The signature of an account under its file name and version: a file copied over
        another is refused (files written before versions were signed without one)."""
        head = f"{name}.json\n" if version is None else f"{name}.json\n{version}\n"
        return hmac.new(self._key, head.encode() + _canonical(account), hashlib.sha256).hexdigest()

    def _versions(self) -> dict:
        """The signed record of each account's latest version ({} before any was written)."""
        with speaking(FOLDER):
            try:
                raw = (self.folder / VERSIONS).read_bytes()
            except FileNotFoundError:
                return {}
        try:
            stored = json.loads(raw)
            versions, mac = stored["versions"], stored["mac"]
        except (ValueError, TypeError, KeyError):
            raise Unavailable(DAMAGED) from None
        if not hmac.compare_digest(mac.encode(), self._mac(VERSIONS, versions).encode()):
            raise Unavailable(TAMPERED)
        return versions

    def _record_version(self, name: str, version: int | None):
        """Under the store's lock: set (None: forget) an account's latest version in the record."""
        versions = self._versions()
        if version is None:
            versions.pop(name, None)
        else:
            versions[name] = version
        self._write_whole(VERSIONS, json.dumps({"versions": versions, "mac": self._mac(VERSIONS, versions)}))

    def _write_whole(self, filename: str, text: str):
        """Write a file of the folder whole (a temporary file, then renamed over it)."""
        tmp = self.folder / f"{filename}.tmp"
        try:
            with speaking(FOLDER):
                tmp.write_text(text)
                os.replace(tmp, self.folder / filename)
        except Unavailable:             # the change is not kept: the file is as it was
            tmp.unlink(missing_ok=True)
            raise

    def _stripe(self, name: str) -> threading.Lock:
        return self._stripes[hash(name) % len(self._stripes)]

    @staticmethod
    def _open_locked(path: Path, block: bool = True):
        """The open file `path` holding its exclusive flock, or None when `block` is False and it
        is held. A lock file removed while waiting for it is opened again (its remover held it)."""
        while True:
            with speaking(FOLDER):
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

    @contextmanager
    def _locked(self, name: str):
        """The account's lock, across threads and processes; its lock file goes with the account."""
        with self._stripe(name):
            if self.folder is None:
                yield
                return
            lock = self.folder / f"{name}.lock"
            with self._open_locked(lock):
                try:
                    yield
                finally:                 # an account never written leaves no lock file behind
                    with suppress(OSError):
                        if not (self.folder / f"{name}.json").exists():
                            lock.unlink()

    @contextmanager
    def _store_locked(self):
        """The whole store's lock, held only to count, make room for and write a new account."""
        if self.folder is None:
            with self._guard:
                yield
            return
        with self._open_locked(self.folder / ".accounts.lock"):
            yield

    def _read(self, name: str) -> tuple[dp.Accountant, int | None]:
        """(account, its version; None when it does not exist yet: a fresh one at the default)."""
        if self.folder is None:
            _, d = self._memory.get(name, (0.0, None))
            return (dp.Accountant.from_dict(d), 0) if d else (dp.Accountant(self.default_total), None)
        read = self._read_file(name)
        return (dp.Accountant(self.default_total), None) if read is None else read

    def _read_file(self, name: str) -> tuple[dp.Accountant, int] | None:
        """(account, version) from its file, checked against its signature and the record of
        versions (read first: a writer replaces the file, then the record), or None if it never
        existed."""
        recorded = self._versions().get(name)
        with speaking(FOLDER):
            try:
                raw = (self.folder / f"{name}.json").read_bytes()
            except FileNotFoundError:
                if recorded is not None and self._versions().get(name) is not None:
                    raise Unavailable(DELETED) from None    # still recorded: not removed as idle
                return None
        try:
            stored = json.loads(raw)
        except ValueError:
            raise Unavailable(DAMAGED) from None
        version = stored.get("version") if isinstance(stored, dict) else None
        if not (isinstance(stored, dict) and isinstance(stored.get("account"), dict)
                and isinstance(stored.get("mac"), str) and (version is None or isinstance(version, int))
                and hmac.compare_digest(stored["mac"].encode(),
                                        self._mac(name, stored["account"], version).encode())):
            raise Unavailable(TAMPERED)
        if recorded is not None and (version or 0) < recorded:
            raise Unavailable(ROLLED_BACK)
        try:
            return dp.Accountant.from_dict(stored["account"]), version or 0
        except (ValueError, TypeError, KeyError, AttributeError):
            raise Unavailable(DAMAGED) from None

    def _write(self, name: str, acc: dp.Accountant, version: int | None):
        """Store the account read at `version` (None: new) under its lock (the commit point);
        a new one only if the store has room for it."""
        d = acc.to_dict()
        if self.folder is None:
            if version is not None:
                self._memory[name] = (time.time(), d)
                return
            with self._store_locked():
                self._make_room(name)
                self._memory[name] = (time.time(), d)
            return
        new_version = (version or 0) + 1
        with self._store_locked():
            if version is None:
                self._make_room(name)
            self._write_whole(f"{name}.json", json.dumps(
                {"account": d, "version": new_version, "mac": self._mac(name, d, new_version)}))
            self._record_version(name, new_version)    # a file ahead of the record is read as it is

    def _make_room(self, new: str):
        """Under the store's lock, before a new visitor's account: at the bound, remove enough
        visitors' accounts idle for `IDLE_SECONDS`, oldest first, or refuse with FULL_ACCOUNTS.
        Owners' accounts (`_owners`) neither count nor wait: browsers filling the bound never
        keep an owner from opening new data or releasing a sample."""
        if _owners(new):
            return
        if self.folder is None:
            written = {name: t for name, (t, _) in self._memory.items() if not _owners(name)}
        else:
            with speaking(FOLDER), os.scandir(self.folder) as entries:
                files = [e for e in entries if e.name.endswith(".json") and not _owners(e.name)]
            if len(files) < self.max_accounts:
                return
            with speaking(FOLDER):
                written = {e.name[:-len(".json")]: e.stat().st_mtime for e in files}
        excess = len(written) - self.max_accounts + 1
        if excess <= 0:
            return
        cutoff = time.time() - IDLE_SECONDS
        idle = sorted((t, name) for name, t in written.items() if t < cutoff)
        for _, name in idle:
            if self._remove_idle(name, cutoff):
                excess -= 1
                if not excess:
                    return
        raise Unavailable(FULL_ACCOUNTS)

    def _remove_idle(self, name: str, cutoff: float) -> bool:
        """Remove an account unless it is in use or was written since `cutoff`; True if gone."""
        if self.folder is None:
            stripe = self._stripe(name)
            if not stripe.acquire(blocking=False):
                return False
            try:
                if self._memory.get(name, (0.0, None))[0] >= cutoff:
                    return False
                self._memory.pop(name, None)
                return True
            finally:
                stripe.release()
        lock = self.folder / f"{name}.lock"
        fh = self._open_locked(lock, block=False)
        if fh is None:
            return False
        with fh, speaking(FOLDER):
            path = self.folder / f"{name}.json"
            try:
                if path.stat().st_mtime >= cutoff:
                    return False
                self._record_version(name, None)    # forgotten first: never read as deleted
                path.unlink()
            except FileNotFoundError:
                pass
            lock.unlink(missing_ok=True)
            return True

    def get(self, scope: str, fingerprint: str) -> dp.Accountant:
        """A copy of the account (a fresh one at the default total if none exists yet). It takes
        no lock and creates no file: accounts are replaced whole, never written in place."""
        return self._read(self._name(scope, fingerprint))[0]

    def update(self, scope: str, fingerprint: str, change):
        """Run change(accountant) on a copy under the account's lock; store it unless it raised.

        A BudgetError or ParameterError raised before anything was charged leaves the account
        as it was; a charge made before a later failure is kept (the failure may depend on the
        data), so the copy is stored whenever it gained charges, except after `Unavailable`: the
        server failed to keep the output (a full disk, Redis down, no room for a new account),
        which no data decides, and the output is never shown, so the charge is dropped with it.
        Writing the account is the commit point of everything `change` did.
        """
        name = self._name(scope, fingerprint)
        with self._locked(name):
            acc, version = self._read(name)       # nobody else writes it while the lock is held
            before = len(acc.charges)
            try:
                result = change(acc)
            except Unavailable:
                raise
            except Exception:
                if len(acc.charges) > before:
                    self._write(name, acc, version)
                raise
            self._write(name, acc, version)
            return result
