"""Spec 000 (E2EPriv) section 9: every listed test case, 1 to 15.

Worked examples are checked to 1e-6 as the spec asks. Statistical checks use fixed seeds and
tolerances derived from the sampling distribution; each derivation is stated next to the check.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import special, stats

import dp
from dp import metrics
from dp.budget import Ledger
from dp.mechanisms.grid import (AUTO_MAX_GRID, AUTO_STEPS, E2EPRIV, auto_grid_sizes,
                                capped_sensitivity, grid_scores, heuristic_grid_size, n_in_domain,
                                rel_sensitivity, sensitivities, tuning_workload)
from dp.noise import (discrete_laplace, discrete_laplace_variance, exponential_mechanism,
                      exponential_mechanism_probabilities)
from dp.queries import alpha_l1, grid_answers, overlap_fractions, overlap_vectors, random_workload

TOL = 1e-6   # spec 000 section 9: "tolerance 1e-6 unless stated"

STORAGE = dp.Domain(-125.5, 25.0, -65.5, 50.0, name="Storage")   # spec 000 section 6
UNIT = dp.Domain(0.0, 0.0, 1.0, 1.0)
G_STORAGE = [30, 40, 50, 60, 70, 80]                              # spec 000 Table 2, Fig 10a


def clustered(domain: dp.Domain, n: int, seed: int, k: int = 8, background: float = 0.1):
    """Gaussian-mixture points clipped into the domain (a synthetic stand-in, spec 000 section 6)."""
    rng = np.random.default_rng(seed)
    W, H = domain.width, domain.height
    cx = domain.west + rng.uniform(0.05, 0.95, k) * W
    cy = domain.south + rng.uniform(0.05, 0.95, k) * H
    sd = rng.uniform(0.01, 0.08, k)
    n_bg = int(round(background * n))
    which = rng.choice(k, n - n_bg, p=rng.dirichlet(np.ones(k)))
    x = np.concatenate([cx[which] + rng.normal(0, 1, n - n_bg) * sd[which] * W,
                        domain.west + rng.uniform(0, 1, n_bg) * W])
    y = np.concatenate([cy[which] + rng.normal(0, 1, n - n_bg) * sd[which] * H,
                        domain.south + rng.uniform(0, 1, n_bg) * H])
    return dp.PointData(np.clip(x, domain.west, domain.east), np.clip(y, domain.south, domain.north))


def storage_like(n: int = 8938, seed: int = 2017) -> dp.PointData:
    """Clustered Gaussian mixture on the Storage box with N = 8,938 (spec 000 section 6, CI stand-in)."""
    rng = np.random.default_rng(seed)
    k = 40
    cx, cy = rng.uniform(-122, -70, k), rng.uniform(27, 48, k)
    w = rng.dirichlet(np.ones(k))
    sd = rng.uniform(0.3, 2.5, k)
    n_bg = n // 10
    which = rng.choice(k, n - n_bg, p=w)
    x = np.concatenate([cx[which] + rng.normal(0, 1, n - n_bg) * sd[which],
                        rng.uniform(STORAGE.west, STORAGE.east, n_bg)])
    y = np.concatenate([cy[which] + rng.normal(0, 1, n - n_bg) * sd[which] * 0.6,
                        rng.uniform(STORAGE.south, STORAGE.north, n_bg)])
    return dp.PointData(np.clip(x, STORAGE.west, STORAGE.east), np.clip(y, STORAGE.south, STORAGE.north))


def exact_terms(data, domain, g, Q):
    """(R_t, T_t, L_t) of spec 000 A3 for one grid size: exact-histogram answers, true counts, ||alpha||_1."""
    grid = dp.UniformGrid(domain, g)
    R = grid_answers(grid, data.histogram(grid), Q)
    T = data.true_counts(Q, domain).astype(float)
    return R, T, alpha_l1(grid, Q)


# ------------------------------------------------------------------------------- case 1
def test_case01_overlap_worked_example():
    # spec 000 §9 case 1: cell [0,1]^2 and QR [0.5,1.5]x[0.25,0.75] give alpha = 0.5*0.5 = 0.25
    edges = np.array([0.0, 1.0])
    ax = overlap_fractions(edges, 0.5, 1.5)
    ay = overlap_fractions(edges, 0.25, 0.75)
    assert ax[0, 0] == pytest.approx(0.5, abs=TOL)
    assert ay[0, 0] == pytest.approx(0.5, abs=TOL)
    grid = dp.UniformGrid(UNIT, 1)
    assert alpha_l1(grid, dp.Rect(0.5, 0.25, 1.5, 0.75))[0] == pytest.approx(0.25, abs=TOL)


def test_case01_overlap_disjoint_and_superset():
    # spec 000 §9 case 1: a disjoint QR gives alpha = 0 and a QR containing the cell gives alpha = 1
    grid = dp.UniformGrid(UNIT, 1)
    assert alpha_l1(grid, dp.Rect(2.0, 2.0, 3.0, 3.0))[0] == 0.0
    assert alpha_l1(grid, dp.Rect(1.0, 0.0, 2.0, 1.0))[0] == 0.0      # touches an edge only
    assert alpha_l1(grid, dp.Rect(-1.0, -1.0, 2.0, 2.0))[0] == pytest.approx(1.0, abs=TOL)
    assert alpha_l1(grid, dp.Rect(0.0, 0.0, 1.0, 1.0))[0] == pytest.approx(1.0, abs=TOL)


def test_case01_separable_alpha_matches_rectangle_formula():
    # spec 000 §9 case 1 / A1: alpha[j,k] = ay[j]*ax[k] equals the per-cell intersection-area formula
    rng = np.random.default_rng(1)
    for _ in range(20):
        g = int(rng.integers(1, 12))
        grid = dp.UniformGrid(STORAGE, g)
        x1, x2 = np.sort(rng.uniform(STORAGE.west - 5, STORAGE.east + 5, 2))
        y1, y2 = np.sort(rng.uniform(STORAGE.south - 5, STORAGE.north + 5, 2))
        ay, ax = overlap_vectors(grid, dp.Rect(x1, y1, x2, y2))
        alpha = np.outer(ay[0], ax[0])
        ex, ey = grid.edges_x, grid.edges_y
        for j in range(g):
            for k in range(g):
                xo = max(0.0, min(ex[k + 1], x2) - max(ex[k], x1))
                yo = max(0.0, min(ey[j + 1], y2) - max(ey[j], y1))
                ref = xo * yo / ((ex[k + 1] - ex[k]) * (ey[j + 1] - ey[j]))
                assert alpha[j, k] == pytest.approx(ref, abs=TOL)
        # Sum of ceil(alpha) is the number of overlapped cells
        assert np.ceil(alpha).sum() == np.count_nonzero(alpha)


def test_case01_alpha_l1_equals_g2_area_fraction():
    # spec 000 §9 case 1: ||alpha||_1 = g^2 * area(QR ∩ Ω)/area(Ω); f = 0.1 on g = 30 gives 9
    Q = random_workload(STORAGE, 100, side_frac=0.1, rng=5)
    assert np.allclose(alpha_l1(dp.UniformGrid(STORAGE, 30), Q), 9.0, atol=TOL, rtol=0)
    rng = np.random.default_rng(2)
    for _ in range(50):
        g = int(rng.integers(1, 200))
        f = float(rng.uniform(0.01, 1.0))
        Q = random_workload(STORAGE, 5, side_frac=f, rng=rng)
        assert np.allclose(alpha_l1(dp.UniformGrid(STORAGE, g), Q), g * g * f * f, atol=TOL, rtol=1e-9)
    # A QR sticking out of Ω counts only its part inside Ω (queries are clipped to Ω, P12)
    rect = dp.Rect(-95.5, 37.5, -50.0, 60.0)   # inside part: 30 x 12.5 of 60 x 25
    assert alpha_l1(dp.UniformGrid(STORAGE, 10), rect)[0] == pytest.approx(100 * 0.5 * 0.5, abs=TOL)


# ------------------------------------------------------------------------------- case 2
def test_case02_whole_domain_query_exact():
    # spec 000 §9 case 2: ANSWER(H, Ω, g, Ω) = Σ H = N exactly, Agg = 0 and ||alpha||_1 = g^2
    data = clustered(STORAGE, 3000, seed=3)
    whole = dp.Rect(*STORAGE.bounds)
    assert data.true_count(whole, STORAGE) == 3000
    for g in (1, 2, 7, 30, 80, 257):
        grid = dp.UniformGrid(STORAGE, g)
        H = data.histogram(grid)
        assert H.sum() == 3000
        assert grid_answers(grid, H, whole)[0] == pytest.approx(3000, abs=TOL)
        assert alpha_l1(grid, whole)[0] == pytest.approx(g * g, abs=TOL)


@pytest.mark.slow
def test_case02_whole_domain_query_noisy_mean_and_variance():
    # spec 000 §9 case 2 with integer noise: on H' the whole-domain answer has mean N and
    # Var = g^2 v, v = 2q/(1-q)^2 the discrete Laplace variance at scale λ (q = e^(-1/λ));
    # the spec's 2 g^2 λ^2 is the continuous value, an upper bound
    data = clustered(UNIT, 400, seed=4)
    g, eps, n_runs = 5, 1.0, 4000
    lam = 1.0 / eps
    whole = dp.Rect(*UNIT.bounds)
    rng = np.random.default_rng(4)
    ans = np.array([dp.release("identity", data, UNIT, eps, params={"grid_size": g}, seed=rng).answer(whole)
                    for _ in range(n_runs)])
    v = float(discrete_laplace_variance(lam))
    var = g * g * v
    assert var < 2 * g * g * lam ** 2
    # Mean of n iid draws with variance var: s.e. = sqrt(var/n); accept 4 s.e.
    assert abs(ans.mean() - 400) < 4 * math.sqrt(var / n_runs)
    # Sample variance of a sum of g^2 iid terms with excess kurtosis k (from the pmf): the sum's
    # is k/g^2, so Var(s^2) ~ var^2 (2 + k/g^2)/n; accept 4 s.e.
    q = math.exp(-1 / lam)
    ks = np.arange(-400, 401)
    pmf = (1 - q) / (1 + q) * q ** np.abs(ks)
    kurt = float((pmf * ks ** 4).sum()) / v ** 2 - 3
    rel_se = math.sqrt((2 + kurt / g ** 2) / n_runs)
    assert abs(ans.var(ddof=1) / var - 1) < 4 * rel_se


# ------------------------------------------------------------------------------- case 3
def test_case03_cell_aligned_query_has_zero_aggregation_error():
    # spec 000 §9 case 3: a QR whose edges lie on grid lines has Agg = 0 and every alpha in {0, 1}
    rng = np.random.default_rng(6)
    for domain in (STORAGE, dp.PRESETS["London"], dp.PRESETS["Paris"], UNIT):
        for g in (3, 7, 10, 30, 49):
            grid = dp.UniformGrid(domain, g)
            base = clustered(domain, 800, seed=g)
            # Many points exactly on grid lines and corners: the half-open convention matters (P12)
            ex = rng.choice(grid.edges_x, 400)
            ey = rng.choice(grid.edges_y, 400)
            data = dp.PointData(np.concatenate([base.x, ex, rng.choice(grid.edges_x, 200),
                                                rng.uniform(domain.west, domain.east, 200)]),
                                np.concatenate([base.y, ey, rng.uniform(domain.south, domain.north, 200),
                                                rng.choice(grid.edges_y, 200)]))
            H = data.histogram(grid)
            rects = []
            for _ in range(30):
                k1, k2 = np.sort(rng.choice(g + 1, 2, replace=False))
                j1, j2 = np.sort(rng.choice(g + 1, 2, replace=False))
                rects.append([grid.edges_x[k1], grid.edges_y[j1], grid.edges_x[k2], grid.edges_y[j2]])
            rects.append(list(domain.bounds))
            rects = np.array(rects)
            ay, ax = overlap_vectors(grid, rects)
            assert np.all(np.isin(ay, [0.0, 1.0])) and np.all(np.isin(ax, [0.0, 1.0]))
            R = grid_answers(grid, H, rects)
            T = data.true_counts(rects, domain)
            assert np.array_equal(R, T.astype(float)), (domain.name, g)


# ------------------------------------------------------------------------------- case 4
def fig4_data():
    """Ω = [0,4]^2; each central cell of the 4x4 grid: 1 point in its QR quarter, 99 in its far half."""
    rng = np.random.default_rng(44)
    xs, ys = [], []
    for cx in (1.0, 2.0):
        for cy in (1.0, 2.0):
            # the quarter of the cell inside QR = [1.5, 2.5]^2 is the one next to the centre (2, 2)
            qx = cx + 0.5 if cx == 1.0 else cx
            qy = cy + 0.5 if cy == 1.0 else cy
            xs.append(qx + 0.25)
            ys.append(qy + 0.25)
            # the half of the cell farthest from the QR (in x), strictly inside it
            fx = cx if cx == 1.0 else cx + 0.5
            xs.extend(fx + rng.uniform(0.05, 0.45, 99))
            ys.extend(cy + rng.uniform(0.05, 0.95, 99))
    return dp.PointData(np.array(xs), np.array(ys))


def test_case04_figure4_example():
    # spec 000 §9 case 4: g=4 gives response 100, true 4, ||alpha||_1 = 1; g=8 gives response 4, ||alpha||_1 = 4
    domain = dp.Domain(0.0, 0.0, 4.0, 4.0)
    data = fig4_data()
    qr = dp.Rect(1.5, 1.5, 2.5, 2.5)
    assert data.n == 400
    assert data.true_count(qr, domain) == 4
    g4 = dp.UniformGrid(domain, 4)
    H4 = data.histogram(g4)
    assert H4[1:3, 1:3].tolist() == [[100, 100], [100, 100]]
    assert grid_answers(g4, H4, qr)[0] == pytest.approx(100.0, abs=TOL)
    assert alpha_l1(g4, qr)[0] == pytest.approx(1.0, abs=TOL)
    g8 = dp.UniformGrid(domain, 8)
    assert grid_answers(g8, data.histogram(g8), qr)[0] == pytest.approx(4.0, abs=TOL)
    assert alpha_l1(g8, qr)[0] == pytest.approx(4.0, abs=TOL)


# ------------------------------------------------------------------------------- case 5
TINY_DOMAIN = dp.Domain(0.0, 0.0, 2.0, 2.0)
TINY_Q = np.array([[0.5, 0.5, 1.5, 1.5]])


def tiny_data():
    return dp.PointData([0.25] * 10 + [1.75] * 10, [0.25] * 10 + [1.75] * 10)


def test_case05_tiny_end_to_end_terms():
    # spec 000 §9 case 5: g=2 gives R=5, T=0, L=1; g=4 gives R=0, L=4
    data = tiny_data()
    R2, T, L2 = exact_terms(data, TINY_DOMAIN, 2, TINY_Q)
    R4, _, L4 = exact_terms(data, TINY_DOMAIN, 4, TINY_Q)
    assert (R2[0], T[0], L2[0]) == pytest.approx((5.0, 0.0, 1.0), abs=TOL)
    assert (R4[0], L4[0]) == pytest.approx((0.0, 4.0), abs=TOL)


def test_case05_tiny_end_to_end_scores_sensitivities_probabilities():
    # spec 000 §9 case 5: s_rel = -3.125/-2.5, Delta = 4.017857/4.642857, P = 0.494017/0.505983, s_abs = -6.25/-5.0
    data = tiny_data()
    eps, f1, delta, G = 1.0, 0.2, 0.1, [2, 4]
    eps1, eps2 = f1 * eps, (1 - f1) * eps
    lam = 1 / eps2
    assert lam == pytest.approx(1.25, abs=TOL)
    s, mean_l1, l1 = grid_scores(data, TINY_DOMAIN, G, TINY_Q, lam, delta, "rel")
    assert s == pytest.approx([-3.125, -2.5], abs=TOL)
    sens = sensitivities(20, delta, lam, mean_l1, l1, G, "rel", "resp", False)
    assert sens == pytest.approx([4.017857, 4.642857], abs=TOL)
    # the spec's closed forms: 1/0.3 + 1.25/6 + 1/2.1 and 1/0.3 + 5/6 + 1/2.1
    assert sens == pytest.approx([1 / 0.3 + 1.25 / 6 + 1 / 2.1, 1 / 0.3 + 5 / 6 + 1 / 2.1], abs=1e-12)
    P = exponential_mechanism_probabilities(s, eps1, sens)
    assert P == pytest.approx([0.494017, 0.505983], abs=TOL)
    s_abs, _, _ = grid_scores(data, TINY_DOMAIN, G, TINY_Q, lam, delta, "abs")
    assert s_abs == pytest.approx([-6.25, -5.0], abs=TOL)
    assert sensitivities(20, delta, lam, mean_l1, l1, G, "abs", "resp", False).tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------------- case 6
def test_case06_delta_reference_values_storage():
    # spec 000 §9 case 6: Storage N=8938, δ=0.1, ε2=0.8, 1% Q: Δ_30 = 0.0123084, Δ_80 = 0.0123944, and the three terms
    n, delta, lam = 8938, 0.1, 1 / 0.8
    rho = delta * n
    Q = random_workload(STORAGE, 100, area_frac=0.01, rng=2017)
    l1 = np.array([alpha_l1(dp.UniformGrid(STORAGE, g), Q) for g in G_STORAGE])
    mean_l1 = l1.mean(axis=1)
    # L̄ = g^2 * 0.01 for the 1%-area workload (A4 [derived])
    assert mean_l1 == pytest.approx([g * g * 0.01 for g in G_STORAGE], abs=TOL)
    sens = sensitivities(n, delta, lam, mean_l1, l1, G_STORAGE, "rel", "resp", False)
    assert sens[0] == pytest.approx(0.0123084, abs=TOL)
    assert sens[-1] == pytest.approx(0.0123944, abs=TOL)
    assert 1 / (delta * (rho + 1)) == pytest.approx(0.0111757, abs=TOL)
    assert 1 / (rho + delta) == pytest.approx(0.00111869, abs=TOL)
    assert lam * mean_l1[0] / (rho * (rho + 1)) == pytest.approx(1.4067e-5, rel=1e-4)
    assert sens[0] == pytest.approx(1 / (delta * (rho + 1)) + lam * mean_l1[0] / (rho * (rho + 1))
                                    + 1 / (rho + delta), abs=1e-15)


def test_case06_delta_reference_values_landmark_gowalla():
    # spec 000 §9 case 6: Landmark δ=0.01 g=200: Δ = 0.0116148; Gowalla δ=0.001 g=800: Δ = 0.1555348, Eq.8 = 0.1746115
    lam = 1 / 0.8
    assert rel_sensitivity(869976, 0.01, lam, 200 ** 2 * 0.01) == pytest.approx(0.0116148, abs=TOL)
    assert rel_sensitivity(6442841, 0.001, lam, 800 ** 2 * 0.01) == pytest.approx(0.1555348, abs=TOL)
    G = [300, 400, 500, 600, 700, 800]
    l1 = np.array([[g * g * 0.01] for g in G])
    eq8 = sensitivities(6442841, 0.001, lam, l1.mean(1), l1, G, "rel", "eq8", False)
    assert eq8 == pytest.approx([0.1746115] * len(G), abs=TOL)


@pytest.mark.parametrize("delta, area, expected_resp, expected_eq7, expected_eq8", [
    (0.1, 0.01, [0.012319, 0.012351, 0.012394], 0.012394, 0.022297),
    (0.01, 0.01, [1.120102, 1.123197, 1.127530], 1.127530, 2.107950),
    (0.002, 0.01, [26.60387, 26.67796, 26.78169], 26.78169, 50.25340),
    (0.1, "mixed", [0.012790, 0.013410, 0.014278], 0.014278, 0.022297),
    (0.002, "mixed", [27.72016, 29.18961, 31.24684], 31.24684, 50.25340),
])
def test_case06_fig11c_reference_values(delta, area, expected_resp, expected_eq7, expected_eq8):
    # spec 000 §9 case 6 with the section 7 Fig 11c table: Δ_r(g=40,60,80) / Eq.7 / Eq.8 at ε2 = 0.8, N = 8938
    n, lam, G = 8938, 1 / 0.8, [40, 60, 80]
    if area == "mixed":   # all 600 queries, 100 per size f in {0.1, 0.2, 0.3, 0.4, 0.5, 0.8}
        Q = np.vstack([random_workload(STORAGE, 100, side_frac=f, rng=i)
                       for i, f in enumerate([0.1, 0.2, 0.3, 0.4, 0.5, 0.8])])
    else:
        Q = random_workload(STORAGE, 100, area_frac=area, rng=0)
    l1 = np.array([alpha_l1(dp.UniformGrid(STORAGE, g), Q) for g in G])
    args = (n, delta, lam, l1.mean(1), l1, G, "rel")
    resp = sensitivities(*args, "resp", False)
    eq7 = sensitivities(*args, "eq7", False)
    eq8 = sensitivities(*args, "eq8", False)
    # values are printed to 7 significant digits, so compare to 1e-6 absolute or relative
    assert resp == pytest.approx(expected_resp, rel=TOL, abs=TOL)
    assert eq7 == pytest.approx([expected_eq7] * 3, rel=TOL, abs=TOL)
    assert eq8 == pytest.approx([expected_eq8] * 3, rel=TOL, abs=TOL)
    # Δ_g <= Δ^maxα <= Δ^maxg, and Eq.7 equals Δ_r at the largest grid
    assert np.all(resp <= eq7 + 1e-15) and np.all(eq7 <= eq8 + 1e-15)
    assert eq7[0] == pytest.approx(resp[-1], rel=1e-12)


def test_case06_conservative_uses_n_minus_one():
    # spec 000 §9 case 6 with P1: conservative=True evaluates Δ at N-1, which is larger
    lam = 1.25
    l1 = np.array([[9.0], [64.0]])
    base = sensitivities(8938, 0.1, lam, l1.mean(1), l1, [30, 80], "rel", "resp", False)
    cons = sensitivities(8938, 0.1, lam, l1.mean(1), l1, [30, 80], "rel", "resp", True)
    assert cons == pytest.approx(rel_sensitivity(8937, 0.1, lam, l1.mean(1)), rel=1e-12)
    assert np.all(cons > base)


# ------------------------------------------------------------------------------- case 7
def test_case07_heuristic_grid_sizes():
    # spec 000 §9 case 7: (8938,1) -> 30; (869976,1) -> 295; (6442841,1) -> 803; Storage ε 0.2..0.8 -> 13, 19, 23, 27
    assert heuristic_grid_size(8938, 1.0) == 30
    assert heuristic_grid_size(869976, 1.0) == 295
    assert heuristic_grid_size(6442841, 1.0) == 803
    assert [heuristic_grid_size(8938, e) for e in (0.2, 0.4, 0.6, 0.8, 1.0)] == [13, 19, 23, 27, 30]
    assert heuristic_grid_size(1, 0.01) == 1   # at least one cell


def test_case07_heuristic_release_uses_rule():
    # spec 000 §9 case 7 through dp.release("ug"): the grid has g_H = round(sqrt(N̂ ε / 10)) cells
    # per side, with N̂ the released noisy size (5% of ε, discrete Laplace scale 1/(0.05 ε))
    data = storage_like()
    for eps, g in [(0.2, 13), (0.4, 19), (0.6, 23), (0.8, 27), (1.0, 30)]:
        rel = dp.release("ug", data, STORAGE, eps, seed=np.random.default_rng(int(eps * 10)))
        n_hat = rel.noisy_size
        assert (rel.grid.gx, rel.grid.gy) == (heuristic_grid_size(n_hat, eps),) * 2
        # |N̂ - N| <= 12 scales with probability 1 - e^-12: the rule lands on the spec's g_H
        assert abs(n_hat - 8938) <= 12 / (0.05 * eps)
        assert abs(rel.grid.gx - g) <= 1
        assert rel.metadata()["noisy_dataset_size"] == n_hat
        assert "dataset_size_public" not in rel.metadata()


# ------------------------------------------------------------------------------- case 8
@pytest.mark.parametrize("eps, f1", [(1.0, 0.2), (0.5, 0.25), (2.0, 0.5), (0.1, 0.7)])
def test_case08_e2epriv_ledger(eps, f1):
    # spec 000 §9 case 8: ε0 + ε1 + ε2 == ε (ε0: noisy size) and the Phase-2 noise scale == 1/ε2
    data = clustered(STORAGE, 2000, seed=8)
    f2 = 1 - 0.05 - f1
    rel = dp.release("e2epriv", data, STORAGE, eps, split=(0.05, f1, f2),
                     params={"delta": 0.1, "grid_sizes": [10, 20, 30]}, seed=np.random.default_rng(8))
    assert rel.ledger.total == pytest.approx(eps, abs=TOL)
    e0, e1, e2 = rel.ledger.entries
    assert e0.epsilon == pytest.approx(0.05 * eps, abs=TOL) and "dataset size" in e0.step
    assert e1.epsilon == pytest.approx(f1 * eps, abs=TOL) and e1.noise == "exponential"
    assert e2.epsilon == pytest.approx(f2 * eps, abs=TOL) and e2.noise == "discrete laplace"
    assert e2.scale == pytest.approx(1 / (f2 * eps), abs=TOL)
    assert rel.noise_scale == pytest.approx(1 / (f2 * eps), abs=TOL)
    assert rel.private and rel.ledger.private
    # the absolute score over the paper's list needs no size: its share moves to the counts,
    # the total stays ε (pinned to candidates="paper": auto candidates need a noisy size)
    ab = dp.release("e2epriv", data, STORAGE, eps, split=(0.05, f1, f2),
                    params={"variant": "abs", "grid_sizes": [10, 20], "candidates": "paper"},
                    seed=np.random.default_rng(8))
    assert [e.epsilon for e in ab.ledger] == pytest.approx([f1 * eps, (f2 + 0.05) * eps], abs=TOL)
    assert ab.noisy_size is None
    # with auto candidates the absolute score draws N̂ at ε0 for the candidates only
    ab = dp.release("e2epriv", data, STORAGE, eps, split=(0.05, f1, f2), params={"variant": "abs"},
                    seed=np.random.default_rng(8))
    assert [e.epsilon for e in ab.ledger] == pytest.approx([0.05 * eps, f1 * eps, f2 * eps], abs=TOL)
    assert ab.ledger.total == pytest.approx(eps, abs=TOL)
    assert ab.ledger.entries[0].step == "noisy dataset size (sets the candidate grid sizes)"
    assert ab.noise_scale == pytest.approx(1 / (f2 * eps), abs=TOL)
    assert ab.diagnostics["grid_sizes"] == auto_grid_sizes(ab.noisy_size, eps)


def test_case08_baseline_ledgers():
    # spec 000 §9 case 8: Heuristic/Leaky noise scale == 1/ε; BestNonPriv is flagged non-private
    data = clustered(STORAGE, 2000, seed=9)
    params = {"delta": 0.1, "grid_sizes": [10, 20, 30]}
    for eps in (0.3, 1.0):
        ug = dp.release("ug", data, STORAGE, eps, seed=1)
        assert ug.noise_scale == pytest.approx(1 / (0.95 * eps), abs=TOL)
        assert [e.scale for e in ug.ledger if e.private] == pytest.approx([1 / (0.05 * eps), 1 / (0.95 * eps)], abs=TOL)
        assert ug.ledger.total == pytest.approx(eps, abs=TOL)
        leaky = dp.release("leaky", data, STORAGE, eps, params=params, seed=1)
        assert leaky.noise_scale == pytest.approx(1 / eps, abs=TOL)
        assert [e.scale for e in leaky.ledger if e.private] == pytest.approx([1 / eps], abs=TOL)
        assert not leaky.private and not leaky.ledger.private
        best = dp.release("best_nonpriv", data, STORAGE, eps, params=params, seed=1)
        assert not best.spec.private and not best.private and not best.ledger.private
        assert best.metadata()["differentially_private"] is False
        assert best.noise_scale is None


# ------------------------------------------------------------------------------- case 9
def test_case09_laplace_noise_statistics():
    # spec 000 §9 case 9 with integer noise: g=200, ε2=0.8 (split 0.05/0.15/0.8): over 40,000
    # cells H'-H is discrete Laplace with scale b = 1.25, q = e^(-1/b): integers, mean 0,
    # E|Y| = 2q/(1-q^2), Var = 2q/(1-q)^2, and the pmf (1-q)/(1+q) q^|k| (chi-square test)
    data = clustered(STORAGE, 5000, seed=9)
    rel = dp.release("e2epriv", data, STORAGE, 1.0, seed=np.random.default_rng(2024),
                     params={"grid_sizes": [200], "delta": 0.1, "candidates": "paper"})
    assert rel.grid.gx == 200 and rel.noise_scale == pytest.approx(1.25, abs=TOL)
    Y = (rel.counts - data.histogram(rel.grid)).ravel()
    assert Y.size == 40_000 and np.array_equal(Y, np.rint(Y))
    q = math.exp(-1 / 1.25)
    var, mabs = 2 * q / (1 - q) ** 2, 2 * q / (1 - q * q)
    assert var == pytest.approx(float(discrete_laplace_variance(1.25)), rel=1e-12)
    # s.e. of the mean sqrt(var/n) = 0.0085, so 0.03 is 3.5 s.e.; E|Y| = 1.07 with relative
    # s.e. about 0.6% (2% = 3.4 s.e.); the sample variance's relative s.e. is about 1.2% (5% = 4 s.e.)
    assert abs(Y.mean()) < 0.03
    assert np.abs(Y).mean() == pytest.approx(mabs, rel=0.02)
    assert Y.var() == pytest.approx(var, rel=0.05)
    k = np.arange(-8, 9)
    p = (1 - q) / (1 + q) * q ** np.abs(k)
    obs = np.array([(Y == v).sum() for v in k] + [(np.abs(Y) > 8).sum()])
    exp = np.append(p, 1 - p.sum()) * Y.size
    assert stats.chisquare(obs, exp).pvalue > 0.001


# ------------------------------------------------------------------------------ case 10
def _draw_frequencies(scores, eps, sens, n, seed):
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(scores))
    for _ in range(n):
        idx, _ = exponential_mechanism(rng, scores, eps, sens)
        counts[idx] += 1
    return counts / n


@pytest.mark.slow   # 10^5 sampler calls
@pytest.mark.parametrize("u", [
    [0.0, -1.0, -2.0, 0.5],
    [-3.0, -3.0, -3.0, -3.0, -3.0],          # equal scores: uniform
    [-700.0, -701.0, -702.5],                # far from 0: needs log-sum-exp
])
def test_case10_exponential_mechanism_frequencies(u):
    # spec 000 §9 case 10: with fixed u = ε s/(2Δ), 10^5 draws match softmax(u) within 4 sigma
    u = np.array(u)
    n = 100_000
    # scores and sensitivities chosen so that ε s / (2Δ) = u with ε = 0.5 and Δ_r varying per response
    eps, sens = 0.5, np.linspace(0.5, 2.0, len(u))
    scores = u * 2 * sens / eps
    p = special.softmax(u)
    assert exponential_mechanism_probabilities(scores, eps, sens) == pytest.approx(p, abs=1e-12)
    freq = _draw_frequencies(scores, eps, sens, n, seed=10)
    # each frequency is Binomial(n, p)/n with s.d. sqrt(p(1-p)/n)
    assert np.all(np.abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / n) + 1e-12)
    if np.all(u == u[0]):
        assert p == pytest.approx(np.full(len(u), 1 / len(u)), abs=1e-15)


@pytest.mark.slow   # 10^5 sampler calls
def test_case10_exponential_mechanism_tiny_example_frequencies():
    # spec 000 §9 case 10 on the case-5 probabilities P = (0.494017, 0.505983)
    scores, sens, n = [-3.125, -2.5], [1 / 0.3 + 1.25 / 6 + 1 / 2.1, 1 / 0.3 + 5 / 6 + 1 / 2.1], 100_000
    freq = _draw_frequencies(scores, 0.2, sens, n, seed=11)
    p = np.array([0.494017, 0.505983])
    assert np.all(np.abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / n))


def test_case10_infinite_epsilon_gives_argmax():
    # spec 000 §9 case 10: ε1 -> ∞ gives argmax (of s_r/Δ_r with per-response Δ; of s with one Δ)
    s = np.array([-3.0, -1.0, -2.0, -1.5])
    assert exponential_mechanism_probabilities(s, math.inf, 1.0).tolist() == [0, 1, 0, 0]
    assert exponential_mechanism_probabilities(s, 1e9, 1.0) == pytest.approx([0, 1, 0, 0], abs=1e-12)
    tiny_s, tiny_d = [-3.125, -2.5], [4.017857, 4.642857]
    assert exponential_mechanism_probabilities(tiny_s, math.inf, tiny_d).tolist() == [0, 1]
    assert exponential_mechanism_probabilities(tiny_s, 1e9, tiny_d) == pytest.approx([0, 1], abs=1e-12)
    rng = np.random.default_rng(0)
    assert {exponential_mechanism(rng, s, 1e9, 1.0)[0] for _ in range(200)} == {1}


# ------------------------------------------------------------------------------ case 11
def _random_instance(rng):
    """A random clustered dataset, workload, δ and λ with δN > 1 (spec 000 §9 case 11)."""
    while True:
        n = int(rng.integers(20, 401))
        delta = float(rng.choice([0.01, 0.02, 0.05, 0.1, 0.2, 0.3]))
        if delta * n > 1:
            break
    data = clustered(UNIT, n, seed=int(rng.integers(1 << 30)), k=int(rng.integers(1, 6)), background=0.05)
    sizes = rng.choice([0.1, 0.2, 0.3, 0.4, 0.5, 0.8], int(rng.integers(1, 6)))
    Q = np.vstack([random_workload(UNIT, 1, side_frac=float(f), rng=rng) for f in sizes])
    lam = 1 / float(rng.choice([0.1, 0.5, 0.8, 2.0]))
    return data, Q, delta, lam


def _add_point(rng, data, Q):
    """D ∪ {x}, with x inside a random t ∈ Q half the time, otherwise anywhere in Ω."""
    if rng.random() < 0.5:
        w, s, e, n = Q[rng.integers(len(Q))]
        x, y = rng.uniform(w, e), rng.uniform(s, n)
    else:
        x, y = rng.uniform(0, 1), rng.uniform(0, 1)
    return dp.PointData(np.append(data.x, x), np.append(data.y, y))


def test_case11_empirical_sensitivity_bound():
    # spec 000 §9 case 11: |s_rel(D∪{x},g) - s_rel(D,g)| <= Δ_g(N) (Cor. 7.9) and |Δ s_abs| <= 1
    rng = np.random.default_rng(11)
    worst_rel, worst_abs = 0.0, 0.0
    for _ in range(400):
        data, Q, delta, lam = _random_instance(rng)
        g = int(rng.integers(2, 21))
        data2 = _add_point(rng, data, Q)
        s1, l1, _ = grid_scores(data, UNIT, [g], Q, lam, delta, "rel")
        s2, _, _ = grid_scores(data2, UNIT, [g], Q, lam, delta, "rel")
        bound = rel_sensitivity(data.n, delta, lam, l1)[0]
        worst_rel = max(worst_rel, abs(s2[0] - s1[0]) / bound)
        a1, _, _ = grid_scores(data, UNIT, [g], Q, lam, delta, "abs")
        a2, _, _ = grid_scores(data2, UNIT, [g], Q, lam, delta, "abs")
        worst_abs = max(worst_abs, abs(a2[0] - a1[0]))
    assert worst_rel <= 1.0
    assert worst_abs <= 1.0 + 1e-12
    # the check is not vacuous: some neighbours move the score by a visible part of the bound
    # (the reference run's maximum ratio was about 0.40)
    assert worst_rel > 0.05


# ------------------------------------------------------------------------------ case 12
def test_case12_dp_ratio_on_exact_probabilities():
    # spec 000 §9 case 12, for the release's capped score: with the public ρ (from a noisy size)
    # fixed, max_g |ln(P_D(g)/P_{D∪{x}}(g))| <= ε1, both P from the ideal exponential mechanism
    rng = np.random.default_rng(12)
    eps1, lam = 0.2, 1.25
    worst = 0.0
    for trial in range(80):
        data, Q, delta, _ = _random_instance(rng)
        data2 = _add_point(rng, data, Q)
        # N̂ anywhere from half to twice N: the bound must not depend on N̂ being close to N
        rho = max(delta * data.n * float(rng.uniform(0.5, 2.0)), 1.0)
        cap, G = 1 / delta, [2, 3, 5, 8, 13, 20]
        sens = capped_sensitivity(rho, cap)
        s1, _, _ = grid_scores(data, UNIT, G, Q, lam, delta, "rel", rho=rho, cap=cap)
        s2, _, _ = grid_scores(data2, UNIT, G, Q, lam, delta, "rel", rho=rho, cap=cap)
        P1 = exponential_mechanism_probabilities(s1, eps1, sens)
        P2 = exponential_mechanism_probabilities(s2, eps1, sens)
        worst = max(worst, float(np.max(np.abs(np.log(P1 / P2)))))
    assert worst <= eps1
    assert worst > 0   # the neighbour does change the selection distribution


def _worst_capped_score_change(rng, trials: int, sizes_and_rho) -> float:
    """Largest |s_cap(D ∪ {x}) − s_cap(D)| over random neighbours and the candidate sizes and ρ
    that `sizes_and_rho(rng, data, δ)` draws, as a fraction of the bound (1/δ + 1)/ρ."""
    worst = 0.0
    for _ in range(trials):
        data, Q, delta, lam = _random_instance(rng)
        data2 = _add_point(rng, data, Q)
        G, rho = sizes_and_rho(rng, data, delta)
        s1, _, _ = grid_scores(data, UNIT, G, Q, lam, delta, "rel", rho=rho, cap=1 / delta)
        s2, _, _ = grid_scores(data2, UNIT, G, Q, lam, delta, "rel", rho=rho, cap=1 / delta)
        worst = max(worst, float(np.max(np.abs(s2 - s1))) / capped_sensitivity(rho, 1 / delta))
    return worst


def test_capped_score_sensitivity_bound():
    # the release's score: |s_cap(D∪{x}) - s_cap(D)| <= (1/δ + 1)/ρ for any public ρ >= 1,
    # including ρ far below δN (a noisy size that came out low); the bound is reached in part
    def sizes_and_rho(rng, data, delta):
        rho = max(delta * data.n * float(rng.choice([0.1, 0.5, 1.0, 3.0])), 1.0)
        return [int(rng.integers(2, 21))], rho

    worst = _worst_capped_score_change(np.random.default_rng(111), 300, sizes_and_rho)
    assert worst <= 1.0
    assert worst > 0.05


# ------------------------------------------------------------------------------ case 13
@pytest.mark.slow
@pytest.mark.parametrize("g, rect", [
    (4, (0.1, 0.2, 0.45, 0.7)),
    (8, (0.3, 0.3, 0.9, 0.65)),
    (16, (0.0, 0.0, 1.0, 1.0)),
    (10, (0.2, 0.2, 0.6, 0.6)),     # cell-aligned: Agg = 0
    (25, (0.05, 0.71, 0.33, 0.99)),
])
def test_case13_theorem_7_1_monte_carlo(g, rect):
    # spec 000 §9 case 13 (Thm 7.1): mean |ANSWER(H')-true| over 10^4 draws <= Agg + λ||α||_1 (+3 s.e.), and the relative form
    data = clustered(UNIT, 600, seed=13)
    lam, delta = 1.25, 0.1
    rho = delta * data.n
    grid = dp.UniformGrid(UNIT, g)
    H = data.histogram(grid)
    ay, ax = overlap_vectors(grid, dp.Rect(*rect))
    ay, ax = ay[0], ax[0]
    true = data.true_count(dp.Rect(*rect), UNIT)
    agg = abs(ay @ H @ ax - true)
    bound = agg + lam * ay.sum() * ax.sum()
    Y = discrete_laplace(np.random.default_rng(g), lam, (10_000, g, g))
    err = np.abs(np.einsum("j,njk,k->n", ay, H[None] + Y, ax) - true)
    se = err.std(ddof=1) / math.sqrt(err.size)
    assert err.mean() <= bound + 3 * se
    assert (err / max(true, rho)).mean() <= bound / max(true, rho) + 3 * se / max(true, rho)


# ------------------------------------------------------------------------------ case 14
def test_case14_lambda_to_zero_matches_best_nonpriv():
    # spec 000 §9 case 14: λ -> 0 (ε2 -> ∞): E2EPriv's score ranking equals BestNonPriv's
    data = storage_like()
    Q = random_workload(STORAGE, 100, area_frac=0.01, rng=7)
    s0, _, _ = grid_scores(data, STORAGE, G_STORAGE, Q, 0.0, 0.1, "rel")
    s_small, _, _ = grid_scores(data, STORAGE, G_STORAGE, Q, 1e-9, 0.1, "rel")
    assert np.argsort(s_small).tolist() == np.argsort(s0).tolist()
    # Through the API: a huge ε makes λ tiny and ε1 large, so E2EPriv picks BestNonPriv's grid
    params = {"grid_sizes": G_STORAGE, "delta": 0.1, "tuning_query_area": 0.01, "workload_seed": 7}
    e2e = dp.release("e2epriv", data, STORAGE, 1e9, params={**params, "candidates": "paper"}, seed=1)
    best = dp.release("best_nonpriv", data, STORAGE, 1.0, params=params, seed=1)
    assert np.argsort(e2e.diagnostics["scores"]).tolist() == np.argsort(best.diagnostics["scores"]).tolist()
    assert e2e.diagnostics["chosen"] == best.diagnostics["chosen"]


def test_case14_larger_eps1_increases_argmax_probability():
    # spec 000 §9 case 14: larger ε1 increases P(argmax s)
    data = storage_like()
    Q = random_workload(STORAGE, 100, area_frac=0.01, rng=7)
    lam, delta = 1.25, 0.1
    s, mean_l1, l1 = grid_scores(data, STORAGE, G_STORAGE, Q, lam, delta, "rel")
    sens = sensitivities(data.n, delta, lam, mean_l1, l1, G_STORAGE, "rel", "resp", False)
    best = int(np.argmax(s))
    assert best == int(np.argmax(s / sens))   # so the limit ε1 -> ∞ is argmax s here
    p_best = [exponential_mechanism_probabilities(s, e1, sens)[best] for e1 in (0.01, 0.1, 0.2, 0.5, 1, 5, 50)]
    assert np.all(np.diff(p_best) > 0)
    assert p_best[-1] > 0.99
    tiny = [exponential_mechanism_probabilities([-3.125, -2.5], e1, [4.017857, 4.642857])[1]
            for e1 in (0.05, 0.2, 1, 10, 100)]
    assert np.all(np.diff(tiny) > 0)


def test_case14_aligned_workload_ranks_by_noise_term():
    # spec 000 §9 case 14: Ω=[0,1]^2, G={2,4,8}, QR edges on multiples of 1/2: Agg = 0, s_rel ranks by λ L̄(g), g=2 best
    data = clustered(UNIT, 500, seed=14)
    Q = np.array([[0, 0, 0.5, 0.5], [0.5, 0, 1, 1], [0, 0.5, 1, 1], [0, 0, 1, 1], [0.5, 0.5, 1, 1]], float)
    G, lam, delta = [2, 4, 8], 1.25, 0.1
    rho = delta * data.n
    T = data.true_counts(Q, UNIT).astype(float)
    for g in G:
        R, _, _ = exact_terms(data, UNIT, g, Q)
        assert np.array_equal(R, T)      # Agg = 0 exactly
    s, mean_l1, _ = grid_scores(data, UNIT, G, Q, lam, delta, "rel")
    area = (Q[:, 2] - Q[:, 0]) * (Q[:, 3] - Q[:, 1])
    assert mean_l1 == pytest.approx([g * g * area.mean() for g in G], abs=TOL)
    assert s == pytest.approx([-lam * g * g * np.mean(area / np.maximum(T, rho)) for g in G], abs=TOL)
    assert s[0] > s[1] > s[2]


def test_case14_figure4_small_lambda_prefers_finer_grid():
    # spec 000 §9 case 14: Figure-4-style data with a small λ: the finer grid (g=8) has the higher score
    domain = dp.Domain(0.0, 0.0, 4.0, 4.0)
    data = fig4_data()
    Q = np.array([[1.5, 1.5, 2.5, 2.5]])
    for lam in (0.01, 0.1, 1.0):
        s, _, _ = grid_scores(data, domain, [4, 8], Q, lam, 0.005, "rel")
        assert s[1] > s[0]
        # rho = 2 < T = 4: s(4) = -(96 + λ)/4 and s(8) = -4λ/4
        assert s == pytest.approx([-(96 + lam) / 4, -lam], abs=TOL)


# ------------------------------------------------------------------------------ case 15
@pytest.mark.slow
def test_case15_reproduction_smoke():
    # spec 000 §9 case 15: synthetic Storage stand-in, 10 repetitions: robust orderings of median RE (spec 000 5.3)
    data = storage_like()
    assert data.n == 8938
    sizes = [0.1, 0.3, 0.8]          # side fractions: 1%, 9%, 64% of the area
    methods = ["best_nonpriv", "leaky", "ug", "e2epriv"]
    med = {}
    for eps in (0.2, 1.0):
        for f in sizes:
            params = {"grid_sizes": G_STORAGE, "delta": 0.1, "tuning_query_area": f * f,
                      "tuning_queries": 100, "workload_seed": 11}      # per-size tuning (5.2)
            e2e_params = {**params, "candidates": "paper"}               # the paper's G
            Qe = random_workload(STORAGE, 100, side_frac=f, rng=99)    # evaluation positions differ
            T = data.true_counts(Qe, STORAGE)
            for m in methods:
                errs = [metrics.relative_error(
                    dp.release(m, data, STORAGE, eps, params={"ug": None, "e2epriv": e2e_params}.get(m, params),
                               seed=1000 + rep).answer_many(Qe), T) for rep in range(10)]
                med[m, eps, f] = float(np.median(np.concatenate(errs)))
    ratios = []
    for eps in (0.2, 1.0):
        for f in sizes:
            # BestNonPriv (no noise) has the lowest median RE
            assert med["best_nonpriv", eps, f] < min(med[m, eps, f] for m in methods[1:])
            # soft: Leaky <= Heuristic
            assert med["leaky", eps, f] <= 1.25 * med["ug", eps, f]
            ratios.append(med["e2epriv", eps, f] / med["leaky", eps, f])
        for m in methods:
            # errors fall as the query size grows
            assert med[m, eps, 0.1] > med[m, eps, 0.3] > med[m, eps, 0.8], (m, eps)
    # soft (the spec's word): E2EPriv within a small factor of Leaky. With 10 repetitions one
    # setting is noisy (at 64% queries a release's 100 queries share most of their noise, so
    # its median rests on about 10 independent errors: 2x to 4.3x measured across noise
    # streams), so the factor is asserted on the geometric mean over the six settings
    # (measured about 1.9) with a loose bound per setting
    assert math.exp(np.mean(np.log(ratios))) <= 3.0 and max(ratios) <= 6.0, ratios
    for m in methods[1:]:
        for f in sizes:
            # errors fall as ε grows (noisy methods)
            assert med[m, 0.2, f] > med[m, 1.0, f], (m, f)


# ------------------------------------------------------------- candidate sets: auto and paper
def _paper_release_by_hand(data, domain, eps, split, params, rng):
    """The release before auto candidates existed (spec 000 A7 with a noisy N̂), step by step:
    N̂ at ε0, the capped relative score over the `grid_sizes` list at ε1, the counts at ε2."""
    G, delta = params["grid_sizes"], params["delta"]
    eps0, eps1, eps2 = (eps * f for f in split)
    ledger = Ledger()
    n_hat = ledger.noisy_size(rng, n_in_domain(data, domain), eps0, "sets the sanity bound ρ")
    rho, cap = max(delta * n_hat, 1.0), 1.0 / delta
    scores, _, _ = grid_scores(data, domain, G, tuning_workload(domain, params), 1.0 / eps2, delta,
                               "rel", rho=rho, cap=cap)
    idx, probs = ledger.select(rng, scores, eps1, capped_sensitivity(rho, cap), "selection", G)
    grid = dp.UniformGrid(domain, G[idx])
    counts = ledger.noisy_counts(rng, data.histogram(grid), eps2, "counts")
    return n_hat, scores, probs, G[idx], counts


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_paper_candidates_reproduce_the_list_release_exactly(seed):
    # candidates="paper" is the release as it was: same N̂, scores, probabilities, choice and
    # noisy counts as the step-by-step reference driven by an identical generator
    data = clustered(STORAGE, 3000, seed=20 + seed)
    params = E2EPRIV.resolve_params({"candidates": "paper", "grid_sizes": [10, 20, 30, 40],
                                     "delta": 0.05, "tuning_queries": 50})
    split = E2EPRIV.default_split
    rel = dp.release("e2epriv", data, STORAGE, 1.0, params=params, seed=np.random.default_rng(seed))
    n_hat, scores, probs, g, counts = _paper_release_by_hand(data, STORAGE, 1.0, split, params,
                                                            np.random.default_rng(seed))
    d = rel.diagnostics
    assert rel.noisy_size == n_hat and d["grid_sizes"] == [10, 20, 30, 40]
    assert d["scores"] == scores.tolist() and d["probabilities"] == probs.tolist()
    assert d["chosen"] == g == rel.grid.gx and np.array_equal(rel.counts, counts)
    assert "paper candidates" in rel.ledger.entries[1].note


def test_auto_candidates_are_sorted_unique_bounded_and_hold_the_ug_size():
    for n_hat in (-40, 0, 1, 7, 500, 8938, 200_000, 869_976, 6_442_841, 10 ** 9):
        for eps in (0.01, 0.1, 0.5, 1.0, 3.0, 10.0):
            G = auto_grid_sizes(n_hat, eps)
            assert G == sorted(set(G)) and all(isinstance(g, int) for g in G)
            assert 1 <= G[0] and G[-1] <= AUTO_MAX_GRID
            ug = heuristic_grid_size(max(n_hat, 0), eps)
            assert min(ug, AUTO_MAX_GRID) in G
            m0 = math.sqrt(max(n_hat, 0) * eps / 10)
            lo, hi = m0 * 2 ** (AUTO_STEPS[0] / 2), m0 * 2 ** (AUTO_STEPS[-1] / 2)
            if lo >= 20 and hi <= AUTO_MAX_GRID:   # nothing clipped or merged: the full ladder
                assert len(G) == len(AUTO_STEPS)
                assert np.allclose(np.diff(np.log2(G)), 0.5, atol=0.05)
                assert G[0] == pytest.approx(lo, abs=0.5) and G[-1] == pytest.approx(hi, abs=0.5)
    # a large budget on a large dataset reaches the cap; no data or a tiny ε gives one cell
    assert auto_grid_sizes(6_442_841, 10.0)[-1] == AUTO_MAX_GRID
    assert auto_grid_sizes(0, 1.0) == [1] and auto_grid_sizes(-5, 1.0) == [1]
    # the spec's reference sizes (§9 case 7) are candidates: 30 for Storage, 295, 803 at ε = 1
    assert 30 in auto_grid_sizes(8938, 1.0) and 295 in auto_grid_sizes(869_976, 1.0)
    assert 803 in auto_grid_sizes(6_442_841, 1.0)


def test_auto_candidates_depend_on_noisy_size_and_epsilon_only():
    # two datasets of the same size but unlike layouts, the same generator: the same N̂ is drawn,
    # so the same candidates are offered; only the scores (and maybe the choice) differ
    n = 4000
    a = clustered(STORAGE, n, seed=31)
    rng = np.random.default_rng(32)
    b = dp.PointData(rng.uniform(STORAGE.west, STORAGE.east, n), rng.uniform(STORAGE.south, STORAGE.north, n))
    for eps in (0.2, 1.0, 5.0):
        ra = dp.release("e2epriv", a, STORAGE, eps, seed=np.random.default_rng(33))
        rb = dp.release("e2epriv", b, STORAGE, eps, seed=np.random.default_rng(33))
        assert ra.noisy_size == rb.noisy_size
        G = auto_grid_sizes(ra.noisy_size, eps)
        assert ra.diagnostics["grid_sizes"] == rb.diagnostics["grid_sizes"] == G
        assert ra.diagnostics["scores"] != rb.diagnostics["scores"]
        assert ra.diagnostics["chosen"] in G and ra.grid.gx == ra.diagnostics["chosen"]
        # the selection's ledger entry names the candidate set it chose from
        note = ra.ledger.entries[1].note
        assert "auto candidates" in note and f"of {G}" in note
    # and the set ignores the grid_sizes list (used by "paper" only)
    c = dp.release("e2epriv", a, STORAGE, 1.0, params={"grid_sizes": [2, 3]},
                   seed=np.random.default_rng(33))
    assert c.diagnostics["grid_sizes"] == auto_grid_sizes(c.noisy_size, 1.0)


def test_capped_sensitivity_holds_for_every_auto_candidate():
    # the capped score's sensitivity (1/δ + 1)/ρ has no g in it: check it on neighbours for
    # candidate sets reaching from one cell to a fine grid (the auto ladder of small N̂, ε)
    def sizes_and_rho(rng, data, delta):
        G = auto_grid_sizes(data.n * float(rng.uniform(0.5, 2.0)), float(rng.choice([0.5, 2.0, 20.0])))
        return G, max(delta * data.n * float(rng.uniform(0.5, 2.0)), 1.0)

    worst = _worst_capped_score_change(np.random.default_rng(40), 60, sizes_and_rho)
    assert 0.05 < worst <= 1.0


@pytest.mark.parametrize("variant", ["rel", "abs"])
@pytest.mark.parametrize("candidates", ["auto", "paper"])
def test_candidate_modes_ledger_sums_to_epsilon_and_export_has_no_scores(variant, candidates):
    data = clustered(STORAGE, 3000, seed=41)
    eps = 0.7
    rel = dp.release("e2epriv", data, STORAGE, eps, params={"variant": variant, "candidates": candidates},
                     seed=np.random.default_rng(41))
    assert rel.ledger.total == pytest.approx(eps, abs=TOL) and rel.private
    size_steps = [e for e in rel.ledger if "dataset size" in e.step]
    assert len(size_steps) == (0 if (variant, candidates) == ("abs", "paper") else 1)
    # the export holds the chosen grid and the public ledger, never the owner-only diagnostics
    text = rel.to_json() + json.dumps(rel.metadata(), default=str)
    assert "scores" not in text and "probabilities" not in text
    for v in rel.diagnostics["scores"] + rel.diagnostics["probabilities"]:
        if v not in (0.0, 1.0):
            assert repr(v) not in text
    assert json.loads(rel.to_json())["properties"]["grid"]["cols"] == rel.diagnostics["chosen"]


def test_auto_release_at_200k_points():
    # the auto ladder on a 200k-point city (up to 200 cells a side at ε = 1, 632 at ε = 10);
    # its time is measured in benchmarks/speed.py, never asserted here
    data, domain = dp.load_sample("city_200k")
    for eps in (1.0, 10.0):
        rel = dp.release("e2epriv", data, domain, eps, seed=np.random.default_rng(50))
        assert rel.diagnostics["grid_sizes"] == auto_grid_sizes(rel.noisy_size, eps)
