"""Published releases (`server.published`): kept in the server's database across restarts,
signed so a row changed or copied outside the app is refused before it is unpickled, ids
checked by shape, owner-only diagnostics never published, files of earlier versions moved in;
and the public page's downloads and answers (no browser)."""
from __future__ import annotations

import base64
import csv
import io
import json
import math
import pickle

import numpy as np
import plotly.utils
import pytest
import sqlalchemy as sa

import dp
from dp.provenance import provenance
from dp.whole_counts import whole_nonnegative
from server import published, services
from server.accounts import AccountStore
from server.database import published as table

KEY = b"k" * 32


def opened(folder, key: bytes = KEY) -> published.PublishedReleases:
    """The published releases in the database of the accounts in `folder` as a process opens
    them (a restart: nothing in memory), made the services' own (those of the app a test made
    last, whose pages read them)."""
    services.current().published = published.PublishedReleases(AccountStore(folder), key)
    return services.current().published


def rows(folder) -> dict:
    """Every published row in the database in `folder`, by id, read as another program would."""
    with AccountStore(folder).engine.connect() as conn:
        return {r.id: r for r in conn.execute(sa.select(table))}


def change(folder, pid: str, **values) -> None:
    """Change a published row outside the app."""
    with AccountStore(folder).engine.begin() as conn:
        conn.execute(table.update().where(table.c.id == pid).values(**values))


def flipped(data):
    """`data` (bytes or text, returned as such) with one bit of a byte near its end changed."""
    raw = bytearray(data.encode() if isinstance(data, str) else data)
    raw[-5] ^= 0x01
    return raw.decode() if isinstance(data, str) else bytes(raw)


@pytest.fixture(scope="module")
def sample():
    return dp.load_sample("small_city_5k")


@pytest.fixture(scope="module")
def rel(sample):
    data, domain = sample
    return dp.release("privtree", data, domain, epsilon=1.0)


@pytest.fixture
def folder(tmp_path):
    opened(tmp_path / "published")
    return tmp_path / "published"


def test_publish_round_trip_survives_a_restart(folder, rel):
    pid = services.current().published.publish(rel, "  Taxi pick-ups  ")
    assert published.valid_id(pid) and list(rows(folder)) == [pid]
    rec = services.current().published.record(pid)
    assert rec["id"] == pid and rec["title"] == "Taxi pick-ups"
    assert rec["mechanism"] == rel.spec.label and rec["epsilon"] == 1.0
    assert rec["privacy_level"] == rel.privacy_level and rec["unit"] == rel.spec.unit
    assert rec["guarantee"] == rel.spec.guarantee and rec["describe"] == rel.describe()
    assert rec["domain"] == rel.domain.to_dict() and rec["domain"]["name"] == "London" and rec["time"]
    back = services.current().published.release(pid)
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    assert back.answer(rect) == rel.answer(rect) and back.to_json() == rel.to_json()
    assert [r["id"] for r in services.current().published.gallery()] == [pid]
    opened(folder, KEY)                    # a restart: a new process, same database
    assert services.current().published.release(pid).answer(rect) == rel.answer(rect)
    assert services.current().published.record(pid) == rec
    opened(folder, b"another key of 32 bytes........")   # another server's key
    assert services.current().published.gallery() == [] and pytest.raises(LookupError, services.current().published.release, pid)


def test_published_copy_has_no_diagnostics(folder, rel):
    assert rel.diagnostics, "PrivTree keeps owner-only diagnostics"
    pid = services.current().published.publish(rel, "")
    assert rel.diagnostics                              # the owner's release is left as it was
    assert services.current().published.release(pid).diagnostics == {}
    row = rows(folder)[pid]
    assert pickle.loads(row.payload).diagnostics == {} and "diagnostics" not in row.record


def test_titles_are_stripped_truncated_or_made(folder, rel):
    long = services.current().published.record(services.current().published.publish(rel, "x" * 500))["title"]
    assert long == "x" * published.MAX_TITLE
    made = services.current().published.record(services.current().published.publish(rel, "   "))["title"]
    assert made == f"{rel.spec.label} over London, ε = 1"


@pytest.mark.parametrize("column", ["payload", "record"])
def test_a_changed_row_is_refused_and_not_unpickled(folder, rel, monkeypatch, column):
    pid = services.current().published.publish(rel, "tampered")
    change(folder, pid, **{column: flipped(getattr(rows(folder)[pid], column))})
    opened(folder, KEY)                    # no copy in memory: read from the database
    loads = []
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: loads.append(1))
    with pytest.raises(LookupError, match="changed outside the app"):
        if column == "payload":
            services.current().published.release(pid)
        else:
            services.current().published.record(pid)
    assert loads == []
    listed = [r["id"] for r in services.current().published.gallery()]
    assert (pid in listed) == (column == "payload")     # a changed record leaves the gallery


def test_a_changed_row_after_serving_is_refused_too(folder, rel):
    """A copy kept in memory is used only while its row's signature is the one it was read
    with: a pickle changed with a signature of its own making is refused."""
    pid = services.current().published.publish(rel, "cached")
    services.current().published.release(pid)                 # now in this process's cache
    change(folder, pid, payload=flipped(rows(folder)[pid].payload), payload_mac="0" * 64)
    with pytest.raises(LookupError, match="changed outside the app"):
        services.current().published.release(pid)


def test_rows_copied_between_ids_are_refused(folder, rel):
    a, b = services.current().published.publish(rel, "a"), services.current().published.publish(rel, "b")
    row = rows(folder)[a]
    change(folder, b, record=row.record, record_mac=row.record_mac, payload=row.payload,
           payload_mac=row.payload_mac)
    with pytest.raises(LookupError, match="changed outside the app"):
        services.current().published.record(b)
    with pytest.raises(LookupError, match="changed outside the app"):
        services.current().published.release(b)


@pytest.mark.parametrize("pid", ["../../etc/pa", "..%2F..%2Fabc", "a" * 11, "a" * 13, "abc/defghijk",
                                 "abcdefghijk\u00e9", None, 12])
def test_a_bad_id_is_refused_without_a_query(folder, monkeypatch, pid):
    def touched(*a, **k):
        raise AssertionError("the database was asked")
    monkeypatch.setattr(services.current().published._accounts, "transaction", touched)
    assert services.current().published.record(pid) is None
    with pytest.raises(LookupError, match="not on this server"):
        services.current().published.release(pid)
    assert services.current().published.unpublish(pid) is False


def test_each_process_keeps_published_releases_up_to_a_byte_bound(folder, rel, monkeypatch):
    """The unpickled copies a process keeps are bounded by their pickles' bytes as well as their
    number (a few large releases could hold gigabytes under a count alone); the newest stays."""
    pids = [services.current().published.publish(rel, f"r{i}") for i in range(4)]
    size = len(rows(folder)[pids[0]].payload)
    monkeypatch.setattr(published, "CACHE_BYTES", int(2.5 * size))
    for pid in pids:
        assert services.current().published.release(pid).spec.name == "privtree"
    assert list(services.current().published._cache) == pids[-2:]                 # two pickles fit, not three
    monkeypatch.setattr(published, "CACHE_BYTES", size // 2)  # one bigger than the bound: kept alone
    services.current().published.release(pids[0])
    assert list(services.current().published._cache) == pids[:1]


def test_unpublish_removes_it(folder, rel):
    pid = services.current().published.publish(rel, "gone soon")
    services.current().published.release(pid)
    assert services.current().published.unpublish(pid) is True
    assert rows(folder) == {} and services.current().published.record(pid) is None
    assert services.current().published.gallery() == []
    with pytest.raises(LookupError, match="not on this server"):
        services.current().published.release(pid)
    assert services.current().published.unpublish(pid) is False


def test_gallery_is_newest_first_and_skips_bad_rows(folder, rel, monkeypatch):
    pids = []
    for i, t in enumerate(["2024-01-01T00:00:00+00:00", "2025-01-01T00:00:00+00:00", "2023-01-01T00:00:00+00:00"]):
        monkeypatch.setattr(published.datetime, "datetime", _frozen(t))
        pids.append(services.current().published.publish(rel, f"r{i}"))
    assert [r["title"] for r in services.current().published.gallery()] == ["r1", "r0", "r2"]
    change(folder, pids[1], record="{}")
    assert [r["title"] for r in services.current().published.gallery()] == ["r0", "r2"]


def old_files(folder, pid: str, record: dict, rel, key: bytes = KEY) -> None:
    """A release published by 0.17 or earlier: two files, each a line holding the HMAC of its
    name and payload, then the payload."""
    import hashlib
    import hmac
    folder.mkdir(parents=True, exist_ok=True)
    for name, payload in ((f"{pid}.pkl", pickle.dumps(rel)), (f"{pid}.json", json.dumps(record).encode())):
        mac = hmac.new(key, name.encode() + b"\n" + payload, hashlib.sha256).hexdigest()
        (folder / name).write_bytes(mac.encode() + b"\n" + payload)


def test_files_of_earlier_versions_move_into_the_database(tmp_path, rel):
    """A server upgraded from 0.17 opens its published folder: each release whose two files
    check out becomes a row (served, listed) and its files go; a changed file stays, unused; a
    second start moves nothing more."""
    old = tmp_path / "published"
    good, bad = "abcdefghijkl", "mnopqrstuvwx"
    for pid in (good, bad):
        old_files(old, pid, {"id": pid, "title": f"old {pid}", "time": "2026-01-01T00:00:00+00:00"}, rel)
    raw = bytearray((old / f"{bad}.pkl").read_bytes())
    raw[-3] ^= 0x01
    (old / f"{bad}.pkl").write_bytes(bytes(raw))
    pub = published.PublishedReleases(AccountStore(tmp_path / "accounts"), KEY)
    assert pub.import_folder(old) == 1
    assert sorted(p.name for p in old.iterdir()) == [f"{bad}.json", f"{bad}.pkl"]
    assert [r["title"] for r in pub.gallery()] == [f"old {good}"]
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    assert pub.release(good).answer(rect) == rel.answer(rect) and pub.record(bad) is None
    assert pub.import_folder(old) == 0 and pub.import_folder(tmp_path / "none") == 0
    # a server's start does it, with the key it derives from its secret
    from server import sessions
    accounts = tmp_path / "server-accounts"
    key = sessions.derive_key(sessions.session_secret(str(accounts)), "published")
    old_files(tmp_path / "server-published", good, {"id": good, "title": "served"}, rel, key)
    services.open_services({"accounts_dir": str(accounts), "published_dir": str(tmp_path / "server-published")})
    assert [r["title"] for r in services.current().published.gallery()] == ["served"]
    assert list((tmp_path / "server-published").iterdir()) == []


def test_an_unpublished_release_never_comes_back_from_old_files(tmp_path, rel, monkeypatch):
    """Old files that could not be removed (a read-only folder: the start goes on, said in the
    log) or a copy of them restored later never bring back a release the owner unpublished."""
    import pathlib
    old, pid = tmp_path / "published", "abcdefghijkl"
    old_files(old, pid, {"id": pid, "title": "old"}, rel)
    kept = {f.name: f.read_bytes() for f in old.iterdir()}

    def refused(self, missing_ok=False):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(pathlib.Path, "unlink", refused)
    pub = published.PublishedReleases(AccountStore(tmp_path / "accounts"), KEY)
    assert pub.import_folder(old) == 1 and pub.record(pid)["title"] == "old"
    assert sorted(f.name for f in old.iterdir()) == sorted(kept)          # left, and said so
    assert pub.unpublish(pid) is True
    again = published.PublishedReleases(AccountStore(tmp_path / "accounts"), KEY)   # a restart
    again.import_folder(old)
    assert again.record(pid) is None and again.gallery() == []
    monkeypatch.undo()
    for name, raw in kept.items():                                         # a backup restored
        (old / name).write_bytes(raw)
    again.import_folder(old)
    assert again.record(pid) is None and again.gallery() == []


def test_a_row_imported_twice_is_kept_once(folder, rel):
    pub = services.current().published
    pid = pub.publish(rel, "once")
    row = rows(folder)[pid]
    pub._insert(pid, '{"id": "%s", "title": "twice"}' % pid, bytes(row.payload))   # no error
    assert pub.record(pid)["title"] == "once"


def test_a_signature_no_server_could_make_is_refused_not_an_error(folder, rel):
    pid = services.current().published.publish(rel, "odd")
    change(folder, pid, record_mac="é" * 64, payload_mac="\u00e9" * 64)
    with pytest.raises(LookupError, match="changed outside the app"):
        services.current().published.record(pid)
    with pytest.raises(LookupError, match="changed outside the app"):
        services.current().published.release(pid)
    assert services.current().published.gallery() == []


def test_public_pages_never_wait_behind_a_charge(folder, rel):
    """Reading a published release takes no write lock on SQLite: it completes while another
    connection holds the lock a charge takes (BEGIN IMMEDIATE), not after."""
    import threading
    pub = services.current().published
    pid = pub.publish(rel, "read me")
    holding, read = threading.Event(), threading.Event()

    def charge_in_progress():
        with pub._accounts.transaction() as conn:            # the write lock, as a charge holds it
            conn.exec_driver_sql("UPDATE published SET written = written WHERE id = 'none'")
            holding.set()
            read.wait(timeout=20)
    writer = threading.Thread(target=charge_in_progress)
    writer.start()
    assert holding.wait(timeout=20)
    assert pub.record(pid)["title"] == "read me" and pub.release(pid) is not None
    assert [r["id"] for r in pub.gallery()] == [pid]
    released_first = writer.is_alive()                       # the writer still holds its lock
    read.set()
    writer.join()
    assert released_first


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_servers_sharing_a_database_serve_each_others_releases(tmp_path, rel, engine, request):
    """Two servers (processes, or hosts on PostgreSQL) sharing one database: a release one
    publishes is served and listed by the other, and gone from both once unpublished."""
    if engine == "sqlite":
        a, b = (published.PublishedReleases(AccountStore(tmp_path), KEY) for _ in range(2))
    else:
        url = request.getfixturevalue("postgres").database()
        a, b = (published.PublishedReleases(AccountStore(url=url), KEY) for _ in range(2))
    pid = a.publish(rel, "shared")
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    assert b.release(pid).answer(rect) == rel.answer(rect)
    assert [r["id"] for r in b.gallery()] == [pid] and b.record(pid)["title"] == "shared"
    assert b.unpublish(pid) is True
    assert a.record(pid) is None and a.gallery() == []
    with pytest.raises(LookupError, match="not on this server"):
        a.release(pid)


def _frozen(iso: str):
    import datetime

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromisoformat(iso)
    return Frozen


# ---------------------------------------------------------------- the public page, no browser
@pytest.mark.parametrize("mechanism", ["privtree", "full_quadtree"])
def test_about_says_what_the_downloaded_cells_hold(sample, mechanism):
    # issue 44: the page said the cells keep negative values while the file had none. The words
    # are now counted from the very values the cells CSV writes
    from components import public_page
    data, domain = sample
    rel = dp.release(mechanism, data, domain, 0.1, seed=np.random.default_rng(4))
    block = provenance(rel)
    counts = np.array([float(r[4]) for r in list(csv.reader(io.StringIO(public_page.cells_csv(rel, block))))[1:]])
    words = public_page.cells_words(rel)
    assert f"({len(counts):,} cells)" in words
    if (counts < 0).any():
        assert f"{int((counts < 0).sum()):,} of them are below 0" in words
    else:
        assert "none is below 0" in words and f"{int((counts == 0).sum()):,} are exactly 0" in words


def test_both_kinds_of_cells_are_said(sample):
    # the two cases above are both met: PrivTree at ε 0.1 keeps negative counts, the full quadtree none
    from components import public_page
    data, domain = sample
    words = [public_page.cells_words(dp.release(m, data, domain, 0.1, seed=np.random.default_rng(4)))
             for m in ("privtree", "full_quadtree")]
    assert "of them are below 0" in words[0] and "none is below 0" in words[1]


def test_downloads_parse_and_hold_only_the_release(folder, rel):
    from components import public_page

    pid = services.current().published.publish(rel, "downloads")
    geo = json.loads(public_page.download(public_page.GEOJSON_BUTTON, pid)["content"])
    assert geo["type"] == "FeatureCollection" and geo["properties"]["mechanism"] == "privtree"
    rows = list(csv.reader(io.StringIO(public_page.download(public_page.CSV_BUTTON, pid)["content"])))
    grid, regions, counts = rel.regions()
    assert rows[0] == ["west", "south", "east", "north", "count", "people", "mechanism", "epsilon",
                       "unit_of_privacy", "software_version", "WKT"] and len(rows) == len(regions) + 1
    assert {tuple(r[6:8]) for r in rows[1:]} == {("privtree", "1")}   # the GeoJSON's release, stamped
    cells = np.array([r[:6] for r in rows[1:]], dtype=float)
    assert np.array_equal(cells[:, 5], whole_nonnegative(counts))
    assert np.allclose(cells[:, 4], counts) and np.all(cells[:, 0] < cells[:, 2]) and np.all(cells[:, 1] < cells[:, 3])
    d = rel.domain
    assert cells[:, 0].min() == pytest.approx(d.west) and cells[:, 3].max() == pytest.approx(d.north)
    png = public_page.download(public_page.PNG_BUTTON, pid)
    raw = base64.b64decode(png["content"])
    assert raw.startswith(b"\x89PNG\r\n\x1a\n") and png["filename"].endswith(".png")


def test_answers_are_the_release_rounded_and_free(folder, rel, sample):
    from components import public_page

    pid = services.current().published.publish(rel, "answers")
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    ring = [[rect.west, rect.south], [rect.east, rect.south], [rect.east, rect.north],
            [rect.west, rect.north], [rect.west, rect.south]]
    geojson = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [ring]}, "properties": {}}]}
    rows, notes = public_page.answer_rows(services.current().published.release(pid), geojson)
    assert notes == [] and len(rows) == 1
    lo, hi = rel.bounds([rect])
    assert rows[0]["count"] == f"{round(rel.answer(rect)):,}"
    assert rows[0]["range"] == f"{math.floor(lo[0]):,} to {math.ceil(hi[0]):,}"
    assert set(rows[0]) == {"id", "bounds", "count", "range"}      # nothing else, no truth
    many = {"type": "FeatureCollection", "features": geojson["features"] * (public_page.MAX_DRAWN + 5)}
    rows, notes = public_page.answer_rows(services.current().published.release(pid), many)
    assert len(rows) == public_page.MAX_DRAWN and notes == [f"Only the first {public_page.MAX_DRAWN} rectangles are answered."]
    bad = {"type": "FeatureCollection", "features": [{"geometry": {"type": "Polygon", "coordinates": "zz"}}]}
    rows, notes = public_page.answer_rows(services.current().published.release(pid), bad)
    assert rows == [] and "could not be read" in notes[0]


OWNER_TOKEN = "owner-token-of-the-published-tests"


@pytest.fixture(scope="module")
def app():
    from app import create_app
    return create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "owner_token": OWNER_TOKEN})


def unpublish_request(client, pid):
    """Press Unpublish as the page would: a POST to the app's callback endpoint."""
    from components import public_page as pp
    body = {"output": f"..{pp.CONTENT}.children...{pp.UNPUBLISH_STATUS}.children..",
            "outputs": [{"id": pp.CONTENT, "property": "children"},
                        {"id": pp.UNPUBLISH_STATUS, "property": "children"}],
            "inputs": [{"id": pp.UNPUBLISH, "property": "submit_n_clicks", "value": 1}],
            "changedPropIds": [f"{pp.UNPUBLISH}.submit_n_clicks"],
            "state": [{"id": pp.PID, "property": "data", "value": pid}]}
    return client.post("/_dash-update-component", json=body)


def test_unpublish_checks_the_owner_on_the_server(app, folder, rel):
    pid = services.current().published.publish(rel, "owner only")
    visitor = app.server.test_client()
    visitor.get("/r/")
    answer = unpublish_request(visitor, pid)                 # a forged press: the page is not trusted
    assert answer.status_code == 200 and "only the data owner can unpublish" in answer.get_data(as_text=True)
    assert services.current().published.record(pid) is not None
    owner = app.server.test_client()
    assert owner.get(f"/owner?token={OWNER_TOKEN}").status_code == 302
    answer = unpublish_request(owner, pid)
    assert answer.status_code == 200 and "No longer published" in answer.get_data(as_text=True)
    assert services.current().published.record(pid) is None


def test_public_pages_read_no_data(app, folder, rel, monkeypatch):
    """The page, its answers and its downloads come from the published release alone: every way
    to read the data (or a session's workspace) fails here, and nothing fails."""
    from components import map_panel, public_page
    from server import releases, state

    pid = services.current().published.publish(rel, "no data")

    def forbidden(*a, **k):
        raise AssertionError("the public page read the data")
    for cls in (dp.PointData, dp.CountData, dp.RegionData):
        for name in ("true_count", "true_counts", "histogram", "count_in"):
            if hasattr(cls, name):
                monkeypatch.setattr(cls, name, forbidden)
    monkeypatch.setattr(state, "points", forbidden)
    monkeypatch.setattr(releases, "release", forbidden)
    monkeypatch.setattr(map_panel, "region_truth", forbidden)
    public_page.map_layers.cache_clear()
    with app.server.test_request_context(f"/r/{pid}"):
        body = public_page.page(pid, {"tiles_url": "x", "tiles_attribution": "y"})
    text = json.dumps(body, cls=plotly.utils.PlotlyJSONEncoder)
    assert "no data" in text and "grid-raster" in text and '"truth": null' in text
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    ring = [[rect.west, rect.south], [rect.east, rect.south], [rect.east, rect.north], [rect.west, rect.north]]
    rows, _ = public_page.answer_rows(services.current().published.release(pid), {"features": [
        {"geometry": {"type": "Polygon", "coordinates": [ring]}}]})
    assert rows[0]["count"] == f"{round(rel.answer(rect)):,}"
    for button in (public_page.GEOJSON_BUTTON, public_page.CSV_BUTTON, public_page.PNG_BUTTON):
        assert public_page.download(button, pid)


def test_only_private_releases_are_published(folder, sample):
    data, domain = sample
    demo = dp.release("ug", data, domain, epsilon=1.0, seed=1)
    with pytest.raises(ValueError, match="only a private release"):
        services.current().published.publish(demo, "demo")
    assert rows(folder) == {}
