"""Core API: domains, the ledger, parameter validation, every mechanism's budget and privacy flag,
what an export may contain, exact counts, noise samplers, intervals and workloads."""
from __future__ import annotations

import importlib
import json
import math

import numpy as np
import pytest
from scipy import stats

import dp
from helpers import all_keys
from dp.summed_area import box_sums, summed_area
from dp import metrics, noise
from dp.errors import BudgetError, ParameterError, PrivacyLeakWarning
from dp.queries import random_workload

UNIT = dp.Domain(0.0, 0.0, 1.0, 1.0)
SMALL_PARAMS = {"grid_sizes": [5, 10, 20], "delta": 0.05, "tuning_queries": 20}


def points(domain: dp.Domain, n: int, seed: int) -> dp.PointData:
    """Clustered points inside the domain (two blobs plus uniform background)."""
    rng = np.random.default_rng(seed)
    k = n // 3
    x = np.concatenate([rng.normal(0.3, 0.05, k), rng.normal(0.7, 0.1, k), rng.uniform(0, 1, n - 2 * k)])
    y = np.concatenate([rng.normal(0.6, 0.08, k), rng.normal(0.3, 0.05, k), rng.uniform(0, 1, n - 2 * k)])
    x = domain.west + np.clip(x, 0, 1) * domain.width
    y = domain.south + np.clip(y, 0, 1) * domain.height
    return dp.PointData(x, y)


@pytest.fixture(scope="module")
def data():
    return points(UNIT, 2000, seed=1)


POINT_MECHANISMS = sorted(n for n, s in dp.mechanisms().items() if s.data_kind == "points")


def params_for(name):
    if name == "identity":
        return {"grid_size": 32}
    return SMALL_PARAMS if name in ("e2epriv", "leaky", "best_nonpriv") else None


# -------------------------------------------------------------------------------- Domain
@pytest.mark.parametrize("bounds, words", [
    ((float("nan"), 0, 1, 1), "finite"),
    ((0, 0, float("inf"), 1), "finite"),
    (("0", 0, 1, 1), "finite"),
    ((1, 0, 1, 1), "west < east"),
    ((2, 0, 1, 1), "west < east"),
    ((-181, 0, 1, 1), "-180 <= west"),
    ((0, 0, 181, 1), "east <= 180"),
    ((0, 1, 1, 1), "south < north"),
    ((0, -91, 1, 1), "-90 <= south"),
    ((0, 0, 1, 90.5), "north <= 90"),
])
def test_domain_validation(bounds, words):
    with pytest.raises(ParameterError, match="domain") as exc:
        dp.Domain(*bounds)
    assert words in str(exc.value)


def test_domain_presets_are_valid_public_boxes():
    assert {"London", "Paris", "World", "Contiguous USA"} <= set(dp.PRESETS)
    for name, d in dp.PRESETS.items():
        assert d.name == name and not d.leaky
        assert d.width > 0 and d.height > 0
        assert dp.Domain.from_dict(d.to_dict()) == d
    usa = dp.PRESETS["Contiguous USA"]
    assert usa.bounds == (-125.5, 25.0, -65.5, 50.0)          # the Storage/Landmark box of spec 000
    w_m, h_m = dp.PRESETS["London"].size_m()
    # 0.5 degrees of longitude at 51.5 N is about 34.6 km; 0.3 degrees of latitude about 33.4 km
    assert w_m == pytest.approx(34_600, rel=0.01) and h_m == pytest.approx(33_360, rel=0.01)


def test_domain_contains_is_closed_and_projection_round_trips():
    d = dp.PRESETS["Paris"]
    assert d.contains([d.west, d.east, d.west - 1e-9], [d.south, d.north, d.south]).tolist() == [True, True, False]
    proj = dp.Projection(d)
    lon, lat = np.array([2.3, 2.4]), np.array([48.85, 48.9])
    back = proj.to_lonlat(*proj.to_metres(lon, lat))
    assert np.allclose(back, [lon, lat], atol=1e-12)


def test_uniform_grid_validation_and_boundaries():
    for bad in (0, -3, 2.5):
        with pytest.raises(ParameterError, match="positive integer"):
            dp.UniformGrid(UNIT, bad)
    grid = dp.UniformGrid(UNIT, 4)
    # half-open cells with the last row/column closed; points outside the domain are skipped (P12)
    H = grid.histogram([0.0, 0.25, 1.0, 1.0, 0.5, 1.01, -0.2], [0.0, 0.25, 1.0, 0.0, 0.999, 0.5, 0.5])
    assert H.sum() == 5
    assert H[0, 0] == 1 and H[1, 1] == 1 and H[3, 3] == 1 and H[0, 3] == 1 and H[3, 2] == 1


@pytest.mark.parametrize("box", [(-74.3, 40.5, -73.7, 40.95), (-0.3, -0.3, 0.7, 0.7)])
def test_histogram_equals_the_edge_rule_across_blocks_with_a_mask(box):
    """`histogram` bins in blocks of BIN_BLOCK points into reused arrays: over several blocks
    (the last one short) it must equal the edge rule (P12: cell k holds edges[k] <= v <
    edges[k + 1], the last closed) written with searchsorted, points on every line, just below
    them, outside, NaN and ±inf included, and with a mask it must count only the kept points.
    On the first box the scaled offset of a point on a line can fall a cell low, on the
    second a cell high: each of the two corrections is needed."""
    from dp.domain import BIN_BLOCK
    dom = dp.Domain(*box)
    grid = dp.UniformGrid(dom, 37, 23)
    rng = np.random.default_rng(5)
    n = 2 * BIN_BLOCK + 1234
    x = rng.uniform(dom.west - 0.1 * dom.width, dom.east + 0.1 * dom.width, n)
    y = rng.uniform(dom.south - 0.1 * dom.height, dom.north + 0.1 * dom.height, n)
    for v, edges in ((x, grid.edges_x), (y, grid.edges_y)):   # a third onto or just below lines
        on = rng.integers(0, n, n // 3)
        e = edges[rng.integers(0, edges.size, on.size)]
        v[on] = np.where(rng.random(on.size) < 0.5, e, np.nextafter(e, -np.inf))
    for v in (x, y):
        v[rng.integers(0, n, 50)], v[rng.integers(0, n, 50)], v[rng.integers(0, n, 50)] = np.nan, np.inf, -np.inf
    keep = rng.random(n) < 0.7

    def rule(v, edges):
        c = np.searchsorted(edges, v, side="right") - 1
        return np.where(v == edges[-1], edges.size - 2, c)
    k, j = rule(x, grid.edges_x), rule(y, grid.edges_y)
    inside = dom.contains(x, y)
    expected = np.zeros(grid.shape)
    np.add.at(expected, (j[inside & keep], k[inside & keep]), 1)
    assert np.array_equal(grid.histogram(x, y, keep), expected)
    assert grid.histogram(x, y).sum() == np.count_nonzero(inside)


# ------------------------------------------------------------------------ fit_to_data leak
def test_fit_to_data_warns_and_release_is_marked_leaky(data):
    with pytest.warns(PrivacyLeakWarning, match="no longer end-to-end differentially private"):
        dom = dp.fit_to_data(data.x, data.y)
    assert dom.leaky
    assert np.all(dom.contains(data.x, data.y))
    for name in ("identity", "e2epriv"):
        rel = dp.release(name, data, dom, 1.0, params=params_for(name), seed=np.random.default_rng(1))
        leaks = [e for e in rel.ledger if not e.private]
        assert len(leaks) == 1 and leaks[0].epsilon == 0 and leaks[0].noise == "none"
        assert "domain" in leaks[0].step
        assert rel.private is False and rel.ledger.private is False
        assert rel.metadata()["differentially_private"] is False
        assert rel.to_geojson()["properties"]["domain"]["leaky"] is True
        assert rel.ledger.total == pytest.approx(1.0)   # the charged steps still add up


def test_fit_to_data_empty():
    with pytest.raises(ParameterError, match="empty"):
        dp.fit_to_data([], [])


# ---------------------------------------------------------------------------------- Ledger
def test_ledger_sums_and_check():
    led = dp.Ledger()
    led.charge("a", 0.2, 1.0, "exponential")
    led.charge("b", 0.8, 1.0, "laplace", 1.25)
    assert led.total == pytest.approx(1.0) and len(led) == 2 and led.private
    led.check(1.0)
    with pytest.raises(BudgetError, match="ledger sums to 1.0 but the release was asked to spend 0.9"):
        led.check(0.9)
    with pytest.raises(BudgetError):
        led.check(1.0 + 1e-6)
    assert [e["step"] for e in led.to_list()] == ["a", "b"]


@pytest.mark.parametrize("eps", [0.0, -0.5, math.inf, math.nan])
def test_ledger_refuses_bad_charges(eps):
    with pytest.raises(BudgetError, match="positive, finite epsilon"):
        dp.Ledger().charge("step", eps, 1.0)


def test_ledger_leak_makes_it_non_private():
    led = dp.Ledger()
    led.charge("a", 1.0, 1.0)
    led.record_leak("peek", "looked at the data")
    assert not led.private and led.total == 1.0
    led.check(1.0)


# ------------------------------------------------------------------- release validation
@pytest.mark.parametrize("eps", [0, -1, math.nan, math.inf, -math.inf, "abc", None, [1.0]])
def test_release_rejects_bad_epsilon(data, eps):
    with pytest.raises(ParameterError, match="epsilon"):
        dp.release("identity", data, UNIT, eps)


@pytest.mark.parametrize("name, split, words", [
    ("e2epriv", (1.0,), "3 parts"),
    ("e2epriv", (0.2, 0.8), "3 parts"),
    ("e2epriv", (0.05, 0.5, 0.6), "sum to 1"),
    ("e2epriv", (0.0, 0.2, 0.8), "positive"),
    ("e2epriv", (0.05, -0.2, 1.15), "positive"),
    ("e2epriv", (0.05, math.nan, 0.95), "positive"),
    ("e2epriv", ("a", "b", "c"), "split"),
    ("e2epriv", (None, 0.2, 0.8), "split"),
    ("e2epriv", 0.2, "split"),
    ("e2epriv", {"counts": 1.0}, "missing"),
    ("identity", (0.5, 0.5), "1 parts"),
])
def test_release_rejects_bad_split(data, name, split, words):
    with pytest.raises(ParameterError, match="split|parts|fractions") as exc:
        dp.release(name, data, UNIT, 1.0, split=split, params=params_for(name))
    assert words in str(exc.value)


def test_release_accepts_split_dict(data):
    rel = dp.release("e2epriv", data, UNIT, 2.0, split={"dataset size": 0.05, "grid-size tuning": 0.2,
                                                        "counts": 0.75}, params=SMALL_PARAMS, seed=1)
    assert [e.epsilon for e in rel.ledger if e.private] == pytest.approx([0.1, 0.4, 1.5])


@pytest.mark.parametrize("name, params, words", [
    ("identity", {"grid_size": 0}, "Cells per side"),
    ("identity", {"grid_size": 2.5}, "expected int"),
    ("identity", {"grid_size": "many"}, "expected int"),
    ("identity", {"gridsize": 10}, "no parameter"),
    ("ug", {"c": -1}, "Constant c"),
    ("e2epriv", {"grid_sizes": []}, "grid sizes"),
    ("e2epriv", {"grid_sizes": [0, 10]}, "each item a number from 1 to 2,048, whole"),
    ("e2epriv", {"grid_sizes": "10, abc"}, "grid sizes"),
    ("e2epriv", {"delta": 0}, "δ"),
    ("e2epriv", {"delta": 1.5}, "δ"),
    ("e2epriv", {"tuning_query_area": 2.0}, "area"),
    ("e2epriv", {"tuning_queries": 0}, "|Q|"),
    ("e2epriv", {"variant": "median"}, "one of"),
    ("e2epriv", {"sens_mode": "resp"}, "no parameter"),
    ("leaky", {"variant": "rel"}, "no parameter"),
])
def test_release_rejects_bad_params(data, name, params, words):
    with pytest.raises(ParameterError) as exc:
        dp.release(name, data, UNIT, 1.0, params=params)
    assert words in str(exc.value)


@pytest.mark.parametrize("name", POINT_MECHANISMS)
def test_every_float_param_rejects_non_finite(data, name):
    spec = dp.mechanisms()[name]
    for p in spec.params:
        if p.kind is float:
            for bad in (math.nan, "nan", math.inf):
                with pytest.raises(ParameterError, match=p.label.split(" ")[0]):
                    dp.release(name, data, UNIT, 1.0, params={p.name: bad})


def test_bool_param_coercion():
    p = dp.Param("flag", bool, False, "Flag", "a switch")
    assert p.coerce("false") is False and p.coerce("True") is True
    assert p.coerce(True) is True and p.coerce(None) is False
    with pytest.raises(ParameterError, match="Flag"):
        p.coerce("maybe")


def test_release_rejects_unknown_mechanism_and_non_domain(data):
    with pytest.raises(ParameterError, match="unknown mechanism 'magic'"):
        dp.release("magic", data, UNIT, 1.0)
    with pytest.raises(ParameterError, match="dp.Domain"):
        dp.release("identity", data, (0, 0, 1, 1), 1.0)


def test_e2epriv_tiny_data_floors_rho_at_one():
    # with a noisy size the sanity bound is ρ = max(δ·N̂, 1): tiny uploads release (no refusal
    # after a draw, and no message that could reveal N)
    tiny = dp.PointData([0.1, 0.2, 0.3, 0.4, 0.5], [0.5] * 5)
    for variant in ("rel", "abs"):
        rel = dp.release("e2epriv", tiny, UNIT, 1.0, params={"delta": 0.1, "variant": variant},
                         seed=np.random.default_rng(1))
        assert rel.ledger.total == pytest.approx(1.0) and rel.private


# -------------------------------------------------------------- every registered mechanism
@pytest.mark.parametrize("name", POINT_MECHANISMS)
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.7])
def test_every_mechanism_ledger_and_privacy_flag(data, name, eps):
    spec = dp.mechanisms()[name]
    rel = dp.release(name, data, UNIT, eps, params=params_for(name), seed=np.random.default_rng(3))
    assert rel.mechanism == name and rel.spec is spec
    if name in ("leaky", "best_nonpriv"):
        assert spec.private is False and rel.private is False and rel.ledger.private is False
        assert name not in dp.mechanisms(private_only=True)
        assert "NOT" in spec.guarantee and rel.metadata()["differentially_private"] is False
        assert rel.ledger.total <= eps * (1 + 1e-9)
    else:
        assert spec.private and rel.private and rel.ledger.private
        assert name in dp.mechanisms(private_only=True)
        assert rel.ledger.total == pytest.approx(eps, rel=1e-9)
        rel.ledger.check(eps)
        assert all(e.epsilon > 0 and e.private for e in rel.ledger)
        assert sum(rel.split) == pytest.approx(1.0)
        if isinstance(rel, dp.GridRelease):   # grids: the last part is the Laplace counts
            assert rel.ledger.entries[-1].epsilon == pytest.approx(eps * rel.split[-1])
            assert rel.noise_scale == pytest.approx(rel.ledger.entries[-1].sensitivity / (eps * rel.split[-1]))


def test_same_seed_same_release_and_fresh_entropy_differs(data):
    a = dp.release("e2epriv", data, UNIT, 1.0, params=SMALL_PARAMS, seed=42)
    b = dp.release("e2epriv", data, UNIT, 1.0, params=SMALL_PARAMS, seed=42)
    c = dp.release("e2epriv", data, UNIT, 1.0, params=SMALL_PARAMS)
    assert np.array_equal(a.counts, b.counts)
    assert a.counts.shape != c.counts.shape or not np.array_equal(a.counts, c.counts)


# ---------------------------------------------------------------- what an export contains


@pytest.mark.parametrize("name", POINT_MECHANISMS)
def test_geojson_contains_no_true_counts_or_diagnostics(data, name):
    rel = dp.release(name, data, UNIT, 1.0, params=params_for(name), seed=5)
    gj = json.loads(rel.to_json())          # serialisable as JSON
    assert gj["type"] == "FeatureCollection"
    keys = {str(k).lower() for k in all_keys(gj)}
    assert not any("true" in k or "exact" in k for k in keys)
    # owner-only diagnostics (P18) never reach the export
    for secret in ("diagnostics", "scores", "sensitivities", "probabilities", "tuning_errors", "chosen"):
        assert secret not in keys
    grid, regions, counts = rel.regions()
    if isinstance(rel, dp.GridRelease):
        assert len(gj["features"]) == rel.grid.n_cells
        assert all(set(f["properties"]) == {"row", "col", "noisy_count", "people"} for f in gj["features"])
        exported = np.array([[f["properties"]["row"], f["properties"]["col"], f["properties"]["noisy_count"]]
                             for f in gj["features"]])
        assert np.array_equal(exported[:, 2],
                              rel.counts[exported[:, 0].astype(int), exported[:, 1].astype(int)])
    elif isinstance(rel, dp.LeafRelease):   # one feature per leaf, in leaf order
        assert [f["properties"]["noisy_count"] for f in gj["features"]] == pytest.approx(counts.tolist())
    if rel.spec.private and counts.size > 4:   # the released counts are not the true ones
        true = box_sums(summed_area(data.histogram(grid)), regions)   # (one noise draw may be 0)
        assert not np.allclose(counts, true)


def test_geojson_counts_are_true_counts_plus_data_independent_noise():
    # with the noise fixed by the seed, changing the data changes the export only by the change
    # in cell counts: the export is H + Y with Y independent of the data
    d1 = points(UNIT, 1500, seed=7)
    extra = points(UNIT, 300, seed=8)
    d2 = dp.PointData(np.concatenate([d1.x, extra.x]), np.concatenate([d1.y, extra.y]))
    r1 = dp.release("identity", d1, UNIT, 1.0, params={"grid_size": 12}, seed=9)
    r2 = dp.release("identity", d2, UNIT, 1.0, params={"grid_size": 12}, seed=9)
    c1 = np.array([f["properties"]["noisy_count"] for f in r1.to_geojson()["features"]])
    c2 = np.array([f["properties"]["noisy_count"] for f in r2.to_geojson()["features"]])
    dh = (d2.histogram(r2.grid) - d1.histogram(r1.grid)).ravel()
    assert np.allclose(c2 - c1, dh, atol=1e-9)
    assert not np.allclose(c1, d1.histogram(r1.grid).ravel())


def test_geojson_cell_geometry_tiles_the_domain():
    dom = dp.PRESETS["Paris"]
    rel = dp.release("identity", points(dom, 500, seed=1), dom, 1.0, params={"grid_size": 6}, seed=1)
    gj = rel.to_geojson()
    area = 0.0
    for f in gj["features"]:
        ring = np.array(f["geometry"]["coordinates"][0])
        assert ring.shape == (5, 2) and np.array_equal(ring[0], ring[-1])
        assert np.all((ring[:, 0] >= dom.west - 1e-12) & (ring[:, 0] <= dom.east + 1e-12))
        area += (ring[:, 0].max() - ring[:, 0].min()) * (ring[:, 1].max() - ring[:, 1].min())
    assert area == pytest.approx(dom.area, rel=1e-9)
    assert gj["properties"]["grid"] == {"cols": 6, "rows": 6}


# ---------------------------------------------------------------------------- exact counts
def _brute_force(x, y, r, domain=None):
    w, s, e, n = r
    if domain is None:
        return int(np.count_nonzero((x >= w) & (x < e) & (y >= s) & (y < n)))
    inside = domain.contains(x, y)
    w, s = max(w, domain.west), max(s, domain.south)
    right = (x <= domain.east) if e >= domain.east else (x < e)
    top = (y <= domain.north) if n >= domain.north else (y < n)
    return int(np.count_nonzero(inside & (x >= w) & right & (y >= s) & top))


def test_true_counts_match_brute_force():
    rng = np.random.default_rng(17)
    dom = dp.Domain(-1.0, -1.0, 1.0, 1.0)
    # coordinates on a 0.05 lattice (many ties with rectangle edges), some outside the domain
    x = np.round(rng.uniform(-1.2, 1.2, 3000) / 0.05) * 0.05
    y = np.round(rng.uniform(-1.2, 1.2, 3000) / 0.05) * 0.05
    data = dp.PointData(x, y)
    rects = []
    for _ in range(300):
        xs = np.sort(np.round(rng.uniform(-1.3, 1.3, 2) / 0.05) * 0.05)
        ys = np.sort(np.round(rng.uniform(-1.3, 1.3, 2) / 0.05) * 0.05)
        rects.append([xs[0], ys[0], xs[1], ys[1]])
    rects += [[-1, -1, 1, 1], [0.5, -1, 1, 1], [-5, -5, 5, 5], [2, 2, 3, 3], [0, 0, 0, 0]]
    rects = np.array(rects)
    assert data.true_counts(rects).tolist() == [_brute_force(x, y, r) for r in rects]
    assert data.true_counts(rects, dom).tolist() == [_brute_force(x, y, r, dom) for r in rects]
    assert data.true_count(dp.Rect(*rects[0]), dom) == _brute_force(x, y, rects[0], dom)
    # the whole domain holds every point inside it, including those on the east/north edges
    assert data.true_count(dp.Rect(-1, -1, 1, 1), dom) == int(dom.contains(x, y).sum())


# ---------------------------------------------------------------------------- noise draws
@pytest.mark.parametrize("a", [0.05, 0.2, 0.5, 1.0, 2.0])
def test_discrete_laplace_statistics(a):
    # exact sampler (CKS20 Algorithm 2) with scale 1/a: P(k) ∝ q^|k|, q = e^-a
    n = 200_000
    k = noise.discrete_laplace(np.random.default_rng(int(a * 10)), 1 / a, n)
    assert k.dtype == np.int64
    q = math.exp(-a)
    var = 2 * q / (1 - q) ** 2                 # variance of the discrete Laplace P(k) ∝ q^|k|
    assert float(noise.discrete_laplace_variance(1 / a)) == pytest.approx(var, rel=1e-12)
    # mean: s.e. sqrt(var/n), accept 4 s.e.
    assert abs(k.mean()) < 4 * math.sqrt(var / n) + 1e-12
    # variance: relative s.e. ~ sqrt((kurtosis - 1)/n) with kurtosis <= 6 (the Laplace limit); 4 s.e.
    assert k.var() == pytest.approx(var, rel=4 * math.sqrt(5 / n))
    # P(0) = (1-q)/(1+q): binomial s.e.
    p0 = (1 - q) / (1 + q)
    assert abs(np.mean(k == 0) - p0) < 4 * math.sqrt(p0 * (1 - p0) / n)
    # pmf shape: chi-square goodness of fit on |k| <= m (tail pooled), fixed seed
    m = max(1, int(np.ceil(4 / a)))
    cats = np.arange(-m, m + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(cats)
    obs = np.array([np.sum(k == c) for c in cats] + [np.sum(np.abs(k) > m)])
    exp = np.append(pmf, 1 - pmf.sum()) * n
    keep = exp > 5
    obs, exp = obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()
    assert stats.chisquare(obs, exp).pvalue > 0.001
    # the quantile used for intervals: P(|Z| <= h) >= level and P(|Z| <= h - 1) < level
    h = noise.discrete_laplace_quantile(1 / a, 0.95)
    cdf = lambda t: 1 - 2 * q ** (t + 1) / (1 + q)      # noqa: E731
    assert cdf(h) >= 0.95 and (h == 0 or cdf(h - 1) < 0.95)


def test_rational_scale_rounds_up_exactly():
    from fractions import Fraction
    for scale in (0.1, 1.0, 1 / 0.3, 2.5e-4, 1e9, 4 / 0.7):
        t, s = noise.rational_scale(scale)
        assert Fraction(t, s) >= Fraction(scale) and s & (s - 1) == 0
        assert Fraction(t, s) - Fraction(scale) <= Fraction(scale) * Fraction(1, 2 ** 29)


def test_bernoulli_guide_bounds_bracket_the_exact_value():
    # the float guide's integer bounds must contain exp(-num/den) 2^62 for every gamma,
    # including num, den near 2^62 and gamma around the fast-path limit 64 (80-digit decimals)
    from decimal import Decimal, localcontext
    rng = np.random.default_rng(17)
    num = np.concatenate([rng.integers(0, 1 << 62, 300), np.arange(0, 200), [63, 64, 65, 4095, 4096]])
    den = np.concatenate([rng.integers(1, 1 << 62, 300), np.full(200, 3), [1, 1, 1, 1, 1]])
    g = np.concatenate([rng.uniform(0, 70, 300)])
    num = np.concatenate([num, (g * 2 ** 40).astype(np.int64)])
    den = np.concatenate([den, np.full(300, 2 ** 40)])
    lo, hi = noise.guide_bounds(num, den)
    with localcontext() as ctx:
        ctx.prec = 80
        for a, b, l, h in zip(num.tolist(), den.tolist(), lo.tolist(), hi.tolist()):
            x = (-(Decimal(a) / Decimal(b))).exp() * (1 << 62)
            assert l <= x < h, (a, b)
            assert h - l <= (int(x) >> 38) + 3            # the window is narrow (2^-40 relative)


@pytest.mark.slow
def test_geometric_tail_is_not_truncated():
    # V = #{v >= 1: U < e^-v} has no upper limit: forcing U's first 62 bits to zero (U < 2^-62,
    # so V >= 42) hands every element to the exact lazy path, whose conditional mean is
    # 42 + e^-43 / (2^-62 (1 - e^-1)) (each v <= 42 counts surely, the rest with e^-v / 2^-62)
    class FirstDrawZero:
        def __init__(self):
            self.rng, self.first = np.random.default_rng(3), True

        def integers(self, *a, **k):
            out = self.rng.integers(*a, **k)
            if self.first:
                self.first = False
                return np.zeros_like(out)
            return out
    v = noise._geometric_exp1(FirstDrawZero(), 600)
    c = 2.0 ** -62
    mean = 42 + math.exp(-43) / (c * (1 - math.exp(-1)))
    sd = 1.2                                       # V - 42 is at most geometric-like: s.d. < 1.2
    assert v.min() >= 42 and v.max() > 44
    assert abs(v.mean() - mean) < 4 * sd / math.sqrt(v.size)


def test_exponential_mechanism_keeps_far_responses_possible():
    # a response 10^12 sensitivity units below the best has probability exp(-huge) > 0: decided
    # exactly with big integers (no cut-off), and never chosen in practice
    rng = np.random.default_rng(4)
    picks = [noise.exponential_mechanism(rng, [0.0, -1e12, -1.0], 2.0, 1.0)[0] for _ in range(2000)]
    counts = np.bincount(picks, minlength=3)
    p = noise.exponential_mechanism_probabilities([0.0, -1.0], 2.0, 1.0)
    assert counts[1] == 0 and abs(counts[0] / 2000 - p[0]) < 4 * math.sqrt(p[0] * p[1] / 2000)
    assert noise._bernoulli_exp_int(rng, 0, 3) and not noise._bernoulli_exp_int(rng, 1 << 70, 3)


def test_bernoulli_exp_is_exact_in_distribution():
    rng = np.random.default_rng(5)
    n = 200_000
    for num, den in ((0, 1), (1, 3), (1, 1), (7, 2), (5, 1)):
        b = noise.bernoulli_exp(rng, np.full(n, num), den)
        p = math.exp(-num / den)
        assert abs(b.mean() - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_discrete_gaussian_statistics():
    # CKS20 Algorithm 3 with sigma^2 = 20: P(k) ∝ exp(-k^2 / 40); variance just below sigma^2
    n, s2 = 200_000, 20
    z = noise.discrete_gaussian(np.random.default_rng(3), s2, n)
    ks = np.arange(-40, 41)
    w = np.exp(-ks ** 2 / (2 * s2))
    pmf = w / w.sum()
    var = float((pmf * ks ** 2).sum())
    assert abs(z.mean()) < 4 * math.sqrt(var / n)
    assert z.var() == pytest.approx(var, rel=4 * math.sqrt(2 / n))
    cats = np.arange(-12, 13)
    obs = np.array([np.sum(z == c) for c in cats] + [np.sum(np.abs(z) > 12)])
    exp = np.append(pmf[np.isin(ks, cats)], 1 - pmf[np.isin(ks, cats)].sum()) * n
    assert stats.chisquare(obs, exp).pvalue > 0.001
    g_vals, g = noise.gaussian_real(np.random.default_rng(1), np.zeros(50_000), 3.0)
    assert np.all(g_vals / g == np.rint(g_vals / g)) and g_vals.std() == pytest.approx(3.0, rel=0.03)
    for bad in (0, -1):
        with pytest.raises(ParameterError):
            noise.discrete_laplace(np.random.default_rng(0), bad)
        with pytest.raises(ParameterError):
            noise.count_noise(np.random.default_rng(0), bad)
    with pytest.raises(ParameterError):
        noise.discrete_gaussian(np.random.default_rng(0), 0)
    with pytest.raises(ParameterError):
        noise.exponential_mechanism_probabilities([1, 2], 1.0, [1, 0])


def test_discrete_gaussian_per_element_is_exact():
    # the per-element sampler: for mixed integer sigma2 in one call, each element follows
    # P(k) ~ exp(-k^2 / (2 sigma2)) (chi-square against the exact pmf) and large sigma2 give
    # variance sigma2 (within 5 standard errors sqrt(2/n))
    rng = np.random.default_rng(31)
    levels = np.array([1, 3, 40])
    s2 = np.repeat(levels, 40_000)
    rng.shuffle(s2)
    z = noise.discrete_gaussian(rng, s2)
    for v in levels:
        zz = z[s2 == v]
        k = np.arange(-12 * math.isqrt(v) - 12, 12 * math.isqrt(v) + 13)
        p = np.exp(-k.astype(float) ** 2 / (2 * v))
        p /= p.sum()
        obs = np.bincount(zz - k[0], minlength=k.size)
        keep = p * zz.size >= 5
        exp_ = np.append(p[keep] * zz.size, p[~keep].sum() * zz.size)
        got = np.append(obs[keep], obs[~keep].sum())
        assert stats.chisquare(got, exp_).pvalue > 1e-3
    big = np.array([2 ** 20, 3_000_001, 2 ** 22 - 1])
    n = 50_000
    z = noise.discrete_gaussian(rng, np.repeat(big, n)).reshape(3, n)
    assert np.all(np.abs(z.var(axis=1) / big - 1) < 5 * math.sqrt(2 / n))
    with pytest.raises(ParameterError):
        noise.discrete_gaussian(rng, [0])


@pytest.mark.slow   # 60,000 sampler calls
def test_exact_exponential_mechanism_frequencies():
    # the discretised exponential mechanism draws from softmax(ε k / (2(K+1))), k = floor(K u):
    # within the 1/K flooring of the ideal softmax(ε u / 2); 4 binomial s.e. per response
    rng = np.random.default_rng(8)
    u, eps, n = np.array([0.0, -1.0, -2.5, 0.4]), 2.0, 60_000
    counts = np.bincount([noise.exponential_mechanism(rng, u, eps, 1.0)[0] for _ in range(n)], minlength=4)
    K = noise.EM_GRANULARITY
    k = np.floor(u * K)
    w = np.exp(eps * (k - k.max()) / (2 * (K + 1)))
    p = w / w.sum()
    assert np.all(np.abs(counts / n - p) < 4 * np.sqrt(p * (1 - p) / n))


def test_make_rng_seeding():
    g = np.random.default_rng(1)
    assert noise.make_rng(g) is g
    assert noise.make_rng(5).random() == np.random.default_rng(5).random()
    # None: a fresh SeedSequence with 128 bits of OS entropy, different every call
    assert noise.make_rng(None).integers(1 << 62) != noise.make_rng(None).integers(1 << 62)


def test_fixed_seed_release_is_a_labelled_demo(data):
    demo = dp.release("identity", data, UNIT, 1.0, seed=7)
    assert demo.reproducible_demo and not demo.private
    assert [e.step for e in demo.ledger if not e.private] == ["fixed seed (reproducible demo)"]
    assert demo.ledger.total == pytest.approx(1.0)
    own = dp.release("identity", data, UNIT, 1.0, seed=np.random.default_rng(7))
    assert own.private and not own.reproducible_demo and "reproducible_demo" not in own.metadata()


# ------------------------------------------------------------------------------ intervals
@pytest.mark.slow
def test_interval_coverage_about_95_percent():
    # Each interval is answer ± the 95% quantile of |Σ α_i Y_i|; for queries with Agg = 0 (edges on
    # grid lines) the true count is the noise-free answer, so coverage should be 95%. For a query
    # with fractional α the interval covers the noise-free uniformity answer R at 95%.
    dom = UNIT
    data = points(dom, 3000, seed=21)
    g, eps, runs = 16, 0.5, 1500
    small = dp.Rect(0.25, 0.5, 0.375, 0.625)        # 2 x 2 cells: Monte Carlo quantile
    large = dp.Rect(0.125, 0.125, 0.75, 0.75)        # 10 x 10 cells: normal approximation
    frac = dp.Rect(0.21, 0.33, 0.47, 0.52)           # fractional α: Monte Carlo path
    grid = dp.UniformGrid(dom, g)
    H = data.histogram(grid)
    targets = {small: data.true_count(small, dom), large: data.true_count(large, dom),
               frac: float(dp.queries.grid_answers(grid, H, frac)[0])}
    assert targets[small] == dp.queries.grid_answers(grid, H, small)[0]
    hits = {r: 0 for r in targets}
    for s in range(runs):
        rel = dp.release("identity", data, dom, eps, params={"grid_size": g}, seed=s)
        for r, t in targets.items():
            lo, hi = rel.interval(r, n_sim=4000)
            hits[r] += lo <= t <= hi
    # coverage is Binomial(runs, 0.95)/runs with s.d. sqrt(0.95*0.05/runs) = 0.0056; accept 4 s.d.
    # (plus 0.01 for the Monte Carlo error of the quantile itself at n_sim = 4000)
    tol = 4 * math.sqrt(0.95 * 0.05 / runs) + 0.01
    for r, h in hits.items():
        assert abs(h / runs - 0.95) < tol, (r, h / runs)


def test_interval_and_noise_variance_formulas(data):
    rel = dp.release("identity", data, UNIT, 2.0, params={"grid_size": 10}, seed=1)
    whole = dp.Rect(0, 0, 1, 1)
    # Var = var(Z) Σ α_i^2 with var(Z) = 2q/(1-q)^2, q = e^-2, for the whole domain (100 cells)
    q = math.exp(-2.0)
    var = 2 * q / (1 - q) ** 2 * 100
    assert rel.noise_variance(whole)[0] == pytest.approx(var)
    lo, hi = rel.interval(whole)   # 100 cells: normal approximation
    assert (hi - lo) / 2 == pytest.approx(stats.norm.ppf(0.975) * math.sqrt(var), rel=1e-9)
    assert lo < rel.answer(whole) < hi
    best = dp.release("best_nonpriv", data, UNIT, 1.0, params=SMALL_PARAMS, seed=1)
    r = dp.Rect(0.2, 0.2, 0.4, 0.4)
    assert best.interval(r) == (best.answer(r), best.answer(r))
    assert rel.answer(dp.Rect(2, 2, 3, 3)) == 0.0           # outside the domain: no cells


def test_one_noise_term_has_its_exact_quantile_not_a_simulation():
    # one term w Z: P(|wZ| <= |w| h) = 1 - 2 q^(h+1)/(1+q) with h the least integer reaching the
    # level, whatever the seed (nothing is simulated)
    from dp.mechanisms.half_width import noise_half_width
    for scale, w in ((0.3, 1.0), (2.5, -0.4), (100.0, 0.25), (1000.0, 1.0)):
        q = math.exp(-1 / scale)
        cdf = lambda t: 1 - 2 * q ** (t + 1) / (1 + q)      # noqa: E731
        half = noise_half_width(1.0, ([0.0, w, 0.0], scale), 0.95, seed=0)
        h = half / abs(w)
        assert h == int(h) and cdf(h) >= 0.95 and (h == 0 or cdf(h - 1) < 0.95)
        assert noise_half_width(1.0, ([w], scale), 0.95, seed=7) == half


def test_simulated_half_widths_are_kept_per_release(data, monkeypatch):
    # a rectangle's simulated quantile is worked out once; a rectangle whose terms are the same
    # (|w|, scale) pairs in another order shares it, and the value is what the rule gives
    hw = importlib.import_module("dp.mechanisms.half_width")   # dp.mechanisms is also a function
    rel = dp.release("identity", data, UNIT, 1.0, params={"grid_size": 10}, seed=1)
    runs = []
    simulate = hw.laplace_sim
    monkeypatch.setattr(hw, "laplace_sim", lambda *a: runs.append(1) or simulate(*a))
    r = dp.Rect(0.21, 0.33, 0.47, 0.52)          # fractional edges: 3 x 4 cells, simulated
    mirrored = dp.Rect(1 - 0.47, 1 - 0.52, 1 - 0.21, 1 - 0.33)
    first = rel.interval(r)
    assert rel.interval(r) == first and len(runs) == 1
    w, scale = rel.noise_terms(mirrored)
    assert sorted(np.round(w, 12)) == sorted(np.round(rel.noise_terms(r)[0], 12))
    lo, hi = rel.interval(mirrored)
    assert len(runs) == 1 and hi - lo == pytest.approx(first[1] - first[0], rel=1e-9)
    whole_cell = dp.Rect(0.2, 0.2, 0.3, 0.3)     # one term: exact, nothing simulated
    rel.interval(whole_cell)
    assert len(runs) == 1
    w = np.sort(np.round(np.abs(rel.noise_terms(r)[0]), 12))
    expected = hw.noise_half_width(0.0, (w, np.full(w.size, scale)), 0.95)
    assert (first[1] - first[0]) / 2 == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------------------ workloads
@pytest.mark.parametrize("dom", [UNIT, dp.PRESETS["Contiguous USA"], dp.PRESETS["London"]])
@pytest.mark.parametrize("area", [0.01, 0.04, 0.25, 0.64, 1.0])
def test_random_workload_inside_domain_with_requested_area(dom, area):
    Q = random_workload(dom, 200, area_frac=area, rng=3)
    assert Q.shape == (200, 4)
    assert np.all(Q[:, 0] >= dom.west) and np.all(Q[:, 2] <= dom.east + 1e-9 * dom.width)
    assert np.all(Q[:, 1] >= dom.south) and np.all(Q[:, 3] <= dom.north + 1e-9 * dom.height)
    areas = (Q[:, 2] - Q[:, 0]) * (Q[:, 3] - Q[:, 1])
    assert np.allclose(areas / dom.area, area, rtol=1e-9)
    f = math.sqrt(area)   # side fractions f of the width AND the height (spec 000 5.2)
    assert np.allclose(Q[:, 2] - Q[:, 0], f * dom.width) and np.allclose(Q[:, 3] - Q[:, 1], f * dom.height)
    assert np.array_equal(Q, random_workload(dom, 200, side_frac=f, rng=3))
    if area < 0.5:   # lower-left corners spread over the whole allowed range
        assert np.ptp(Q[:, 0]) > 0.5 * (1 - f) * dom.width


def test_random_workload_errors():
    with pytest.raises(ParameterError, match="exactly one"):
        random_workload(UNIT, 5)
    with pytest.raises(ParameterError, match="exactly one"):
        random_workload(UNIT, 5, side_frac=0.1, area_frac=0.01)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ParameterError, match=r"\(0, 1\]"):
            random_workload(UNIT, 5, side_frac=bad)


def test_rect_validation_and_clip():
    with pytest.raises(ParameterError):
        dp.Rect(1, 0, 0, 1)
    with pytest.raises(ParameterError):
        dp.Rect(0, 0, math.nan, 1)
    assert dp.Rect(-1, -1, 0.5, 2).clip(UNIT) == dp.Rect(0, 0, 0.5, 1)
    assert dp.Rect(2, 2, 3, 3).clip(UNIT) is None


# -------------------------------------------------------------------------------- metrics
def test_relative_error_conventions():
    # spec 000 5.3: RE = |est - true| / true; true = 0 gives 0 if est = 0 else inf; optional sanity bound
    re = metrics.relative_error([10, 0, 5, 12], [8, 0, 0, 12])
    assert re.tolist() == [0.25, 0.0, math.inf, 0.0]
    assert metrics.relative_error([10, 5], [8, 0], sanity=4).tolist() == [0.25, 1.25]
    assert metrics.median_relative_error([10, 0, 5, 12], [8, 0, 0, 12]) == pytest.approx(0.125)
    assert metrics.absolute_error([1, -2], [3, 3]).tolist() == [2, 5]


@pytest.mark.parametrize("name", ["ug", "htf", "shifted_grids", "privtree"])
def test_wrong_data_kind_is_refused_at_the_boundary_naming_the_kinds(name):
    regions, domain = dp.load_region_sample("home_ranges_3k")
    with pytest.raises(dp.DataError, match=r"takes points data \(dp.load_points\), got regions data; "
                                           r"for regions use one of \['euler'\]"):
        dp.release(name, regions, domain, epsilon=1.0)


def test_points_given_to_the_region_mechanism_are_refused():
    data, domain = dp.load_sample("small_city_5k")
    with pytest.raises(dp.DataError, match=r"takes regions data \(dp.load_regions\), got points data"):
        dp.release("euler", data, domain, epsilon=1.0)
    with pytest.raises(dp.DataError, match="got a list"):
        dp.release("ug", [(0, 0)], domain, epsilon=1.0)


def test_import_dp_leaves_scipy_and_the_optional_parts_for_later():
    """Issue 43: `import dp` (every CLI call, every worker) imported scipy (its first import is
    a tenth of a second and more) and the interactive part; they now come on first use, and so
    does pyarrow (a loader's or `dp.aggregate`'s; `benchmarks/import_time.py` measures the time).
    The test instrumentation (`dp.testing`) is never imported by a release. `dp.aggregate` stays the function whatever
    was imported first (a lazy one became the module after an `import dp.aggregate`)."""
    import subprocess
    import sys
    code = ("import dp, sys; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'scipy', 'pyarrow', 'requests', 'duckdb', 'dash', 'flask'}), 'dp.interactive' in sys.modules, "
            "any(m.startswith('dp.testing') for m in sys.modules)); "
            "print(dp.interactive.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[] False False", "dp.interactive"]
    code = "import dp.aggregate, dp.interactive, dp; print(callable(dp.aggregate), dp.interactive.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "dp.interactive"]
