"""Euler histograms for users' regions (spec 004): the build, queries, sensitivity, DiffPriv,
LinProg, Round, snapping (section 12, T1-T18), the region loader and the release end to end."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import shapely
from scipy import stats

import dp
from helpers import all_keys
from dp.budget import Ledger
from dp.errors import DataError, ParameterError
from dp.mechanisms import base
from dp.mechanisms import euler as eu
from dp.noise import discrete_laplace, discrete_laplace_variance
from dp.regions import RegionData, clip_to_bound, regions_from_points

N4 = 4


def build(bodies, n=N4, **kw):
    return eu.euler_build(np.array(bodies, dtype=object), n, **kw)


def all_queries(n):
    """Every grid-aligned rectangle (r0, r1, c0, c1), inclusive."""
    return [(r0, r1, c0, c1) for r0 in range(n) for r1 in range(r0, n)
            for c0 in range(n) for c1 in range(c0, n)]


def random_bodies(rng, count, n, bound, kinds=("poly", "square", "segment", "point")):
    """Random convex bodies with diameter <= bound: polygons, grid-snapped squares, segments
    (some on grid lines) and points (some on vertices)."""
    out = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        c = rng.uniform(0, n, 2)
        if kind == "poly":
            r = rng.uniform(0.05, bound / 2)
            ang = rng.uniform(0, 2 * np.pi, rng.integers(3, 9))
            rad = r * np.sqrt(rng.uniform(0.2, 1, len(ang)))
            p = c + np.column_stack([rad * np.cos(ang), rad * np.sin(ang)])
            if i % 3 == 0:   # grid-snapped vertices hit edges and vertices exactly
                p = np.round(p * 2) / 2
            g = shapely.convex_hull(shapely.multipoints(p))
        elif kind == "square":
            x0, y0 = np.floor(c * 2) / 2
            s = rng.choice([0.5, 1.0, 1.5]) * bound / 2
            g = shapely.box(x0, y0, x0 + s, y0 + s)
        elif kind == "segment":
            ang = rng.choice([0, np.pi / 2, rng.uniform(0, np.pi)])
            L = rng.uniform(0.1, bound * 0.99)
            p0 = np.round(c) if i % 2 else c
            g = shapely.LineString([p0, p0 + L * np.array([np.cos(ang), np.sin(ang)])])
        else:
            g = shapely.Point(np.round(c) if i % 2 else c)
        out.append(g)
    return np.array(out, dtype=object)


# ============================================================ T1-T5: hand cases
def test_t1_single_cell_body():
    # T1: a body inside cell (0,0) has footprint G[0,0] only; N(Q)=1 iff Q contains (0,0)
    G = build([shapely.box(0.25, 0.25, 0.75, 0.75)])
    expect = np.zeros((7, 7), int)
    expect[0, 0] = 1
    assert np.array_equal(G, expect)
    for q in all_queries(N4):
        assert eu.query(G, *q) == (1 if q[0] == 0 and q[2] == 0 else 0)


def test_t2_crossing_one_edge():
    # T2: faces (0,0),(0,1) and edge G[0,1]; the three queries give 1
    G = build([shapely.box(0.5, 0.25, 1.5, 0.75)])
    assert G.sum() == 3 and G[0, 0] == G[0, 2] == G[0, 1] == 1
    assert eu.query(G, 0, 0, 0, 1) == 1
    assert eu.query(G, 0, 0, 0, 0) == 1
    assert eu.query(G, 0, 0, 1, 1) == 1


def test_t3_paper_example():
    # T3: Fig. 2/4 reconstruction: F=8, E=8, V=2 -> N=2 (naive face sum 8); Δ=25, λ=25
    bodies = [shapely.box(0.5, 0.5, 1.5, 1.5), shapely.box(2.5, 2.5, 3.5, 3.5)]
    G = build(bodies)
    F, Ev, Eh, V = G[0::2, 0::2], G[0::2, 1::2], G[1::2, 0::2], G[1::2, 1::2]
    assert (F.sum(), Ev.sum() + Eh.sum(), V.sum()) == (8, 8, 2)
    assert eu.query(G, 0, 3, 0, 3) == 2
    assert eu.query(G, 1, 2, 1, 2) == 2
    assert eu.query(G, 0, 1, 0, 3) == 1
    for b in bodies:
        assert build([b]).sum() == 9
    assert eu.sensitivity(2, 1) == 25 and eu.sensitivity(2, 1) / 1.0 == 25


def test_t3_general_path_matches_rectangle_fast_path():
    # T3/3.2: the difference-array fast path equals the general per-block build
    rng = np.random.default_rng(3)
    boxes, five = [], []
    for _ in range(300):
        x0, y0 = rng.uniform(0, 7, 2) if rng.random() < 0.5 else np.floor(rng.uniform(0, 7, 2) * 2) / 2
        w, h = rng.choice([0.5, 1.0, 1.3, 2.0]), rng.choice([0.5, 1.0, 1.7, 2.0])
        boxes.append(shapely.box(x0, y0, x0 + w, y0 + h))
        # the same box with an extra vertex on an edge: not a 4-vertex rectangle any more
        five.append(shapely.Polygon([(x0, y0), (x0 + w / 2, y0), (x0 + w, y0), (x0 + w, y0 + h),
                                     (x0, y0 + h)]))
    Gf, sf = eu.euler_build(np.array(boxes), 8, k=2, return_stats=True)
    Gg, sg = eu.euler_build(np.array(five), 8, k=2, return_stats=True)
    assert sf["rectangles"] > 0 and sg["rectangles"] == 0
    assert np.array_equal(Gf, Gg)


def test_t4_boundary_edges_excluded():
    # T4: subtracting the boundary edge G[0,1] for Q = cell (0,0) gives 0; correct is 1
    G = build([shapely.box(0.5, 0.25, 1.5, 0.75)])
    wrong = G[0, 0] - G[0, 1]
    assert wrong == 0
    assert eu.query(G, 0, 0, 0, 0) == 1


def test_t5_corner_cut_both_semantics_exact():
    # T5: hypotenuse through vertex (1,1): open F,E,V = 3,2,0; closed 4,4,1; both N=1
    tri = shapely.Polygon([(0.5, 0.5), (1.5, 0.5), (0.5, 1.5)])
    for sem, fev in (("open", (3, 2, 0)), ("closed", (4, 4, 1))):
        G = build([tri], semantics=sem)
        got = (G[0::2, 0::2].sum(), G[0::2, 1::2].sum() + G[1::2, 0::2].sum(), G[1::2, 1::2].sum())
        assert got == fev, sem
        T = eu.face_masks([tri], N4, semantics=sem)[0]
        for q in all_queries(N4):
            touches = T[q[0]:q[1] + 1, q[2]:q[3] + 1].any()
            assert eu.query(G, *q) == int(touches)


# ====================================================== T6: exactness property
@pytest.mark.slow
def test_t6_exact_on_every_query_of_8x8():
    # T6: for every rectangle of an 8x8 grid, N(Q) = #{x : T(x) ∩ Q ≠ ∅}, 0 mismatches,
    # checked against the face masks and against shapely's interior predicate
    rng = np.random.default_rng(6)
    n = 8
    bodies = random_bodies(rng, 160, n, 2.0)
    for sem in ("open", "closed"):
        G = eu.euler_build(bodies, n, semantics=sem)
        T = eu.face_masks(bodies, n, semantics=sem)
        P = eu.signed_prefix(G)
        qs = np.array(all_queries(n))
        got = eu.answer_cells(P, qs)
        want = np.array([T[:, a:b + 1, c:d + 1].any(axis=(1, 2)).sum() for a, b, c, d in qs])
        assert np.array_equal(got, want), sem
    # independent brute force: interiors meet (open semantics, zero-area bodies buffered)
    buffered, _ = eu._buffer_degenerate(bodies)
    qboxes = shapely.box(qs[:, 2], qs[:, 0], qs[:, 3] + 1, qs[:, 1] + 1)
    hits = shapely.relate_pattern(buffered[:, None], qboxes[None, :], "T********")
    G = eu.euler_build(bodies, n)
    assert np.array_equal(eu.answer_cells(eu.signed_prefix(G), qs), hits.sum(0))


def _elements(n):
    """Shapely geometry of every doubled-grid entry (faces, edges, vertices), in G order."""
    m = 2 * n - 1
    out = np.empty((m, m), dtype=object)
    for i in range(m):
        for j in range(m):
            r, c = i // 2, j // 2
            if i % 2 == 0 and j % 2 == 0:
                out[i, j] = shapely.box(c, r, c + 1, r + 1)
            elif i % 2 == 0:
                out[i, j] = shapely.LineString([(c + 1, r), (c + 1, r + 1)])
            elif j % 2 == 0:
                out[i, j] = shapely.LineString([(c, r + 1), (c + 1, r + 1)])
            else:
                out[i, j] = shapely.Point(c + 1, r + 1)
    return out


def test_t6_derived_edges_vertices_equal_literal_algorithm1():
    # T6: derived edges/vertices equal Algorithm 1's literal tests (closed: x ∩ P_i ≠ ∅;
    # open: int(x) meets the open face/edge, or contains the vertex)
    rng = np.random.default_rng(61)
    n = 6
    el = _elements(n)
    bodies = random_bodies(rng, 120, n, 2.0)
    for x in bodies:
        lit = shapely.intersects(x, el).astype(int)
        assert np.array_equal(eu.euler_build(np.array([x]), n, semantics="closed"), lit)
    for x in bodies[np.array([shapely.area(b) > 0 for b in bodies])]:
        lit = shapely.relate_pattern(x, el, "T********").astype(int)
        assert np.array_equal(eu.euler_build(np.array([x]), n), lit)


# ================================================================= T7, T8: Δ
def test_t7_sensitivity_attained_and_bounded():
    # T7: disc of diameter 2-1e-6 centred in a face: Σfp = 25 = Δ; diamond on a vertex:
    # open 9, closed 33; removing any body changes H by exactly its footprint, ≤ Δ
    disc = shapely.Point(1.5, 1.5).buffer((2 - 1e-6) / 2, quad_segs=64)
    assert build([disc]).sum() == 25 == eu.sensitivity(2, 1)
    diamond = shapely.Polygon([(1, 2), (2, 1), (3, 2), (2, 3)])
    assert build([diamond]).sum() == 9
    assert build([diamond], semantics="closed").sum() == 33 > 25
    assert eu.sensitivity(2, 1, semantics="closed") == 49
    rng = np.random.default_rng(7)
    bodies = random_bodies(rng, 80, 8, 2.0)
    G = eu.euler_build(bodies, 8, k=2)
    for i in range(len(bodies)):
        diff = G - eu.euler_build(np.delete(bodies, i), 8, k=2)
        assert diff.min() >= 0
        assert diff.sum() == eu.euler_build(bodies[i:i + 1], 8, k=2).sum() <= 25


def test_t8_sensitivity_table():
    # T8: Δ table, Lemma 2 variant, robust k, replace-one doubles
    cases = [(2, 1, 25, 27), (2, 20 / 30, 49, 54), (2, 2, 9, 9), (2, 0.8, 49, 54), (2, 0.16, 729, 819)]
    for B, d, tight, lemma in cases:
        assert eu.sensitivity(B, d) == tight
        assert eu.sensitivity(B, d, variant="lemma2") == lemma
        assert eu.sensitivity(B, d, neighbour="replace") == 2 * tight
        assert eu.sensitivity(B, d, variant="lemma2", neighbour="replace") == 2 * lemma
    assert eu.k_cells(2.1, 0.7) == 3
    assert eu.k_cells(2, 20 / 30) == 3 and eu.k_cells(2, 0.66) == 4
    with pytest.raises(ParameterError):
        eu.sensitivity(2, 1, neighbour="swap")


def test_t8_footprint_guard_clips_oversized_bodies():
    # T8/3.2: the footprint guard keeps any body within a (k+1)x(k+1) block (Σfp ≤ Δ)
    wide = shapely.box(0.2, 0.2, 2.5, 0.8)          # 3 columns, k = 1 allows 2
    G, st = eu.euler_build(np.array([wide]), 4, k=1, return_stats=True)
    assert st["guard_clipped"] == 1
    assert G[0, 0] == G[0, 1] == G[0, 2] == 1 and G.sum() == 3 <= eu.sensitivity(1, 1)
    seg = shapely.LineString([(1.0, 0.5), (3.0, 0.5)])   # length B=2, buffered: 4 columns
    G, st = eu.euler_build(np.array([seg]), 4, k=2, return_stats=True)
    assert st["guard_clipped"] == 1 and G.sum() <= 25
    assert G[0, 0::2].sum() == 3


def test_plan_shows_k_and_sensitivity_before_release():
    # T8 in the app: plan() gives k, Δ and λ from public parameters only
    dom = dp.samples.BEIJING_20KM
    p = eu.plan(dom, {"cells": 20, "bound_km": 2.0}, epsilon=1.0)
    assert (p["cells_per_side"], p["k"], p["sensitivity"], p["scale"]) == (20, 2, 25, 25.0)
    assert p["sensitivity_lemma2"] == 27 and p["components"] == 1521
    assert p["constraints"] == {"C1": 1520, "C2": 1444, "C3": 361}
    p = eu.plan(dom, {"cell_km": 0.8, "neighbour": "replace"}, epsilon=0.5)
    assert p["cells_per_side"] == 25 and p["k"] == 3 and p["sensitivity"] == 98
    assert p["scale"] == 196.0 and any("replace" in s for s in p["notes"])
    with pytest.raises(ParameterError, match="larger than the study square"):
        eu.plan(dom, {"cell_km": 30})


# ============================================================== T9-T13: LP
def test_t9_constraint_counts():
    # T9: (4n(n-1), 4(n-1)^2, (n-1)^2) rows; 3325 at n=20 with |H| = 1521
    for n, want in ((20, (1520, 1444, 361)), (64, (16128, 15876, 3969)), (128, (65024, 64516, 16129))):
        C, sl = eu.constraint_matrix(n)
        got = tuple(sl[f].stop - sl[f].start for f in ("C1", "C2", "C3"))
        assert got == want == tuple(eu.constraint_counts(n).values())
        assert C.shape == (sum(want), (2 * n - 1) ** 2)
    assert sum(eu.constraint_counts(20).values()) == 3325
    assert eu.constraint_matrix(20, False)[0].shape[0] == 1520 + 1444


def test_t10_true_histogram_is_feasible():
    # T10: violations(H) = 0 for Euler histograms of convex bodies; the matrix agrees
    rng = np.random.default_rng(10)
    for n in (3, 8, 20):
        G = eu.euler_build(random_bodies(rng, 300, n, 2.0), n, k=2)
        assert eu.violations(G) == {"C1": 0, "C2": 0, "C3": 0}
        C, _ = eu.constraint_matrix(n)
        assert (C @ G.ravel()).max() <= 0
    data, dom = dp.load_region_sample("home_ranges_3k")
    G = data.euler_histogram(eu.make_grid(dom, 20))
    assert eu.violations(G) == {"C1": 0, "C2": 0, "C3": 0}


@pytest.mark.parametrize("case", ["a", "b", "c", "d", "e"])
def test_t11_lp_hand_cases(case):
    # T11: n=2 hand cases (a) edge 5 -> 0, obj 5; (b) vertex 4 -> 0, obj 4; (c) all 10 with
    # vertex 20 -> vertex 10, obj 10; (d) face 3 unchanged, obj 0; (e) feasible H' unchanged
    Hp = np.zeros((3, 3))
    if case == "a":
        Hp[0, 1] = 5
        want, obj = np.zeros((3, 3)), 5
    elif case == "b":
        Hp[1, 1] = 4
        want, obj = np.zeros((3, 3)), 4
    elif case == "c":
        Hp[:] = 10
        Hp[1, 1] = 20
        want, obj = np.full((3, 3), 10.0), 10
    elif case == "d":
        Hp[0, 0] = 3
        want, obj = Hp.copy(), 0
    else:
        Hp = np.array([[5, 3, 4], [2, 1, 2], [7, 2, 2]], float)
        want, obj = Hp.copy(), 0
    H2, info = eu.linprog_lad(Hp)
    assert info["status"] == 0
    assert info["objective"] == pytest.approx(obj, abs=1e-7)
    assert np.allclose(H2, want, atol=1e-7)


def _noisy(n=12, seed=0, scale=9.0):
    rng = np.random.default_rng(seed)
    H = eu.euler_build(random_bodies(rng, 400, n, 2.0, kinds=("poly", "square")), n, k=2)
    return H, eu.diffpriv(H, 1.0, scale, rng, ledger=dp.Ledger())


def test_t12_lp_output():
    # T12: status 0; max(C·vec(H'')) ≤ 1e-7; H'' ≥ -1e-9; objective ≤ ||H'-H||_1, with or
    # without C3
    H, Hp = _noisy()
    H2, info = eu.linprog_lad(Hp)
    C, _ = eu.constraint_matrix(12)
    assert info["status"] == 0
    assert (C @ H2.ravel()).max() <= 1e-7
    assert H2.min() >= -1e-9
    assert info["objective"] <= np.abs(Hp - H).sum() + 1e-6
    assert info["polish"] <= 1e-6
    H2b, info_b = eu.linprog_lad(Hp, include_c3=False)
    assert info_b["objective"] == pytest.approx(info["objective"], rel=1e-7)
    assert eu.violations(H2) == {"C1": 0, "C2": 0, "C3": 0}
    Hinf, info_inf = eu.linprog_lad(Hp, norm="linf")
    assert info_inf["status"] == 0 and eu.violations(Hinf)["C1"] == 0
    assert info_inf["objective"] <= np.abs(Hp - H).max() + 1e-6
    assert eu.violations(Hp)["C1"] > 0          # DiffPriv does violate


def test_t13_round():
    # T13: zero violations after round+repair, ||H''-H'''||∞ ≤ 0.5+1e-6, integer output
    H, Hp = _noisy(seed=13)
    H2, _ = eu.linprog_lad(Hp)
    H3 = eu.round_consistent(H2)
    assert eu.violations(H3, tol=0.0) == {"C1": 0, "C2": 0, "C3": 0}
    assert np.abs(H2 - H3).max() <= 0.5 + 1e-6
    assert np.array_equal(H3, np.round(H3)) and H3.min() >= 0
    # rounding at a tolerance boundary: E = F + 1e-9 straddling .5 is repaired, not violated
    G = np.zeros((3, 3))
    G[0, 0], G[0, 2], G[0, 1] = 2.5, 2.4999999999, 2.5000000001
    out = eu.round_consistent(G)
    assert eu.violations(out, tol=0.0)["C1"] == 0


# ====================================================== T14, T15: noise, queries
@pytest.mark.slow
def test_t14_noise_sanity():
    # T14: H=0, n=20, λ=25 untruncated, 200 draws: integer noise, mean ≈ 0 (|mean| < 1),
    # mean |Y| ≈ 25 (discrete: 2q/(1-q²) = 24.99, ±1), and no component is skipped: every one is
    # non-zero in some draw (P(Y=0) = (1-q)/(1+q) = 0.02, so all 200 zero has probability 0.02^200)
    # and the zero fraction matches (sd 0.0003, tolerance 0.003).
    # Thm 5.1 at δ=0.2 over 2000 draws: P(max|Y| > λ ln(1521/δ)) ≤ 0.2 + 0.03.
    rng = np.random.default_rng(14)
    H = np.zeros((39, 39))
    Y = eu.diffpriv(np.zeros((200, 39, 39)), 1.0, 25.0, rng, ledger=dp.Ledger(), truncate=False)
    assert Y.dtype.kind == "i"
    q = math.exp(-1 / 25)
    assert abs(Y.mean()) < 1 and abs(np.abs(Y).mean() - 2 * q / (1 - q * q)) < 1
    assert (Y != 0).any(axis=0).all()
    assert (Y == 0).mean() == pytest.approx((1 - q) / (1 + q), abs=0.003)
    assert (eu.diffpriv(H, 1.0, 25.0, rng, ledger=dp.Ledger()) >= 0).all()
    bound = 25 * math.log(1521 / 0.2)
    Y = eu.diffpriv(np.zeros((2000, 39, 39)), 1.0, 25.0, rng, ledger=dp.Ledger(), truncate=False)
    big = np.abs(Y).max(axis=(1, 2)) > bound
    assert big.mean() <= 0.2 + 0.03
    with pytest.raises(ParameterError, match="whole-number"):
        eu.diffpriv(np.full((3, 3), 0.5), 1.0, 25.0, rng, ledger=dp.Ledger())


def test_t15_prefix_sums_equal_direct_signed_sum():
    # T15: prefix-sum answers equal the direct signed sum on every rectangle; a p x q query
    # has (2p-1)(2q-1) terms
    rng = np.random.default_rng(15)
    n = 7
    G = rng.integers(0, 50, (2 * n - 1, 2 * n - 1))
    qs = np.array(all_queries(n))
    P = eu.signed_prefix(G)
    assert np.array_equal(eu.answer_cells(P, qs), [eu.query(G, *q) for q in qs])
    Gf = rng.uniform(-10, 10, G.shape)
    assert np.allclose(eu.answer_cells(eu.signed_prefix(Gf), qs), [eu.query(Gf, *q) for q in qs])
    for p, q in ((1, 1), (2, 3), (4, 4)):
        block = G[0:2 * p - 1, 0:2 * q - 1]
        assert block.size == (2 * p - 1) * (2 * q - 1)


# ============================================================== T16: snapping
def unit_grid(n=4):
    """An EulerGrid whose lon/lat equal grid units (d = 1 per degree), for exact snapping."""
    sq = dp.Domain(0.0, 0.0, float(n), float(n))
    return eu.EulerGrid(sq, sq, n, 1.0, 2.0)


def test_t16_snapping():
    # T16: (0.2,0.2)-(2.0,1.5) snaps outward to rows 0..1, cols 0..1 (x1 = 2.0 does not take
    # col 2); inward is empty in rows, so it falls back to outward
    g = unit_grid()
    box = dp.Rect(0.2, 0.2, 2.0, 1.5)
    assert g.snap_cells(box).tolist() == [[0, 1, 0, 1]]
    assert g.snap_cells(box, "inward").tolist() == [[0, 1, 0, 1]]
    assert g.snap_cells(dp.Rect(0.2, 0.2, 3.5, 3.9), "inward").tolist() == [[1, 2, 1, 2]]
    assert g.snap(box) == dp.Rect(0.0, 0.0, 2.0, 2.0)
    assert g.snap_cells(dp.Rect(5, 5, 6, 6)).tolist() == [[-1, -1, -1, -1]]
    assert g.snap_cells(dp.Rect(-3, -1, 9, 0.5)).tolist() == [[0, 0, 0, 3]]
    assert g.snap_cells(dp.Rect(1.5, 1.5, 1.5, 1.5)).tolist() == [[1, 1, 1, 1]]


def test_t16_snapping_in_a_projected_domain():
    # T16 with a real projection: cell-aligned lon/lat boxes snap to themselves
    dom = dp.samples.BEIJING_20KM
    g = eu.make_grid(dom, 20)
    assert g.square == dom or np.allclose(g.square.bounds, dom.bounds)
    for r0, r1, c0, c1 in ((0, 0, 0, 0), (3, 7, 2, 19), (0, 19, 0, 19)):
        rect = g.cell_rect(r0, r1, c0, c1)
        assert g.snap_cells(rect).tolist() == [[r0, r1, c0, c1]]
        assert g.snap_cells(rect, "inward").tolist() == [[r0, r1, c0, c1]]
    assert g.k == 2 and g.cell_km == pytest.approx(1.0)


# ======================================================= T17, T18: release
def test_t17_non_realisable_consistency_clamped():
    # T17: 3x3 all-ones F/E with V=0: 0 violations, full query -3, displayed answer 0
    G = np.ones((5, 5))
    G[1::2, 1::2] = 0
    assert eu.violations(G) == {"C1": 0, "C2": 0, "C3": 0}
    assert eu.query(G, 0, 2, 0, 2) == -3
    g = unit_grid(3)
    params = eu.EULER.resolve_params({"stage": "diffpriv", "cells": 3})
    rel = eu.EulerRelease(eu.EULER, g.domain, 1.0, (1.0,), params, Ledger(), g, G, 25.0, 25)
    full = dp.Rect(0, 0, 3, 3)
    assert rel.answer_raw(full) == -3
    assert rel.answer(full) == 0.0


def test_t18_pipeline_determinism():
    # T18: the same seed gives a byte-identical H'''; different seeds give different H'
    data, dom = dp.load_region_sample("home_ranges_3k")
    a = dp.release("euler", data, dom, 1.0, seed=5)
    b = dp.release("euler", data, dom, 1.0, seed=5)
    c = dp.release("euler", data, dom, 1.0, seed=6, params={"stage": "diffpriv"})
    assert a.values("round").tobytes() == b.values("round").tobytes()
    assert a.values("linprog").tobytes() == b.values("linprog").tobytes()
    assert not np.array_equal(a.values("diffpriv"), c.values("diffpriv"))


# ========================================================== release end to end
@pytest.fixture(scope="module")
def sample():
    return dp.load_region_sample("home_ranges_3k")


@pytest.fixture(scope="module")
def released(sample):
    data, dom = sample
    return dp.release("euler", data, dom, epsilon=1.0, seed=np.random.default_rng(1))


def test_release_end_to_end(sample, released):
    # section 7: dp.release("euler") on the built-in sample; ledger = ε, all stages, public export
    data, dom = sample
    rel = released
    assert rel.mechanism == "euler" and rel.private and rel.stage == "round"
    assert rel.spec.data_kind == "regions"
    assert rel.ledger.total == pytest.approx(1.0) and len(rel.ledger) == 1
    e = rel.ledger.entries[0]
    assert e.sensitivity == 25 and e.noise == "discrete laplace" and rel.noise_scale == 25.0
    assert rel.spec.unit == base.USER_REGION
    for words in ("adding or removing one user's region", "number of users", "neither used nor "
                  "exported", "discrete Laplace"):
        assert words in rel.spec.guarantee
    dpv = rel.values("diffpriv")
    assert np.array_equal(dpv, np.round(dpv)) and dpv.min() >= 0     # integer, truncated at 0
    assert rel.stages_computed == ("diffpriv", "linprog", "round")
    vt = rel.violation_table()
    assert vt["diffpriv"]["total"] > 0 and vt["linprog"]["total"] == vt["round"]["total"] == 0
    assert vt["round"]["rows"] == {"C1": 1520, "C2": 1444, "C3": 361}
    grid, ranges, counts = rel.regions()
    assert grid.gx == grid.gy == 20 and ranges.shape == (400, 4) and counts.shape == (400,)
    assert np.array_equal(counts, rel.components()["faces"].ravel())
    segs, vals = rel.edges_layer()
    assert segs.shape == (760, 2, 2) and vals.shape == (760,)
    pts, vv = rel.vertices_layer()
    assert pts.shape == (361, 2) and np.array_equal(vv, rel.values()[1::2, 1::2].ravel())
    gj = json.loads(rel.to_json())
    assert len(gj["features"]) == 1521
    kinds = {f["properties"]["element"] for f in gj["features"]}
    assert kinds == {"face", "edge", "vertex"}
    meta = gj["properties"]
    assert meta["mechanism"] == "euler" and meta["euler"]["k"] == 2
    assert meta["euler"]["violations"]["round"]["total"] == 0
    keys = {k for f in gj["features"] for k in f["properties"]}
    assert keys <= {"element", "row", "col", "i", "j", "count"}
    text = json.dumps(gj)
    assert '"u1"' not in text and "preprocessing" not in text       # no ids, no diagnostics
    assert meta["unit_of_privacy"] == base.USER_REGION and meta["differentially_private"]
    names = set(all_keys(gj))         # every key of the export: no exact number of users in it
    assert not any(w in k for k in names for w in ("size", "n_public", "counted", "users"))
    H = data.euler_histogram(rel.egrid)
    assert not any(np.array_equal(H, rel.values(s)) for s in rel.stages_computed)
    assert rel.diagnostics["preprocessing"]["counted"] == data.n


def test_release_queries_snap_and_clamp(sample, released):
    # 3.3 + pitfall 6: answers use the snapped rectangle, clamped at 0, raw kept
    data, dom = sample
    rel = released
    rect = dp.Rect(dom.west + 0.013, dom.south + 0.021, dom.west + 0.0871, dom.south + 0.0553)
    snapped = rel.snap(rect)
    assert snapped.west <= rect.west and snapped.east >= rect.east
    assert rel.answer(rect) == rel.answer(snapped) == max(rel.answer_raw(rect), 0.0)
    exact = data.euler_answers(rel.egrid, rect)[0]
    assert exact == data.true_count(snapped)
    assert data.true_count(rect) <= exact
    diff = rel.with_stage("diffpriv")
    assert diff.noise_variance(rect)[0] > 0
    assert rel.noise_variance(rect)[0] == diff.noise_variance(rect)[0]   # Round: the noise it was fitted from
    assert diff.stage == "diffpriv" and rel.stage == "round"
    assert diff.answer_raw(rect) == rel.answer_raw(rect, "diffpriv")
    many = rel.answer_many([rect, snapped, dp.Rect(0, 0, 1, 1)])
    assert many[0] == many[1] and many[2] == 0.0
    assert (rel.answer_many([rect] * 3) >= 0).all()


def test_exact_euler_matches_true_counts_on_aligned_rectangles(sample):
    # Cor. 1 on real-looking data: exact Euler answers equal raw-geometry counts on every
    # cell-aligned rectangle tried (bodies inside the square, none wider than B)
    data, dom = sample
    g = eu.make_grid(dom, 20)
    G, st = data.euler_histogram(g, with_stats=True)
    assert st["clipped_to_bound"] == 0 and st["outside_square"] == 0
    rng = np.random.default_rng(1)
    cells = []
    for _ in range(60):
        r0, c0 = rng.integers(0, 20, 2)
        r1, c1 = rng.integers(r0, 20), rng.integers(c0, 20)
        cells.append((r0, r1, c0, c1))
    rects = [g.cell_rect(*c) for c in cells]
    assert np.array_equal(eu.answer_cells(eu.signed_prefix(G), cells), data.true_counts(rects))


def test_sparse_data_warning():
    # pitfall 9: mean released face count below λ triggers the warning; it is computed from the
    # released values only (post-processing), so the export may carry it
    rng = np.random.default_rng(9)
    dom = dp.samples.BEIJING_20KM
    c = rng.uniform(0.2, 0.8, (200, 2)) * [dom.width, dom.height] + [dom.west, dom.south]
    geoms = shapely.buffer(shapely.points(c), 0.003)
    data = RegionData(geoms)
    rel = dp.release("euler", data, dom, 1.0, seed=1, params={"stage": "diffpriv"})
    assert rel.sparse_data and "Sparse data" in rel.sparse_warning
    assert rel.euler_metadata()["sparse_warning"]
    assert rel.mean_face == rel.values()[0::2, 0::2].mean()


def test_lazy_stages_and_progress(sample):
    # section 5.3: LP runs on demand (post-processing) and reports its stage boundaries
    data, dom = sample
    rel = dp.release("euler", data, dom, 1.0, seed=2, params={"stage": "diffpriv"})
    assert rel.stages_computed == ("diffpriv",)
    seen = []
    r2 = rel.with_stage("round", progress=lambda msg, frac: seen.append(frac))
    assert seen[0] == 0.0 and seen[-1] == 1.0
    # the cached release never changes: the new stages live in the release returned
    assert rel.stages_computed == ("diffpriv",) and r2.stages_computed == ("diffpriv", "linprog", "round")
    assert r2.stage_info("linprog")["status"] == 0
    with pytest.raises(ParameterError):
        rel.with_stage("exact")


def test_neighbour_and_parameters(sample):
    # 4.1: replace-one doubles Δ; cell size and bound give k; point data is refused
    data, dom = sample
    rel = dp.release("euler", data, dom, 2.0, seed=1,
                     params={"neighbour": "replace", "cell_km": 2.0, "stage": "diffpriv"})
    assert rel.egrid.n == 10 and rel.egrid.k == 1
    assert rel.sensitivity == 18 and rel.noise_scale == 9.0
    assert rel.ledger.total == pytest.approx(2.0)
    pts, pdom = dp.load_sample("small_city_5k")
    with pytest.raises(dp.DataError, match="takes regions data"):     # refused at the boundary
        dp.release("euler", pts, pdom, 1.0)
    with pytest.raises(ParameterError):
        dp.release("euler", data, dom, 1.0, params={"stage": "exact"})
    assert "euler" in dp.mechanisms() and dp.mechanisms()["euler"].data_kind == "regions"


def test_bound_clip_in_the_mechanism():
    # section 7 step 2: a region wider than B is clipped to a disc of diameter B, then counted
    dom = dp.samples.BEIJING_20KM
    g = eu.make_grid(dom, 20)
    lon, lat = g.to_lonlat(np.array([5.2, 9.8]), np.array([5.5, 5.9]))
    long_region = shapely.box(lon[0], lat[0], lon[1], lat[1])   # 4.6 km x 0.4 km
    data = RegionData([long_region, shapely.Point(*g.to_lonlat(12.5, 12.5))])
    G, st = data.euler_histogram(g, with_stats=True)
    assert st["clipped_to_bound"] == 1 and st["zero_area_buffered"] == 1
    T = G[0::2, 0::2]
    assert (T[:, :12] > 0).any(axis=0).sum() == 3 and T[:, :12].sum() <= 9   # ≤ k+1 = 3 columns
    assert T[12, 12] == 1 and T.sum() == T[:, :12].sum() + 1
    assert eu.query(G, 0, 19, 0, 19) == 2


# ============================================================ the region loader
def feature(geometry, **props) -> dict:
    return {"type": "Feature", "geometry": geometry, "properties": props}


def collection(*features) -> bytes:
    return json.dumps({"type": "FeatureCollection", "features": list(features)}).encode()


def square(x, y, s=0.005):
    return {"type": "Polygon", "coordinates": [[[x, y], [x + s, y], [x + s, y + s], [x, y + s], [x, y]]]}


def good_features(k=6):
    return [feature(square(116.3 + 0.01 * i, 39.9), user_id=f"u{i}") for i in range(k)]


def region_error(raw, **kw) -> str:
    kw.setdefault("filename", "regions.geojson")
    with pytest.raises(DataError) as exc:
        dp.load_regions(raw, **kw)
    return str(exc.value).lower()


def test_loader_geojson_polygons_and_report():
    # 10.2 / issue: one Polygon per user loads with ids and a report
    data = dp.load_regions(collection(*good_features()), filename="r.geojson")
    assert data.n == 6 and list(data.user) == [f"u{i}" for i in range(6)]
    assert data.report.regions == 6 and data.report.rows_read == 6
    assert "6 user regions" in data.report.summary()
    assert not data.degenerate.any()


def test_loader_hull_multi_repair_counts():
    # section 8 / issue: non-convex -> hull, multi-part -> hull, invalid -> repaired or
    # rejected, each counted
    L = {"type": "Polygon", "coordinates": [[[116.3, 39.9], [116.31, 39.9], [116.31, 39.901],
                                             [116.301, 39.901], [116.301, 39.91], [116.3, 39.91],
                                             [116.3, 39.9]]]}
    holed = {"type": "Polygon", "coordinates": [
        [[116.4, 39.9], [116.41, 39.9], [116.41, 39.91], [116.4, 39.91], [116.4, 39.9]],
        [[116.402, 39.902], [116.404, 39.902], [116.404, 39.904], [116.402, 39.902]]]}
    multi = {"type": "MultiPolygon", "coordinates": [square(116.32, 39.92)["coordinates"],
                                                     square(116.33, 39.92)["coordinates"]]}
    bowtie = {"type": "Polygon", "coordinates": [[[116.35, 39.95], [116.36, 39.96], [116.36, 39.95],
                                                  [116.35, 39.96], [116.35, 39.95]]]}
    flat = {"type": "Polygon", "coordinates": [[[116.25, 39.75], [116.5, 40.0], [116.75, 40.25],
                                                [116.25, 39.75]]]}    # exactly collinear
    feats = good_features(6) + [feature(L, id="L"), feature(holed, id="H"), feature(multi, id="M"),
                                feature(bowtie, id="B"), feature(flat, id="F")]
    data = dp.load_regions(collection(*feats), filename="r.geojson")
    ch = data.report.changed
    from dp.io import region_files as rg
    assert ch[rg.CHANGED_HULL] == 2 and ch[rg.CHANGED_MULTI] == 1 and ch[rg.CHANGED_REPAIRED] == 1
    assert data.report.dropped == {"invalid polygons rejected (no area left after repair)": 1}
    assert data.n == 10
    assert np.allclose(shapely.area(data.geoms), shapely.area(shapely.convex_hull(data.geoms)))
    s = data.report.summary()
    assert "convex hull" in s and "repaired" in s and "rejected" in s


def test_loader_bound_clip_counts():
    # 7 step 2 at load time: regions wider than B are clipped (diameter ≤ B afterwards)
    big = feature(square(116.3, 39.9, 0.05), id="big")     # ~4.3 km x 5.6 km
    data = dp.load_regions(collection(*good_features(3), big), filename="r.json", bound_km=2.0)
    from dp.io import region_files as rg
    assert data.report.changed[rg.CHANGED_BOUND] == 1
    g, n = clip_to_bound(data.geoms, 2.0)
    assert n == 0 and data.diameters_km().max() <= 2.0 + 1e-9      # nothing left to clip
    plain = dp.load_regions(collection(*good_features(3), big), filename="r.json")
    assert plain.report.changed.get(rg.CHANGED_BOUND, 0) == 0
    assert "1 regions are wider than 2 km" in plain.report.summary()
    assert plain.diameters_km().max() > 5


def test_loader_merge_or_refuse_many_features_per_user():
    # pitfall 15: one user with several regions is an error unless merge=True
    feats = good_features(4) + [feature(square(116.5, 39.95), user_id="u1")]
    msg = region_error(collection(*feats))
    for part in ("1 users have more than one feature", "'u1' has 2", "one region per user", "merge=true"):
        assert part in msg
    data = dp.load_regions(collection(*feats), filename="r.geojson", merge=True)
    from dp.io import region_files as rg
    assert data.n == 4 and data.report.changed[rg.CHANGED_MERGED] == 1
    i = list(data.user).index("u1")
    assert shapely.area(data.geoms[i]) > 0.005 ** 2 * 10


@pytest.mark.parametrize("raw,parts", [
    (b"", ["empty", "expected", "polygon"]),
    (b"  \n ", ["empty", "expected"]),
    (b"{not json", ["not valid json", "expected"]),
    (b'{"features": []}', ["no geojson 'type'", "expected"]),
    (b'{"type": "FeatureCollection"}', ["no 'features' list", "expected"]),
    (b'{"type": "FeatureCollection", "features": []}', ["no features", "expected one polygon"]),
    (collection(feature({"type": "LineString", "coordinates": [[0, 0], [1, 1]]})),
     ["no polygon or multipolygon", "linestring", "expected one region per user"]),
    (collection(feature({"type": "Point", "coordinates": [116.3, 39.9]})),
     ["point features but no user id", "expected"]),
    (collection(feature(square(200, 39.9)), feature(square(201, 39.9))),
     ["unusable", "longitude outside [-180, 180]", "expected"]),
    (collection(feature(square(116.3, 95)), feature(square(116.3, 96))),
     ["latitude outside [-90, 90]", "expected"]),
    (collection(feature(square(500000, 4400000, 100)), feature(square(500100, 4400000, 100))),
     ["look projected", "decimal degrees"]),
    (collection(feature({"type": "Polygon", "coordinates": [[[1, 1], [2, 2]]]}),
                feature({"type": "Polygon", "coordinates": [[["a", 1], [2, 2], [3, 3], [1, 1]]]})),
     ["malformed coordinates", "first equal to the last"]),
    (collection(feature({"type": "Polygon", "coordinates": [[[1, 1], [2, 2], [3, 3], [1, 1]]]})),
     ["invalid", "no area", "expected simple polygons"]),
    (b"\x89PNG\r\n\x1a\n0000", ["png", "not text"]),
])
def test_loader_data_errors(raw, parts):
    # issue: clear DataErrors that say what was wrong and what was expected
    msg = region_error(raw)
    for p in parts:
        assert p in msg, (p, msg)


def test_loader_more_errors(tmp_path):
    # issue: file not found, row limit, missing user property, CSV without user column
    assert "file not found" in region_error(str(tmp_path / "nope.geojson"))
    assert "more than the limit" in region_error(collection(*good_features(5)), max_rows=3)
    assert "no feature has a property named 'who'" in region_error(collection(*good_features(2)),
                                                                   user="who")
    msg = region_error(b"lon,lat\n116.3,39.9\n116.31,39.91\n", filename="p.csv")
    assert "no user id column" in msg and "user=" in msg
    assert "unknown file type" in region_error(b"abc", filename="x.xlsx")


def test_loader_csv_points_to_regions():
    # 10.2: CSV of points with a user id -> KDE mode, within B/2, convex hull; degenerate
    # users (one point, collinear points) become points/lines and are counted
    rng = np.random.default_rng(2)
    rows = ["user_id,lon,lat"]
    for u in range(5):
        c = np.array([116.3 + 0.02 * u, 39.9])
        p = c + rng.normal(0, 0.002, (40, 2))
        p[:3] += 0.2                               # far outliers (> B/2 from the mode)
        rows += [f"u{u},{x:.6f},{y:.6f}" for x, y in p]
    rows += ["solo,116.5,39.95"]
    rows += [f"line,{116.5 + 2 ** -10 * i:.10f},{39.75 + 2 ** -10 * i:.10f}" for i in range(5)]
    rows += ["ghost,116.1,39.9"]                    # another one-point user
    raw = ("\n".join(rows) + "\n").encode()
    data = dp.load_regions(raw, filename="pts.csv", bound_km=2.0)
    assert data.n == 8
    from dp import regions as rg
    assert data.report.changed[rg.CHANGED_DEGENERATE] == 3
    assert data.report.unit == "points" and data.report.rows_read == len(rows) - 1
    assert "outlying points" in data.report.summary()
    i = list(data.user).index("u0")
    b = shapely.bounds(data.geoms[i])
    assert b[2] < 116.35                            # the outliers are not in the hull
    assert shapely.get_type_id(data.geoms[list(data.user).index("solo")]) == 0
    assert shapely.get_type_id(data.geoms[list(data.user).index("line")]) == 1


def test_loader_geojson_points_with_user_ids():
    # issue: point features with user ids are pre-processed like a CSV of points
    feats = [feature({"type": "Point", "coordinates": [116.3 + 0.001 * (i % 7), 39.9 + 0.001 * (i % 5)]},
                     user_id=f"u{i % 3}") for i in range(30)]
    data = dp.load_regions(collection(*feats), filename="p.geojson")
    assert data.n == 3 and data.report.unit == "points"


def test_kde_mode_matches_scipy():
    # 10.2 step 1: the vectorised KDE mode equals scipy's gaussian_kde argmax
    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(0, 300, 50), rng.standard_t(3, 80) * 200, rng.normal(5, 50, 7)])
    Y = np.concatenate([rng.normal(0, 150, 50), rng.normal(0, 500, 80), rng.normal(0, 80, 7)])
    start, count = np.array([0, 50, 130]), np.array([50, 80, 7])
    from dp.regions import _kde_modes
    modes = _kde_modes(X, Y, start, count)
    for s, c, m in zip(start, count, modes):
        P = np.vstack([X[s:s + c], Y[s:s + c]])
        assert m == s + int(np.argmax(stats.gaussian_kde(P)(P)))


def test_regions_from_points_bound_and_knn():
    # 10.2 steps 2-4: at most knn points, all within B/2 of the mode: diameter ≤ B
    rng = np.random.default_rng(8)
    lon = 116.4 + rng.normal(0, 0.01, 500)
    lat = 39.9 + rng.normal(0, 0.01, 500)
    user = np.repeat(["a", "b"], 250)
    geoms, ids, st = regions_from_points(lon, lat, user, bound_km=1.0, knn=100)
    assert list(ids) == ["a", "b"] and st["beyond_knn"] == 300
    from dp.mechanisms.euler import _diameters
    mx = 111195.08 * np.cos(np.radians(39.9))
    local = shapely.transform(geoms, lambda c: c * [mx, 111195.08])
    assert (_diameters(local) <= 1000.0 * 1.001).all()


def test_true_count_touch_semantics():
    # 3.2: regions count when their interior meets the rectangle (touching a side is not
    # enough); a zero-area region counts on contact
    data = RegionData([shapely.box(0, 0, 1, 1), shapely.Point(2, 2),
                       shapely.LineString([(3, 0), (3, 1)])])
    assert data.true_count(dp.Rect(1, 0, 2, 1)) == 0          # shares an edge only
    assert data.true_count(dp.Rect(0.99, 0, 2, 1)) == 1
    assert data.true_count(dp.Rect(2, 2, 3, 3)) == 1          # point on the corner
    assert data.true_count(dp.Rect(2.5, 0, 3, 0.5)) == 1      # segment on the side
    assert data.true_counts([dp.Rect(-1, -1, 5, 5)] * 2).tolist() == [3, 3]
    assert data.true_count(dp.Rect(-1, -1, 5, 5), dp.Domain(0.5, 0.5, 1.5, 1.5)) == 1
    assert data.true_contained_counts(dp.Rect(-1, -1, 2.5, 2.5)).tolist() == [2]
    assert len(data.fingerprint) == 24 and data.degenerate.tolist() == [False, True, True]
    assert len(data.to_geojson()["features"]) == 3 and len(data.sample(2)) == 2


def test_interval_kind_and_empty_data(released):
    # 4.2: DiffPriv's interval from V(λ)(2p-1)(2q-1) (V ≤ 2λ², the spec's continuous value);
    # LP/Round report the same noise, around their own answer; empty data releases
    rect = dp.Rect(116.35, 39.85, 116.40, 39.90)
    diff = released.with_stage("diffpriv")
    lo, hi = diff.interval(rect)
    c = released.snap_cells(rect)[0]
    terms = (2 * (c[1] - c[0]) + 1) * (2 * (c[3] - c[2]) + 1)
    assert terms > 64
    V = float(discrete_laplace_variance(25.0))
    assert V < 2 * 25 ** 2
    assert diff.noise_variance(rect)[0] == pytest.approx(V * terms, rel=1e-12)
    assert (hi - lo) / 2 == pytest.approx(stats.norm.ppf(0.975) * math.sqrt(V * terms), rel=1e-9)
    rlo, rhi = released.interval(rect)
    assert (rhi - rlo) == pytest.approx(hi - lo) and rlo < released.answer(rect) < rhi
    # one cell (1 term) and a 2x2 block (9 terms): simulated quantile of the discrete noise sum,
    # checked against an independent simulation (quantile sd at 2e4 draws ≈ 1%, tolerance 4%)
    g = released.egrid
    for cells, k in (((3, 3, 4, 4), 1), ((3, 4, 4, 5), 9)):
        lo, hi = diff.interval(g.cell_rect(*cells))
        sims = discrete_laplace(np.random.default_rng(77), 25.0, (20000, k)).sum(1)
        assert (hi - lo) / 2 == pytest.approx(np.quantile(np.abs(sims), 0.95), rel=0.04)
    assert RegionData([]).kind == "regions" and dp.mechanisms()["euler"].data_kind == "regions"
    dom = dp.samples.BEIJING_20KM
    empty = dp.release("euler", RegionData([]), dom, 1.0, seed=0, params={"cells": 4})
    assert empty.violations() == {"C1": 0, "C2": 0, "C3": 0} and empty.sparse_data
    assert empty.ledger.total == pytest.approx(1.0)


def test_failed_post_processing_still_releases_what_was_paid_for(sample, monkeypatch):
    # the noisy counts are drawn (and charged) before LinProg runs; if HiGHS fails, the release
    # answers from DiffPriv instead of raising, so the spent ε is never lost with the error
    data, dom = sample
    def fail(*a, **k):
        raise RuntimeError("LinProg failed: HiGHS status 4 (test)")
    monkeypatch.setattr(eu, "linprog_lad", fail)
    rel = dp.release("euler", data, dom, 1.0, params={"cells": 10}, seed=np.random.default_rng(2))
    assert rel.stage == "diffpriv" and rel.ledger.total == pytest.approx(1.0)
    assert "HiGHS" in rel.diagnostics["post_processing_failed"]
    assert "post_processing_failed" not in json.dumps(rel.metadata(), default=str)


def test_every_stage_has_an_interval_that_covers_its_answers_on_the_default_sample():
    """LinProg and Round report the noise they were fitted from; on the built-in region sample
    (ε = 1, 200 rectangles of 4% of the area, 5 releases) their answers stay inside it."""
    data, dom = dp.load_region_sample("home_ranges_3k")
    rects = [dp.Rect(*r) for r in dp.random_workload(dom, 200, area_frac=0.04, rng=1)]
    stages = ("diffpriv", "linprog", "round")
    covered = {s: [] for s in stages}
    for seed in range(5):
        rel = dp.release("euler", data, dom, 1.0, seed=np.random.default_rng(seed))
        truth = np.array([data.true_count(rel.snap(r), dom) for r in rects])
        assert rel.capabilities.stages == stages
        for stage in stages:
            staged = rel.with_stage(stage)
            lo, hi = np.array([staged.interval(r) for r in rects]).T
            assert np.isfinite(lo).all() and np.isfinite(hi).all()
            covered[stage].append(np.mean((lo <= truth) & (truth <= hi)))
    # 1,000 intervals at 95%: fewer than 90% covered would be 7 binomial sd below the level
    assert all(min(v) >= 0.9 for v in covered.values()), covered


def test_noise_dominance_is_warned_from_released_values():
    data, dom = dp.load_region_sample("home_ranges_3k")
    noisy = dp.release("euler", data, dom, 1.0, seed=np.random.default_rng(1))
    warning = [w for w in noisy.warnings() if w.startswith("The noise dominates")]
    assert len(warning) == 1 and "4% of the area" in warning[0] and "Raise ε" in warning[0]
    clear = dp.release("euler", data, dom, 10.0, seed=np.random.default_rng(1))
    assert not any(w.startswith("The noise dominates") for w in clear.warnings())
