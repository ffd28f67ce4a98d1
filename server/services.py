"""The server's services in one object: the shared store, the budget accounts and their records,
the published releases, the heavy pools and the background jobs.

The app factory opens them (`open_services`) and keeps them on its Flask app (`install`); code
serving a request finds them with `current()`. A heavy-pool process has no Flask app: its
set-up opens the same services from the settings the app passed it (`open_in_pool`), and
`current()` there, as in job threads and in code outside any app (the Python API, tests), is
the services this process opened last.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass, field

import flask

from . import file_store, heavy, jobs, sessions
from .accounts import AccountStore
from .published import PublishedReleases
from .store import SessionQuota

EXTENSION = "dp_services"
TIMEOUT = 4 * 3600
DEFAULT_STORE_MB = 1024      # bytes the shared store holds (on disk or in Redis)
DEFAULT_MEMORY_MB = 128      # unpickled copies each worker process keeps in front of it
SHARED = ("redis_url", "store_dir", "store_mb", "memory_mb", "accounts_dir", "database_url",
          "default_budget")      # what a pool process needs to open the same ones


@dataclass
class Services:
    """What one server keeps and runs, in this process (see the module's docstring)."""

    store: SessionQuota
    accounts: AccountStore
    published: PublishedReleases
    heavy: heavy.HeavyPools = field(default_factory=heavy.HeavyPools)
    jobs: jobs.Jobs = field(default_factory=jobs.Jobs)
    settings: dict = field(default_factory=dict)

    def install(self, server: flask.Flask) -> Services:
        """Keep these on the Flask app, where `current()` finds them in its requests."""
        server.extensions[EXTENSION] = self
        return self

    def close(self) -> None:
        """Stop this process's jobs at their next step and let its heavy pools go (a worker exits)."""
        self.jobs.cancel_all()
        self.heavy.shutdown()


_opened: Services | None = None     # the services this process opened last (see `current`)


def current() -> Services:
    """The services of the app serving this request, else those this process opened last;
    services in memory (a temporary store, accounts in memory) when none were opened."""
    if flask.has_app_context() and EXTENSION in flask.current_app.extensions:
        return flask.current_app.extensions[EXTENSION]
    return _opened or open_services({})


def open_services(config: dict, secret: bytes | None = None) -> Services:
    """Open the shared store, the budget accounts and the published releases of these settings
    in this process, signed with keys derived from the server's `secret` (by default the one
    kept beside the accounts), with `heavy_workers` pool processes set up to open the same
    (`open_in_pool`) and `eval_workers` job threads per role.

    The store is Redis when `redis_url` is set, else the folder `store_dir` (a temporary one
    when not given), bounded by `store_mb` and `memory_mb` of unpickled copies per process."""
    global _opened
    secret = secret or sessions.session_secret(config.get("accounts_dir"))
    config = {**config, "store_dir": config.get("store_dir") or temporary_folder()}
    max_bytes = int(float(config.get("store_mb") or DEFAULT_STORE_MB) * 2**20)
    front_bytes = int(float(config.get("memory_mb", DEFAULT_MEMORY_MB)) * 2**20)
    key = sessions.derive_key(secret, "store")
    if config.get("redis_url"):
        from .redis_store import RedisStore
        kept = RedisStore(config["redis_url"], max_bytes, front_bytes, default_timeout=TIMEOUT, key=key)
    else:
        kept = file_store.FileStore(config["store_dir"], max_bytes, front_bytes, default_timeout=TIMEOUT,
                                    key=key)
    settings = {k: config.get(k) for k in SHARED if k in config}
    accounts = AccountStore(config.get("accounts_dir"), config.get("default_budget", 10.0),
                            key=sessions.derive_key(secret, "accounts"), url=config.get("database_url"))
    published = PublishedReleases(accounts, sessions.derive_key(secret, "published"))
    published.import_folder(config.get("published_dir"))
    _opened = Services(
        store=kept,
        accounts=accounts,
        published=published,
        heavy=heavy.HeavyPools(config.get("heavy_workers", heavy.DEFAULT_WORKERS), open_in_pool, (settings,)),
        jobs=jobs.Jobs(config.get("eval_workers", jobs.DEFAULT_WORKERS)),
        settings=settings)
    return _opened


def open_in_pool(settings: dict) -> None:
    """A heavy-pool process's set-up: the services of the app that made the pool (its heavy
    work runs here, in the calling thread)."""
    open_services({**settings, "heavy_workers": 0})


def temporary_folder() -> str:
    """A fresh folder for a store nobody configured (tests, the Python API), removed at exit."""
    folder = tempfile.mkdtemp(prefix="dp-store-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
