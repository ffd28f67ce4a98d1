"""Competitor trees of spec 003 section 5.3: AG, quadtree, kd-tree (with smoothing) and PrivTree."""
from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

import dp
from dp.mechanisms import trees as T
from dp.mechanisms.leaves import paint

NAMES = ("ag", "quadtree", "kdtree", "privtree")
UNIT = dp.Domain(0.0, 0.0, 1.0, 1.0)


@pytest.fixture(scope="module")
def city():
    return dp.load_sample("small_city_5k")


@pytest.fixture(scope="module")
def city_matrix(city):
    """The 5k sample on a 64 x 64 base grid and its summed-area table."""
    data, dom = city
    F = data.histogram(dp.UniformGrid(dom, 64, 64))
    return F, T.prefix_sum(F)


def assert_tiles(leaves, shape):
    """Leaves are disjoint and cover the grid: each cell is covered exactly once, areas >= 1."""
    leaves = np.asarray(leaves)
    area = (leaves[:, 1] - leaves[:, 0]) * (leaves[:, 3] - leaves[:, 2])
    assert np.all(area >= 1)
    assert area.sum() == shape[0] * shape[1]
    assert leaves[:, [0, 2]].min() >= 0 and leaves[:, 1].max() <= shape[0] and leaves[:, 3].max() <= shape[1]
    cover = paint(shape, leaves, np.ones(len(leaves)))
    assert np.allclose(cover, 1.0)


def fractions(leaves, q):
    """Overlap fraction of each leaf with a query [r0, r1) x [c0, c1) in (fractional) cell units."""
    r0, r1, c0, c1 = q
    oy = np.clip(np.minimum(leaves[:, 1], r1) - np.maximum(leaves[:, 0], r0), 0, None)
    ox = np.clip(np.minimum(leaves[:, 3], c1) - np.maximum(leaves[:, 2], c0), 0, None)
    return oy * ox / ((leaves[:, 1] - leaves[:, 0]) * (leaves[:, 3] - leaves[:, 2]))


QUERIES_64 = [(0, 64, 0, 64), (10, 40, 5, 33), (30.5, 50.25, 20, 60), (3, 9, 50, 61)]


def assert_unbiased(answers, expected, n_se=5.0):
    """Monte Carlo mean within n_se standard errors of the expectation (per query)."""
    answers = np.asarray(answers)
    se = answers.std(axis=0, ddof=1) / math.sqrt(len(answers))
    assert np.all(np.abs(answers.mean(axis=0) - expected) <= n_se * se + 1e-9), \
        (answers.mean(axis=0), expected, se)


# ------------------------------------------------------------------------------ end to end
@pytest.mark.parametrize("name", NAMES)
def test_end_to_end_on_small_city(city, name):
    # dp.release on the 5k sample: ledger sums to ε (dp.release checks it), leaves tile the base grid
    data, dom = city
    rel = dp.release(name, data, dom, 1.0, seed=1)
    assert isinstance(rel, dp.LeafRelease) and rel.private and rel.spec.private
    assert rel.ledger.total == pytest.approx(1.0, rel=1e-9)
    assert all(e.epsilon > 0 and e.private and e.sensitivity == 1.0 for e in rel.ledger)
    assert rel.base.shape[1] == 1024 or rel.base.shape[0] == 1024
    assert_tiles(rel.leaves, rel.base.shape)
    assert np.all(np.isfinite(rel.counts)) and len(rel.counts) == rel.n_leaves
    assert np.all(rel.eps_path <= 1.0 + 1e-12) and np.all(rel.eps_path > 0)
    # every leaf is a node of the released tree, and the root is depth 0
    keys = {tuple(r) for r in rel.nodes[:, :4].tolist()}
    assert all(tuple(r) in keys for r in rel.leaves.tolist())
    assert rel.nodes[rel.nodes[:, 4] == 0, :4].tolist() == [[0, rel.base.gy, 0, rel.base.gx]]
    # answers are the uniformity-assumption sums; the whole domain gives the total released count
    whole = dp.Rect(dom.west, dom.south, dom.east, dom.north)
    assert rel.answer(whole) == pytest.approx(rel.counts.sum(), rel=1e-9)
    assert abs(rel.answer(whole) - data.n) < 0.1 * data.n
    gj = json.loads(rel.to_json())
    assert len(gj["features"]) == rel.n_leaves
    assert not any("true" in k.lower() for f in gj["features"] for k in f["properties"])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("eps, split", [(0.1, None), (3.7, None), (0.5, "custom")])
def test_ledger_sums_to_epsilon_for_any_split(name, eps, split):
    # sequential composition: the per-level / per-step charges add up to ε (spec 003 section 4)
    data, dom = dp.load_sample("small_city_5k")
    spec = dp.mechanisms()[name]
    if split == "custom":
        split = [0.3, 0.7][:len(spec.budget_parts)] if len(spec.budget_parts) == 2 else [1.0]
    rel = dp.release(name, data, dom, eps, split=split, params={"base_cells": 128}, seed=2)
    rel.ledger.check(eps)
    assert math.fsum(e.epsilon for e in rel.ledger) == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_non_square_domain_and_small_grid_tile(name):
    # thin nodes (one cell wide) and odd sides still give a disjoint cover of a non-square base grid
    dom = dp.PRESETS["Contiguous USA"]
    rng = np.random.default_rng(4)
    data = dp.PointData(rng.uniform(dom.west, dom.east, 3000), rng.normal(40, 3, 3000).clip(25, 50))
    params = {"base_cells": 37}
    if name in ("quadtree", "kdtree"):
        params["height"] = 12 if name == "kdtree" else 6
    rel = dp.release(name, data, dom, 2.0, params=params, seed=5)
    assert rel.base.shape[0] != rel.base.shape[1]
    assert_tiles(rel.leaves, rel.base.shape)
    rel.ledger.check(2.0)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_release(city, name):
    # one Generator per release (spec 003 section 6 item 17): a seed fixes the whole output
    data, dom = city
    a = dp.release(name, data, dom, 1.0, params={"base_cells": 128}, seed=11)
    b = dp.release(name, data, dom, 1.0, params={"base_cells": 128}, seed=11)
    c = dp.release(name, data, dom, 1.0, params={"base_cells": 128}, seed=12)
    assert np.array_equal(a.leaves, b.leaves) and np.array_equal(a.counts, b.counts)
    assert a.counts.shape != c.counts.shape or not np.array_equal(a.counts, c.counts)


def test_automatic_height_treats_n_as_public(city):
    # auto height = HTF's rule floor(log2(N ε / 10)) (kd) and half of it (quadtree), N public
    data, dom = city
    q = dp.release("quadtree", data, dom, 1.0, seed=1)
    k = dp.release("kdtree", data, dom, 1.0, seed=1)
    assert q.max_depth() == math.floor(math.log2(5000 / 10) / 2) == 4
    assert q.n_public == 5000 and q.metadata()["dataset_size_public"] == 5000
    assert k.diagnostics["height"] == math.floor(math.log2(5000 / 10)) == 8
    fixed = dp.release("quadtree", data, dom, 1.0, params={"height": 3}, seed=1)
    assert fixed.n_public is None and fixed.max_depth() == 3 and fixed.n_leaves == 64
    assert len(fixed.ledger) == 4
    kd = dp.release("kdtree", data, dom, 1.0, params={"height": 5}, seed=1)
    assert len(kd.ledger) == 5 + 6      # 5 median levels + 6 count levels


# ----------------------------------------------------------------------- geometric budget
@pytest.mark.parametrize("fanout", [2, 4])
def test_geometric_budget_sums_exactly_and_has_ratio_f_cube_root(fanout):
    # Eq. (G) for fanout f: ε_i = r^(h−i) ε (r−1)/(r^(h+1)−1), r = f^(1/3); Σ ε_i = ε
    for h in range(0, 21):
        E = T.geometric_budgets(h, 0.37, fanout)
        assert len(E) == h + 1
        assert math.fsum(E) == pytest.approx(0.37, abs=1e-12)
        if h:
            assert np.allclose(E[:-1] / E[1:], fanout ** (1 / 3), rtol=1e-12)
            assert np.all(np.diff(E) < 0)            # the root gets the least


def test_geometric_budget_reference_vector_and_optimality():
    # spec 003 section 3.6 reference (h = 2, f = 2) and the KKT optimum of Σ f^(h−i)/ε_i² for f = 4
    assert np.allclose(T.geometric_budgets(2, 1.0, 2), [0.412599, 0.327480, 0.259921], atol=1e-6)
    h, f = 6, 4
    E = T.geometric_budgets(h, 1.0, f)
    cost = lambda e: np.sum(f ** (h - np.arange(h + 1)) / e ** 2)
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = E * np.exp(rng.normal(0, 0.05, h + 1))
        assert cost(p / p.sum()) >= cost(E)
    assert np.allclose(T.uniform_budgets(4, 1.0), 0.2)


# --------------------------------------------------------------------------------- smoothing
def test_smoothing_equals_hay_formula_on_a_complete_quadtree():
    # spec 003 section 5.3: Z_v = α_j Y_v + (1−α_j) Σ Z_u, α_j = f^j ε_j² / E_j; x_u = Z_u + (x_v − Σ Z_w)/f
    tree = T.quadtree_partition((8, 8), 3)
    assert tree.n_nodes == 1 + 4 + 16 + 64
    f, h = 4, 3
    E = T.geometric_budgets(h, 1.0, f)
    eps = T.node_budgets(tree, h, E)
    rng = np.random.default_rng(1)
    y = rng.normal(50, 10, tree.n_nodes)
    got = T.smooth(tree, y, 2 / eps ** 2)
    Ej = np.cumsum(f ** np.arange(h + 1) * E ** 2)
    alpha = f ** np.arange(h + 1) * E ** 2 / Ej
    Z = y.copy()
    for d in range(h - 1, -1, -1):                                # bottom-up, height j = h − d
        for v in np.flatnonzero(tree.depth == d):
            kids = np.flatnonzero(tree.parent == v)
            Z[v] = alpha[h - d] * y[v] + (1 - alpha[h - d]) * Z[kids].sum()
    X = Z.copy()
    for d in range(h):                                            # top-down
        for v in np.flatnonzero(tree.depth == d):
            kids = np.flatnonzero(tree.parent == v)
            X[kids] = Z[kids] + (X[v] - Z[kids].sum()) / f
    assert np.allclose(got, X, rtol=1e-12, atol=1e-9)


def _children_sums(tree, x):
    inner = ~tree.is_leaf
    sums = np.bincount(tree.parent[1:], x[1:], minlength=tree.n_nodes)
    return x[inner], sums[inner]


def test_smoothing_is_consistent_on_kd_and_quad_trees(city_matrix):
    # consistency: after smoothing every internal node equals the sum of its children
    F, S = city_matrix
    rng = np.random.default_rng(2)
    for tree in (T.kdtree_partition(S, F.shape, 9, 0.05, rng), T.quadtree_partition(F.shape, 5),
                 T.quadtree_partition((37, 20), 6)):
        h = tree.height
        E = T.geometric_budgets(h, 1.0, 2)
        root_shape = (tree.regions[0, 1], tree.regions[0, 3])
        S_tree = S if root_shape == F.shape else T.prefix_sum(rng.poisson(2.0, root_shape))
        y, var = T.noisy_node_counts(tree, S_tree, T.node_budgets(tree, h, E), rng)
        x = T.smooth(tree, y, var)
        own, kids = _children_sums(tree, x)
        assert np.allclose(own, kids, rtol=1e-10, atol=1e-8)


@pytest.mark.slow
def test_smoothing_reduces_variance_and_stays_unbiased(city_matrix):
    # Hay et al. least squares: unbiased, and no more variance than the raw leaf counts (Monte Carlo)
    F, S = city_matrix
    tree = T.kdtree_partition(S, F.shape, 8, 0.1, np.random.default_rng(3))
    h = tree.height
    eps_node = T.node_budgets(tree, h, T.geometric_budgets(h, 0.5, 2))
    leaf = tree.is_leaf
    leaves = tree.regions[leaf]
    A = np.stack([fractions(leaves, q) for q in QUERIES_64], axis=1)
    true_leaf = T.region_counts(S, leaves)
    rng = np.random.default_rng(4)
    raw, sm = [], []
    for _ in range(1500):
        y, var = T.noisy_node_counts(tree, S, eps_node, rng)
        raw.append(y[leaf])
        sm.append(T.smooth(tree, y, var)[leaf])
    raw, sm = np.array(raw), np.array(sm)
    assert_unbiased(sm @ A, true_leaf @ A)
    assert_unbiased(raw @ A, true_leaf @ A)
    leaf_mse_raw = ((raw - true_leaf) ** 2).mean(0).sum()
    leaf_mse_sm = ((sm - true_leaf) ** 2).mean(0).sum()
    assert leaf_mse_sm < 0.95 * leaf_mse_raw
    q_var_raw, q_var_sm = (raw @ A).var(0), (sm @ A).var(0)
    assert np.all(q_var_sm < q_var_raw * 1.05)
    assert q_var_sm[0] < 0.2 * q_var_raw[0]          # the whole-domain query gains the most


# ------------------------------------------------------------- unbiased on a fixed partition
def test_quadtree_unbiased_on_fixed_partition(city_matrix):
    # E[answer] = Σ_L true_L · overlap_L on a fixed partition (Laplace noise + linear smoothing)
    F, S = city_matrix
    tree = T.quadtree_partition(F.shape, 4)
    eps_node = T.node_budgets(tree, 4, T.geometric_budgets(4, 0.3, 4))
    leaf = tree.is_leaf
    A = np.stack([fractions(tree.regions[leaf], q) for q in QUERIES_64], axis=1)
    rng = np.random.default_rng(5)
    ans = [T.smooth(tree, *T.noisy_node_counts(tree, S, eps_node, rng))[leaf] @ A for _ in range(800)]
    assert_unbiased(ans, T.region_counts(S, tree.regions[leaf]) @ A)


def test_kdtree_unbiased_on_fixed_partition(city_matrix):
    # the kd partition is fixed by one seed; the count pass (noise + smoothing) is then unbiased
    F, S = city_matrix
    tree = T.kdtree_partition(S, F.shape, 7, 0.02, np.random.default_rng(6))
    eps_node = T.node_budgets(tree, tree.height, T.uniform_budgets(tree.height, 0.3))
    leaf = tree.is_leaf
    A = np.stack([fractions(tree.regions[leaf], q) for q in QUERIES_64], axis=1)
    rng = np.random.default_rng(7)
    ans = [T.smooth(tree, *T.noisy_node_counts(tree, S, eps_node, rng))[leaf] @ A for _ in range(800)]
    assert_unbiased(ans, T.region_counts(S, tree.regions[leaf]) @ A)


def test_ag_unbiased_on_fixed_layout(city_matrix):
    # AG with m2 fixed by one draw: level-1 and level-2 noise redrawn, inference is linear => unbiased
    F, S = city_matrix
    eps1, eps2 = 0.25, 0.25
    cells = T.ag_cells(F.shape, 10)
    v0 = T.region_counts(S, cells) + np.random.default_rng(8).laplace(0, 1 / eps1, len(cells))
    sub, cell, k = T.ag_subcells(cells, T.ag_second_level_size(v0, eps2))
    assert k.max() > 1
    A = np.stack([fractions(sub, q) for q in QUERIES_64], axis=1)
    tv, tu = T.region_counts(S, cells), T.region_counts(S, sub)
    rng = np.random.default_rng(9)
    R = 3000
    V = tv + rng.laplace(0, 1 / eps1, (R, len(cells)))
    U = tu + rng.laplace(0, 1 / eps2, (R, len(sub)))
    ans = np.array([T.ag_inference(V[i], U[i], cell, k, 0.5) @ A for i in range(R)])
    assert_unbiased(ans, tu @ A)


def test_privtree_leaf_counts_unbiased_with_stated_variance(city_matrix):
    # PrivTree leaves: true count + Lap(1/ε_counts), independent: mean = truth, var = 2/ε² (= leaf_var)
    F, S = city_matrix
    lam, delta = T.privtree_constants(0.5)
    rng = np.random.default_rng(10)
    tree = T.privtree_grow(S, F.shape, lam, delta, 0.0, lambda n: rng.laplace(0, lam, n))
    leaves = tree.regions[tree.is_leaf]
    A = np.stack([fractions(leaves, q) for q in QUERIES_64], axis=1)
    true = T.region_counts(S, leaves)
    draws = true + rng.laplace(0, 1 / 0.5, (4000, len(leaves)))
    assert_unbiased(draws @ A, true @ A)
    assert np.var(draws - true) == pytest.approx(2 / 0.5 ** 2, rel=0.03)


# ----------------------------------------------------------------------------------- PrivTree
def _privtree_reference(F, lam, delta, theta):
    """Recursive reading of the paper's rule with zero noise (loops are fine on a toy matrix)."""
    out = []

    def visit(r0, r1, c0, c1, d):
        c = F[r0:r1, c0:c1].sum()
        b = max(c - d * delta, theta - delta)
        if (r1 - r0 > 1 or c1 - c0 > 1) and b > theta:
            rm = r0 + (r1 - r0) // 2 if r1 - r0 > 1 else r1
            cm = c0 + (c1 - c0) // 2 if c1 - c0 > 1 else c1
            for a in ((r0, rm), (rm, r1)):
                for bb in ((c0, cm), (cm, c1)):
                    if a[1] > a[0] and bb[1] > bb[0]:
                        visit(a[0], a[1], bb[0], bb[1], d + 1)
        else:
            out.append((r0, r1, c0, c1))

    visit(0, F.shape[0], 0, F.shape[1], 0)
    return sorted(out)


def _grown_leaves(F, lam, delta, theta):
    tree = T.privtree_grow(T.prefix_sum(F), F.shape, lam, delta, theta, np.zeros)
    return sorted(map(tuple, tree.regions[tree.is_leaf].tolist()))


def test_privtree_split_rule_zero_noise_hand_example():
    # Zhang et al.: b(v) = max(θ−δ, c(v) − depth·δ); split iff b(v) + noise > θ (here noise = 0)
    F = np.zeros((4, 4))
    F[0:2, 0:2] = [[2, 1], [1, 2]]          # 6 points in the SW quadrant
    F[3, 3] = 1                             # 1 point in the NE quadrant
    # θ = 0, δ = 1: root b = 7 splits; SW b = 6 − 1 = 5 splits; NE b = max(1 − 1, −1) = 0 stays
    assert _grown_leaves(F, 1.0, 1.0, 0.0) == sorted(
        [(0, 1, 0, 1), (0, 1, 1, 2), (1, 2, 0, 1), (1, 2, 1, 2), (0, 2, 2, 4), (2, 4, 0, 2), (2, 4, 2, 4)])
    # without the depth bias (δ = 0) the one-point NE quadrant would split as well
    assert len(_grown_leaves(F, 1.0, 0.0, 0.0)) == 10
    # the bias grows with depth: 5 points in one cell of an 8x8 grid split down to 1 cell iff 5 − 2δ > 0
    G = np.zeros((8, 8))
    G[5, 6] = 5
    assert (5, 6, 6, 7) in _grown_leaves(G, 1.0, 2.0, 0.0)
    assert (4, 6, 6, 8) in _grown_leaves(G, 1.0, 3.0, 0.0)
    assert np.allclose(T.privtree_biased_count([10, 5, 0], [2, 2, 0], 0.0, 3.0), [4, -1, 0])
    assert np.allclose(T.privtree_biased_count([0, 1], [5, 5], 2.0, 3.0), [-1, -1])   # clamp θ − δ


def test_privtree_matches_reference_rule_on_random_matrices():
    # the vectorised level-by-level growth equals the paper's recursive rule (zero noise)
    rng = np.random.default_rng(12)
    for shape in [(8, 8), (13, 7), (1, 9), (16, 16)]:
        F = rng.poisson(rng.uniform(0, 3, shape) ** 2).astype(float)
        for delta, theta in [(0.5, 0.0), (2.0, 3.0), (0.0, 10.0)]:
            assert _grown_leaves(F, 1.0, delta, theta) == _privtree_reference(F, 1.0, delta, theta)


def test_privtree_huge_epsilon_splits_all_nodes_above_theta_and_one_in_2beta_below():
    # ε → ∞ shrinks λ and δ together (δ/λ = ln β), so: c(v) > θ always splits, while a node with
    # c(v) <= θ has b(v) = θ − δ and splits with probability Pr[Lap(λ) > δ] = 1/(2β) = 1/8
    rng = np.random.default_rng(13)
    x = np.concatenate([rng.uniform(0.0, 0.1, 40), rng.uniform(0.5, 1.0, 5)])
    y = np.concatenate([rng.uniform(0.0, 0.1, 40), rng.uniform(0.5, 1.0, 5)])
    data = dp.PointData(x, y)
    rel = dp.release("privtree", data, UNIT, 1e9, params={"base_cells": 16, "theta": 2.5}, seed=1)
    F = data.histogram(rel.base)
    S = T.prefix_sum(F)
    c_leaf = T.region_counts(S, rel.leaves)
    single = (rel.leaves[:, 1] - rel.leaves[:, 0]) * (rel.leaves[:, 3] - rel.leaves[:, 2]) == 1
    assert np.all((c_leaf <= 2.5) | single)                 # nothing above θ was left unsplit
    assert np.allclose(rel.counts, c_leaf, atol=1e-6)
    lam, delta = T.privtree_constants(5e8)
    split_low, tested_low = 0, 0
    for _ in range(300):
        tree = T.privtree_grow(S, F.shape, lam, delta, 2.5, lambda n: rng.laplace(0, lam, n))
        tested = T.splittable(tree.regions)
        c = T.region_counts(S, tree.regions)
        internal = ~tree.is_leaf
        assert np.all(internal[tested & (c > 2.5)])
        low = tested & (c <= 2.5)
        split_low += int(np.sum(internal & low))
        tested_low += int(low.sum())
    p = split_low / tested_low
    assert p == pytest.approx(1 / 8, abs=5 * math.sqrt(1 / 8 * 7 / 8 / tested_low))


def _log_laplace_tail(t, lam, upper):
    """log Pr[Lap(λ) > t] (upper) or log Pr[Lap(λ) <= t], without cancellation."""
    s = t if upper else -t
    return math.log(0.5) - s / lam if s >= 0 else math.log1p(-0.5 * math.exp(s / lam))


def _path_loss(counts, lam, delta, theta):
    """Largest |log Pr[outcome | D] − log Pr[outcome | D + point]| over tree outcomes on one path."""
    def lp(c, d, split):
        b = max(c - d * delta, theta - delta)
        return _log_laplace_tail(theta - b, lam, upper=split)
    worst, acc = 0.0, 0.0
    for d, c in enumerate(counts):
        worst = max(worst, abs(acc + lp(c, d, False) - lp(c + 1, d, False)))
        acc += lp(c, d, True) - lp(c + 1, d, True)
        worst = max(worst, abs(acc))
    return worst


def test_privtree_constants_bound_the_privacy_loss_at_any_depth():
    # paper's theorem: λ = (2β−1)/((β−1)ε), δ = λ ln β give ε-DP for the split decisions, any depth.
    # Exact check: only nodes on the new point's path change; their decision probabilities are
    # Laplace tails, so the loss of every outcome is a finite sum we can evaluate.
    eps = 0.8
    lam, delta = T.privtree_constants(eps, 4)
    assert lam == pytest.approx(7 / 3 / eps) and delta == pytest.approx(lam * math.log(4))
    rng = np.random.default_rng(14)
    paths = [[K] * 40 for K in (0, 1, 3, 10, 100, 10_000)]
    paths += [sorted(rng.integers(0, 300, rng.integers(1, 40)).tolist(), reverse=True) for _ in range(1500)]
    paths += [sorted((max(0, round(i * delta + s)) for i in range(40)), reverse=True)
              for s in np.linspace(-5, 30, 141)]
    worst = max(_path_loss(p, lam, delta, 0.0) for p in paths)
    assert worst <= eps * (1 + 1e-9)
    # the bias is what keeps the loss bounded: without it, 40 near-threshold levels exceed ε
    assert _path_loss([0] * 40, lam, 0.0, 0.0) > eps


# ------------------------------------------------------------------------------------ kd-tree
def test_kd_median_with_huge_epsilon_is_the_exact_median():
    # EM over split positions, u(k) = −|Σ_{rows<k} − n/2|: as ε → ∞ it returns the argmax of u
    F = np.zeros((1, 16))
    F[0, [1, 2, 3, 9, 14]] = [5, 1, 2, 2, 2]          # n = 12, first 3 columns hold 8 >= 6
    S = T.prefix_sum(F)
    reg = np.array([[0, 1, 0, 16]] * 50)
    k = T.kd_split_positions(S, reg, np.ones(50, bool), 1e9, np.random.default_rng(1))
    assert set(k.tolist()) == {3}                      # prefix(3) = 6 = n/2
    F2 = np.ones((10, 1))
    k2 = T.kd_split_positions(T.prefix_sum(F2), np.array([[0, 10, 0, 1]] * 20), np.zeros(20, bool),
                              1e9, np.random.default_rng(2))
    assert set(k2.tolist()) == {5}


def test_kd_median_follows_the_exponential_mechanism_distribution():
    # Gumbel-max sampling gives Pr[k] ∝ exp(ε u(k) / 2) (spec 003 section 5.3, sensitivity 1)
    F = np.array([[3.0, 0, 1, 4, 0, 2]])
    S = T.prefix_sum(F)
    R, eps = 40_000, 0.7
    k = T.kd_split_positions(S, np.array([[0, 1, 0, 6]] * R), np.ones(R, bool), eps, np.random.default_rng(3))
    pre = np.cumsum(F[0])[:-1]
    u = -np.abs(pre - F.sum() / 2)
    p = np.exp(eps * u / 2)
    p /= p.sum()
    freq = np.bincount(k, minlength=6)[1:] / R
    assert np.allclose(freq, p, atol=5 * np.sqrt(p * (1 - p) / R))


def test_kd_axis_alternates_and_switches_on_thin_nodes():
    # axis = height mod 2 with 0 = x (as HTF); a side of one cell forces the other axis
    reg = np.array([[0, 4, 0, 4], [0, 1, 0, 4], [0, 4, 0, 1]])
    assert T.kd_axis(reg, 2).tolist() == [True, True, False]
    assert T.kd_axis(reg, 1).tolist() == [False, True, False]


def test_kdtree_eps_path_and_early_leaves(city_matrix):
    # every leaf's path spends ε_counts (early leaves take the levels below) + ε_m per median above it
    data, dom = dp.load_sample("small_city_5k")
    rel = dp.release("kdtree", data, dom, 1.0, params={"base_cells": 16, "height": 12}, seed=3)
    depth = {tuple(n[:4]): n[4] for n in rel.nodes.tolist()}
    d = np.array([depth[tuple(l)] for l in rel.leaves.tolist()])
    assert rel.diagnostics["height"] == 8                   # capped: 16 x 16 halves 8 times
    assert d.min() < 8                                      # medians at extremes leave 1-cell nodes
    assert np.allclose(rel.eps_path, 0.85 + 0.15 / 8 * d)
    assert len(rel.ledger) == 8 + 9
    assert_tiles(rel.leaves, rel.base.shape)


# ----------------------------------------------------------------------------------------- AG
def test_ag_grid_sizes_follow_qardaji():
    # m1 = max(10, ⌈√(Nε/10)/4⌉); m2 = ⌈√(max(v,0)(1−α)ε/5)⌉ ≥ 1 (spec 003 section 5.3)
    assert T.ag_first_level_size(1_000_000, 1.0) == 80
    assert T.ag_first_level_size(5000, 1.0) == 10
    assert T.ag_first_level_size(3_500_000, 0.1) == max(10, math.ceil(math.sqrt(35_000) / 4)) == 47
    assert T.ag_second_level_size(np.array([1000.0, -20.0, 0.0, 12.0]), 0.5).tolist() == [10, 1, 1, 2]


def test_ag_cells_snap_to_base_grid_lines():
    # level-1 and level-2 edges are integer base-grid lines; sub-cells tile each level-1 cell
    for shape, m1 in [((1024, 1024), 80), ((1024, 700), 47), ((5, 40), 10)]:
        cells = T.ag_cells(shape, m1)
        assert_tiles(cells, shape)
        assert len(cells) == min(m1, shape[0]) * min(m1, shape[1])
        m2 = np.random.default_rng(0).integers(1, 30, len(cells))
        sub, cell, k = T.ag_subcells(cells, m2)
        assert_tiles(sub, shape)
        assert np.all(sub[:, 0] >= cells[cell, 0]) and np.all(sub[:, 1] <= cells[cell, 1])
        assert np.all(sub[:, 2] >= cells[cell, 2]) and np.all(sub[:, 3] <= cells[cell, 3])
        assert np.array_equal(np.bincount(cell, minlength=len(cells)), k)
    edges = T.snap_edges(1024, 80)
    assert edges[0] == 0 and edges[-1] == 1024 and np.all(np.diff(edges) >= 12)


def test_ag_inference_matches_formula_and_is_consistent():
    # v' = (α²m2² v + (1−α)² Σu)/(α²m2² + (1−α)²), u' = u + (v' − Σu)/m2²; Σ u' = v'
    rng = np.random.default_rng(15)
    v = np.array([100.0, -3.0])
    k = np.array([9, 4])
    cell = np.repeat([0, 1], k)
    u = rng.normal(10, 3, k.sum())
    a = 0.4
    out = T.ag_inference(v, u, cell, k, a)
    for i in range(2):
        su = u[cell == i].sum()
        vp = (a ** 2 * k[i] * v[i] + (1 - a) ** 2 * su) / (a ** 2 * k[i] + (1 - a) ** 2)
        assert np.allclose(out[cell == i], u[cell == i] + (vp - su) / k[i])
        assert out[cell == i].sum() == pytest.approx(vp)


def test_ag_release_structure(city):
    # AG nodes: root (depth 0), m1 x m1 cells (depth 1), sub-cells of split cells (depth 2)
    data, dom = city
    rel = dp.release("ag", data, dom, 1.0, seed=4)
    m1 = rel.diagnostics["m1"]
    assert m1 == 10 and np.sum(rel.nodes[:, 4] == 1) == 100
    assert rel.n_public == 5000 and rel.leaf_var is None
    regions, counts = rel.partition_at(1)
    assert len(regions) == 100 and counts.sum() == pytest.approx(rel.counts.sum())
    assert [e.step for e in rel.ledger] == ["AG level-1 counts", "AG level-2 counts"]


# -------------------------------------------------------------------------------- performance
@pytest.mark.slow
def test_privtree_one_million_points_is_fast():
    # speed target: 1e6 clustered points on the 1024 x 1024 grid (spec asks ≤ 1 s; loose bound here)
    from dp.samples import _city
    x, y = _city(UNIT, 1_000_000, 3)
    data = dp.PointData(x, y)
    t = time.perf_counter()
    rel = dp.release("privtree", data, UNIT, 1.0, seed=1)
    assert time.perf_counter() - t < 3.0
    assert rel.base.shape == (1024, 1024)
    assert_tiles(rel.leaves, rel.base.shape)
