"""Small helpers shared by several test files."""
import contextlib
import os
import secrets
import socket
import time


def all_keys(obj):
    """Every dict key anywhere inside a JSON-like object (to prove what an export contains)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from all_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from all_keys(v)


def number(text: str) -> int:
    """A whole number as the tables show it ('12,345')."""
    return int(text.replace(",", ""))


def shown(x: float) -> str:
    """A private answer as the tables show it: whole people, at least 0, with separators."""
    return f"{max(0, round(x)):,}"


def spy_on_exact_counts(monkeypatch) -> list:
    """Record the name of every PointData whose exact counts are read (histogram, true_counts)
    from now on: evidence that a step reads only the data it should."""
    from dp.points import PointData
    read = []
    for name in ("histogram", "true_counts"):
        real = getattr(PointData, name)

        def spy(self, *a, _real=real, **kw):
            read.append(self.name)
            return _real(self, *a, **kw)
        monkeypatch.setattr(PointData, name, spy)
    return read


def new_sid() -> str:
    """A random server-side session id, as `server.sessions.session_id` makes from a cookie."""
    return secrets.token_hex(16)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float = 30):
    """Poll until condition() is true (the caller then asserts on state, never on time)."""
    end = time.monotonic() + timeout
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)


@contextlib.contextmanager
def set_off_by(*prop_ids: str):
    """Call a callback function as Dash would when these "id.property"s set it off (what
    `ctx.triggered_prop_ids` reads), without a request."""
    from dash._callback_context import context_value
    from dash._utils import AttributeDict
    token = context_value.set(AttributeDict(triggered_inputs=[{"prop_id": p, "value": None} for p in prop_ids]))
    try:
        yield
    finally:
        context_value.reset(token)


def dash_call(client, first_output: str, values: dict):
    """Call the app's callback whose first output is `first_output` ("id.property") and whose
    inputs hold the first key of `values` (the input that changed), as the page does, with
    `values` ("id.property" -> value) for its inputs and states (missing: None). A background
    callback's job is polled, as the page does, until its outputs come: its last answer."""
    trigger = next(iter(values))
    deps = client.get("/_dash-dependencies").get_json()
    dep = next(d for d in deps
               if d["output"].strip(".").split("...")[0].split("@")[0] == first_output
               and any(f"{i['id']}.{i['property']}" == trigger for i in d["inputs"]))
    outputs = [{"id": part.rsplit(".", 1)[0], "property": part.rsplit(".", 1)[1].split("@")[0]}
               for part in dep["output"].strip(".").split("...")]

    def spec(items):
        return [{"id": i["id"], "property": i["property"],
                 "value": values.get(f"{i['id']}.{i['property']}")} for i in items]
    body = {"output": dep["output"], "outputs": outputs if dep["output"].startswith("..") else outputs[0],
            "inputs": spec(dep["inputs"]), "state": spec(dep["state"]), "changedPropIds": [trigger]}
    answer = client.post("/_dash-update-component", json=body)
    return follow_job(client, body, answer) if dep.get("background") else answer


def follow_job(client, body: dict, answer):
    """The last answer to a background callback's request `body`: its job polled, as the page
    does, until its outputs come (or an error)."""
    if answer.status_code != 200 or "response" in answer.get_json():
        return answer
    handles = answer.get_json()
    body = {**body, **{part: [{**item, "value": None} if isinstance(item, dict) else item   # a poll sends
                              for item in body[part]] for part in ("inputs", "state")}}   # values as null
    while True:
        time.sleep(0.05)
        answer = client.post(f"/_dash-update-component?cacheKey={handles['cacheKey']}&job={handles['job']}",
                             json=body)
        if answer.status_code != 200 or "response" in answer.get_json():
            return answer



def postgres_binaries():
    """The folder of PostgreSQL's server programs (Debian's package), or None."""
    import glob
    import shutil
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class Postgres:
    """A throwaway PostgreSQL cluster in a temporary folder, listening on a Unix socket only
    (as root, run as Debian's `postgres` user, since the server refuses to run as root).
    `database()` gives the URL of a fresh, empty database."""

    def __init__(self, folder):
        import shutil
        import subprocess
        bin_dir = postgres_binaries()
        self.folder, self.count = str(folder), 0
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if as_user:
            shutil.chown(self.folder, "postgres")
        self._ctl = as_user + [os.path.join(bin_dir, "pg_ctl"), "-D", os.path.join(self.folder, "data")]
        subprocess.run(as_user + [os.path.join(bin_dir, "initdb"), "-D", os.path.join(self.folder, "data"),
                                  "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
                       check=True, capture_output=True)
        subprocess.run(self._ctl + ["-o", f"-k {self.folder} -c listen_addresses='' -F", "-l",
                                    os.path.join(self.folder, "log"), "-w", "start"],
                       check=True, capture_output=True)

    def url(self, name: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{name}?host={self.folder}"

    def database(self) -> str:
        import sqlalchemy as sa
        self.count += 1
        name = f"test_{self.count}"
        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        engine.dispose()
        return self.url(name)

    def stop(self):
        import subprocess
        subprocess.run(self._ctl + ["-m", "immediate", "stop"], capture_output=True)


def _accounts_engine(where):
    """An engine on the accounts' database: `where` is a database URL (SQLite or PostgreSQL) or
    the server's accounts folder (its SQLite file); None when the folder has none yet."""
    import sqlalchemy as sa
    where = str(where)
    if "://" not in where:
        path = os.path.join(where, "dp.sqlite3")
        if not os.path.exists(path):
            return None
        where = f"sqlite:///{path}"
    return sa.create_engine(where, connect_args={"timeout": 30} if where.startswith("sqlite") else {})


def account_bodies(where) -> dict:
    """name -> the stored text of each budget account in the server's database (`where`: its
    accounts folder or its URL), the most recently written last; {} before the first."""
    import sqlalchemy as sa

    from server import database
    engine = _accounts_engine(where)
    if engine is None:
        return {}
    table = database.accounts
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.select(table.c.name, table.c.body).order_by(table.c.written)).all())
    finally:
        engine.dispose()


def set_account_body(where, name: str, body: str):
    """Change an account's stored text by hand (as someone with the database could)."""
    from server import database
    engine = _accounts_engine(where)
    try:
        with engine.begin() as conn:
            conn.execute(database.accounts.update().where(database.accounts.c.name == name).values(body=body))
    finally:
        engine.dispose()


def database_charges(url: str) -> list:
    """Every charge in every budget account of the database at `url` (SQLite or PostgreSQL)."""
    import json
    return [c for body in account_bodies(url).values() for c in json.loads(body)["charges"]]


def account_charges(folder) -> list:
    """Every charge in every budget account in `folder` (a damaged one is skipped here)."""
    import json
    out = []
    for body in account_bodies(folder).values():
        try:
            out += json.loads(body)["charges"]
        except ValueError:
            pass
    return out


def page_request(path: str = "/", search: str = "") -> dict:
    """The callback request Dash Pages' routing callback gets when a page opens at `path` (what
    dcc.Location sends as it mounts): POST it to /_dash-update-component, and the answer holds
    the page rendered for this browser."""
    from components import ids
    return {"output": f"..{ids.PAGES_CONTENT}.children...{ids.PAGES_STORE}.data..",
            "outputs": [{"id": ids.PAGES_CONTENT, "property": "children"},
                        {"id": ids.PAGES_STORE, "property": "data"}],
            "inputs": [{"id": ids.PAGES_LOCATION, "property": "pathname", "value": path},
                       {"id": ids.PAGES_LOCATION, "property": "search", "value": search}],
            "changedPropIds": [f"{ids.PAGES_LOCATION}.pathname"], "state": []}


def page_layout(client, path: str = "/") -> dict:
    """The page a Flask test client's browser gets at `path` (its component tree as JSON)."""
    from components import ids
    answer = client.post("/_dash-update-component", json=page_request(path))
    assert answer.status_code == 200, answer.get_data(as_text=True)[:300]
    return answer.get_json()["response"][ids.PAGES_CONTENT]["children"]


def endless_count(files, folder, domain, cells, progress):
    """Stands in for `components.server_files.count` as a count too long to finish: it only
    reports progress (every 0.05 s, for at most two minutes) until its progress callback stops it."""
    for step in range(2400):
        progress(step, 2400)
        time.sleep(0.05)
    raise AssertionError("the count was never stopped")

