"""Server-side budget accounts: one `dp.Accountant` per (scope, dataset fingerprint), in the
server's database (`server.database`: SQLite in the accounts folder, PostgreSQL given a URL, or
SQLite in memory when nothing is configured).

A scope is a browser session id, or `SERVER` for data that lives on the server and belongs to
its owner (one account per dataset, whatever the browser). Each account row is signed with the
server's key (HMAC over the account, its name and version), so a row changed or copied by hand
is refused, and a restart never hands out a fresh budget. Every change is read, copied, changed
and written back under the account's lock (a lock file per account beside SQLite, an advisory
lock on PostgreSQL), so two tabs or two hosts cannot overspend by racing; the write itself is
one transaction. The database holds at most `max_accounts` visitors' accounts: a new one may
push out visitors' accounts idle longer than the store keeps a session's upload; the server's
accounts and those of an owner's sessions neither count nor go. A second table keeps each
account's latest version, signed apart: an account row put back from an older copy, or deleted,
is refused in words instead of read as an older or fresh budget (a copy of the whole database
cannot be told from the real one). A database that cannot be written, a damaged or unsigned
account and a full store are refused with `faults.Unavailable` (a message): an unreadable
account is never silently replaced by a fresh budget. Account files of version 0.10 found in
the folder are moved into the database once, as they were (`server.account_import`).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from pathlib import Path

import sqlalchemy as sa
from redis.exceptions import LockError

import dp

from . import database
from .account_locks import DATABASE, AccountLocks
from .database import account_versions as versions_table, accounts as table, release_entry, \
    releases as releases_table
from .faults import Unavailable, speaking
from .store import RESERVED, reserved

SERVER = "server"               # the scope of the server's own data: one account per dataset
MAX_ACCOUNTS = 10_000
UNCHARGED = '{"charges":[]'     # how the canonical JSON of an account without charges starts
IDLE_SECONDS = 4 * 3600         # the store's entry lifetime (`services.TIMEOUT`): the upload is gone
LOCKS = "locks"                 # beside SQLite: a lock file per account in use
ROOM_LOCK = 0x64705F726F6F6D    # "dp_room": PostgreSQL's advisory lock around making room

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
DELETED = ("this dataset's budget account was deleted from the server's database, which would hand "
           "out a fresh budget: it is refused until the server's operator restores it from a "
           "backup (nothing was charged)")
FULL_ACCOUNTS = ("the server keeps as many budget accounts as it can right now; try again later "
                 "(nothing was charged)")
CHANGED = ("this dataset's budget account was written by another process while it was being "
           "charged here; try again (nothing was charged)")


def _owners(name: str) -> bool:
    """True for an account name made for the server's data or an owner's session."""
    return name.startswith(("server-", RESERVED))


def _canonical(account: dict) -> bytes:
    return json.dumps(account, sort_keys=True, separators=(",", ":")).encode()


class AccountStore:
    """Accountants keyed by (scope, dataset fingerprint), in the database of `url`, else of
    SQLite in `folder`, else of SQLite in this process's memory.

    `key` signs the accounts: every process sharing a database must pass the same key (the
    server's), or each refuses the others' accounts. None: a random key of this process, which
    suits accounts kept in memory only."""

    def __init__(self, folder: str | os.PathLike | None = None,
                 default_total: float = dp.accountant.DEFAULT_TOTAL,
                 key: bytes | None = None, max_accounts: int = MAX_ACCOUNTS, url: str | None = None):
        self.folder = Path(folder) if folder else None
        self.default_total = float(default_total)
        self.max_accounts = int(max_accounts)
        self._key = key if key is not None else secrets.token_bytes(32)
        with speaking(DATABASE):
            self.engine = database.engine_for(url, self.folder)
        # one in-memory connection is shared by the threads: one transaction at a time
        self._serial = threading.Lock() if self.engine.url.database in (None, "", ":memory:") else nullcontext()
        self.locks = AccountLocks(self.engine, self.folder / LOCKS if self.folder else None)
        if self.folder:
            from .account_import import import_files     # it reads this module's signatures
            import_files(self)

    @staticmethod
    def _name(scope: str, fingerprint: str) -> str:
        """The account's name: a digest, marked when the bound on visitors' accounts does not
        apply to it (the server's, an owner session's)."""
        digest = hashlib.blake2b(f"{scope}:{fingerprint}".encode(), digest_size=16).hexdigest()
        return (f"server-{digest}" if scope == SERVER
                else f"{RESERVED}{digest}" if reserved(scope) else digest)

    def _mac(self, name: str, account: dict, version: int | None = None) -> str:
        """The signature of an account under its name and version (0: one written by 0.9, signed
        without a version): an account copied over another is refused."""
        head = f"{name}.json\n" if not version else f"{name}.json\n{version}\n"
        return hmac.new(self._key, head.encode() + _canonical(account), hashlib.sha256).hexdigest()

    def _version_mac(self, name: str, version: int) -> str:
        return hmac.new(self._key, f"version\n{name}\n{version}".encode(), hashlib.sha256).hexdigest()

    @contextmanager
    def _tx(self, conn=None):
        """One transaction (SQLite's write lock taken at its start; database errors in words), on
        `conn` when given (the connection holding an account's lock on PostgreSQL: an update
        then needs one pooled connection, not two)."""
        if conn is not None:
            with speaking(DATABASE), conn.begin():
                yield conn
            return
        with self._serial, speaking(DATABASE), self.engine.begin() as conn:
            yield conn

    def transaction(self):
        """One transaction on the accounts' database, for records kept beside the charges
        (`server.clicks`)."""
        return self._tx()

    @contextmanager
    def reading(self):
        """A transaction that only reads: on SQLite it takes no write lock (`BEGIN`, not
        `BEGIN IMMEDIATE`), so it never waits behind a charge."""
        with self._serial, speaking(DATABASE), self.engine.connect() as conn:
            conn.execution_options(reading=True)
            with conn.begin():
                yield conn

    def _read(self, name: str, conn=None) -> tuple[dp.Accountant, int | None]:
        """(account, its version), checked against its signature and the record of versions,
        both read in one statement (one snapshot: a charge committed between two reads would
        look like a rolled-back account); (a fresh one at the default, None) when it does not
        exist yet."""
        def one(column, of):
            return sa.select(column).where(of.c.name == name).scalar_subquery()
        with self._tx(conn) as c:
            row = c.execute(sa.select(
                one(table.c.body, table).label("body"), one(table.c.version, table).label("version"),
                one(table.c.mac, table).label("mac"),
                one(versions_table.c.version, versions_table).label("recorded"),
                one(versions_table.c.mac, versions_table).label("recorded_mac"))).one()
        if row.recorded is not None and not hmac.compare_digest(
                row.recorded_mac.encode(), self._version_mac(name, row.recorded).encode()):
            raise Unavailable(TAMPERED)
        if row.body is None:
            if row.recorded is not None:
                raise Unavailable(DELETED)
            return dp.Accountant(self.default_total), None
        try:
            account = json.loads(row.body)
        except ValueError:
            raise Unavailable(DAMAGED) from None
        if not (isinstance(account, dict) and hmac.compare_digest(
                row.mac.encode(), self._mac(name, account, row.version).encode())):
            raise Unavailable(TAMPERED)
        if row.recorded is not None and row.version < row.recorded:
            raise Unavailable(ROLLED_BACK)
        try:
            return dp.Accountant.from_dict(account), row.version
        except (ValueError, TypeError, KeyError, AttributeError):
            raise Unavailable(DAMAGED) from None

    def _write(self, name: str, acc: dp.Accountant, version: int | None, conn=None, records=()):
        """Store the account read at `version` (None: new), its version record and the release
        `records` its charges paid for in one transaction (the commit point, on `conn` when
        given); a new one only if the store has room for it."""
        d = acc.to_dict()
        new = version + 1 if version else 1
        row = {"body": _canonical(d).decode(), "version": new, "mac": self._mac(name, d, new),
               "written": time.time(), "owners": _owners(name)}
        with ExitStack() as held:
            with self._tx(conn) as c:
                removed = self._make_room(c, name, held) if version is None else []
                self._put(c, name, version, row)
                self._record(c, name, records)
            for gone in removed:                                   # its lock file goes with it
                self.locks.forget(gone)

    def _put(self, conn, name: str, version: int | None, row: dict):
        """Insert or update the account row read at `version`, and its version record."""
        new = row["version"]
        if version is None:
            conn.execute(table.insert().values(name=name, **row))
        elif conn.execute(table.update().where(table.c.name == name, table.c.version == version)
                          .values(**row)).rowcount != 1:
            raise Unavailable(CHANGED)
        conn.execute(versions_table.delete().where(versions_table.c.name == name))
        conn.execute(versions_table.insert().values(name=name, version=new, mac=self._version_mac(name, new)))

    @staticmethod
    def _record(conn, name: str, records) -> None:
        """Insert release records (session, ref, ε) of account `name`."""
        now = time.time()
        database.insert_records(conn, [{"account": name, "entry": release_entry(ref), "session": session,
                                        "ref": ref, "epsilon": eps, "written": now}
                                       for session, ref, eps in records])

    def recorded(self, scope: str, fingerprint: str, ref: str) -> bool:
        """True when a charge to this account paid for the release `ref` (its record exists)."""
        t = releases_table
        with self._tx() as c:
            return c.execute(sa.select(t.c.entry).where(
                t.c.account == self._name(scope, fingerprint), t.c.entry == release_entry(ref))).first() is not None

    def records(self, scope: str, fingerprint: str, session: str) -> list[str]:
        """The refs of the releases this account paid for that `session` keeps, newest first."""
        t = releases_table
        with self._tx() as c:
            return list(c.execute(sa.select(t.c.ref).where(
                t.c.account == self._name(scope, fingerprint), t.c.session == session)
                .order_by(t.c.written.desc())).scalars())

    def _make_room(self, conn, new: str, held) -> list:
        """In the transaction of a new visitor's account: at the bound, remove enough visitors'
        accounts not in use that are idle for `IDLE_SECONDS` or hold no charge (a raised total
        alone: nothing spent is forgotten with it), oldest first (their names), or refuse with
        FULL_ACCOUNTS. Owners' accounts (`_owners`) neither count nor wait: browsers filling
        the bound never keep an owner from opening new data or releasing a sample."""
        if _owners(new):
            return []
        if self.locks.postgres:                    # one host counting at a time (SQLite: BEGIN IMMEDIATE)
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(ROOM_LOCK)))
        visitors = sa.not_(table.c.owners)
        excess = conn.execute(sa.select(sa.func.count()).select_from(table).where(visitors)).scalar() \
            - self.max_accounts + 1
        if excess <= 0:
            return []
        idle = sa.and_(visitors, sa.or_(table.c.written < time.time() - IDLE_SECONDS,
                                        table.c.body.startswith(UNCHARGED, autoescape=True)))
        removed = []
        for name in conn.execute(sa.select(table.c.name).where(idle).order_by(table.c.written)).scalars().all():
            # the delete checks again: another host may have charged it since the list was read
            if self.locks.try_hold(name, conn, held) and conn.execute(
                    table.delete().where(table.c.name == name, idle)).rowcount == 1:
                conn.execute(versions_table.delete().where(versions_table.c.name == name))
                conn.execute(releases_table.delete().where(releases_table.c.account == name))
                removed.append(name)
                if len(removed) == excess:
                    return removed
        raise Unavailable(FULL_ACCOUNTS)

    def get(self, scope: str, fingerprint: str) -> dp.Accountant:
        """A copy of the account (a fresh one at the default total if none exists yet). It takes
        no lock and creates nothing: accounts are replaced whole, never written in place."""
        return self._read(self._name(scope, fingerprint))[0]

    def update(self, scope: str, fingerprint: str, change, records: list | None = None):
        """Run change(accountant) on a copy under the account's lock; store it unless it raised.
        `records`: (session, ref, ε) of each release `change` kept, which it appends; they are
        written in the charge's transaction, so a charge and its release record stand together.

        A BudgetError or ParameterError raised before anything was charged leaves the account
        as it was; a charge made before a later failure is kept (the failure may depend on the
        data), so the copy is stored whenever it gained charges, except after `Unavailable`: the
        server failed to keep the output (a full disk, Redis down, no room for a new account),
        which no data decides, and the output is never shown, so the charge is dropped with it.
        Writing the account is the commit point of everything `change` did.
        """
        name = self._name(scope, fingerprint)
        with self.locks.held(name) as conn:
            acc, version = self._read(name, conn)     # nobody else writes it while the lock is held
            try:
                return self._change(name, acc, version, change, conn, [] if records is None else records)
            finally:
                if version is None and self.locks.files:    # a refused new account leaves no lock file
                    with suppress(Unavailable):
                        if self._read(name)[1] is None:
                            self.locks.forget(name)

    def _change(self, name: str, acc: dp.Accountant, version: int | None, change, conn, records: list):
        before = len(acc.charges)
        try:
            result = change(acc)
        except (Unavailable, LockError):      # the store failed (a Redis lock not had in time too)
            raise
        except Exception:
            if len(acc.charges) > before:
                self._write(name, acc, version, conn, records)
            raise
        self._write(name, acc, version, conn, records)
        return result
