"""The server's database: SQLite in the accounts folder by default, PostgreSQL when given a URL.

What must never be lost (the budget accounts, the record of their versions, the record of each
release a charge paid for, the request ids of the clicks that may charge them, and the published
releases) lives here, in
tables made by numbered migrations (`MIGRATIONS`, each run once, in order, in one transaction,
and recorded in `schema_version`), so a server opening a database made by an older version
brings it up to date and a newer one is refused in words. SQLAlchemy Core speaks to both
engines; SQLite runs in WAL mode with a busy timeout, so the workers of one host share a file,
and several hosts share one budget through PostgreSQL (`--database-url`).
"""
from __future__ import annotations

import hashlib
import json
import os
import weakref
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.pool import StaticPool

from .faults import Unavailable

SQLITE_FILE = "dp.sqlite3"
BUSY_SECONDS = 30                 # how long a writer waits for SQLite's write lock
metadata = sa.MetaData()

accounts = sa.Table(
    "accounts", metadata,
    sa.Column("name", sa.String(64), primary_key=True),      # `AccountStore._name`: a digest
    sa.Column("body", sa.Text, nullable=False),               # the dp.Accountant as JSON
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("mac", sa.String(64), nullable=False),          # the server key's HMAC of all three
    sa.Column("written", sa.Float, nullable=False),           # seconds since the epoch
    sa.Column("owners", sa.Boolean, nullable=False))          # the server's or an owner session's
account_versions = sa.Table(
    "account_versions", metadata,                             # each account's latest version,
    sa.Column("name", sa.String(64), primary_key=True),       # signed apart: an account row put
    sa.Column("version", sa.Integer, nullable=False),         # back from an older copy, or
    sa.Column("mac", sa.String(64), nullable=False))          # deleted, is refused
requests = sa.Table(
    "requests", metadata,                                     # each spending click's request id
    sa.Column("session", sa.String(64), primary_key=True),    # `server.clicks`: kept beside the
    sa.Column("rid", sa.String(64), primary_key=True),        # charges, not in the workspace,
    sa.Column("done", sa.Boolean, nullable=False),            # which expires
    sa.Column("written", sa.Float, nullable=False))
releases = sa.Table(
    "releases", metadata,                                     # each release a charge paid for,
    sa.Column("account", sa.String(64), primary_key=True),    # written in the charge's
    sa.Column("entry", sa.String(32), primary_key=True),      # transaction (`release_entry`);
    sa.Column("session", sa.String(64), nullable=False),      # its output is in the store under
    sa.Column("ref", sa.Text, nullable=False),                # the session's part
    sa.Column("epsilon", sa.Float, nullable=False),
    sa.Column("written", sa.Float, nullable=False))
published = sa.Table(
    "published", metadata,                                    # each published release
    sa.Column("id", sa.String(16), primary_key=True),         # (`server.published`): its public
    sa.Column("record", sa.Text, nullable=False),             # record, the release pickled, and
    sa.Column("record_mac", sa.String(64), nullable=False),   # the server key's HMAC of each
    sa.Column("payload", sa.LargeBinary, nullable=False),     # with the id
    sa.Column("payload_mac", sa.String(64), nullable=False),
    sa.Column("written", sa.Float, nullable=False))
unpublished = sa.Table(
    "unpublished", metadata,                                  # ids unpublished: never imported
    sa.Column("id", sa.String(16), primary_key=True),         # again from old files
    sa.Column("written", sa.Float, nullable=False))
schema_version = sa.Table("schema_version", metadata, sa.Column("version", sa.Integer, nullable=False))


def release_entry(ref: str) -> str:
    """A release's name in the records and the store: a digest of its key's text."""
    return hashlib.blake2b(ref.encode(), digest_size=16).hexdigest()


def insert_records(conn, rows: list[dict]) -> None:
    """Insert release records ({account, entry, session, ref, epsilon, written}); one already
    there (a fixed-seed release rebuilt after the store dropped it) stays as it was."""
    if rows:
        conn.execute(sa.text("INSERT INTO releases (account, entry, session, ref, epsilon, written) "
                             "VALUES (:account, :entry, :session, :ref, :epsilon, :written) "
                             "ON CONFLICT DO NOTHING"), rows)


def records_of_charges(conn) -> None:
    """Migration 3's data step: a release record for every charge that names its release (until
    then the charge was the record), its session unknown (''), unless it has one; frozen like the
    SQL steps. The import of 0.10's account files runs it again for the accounts it brings."""
    rows = []
    for name, body in conn.exec_driver_sql("SELECT name, body FROM accounts"):
        try:
            charges = json.loads(body)["charges"]
        except (ValueError, KeyError, TypeError):     # a damaged account is refused when read
            continue
        rows += [{"account": name, "entry": release_entry(c["ref"]), "session": "", "ref": c["ref"],
                  "epsilon": c["epsilon"], "written": c["at"]} for c in charges if c.get("ref")]
    insert_records(conn, rows)


def published_table(conn) -> None:
    """Migration 4: the published releases (until then signed files in a folder, which
    `PublishedReleases.import_folder` moves in; the pickle's type named per engine) and the ids
    unpublished since, so no copy of an old file brings one back."""
    blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
    conn.exec_driver_sql(f"CREATE TABLE published (id VARCHAR(16) PRIMARY KEY, record TEXT NOT NULL, "
                         f"record_mac VARCHAR(64) NOT NULL, payload {blob} NOT NULL, "
                         "payload_mac VARCHAR(64) NOT NULL, written DOUBLE PRECISION NOT NULL)")
    conn.exec_driver_sql("CREATE TABLE unpublished (id VARCHAR(16) PRIMARY KEY, "
                         "written DOUBLE PRECISION NOT NULL)")


# Append only: step i brings the schema to version i + 1. Each is frozen SQL both engines
# read (or a frozen function of the connection), so a database made today and one brought up
# from an old version end the same; the Table objects above describe the latest schema for queries.
MIGRATIONS = (
    ("CREATE TABLE accounts (name VARCHAR(64) PRIMARY KEY, body TEXT NOT NULL, "
     "version INTEGER NOT NULL, mac VARCHAR(64) NOT NULL, written DOUBLE PRECISION NOT NULL, "
     "owners BOOLEAN NOT NULL)",
     "CREATE INDEX accounts_idle ON accounts (owners, written)",
     "CREATE TABLE account_versions (name VARCHAR(64) PRIMARY KEY, version INTEGER NOT NULL, "
     "mac VARCHAR(64) NOT NULL)"),
    ("CREATE TABLE requests (session VARCHAR(64) NOT NULL, rid VARCHAR(64) NOT NULL, "
     "done BOOLEAN NOT NULL, written DOUBLE PRECISION NOT NULL, PRIMARY KEY (session, rid))",
     "CREATE INDEX requests_written ON requests (written)"),
    ("CREATE TABLE releases (account VARCHAR(64) NOT NULL, entry VARCHAR(32) NOT NULL, "
     "session VARCHAR(64) NOT NULL, ref TEXT NOT NULL, epsilon DOUBLE PRECISION NOT NULL, "
     "written DOUBLE PRECISION NOT NULL, PRIMARY KEY (account, entry))",
     "CREATE INDEX releases_session ON releases (session, account, written)",
     records_of_charges),
    (published_table,),
)

TOO_NEW = ("the server's database was made by a newer version of this app (schema {found}, this "
           "version knows {known}): upgrade the app, or point it at another database")


def engine_for(url: str | None, folder: str | Path | None) -> sa.Engine:
    """The engine of `url`, else of SQLite in `folder`, else of SQLite in this process's memory
    (accounts that go with it), brought up to date by `migrate`."""
    if url:
        engine = sa.create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=40)
    elif folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(f"sqlite:///{Path(folder) / SQLITE_FILE}",
                                  connect_args={"timeout": BUSY_SECONDS})
    else:
        engine = sa.create_engine("sqlite://", poolclass=StaticPool,
                                  connect_args={"check_same_thread": False})
    if engine.dialect.name == "sqlite":          # a SQLite URL given by hand too
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _sqlite_begin)
    migrate(engine)
    if url or folder:
        _shared.add(engine)
    return engine


_shared: weakref.WeakSet = weakref.WeakSet()   # engines whose pooled connections a fork must not share


def _forget_connections():
    """In a forked worker (gunicorn forks after the app is made): drop the pooled connections
    inherited from the parent without closing them, so the two never share one."""
    for engine in list(_shared):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_connections)


def _sqlite_begin(conn) -> None:
    """A write takes SQLite's lock at its start (BEGIN IMMEDIATE: no upgrade from a read lock
    that could deadlock); a connection marked `reading` begins deferred, so readers (the
    public pages) never wait behind the charges."""
    conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("reading") else "BEGIN IMMEDIATE")


def _sqlite_pragmas(dbapi_conn, _record):
    """WAL (readers never wait for the writer), full fsync on commit, and SQLAlchemy's own
    BEGIN (the driver's implicit one is turned off so a write takes its lock at the start)."""
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.close()


def migrate(engine: sa.Engine) -> int:
    """Run the migrations this database has not had, in one transaction; its schema version."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":      # one migrating host at a time
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK)))
        schema_version.create(conn, checkfirst=True)
        found = conn.execute(sa.select(schema_version.c.version)).scalar()
        if found is None:
            conn.execute(schema_version.insert().values(version=0))
            found = 0
        if found > len(MIGRATIONS):
            raise Unavailable(TOO_NEW.format(found=found, known=len(MIGRATIONS)))
        for step in MIGRATIONS[found:]:
            for statement in step:
                statement(conn) if callable(statement) else conn.exec_driver_sql(statement)
        conn.execute(schema_version.update().values(version=len(MIGRATIONS)))
    return len(MIGRATIONS)


MIGRATION_LOCK = 0x64705F6D69677261   # "dp_migra": the advisory lock migrations hold on PostgreSQL
