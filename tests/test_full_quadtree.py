"""Full quadtree + inference ("mechanism A", dp/mechanisms/full_quadtree.py) and the tree
post-processing it uses (dp/postprocess.py): budgets, ledger, consistency, non-negativity,
significance zeroing, and releases from points and from counts."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dp
from dp.mechanisms import full_quadtree as FQ
from dp.mechanisms import trees as T
from dp.mechanisms.leaves import square_base_grid
from dp.noise import discrete_laplace_variance
from dp.postprocess import (PAINT_CELLS, consistent, infer, nonnegative, redistribute,
                            zero_insignificant)
from dp.summed_area import box_sums, summed_area

BOX = dp.Domain(-0.35, 51.35, 0.15, 51.65)


@pytest.fixture(scope="module")
def city():
    return dp.load_sample("small_city_5k")


def _child_sums(tree, x):
    """(value of every internal node, sum of its children's values)."""
    inner = ~tree.is_leaf
    return x[inner], np.bincount(tree.parent[1:], x[1:], minlength=tree.n_nodes)[inner]


def _full_tree(shape):
    return T.quadtree_partition(shape, T._max_quad_height(shape))


def _noisy(tree, rng, eps=0.5, ratio=1.5, lam=3.0):
    """Noisy counts of a random matrix on `tree` (the release's own noise step) and variances."""
    shape = (tree.regions[0, 1], tree.regions[0, 3])
    S = summed_area(rng.poisson(lam, shape) * (rng.random(shape) < 0.3), whole=True)
    E = FQ.depth_budgets(tree.height, eps, ratio)
    return T.noisy_node_counts(dp.Ledger(), rng, tree, S, E[::-1].copy(), "test")


# ================================================================================== budgets
@pytest.mark.parametrize("ratio", [1.0, 1.5, 2.7, 4.0])
def test_level_budgets_grow_by_exactly_the_ratio_and_sum_to_epsilon(ratio):
    E = FQ.depth_budgets(8, 0.3, ratio)
    assert math.fsum(E) == pytest.approx(0.3, rel=1e-15)
    assert E[1:] / E[:-1] == pytest.approx(np.full(8, ratio), rel=1e-12)


@pytest.mark.parametrize("base_cells,ratio", [(256, 1.5), (64, 2.0), (37, 1.0)])
def test_ledger_one_entry_per_level_summing_to_epsilon(city, base_cells, ratio):
    data, dom = city
    rel = dp.release("full_quadtree", data, dom, 0.7, params={"base_cells": base_cells, "ratio": ratio},
                     seed=np.random.default_rng(1))
    h = rel.diagnostics["height"]
    entries = rel.ledger.entries
    assert len(entries) == h + 1 == rel.max_depth() + 1
    assert math.fsum(e.epsilon for e in entries) == pytest.approx(0.7, rel=1e-12)
    assert rel.ledger.total == pytest.approx(0.7, rel=1e-12)
    eps = np.array([e.epsilon for e in entries])                  # root first
    assert eps[1:] / eps[:-1] == pytest.approx(np.full(h, ratio), rel=1e-12)
    assert eps.tolist() == pytest.approx(rel.diagnostics["level_eps"], rel=1e-15)
    assert all(e.noise == "discrete laplace" and e.sensitivity == 1.0 for e in entries)
    assert np.all(rel.eps_path == 0.7)
    # every root-to-cell path spends ε: cells that stop early carry the levels below them
    tree = _full_tree(rel.base.shape)
    E = np.asarray(rel.diagnostics["level_eps"])
    eps_node = T.node_budgets(tree, h, E[::-1].copy())
    path = np.zeros(tree.n_nodes)
    starts = tree.level_bounds()
    path[0] = eps_node[0]
    for d in range(1, h + 1):
        lo, hi = starts[d], starts[d + 1]
        path[lo:hi] = path[tree.parent[lo:hi]] + eps_node[lo:hi]
    assert path[tree.is_leaf] == pytest.approx(np.full(tree.is_leaf.sum(), 0.7), rel=1e-12)


def test_the_tree_goes_down_to_single_cells_and_the_noise_is_integer(city):
    data, dom = city
    base = square_base_grid(dom, 64)
    F = data.histogram(base)
    S = summed_area(F, whole=True)
    ledger = dp.Ledger()
    tree, E, y, var = FQ.full_quadtree_counts(ledger, np.random.default_rng(4), S, base.shape, 1.0, 1.5)
    leaves = tree.regions[tree.is_leaf]
    assert np.all((leaves[:, 1] - leaves[:, 0]) * (leaves[:, 3] - leaves[:, 2]) == 1)
    assert len(leaves) == F.size
    assert y.dtype == np.int64                                   # exact count + integer noise
    assert np.array_equal(var, discrete_laplace_variance(
        1.0 / T.node_budgets(tree, tree.height, E[::-1].copy())))
    assert len(ledger) == tree.height + 1 and ledger.total == pytest.approx(1.0)
    assert not np.array_equal(y, box_sums(S, tree.regions))      # noise was drawn


# ============================================================================== consistency
@pytest.mark.parametrize("shape", [(16, 16), (37, 20), (1, 9), (64, 64)])
def test_consistent_is_consistent_on_random_noisy_counts(shape):
    tree = _full_tree(shape)
    y, var = _noisy(tree, np.random.default_rng(sum(shape)))
    x, v = consistent(tree, y, var)
    own, kids = _child_sums(tree, x)
    assert np.allclose(own, kids, rtol=1e-10, atol=1e-8)
    assert np.all(v > 0) and np.all(v <= var * (1 + 1e-12))


@pytest.mark.parametrize("shape,h", [((8, 8), 3), ((5, 3), 3), ((6, 4), 2)])
def test_consistent_variance_is_the_least_squares_variance(shape, h):
    # v is the diagonal of the covariance of the generalised least-squares estimate A β̂
    tree = T.quadtree_partition(shape, h)
    rng = np.random.default_rng(3)
    var = rng.uniform(0.5, 5.0, tree.n_nodes)
    leaf = np.flatnonzero(tree.is_leaf)
    A = np.zeros((tree.n_nodes, len(leaf)))                       # node x leaf: leaf under node
    A[leaf, np.arange(len(leaf))] = 1.0
    for d in range(tree.height, 0, -1):
        for u in np.flatnonzero(tree.depth == d):
            A[tree.parent[u]] += A[u]
    W = np.diag(1.0 / var)
    cov = A @ np.linalg.inv(A.T @ W @ A) @ A.T
    y = rng.normal(10, 3, tree.n_nodes)
    x, v = consistent(tree, y, var)
    assert np.allclose(x, cov @ W @ y, rtol=1e-10, atol=1e-10)
    assert np.allclose(v, np.diag(cov), rtol=1e-10, atol=1e-12)


# ============================================================================ non-negativity
def test_nonnegative_keeps_sums_and_is_nonnegative():
    for shape in ((16, 16), (37, 20), (5, 1)):
        tree = _full_tree(shape)
        y, var = _noisy(tree, np.random.default_rng(11), eps=0.05)
        x, _ = consistent(tree, y, var)
        assert (x < 0).any()
        out = nonnegative(tree, x)
        assert np.all(out >= 0)
        own, kids = _child_sums(tree, out)
        assert np.allclose(own, kids, rtol=1e-10, atol=1e-8)
        assert out[0] == max(x[0], 0.0)                           # the root is only clipped


def test_nonnegative_leaves_a_nonnegative_consistent_input_unchanged():
    tree = _full_tree((37, 20))
    rng = np.random.default_rng(12)
    x = np.zeros(tree.n_nodes)
    leaf = tree.is_leaf
    x[leaf] = rng.poisson(1.0, leaf.sum()) * 1.0                  # whole numbers: sums are exact
    starts = tree.level_bounds()
    for d in range(tree.height, 0, -1):
        lo, hi = starts[d], starts[d + 1]
        x += np.bincount(tree.parent[lo:hi], x[lo:hi], minlength=tree.n_nodes)
    own, kids = _child_sums(tree, x)
    assert np.array_equal(own, kids)
    assert np.array_equal(nonnegative(tree, x), x)


def test_nonnegative_splits_by_cells_when_all_children_clip_to_zero():
    tree = T.quadtree_partition((3, 2), 1)                        # root 3x2: children 1x1 1x1 2x1 2x1
    assert tree.n_nodes == 5
    cells = (tree.regions[:, 1] - tree.regions[:, 0]) * (tree.regions[:, 3] - tree.regions[:, 2])
    assert cells.tolist() == [6, 1, 1, 2, 2]
    out = nonnegative(tree, np.array([12.0, -1.0, -2.0, 0.0, -3.0]))
    assert out.tolist() == [12.0, 2.0, 2.0, 4.0, 4.0]
    assert nonnegative(tree, np.array([-5.0, 3.0, 1.0, 0.0, 0.0])).tolist() == [0.0] * 5
    assert nonnegative(tree, np.array([8.0, 3.0, -1.0, 1.0, 0.0])).tolist() == [8.0, 6.0, 0.0, 2.0, 0.0]


# ===================================================================== significance zeroing
def test_zero_insignificant_zeros_whole_subtrees():
    # root (0); children 1..4 (2x2 cells each); grandchildren 5..20, four per child, in order
    tree = T.quadtree_partition((4, 4), 2)
    assert tree.parent.tolist() == [-1, 0, 0, 0, 0] + [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    x = np.array([40.0,
                  1.0, 12.0, 20.0, 7.0,                  # child 1 insignificant (1 < 1.5 sd)
                  0.2, 0.3, 0.3, 0.2,                     # under child 1: zeroed with it
                  9.0, 1.4, 1.6, 0.0,                     # under child 2: 1.4 and 0.0 zeroed
                  5.0, 5.0, 5.0, 5.0,                     # under child 3: all kept
                  2.0, 2.0, 2.0, 1.0])                    # under child 4 (sd 2 there): all < 3
    sd = np.ones(21)
    sd[17:] = 2.0
    got, zeroed = zero_insignificant(tree, x, sd, 1.5)
    expect = np.array([40.0,
                       0.0, 12.0, 20.0, 7.0,
                       0.0, 0.0, 0.0, 0.0,
                       9.0, 0.0, 1.6, 0.0,
                       5.0, 5.0, 5.0, 5.0,
                       0.0, 0.0, 0.0, 0.0])
    assert np.array_equal(got, expect)
    assert np.array_equal(zeroed, expect == 0)
    # a large value under an insignificant node goes with it
    x2 = x.copy()
    x2[5] = 100.0
    assert zero_insignificant(tree, x2, sd, 1.5)[0][5] == 0.0
    # k = 0 zeroes only negative values (none after nonnegative)
    assert np.array_equal(zero_insignificant(tree, x, sd, 0.0)[0], x)
    assert zero_insignificant(tree, -x, sd, 0.0)[1].all()


def test_redistribute_hands_the_zeroed_mass_to_the_kept_siblings():
    # the tree and zeroing of the test above, on non-negative consistent values: root 40 =
    # 8 + 12 + 13 + 7, each child the sum of its four children
    tree = T.quadtree_partition((4, 4), 2)
    x = np.array([40.0,
                  8.0, 12.0, 13.0, 7.0,
                  2.0, 2.0, 2.0, 2.0,                     # child 1, zeroed: its 8 goes to 2 and 3
                  9.0, 1.0, 2.0, 0.0,                     # child 2: 1 and 0 zeroed, 9 : 2 share 12
                  4.0, 3.0, 3.0, 3.0,                     # child 3: all kept
                  2.0, 2.0, 2.0, 1.0])                    # child 4: all zeroed, its parent kept
    zeroed = np.zeros(21, dtype=bool)
    zeroed[[1, 5, 6, 7, 8, 10, 12, 17, 18, 19, 20]] = True
    out = redistribute(tree, x, zeroed)
    # root's 40 over the kept 12 + 13 + 7 = 32 (factor 1.25): 15, 16.25, 8.75; then 15 over
    # 9 + 2 (9/11 and 2/11), 16.25 over 4,3,3,3 (x 1.25); child 4 (4 cells, at most
    # PAINT_CELLS) has no kept child: its 8.75 is painted evenly over its four cells
    expect = np.array([40.0,
                       0.0, 15.0, 16.25, 8.75,
                       0.0, 0.0, 0.0, 0.0,
                       15.0 * 9 / 11, 0.0, 15.0 * 2 / 11, 0.0,
                       5.0, 3.75, 3.75, 3.75,
                       8.75 / 4, 8.75 / 4, 8.75 / 4, 8.75 / 4])
    assert PAINT_CELLS >= 4
    assert out == pytest.approx(expect, rel=1e-12)
    assert np.all(out[zeroed & (tree.parent != 4)] == 0)
    assert out[tree.is_leaf].sum() == pytest.approx(40.0, rel=1e-12)    # the leaves add up
    own, kids = _child_sums(tree, out)
    assert own == pytest.approx(kids, rel=1e-12)
    # an orphan larger than paint_cells carries nothing: its 7 counts as zeroed, so the root's
    # 40 goes to children 2 and 3 (12 + 13 = 25, factor 1.6)
    big = redistribute(tree, x, zeroed, paint_cells=2)
    expect_big = np.array([40.0,
                           0.0, 19.2, 20.8, 0.0,
                           0.0, 0.0, 0.0, 0.0,
                           19.2 * 9 / 11, 0.0, 19.2 * 2 / 11, 0.0,
                           6.4, 4.8, 4.8, 4.8,
                           0.0, 0.0, 0.0, 0.0])
    assert big == pytest.approx(expect_big, rel=1e-12)
    # ... and a node whose only kept descendants are such orphans carries nothing either; when
    # that node is the root, its significant total would be lost, so every orphan is painted
    z2 = zeroed.copy()
    z2[[2, 3, 9, 11, 13, 14, 15, 16]] = True                # only child 4 (an orphan) is kept
    painted = redistribute(tree, x, z2)                     # painted: the root's 40 over its cells
    assert painted[[4, 17, 18, 19, 20]] == pytest.approx([40.0, 10.0, 10.0, 10.0, 10.0], rel=1e-12)
    assert redistribute(tree, x, z2, paint_cells=2) == pytest.approx(painted, rel=1e-12)
    z3 = z2.copy()
    z3[0] = True                                            # an insignificant root: nothing released
    assert redistribute(tree, x, z3).tolist() == [0.0] * 21
    # paint_cells=None (the quadtree's and kd-tree's rule): child 4 keeps its 8.75, its cells 0
    old = redistribute(tree, x, zeroed, paint_cells=None)
    assert old == pytest.approx(np.where(tree.parent == 4, 0.0, expect), rel=1e-12)
    # nothing zeroed: a consistent input comes back unchanged
    for cells in (PAINT_CELLS, 2, None):
        assert redistribute(tree, x, np.zeros(21, dtype=bool), cells) == pytest.approx(x, rel=1e-12)


def test_redistribute_paints_small_orphans_in_proportion_to_cells():
    # a 3 x 2 root (6 cells) whose four children (1, 1, 2 and 2 cells) were all zeroed
    tree = T.quadtree_partition((3, 2), 1)
    zeroed = np.array([False, True, True, True, True])
    out = redistribute(tree, np.array([12.0, 3.0, 3.0, 3.0, 3.0]), zeroed, paint_cells=6)
    assert out.tolist() == pytest.approx([12.0, 2.0, 2.0, 4.0, 4.0], rel=1e-12)
    # a root larger than paint_cells with nothing kept below would lose its 12: painted all the same
    assert redistribute(tree, np.array([12.0, 3.0, 3.0, 3.0, 3.0]), zeroed, paint_cells=5).tolist() \
        == pytest.approx(out.tolist(), rel=1e-12)


# ================================================================================= releases
def _maximal(tree, zeroed):
    """Zeroed nodes whose parent was not zeroed (the tops of the zeroed subtrees)."""
    top = zeroed.copy()
    top[1:] &= ~zeroed[tree.parent[1:]]
    return top


def test_whole_box_is_close_to_n(city):
    data, dom = city
    params = FQ.FULL_QUADTREE.resolve_params({})
    N, eps, k = data.n, 1.0, params["zero_sd"]
    whole = dp.Rect(*dom.bounds)
    # without zeroing the released total is the least-squares root estimate x_root (clipped at
    # 0): unbiased, with variance v_root from `consistent`; Chebyshev: |error| > 6 sd with
    # probability < 1/36 for any seed
    off = dp.release("full_quadtree", data, dom, eps, params={"zero_sd": 0}, seed=np.random.default_rng(5))
    base = off.base
    S = summed_area(data.histogram(base), whole=True)
    tree, E, y, var = FQ.full_quadtree_counts(dp.Ledger(), np.random.default_rng(5), S, base.shape,
                                              eps, params["ratio"])
    x, v = consistent(tree, y, var)
    sd_root = math.sqrt(v[0])
    assert sd_root < math.sqrt(var[0])                            # better than the root's own count
    assert off.counts.sum() == pytest.approx(max(x[0], 0.0), rel=1e-9)
    assert abs(off.answer(whole) - N) <= 6 * sd_root
    assert off.diagnostics["nodes_zeroed"] == 0
    # with zeroing, the same draws are the pipeline nonnegative -> zero (each node's own noise
    # sd) -> redistribute; the zeroed mass goes to the regions that carry mass and small kept
    # regions with nothing kept inside are painted, so the total is the same root estimate
    on = dp.release("full_quadtree", data, dom, eps, seed=np.random.default_rng(5))
    xn = nonnegative(tree, x)
    _, zeroed = zero_insignificant(tree, xn, np.sqrt(var), k)
    expect = redistribute(tree, xn, zeroed)
    assert np.array_equal(on.counts, expect[tree.is_leaf])        # the release is this pipeline
    assert on.diagnostics["nodes_zeroed"] == zeroed.sum() > 0
    kept = ~zeroed & ~tree.is_leaf
    orphaned = kept & (np.bincount(tree.parent[1:], ~zeroed[1:], minlength=tree.n_nodes) == 0)
    assert orphaned.any()                                         # the case that used to lose mass
    assert on.counts.sum() == pytest.approx(off.counts.sum(), rel=1e-9)
    assert np.all(on.counts >= 0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_released_total_of_a_spread_out_sample_is_its_size_up_to_the_root_noise(city, seed):
    # small_city_5k spreads over its box, so at ε = 1 many kept regions have every child
    # zeroed; their counts used to stay at those regions, off the released cells (1,397-1,609
    # of the 5,000 points were released for seeds 0-2). Now the released total is the root's
    # least-squares estimate max(x_root, 0), unbiased for N with the variance v_root that
    # `consistent` computes from the public noise variances alone (not from the draws): by
    # Chebyshev, |total - N| > 6 sd with probability < 1/36 for any seed
    data, dom = city
    N, eps = data.n, 1.0
    rel = dp.release("full_quadtree", data, dom, eps, seed=np.random.default_rng(seed))
    tree = _full_tree(rel.base.shape)
    E = FQ.depth_budgets(tree.height, eps, FQ.FULL_QUADTREE.resolve_params({})["ratio"])
    var = discrete_laplace_variance(1.0 / T.node_budgets(tree, tree.height, E[::-1].copy()))
    sd_root = math.sqrt(consistent(tree, np.zeros(tree.n_nodes), var)[1][0])
    assert 100 < sd_root < 400                                    # 128.5 here: 6 sd = 771
    assert rel.diagnostics["leaves_zeroed"] > 0.9 * len(rel.counts)
    assert abs(rel.counts.sum() - N) <= 6 * sd_root


def test_thin_spread_out_data_at_small_epsilon_keep_their_total():
    # 19,435 points spread evenly over the box: at ε 0.05 the finest levels' noise (sd ~ 500 a
    # cell) makes every small region insignificant, and before, the root's significant total was
    # then lost: the release was all zeros in 19 of 20 releases. Now every orphan is painted, so
    # the released total is the root's least-squares estimate, unbiased for N with sd_root from
    # `consistent`; Chebyshev: |total - N| > 6 sd_root with probability < 1/36 per release
    rng = np.random.default_rng(3)
    n, eps = 19_435, 0.05
    data = dp.PointData(rng.uniform(BOX.west, BOX.east, n), rng.uniform(BOX.south, BOX.north, n))
    ratio = FQ.FULL_QUADTREE.resolve_params({})["ratio"]
    for seed in range(5):
        rel = dp.release("full_quadtree", data, BOX, eps, seed=np.random.default_rng(seed))
        tree = _full_tree(rel.base.shape)
        E = FQ.depth_budgets(tree.height, eps, ratio)
        var = discrete_laplace_variance(1.0 / T.node_budgets(tree, tree.height, E[::-1].copy()))
        sd_root = math.sqrt(consistent(tree, np.zeros(tree.n_nodes), var)[1][0])
        assert sd_root < n / 6                                    # the total is significant
        assert rel.counts.sum() > 0
        assert abs(rel.counts.sum() - n) <= 6 * sd_root


@pytest.mark.parametrize("name,fanout", [("quadtree", 4), ("kdtree", 2)])
def test_the_other_full_trees_take_the_same_inference(city, name, fanout):
    # quadtree (fixed height: no size draw, all of ε on the counts): zero_sd 0 is consistency
    # alone, as published (negative leaves stay); zero_sd 1 is dp.postprocess.infer on the same
    # draws: non-negative leaves, whole insignificant subtrees zeroed
    data, dom = city
    if name == "kdtree":                # its medians are drawn too: compare the two settings
        a = dp.release(name, data, dom, 0.5, params={"height": 6}, seed=np.random.default_rng(2))
        b = dp.release(name, data, dom, 0.5, params={"height": 6, "zero_sd": 1.0},
                       seed=np.random.default_rng(2))
        assert np.array_equal(a.leaves, b.leaves)                # same tree, same draws
        assert np.all(b.counts >= 0) and (a.counts < 0).any() and (b.counts == 0).sum() > (a.counts == 0).sum()
        return
    eps, h = 0.5, 6
    off = dp.release(name, data, dom, eps, params={"height": h}, seed=np.random.default_rng(2))
    on = dp.release(name, data, dom, eps, params={"height": h, "zero_sd": 1.0},
                    seed=np.random.default_rng(2))
    S = summed_area(data.histogram(off.base), whole=True)
    tree = T.quadtree_partition(off.base.shape, h)
    E = T.level_budgets(tree.height, eps, "geometric", fanout)
    y, var = T.noisy_node_counts(dp.Ledger(), np.random.default_rng(2), tree, S, E, name)
    x, _ = consistent(tree, y, var)
    assert np.allclose(off.counts, x[tree.is_leaf]) and (off.counts < 0).any()
    expect, zeroed = infer(tree, y, var, 1.0, paint_cells=None)   # orphans keep their mass
    assert np.array_equal(on.counts, expect[tree.is_leaf]) and zeroed.any()
    assert np.all(on.counts >= 0)


def _points(n=20_000, seed=3):
    """Clustered points inside BOX (as tests/test_counts.py)."""
    rng = np.random.default_rng(seed)
    fx = np.concatenate([rng.normal(0.4, 0.08, n // 2), rng.uniform(0, 1, n - n // 2)]).clip(0.001, 0.999)
    fy = np.concatenate([rng.normal(0.6, 0.08, n // 2), rng.uniform(0, 1, n - n // 2)]).clip(0.001, 0.999)
    return BOX.west + fx * BOX.width, BOX.south + fy * BOX.height


def test_counts_from_aggregate_give_the_release_of_the_points(tmp_path):
    # counted by dp.aggregate on the release's own square base grid (256 cells on the longer
    # side, 256 x 247 here), the counts are that grid's histogram: same seed, same bytes. (From
    # 1024 cells, 987 rows do not coarsen exactly to 247: such counts are snapped, not equal.)
    x, y = _points()
    (tmp_path / "pts.csv").write_text("longitude,latitude\n" + "\n".join(
        f"{a:.17g},{b:.17g}" for a, b in zip(x, y)))
    pts = dp.PointData(x, y)
    counts = dp.aggregate(tmp_path / "pts.csv", BOX, 256)
    assert counts.n == pts.n and counts.counts.shape == square_base_grid(BOX, 256).shape
    for params in ({}, {"zero_sd": 0}, {"ratio": 2.0, "zero_sd": 3.0}):
        a = dp.release("full_quadtree", counts, BOX, 1.0, params=params, seed=11)
        b = dp.release("full_quadtree", pts, BOX, 1.0, params=params, seed=11)
        assert a.counts.tobytes() == b.counts.tobytes() and a.leaves.tobytes() == b.leaves.tobytes()
        assert a.ledger.entries == b.ledger.entries and a.metadata() == b.metadata()
    small = dp.aggregate(tmp_path / "pts.csv", BOX, 64)              # the whole export, on 64 cells
    a = dp.release("full_quadtree", small, BOX, 1.0, params={"base_cells": 64}, seed=11)
    b = dp.release("full_quadtree", pts, BOX, 1.0, params={"base_cells": 64}, seed=11)
    assert a.to_json() == b.to_json()
    with pytest.raises(dp.ParameterError, match="finer than the counts"):
        dp.release("full_quadtree", counts, BOX, 1.0, params={"base_cells": 512})


def test_parameters_are_checked_and_diagnostics_stay_private(city):
    data, dom = city
    for bad in ({"ratio": 0.9}, {"ratio": 4.5}, {"zero_sd": -1}, {"base_cells": 4}):
        with pytest.raises(dp.ParameterError):
            dp.release("full_quadtree", data, dom, 1.0, params=bad)
    spec = dp.mechanisms()["full_quadtree"]
    assert spec.budget_parts == ("counts",) and spec.default_split == (1.0,)
    assert {p.name: p.default for p in spec.params} == {"base_cells": 256, "ratio": 1.7, "zero_sd": 1.5}
    rel = dp.release("full_quadtree", data, dom, 1.0, params={"base_cells": 64})
    assert rel.private and set(rel.diagnostics) >= {"level_eps", "nodes_zeroed"}
    assert "nodes_zeroed" not in rel.to_json() and "level_eps" not in rel.to_json()
    assert rel.leaf_var is None and all(math.isnan(b) for b in rel.interval(dp.Rect(*dom.bounds)))
