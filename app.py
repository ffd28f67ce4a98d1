"""Dash app factory and command line: `python app.py` serves the dashboard on a built-in sample
with gunicorn (several worker processes sharing one store); `--debug` uses Flask's dev server."""
from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path

from gunicorn.app.base import BaseApplication

from dash import Dash, dcc, html

import dp
from components import (alerts, compare_panel, data_panel, evaluation_panel, export_panel, ids, inputs,
                        interactive_panel, ledger_panel, map_panel, mechanism_panel, pages, plan_panel, public_page,
                        queries_panel, server_files, shapes_panel, share, steps, tour_panel)
from server import background, front, guard, heavy, jobs, memory, services, sessions, state, workspace
from server.faults import Unavailable
from server.file_store import FileStore

DEFAULT_CONFIG = {
    "max_upload_mb": 50.0,
    "tiles_url": "https://tile.openstreetmap.org/{z}/{x}/{y}.png",
    "tiles_attribution": "© OpenStreetMap contributors",
    "store_dir": None,         # the shared store's folder; None: a temporary one of this app's own
    "redis_url": None,         # keep the store in Redis instead of a folder (redis://host:port/db)
    "store_mb": services.DEFAULT_STORE_MB,     # bytes the store holds, its sessions' oldest dropped
    "memory_mb": services.DEFAULT_MEMORY_MB,   # unpickled copies each process keeps in front of it
    "heavy_workers": heavy.DEFAULT_WORKERS,  # processes building releases; 0: in the request
    "accounts_dir": None,      # None: budget accounts in memory; a folder keeps them (SQLite) and the key
    "database_url": None,      # budget accounts in this database (postgresql+psycopg://…) instead
    "default_budget": 10.0,    # total ε per dataset a new account starts with
    "secure_cookies": False,   # mark the session cookie Secure even over HTTP (behind a TLS proxy)
    "eval_workers": jobs.DEFAULT_WORKERS,   # evaluations run at once; more wait for a free worker
    "mechanism": None,         # the mechanism picked at start; None: the recommended one (dp.recommend)
    "data_dir": None,          # a folder of files on the server the owner may open by path or glob
    "owner_token": None,       # the secret of the owner link; None: a random one nobody is told
    "public_uploads": True,    # visitors (not owners) may upload files of their own
    "published_dir": None,     # releases 0.17 and earlier published as files: moved into the database
}
OWNER_TOKEN_ENV = "DP_OWNER_TOKEN"
MIN_TOKEN_CHARS = 22         # 128 bits as URL-safe base64, what a random token has at least
INSTANCE = Path(__file__).resolve().parent / "instance"
ACCOUNTS_DIR, STORE_DIR, PUBLISHED_DIR = INSTANCE / "accounts", INSTANCE / "store", INSTANCE / "published"
DEFAULT_WORKERS, DEFAULT_THREADS, DEFAULT_HEAVY = 3, 8, 1   # gunicorn's defaults on the command line
TITLE = "Private location statistics"
PANELS = (alerts, data_panel, server_files, mechanism_panel, plan_panel, map_panel, queries_panel, shapes_panel,
          compare_panel, ledger_panel, export_panel, evaluation_panel, interactive_panel, share, tour_panel,
          public_page)


def dashboard(**_query):
    """The dashboard (the page at /), fresh per page load, rendered from the browser's workspace
    on the server (its dataset, domain and shown release: `server.workspace.page`); the
    browser's session id lives in a cookie (see `server.sessions`). When the store cannot be
    read (Redis down, a failing disk) the page says so instead of opening on state it cannot
    keep. A link's settings in the address are read by `components.share`, not here."""
    try:
        return page_layout({**pages.settings(), "page": workspace.page(sessions.session_id(),
                                                                       state.DEFAULT_SAMPLE)})
    except Unavailable as exc:
        return alerts.unavailable(str(exc))


def page_layout(config: dict):
    return html.Div(className="page", children=[
        dcc.Store(id=ids.DATASET, data=config["page"]["dataset"]), dcc.Store(id=ids.DOMAIN),
        dcc.Store(id=ids.RELEASE), dcc.Store(id=ids.RELEASE_REQUEST), dcc.Store(id=ids.LINK_OVER),
        dcc.Store(id=ids.ACCOUNT_TICK), dcc.Location(id=ids.URL, refresh=False),
        html.Header(className="top", children=[
            tour_panel.header_button(),
            html.H1("Private location statistics"),
            html.P("Upload points, publish counts with differential privacy, and see what the "
                   "privacy costs in accuracy."),
            role_note(config["page"]["owner"]),
            html.Div(id=ids.SHARE_NOTE, role="status"), alerts.layout(),
        ]),
        html.Div(className="workspace", children=[
            steps.side_panel({
                "data": [data_panel.layout(config)],
                "plan": [plan_panel.layout()],
                "release": [mechanism_panel.layout(config)],
                "explore": [queries_panel.layout(config), shapes_panel.layout(config)],
                "evaluate": [compare_panel.layout(config), evaluation_panel.layout(config),
                             interactive_panel.layout(config)],
                "publish": [ledger_panel.layout(config), export_panel.layout(config)]}),
            html.Main(className="map-area", children=[
                tour_panel.layout(config), map_panel.layout(config), queries_panel.answers_layout()]),
        ]),
    ])


def role_note(owner: bool) -> html.Div:
    """One line under the title: whether this browser is the data owner, and where the
    published releases are."""
    if owner:
        text = ("You are the data owner on this server: you open its files, see true counts, "
                "spend and publish its budget. ")
    else:
        text = ("You are a visitor: try the mechanisms on the samples (or your own files, where "
                "allowed); the owner's data is never shown here. ")
    return html.Div(id=ids.ROLE_NOTE, className="role-note owner" if owner else "role-note", children=[
        text, html.A("Published releases", href="/r/")])


def create_app(config: dict | None = None) -> Dash:
    """Build the Dash app; `config` overrides DEFAULT_CONFIG (upload limit, tiles, cache, workers).
    The owner token is hashed at once and only its hash kept (`sessions.owner_hash`)."""
    config = {**DEFAULT_CONFIG, **(config or {})}
    token = config.pop("owner_token") or secrets.token_urlsafe(32)
    config["owner_token_hash"] = sessions.owner_hash(token)
    if config["mechanism"] not in (None, *mechanism_panel.point_mechanisms()):
        raise ValueError(f"unknown mechanism {config['mechanism']!r}; expected one of "
                         f"{', '.join(mechanism_panel.point_mechanisms())}")
    if config["data_dir"] is not None and not Path(config["data_dir"]).is_dir():
        raise ValueError(f"the data folder {config['data_dir']!r} does not exist or is not a folder")
    secret = sessions.session_secret(config.get("accounts_dir"))
    app = Dash(__name__, title=TITLE, suppress_callback_exceptions=True, on_error=alerts.speak,
               use_pages=True, pages_folder="", background_callback_manager=background.JobsManager(secret))
    # Refuse an oversize request by its Content-Length before its body is read (Werkzeug raises
    # 413 on the first read). A file of max_upload_mb MB (1e6 bytes, as decode_upload counts)
    # arrives base64-encoded (4/3 larger) inside a JSON callback body: allow that plus 1 MB for
    # the rest of the body, so a file a little over the limit still reaches decode_upload and
    # its message there.
    upload_mb = config["max_upload_mb"]
    app.server.config["MAX_CONTENT_LENGTH"] = int(upload_mb * 1e6 * 4 / 3) + 1_000_000

    def request_too_large(_exc):
        return (f"The file is too large: uploads are limited to {upload_mb:g} MB (this request "
                "was larger). Nothing already loaded was lost.", 413,
                {"Content-Type": "text/plain; charset=utf-8"})
    app.server.register_error_handler(413, request_too_large)
    if config["heavy_workers"] and not config["accounts_dir"]:
        raise ValueError("heavy_workers needs accounts_dir: budget accounts kept in one process's "
                         "memory cannot be charged from another")
    services.open_services(config, secret).install(app.server)
    sessions.Sessions(secret, config["owner_token_hash"], bool(config["secure_cookies"]),
                      bool(config["public_uploads"])).install(app.server)
    state.load_samples()       # every sample made once, before the fork: the same in every worker
    pages.install(app, config, dashboard, TITLE)
    for panel in PANELS:
        panel.register_callbacks(app, config)
    inputs.register(app)
    guard.install(app.server, [app.config.routes_pathname_prefix + "_dash-update-component"])
    prepare_before_fork(app)
    return app


def prepare_before_fork(app: Dash) -> None:
    """Run Dash's once-per-process setup now, before gunicorn forks its workers.

    Dash registers the script paths it may serve (dash_leaflet's among them), and its pages'
    routing callback, in `before_request` hooks that run once, marking themselves done before
    doing it: a second request thread arriving meanwhile skips them, and its script request
    fails with HTTP 500 ("not a registered library") or its page never renders. Run once here
    (every hook of a plain GET of /), every worker starts with them done."""
    with app.server.test_request_context("/"):
        app.server.preprocess_request()


class Gunicorn(BaseApplication):
    """gunicorn run from Python: the app is made once before the workers fork (samples, secret
    and store settings shared); each worker serves it with a pool of request threads, behind
    the event loop of `server.front` (or, with front "gthread", gunicorn's threaded worker,
    kept to compare against: `benchmarks/slow_clients.py`)."""

    def __init__(self, app, options: dict, front_kind: str = "tornado",
                 read_timeout: float = front.READ_TIMEOUT):
        self.application, self.options, self.front_kind = app, options, front_kind
        self.read_timeout = read_timeout
        super().__init__()

    def load_config(self):
        for name, value in self.options.items():
            self.cfg.set(name, value)
        self.cfg.set("worker_class", front.worker_class(self.read_timeout)
                     if self.front_kind == "tornado" else "gthread")

    def load(self):
        """The app as each worker serves it (called in the worker, after the fork)."""
        if self.front_kind == "tornado":
            return front.container(self.application, self.cfg.threads)
        return self.application


def serve(app: Dash, host: str, port: int, workers: int, threads: int, front_kind: str = "tornado",
          read_timeout: float = front.READ_TIMEOUT):
    """Serve with gunicorn: `workers` processes of `threads` request threads each, behind
    `front_kind` (see Gunicorn), which disconnects a client slower than `read_timeout` seconds
    to send a request's headers.

    pandas (when installed) is imported here, before the workers fork. Otherwise pyarrow
    imports it in a worker's first upload (`Array.to_numpy`, 0.3 s), and meanwhile plotly's
    JSON encoder, answering in another request thread, finds it half imported in sys.modules
    and fails that answer with HTTP 500 (`benchmarks/load.py --uploads 5`: 4 to 12 failed
    cheap answers a run); imported once here, its pages are also shared by every worker."""
    try:
        __import__("pandas")
    except ImportError:          # not installed: neither pyarrow nor plotly needs it
        pass
    kept = app.server.extensions[services.EXTENSION]
    Gunicorn(app.server, {
        "bind": f"{host}:{port}", "workers": workers, "threads": threads,
        "timeout": 300, "graceful_timeout": 10,
        "control_socket_disable": True,
        "post_worker_init": lambda worker: kept.heavy.warm(),
        "worker_exit": lambda server, worker: kept.close(),   # a prompt exit
    }, front_kind, read_timeout).run()


def settings_of(a, token: str) -> dict:
    """The app's settings from the command line's arguments."""
    return {"max_upload_mb": a.max_upload_mb, "tiles_url": a.tiles_url,
            "accounts_dir": a.accounts_dir, "database_url": a.database_url,
            "default_budget": a.default_budget,
            "secure_cookies": a.secure_cookies, "eval_workers": a.eval_workers,
            "mechanism": a.mechanism, "heavy_workers": a.heavy_workers,
            "store_dir": a.store_dir, "redis_url": a.redis_url,
            "store_mb": a.store_mb, "memory_mb": a.memory_mb, "data_dir": a.data_dir,
            "owner_token": token, "public_uploads": a.public_uploads,
            "published_dir": a.published_dir}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050)
    p.add_argument("--debug", action="store_true",
                   help="Dash debug mode on Flask's dev server (one process, reloader, error pop-ups)")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                   help="gunicorn worker processes (they share the store)")
    p.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                   help="request threads per worker process")
    p.add_argument("--front", choices=("tornado", "gthread"), default="tornado",
                   help="how a worker reads requests: tornado's event loop reads each whole (a "
                        "slow client holds no request thread); gthread, gunicorn's threaded "
                        "worker, only to compare against")
    p.add_argument("--read-timeout", type=float, default=front.READ_TIMEOUT,
                   help="seconds a client may take to send a request's headers before it is "
                        "disconnected (its body may take 10 minutes: a large upload on a slow "
                        "link); tornado front")
    p.add_argument("--heavy-workers", type=int, default=DEFAULT_HEAVY,
                   help="processes per worker building releases (more wait, cheap requests do "
                        "not); 0 builds them in the request thread")
    p.add_argument("--store-dir", default=str(STORE_DIR),
                   help="folder of the store the workers share (ignored with --redis-url)")
    p.add_argument("--redis-url", help="keep the shared store in Redis, e.g. redis://127.0.0.1:6379/0")
    p.add_argument("--store-mb", type=float, default=DEFAULT_CONFIG["store_mb"],
                   help="bytes the shared store holds at most; each session at most a quarter, all "
                        "visitors together three quarters (the rest is kept for the owner)")
    p.add_argument("--memory-mb", type=float, default=DEFAULT_CONFIG["memory_mb"],
                   help="unpickled copies of stored objects each worker keeps in memory")
    p.add_argument("--max-upload-mb", type=float, default=DEFAULT_CONFIG["max_upload_mb"])
    p.add_argument("--tiles-url", default=DEFAULT_CONFIG["tiles_url"],
                   help="base map tile URL template; the app works without tiles (offline)")
    p.add_argument("--accounts-dir", default=str(ACCOUNTS_DIR),
                   help="folder keeping the server's key and, in SQLite, the budget accounts "
                        "across server restarts")
    p.add_argument("--database-url",
                   help="keep the budget accounts in this database instead, e.g. "
                        "postgresql+psycopg://user@host/dp: several hosts then share one budget")
    p.add_argument("--default-budget", type=float, default=DEFAULT_CONFIG["default_budget"],
                   help="total ε a dataset's account starts with (owners can only raise it)")
    p.add_argument("--secure-cookies", action="store_true",
                   help="send the session cookie only over HTTPS (set this behind a TLS proxy)")
    p.add_argument("--eval-workers", type=int, default=DEFAULT_CONFIG["eval_workers"],
                   help="evaluations (and, apart, plans and counts) run at the same time per worker "
                        "and role; later ones wait for a free worker")
    p.add_argument("--data-dir", help="a folder of CSV or Parquet files (or saved counts) that the "
                   "page may open by path or glob and count on the server, for data too big to "
                   "upload; nothing outside it can be opened")
    p.add_argument("--owner-token", default=os.environ.get(OWNER_TOKEN_ENV),
                   help="the secret of the owner link (default: the environment variable "
                        f"{OWNER_TOKEN_ENV}, else a new random one printed at start); the server "
                        "keeps only its hash")
    p.add_argument("--public-uploads", action=argparse.BooleanOptionalAction, default=True,
                   help="let visitors (not owners) upload files of their own into their own "
                        "workspace; --no-public-uploads leaves them the samples and published pages")
    p.add_argument("--published-dir", default=str(PUBLISHED_DIR),
                   help="folder where version 0.17 and earlier kept published releases as files: "
                        "they are moved into the database at start (published releases live there)")
    p.add_argument("--mechanism", choices=mechanism_panel.point_mechanisms(),
                   help="the mechanism picked at start (default: the recommended one, "
                        f"{dp.recommend('points').name})")
    a = p.parse_args(argv)
    for name in ("eval_workers", "workers", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.owner_token is not None and len(a.owner_token) < MIN_TOKEN_CHARS:
        p.error(f"the owner token must be at least {MIN_TOKEN_CHARS} characters (a guessable one "
                "would hand out the data's budget); leave it out to get a random one")
    if a.heavy_workers < 0:
        p.error("--heavy-workers must be 0 or more")
    if not a.read_timeout > 0:
        p.error("--read-timeout must be a positive number of seconds")
    if a.store_mb <= 0 or a.memory_mb < 0:
        p.error("--store-mb must be positive and --memory-mb not negative")
    memory.keep_flat()
    token = a.owner_token or secrets.token_urlsafe(32)
    try:
        app = create_app(settings_of(a, token))
    except ValueError as exc:            # a setting the server cannot run with, said in words
        p.error(str(exc))
    shown_host = "127.0.0.1" if a.host in ("0.0.0.0", "::") else a.host
    print(f"\nOwner link (keep it secret: it lets a browser open the server's files, see true "
          f"counts, spend and publish):\n    http://{shown_host}:{a.port}/owner?token={token}\n"
          f"Everyone else: http://{shown_host}:{a.port}/ (published releases at /r/)\n", flush=True)
    del token
    kept = app.server.extensions[services.EXTENSION]
    if isinstance(kept.store, FileStore):
        kept.store.remove_temporaries()     # half-written files of a server that was killed
    try:
        if a.debug:
            app.run(host=a.host, port=a.port, debug=True)
        else:
            serve(app, a.host, a.port, a.workers, a.threads, a.front, a.read_timeout)
    finally:
        kept.jobs.cancel_all()     # running evaluations stop at their next step: a prompt exit


if __name__ == "__main__":
    main()
