"""Fuzzed uploads: mutated CSV, GeoJSON, Parquet and .npz bytes go through the app's own upload
path (`components.data_panel.parse_upload`: base64 decode, then the loader for the file's type).
The only outcomes allowed are a loaded dataset or a `dp.DataError` with a message in words;
Python-traced memory stays bounded for every input; a dataset loaded before is untouched.

Inputs come from hypothesis, derandomized (the same inputs on every run): byte mutations of a
valid file of each kind (flips, deletions, insertions of awkward tokens, duplicated chunks,
truncation) and, for the binary formats, well-formed files with hostile contents (random
column types and values; arrays of any dtype and shape). Each test asserts how many inputs it
tried and that both outcomes occurred, so a mutation strategy that only ever breaks the file
cannot pass unnoticed.
"""
from __future__ import annotations

import base64
import importlib
import io
import json
import tracemalloc
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dp
from components import data_panel
from server import services

BOX = dp.Domain(-0.2, 51.4, 0.0, 51.6, name="fuzz box")
MAX_BYTES = 5_000_000
EXAMPLES = 250
PEAK_MB = 40            # traced memory per input: the seeds are a few kB, so this bounds blow-ups
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TOKENS = [b"NaN", b"nan", b"inf", b"-inf", b"1e400", b"-1e309", b"", b"\x00", b"\xff\xfe",
          b"\xef\xbb\xbf", b'"', b",", b";", b"\t", b"\n", b"\r\n", b"{", b"}", b"[", b"]",
          b"99999999999999999999999", b"\t8", "\u00a08".encode(), "\u3000".encode(), b"null",
          b'"type": "Polygon"', b'"coordinates": []', b"-0", b"1e-320", b"0x10", b"\\u0000"]


def _csv_points() -> bytes:
    rng = np.random.default_rng(1)
    rows = [f"{x:.6f},{y:.6f},u{k % 7}" for k, (x, y) in
            enumerate(zip(rng.uniform(-0.2, 0.0, 40), rng.uniform(51.4, 51.6, 40)))]
    return ("lon,lat,user_id\n" + "\n".join(rows) + "\n").encode()


def _geojson_points() -> bytes:
    rng = np.random.default_rng(2)
    feats = ",".join(f'{{"type":"Feature","properties":{{"user_id":"u{k % 5}"}},'
                     f'"geometry":{{"type":"Point","coordinates":[{x:.6f},{y:.6f}]}}}}'
                     for k, (x, y) in enumerate(zip(rng.uniform(-0.2, 0.0, 30), rng.uniform(51.4, 51.6, 30))))
    return f'{{"type":"FeatureCollection","features":[{feats}]}}'.encode()


def _geojson_regions() -> bytes:
    rng = np.random.default_rng(3)
    feats = []
    for k, (x, y) in enumerate(zip(rng.uniform(-0.18, -0.02, 12).tolist(), rng.uniform(51.42, 51.58, 12).tolist())):
        ring = [[x, y], [x + 0.01, y], [x + 0.01, y + 0.01], [x, y + 0.01], [x, y]]
        feats.append(f'{{"type":"Feature","properties":{{"user_id":"u{k}"}},'
                     f'"geometry":{{"type":"Polygon","coordinates":[{ring}]}}}}')
    return f'{{"type":"FeatureCollection","features":[{",".join(feats)}]}}'.encode()


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _parquet_points() -> bytes:
    rng = np.random.default_rng(4)
    return _parquet(pa.table({"lon": rng.uniform(-0.2, 0.0, 40), "lat": rng.uniform(51.4, 51.6, 40),
                              "user_id": [f"u{k % 6}" for k in range(40)]}))


def _npz(**fields) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **fields)
    return buf.getvalue()


def _counts_file() -> bytes:
    counts = np.random.default_rng(5).poisson(3, (16, 16))
    buf = io.BytesIO()
    dp.CountData(counts, BOX).save(buf)
    return buf.getvalue()


SEEDS = {"points.csv": (_csv_points(), "points"), "points.geojson": (_geojson_points(), "points"),
         "regions.geojson": (_geojson_regions(), "regions"), "regions.csv": (_csv_points(), "regions"),
         "points.parquet": (_parquet_points(), "points"), "counts.npz": (_counts_file(), None)}


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    """`seed` with 1-6 mutations, each at a position drawn as a fraction of the current length."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 6))):
        at = int(draw(st.floats(0, 1, exclude_max=True)) * (len(data) + 1))
        op = draw(st.sampled_from(["flip", "delete", "token", "dup", "truncate", "random"]))
        if op == "flip" and data:
            data[min(at, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        elif op == "token":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif op == "dup":
            chunk = data[at:at + draw(st.integers(1, 256))]
            data[at:at] = chunk * draw(st.integers(1, 50))
        elif op == "truncate":
            del data[at:]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
    return bytes(data)


HOSTILE_FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([-0.1, 51.5, 1e308])


@st.composite
def hostile_parquet(draw) -> bytes:
    """A well-formed Parquet file whose columns have drawn names, types and values."""
    n = draw(st.integers(0, 30))
    names = draw(st.lists(st.sampled_from(["lon", "lat", "x", "y", "user_id", "Longitude", "LAT",
                                            "", "lon ", "uid"]), min_size=1, max_size=4, unique=True))
    cols = {}
    for name in names:
        kind = draw(st.sampled_from(["float", "int", "str", "bool", "null", "list"]))
        if kind == "float":
            cols[name] = pa.array(draw(st.lists(HOSTILE_FLOATS, min_size=n, max_size=n)), pa.float64())
        elif kind == "int":
            cols[name] = pa.array(draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n)), pa.int64())
        elif kind == "str":
            cols[name] = pa.array(draw(st.lists(st.text(max_size=8), min_size=n, max_size=n)), pa.string())
        elif kind == "bool":
            cols[name] = pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), pa.bool_())
        elif kind == "null":
            cols[name] = pa.nulls(n)
        else:
            cols[name] = pa.array([[1.0, 2.0]] * n, pa.list_(pa.float64()))
    return _parquet(pa.table(cols))


NPZ_DTYPES = ["<i8", "<u1", "<f8", "<f4", "<c16", "?", "<U3", "<U40000", "S5", "<M8[s]"]


with np.load(io.BytesIO(_counts_file())) as _z:
    COUNTS_FIELDS = {name: _z[name] for name in _z.files}      # a valid counts file's arrays


@st.composite
def hostile_npz(draw) -> bytes:
    """A well-formed .npz: a valid counts file with 0-3 of its arrays (or an extra one) replaced
    by arrays of drawn dtypes and shapes: the header checks must refuse every one that does not
    make a counts file."""
    fields = dict(COUNTS_FIELDS)
    for name in draw(st.lists(st.sampled_from(sorted(fields) + ["extra"]), max_size=3, unique=True)):
        dtype = draw(st.sampled_from(NPZ_DTYPES))
        shape = tuple(draw(st.lists(st.integers(0, 6), max_size=3)))
        fields[name] = np.zeros(shape, dtype=dtype)
    return _npz(**fields)


def outcome(payload: bytes, filename: str, kind: str | None) -> str:
    """'loaded' or 'refused' (a DataError with a message); anything else fails the test."""
    contents = "data:application/octet-stream;base64," + base64.b64encode(payload).decode()
    try:
        data = data_panel.parse_upload(contents, filename, kind, None, None, None, MAX_BYTES)
    except dp.DataError as exc:
        message = str(exc)
        assert message.strip() and len(message) < 2000, message
        return "refused"
    assert data.n >= 0
    return "loaded"


@pytest.fixture()
def traced():
    """tracemalloc on for one test, with jobs left by earlier tests stopped first (their threads
    must not be allocating when tracing stops)."""
    services.current().jobs.stop_all()
    tracemalloc.start()
    yield
    tracemalloc.stop()


def _run(payload: bytes, filename: str, kind: str | None, seen: Counter):
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    seen[outcome(payload, filename, kind)] += 1
    peak = (tracemalloc.get_traced_memory()[1] - base) / 1e6
    assert peak < PEAK_MB, f"{peak:.0f} MB traced for a {len(payload) / 1e3:.0f} kB {filename}"


def _check(seen: Counter, before: dp.PointData, snapshot):
    assert sum(seen.values()) == EXAMPLES, seen
    assert seen["loaded"] and seen["refused"], seen           # the mutations reach both outcomes
    assert np.array_equal(before.x, snapshot[0]) and np.array_equal(before.y, snapshot[1])


@pytest.fixture()
def loaded():
    """A dataset loaded before the fuzzing, and a copy of its coordinates."""
    data = dp.load_points(_csv_points(), filename="before.csv")
    return data, (data.x.copy(), data.y.copy())


@pytest.mark.slow
@pytest.mark.parametrize("filename", list(SEEDS))
def test_mutated_files_load_or_are_refused_in_words(filename, traced, loaded):
    seed, kind = SEEDS[filename]
    seen = Counter()

    @FUZZ
    @given(mutated(seed))
    def fuzz(payload):
        _run(payload, filename, kind, seen)

    fuzz()
    print(f"{filename}: {dict(seen)}")
    _check(seen, *loaded)


@pytest.mark.slow
@pytest.mark.parametrize("filename,strategy", [("hostile.parquet", hostile_parquet()),
                                               ("hostile.npz", hostile_npz())])
def test_well_formed_hostile_files_load_or_are_refused_in_words(filename, strategy, traced, loaded):
    seen = Counter()

    @FUZZ
    @given(strategy)
    def fuzz(payload):
        _run(payload, filename, "points", seen)

    fuzz()
    print(f"{filename}: {dict(seen)}")
    _check(seen, *loaded)


def test_the_fuzzing_finds_a_planted_bug(monkeypatch):
    # planted bug: GeoJSON features read without the checks that turn bad documents into
    # DataErrors; the same inputs then raise other exceptions, which the property catches
    monkeypatch.setattr(importlib.import_module("dp.io.geojson"), "_point_features",
                        lambda text: json.loads(text)["features"])
    failures = Counter()

    @settings(max_examples=100, derandomize=True, deadline=None, database=None)
    @given(mutated(SEEDS["points.geojson"][0]))
    def fuzz(payload):
        try:
            outcome(payload, "points.geojson", "points")
        except Exception as exc:               # noqa: BLE001 - what the real test would fail on
            if not isinstance(exc, dp.DataError):
                failures[type(exc).__name__] += 1

    fuzz()
    assert sum(failures.values()) > 0, "the planted bug went unseen"


# The inputs the fuzzing found (each raised something other than a DataError before the fix)
def _damaged(data: bytes, at: float) -> bytes:
    out = bytearray(data)
    i = int(at * len(out))
    out[i:i + 16] = bytes(16)
    return bytes(out)


def test_found_a_damaged_parquet_page_is_refused_in_words():
    with pytest.raises(dp.DataError, match="damaged or truncated"):
        dp.load_points(_damaged(_parquet_points(), 0.2), filename="p.parquet")


def test_found_a_damaged_compressed_counts_array_is_refused_in_words():
    data = _counts_file()
    start = data.index(b"counts.npy") + 40            # inside the deflated counts array
    with pytest.raises(dp.DataError, match="not a counts file"):
        dp.load_counts(data[:start] + bytes(24) + data[start + 24:])


def test_found_parquet_columns_of_lists_or_nulls_are_refused_in_words():
    lists = _parquet(pa.table({"lon": pa.array([[1.0]] * 3), "lat": [51.5] * 3}))
    with pytest.raises(dp.DataError, match="longitude column 'lon' holds values of type list"):
        dp.load_points(lists, filename="p.parquet")
    users = _parquet(pa.table({"lon": [-0.1] * 3, "lat": [51.5] * 3, "user_id": pa.array([[1]] * 3)}))
    with pytest.raises(dp.DataError, match="user id column"):
        dp.load_points(users, filename="p.parquet")
    nulls = _parquet(pa.table({"lon": pa.nulls(3), "lat": ["51.5"] * 3}))
    with pytest.raises(dp.DataError, match="missing coordinate"):
        dp.load_points(nulls, filename="p.parquet")
