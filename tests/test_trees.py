"""Competitor trees of spec 003 section 5.3: AG, quadtree, kd-tree (with smoothing) and PrivTree."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import dp
from dp.budget import geometric_budgets
from dp.mechanisms import ag as AGM
from dp.mechanisms import privtree as PT
from dp.mechanisms import trees as T
from dp.mechanisms.base import ADD_REMOVE_POINT
from dp.mechanisms.leaves import paint
from dp.noise import count_noise, discrete_laplace, discrete_laplace_quantile, discrete_laplace_variance
from dp.postprocess import consistent
from dp.summed_area import box_sums, summed_area

NAMES = ("ag", "quadtree", "kdtree", "privtree")
UNIT = dp.Domain(0.0, 0.0, 1.0, 1.0)


def smooth(tree, y, var):
    """The consistent estimates of every node (`dp.postprocess.consistent`, without variances)."""
    return consistent(tree, y, var)[0]


@pytest.fixture(scope="module")
def city():
    return dp.load_sample("small_city_5k")


@pytest.fixture(scope="module")
def city_matrix(city):
    """The 5k sample on a 64 x 64 base grid and its summed-area table."""
    data, dom = city
    F = data.histogram(dp.UniformGrid(dom, 64, 64))
    return F, summed_area(F, whole=True)


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


def private_rng(k):
    """A Generator passed in keeps the release private (an int seed marks it a demo)."""
    return np.random.default_rng(k)


def median_noise(eps_m, rng):
    """The kd median noise of one level: discrete Laplace(2/ε_m) (what Ledger.noise_source gives)."""
    return lambda size: discrete_laplace(rng, 2.0 / eps_m, size)


def kd_noise(h, eps_m, rng):
    """Median noise for each of h levels."""
    return [median_noise(eps_m, rng)] * h


def noisy_runs(tree, S, eps_node, rng, R):
    """R independent count passes at once: what T.noisy_node_counts draws, as rows (one draw call)."""
    eps = np.broadcast_to(eps_node, (R, tree.n_nodes))
    return box_sums(S, tree.regions) + count_noise(rng, eps), discrete_laplace_variance(1 / eps_node)


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
    rel = dp.release(name, data, dom, 1.0, seed=private_rng(1))
    assert isinstance(rel, dp.LeafRelease) and rel.private and rel.spec.private
    assert rel.spec.unit == ADD_REMOVE_POINT and rel.metadata()["unit_of_privacy"] == ADD_REMOVE_POINT
    assert rel.ledger.total == pytest.approx(1.0, rel=1e-9)
    assert all(e.epsilon > 0 and e.private and e.sensitivity == 1.0 for e in rel.ledger)
    assert all(e.noise == "discrete laplace" for e in rel.ledger)
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
    # the exact dataset size is in no exported value: only a noisy size (or none, PrivTree)
    meta = gj["properties"]
    assert "dataset_size_public" not in meta and not hasattr(rel, "n_public")
    assert meta.get("noisy_dataset_size") == rel.noisy_size
    assert (rel.noisy_size is None) == (name == "privtree")
    assert rel.noisy_size != data.n and str(data.n) not in json.dumps(meta)
    assert data.n not in rel.diagnostics.values()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("eps, split", [(0.1, None), (3.7, None), (0.5, "custom")])
def test_ledger_sums_to_epsilon_for_any_split(name, eps, split):
    # sequential composition: the per-level / per-step charges add up to ε (spec 003 section 4)
    data, dom = dp.load_sample("small_city_5k")
    spec = dp.mechanisms()[name]
    if split == "custom":
        split = {1: [1.0], 2: [0.3, 0.7], 3: [0.1, 0.3, 0.6]}[len(spec.budget_parts)]
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


def test_automatic_height_uses_a_noisy_dataset_size(city):
    # auto height = HTF's rule floor(log2(N̂ ε / 10)) (kd) and half of it (quadtree) on a noisy
    # size N̂ = N + discrete Laplace(1/ε_size), drawn first with 5% of ε and released
    data, dom = city
    q = dp.release("quadtree", data, dom, 1.0, seed=private_rng(1))
    k = dp.release("kdtree", data, dom, 1.0, seed=private_rng(1))
    for rel, bits in ((q, 2), (k, 1)):
        first = rel.ledger.entries[0]
        assert first.step.startswith("noisy dataset size") and first.epsilon == pytest.approx(0.05)
        assert first.scale == pytest.approx(1 / 0.05)
        assert rel.split[0] == 0.05 and rel.spec.budget_parts[0] == "dataset size"
        assert abs(rel.noisy_size - data.n) <= discrete_laplace_quantile(1 / 0.05, 1 - 1e-6)
        assert rel.metadata()["noisy_dataset_size"] == rel.noisy_size
        assert "5% of ε" in rel.spec.guarantee
        assert rel.diagnostics["height"] == math.floor(math.log2(rel.noisy_size / 10) / bits)
    assert q.max_depth() == q.diagnostics["height"]
    assert math.floor(math.log2(5000 / 10) / 2) == 4 and math.floor(math.log2(5000 / 10)) == 8
    # a fixed height reads no size: the size share goes to the counts and the ledger says so
    fixed = dp.release("quadtree", data, dom, 1.0, params={"height": 3}, seed=private_rng(1))
    assert fixed.noisy_size is None and "noisy_dataset_size" not in fixed.metadata()
    assert fixed.max_depth() == 3 and fixed.n_leaves == 64
    assert len(fixed.ledger) == 4 and fixed.ledger.total == pytest.approx(1.0)
    assert "dataset-size share (5% of ε) is spent on the counts" in fixed.ledger.entries[0].note
    kd = dp.release("kdtree", data, dom, 1.0, params={"height": 5}, seed=private_rng(1))
    assert kd.noisy_size is None and len(kd.ledger) == 5 + 6      # 5 median levels + 6 count levels
    counts = [e.epsilon for e in kd.ledger if "counts" in e.step]
    assert math.fsum(counts) == pytest.approx(0.85)


def test_noisy_dataset_size_is_n_plus_discrete_laplace():
    # N̂ = N + Z, Z ~ discrete Laplace(1/ε): mean N and variance 2q/(1−q)², charged before the draw
    S = summed_area(np.full((3, 4), 7), whole=True)
    eps, R = 0.5, 800
    rng = np.random.default_rng(21)
    ledger = dp.Ledger()
    draws = np.array([ledger.noisy_size(rng, round(S[-1, -1]), eps, "test") for _ in range(R)])
    assert len(ledger) == R and ledger.total == pytest.approx(R * eps)
    assert all(e.scale == 1 / eps and "84" not in e.note for e in ledger)
    var = discrete_laplace_variance(1 / eps)
    assert abs(draws.mean() - 84) <= 5 * math.sqrt(var / R)
    z = draws - 84
    assert abs(z.var() - var) <= 5 * math.sqrt(np.var(z ** 2) / R)


# ----------------------------------------------------------------------- geometric budget
@pytest.mark.parametrize("fanout", [2, 4])
def test_geometric_budget_sums_exactly_and_has_ratio_f_cube_root(fanout):
    # Eq. (G) for fanout f: ε_i = r^(h−i) ε (r−1)/(r^(h+1)−1), r = f^(1/3); Σ ε_i = ε (spec 003
    # section 7 case 6 for f = 2: the sum, the ratio 2^(1/3), decreasing in height)
    for h in range(0, 21):
        E = geometric_budgets(h, 0.37, fanout)
        assert len(E) == h + 1
        assert math.fsum(E) == pytest.approx(0.37, abs=1e-12)
        if h:
            assert np.allclose(E[:-1] / E[1:], fanout ** (1 / 3), rtol=1e-12)
            assert np.all(np.diff(E) < 0)            # the root gets the least


def test_geometric_budget_reference_vector_and_optimality():
    # spec 003 section 3.6 reference (h = 2, f = 2) and the KKT optimum of Σ f^(h−i)/ε_i² for f = 4
    assert np.allclose(geometric_budgets(2, 1.0, 2), [0.412599, 0.327480, 0.259921], atol=1e-6)
    h, f = 6, 4
    E = geometric_budgets(h, 1.0, f)
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
    E = geometric_budgets(h, 1.0, f)
    eps = T.node_budgets(tree, h, E)
    rng = np.random.default_rng(1)
    y = rng.normal(50, 10, tree.n_nodes)
    got = smooth(tree, y, 2 / eps ** 2)
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
    for tree in (T.kdtree_partition(S, F.shape, kd_noise(9, 0.05, rng)), T.quadtree_partition(F.shape, 5),
                 T.quadtree_partition((37, 20), 6)):
        h = tree.height
        E = geometric_budgets(h, 1.0, 2)
        root_shape = (tree.regions[0, 1], tree.regions[0, 3])
        S_tree = S if root_shape == F.shape else summed_area(rng.poisson(2.0, root_shape), whole=True)
        eps_node = T.node_budgets(tree, h, E)
        ledger = dp.Ledger()
        y, var = T.noisy_node_counts(ledger, rng, tree, S_tree, E, "test")
        assert y.dtype == np.int64 and np.array_equal(var, discrete_laplace_variance(1 / eps_node))
        assert len(ledger) == h + 1 and ledger.total == pytest.approx(1.0)   # charged in the call
        x = smooth(tree, y, var)
        own, kids = _children_sums(tree, x)
        assert np.allclose(own, kids, rtol=1e-10, atol=1e-8)


@pytest.mark.slow
def test_smoothing_reduces_variance_and_stays_unbiased(city_matrix):
    # Hay et al. least squares: unbiased, and no more variance than the raw leaf counts (Monte Carlo)
    F, S = city_matrix
    tree = T.kdtree_partition(S, F.shape, kd_noise(8, 0.1, np.random.default_rng(3)))
    h = tree.height
    eps_node = T.node_budgets(tree, h, geometric_budgets(h, 0.5, 2))
    leaf = tree.is_leaf
    leaves = tree.regions[leaf]
    A = np.stack([fractions(leaves, q) for q in QUERIES_64], axis=1)
    true_leaf = box_sums(S, leaves)
    Y, var = noisy_runs(tree, S, eps_node, np.random.default_rng(4), 1500)
    raw = Y[:, leaf]
    sm = np.array([smooth(tree, y, var)[leaf] for y in Y])
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
    eps_node = T.node_budgets(tree, 4, geometric_budgets(4, 0.3, 4))
    leaf = tree.is_leaf
    A = np.stack([fractions(tree.regions[leaf], q) for q in QUERIES_64], axis=1)
    Y, var = noisy_runs(tree, S, eps_node, np.random.default_rng(5), 800)
    ans = [smooth(tree, y, var)[leaf] @ A for y in Y]
    assert_unbiased(ans, box_sums(S, tree.regions[leaf]) @ A)


def test_kdtree_unbiased_on_fixed_partition(city_matrix):
    # the kd partition is fixed by one seed; the count pass (noise + smoothing) is then unbiased
    F, S = city_matrix
    tree = T.kdtree_partition(S, F.shape, kd_noise(7, 0.02, np.random.default_rng(6)))
    eps_node = T.node_budgets(tree, tree.height, T.uniform_budgets(tree.height, 0.3))
    leaf = tree.is_leaf
    A = np.stack([fractions(tree.regions[leaf], q) for q in QUERIES_64], axis=1)
    Y, var = noisy_runs(tree, S, eps_node, np.random.default_rng(7), 800)
    ans = [smooth(tree, y, var)[leaf] @ A for y in Y]
    assert_unbiased(ans, box_sums(S, tree.regions[leaf]) @ A)


def test_ag_unbiased_on_fixed_layout(city_matrix):
    # AG with m2 fixed by one draw: level-1 and level-2 noise redrawn, inference is linear => unbiased
    F, S = city_matrix
    eps1, eps2 = 0.25, 0.25
    cells = AGM.ag_cells(F.shape, 10)
    v0 = box_sums(S, cells) + count_noise(np.random.default_rng(8), eps1, size=len(cells))
    sub, cell, k = AGM.ag_subcells(cells, AGM.ag_second_level_size(v0, eps2))
    assert k.max() > 1
    A = np.stack([fractions(sub, q) for q in QUERIES_64], axis=1)
    tv, tu = box_sums(S, cells), box_sums(S, sub)
    rng = np.random.default_rng(9)
    R = 3000
    V = tv + count_noise(rng, eps1, size=(R, len(cells)))
    U = tu + count_noise(rng, eps2, size=(R, len(sub)))
    assert AGM.ag_inference_weight(eps1, eps2) == pytest.approx(0.5)
    ans = np.array([AGM.ag_inference(V[i], U[i], cell, k, 0.5) @ A for i in range(R)])
    assert_unbiased(ans, tu @ A)


def test_ag_inference_weight_is_inverse_discrete_variance():
    # α²/(1−α)² = V2/V1 with V the discrete Laplace variances, so ag_inference weights v against
    # Σu by inverse variance; for small ε it is the budget share ε1/(ε1+ε2) of the paper
    for e1, e2 in [(0.475, 0.475), (0.3, 0.9), (2.0, 0.5)]:
        a = AGM.ag_inference_weight(e1, e2)
        V1, V2 = discrete_laplace_variance(1 / e1), discrete_laplace_variance(1 / e2)
        assert a ** 2 / (1 - a) ** 2 == pytest.approx(V2 / V1, rel=1e-12)
        v, u, k = np.array([40.0]), np.array([3.0, 5, 9, 11]), np.array([4])
        out = AGM.ag_inference(v, u, np.zeros(4, int), k, a)
        best = (v[0] / V1 + u.sum() / (4 * V2)) / (1 / V1 + 1 / (4 * V2))
        assert out.sum() == pytest.approx(best, rel=1e-12)
    assert AGM.ag_inference_weight(1e-3, 3e-3) == pytest.approx(0.25, abs=1e-6)


def test_privtree_leaf_counts_unbiased_with_stated_variance(city_matrix):
    # PrivTree leaves: integer count + discrete Laplace(1/ε_counts): mean = truth, variance
    # 2q/(1−q)² (= leaf_var), one raw draw per leaf (leaf_scale)
    F, S = city_matrix
    lam, delta = PT.privtree_constants(0.5)
    rng = np.random.default_rng(10)
    tree = PT.privtree_grow(S, F.shape, delta, 0, lambda n: discrete_laplace(rng, lam, n))
    leaves = tree.regions[tree.is_leaf]
    A = np.stack([fractions(leaves, q) for q in QUERIES_64], axis=1)
    true = box_sums(S, leaves)
    R = 4000
    draws = true + count_noise(rng, 0.5, size=(R, len(leaves)))
    assert draws.dtype == np.int64
    assert_unbiased(draws @ A, true @ A)
    var = discrete_laplace_variance(1 / 0.5)
    z = (draws - true).ravel()
    assert abs(z.var() - var) <= 5 * math.sqrt(np.var(z ** 2) / z.size)
    data, dom = dp.load_sample("small_city_5k")
    rel = dp.release("privtree", data, dom, 1.0, params={"base_cells": 64}, seed=private_rng(2))
    assert np.allclose(rel.leaf_var, var) and np.allclose(rel.leaf_scale, 2.0)
    assert np.array_equal(rel.counts, np.rint(rel.counts))


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


def _grown_leaves(F, delta, theta):
    tree = PT.privtree_grow(summed_area(F, whole=True), F.shape, delta, theta, lambda n: np.zeros(n, np.int64))
    return sorted(map(tuple, tree.regions[tree.is_leaf].tolist()))


def test_privtree_split_rule_zero_noise_hand_example():
    # Zhang et al.: b(v) = max(θ−δ, c(v) − depth·δ); split iff b(v) + noise > θ (here noise = 0)
    F = np.zeros((4, 4))
    F[0:2, 0:2] = [[2, 1], [1, 2]]          # 6 points in the SW quadrant
    F[3, 3] = 1                             # 1 point in the NE quadrant
    # θ = 0, δ = 1: root b = 7 splits; SW b = 6 − 1 = 5 splits; NE b = max(1 − 1, −1) = 0 stays
    assert _grown_leaves(F, 1, 0) == sorted(
        [(0, 1, 0, 1), (0, 1, 1, 2), (1, 2, 0, 1), (1, 2, 1, 2), (0, 2, 2, 4), (2, 4, 0, 2), (2, 4, 2, 4)])
    # without the depth bias (δ = 0) the one-point NE quadrant would split as well
    assert len(_grown_leaves(F, 0, 0)) == 10
    # the bias grows with depth: 5 points in one cell of an 8x8 grid split down to 1 cell iff 5 − 2δ > 0
    G = np.zeros((8, 8))
    G[5, 6] = 5
    assert (5, 6, 6, 7) in _grown_leaves(G, 2, 0)
    assert (4, 6, 6, 8) in _grown_leaves(G, 3, 0)
    b = PT.privtree_biased_count([10, 5, 0], [2, 2, 0], 0, 3)
    assert b.dtype == np.int64 and b.tolist() == [4, -1, 0]
    assert PT.privtree_biased_count([0, 1], [5, 5], 2, 3).tolist() == [-1, -1]   # clamp θ − δ


def test_privtree_matches_reference_rule_on_random_matrices():
    # the vectorised level-by-level growth equals the paper's recursive rule (zero noise)
    rng = np.random.default_rng(12)
    for shape in [(8, 8), (13, 7), (1, 9), (16, 16)]:
        F = rng.poisson(rng.uniform(0, 3, shape) ** 2).astype(float)
        for delta, theta in [(1, 0), (2, 3), (0, 10), (5, -2)]:
            assert _grown_leaves(F, delta, theta) == _privtree_reference(F, 1.0, delta, theta)


def test_privtree_huge_epsilon_splits_exactly_the_nodes_above_theta():
    # ε → ∞: λ → 0 and δ = ⌈λ ln β⌉ = 1, so a node splits iff c(v) − depth > ⌊θ⌋ (θ = 2.5 acts as 2)
    rng = np.random.default_rng(13)
    x = np.concatenate([rng.uniform(0.0, 0.1, 40), rng.uniform(0.5, 1.0, 5)])
    y = np.concatenate([rng.uniform(0.0, 0.1, 40), rng.uniform(0.5, 1.0, 5)])
    data = dp.PointData(x, y)
    rel = dp.release("privtree", data, UNIT, 1e6, params={"base_cells": 16, "theta": 2.5},
                     seed=private_rng(1))
    assert rel.diagnostics["delta"] == 1 and rel.diagnostics["theta"] == 2
    F = data.histogram(rel.base)
    assert _grown_leaves(F, 1, 2) == sorted(map(tuple, rel.leaves.tolist()))
    assert np.array_equal(rel.counts, box_sums(summed_area(F, whole=True), rel.leaves))


def test_privtree_split_rate_below_threshold_is_the_discrete_laplace_tail():
    # a tested node with c(v) <= θ below the root has b = θ − δ, so it splits with probability
    # P[Z >= δ + 1] = q^(δ+1)/(1 + q), q = exp(−1/λ); nodes on the dense path always split here
    F = np.zeros((16, 16), np.int64)
    F[0, 0] = 1000
    S = summed_area(F, whole=True)
    lam, delta = PT.privtree_constants(2.0)
    assert delta == math.ceil(lam * math.log(4)) == 2
    q = math.exp(-1 / lam)
    p = q ** (delta + 1) / (1 + q)
    rng = np.random.default_rng(16)
    split_low = tested_low = 0
    for _ in range(300):
        tree = PT.privtree_grow(S, F.shape, delta, 0, lambda n: discrete_laplace(rng, lam, n))
        c = box_sums(S, tree.regions)
        low = T.splittable(tree.regions) & (c == 0) & (tree.depth >= 1)
        split_low += int(np.sum(~tree.is_leaf & low))
        tested_low += int(low.sum())
        assert tree.height == 4 and np.all(~tree.is_leaf[(c == 1000) & T.splittable(tree.regions)])
    assert split_low / tested_low == pytest.approx(p, abs=5 * math.sqrt(p * (1 - p) / tested_low))


def _log_tail(k, q):
    """log P[Z >= k] for Z discrete Laplace, P(z) ∝ q^|z|: q^k/(1+q) for k >= 0, else 1 − q^(1−k)/(1+q)."""
    k = np.asarray(k, dtype=np.float64)
    return np.where(k >= 0, k * math.log(q) - math.log1p(q),
                    np.log1p(-q ** (1 - np.minimum(k, 0)) / (1 + q)))


def _path_loss(C, lam, delta, theta):
    """Exact worst |log P[transcript | D] − log P[transcript | D + point]| per path (rows of C).

    Row i lists the counts c of the nodes containing the new point, root first; a transcript
    splits nodes 0..L−1 and stops at L (split: b + Z > θ, i.e. Z >= θ − b + 1; stop: Z <= θ − b),
    or splits them all (the path then ends in a one-cell node, which is not tested).
    """
    C = np.atleast_2d(np.asarray(C, np.int64))
    q = math.exp(-1 / lam)
    d = np.arange(C.shape[1])

    def logs(c):
        b = PT.privtree_biased_count(c, d, theta, delta)
        return _log_tail(theta - b + 1, q), _log_tail(b - theta, q)
    s0, n0 = logs(C)
    s1, n1 = logs(C + 1)
    all_split = np.cumsum(s1 - s0, axis=1)
    before = np.concatenate([np.zeros((len(C), 1)), all_split[:, :-1]], axis=1)
    return np.abs(np.concatenate([all_split, before + n1 - n0], axis=1)).max(axis=1)


def _paths(lam, delta, theta, rng, L=40):
    """Constant paths (the biased counts then fall by exactly δ per level: every offset to θ,
    including the worst one) and random non-increasing paths."""
    top = theta + (L + 2) * delta + 3
    const = np.repeat(np.arange(0, top)[:, None], L, axis=1)
    rand = -np.sort(-rng.integers(0, top, (2000, L)), axis=1)
    short = -np.sort(-rng.integers(0, 3 * delta + 5, (2000, L)), axis=1)
    return np.concatenate([const, rand, short])


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 2.5, 8.0])
def test_privtree_discrete_split_decisions_cost_at_most_eps_tree_exactly(eps):
    # The split decisions are ε_tree-DP with integer counts and discrete Laplace noise, using the
    # paper's λ = (2β−1)/((β−1)ε) and δ = ⌈λ ln β⌉ (see the trees module docstring for the proof).
    # Only nodes on the added point's path change, so every transcript's loss is a finite sum of
    # log tail ratios, evaluated here with the closed-form tail P[Z >= k].
    lam, delta = PT.privtree_constants(eps, 4)
    assert lam == pytest.approx(7 / 3 / eps) and delta == math.ceil(lam * math.log(4))
    q, a = math.exp(-1 / lam), 1 / lam
    assert q ** delta <= 1 / 4
    rng = np.random.default_rng(14)
    for theta in (0, 3, -2):
        worst = _path_loss(_paths(lam, delta, theta, rng), lam, delta, theta).max()
        assert worst <= eps * (1 + 1e-9)
        # the worst path is the proof's: changed nodes at b = θ−δ, θ, θ+δ, θ+2δ, ...
        sup = 2 * a + sum(math.log1p(q ** m * (1 - q) / (1 + q - q ** m))
                          for m in delta * np.arange(1, 39))
        assert worst == pytest.approx(sup, rel=1e-9)
    # the test can fail: λ = 2/ε (no room for the nodes above θ), or no depth bias, exceed ε
    too_small = 2 / eps
    d2 = math.ceil(too_small * math.log(4))
    assert _path_loss(_paths(too_small, d2, 0, rng), too_small, d2, 0).max() > eps
    assert _path_loss([[0] * 40], lam, 0, 0).max() > eps


# ------------------------------------------------------------------------------------ kd-tree
def test_kd_median_with_huge_epsilon_is_the_exact_median():
    # report noisy max over split positions, w(k) = −|2 Σ_{rows<k} − n|: as ε → ∞ the argmax of w
    F = np.zeros((1, 16))
    F[0, [1, 2, 3, 9, 14]] = [5, 1, 2, 2, 2]          # n = 12, first 3 columns hold 8 >= 6
    S = summed_area(F, whole=True)
    reg = np.array([[0, 1, 0, 16]] * 50)
    k = T.kd_split_positions(S, reg, np.ones(50, bool), median_noise(1e9, np.random.default_rng(1)))
    assert set(k.tolist()) == {3}                      # prefix(3) = 6 = n/2
    F2 = np.ones((10, 1))
    k2 = T.kd_split_positions(summed_area(F2, whole=True), np.array([[0, 10, 0, 1]] * 20),
                              np.zeros(20, bool), median_noise(1e9, np.random.default_rng(2)))
    assert set(k2.tolist()) == {5}


def _rnm_probabilities(w, scale):
    """Exact P[argmax_k w_k + Z_k = k], Z_k iid discrete Laplace(scale), lowest k winning ties."""
    w = np.asarray(w, np.int64)
    q = math.exp(-1 / scale)
    z = np.arange(-int(80 * scale) - 1, int(80 * scale) + 2)
    pz = (1 - q) / (1 + q) * q ** np.abs(z)

    def cdf(t):                                      # P[Z <= t]
        return np.where(t >= 0, 1 - q ** (np.maximum(t, 0) + 1) / (1 + q), q ** -np.minimum(t, 0) / (1 + q))
    out = []
    for k in range(len(w)):
        p = pz.copy()
        for j in range(len(w)):
            if j != k:
                p = p * cdf(w[k] + z - w[j] - (j < k))
        out.append(p.sum())
    return np.array(out)


def _median_utility(row):
    pre = np.cumsum(row)[:-1]
    return -np.abs(2 * pre - row.sum())


def test_kd_median_follows_the_report_noisy_max_distribution():
    # argmax of w(k) + discrete Laplace(2/ε_m), w(k) = −|2·first(k) − n| (spec 003 section 5.3's
    # utility, doubled to an integer), ties to the lowest k: Monte Carlo matches the exact law
    F = np.array([[3, 0, 1, 4, 0, 2]])
    S = summed_area(F, whole=True)
    R, eps = 40_000, 0.7
    k = T.kd_split_positions(S, np.array([[0, 1, 0, 6]] * R), np.ones(R, bool), median_noise(eps, np.random.default_rng(3)))
    p = _rnm_probabilities(_median_utility(F[0]), 2 / eps)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    freq = np.bincount(k, minlength=6)[1:] / R
    assert np.allclose(freq, p, atol=5 * np.sqrt(p * (1 - p) / R))


def test_kd_median_report_noisy_max_is_eps_dp_exactly():
    # adding a point moves every w(k) by exactly ±1; with scale 2/ε_m the probability of every
    # split position changes by at most e^ε_m (exact law above); scale 1/ε_m would not suffice
    rng = np.random.default_rng(17)
    for eps in (0.3, 1.0, 3.0):
        worst = worst_half = 0.0
        for _ in range(60):
            row = rng.integers(0, 4, rng.integers(2, 7))
            w = _median_utility(row)
            p0, h0 = _rnm_probabilities(w, 2 / eps), _rnm_probabilities(w, 1 / eps)
            for j in range(len(row)):
                more = row.copy()
                more[j] += 1
                p1 = _rnm_probabilities(_median_utility(more), 2 / eps)
                h1 = _rnm_probabilities(_median_utility(more), 1 / eps)
                worst = max(worst, np.abs(np.log(p1 / p0)).max())
                worst_half = max(worst_half, np.abs(np.log(h1 / h0)).max())
        assert worst <= eps + 1e-9
        assert worst_half > 1.5 * eps


def test_kd_axis_alternates_and_switches_on_thin_nodes():
    # axis = height mod 2 with 0 = x (as HTF); a side of one cell forces the other axis
    reg = np.array([[0, 4, 0, 4], [0, 1, 0, 4], [0, 4, 0, 1]])
    assert T.kd_axis(reg, 2).tolist() == [True, True, False]
    assert T.kd_axis(reg, 1).tolist() == [False, True, False]


def test_kdtree_eps_path_and_early_leaves(city_matrix):
    # every leaf's path spends ε_counts (early leaves take the levels below) + ε_m per median above it
    data, dom = dp.load_sample("small_city_5k")
    rel = dp.release("kdtree", data, dom, 1.0, params={"base_cells": 16, "height": 12},
                     seed=private_rng(3))
    assert rel.noisy_size is None                          # a fixed height reads no size
    depth = {tuple(n[:4]): n[4] for n in rel.nodes.tolist()}
    d = np.array([depth[tuple(l)] for l in rel.leaves.tolist()])
    assert rel.diagnostics["height"] == 8                   # capped: 16 x 16 halves 8 times
    assert d.min() < 8                                      # medians at extremes leave 1-cell nodes
    assert np.allclose(rel.eps_path, 0.85 + 0.15 / 8 * d)    # counts = 0.80 + the size's 0.05
    assert len(rel.ledger) == 8 + 9
    assert_tiles(rel.leaves, rel.base.shape)


# ----------------------------------------------------------------------------------------- AG
def test_ag_grid_sizes_follow_qardaji():
    # m1 = max(10, ⌈√(Nε/10)/4⌉); m2 = ⌈√(max(v,0)(1−α)ε/5)⌉ ≥ 1 (spec 003 section 5.3)
    assert AGM.ag_first_level_size(1_000_000, 1.0) == 80
    assert AGM.ag_first_level_size(5000, 1.0) == 10
    assert AGM.ag_first_level_size(3_500_000, 0.1) == max(10, math.ceil(math.sqrt(35_000) / 4)) == 47
    assert AGM.ag_second_level_size(np.array([1000.0, -20.0, 0.0, 12.0]), 0.5).tolist() == [10, 1, 1, 2]


def test_ag_cells_snap_to_base_grid_lines():
    # level-1 and level-2 edges are integer base-grid lines; sub-cells tile each level-1 cell
    for shape, m1 in [((1024, 1024), 80), ((1024, 700), 47), ((5, 40), 10)]:
        cells = AGM.ag_cells(shape, m1)
        assert_tiles(cells, shape)
        assert len(cells) == min(m1, shape[0]) * min(m1, shape[1])
        m2 = np.random.default_rng(0).integers(1, 30, len(cells))
        sub, cell, k = AGM.ag_subcells(cells, m2)
        assert_tiles(sub, shape)
        assert np.all(sub[:, 0] >= cells[cell, 0]) and np.all(sub[:, 1] <= cells[cell, 1])
        assert np.all(sub[:, 2] >= cells[cell, 2]) and np.all(sub[:, 3] <= cells[cell, 3])
        assert np.array_equal(np.bincount(cell, minlength=len(cells)), k)
    edges = AGM.snap_edges(1024, 80)
    assert edges[0] == 0 and edges[-1] == 1024 and np.all(np.diff(edges) >= 12)


def test_ag_inference_matches_formula_and_is_consistent():
    # v' = (α²m2² v + (1−α)² Σu)/(α²m2² + (1−α)²), u' = u + (v' − Σu)/m2²; Σ u' = v'
    rng = np.random.default_rng(15)
    v = np.array([100.0, -3.0])
    k = np.array([9, 4])
    cell = np.repeat([0, 1], k)
    u = rng.normal(10, 3, k.sum())
    a = 0.4
    out = AGM.ag_inference(v, u, cell, k, a)
    for i in range(2):
        su = u[cell == i].sum()
        vp = (a ** 2 * k[i] * v[i] + (1 - a) ** 2 * su) / (a ** 2 * k[i] + (1 - a) ** 2)
        assert np.allclose(out[cell == i], u[cell == i] + (vp - su) / k[i])
        assert out[cell == i].sum() == pytest.approx(vp)


def test_ag_release_structure(city):
    # AG nodes: root (depth 0), m1 x m1 cells (depth 1), sub-cells of split cells (depth 2)
    data, dom = city
    rel = dp.release("ag", data, dom, 1.0, seed=private_rng(4))
    m1 = rel.diagnostics["m1"]
    assert m1 == AGM.ag_first_level_size(rel.noisy_size, 1.0) == 10 and np.sum(rel.nodes[:, 4] == 1) == 100
    assert rel.leaf_var is None and rel.metadata()["noisy_dataset_size"] == rel.noisy_size
    regions, counts = rel.partition_at(1)
    assert len(regions) == 100 and counts.sum() == pytest.approx(rel.counts.sum())
    assert [e.step for e in rel.ledger] == ["noisy dataset size (sets the level-1 grid)",
                                            "AG level-1 counts", "AG level-2 counts"]
    assert [e.epsilon for e in rel.ledger] == pytest.approx([0.05, 0.475, 0.475])
    assert rel.diagnostics["alpha"] == 0.5
    assert rel.diagnostics["inference_weight"] == AGM.ag_inference_weight(0.475, 0.475)
    # AG always needs a size: a large m1 follows the noisy size of a large dataset
    assert AGM.ag_first_level_size(1_000_000, 1.0) == 80


# -------------------------------------------------------------------------------- scale
@pytest.mark.slow
def test_privtree_one_million_points_tiles_the_base_grid():
    # 1e6 clustered points on the 1024 x 1024 grid (its time is measured by benchmarks/speed.py)
    from dp.samples import _city
    x, y = _city(UNIT, 1_000_000, 3)
    data = dp.PointData(x, y)
    rel = dp.release("privtree", data, UNIT, 1.0, seed=1)
    assert rel.base.shape == (1024, 1024)
    assert_tiles(rel.leaves, rel.base.shape)


def test_privtree_leaf_threshold_is_post_processing_of_the_same_draws(small):
    """`zero_below` (mechanism B of the accuracy work): the same draws as plain PrivTree, the
    same ledger, and exactly the leaves at or below z noise scales set to 0."""
    import dp
    data, domain = small
    plain = dp.release("privtree", data, domain, 1.0, seed=np.random.default_rng(3))
    cut = dp.release("privtree", data, domain, 1.0, params={"zero_below": 4.0}, seed=np.random.default_rng(3))
    scale = 1.0 / 0.5                                   # ε_counts = half of ε by default
    low = plain.counts <= 4.0 * scale
    assert low.any() and (~low).any()
    np.testing.assert_array_equal(cut.counts, np.where(low, 0, plain.counts))
    assert cut.ledger.to_list() == plain.ledger.to_list()
    assert cut.diagnostics["leaves_zeroed"] == int(low.sum())
