"""Releases from a base histogram (dp.CountData): the same structure as from the points when the
grids line up, refusals that say what to do otherwise, and the user-level bound carried along."""
import numpy as np
import pytest

import dp
from dp.domain import UniformGrid
from dp.mechanisms.leaves import square_base_grid

BOX = dp.Domain(-0.35, 51.35, 0.15, 51.65)


def _points(n=20_000, seed=3):
    """Clustered points inside BOX (fixed seed), none on a grid line by construction of floats."""
    rng = np.random.default_rng(seed)
    fx = np.concatenate([rng.normal(0.4, 0.08, n // 2), rng.uniform(0, 1, n - n // 2)]).clip(0.001, 0.999)
    fy = np.concatenate([rng.normal(0.6, 0.08, n // 2), rng.uniform(0, 1, n - n // 2)]).clip(0.001, 0.999)
    return dp.PointData(BOX.west + fx * BOX.width, BOX.south + fy * BOX.height)


@pytest.fixture(scope="module")
def pts():
    return _points()


@pytest.fixture(scope="module")
def counts(pts):
    return dp.CountData(pts.histogram(square_base_grid(BOX, 1024)), BOX)


COUNT_MECHANISMS = sorted(k for k, s in dp.mechanisms().items()
                          if s.data_kind == "points" and not s.needs_points)


def test_every_point_mechanism_says_whether_it_takes_counts():
    takes = set(COUNT_MECHANISMS)
    assert {"ug", "e2epriv", "htf", "privtree", "quadtree", "kdtree", "ag", "dawa"} <= takes
    assert {"shifted_grids", "bounded_grid"}.isdisjoint(takes)


@pytest.mark.parametrize("gx,gy", [(512, 493), (256, 256), (1024, 987), (8, 3)])
def test_an_aligned_or_snapped_coarser_grid_sums_base_cells(pts, counts, gx, gy):
    grid = UniformGrid(BOX, gx, gy)
    H = counts.histogram(grid)
    assert H.shape == (gy, gx) and H.sum() == pts.n
    if 1024 % gx == 0 and 987 % gy == 0:                      # lines on base lines: exact
        np.testing.assert_array_equal(H, pts.histogram(grid))
    # snapped: a base cell's points all go to the grid cell holding the base cell's centre,
    # so every grid cell differs from the exact one by at most the base cells it straddles
    exact = pts.histogram(grid)
    assert np.abs(H - exact).sum() <= np.abs(exact).sum()


def test_a_finer_grid_or_another_box_is_refused(counts):
    with pytest.raises(dp.DataError, match="finer than the counts' 1024 x 987 cells: aggregate on"):
        counts.histogram(UniformGrid(BOX, 2048, 2048))
    with pytest.raises(dp.DataError, match="release them over that same box"):
        dp.release("privtree", counts, dp.Domain(-0.3, 51.4, 0.1, 51.6), 1.0)


def test_mechanisms_that_need_points_say_so(counts):
    with pytest.raises(dp.DataError, match="needs each point's coordinates.*one of \\['adaptive', 'ag'"):
        dp.release("shifted_grids", counts, BOX, 1.0)


@pytest.mark.parametrize("name", ["htf", "privtree", "quadtree", "kdtree", "ag"])
def test_a_tree_from_counts_is_the_tree_from_points(pts, counts, name):
    # the trees read the square 1024-cell base grid, which the counts are: same seed, same bytes
    a = dp.release(name, counts, BOX, 1.0, seed=11)
    b = dp.release(name, pts, BOX, 1.0, seed=11)
    assert a.to_geojson() == b.to_geojson()


def test_dawa_from_counts_on_its_grid_is_dawa_from_points(pts):
    c = dp.CountData(pts.histogram(UniformGrid(BOX, 1024, 1024)), BOX)     # 256 x 256 aligns
    a = dp.release("dawa", c, BOX, 1.0, seed=5)
    b = dp.release("dawa", pts, BOX, 1.0, seed=5)
    assert a.to_geojson() == b.to_geojson()


@pytest.mark.parametrize("name", COUNT_MECHANISMS)
def test_every_counts_release_spends_exactly_epsilon(counts, name):
    rel = dp.release(name, counts, BOX, 0.7, seed=2)
    spec = dp.mechanisms()[name]
    if spec.private:
        assert rel.ledger.total == pytest.approx(0.7)
    assert np.isfinite(rel.answer(dp.Rect(-0.2, 51.45, 0.0, 51.55)))


def test_bounded_counts_release_at_user_level(counts):
    c = dp.CountData(counts.counts, BOX, points_per_user=4)
    rel = dp.release("privtree", c, BOX, 1.0, seed=1)
    assert rel.points_per_user == 4 and rel.ledger.total == pytest.approx(1.0)
    assert "at most 4 points per user" in str(rel.ledger)
    # the mechanism ran at ε / k: its noise is k times that of an event-level release
    event = dp.release("privtree", counts, BOX, 1.0, seed=1)
    assert rel.interval(dp.Rect(-0.2, 51.45, 0.0, 51.55))[1] - rel.answer(dp.Rect(-0.2, 51.45, 0.0, 51.55)) > \
        event.interval(dp.Rect(-0.2, 51.45, 0.0, 51.55))[1] - event.answer(dp.Rect(-0.2, 51.45, 0.0, 51.55))
    with pytest.raises(dp.ParameterError, match="bounded when they were aggregated"):
        dp.release("privtree", c, BOX, 1.0, max_points_per_user=2)


def test_true_counts_at_cell_resolution(pts, counts):
    grid = square_base_grid(BOX, 1024)
    # rectangles on base lines: exactly the points' counts
    i = np.array([[10, 20, 500, 700], [0, 0, 1024, 987], [300, 301, 302, 303]])
    rects = np.column_stack([grid.edges_x[i[:, 0]], grid.edges_y[i[:, 1]],
                             grid.edges_x[i[:, 2]], grid.edges_y[i[:, 3]]])
    np.testing.assert_allclose(counts.true_counts(rects, BOX), pts.true_counts(rects, BOX), atol=1e-6)
    # anywhere else within the points in the cells the rectangle cuts
    Q = dp.random_workload(BOX, 300, area_frac=0.01, rng=4)
    # between the whole cells inside each rectangle and the whole cells it touches
    inner = pts.true_counts(_snap(grid, Q, inward=True), BOX)
    outer = pts.true_counts(_snap(grid, Q, inward=False), BOX)
    approx = counts.true_counts(Q, BOX)
    assert np.all((inner - 1e-6 <= approx) & (approx <= outer + 1e-6)) and (inner < outer).any()
    assert counts.count_in(BOX) == pts.n and counts.true_count(dp.Rect(0.2, 51.0, 0.3, 51.1), BOX) == 0


def _snap(grid, Q, inward):
    """Each rectangle moved to the base lines just inside (or just outside) its sides."""
    lo, hi = ("left", "right") if inward else ("right", "left")
    shift = (0, -1) if inward else (-1, 0)
    ix0 = np.searchsorted(grid.edges_x, Q[:, 0], side=lo) + shift[0]
    iy0 = np.searchsorted(grid.edges_y, Q[:, 1], side=lo) + shift[0]
    ix1 = np.searchsorted(grid.edges_x, Q[:, 2], side=hi) + shift[1]
    iy1 = np.searchsorted(grid.edges_y, Q[:, 3], side=hi) + shift[1]
    return np.column_stack([grid.edges_x[ix0], grid.edges_y[iy0], grid.edges_x[ix1], grid.edges_y[iy1]])


def test_counts_are_checked():
    with pytest.raises(dp.DataError, match="whole numbers of at least 0"):
        dp.CountData([[1.5, 2]], BOX)
    with pytest.raises(dp.DataError, match="whole numbers of at least 0"):
        dp.CountData([[-1, 2]], BOX)
    with pytest.raises(dp.DataError, match="2-D matrix"):
        dp.CountData([1, 2], BOX)
    with pytest.raises(dp.DataError, match="finite"):
        dp.CountData([[np.nan, 2]], BOX)
    with pytest.raises(dp.DataError, match="the public box"):
        dp.CountData([[1]], (0, 0, 1, 1))
    with pytest.raises(dp.DataError, match="points_per_user"):
        dp.CountData([[1]], BOX, points_per_user=0)


def test_saved_counts_read_back_and_other_files_are_refused(tmp_path, counts):
    c = dp.CountData(counts.counts, BOX, points_per_user=3, name="trips")
    c.save(tmp_path / "trips.npz")
    back = dp.load_counts(tmp_path / "trips.npz")
    assert back.fingerprint == c.fingerprint and back.points_per_user == 3 and back.domain == BOX
    assert dp.load_counts((tmp_path / "trips.npz").read_bytes()).fingerprint == c.fingerprint
    np.savez(tmp_path / "other.npz", counts=counts.counts)
    for bad in (tmp_path / "other.npz", b"not a file at all"):
        with pytest.raises(dp.DataError, match="not a counts file: expected a .npz written by"):
            dp.load_counts(bad)
    with pytest.raises(dp.DataError, match="no such file"):
        dp.load_counts(tmp_path / "missing.npz")


@pytest.mark.parametrize("offset, value", [(10, 99), (8, 1), (8, 1 << 5)],
                         ids=["unknown compression", "encrypted", "compressed patch data"])
def test_a_zip_packed_as_no_counts_file_is_refused_in_words(tmp_path, counts, offset, value):
    """The upload fuzzer's find: a member whose zip record names a compression method Python
    cannot read (AES, 99), or sets the encrypted or patched-data flag, made zipfile raise
    NotImplementedError or RuntimeError, which escaped the file's check as a traceback."""
    dp.CountData(counts.counts, BOX).save(tmp_path / "c.npz")
    raw = bytearray((tmp_path / "c.npz").read_bytes())
    at = raw.index(b"PK\x01\x02")                   # the first member's central directory record
    raw[at + offset:at + offset + 2] = value.to_bytes(2, "little")
    with pytest.raises(dp.DataError, match="not a counts file: expected a .npz written by"):
        dp.load_counts(bytes(raw))


def test_the_fingerprint_follows_the_content(counts):
    same = dp.CountData(counts.counts.copy(), BOX)
    moved = counts.counts.copy()
    moved[0, 0] += 1
    assert same.fingerprint == counts.fingerprint
    assert dp.CountData(moved, BOX).fingerprint != counts.fingerprint
    assert dp.CountData(counts.counts, BOX, points_per_user=2).fingerprint != counts.fingerprint
    assert counts.sample(10).shape == (0, 2)


def test_one_more_point_moves_a_true_count_by_at_most_one(counts):
    # E2EPriv's tuning score assumes it (capped_sensitivity): pro-rata counts are not rounded
    rng = np.random.default_rng(8)
    Q = dp.random_workload(BOX, 400, area_frac=0.003, rng=9)
    for _ in range(20):
        H = counts.counts.copy()
        H[rng.integers(H.shape[0]), rng.integers(H.shape[1])] += 1
        diff = dp.CountData(H, BOX).true_counts(Q, BOX) - counts.true_counts(Q, BOX)
        assert np.all((diff >= -1e-9) & (diff <= 1 + 1e-9))


def test_a_box_fitted_to_the_data_stays_leaky_when_saved(tmp_path, counts):
    leaky = dp.Domain(*BOX.bounds, name="fitted", leaky=True)
    dp.CountData(counts.counts, leaky).save(tmp_path / "c.npz")
    back = dp.load_counts(tmp_path / "c.npz")
    assert back.domain.leaky and back.domain.name == "fitted"
    assert not dp.release("privtree", back, back.domain, 1.0).private


def test_a_small_file_cannot_unpack_into_a_huge_array(tmp_path):
    import zipfile
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w") as z, z.open("counts.npy", "w") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<i8", "fortran_order": False,
                                                   "shape": (100_000, 100_000)})
    with pytest.raises(dp.DataError, match="more than the .* cells a base histogram may have"):
        dp.load_counts(tmp_path / "bomb.npz")


def test_settings_finer_than_the_counts_are_refused_before_any_charge():
    coarse = dp.CountData(np.ones((64, 64), dtype=int), BOX)
    acc = dp.Accountant(total=5)
    for name, params in [("identity", {"grid_size": 128}), ("privtree", {}), ("dawa", {}),
                         ("e2epriv", {"candidates": "paper", "grid_sizes": [100]})]:
        with pytest.raises(dp.ParameterError, match="finer than the counts' 64 x 64 cells"):
            acc.release(name, coarse, BOX, 1.0, params=params)
    assert acc.spent == 0
    # sizes chosen from a noisy N̂ are capped at the counts' cells instead
    big = dp.CountData(np.full((64, 64), 10_000), BOX)
    assert dp.release("ug", big, BOX, 1.0, seed=1).grid.gx == 64
