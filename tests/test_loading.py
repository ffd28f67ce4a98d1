"""Fast loading: Parquet input, the row limit enforced before parsing, text coordinates read
the same way on the fast and the tolerant path, and grid binning equal to the definition."""
from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dp
from dp.errors import DataError


def parquet_bytes(**columns) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue().to_pybytes()


# ------------------------------------------------------------------------------- Parquet
def test_parquet_path_and_bytes(tmp_path):
    raw = parquet_bytes(Longitude=[-0.1, 2.35, 500.0], Latitude=[51.5, 48.9, 1.0],
                        user_id=["u1", "u2", "u3"])
    path = tmp_path / "points.parquet"
    path.write_bytes(raw)
    for data in (dp.load_points(path), dp.load_points(str(path)),
                 dp.load_points(raw, filename="points.parquet"), dp.load_points(raw)):
        assert sorted(zip(data.x.tolist(), data.y.tolist())) == [(-0.1, 51.5), (2.35, 48.9)]
        assert dict(zip(data.x.tolist(), data.user.tolist())) == {-0.1: "u1", 2.35: "u2"}
        assert data.report.source_format == "Parquet"
        assert data.report.columns == {"lon": "Longitude", "lat": "Latitude", "user": "user_id"}
        assert data.report.dropped == {"rows with longitude outside [-180, 180]": 1}


def test_parquet_text_and_integer_columns():
    raw = parquet_bytes(lng=["1.5", "2", "abc"] + ["3"] * 5, lat=["4", "5", "6"] + ["7"] * 5)
    data = dp.load_points(raw, filename="p.parquet")
    assert data.n == 7 and data.report.dropped == {"rows with a non-numeric coordinate": 1}
    data = dp.load_points(parquet_bytes(x=[1, 2], y=[3, 4]), filename="p.parquet")
    assert sorted(data.x.tolist()) == [1.0, 2.0]
    assert any("columns named 'x' and 'y'" in w for w in data.report.warnings)


@pytest.mark.parametrize("batch_rows", [1 << 20, 5000])     # all groups in one read, or in runs
def test_parquet_numbers_are_read_row_group_by_row_group_as_they_are(tmp_path, monkeypatch, batch_rows):
    """Numeric coordinates go straight from the row groups (read in runs of about BATCH_ROWS)
    into arrays made once (`dp.io.parquet.read_numbers`): the same values in file order, over
    several row groups and runs; a null is dropped and counted as before (read as NaN);
    float32 and integer columns become float64; what the coordinates take counts against the
    byte limit, with the user ids."""
    from dp.io import parquet
    monkeypatch.setattr(parquet, "BATCH_ROWS", batch_rows)
    rng = np.random.default_rng(4)
    lon, lat = rng.uniform(-10, 10, 25_000), rng.uniform(40, 60, 25_000)
    lat_nulls = pa.array(lat, mask=np.arange(25_000) % 1000 == 7)
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"lon": lon, "lat": lat_nulls, "uid": [f"u{i % 50}" for i in range(25_000)]}),
                   path, row_group_size=4096)
    assert pq.ParquetFile(path).metadata.num_row_groups == 7
    data = dp.load_points(path)
    keep = np.arange(25_000) % 1000 != 7
    assert np.array_equal(data.x, lon[keep]) and np.array_equal(data.y, lat[keep])
    assert data.report.dropped == {"rows with NaN or infinite coordinates": 25}
    assert data.user.tolist()[:3] == ["u0", "u1", "u2"]
    small = parquet_bytes(lon=pa.array([1.5, 2.25], pa.float32()), lat=pa.array([3, 4], pa.int16()))
    assert dp.load_points(parquet_bytes(lon=pa.array([1.5, 2.25], pa.float32()),
                                        lat=pa.array([3.0, 4.0], pa.float32())),
                          filename="p.parquet").y.dtype == np.float64
    ints = dp.load_points(parquet_bytes(lon=pa.array([1, 2], pa.int16()), lat=pa.array([3, 4], pa.int64())),
                          filename="p.parquet")
    assert ints.x.tolist() == [1.0, 2.0] and ints.y.tolist() == [3.0, 4.0]
    assert sorted(dp.load_points(small, filename="p.parquet").x.tolist()) == [1.5, 2.25]   # mixed: as text
    with pytest.raises(DataError, match=r"columns unpack to 0\.[0-9] MB, more than the 0\.1 MB"):
        dp.load_points(path, max_bytes=100_000)
    # one value repeated is stored once (a dictionary): the decoded size, 16 bytes a point, is
    # what the limit is held to, before the arrays are made
    same = parquet_bytes(lon=np.full(100_000, 1.5), lat=np.full(100_000, 2.5))
    assert len(same) < 10_000
    with pytest.raises(DataError, match=r"columns unpack to 1\.6 MB, more than the 1\.0 MB"):
        dp.load_points(same, filename="p.parquet", max_bytes=1_000_000)


def test_parquet_errors():
    with pytest.raises(DataError) as exc:
        dp.load_points(parquet_bytes(name=["a"], value=[1.0]), filename="p.parquet")
    msg = str(exc.value)
    assert "no longitude and latitude column found among: name, value" in msg
    assert "expected columns named lon/lng/longitude/x and lat/latitude/y" in msg
    with pytest.raises(DataError, match="not a readable Parquet file"):
        dp.load_points(b"PAR1 not really", filename="p.parquet")
    with pytest.raises(DataError, match="3 rows, more than the limit of 2"):
        dp.load_points(parquet_bytes(lon=[1.0, 2, 3], lat=[1.0, 2, 3]), filename="p.parquet",
                       max_rows=2)


# ------------------------------------------------------------------------------ row limit
@pytest.mark.parametrize("sep, last", [(b"\n", b"\n"), (b"\r\n", b"\r\n"), (b"\n", b"")])
def test_row_limit_refuses_one_row_too_many(tmp_path, sep, last):
    rows = [b"%d,%d" % (i % 90, i % 80) for i in range(6)]
    raw = b"lon,lat" + sep + sep.join(rows) + last
    path = tmp_path / "p.csv"
    path.write_bytes(raw)
    for src in (raw, path):
        with pytest.raises(DataError) as exc:
            dp.load_points(src, filename="p.csv", max_rows=5)
        assert str(exc.value) == ("the file has 6 rows, more than the limit of 5; upload a "
                                  "sample or raise the limit")
        assert dp.load_points(src, filename="p.csv", max_rows=6).n == 6


def test_row_limit_ignores_blank_lines():
    raw = b"\n\nlon,lat\n1,1\n\n  \n2,2\r\n\r\n3,3\n\n\n"
    assert dp.load_points(raw, filename="p.csv", max_rows=3).n == 3
    with pytest.raises(DataError, match="3 rows, more than the limit of 2"):
        dp.load_points(raw, filename="p.csv", max_rows=2)


def test_row_limit_is_checked_before_parsing(monkeypatch):
    def no_parsing(*args, **kwargs):
        raise AssertionError("the file was parsed")
    monkeypatch.setattr(importlib.import_module("dp.io.csv_points").pcsv, "open_csv", no_parsing)
    with pytest.raises(DataError, match="limit of 10"):
        dp.load_points(b"lon,lat\n" + b"1,2\n" * 11, filename="p.csv", max_rows=10)


# ------------------------------------------------------------------- fast and tolerant CSV
def test_large_file_from_path_matches_bytes(tmp_path):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-10, 10, 30_000).round(6), rng.uniform(40, 50, 30_000).round(6)
    raw = b"lat;lon;user\n" + "".join(f"{b};{a};u{i % 7}\n" for i, (a, b) in
                                      enumerate(zip(x, y))).encode()
    path = tmp_path / "p.csv"
    path.write_bytes(raw)
    a, b = dp.load_points(path), dp.load_points(raw, filename="p.csv")
    for data in (a, b):                                      # in file order: no sort at load
        assert np.array_equal(data.x, x) and np.array_equal(data.y, y)
    assert np.array_equal(a.user, b.user) and a.fingerprint == b.fingerprint


def test_rows_with_extra_fields_are_kept_and_utf8_ids_read():
    raw = "uid,lon,lat\nü1,1,2\nü2,3,4,extra\nü3,5,6\n".encode()
    data = dp.load_points(raw, filename="p.csv")
    assert data.n == 3 and dict(zip(data.x.tolist(), data.user.tolist())) == {1: "ü1", 3: "ü2",
                                                                              5: "ü3"}
    assert not any("expected UTF-8" in w for w in data.report.warnings)
    assert data.report.dropped == {}


def test_quoted_and_spaced_numbers_on_the_tolerant_path():
    raw = b'lon,lat\n" 1.5 ",2\n 3 , 4\n"5","6"\n7,x\n8,9\n10,11\n'
    data = dp.load_points(raw, filename="p.csv")
    assert sorted(data.x.tolist()) == [1.5, 3.0, 5.0, 8.0, 10.0]
    assert data.report.dropped == {"rows with a non-numeric coordinate": 1}


# -------------------------------------------------------------------------------- binning
def reference_cells(grid, x, y):
    """The definition: cell k holds edges[k] <= x < edges[k + 1], the last cell closed."""
    k = np.clip(np.searchsorted(grid.edges_x, x, side="right") - 1, 0, grid.gx - 1)
    j = np.clip(np.searchsorted(grid.edges_y, y, side="right") - 1, 0, grid.gy - 1)
    return j, k


@pytest.mark.parametrize("bounds, gx, gy", [((-74.05, 40.55, -73.7, 40.92), 1024, 1024),
                                            ((-180, -90, 180, 90), 7, 13),
                                            ((0.1, 0.2, 0.3, 0.7), 300, 1)])
def test_binning_equals_the_cell_definition(bounds, gx, gy):
    rng = np.random.default_rng(0)
    dom = dp.Domain(*bounds)
    grid = dp.UniformGrid(dom, gx, gy)
    ex, ey = rng.choice(grid.edges_x, 20_000), rng.choice(grid.edges_y, 20_000)
    x = np.concatenate([rng.uniform(dom.west, dom.east, 100_000), ex, np.nextafter(ex, -np.inf),
                        np.full(50, dom.east), rng.uniform(dom.west, dom.east, 50)])
    y = np.concatenate([rng.uniform(dom.south, dom.north, 100_000), ey, np.nextafter(ey, np.inf),
                        rng.uniform(dom.south, dom.north, 50), np.full(50, dom.north)])
    j, k, inside = grid.cell_index(x, y)
    rj, rk = reference_cells(grid, x, y)
    assert np.array_equal(j[inside], rj[inside]) and np.array_equal(k[inside], rk[inside])
    H = np.zeros((gy, gx))
    np.add.at(H, (rj[inside], rk[inside]), 1)
    assert np.array_equal(grid.histogram(x, y), H)
    assert grid.histogram(x, y)[:, -1].sum() >= 50 and grid.histogram(x, y)[-1].sum() >= 50


def test_binning_outside_and_non_finite_points():
    grid = dp.UniformGrid(dp.Domain(0, 0, 1, 1), 4)
    x = np.array([-0.5, 1.5, np.nan, np.inf, -np.inf, 0.5, 1.0])
    y = np.array([0.5, 0.5, 0.5, 0.5, 0.5, np.nan, 1.0])
    j, k, inside = grid.cell_index(x, y)
    assert inside.tolist() == [False] * 6 + [True]
    assert k.tolist() == [0, 3, 0, 3, 0, 2, 3] and j.tolist() == [2, 2, 2, 2, 2, 0, 3]
    assert grid.histogram(x, y).sum() == 1 and grid.histogram(x, y)[3, 3] == 1


# ---------------------------------------------------------------------------- sort order
@pytest.mark.parametrize("values", [
    lambda rng: np.round(rng.normal(-73.95, 0.05, 300_000), 6),         # many ties, 2 passes
    lambda rng: rng.normal(0, 1, 200_000),                               # both signs
    lambda rng: np.concatenate([np.zeros(40_000), -np.zeros(40_000),    # -0.0 ties 0.0
                                rng.normal(0, 1e-300, 1_000)]),
    lambda rng: rng.uniform(-1e300, 1e300, 100_000),                     # every bit in use
    lambda rng: np.full(70_000, 3.0)])
def test_stable_order_equals_stable_argsort(values):
    rng = np.random.default_rng(5)
    x = values(rng)
    rng.shuffle(x)
    assert np.array_equal(dp.points.stable_order(x), np.argsort(x, kind="stable"))


def test_a_short_row_is_described_without_its_text():
    """A row with too few fields may hold ids or other columns: the message counts its fields
    and never repeats it."""
    with pytest.raises(dp.DataError) as exc:
        dp.load_points(b"lon,lat\nalice bob@secret.com\nx\n1,2\n", filename="a.csv")
    assert "first bad row: 'a line with 1 of 2 fields'" in str(exc.value)
    assert "alice" not in str(exc.value) and "secret" not in str(exc.value)


def test_missing_columns_message_is_short_for_a_file_that_is_no_table():
    """A GeoJSON named .csv reads as one huge header 'name': the message shows names cut short."""
    doc = '{"type": "FeatureCollection", "features": [' + ", ".join(
        '{"type": "Feature", "geometry": {"type": "Point", "coordinates": [1.5, 2.5]}}'
        for _ in range(500)) + "]}"
    with pytest.raises(DataError) as exc:
        dp.load_points(doc.encode(), filename="regions.csv", fmt="csv")
    msg = str(exc.value)
    assert "no longitude and latitude column found among:" in msg and len(msg) < 900
    assert " more; expected columns" in msg
