"""Hardening from an audit: a counts file cannot unpack into a huge array, an oversize request is
refused before its body is read, and one person is one user in every engine."""
from __future__ import annotations

import base64
import csv
import io
import json
import tracemalloc
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dp
from app import create_app
from components import ids
from dp.contributions import WHITESPACE, canonical_user_ids
from dp.counts import FORMAT
from dp.points import MISSING_IDS, user_keys
from server import services

BOX = dp.Domain(0, 0, 1, 1, name="unit box")


# ------------------------------------------------------------------ counts files (.npz)
def _counts_file(path, **override):
    """A counts file as CountData.save writes it, with some arrays replaced."""
    arrays = {"format": np.array(FORMAT), "counts": np.ones((4, 4), np.int64),
              "bounds": np.array(BOX.bounds, np.float64), "box_name": np.array("unit box"),
              "leaky": np.array(False), "points_per_user": np.array(0),
              "points_hash": np.zeros(24, np.uint8)}
    arrays.update(override)
    np.savez_compressed(path, **arrays)
    return path


def _peak_mb_while_refused(source, match) -> float:
    """Peak Python-traced memory (MB) while load_counts refuses `source` with `match`; jobs left
    running by earlier tests (the fuzzed plan callback's) are stopped first (`Jobs.stop_all`)."""
    services.current().jobs.stop_all()
    tracemalloc.start()
    try:
        with pytest.raises(dp.DataError, match=match):
            dp.load_counts(source)
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_the_counts_file_format_reads_back(tmp_path):
    back = dp.load_counts(_counts_file(tmp_path / "ok.npz"))
    assert back.n == 16 and back.domain.name == "unit box" and back.points_per_user is None
    # the name as a 1-element array is a short text too
    assert dp.load_counts(_counts_file(tmp_path / "one.npz", box_name=np.array(["b"]))).domain.name == "b"


@pytest.mark.parametrize("field,chars", [pytest.param("box_name", 100_000_000, marks=pytest.mark.slow),
                                         ("format", 25_000_000),
                                         ("counts", 25_000_000)])
def test_a_text_array_cannot_unpack_into_hundreds_of_megabytes(tmp_path, field, chars):
    # a unicode array of empty strings compresses to almost nothing: the audit's 0.39 MB file
    # held a box_name of dtype <U100000000 that unpacked to 400 MB, and was accepted
    shape = (1, 1) if field == "counts" else (1,)
    bomb = _counts_file(tmp_path / "bomb.npz", **{field: np.zeros(shape, f"<U{chars}")})
    assert bomb.stat().st_size < 1e6
    peak = _peak_mb_while_refused(bomb, f"the counts file's '{field}' is an array of shape "
                                        rf"{re_shape(shape)} and type <U{chars} \(.* bytes "
                                        "unpacked\\): expected ")
    assert peak < 50, f"{peak:.0f} MB traced while refusing a {bomb.stat().st_size / 1e6:.2f} MB file"
    # the same from the bytes of an upload
    peak = _peak_mb_while_refused(bomb.read_bytes(), f"the counts file's '{field}'")
    assert peak < 50


def re_shape(shape) -> str:
    return str(tuple(shape)).replace("(", r"\(").replace(")", r"\)")


@pytest.mark.parametrize("field,value,expected", [
    ("counts", np.array([["1", "2"]]), "a 2-D matrix of numbers"),
    ("counts", np.ones((2, 2), np.complex128), "a 2-D matrix of numbers"),
    ("counts", np.zeros((2, 2), [("a", "<i8")]), "a 2-D matrix of numbers"),
    ("counts", np.ones(4), "a 2-D matrix of numbers"),
    ("bounds", np.array(["0", "0", "1", "1"]), "4 numbers"),
    ("bounds", np.arange(5.0), "4 numbers"),
    ("points_per_user", np.array("5"), "one whole number"),
    ("points_per_user", np.arange(3), "one whole number"),
    ("leaky", np.array("no"), "one true/false value"),
    ("box_name", np.array(b"unit box"), "a text"),
    ("box_name", np.array(["a", "b"]), "a text"),
    ("box_name", np.array("x" * 201), "a text .unicode. of at most 200 characters"),
    ("points_hash", np.zeros(100, np.uint8), "at most 64 bytes"),
    ("points_hash", np.zeros(3, np.float64), "at most 64 bytes"),
])
def test_every_array_is_checked_by_its_header(tmp_path, field, value, expected):
    path = _counts_file(tmp_path / "odd.npz", **{field: value})
    with pytest.raises(dp.DataError, match=f"the counts file's '{field}' is an array of shape "
                                           f".*: expected {expected}"):
        dp.load_counts(path)


def test_an_unexpected_array_is_refused(tmp_path):
    path = _counts_file(tmp_path / "extra.npz", notes=np.zeros(3))
    with pytest.raises(dp.DataError, match="unexpected entry 'notes.npy'; a counts file holds only"):
        dp.load_counts(path)


def test_object_arrays_are_never_unpickled(tmp_path):
    path = _counts_file(tmp_path / "obj.npz", box_name=np.array([{"x": 1}], dtype=object))
    with pytest.raises(dp.DataError, match="'box_name' is an array .* type object"):
        dp.load_counts(path)


def _zeros_counts(path, side: int):
    """A well-formed counts file of side x side int64 zeros: it compresses about 1000x."""
    return _counts_file(path, counts=np.zeros((side, side), np.int64))


def test_counts_are_charged_by_what_they_unpack_to_before_unpacking(tmp_path):
    """Item 2/5 of the audit: a 0.13 MB file of counts that unpacks to 134 MB (within the cells
    a histogram may have) is refused from its headers when the server keeps less for one
    browser, at a small fraction of the unpacked size (it was unpacked first, then refused)."""
    bomb = _zeros_counts(tmp_path / "zeros.npz", 4096)
    assert bomb.stat().st_size < 0.2e6
    services.current().jobs.stop_all()
    tracemalloc.start()
    try:
        with pytest.raises(dp.DataError, match=r"the counts unpack to 134\.2 MB, more than the "
                                               r"64\.0 MB this server keeps for one browser's data"):
            dp.load_counts(bomb.read_bytes(), max_bytes=64_000_000)
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    assert peak < 5, f"{peak:.1f} MB traced while refusing"
    # counts within the bound load as before
    small = _zeros_counts(tmp_path / "small.npz", 64)
    assert dp.load_counts(small, max_bytes=64 * 64 * 8 + 1000).counts.shape == (64, 64)


PARQUET_BOMB = r"""
import sys
import pyarrow as pa, pyarrow.parquet as pq
import dp, dp.io.parquet as P
raw = open(sys.argv[1], "rb").read()
if sys.argv[2] == "planted":        # the old reader: text columns decoded as they are read
    P.open_parquet = lambda source, read_dictionary=None: pq.ParquetFile(pa.BufferReader(source))
def peak_mb():                      # VmHWM, the peak resident memory since the last reset
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
    return int(line.split()[1]) / 1024
open("/proc/self/clear_refs", "w").write("5")       # reset the peak (ru_maxrss survives exec)
before = peak_mb()
try:
    dp.load_points(raw, max_bytes=64_000_000)
    said = "loaded"
except dp.DataError as exc:
    said = str(exc)
print(peak_mb() - before, said)
"""


@pytest.mark.parametrize("reader", ["real", "planted"])
def test_a_parquet_file_that_unpacks_a_thousand_times_is_refused_before_it_is_decoded(reader, tmp_path):
    """Items 2/5, Parquet: a small file whose user id column repeats one long text (stored once
    in the column's dictionary) is refused from its size decoded, counted on the dictionary,
    before any row's text is made: the reading process grows by little. The planted reader
    (decoding text as it reads, as before) grows by the 400 MB decoded, which the bound must
    fail on."""
    import subprocess
    import sys

    import pyarrow.parquet as pq
    n = 400_000          # one 1,000-character user id in every row: 25 KB of zstd, 400 MB decoded
    t = pa.table({"lon": np.full(n, 0.5), "lat": np.full(n, 0.5), "user_id": pa.array(["u" * 1000] * n)})
    pq.write_table(t, tmp_path / "bomb.parquet", compression="zstd")
    assert (tmp_path / "bomb.parquet").stat().st_size < 100_000
    out = subprocess.run([sys.executable, "-c", PARQUET_BOMB, str(tmp_path / "bomb.parquet"), reader],
                         capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[1])).stdout.split(" ", 1)
    grew, said = float(out[0]), out[1]
    assert said.startswith("the Parquet file's columns unpack to 40") and "more than the 64.0 MB" in said
    if reader == "real":
        assert grew < 100, f"grew by {grew:.0f} MB"
    else:
        assert grew > 300, f"grew by {grew:.0f} MB"


def test_a_geoparquet_geometry_repeated_is_bounded_and_a_plain_file_still_loads(tmp_path):
    """A GeoParquet file of one big polygon in every row, as points: refused in words from its
    size decoded (256 bytes a row by default, at least 64 MiB); a plain Parquet file with short
    user ids loads."""
    import pyarrow.parquet as pq
    import shapely

    from dp.geo import write_geoparquet
    ring = shapely.Point(0.5, 0.5).buffer(0.1, 500)
    write_geoparquet([{"id": i} for i in range(3000)], [ring] * 3000, tmp_path / "big.parquet")
    with pytest.raises(dp.DataError, match=r"columns unpack to 96\.[0-9] MB, more than the 67\.1 MB"):
        dp.load_points(tmp_path / "big.parquet")
    t = pa.table({"lon": np.linspace(0, 1, 5000), "lat": np.linspace(0, 1, 5000),
                  "user_id": pa.array([f"person-{i % 700}" for i in range(5000)])})
    pq.write_table(t, tmp_path / "plain.parquet")
    data = dp.load_points(tmp_path / "plain.parquet", max_bytes=1_000_000)
    assert data.n == 5000 and len(data.users.keys) == 700


def test_an_upload_of_counts_bigger_than_a_sessions_share_is_refused_in_words(tmp_path):
    """The page's upload: the store of this app keeps 16 MB for one browser; a 0.05 MB upload
    unpacking to 33.6 MB is refused before it is unpacked, and what was loaded stays."""
    from test_fuzz import Page

    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "store_mb": 64})
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    page = Page(app, client)
    raw = _zeros_counts(tmp_path / "zeros.npz", 2048).read_bytes()
    page.props[(ids.UPLOAD, "contents")] = "data:application/octet-stream;base64," + \
        base64.b64encode(raw).decode()
    page.props[(ids.UPLOAD, "filename")] = "zeros.npz"
    output = next(o for o in app.callback_map
                  if f"{ids.UPLOAD_STATUS}.children" in o and f"{ids.DATASET}.data" in o)
    changed = [d["id"] for d in app.callback_map[output]["inputs"]].index(ids.UPLOAD)
    answer = client.post(UPDATE, json=page.body(output, changed))
    assert answer.status_code == 200, answer.get_data(as_text=True)[:500]
    response = answer.get_json()["response"]
    status = json.dumps(response[ids.UPLOAD_STATUS]["children"])
    assert "the counts unpack to 33.6 MB, more than the 16.8 MB this server keeps" in status
    assert "The previously loaded data is still in use." in status
    assert ids.DATASET not in response          # what was loaded is kept (no_update)


# ----------------------------------------------------------- request size (HTTP 413)
LIMIT_MB = 1
MAX_BODY = int(LIMIT_MB * 1e6 * 4 / 3) + 1_000_000      # what create_app allows for 1 MB
UPDATE = "/_dash-update-component"
TOO_LARGE = ("The file is too large: uploads are limited to 1 MB (this request was larger). "
             "Nothing already loaded was lost.")


@pytest.fixture(scope="module")
def small_limit():
    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "max_upload_mb": LIMIT_MB})
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    return app, client


class _Body(io.RawIOBase):
    """A request body of `n` bytes that counts how many were read from it (seekable: the test
    client measures its length)."""

    def __init__(self, n: int):
        self.n, self.pos, self.read_bytes = n, 0, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.n}[whence] + offset
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, b):
        k = max(min(len(b), self.n - self.pos), 0)
        b[:k] = b"z" * k
        self.pos += k
        self.read_bytes += k
        return k


def test_an_oversize_request_is_refused_in_words_before_its_body_is_read(small_limit):
    app, client = small_limit
    assert app.server.config["MAX_CONTENT_LENGTH"] == MAX_BODY
    answer = client.post(UPDATE, data=b"z" * 3_000_000, content_type="application/json")
    assert answer.status_code == 413
    assert answer.get_data(as_text=True) == TOO_LARGE
    body = _Body(3_000_000)
    answer = client.post(UPDATE, input_stream=body, content_type="application/json")
    assert answer.status_code == 413 and body.read_bytes == 0      # refused by its length alone
    # the app goes on answering
    assert client.get("/").status_code == 200


def _post_traced(client, body: bytes):
    """(the answer to a callback request of `body`, the peak of memory traced while it ran)."""
    services.current().jobs.stop_all()
    tracemalloc.start()
    try:
        answer = client.post(UPDATE, data=body, content_type="application/json")
        return answer, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_body_of_many_small_values_is_refused_before_it_is_parsed(small_limit):
    """A 2 MB body of half a million numbers is refused in words at a small multiple of its size
    (parsed, it cost about ten times its size: the audit's 20 MB body took 433 MB)."""
    _, client = small_limit
    body = b"[" + b"1.5," * 499_999 + b"1.5]"
    answer, peak = _post_traced(client, body)
    assert peak < 3 * len(body)
    assert answer.status_code == 400 and "more than 200,000 values" in answer.get_data(as_text=True)


@pytest.mark.parametrize("empty", [b"[]", b"{}"])
def test_a_body_of_many_empty_lists_or_objects_is_refused_before_it_is_parsed(small_limit, empty):
    """A 0.6 MB body of 199,990 empty lists (or objects), under the bound on values, cost 22-25
    times its size parsed; it is refused in words at a small multiple of its size."""
    _, client = small_limit
    body = b"[" + b",".join([empty] * 199_990) + b"]"
    answer, peak = _post_traced(client, body)
    assert peak < 3 * len(body)
    assert answer.status_code == 400 and "more than 50,000 lists and objects" in answer.get_data(as_text=True)


def test_a_body_just_under_the_limit_is_not_refused_by_size(small_limit):
    _, client = small_limit
    answer = client.post(UPDATE, data=json.dumps("z" * (MAX_BODY - 100)),
                         content_type="application/json")
    assert answer.status_code != 413       # refused, but as a malformed request (400)


def test_a_file_just_over_the_upload_limit_gets_the_pages_own_message(small_limit):
    from test_fuzz import Page

    app, client = small_limit
    page = Page(app, client)
    raw = b"lon,lat\n" + b"0.5,0.5\n" * 140_000        # 1.12 MB: over 1 MB, under the body limit
    payload = "data:text/csv;base64," + base64.b64encode(raw).decode()
    page.props[(ids.UPLOAD, "contents")] = payload
    page.props[(ids.UPLOAD, "filename")] = "big.csv"
    output = next(o for o in app.callback_map
                  if f"{ids.UPLOAD_STATUS}.children" in o and f"{ids.DATASET}.data" in o)
    changed = [d["id"] for d in app.callback_map[output]["inputs"]].index(ids.UPLOAD)
    body = json.dumps(page.body(output, changed))
    assert len(raw) > LIMIT_MB * 1e6 and len(body) < MAX_BODY
    answer = client.post(UPDATE, data=body, content_type="application/json")
    assert answer.status_code == 200, answer.get_data(as_text=True)[:500]
    status = json.dumps(answer.get_json()["response"][ids.UPLOAD_STATUS]["children"])
    assert "big.csv is 1.1 MB, over the 1 MB upload limit" in status
    assert "The previously loaded data is still in use." in status


# ------------------------------------------------------------ one user in every engine
GRID = dp.UniformGrid(BOX, 16, 16)
K = 2
PER_ID = 3          # points per spelling of an id: every user has more than K
TEXT_IDS = ["8", "8\t", " 8", "8\u00a0", "\u20038", "8\x1c", "\u3000\u30008 \r", "08", "08 ",
            "Ab", "ab", " ab", "A\u200bb", "none", " NULL\t", "\u00a0", "x y"]


def canonical(value) -> str:
    """The rule, written out for the test: text stripped of whitespace (str.strip), numbers as
    integers when whole, '' for the spellings of 'no id'."""
    if isinstance(value, float):
        value = str(int(value)) if value.is_integer() else repr(value)
    text = str(value).strip()
    return "" if text.lower() in MISSING_IDS else text


def _points(values, seed=0) -> pd.DataFrame:
    """PER_ID points for each id value, all of one canonical user in one grid cell of its own."""
    users = sorted({canonical(v) for v in values} - {""}, key=repr)
    cell = {u: i for i, u in enumerate(users)}
    rng = np.random.default_rng(seed)
    rows = []
    for v in values:
        j = cell.get(canonical(v), len(users))      # no id: a cell of its own, never counted
        cx, cy = j % GRID.gx, j // GRID.gx
        for _ in range(PER_ID):
            rows.append((v, (cx + rng.uniform(0.1, 0.9)) / GRID.gx, (cy + rng.uniform(0.1, 0.9)) / GRID.gy))
    return pd.DataFrame(rows, columns=["user_id", "lon", "lat"])


def _check_one_user_per_canonical_id(counts, values, engine):
    users = {canonical(v) for v in values} - {""}
    counts = np.asarray(counts).ravel()
    assert counts.max() <= K, f"{engine}: a user kept {counts.max()} points, more than k = {K}"
    assert np.count_nonzero(counts) == len(users), f"{engine}: users seen"
    assert counts.sum() == K * len(users), f"{engine}: {counts.sum()} points kept, not {K * len(users)}"


def test_the_rule_is_the_one_points_in_memory_follow():
    # every whitespace character at either end, the spellings of 'no id' in any case, numbers
    texts = (["8" + c for c in WHITESPACE] + [c + "8" for c in WHITESPACE] + TEXT_IDS
             + [m.upper() for m in MISSING_IDS] + [m.title() for m in MISSING_IDS]
             + [" 0x8", "08", "ﬁ", "\u212aey", "8.0", "-0", "ＡＢ"])
    assert WHITESPACE == "".join(c for c in map(chr, range(0x110000)) if c.isspace())  # str.strip's
    assert len(WHITESPACE) == 29 and "\u200b" not in WHITESPACE
    assert canonical_user_ids(pa.array(texts)).to_pylist() == user_keys(np.array(texts)).tolist() \
        == [canonical(t) for t in texts]
    # numbers: whole ones as integers, as points.user_keys writes a float column
    floats = np.array([8.0, 8.5, -0.0, np.nan, 12345678901234.0, 0.25, -3.0])
    assert canonical_user_ids(pa.array(floats)).to_pylist() == user_keys(floats).tolist() \
        == ["8", "8.5", "0", "", "12345678901234", "0.25", "-3"]
    assert canonical_user_ids(pa.array([8, None, -3])).to_pylist() == ["8", "", "-3"]
    assert canonical_user_ids(pa.array([1e20, None, np.inf])).to_pylist() == ["1e+20", "", "inf"]
    assert canonical_user_ids(pd.Series([8.0, np.nan, 9.0])).to_pylist() == ["8", "", "9"]
    assert canonical_user_ids(pa.array([8.0, 0.1], pa.float32())).to_pylist() == ["8", "0.1"]
    decimals = pa.array([Decimal("8.00"), Decimal("8.50"), Decimal("-3.0"), Decimal("120")])
    assert canonical_user_ids(decimals).to_pylist() == ["8", "8.5", "-3", "120"]


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None) as c:
        yield c


def _engines(source, client):
    """The counts each engine keeps for the points in `source`, at most K per user."""
    out = {}
    for engine in ("duckdb", "dask"):
        kw = {"client": client} if engine == "dask" else {}
        c = dp.aggregate(source, BOX, (GRID.gx, GRID.gy), max_points_per_user=K, engine=engine, **kw)
        assert c.points_per_user == K
        out[engine] = c.counts
    return out


def test_text_ids_are_one_user_in_every_engine(tmp_path, client):
    df = _points(TEXT_IDS)
    df.to_csv(tmp_path / "ids.csv", index=False, quoting=csv.QUOTE_NONNUMERIC)
    data = dp.load_points(tmp_path / "ids.csv")
    assert data.users is not None
    counts = {"memory": dp.bound_contributions(data, K, rng=1).histogram(GRID)}
    counts.update(_engines(tmp_path / "ids.csv", client))
    df.to_parquet(tmp_path / "ids.parquet")
    data = dp.load_points(tmp_path / "ids.parquet")
    counts["memory (parquet)"] = dp.bound_contributions(data, K, rng=1).histogram(GRID)
    counts.update({f"{e} (parquet)": c for e, c in _engines(tmp_path / "ids.parquet", client).items()})
    for engine, c in counts.items():
        _check_one_user_per_canonical_id(c, TEXT_IDS, engine)


def test_numbers_and_text_are_one_user_in_every_engine(tmp_path, client):
    # Parquet parts written from frames whose ids pandas typed differently: whole numbers,
    # floats, text. 8, 8.0, "8" and " 8" are one user; 8.5 and "08" are users of their own
    parts = {"int64": [8, 9, 10], "float64": [8.0, 9.0, 8.5, float("nan")],
             "str": ["8", " 8", "08", "10\t"]}
    values = [v for vs in parts.values() for v in vs]
    everything = _points(values)
    start = 0
    for i, (dtype, vs) in enumerate(parts.items()):
        part = everything.iloc[start:start + PER_ID * len(vs)].astype({"user_id": dtype})
        part.to_parquet(tmp_path / f"part-{i}-{dtype}.parquet")
        start += len(part)
    files = sorted(str(p) for p in tmp_path.glob("part-*.parquet"))
    # in memory: each part loaded, the parts' points joined (ids as loaded)
    loaded = [dp.load_points(f) for f in files]
    joined = dp.PointData(np.concatenate([d.x for d in loaded]), np.concatenate([d.y for d in loaded]),
                          user=np.concatenate([d.user for d in loaded]))
    counts = {"memory": dp.bound_contributions(joined, K, rng=2).histogram(GRID)}
    for order in (files, files[::-1]):      # DuckDB reads a list at its first file's types
        first = order[0].rsplit("-", 1)[-1]
        counts.update({f"{e}, {first} part first": c for e, c in _engines(order, client).items()})
    for engine, c in counts.items():
        _check_one_user_per_canonical_id(c, values, engine)
    # GeoJSON in memory: 8, 8.0 and "8" in one file are one user
    features = [{"type": "Feature", "properties": {"user_id": v},
                 "geometry": {"type": "Point", "coordinates": [x, y]}}
                for v, x, y in _points([8, 8.0, "8", " 8", 8.5, "08"]).itertuples(index=False)]
    geo = dp.load_points(json.dumps({"type": "FeatureCollection", "features": features}).encode(),
                         filename="ids.geojson")
    _check_one_user_per_canonical_id(dp.bound_contributions(geo, K, rng=3).histogram(GRID),
                                     [8, 8.0, "8", " 8", 8.5, "08"], "memory (GeoJSON)")
