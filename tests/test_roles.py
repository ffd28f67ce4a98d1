"""The data owner and the public: the owner link, owner-only server data, one budget for the
server's data whatever the browser, accounts derived on the server, and uploads by visitors;
with the accounts in SQLite and in PostgreSQL.

Each test client is a browser with its own cookie jar (see test_isolation). The owner opens
`/owner?token=...`; a visitor never does.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import dp
from app import create_app
from components import ids
from server import releases, services, sessions, state, store, workspace
from helpers import dash_call, page_layout

TOKEN = "owner-token-for-tests"
SECRET_LINE = "db_password=hunter2-do-not-show"


@pytest.fixture()
def folder(tmp_path):
    """A data folder: saved counts over a public box, a CSV, and a text file that is not data."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rng = np.random.default_rng(5)
    pts = np.column_stack([rng.uniform(-0.2, 0.0, 500), rng.uniform(51.4, 51.6, 500)])
    box = dp.Domain(-0.2, 51.4, 0.0, 51.6, name="Test box")
    (data_dir / "trips.csv").write_text("lon,lat\n" + "\n".join(f"{x},{y}" for x, y in pts))
    dp.aggregate(str(data_dir / "trips.csv"), box, 32).save(data_dir / "city.npz")
    (data_dir / "notes.txt").write_text(SECRET_LINE + "\nsecond line\n")
    return data_dir


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request):
    """Where the accounts live: None (SQLite in the accounts folder) or a fresh PostgreSQL
    database; each guarantee here holds on both."""
    return None if request.param == "sqlite" else request.getfixturevalue("postgres").database()


def make_server(tmp_path, folder, database=None, **config):
    return create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "owner_token": TOKEN,
                       "data_dir": str(folder), "accounts_dir": str(tmp_path / "accounts"),
                       "database_url": database, "heavy_workers": 0, **config}).server


def browser(server, owner: bool):
    """(test client, session id): a browser that loaded the page, as the owner or a visitor."""
    client = server.test_client()
    assert client.get("/").status_code == 200
    if owner:
        r = client.get(f"/owner?token={TOKEN}")
        assert r.status_code == 302 and r.headers["Location"].endswith("/")
        mark = client.get_cookie(sessions.OWNER_COOKIE)
        assert mark is not None and mark.http_only
    cookie = client.get_cookie(sessions.COOKIE)
    with server.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={cookie.value}"}):
        return client, sessions.session_id()


def as_browser(server, client):
    """A request context carrying this client's cookies (state's functions read them)."""
    jar = "; ".join(f"{c.key}={c.value}" for c in (client.get_cookie(sessions.COOKIE),
                                                 client.get_cookie(sessions.OWNER_COOKIE)) if c)
    return server.test_request_context(headers={"Cookie": jar})


def open_file(client, text):
    return dash_call(client, f"{ids.DATASET}.data", {
        f"{ids.SERVER_OPEN}.n_clicks": 1, f"{ids.SERVER_PATH}.value": text,
        f"{ids.SERVER_CELLS}.value": 64,
        f"{ids.DOMAIN}.data": {"domain": {"west": -0.2, "south": 51.4, "east": 0.0, "north": 51.6,
                                          "name": "Test box", "leaky": False}}})


def test_the_owner_link_needs_the_token_and_only_its_hash_is_kept(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database)
    kept = server.extensions[sessions.EXTENSION]
    assert kept.owner_token_hash == sessions.owner_hash(TOKEN) and TOKEN not in repr(vars(kept))
    client = server.test_client()
    client.get("/")
    wrong = client.get("/owner?token=guess")
    assert wrong.status_code == 403 and client.get_cookie(sessions.OWNER_COOKIE) is None
    assert "not valid" in wrong.get_data(as_text=True)
    visitor_layout = json.dumps(page_layout(client))
    assert "You are a visitor" in visitor_layout and ids.SERVER_PATH not in visitor_layout
    owner, _ = browser(server, owner=True)
    owner_layout = json.dumps(page_layout(owner))
    assert "You are the data owner" in owner_layout and ids.SERVER_PATH in owner_layout


def test_the_owner_link_starts_a_new_session(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database)
    client = server.test_client()
    client.get("/")
    known = client.get_cookie(sessions.COOKIE).value        # a session someone else may know
    with as_browser(server, client):
        assert not sessions.session_id().startswith(store.RESERVED)      # a visitor's session
    client.get(f"/owner?token={TOKEN}")
    assert client.get_cookie(sessions.COOKIE).value != known
    with as_browser(server, client):
        assert sessions.is_owner()
        assert sessions.session_id().startswith(store.RESERVED)   # uses the store's share kept from visitors
    nonce = known.split(".")[0]                  # a visitor cannot make its cookie an owner's
    with server.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={nonce}.{'0' * 32}"}):
        assert not sessions.session_id().startswith(store.RESERVED)


def test_a_new_token_ends_every_earlier_owner(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database)
    owner, _ = browser(server, owner=True)
    with as_browser(server, owner):
        assert sessions.is_owner()
    restarted = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "owner_token": "another",
                            "accounts_dir": str(tmp_path / "accounts"), "database_url": database,
                            "heavy_workers": 0}).server
    with as_browser(restarted, owner):          # the same key beside the accounts, a new token
        assert sessions.has_session() and not sessions.is_owner()


def test_a_visitor_cannot_open_server_files_and_learns_nothing_of_them(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database)
    visitor, sid = browser(server, owner=False)
    for text in ("notes.txt", "trips.csv", "*.csv", "city.npz"):
        r = open_file(visitor, text)
        body = r.get_data(as_text=True)
        assert r.status_code == 200 and "only the data owner" in body, body
        assert SECRET_LINE not in body and "500" not in body.replace("500.", "")
        assert "points counted" not in body and "Counting" not in body
    assert workspace.get(sid).get("dataset") is None          # nothing of it was kept


def test_the_owner_opens_files_into_the_owners_workspace(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database)
    owner, osid = browser(server, owner=True)
    body = open_file(owner, "city.npz").get_data(as_text=True)
    assert "Loaded city.npz: 500 points counted" in body
    assert workspace.get(osid)["dataset"]["origin"] == "server"


def release_of(sid, fingerprint, epsilon):
    key = releases.release_key(fingerprint, dp.Domain(-0.2, 51.4, 0.0, 51.6, name="Test box"),
                            "identity", {"grid_size": 16}, [1.0], epsilon, None)
    return releases.release(sid, key, create=True)


def counts_info(server, client, sid, folder):
    """An owner's browser opening the saved counts (as the Open button does)."""
    data = dp.load_counts(folder / "city.npz", name="city")
    with as_browser(server, client):
        return state.put_server_data(sid, data)


def test_server_data_has_one_budget_whichever_owner_browser_spends_it(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database, default_budget=10.0)
    owners = [browser(server, owner=True) for _ in range(3)]
    for client, sid in owners:
        info = counts_info(server, client, sid, folder)
        with as_browser(server, client):
            release_of(sid, info["fingerprint"], 4.0 if client is owners[0][0] else 3.0)
    client, sid = owners[0]
    with as_browser(server, client):
        acc = state.account(sid, info["fingerprint"])
        assert acc.spent == pytest.approx(10.0) and len(acc.charges) == 3
        with pytest.raises(dp.BudgetError):
            release_of(sid, info["fingerprint"], 0.5)
    with as_browser(server, owners[1][0]):                    # the same account, seen by another
        assert state.account(owners[1][1], info["fingerprint"]).spent == pytest.approx(10.0)


def test_the_same_points_uploaded_by_an_owner_share_the_servers_budget(tmp_path, folder, database):
    """The owner who uploads the file the server also serves spends one budget, whichever owner
    link (browser) uploads it (the upload used to get a fresh account: 0 spent beside 4)."""
    import base64
    server = make_server(tmp_path, folder, database, default_budget=10.0)
    first, fsid = browser(server, owner=True)
    info = counts_info(server, first, fsid, folder)
    with as_browser(server, first):
        release_of(fsid, info["fingerprint"], 4.0)
    npz = "data:application/octet-stream;base64," + base64.b64encode((folder / "city.npz").read_bytes()).decode()
    for client, sid in (browser(server, owner=True), (first, fsid)):
        with as_browser(server, client):
            current = state.use_sample(sid, "small_city_5k")
        body = dash_call(client, f"{ids.DATASET}.data", {
            f"{ids.UPLOAD}.contents": npz, f"{ids.UPLOAD}.filename": "city.npz",
            f"{ids.UPLOAD_KIND}.value": "points", f"{ids.DATASET}.data": current}).get_json()
        uploaded = body["response"][ids.DATASET]["data"]
        assert uploaded["origin"] == "upload"
        with as_browser(server, client):
            assert state.account(sid, uploaded["fingerprint"]).spent == pytest.approx(4.0)


def test_a_browser_that_is_no_longer_an_owner_cannot_spend_server_data(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database)
    client, sid = browser(server, owner=True)
    info = counts_info(server, client, sid, folder)
    seeded = releases.release_key(info["fingerprint"], dp.Domain(-0.2, 51.4, 0.0, 51.6, name="Test box"),
                               "identity", {"grid_size": 16}, [1.0], 5.0, 7)      # never released
    client.delete_cookie(sessions.OWNER_COOKIE)
    body = dash_call(client, f"{ids.EXPORT_DOWNLOAD}.data", {f"{ids.EXPORT_BUTTON}.n_clicks": 1,
                                                             f"{ids.RELEASE}.data": {"key": seeded}})
    assert "FeatureCollection" not in body.get_data(as_text=True)        # nothing built, nothing spent
    with as_browser(server, client):
        assert not sessions.is_owner()
        with pytest.raises(LookupError):
            state.points(sid, info["fingerprint"])        # its data, true counts and all: gone
    assert services.current().accounts.get(state.SERVER, state.account_key(dp.load_counts(folder / "city.npz"))).spent == 0
    with as_browser(server, client):
        with pytest.raises(LookupError, match="only the data owner"):
            release_of(sid, info["fingerprint"], 1.0)
        with pytest.raises(LookupError, match="only the data owner"):
            state.charge(sid, info["fingerprint"], lambda acc: acc.raise_total(20, confirm=True))
        assert workspace.page(sid, state.DEFAULT_SAMPLE)["dataset"]["origin"] != "server"
    visitor, vsid = browser(server, owner=False)               # nor a visitor naming its data
    with as_browser(server, visitor), pytest.raises(LookupError):
        release_of(vsid, info["fingerprint"], 1.0)


def test_an_account_name_sent_by_the_page_is_refused(tmp_path, folder, database):
    server = make_server(tmp_path, folder, database)
    visitor, sid = browser(server, owner=False)
    with as_browser(server, visitor):
        info = state.use_sample(sid, "small_city_5k")
    assert "account" not in info                             # the page is never told one
    forged = {**info, "account": "made-up"}
    raise_total = {f"{ids.ACCOUNT_CONFIRM}.submit_n_clicks": 1, f"{ids.ACCOUNT_RAISE_VALUE}.value": 20}
    r = dash_call(visitor, f"{ids.ACCOUNT_TICK}.data", {**raise_total, f"{ids.DATASET}.data": forged})
    assert r.status_code == 400 and "summary of the dataset loaded" in r.get_data(as_text=True)
    r = dash_call(visitor, f"{ids.ACCOUNT_TICK}.data", {**raise_total, f"{ids.DATASET}.data": info})
    assert r.status_code == 200 and "raised to ε = 20" in json.dumps(r.get_json(), ensure_ascii=False)  # its own


def test_visitor_uploads_follow_the_servers_choice(tmp_path, folder, database):
    csv = "data:text/csv;base64," + __import__("base64").b64encode(b"lon,lat\n-0.1,51.5\n-0.11,51.51\n").decode()
    values = {f"{ids.UPLOAD}.contents": csv, f"{ids.UPLOAD}.filename": "mine.csv",
              f"{ids.UPLOAD_KIND}.value": "points"}
    def upload(client, sid):
        with as_browser(server, client):
            current = state.use_sample(sid, "small_city_5k")
        return dash_call(client, f"{ids.DATASET}.data",
                         {**values, f"{ids.DATASET}.data": current}).get_data(as_text=True)
    server = make_server(tmp_path, folder, database, public_uploads=False)
    visitor, vsid = browser(server, owner=False)
    assert "Uploads on this server are for its data owner" in json.dumps(page_layout(visitor))
    assert "uploads on this server are for its data owner only" in upload(visitor, vsid)
    assert "Loaded mine.csv: 2 points" in upload(*browser(server, owner=True))
    server = make_server(tmp_path, folder, database)                     # the default: visitors upload their own
    assert "Loaded mine.csv: 2 points" in upload(*browser(server, owner=False))


def test_the_command_line_prints_the_owner_link_and_refuses_a_short_token(tmp_path, monkeypatch, capsys):
    import app as app_module
    served = []
    monkeypatch.setattr(app_module, "serve", lambda app, *a: served.append(app))   # printed only
    monkeypatch.setenv(app_module.OWNER_TOKEN_ENV, "x" * 30)
    common = ["--accounts-dir", str(tmp_path / "a"), "--store-dir", str(tmp_path / "s"),
              "--published-dir", str(tmp_path / "p"), "--port", "8123"]
    app_module.main(common)
    assert f"http://127.0.0.1:8123/owner?token={'x' * 30}" in capsys.readouterr().out
    assert served[0].server.extensions[sessions.EXTENSION].owner_token_hash == sessions.owner_hash("x" * 30)
    with pytest.raises(SystemExit):
        app_module.main([*common, "--owner-token", "short"])
    assert "at least 22 characters" in capsys.readouterr().err
    with pytest.raises(SystemExit):                      # a setting it cannot run with: words, no traceback
        app_module.main([*common, "--data-dir", str(tmp_path / "no-such-folder")])
    assert "does not exist or is not a folder" in capsys.readouterr().err
