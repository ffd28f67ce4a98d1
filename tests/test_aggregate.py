"""dp.aggregate: files counted out of core (DuckDB) or as a Dask reduction give the counts that
UniformGrid.histogram gives for the same points, to the point, with what was dropped and why."""
import importlib
import sys
import time

import numpy as np
import pandas as pd
import pytest

import dp
from dp.mechanisms.leaves import square_base_grid

BOX = dp.Domain(-122.52, 37.70, -122.35, 37.82)
GRID = square_base_grid(BOX, 256)


def _frame(n, seed, users=None, margin=0.02):
    """n points around BOX (some outside, 500 exactly on grid lines), optional user ids."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(BOX.west - margin, BOX.east + margin, n)
    y = rng.uniform(BOX.south - margin, BOX.north + margin, n)
    x[:500] = GRID.edges_x[rng.integers(0, GRID.gx + 1, 500)]
    y[:500] = GRID.edges_y[rng.integers(0, GRID.gy + 1, 500)]
    df = pd.DataFrame({"longitude": x, "latitude": y})
    if users:
        df.insert(0, "user_id", rng.integers(0, users, n).astype(str))
    return df


def _exact(df):
    return dp.PointData(df.longitude.to_numpy(), df.latitude.to_numpy()).histogram(GRID)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One CSV (with a few unusable rows), the same points in three Parquet parts."""
    folder = tmp_path_factory.mktemp("agg")
    df = _frame(30_000, 1)
    df.to_csv(folder / "points.csv", index=False, float_format="%.17g")
    with open(folder / "points.csv", "a") as f:
        f.write("nan,37.75\nnorth,south\n,\n")
    for i in range(3):
        df.iloc[i * 10_000:(i + 1) * 10_000].to_parquet(folder / f"part-{i}.parquet")
    return folder, df


def test_csv_counts_equal_the_histogram_of_the_points(files):
    folder, df = files
    seen = []
    c = dp.aggregate(folder / "points.csv", BOX, 256, progress=seen.append)
    np.testing.assert_array_equal(c.counts, _exact(df))
    inside = int(np.count_nonzero(BOX.contains(df.longitude, df.latitude)))
    assert c.n == inside and c.report.rows_read == len(df) + 3
    assert c.report.dropped == {"missing or not a number": 3, "outside the box": len(df) - inside}
    assert c.report.columns == {"lon": "longitude", "lat": "latitude"}
    assert seen and seen[-1] == 1.0 and c.points_per_user is None


def test_a_glob_of_parquet_parts_gives_the_same_counts(files):
    folder, df = files
    c = dp.aggregate(str(folder / "part-*.parquet"), BOX, 256)
    np.testing.assert_array_equal(c.counts, _exact(df))
    assert c.report.source_format == "3 parquet files (duckdb)"
    listed = dp.aggregate(sorted(folder.glob("part-*.parquet")), BOX, (GRID.gx, GRID.gy))
    assert listed.fingerprint == c.fingerprint


def test_counts_release_like_points(files):
    folder, df = files
    c = dp.aggregate(folder / "points.csv", BOX, 1024)
    pts = dp.PointData(df.longitude.to_numpy(), df.latitude.to_numpy())
    a, b = (dp.release("privtree", d, BOX, 1.0, seed=4) for d in (c, pts))
    assert a.to_geojson() == b.to_geojson()


def test_each_user_keeps_at_most_k_points(tmp_path):
    df = _frame(20_000, 2, users=400, margin=0)
    df.loc[:9, "user_id"] = ["", "NA", "null", " ", "none", "", "", "", "", ""]
    df.to_csv(tmp_path / "users.csv", index=False)
    c = dp.aggregate(tmp_path / "users.csv", BOX, 256, max_points_per_user=3)
    assert c.points_per_user == 3 and c.report.columns["user"] == "user_id"
    assert c.n == int(np.minimum(df.iloc[10:].groupby("user_id").size(), 3).sum())
    assert c.report.dropped["points without a user id"] == 10
    assert "at most 3 points per user" in c.report.summary()
    # a user id column found by name bounds by default
    assert dp.aggregate(tmp_path / "users.csv", BOX, 64).points_per_user == dp.DEFAULT_POINTS_PER_USER


def test_each_user_keeps_at_most_k_points_exactly(tmp_path):
    # every user's points in a cell of their own: no cell may hold more than k
    rng = np.random.default_rng(7)
    cells = rng.choice(GRID.n_cells, 300, replace=False)
    cx, cy = cells % GRID.gx, cells // GRID.gx
    reps = rng.integers(1, 12, 300)
    x = np.repeat((GRID.edges_x[cx] + GRID.edges_x[cx + 1]) / 2, reps)
    y = np.repeat((GRID.edges_y[cy] + GRID.edges_y[cy + 1]) / 2, reps)
    pd.DataFrame({"uid": np.repeat(np.arange(300), reps), "lng": x, "lat": y}).to_parquet(tmp_path / "u.parquet")
    c = dp.aggregate(tmp_path / "u.parquet", BOX, 256, max_points_per_user=4)
    np.testing.assert_array_equal(np.sort(c.counts.ravel()[cells]), np.sort(np.minimum(reps, 4)))


@pytest.mark.parametrize("source,message", [
    ("missing.csv", "no file matches .*missing.csv"),
    ("*.nothing", "no file matches"),
    ("bad.parquet", "could not be read as PARQUET"),
    ("nocols.csv", "no longitude and latitude column found among: a, b"),
])
def test_bad_sources_are_refused_in_words(tmp_path, source, message):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    (tmp_path / "nocols.csv").write_text("a,b\n1,2\n")
    with pytest.raises(dp.DataError, match=message):
        dp.aggregate(str(tmp_path / source), BOX)


def test_bad_settings_are_refused_in_words(files, tmp_path):
    folder, _ = files
    with pytest.raises(dp.DataError, match="mix CSV and Parquet"):
        dp.aggregate([folder / "points.csv", folder / "part-0.parquet"], BOX)
    with pytest.raises(dp.ParameterError, match="engine must be one of"):
        dp.aggregate(folder / "points.csv", BOX, engine="spark")
    with pytest.raises(dp.ParameterError, match="cells must be a whole number"):
        dp.aggregate(folder / "points.csv", BOX, cells=0)
    with pytest.raises(dp.DataError, match="more than the"):
        dp.aggregate(folder / "points.csv", BOX, cells=(10_000, 10_000))
    with pytest.raises(dp.ParameterError, match="no user id column was found"):
        dp.aggregate(folder / "points.csv", BOX, max_points_per_user=2)


def test_dask_threads_give_the_same_counts(files):
    distributed = pytest.importorskip("distributed")
    folder, df = files
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None) as client:
        seen = []
        c = dp.aggregate(str(folder / "part-*.parquet"), BOX, 256, engine="dask", client=client,
                         progress=seen.append)
        np.testing.assert_array_equal(c.counts, _exact(df))
        assert seen[-1] == 1.0 and len(seen) == 3
        csv = dp.aggregate(folder / "points.csv", BOX, 256, engine="dask", client=client)
        assert csv.fingerprint == c.fingerprint
        assert csv.report.dropped == dp.aggregate(folder / "points.csv", BOX, 256).report.dropped


def test_both_engines_read_parts_of_different_column_types_alike(tmp_path, monkeypatch):
    """Parts whose coordinates differ in type are each read at their own types, by both engines
    (Dask's Parquet pieces are row groups read straight into arrays, `_parquet_pieces`): doubles
    with the columns in another order, text (a blank, a word and a null among it), and float32,
    which a read at text would have rounded to its shortest decimal (0.7, not 0.69999999). Row
    groups are split into several pieces; the same rows are dropped for the same reasons."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    distributed = pytest.importorskip("distributed")
    df = _frame(9_000, 2)
    pq.write_table(pa.table({"latitude": df.latitude[:3000], "longitude": df.longitude[:3000]}),
                   tmp_path / "a.parquet", row_group_size=500)
    text = [repr(v) for v in df.longitude[3000:6000]]
    text[:3] = [" ", "east", None]
    pq.write_table(pa.table({"longitude": pa.array(text, pa.string()), "latitude": df.latitude[3000:6000]}),
                   tmp_path / "b.parquet", row_group_size=700)
    pq.write_table(pa.table({"longitude": pa.array(df.longitude[6000:], pa.float32()),
                             "latitude": pa.array(df.latitude[6000:], pa.float32())}), tmp_path / "c.parquet")
    module = importlib.import_module("dp.aggregate")        # `dp.aggregate` is the function
    monkeypatch.setattr(module, "BLOCK_BYTES", 20_000)         # several pieces per file
    assert len(module._parquet_pieces([str(tmp_path / "a.parquet")])) > 1
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None) as client:
        by_dask = dp.aggregate(str(tmp_path / "*.parquet"), BOX, 256, engine="dask", client=client)
    by_duckdb = dp.aggregate(str(tmp_path / "*.parquet"), BOX, 256)
    np.testing.assert_array_equal(by_dask.counts, by_duckdb.counts)
    assert by_dask.report.dropped == by_duckdb.report.dropped and by_dask.report.dropped["missing or not a number"] == 3
    assert by_dask.fingerprint == by_duckdb.fingerprint and by_dask.report.rows_read == 9_000
    singles = np.float64(np.float32(df.longitude[6000:])), np.float64(np.float32(df.latitude[6000:]))
    alone = dp.aggregate(str(tmp_path / "c.parquet"), BOX, 256).counts      # float32 widened exactly
    np.testing.assert_array_equal(alone, dp.PointData(*singles).histogram(GRID))


@pytest.mark.parametrize("engine", ["duckdb", "dask"])
def test_a_part_without_the_coordinate_columns_is_refused_in_words(tmp_path, engine):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pytest.importorskip("distributed")
    df = _frame(1_000, 3)
    df.to_parquet(tmp_path / "a.parquet")
    pq.write_table(pa.table({"something": [1.0, 2.0]}), tmp_path / "b.parquet")      # a stray file
    kw = {}
    if engine == "dask":
        import distributed
        kw["client"] = distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                                          dashboard_address=None)
    try:
        with pytest.raises(dp.DataError, match="could not be read as PARQUET"):
            dp.aggregate(str(tmp_path / "*.parquet"), BOX, 256, engine=engine, **kw)
    finally:
        if kw:
            kw["client"].close()


@pytest.mark.slow
def test_dask_local_cluster_over_partitioned_files_bounds_users(tmp_path):
    # the documented path for a cluster: worker processes, files split in parts, user bound
    df = _frame(40_000, 3, users=2_000, margin=0)
    for i in range(4):
        df.iloc[i * 10_000:(i + 1) * 10_000].to_parquet(tmp_path / f"p{i}.parquet")
    c = dp.aggregate(str(tmp_path / "p*.parquet"), BOX, 256, engine="dask", max_points_per_user=5)
    d = dp.aggregate(str(tmp_path / "p*.parquet"), BOX, 256, max_points_per_user=5)
    assert c.n == d.n == int(np.minimum(df.groupby("user_id").size(), 5).sum())
    assert c.points_per_user == 5 and c.report.dropped == d.report.dropped


@pytest.mark.parametrize("engine", ["duckdb", "dask"])
def test_which_points_a_user_keeps_depends_on_that_user_alone(tmp_path, monkeypatch, engine):
    # with the salt held fixed, adding one user changes the counts by at most k points, all
    # that user's: the sensitivity a user-level release is charged for
    monkeypatch.setattr(sys.modules["dp.aggregate"].secrets, "token_hex", lambda n: "0123456789abcdef")
    df = _frame(20_000, 4, users=300, margin=0)
    extra = _frame(2_000, 5, margin=0).iloc[600:640].assign(user_id="newcomer")[df.columns]
    df.to_parquet(tmp_path / "d.parquet")
    pd.concat([df.iloc[:7_000], extra, df.iloc[7_000:]]).to_parquet(tmp_path / "d2.parquet")
    kw = {"engine": engine, "max_points_per_user": 4}
    if engine == "dask":
        distributed = pytest.importorskip("distributed")
        kw["client"] = distributed.Client(processes=False, n_workers=1, dashboard_address=None)
    try:
        a, b = (dp.aggregate(tmp_path / f, BOX, 256, **kw) for f in ("d.parquet", "d2.parquet"))
    finally:
        if "client" in kw:
            kw["client"].close()
    diff = b.counts - a.counts
    assert (diff >= 0).all() and diff.sum() == 4


def test_dask_bounds_a_user_whose_id_is_spelled_with_spaces(tmp_path):
    # " u1", "u1" and "u1 " are one user: one partition, at most k points, as in DuckDB
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(6)
    for i, uid in enumerate(["u1", " u1", "u1 ", "u1", " u1 ", "u1", "u1  ", "  u1"]):
        pd.DataFrame({"user_id": [uid] * 3, "lon": rng.uniform(BOX.west, BOX.east, 3),
                      "lat": rng.uniform(BOX.south, BOX.north, 3)}).to_parquet(tmp_path / f"f{i}.parquet")
    with distributed.Client(processes=False, n_workers=1, dashboard_address=None) as client:
        c = dp.aggregate(str(tmp_path / "f*.parquet"), BOX, 64, engine="dask", client=client,
                         max_points_per_user=2)
    assert c.n == 2 == dp.aggregate(str(tmp_path / "f*.parquet"), BOX, 64, max_points_per_user=2).n


def test_the_same_points_counted_twice_spend_from_one_budget(files):
    folder, df = files
    pts = dp.PointData(df.longitude.to_numpy(), df.latitude.to_numpy())
    keys = {dp.aggregate(folder / "points.csv", BOX, cells).coordinates_fingerprint for cells in (64, 256)}
    keys.add(dp.aggregate(str(folder / "part-*.parquet"), BOX, 128).coordinates_fingerprint)
    assert keys == {pts.coordinates_fingerprint}


def test_a_box_fitted_to_the_data_is_refused(files):
    folder, df = files
    with pytest.warns(dp.PrivacyLeakWarning):
        fitted = dp.fit_to_data(df.longitude, df.latitude)
    with pytest.raises(dp.ParameterError, match="needs a public box"):
        dp.aggregate(folder / "points.csv", fitted)


def test_batches_binned_in_threads_add_up_to_one_tally(files, tmp_path, monkeypatch):
    # small batches, so each binning thread gets many: the counts, the rows read and dropped by
    # reason, the points' fingerprint and the user bound's drops are the sums of every thread's
    agg = sys.modules["dp.aggregate"]
    folder, df = files
    users = _frame(20_000, 5, users=800)
    users.to_csv(tmp_path / "users.csv", index=False, float_format="%.17g")
    monkeypatch.setattr(agg, "BATCH_ROWS", 999)
    threads = []
    add = agg._Tally.add

    def counted(tally, *batch):      # a little slow, so the reading thread hands the next to the other
        threads.append(agg.threading.get_ident())
        time.sleep(0.005)
        return add(tally, *batch)

    monkeypatch.setattr(agg._Tally, "add", counted)
    c = dp.aggregate(folder / "points.csv", BOX, 256)
    assert len(threads) > 20 and len(set(threads)) == agg.BIN_THREADS
    inside = int(np.count_nonzero(BOX.contains(df.longitude, df.latitude)))
    np.testing.assert_array_equal(c.counts, _exact(df))
    assert c.report.rows_read == len(df) + 3
    assert c.report.dropped == {"missing or not a number": 3, "outside the box": len(df) - inside}
    points = dp.PointData(df.longitude.to_numpy(), df.latitude.to_numpy())
    assert c.coordinates_fingerprint == points.coordinates_fingerprint
    u = dp.aggregate(tmp_path / "users.csv", BOX, 256, user="user_id")
    assert u.report.rows_read == 20_000
    assert u.report.dropped["points beyond 5 per user (user-level bound)"] == 20_000 - 800 * 5
    assert u.coordinates_fingerprint == dp.PointData(users.longitude.to_numpy(),
                                                     users.latitude.to_numpy()).coordinates_fingerprint


def test_an_error_while_binning_is_raised_not_hung(files, monkeypatch):
    agg = sys.modules["dp.aggregate"]
    monkeypatch.setattr(agg, "BATCH_ROWS", 999)

    def broken(tally, *batch):
        raise MemoryError("no room for this batch")

    monkeypatch.setattr(agg._Tally, "add", broken)
    with pytest.raises(MemoryError, match="no room"):
        dp.aggregate(files[0] / "points.csv", BOX, 256)


def test_an_error_from_progress_stops_the_count_and_comes_out(files):
    """The dashboard cancels a count of server files by raising from its progress callback:
    the count stops there and the error comes out as it is (not as a DataError)."""
    class Stop(Exception):
        pass

    def stop(_fraction):
        raise Stop
    folder, _ = files
    with pytest.raises(Stop):
        dp.aggregate(folder / "points.csv", BOX, 256, progress=stop)
