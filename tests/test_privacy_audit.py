"""Privacy of the released bytes (issue: sound noise and randomness).

Reproduces the audit's attacks (last bits of float Laplace, fixed seeds, exported dataset size)
and runs the stochastic privacy tester of `dp.testing.audit` over every registered private mechanism on
a neighbouring pair chosen to maximise influence. The tester is shown to have power: it fails
on the non-private reference and on planted bugs (halved noise, exact N used as public).
"""
import json

import numpy as np
import pytest
import shapely

import dp
from dp.testing import audit
from dp.mechanisms.base import ADD_REMOVE_POINT, UNITS
from dp.mechanisms.leaves import square_base_grid

BOX = dp.Domain(-0.10, 51.50, -0.08, 51.51)          # about 1.4 x 1.1 km, public


def _points(n, seed, centre=(0.3, 0.6), spread=0.12):
    """n points, half clustered near `centre` (fractions of the box), half uniform (fixed seed)."""
    rng = np.random.default_rng(seed)
    k = n // 2
    fx = np.concatenate([rng.normal(centre[0], spread, k), rng.uniform(0, 1, n - k)]).clip(0.001, 0.999)
    fy = np.concatenate([rng.normal(centre[1], spread, k), rng.uniform(0, 1, n - k)]).clip(0.001, 0.999)
    return BOX.west + fx * BOX.width, BOX.south + fy * BOX.height


def _at(fx, fy):
    return BOX.west + fx * BOX.width, BOX.south + fy * BOX.height


def _add(x, y, px, py):
    return dp.PointData(np.append(x, px), np.append(y, py))


def _focus(fx, fy, half=0.08):
    """Rectangles around (fx, fy): the given half-width and, nested, half and twice it (clipped
    to the box), so some answer moves with the neighbour whatever the structure."""
    out = []
    for h in (half / 2, half, 2 * half):
        lo = np.clip([fx - h, fy - h], 0, 1)
        hi = np.clip([fx + h, fy + h], 0, 1)
        out.append([BOX.west + lo[0] * BOX.width, BOX.south + lo[1] * BOX.height,
                    BOX.west + hi[0] * BOX.width, BOX.south + hi[1] * BOX.height])
    return np.array(out)


def _regions(n, seed):
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.15, 0.85, (n, 2))
    r = rng.uniform(0.01, 0.04, n)
    return [shapely.box(*_at(cx - rr, cy - rr), *_at(cx + rr, cy + rr)) for (cx, cy), rr in zip(c, r)]


SPOTS = {"dense spot": (0.3, 0.6),          # in the cluster: moves the structure most
         "empty corner": (0.97, 0.03),      # where nothing is: a split appears from nothing
         "box edge": (0.5, 0.0005),         # on the box's southern edge
         "cell boundary": (0.5, 0.5)}       # on a line of the 16 x 16 base grid (and its halvings)


def neighbour_pair(name, spot=SPOTS["dense spot"]):
    """(D, D', params, epsilon, focus rectangles) for one mechanism: D' differs from D by the
    mechanism's unit of privacy, placed at `spot` (fractions of the box)."""
    x, y = _points(300, 1)
    px, py = _at(*spot)
    add = lambda: _add(x, y, px, py)                      # noqa: E731
    rects = _focus(*spot)
    base = {"base_cells": 16}
    if name == "ug":      # the audit's pair: N = 1102 and 1103 straddle a grid-size change
        x2, y2 = _points(1102, 2)
        return dp.PointData(x2, y2), _add(x2, y2, px, py), {}, 1.0, rects
    if name == "shifted_grids":      # δ-neighbours: one point at the spot moves by less than δ
        x1 = x.copy(); y1 = y.copy()
        x1[0], y1[0] = px, py
        d2x = x1.copy()
        d2x[0] += 0.00099 if spot[0] < 0.5 else -0.00099     # about 70 m < δ = 100 m, inwards
        return (dp.PointData(x1, y1), dp.PointData(d2x, y1),
                {"delta_km": 0.1, "bins_per_side": 8, "m_max": 8}, 1.0, rects)
    if name == "bounded_grid":       # replace one point by one at the spot
        x2 = x.copy(); y2 = y.copy()
        x2[0], y2[0] = px, py
        return dp.PointData(x, y), dp.PointData(x2, y2), {"bins_per_side": 8}, 1.0, rects
    if name == "euler":              # add one user's region at the spot
        g = _regions(60, 3)
        lo = np.clip(np.array(spot) - 0.025, 0.001, 0.949)
        extra = shapely.box(*_at(*lo), *_at(*(lo + 0.05)))
        return (dp.RegionData(g), dp.RegionData(g + [extra]),
                {"cells": 6, "bound_km": 0.2}, 1.0, _focus(*(lo + 0.025), 0.1))
    params = {
        "identity": {"grid_size": 8}, "uniform": {},
        "e2epriv": {"grid_sizes": [2, 4, 8], "tuning_queries": 20, "delta": 0.05},
        "htf": dict(base, stop_count=5.0), "ag": base, "quadtree": base, "kdtree": base,
        "privtree": base, "full_quadtree": base, "adaptive": base,
        "dawa": base,
    }[name]
    return dp.PointData(x, y), add(), params, 1.0, rects


PRIVATE = sorted(dp.mechanisms(private_only=True))
PICK_RUNS = 500       # releases per dataset that pick the events of a thorough audit


PROBE = [_at(0.3, 0.6)]      # where the neighbours differ (the added or replaced point)


def _runner(name, data, params, eps, rects, probes=PROBE):
    return lambda rng: audit.release_features(
        dp.release(name, data, BOX, eps, params=params, seed=rng), rects, probes)


def _audit(name, runs, seed=0, spot="dense spot", **kw):
    d, d2, params, eps, rects = neighbour_pair(name, SPOTS[spot])
    probes = [_at(*SPOTS[spot])]
    return audit.audit(_runner(name, d, params, eps, rects, probes),
                       _runner(name, d2, params, eps, rects, probes), eps, runs, seed=seed, **kw)


# ------------------------------------------------------------------------- the tester itself
@pytest.mark.slow
@pytest.mark.parametrize("name", PRIVATE)
def test_stochastic_tester_passes_thorough(name):
    # 500 releases per dataset pick the events, 2,000 fresh ones test them: the claimed ε must
    # hold (a 300-run pass on other seeds was dropped: it found nothing this one misses). The
    # bound's width is set by the 2,000; picking on 500 instead of 2,000 gave the same lower
    # bounds on planted bugs (identity, noise scale / 1.3 and / 2, seeds 1-3: 1.137, 1.073, 1.120
    # against 1.137, 1.118, 1.120; 1.795, 1.808, 1.798 both ways; all caught) for 5/8 of the runs
    result = _audit(name, 2000, seed=1, pick_runs=PICK_RUNS)
    assert result.passed, f"{name}: {result}"


@pytest.mark.slow
@pytest.mark.parametrize("name", PRIVATE)
@pytest.mark.parametrize("spot", [s for s in SPOTS if s != "dense spot"])
def test_stochastic_tester_passes_at_other_spots(name, spot):
    # the neighbour where nothing is, on the box's edge and on a cell boundary: 300 + 300 runs
    result = _audit(name, 300, seed=2, spot=spot)
    assert result.passed, f"{name} at the {spot}: {result}"


FROM_COUNTS = sorted(k for k, s in dp.mechanisms(private_only=True).items()
                     if s.data_kind == "points" and not s.needs_points)


@pytest.mark.slow
@pytest.mark.parametrize("name", FROM_COUNTS)
def test_stochastic_tester_passes_on_counts(name):
    # the same neighbours counted on a fine grid first (dp.CountData, what dp.aggregate makes):
    # they differ by one in one cell, and the release from them must keep the claimed ε
    d, d2, params, eps, rects = neighbour_pair(name)
    grid = square_base_grid(BOX, 64)
    c, c2 = (dp.CountData(data.histogram(grid), BOX) for data in (d, d2))
    assert np.abs(c.counts - c2.counts).sum() == 1
    result = audit.audit(_runner(name, c, params, eps, rects), _runner(name, c2, params, eps, rects),
                         eps, 300)
    assert result.passed, f"{name} from counts: {result}"


@pytest.mark.slow
def test_tester_catches_a_non_private_reference():
    # BestNonPriv releases exact counts: the neighbour's count never occurs, the loss is infinite
    d, d2, _, eps, rects = neighbour_pair("identity")
    params = {"grid_sizes": [8], "tuning_queries": 5}
    result = audit.audit(_runner("best_nonpriv", d, params, eps, rects),
                         _runner("best_nonpriv", d2, params, eps, rects), eps, 200)
    assert not result.passed and result.loss_lower > 2 * eps


@pytest.mark.slow
def test_tester_catches_halved_noise(monkeypatch):
    # planted bug: identity's counts drawn at half the noise scale while ε is charged as usual
    real = dp.budget.count_noise
    monkeypatch.setattr(dp.budget, "count_noise", lambda rng, e, s=1, size=None: real(rng, 2 * e, s, size))
    result = _audit("identity", 600, pick_runs=150)      # events picked on a quarter as many
    assert not result.passed, str(result)


@pytest.mark.slow
def test_tester_catches_exact_n_as_public(monkeypatch):
    # planted bug: UG sizes its grid from the exact N (the audit's finding), N = 1102 vs 1103
    def exact(self, rng, n, epsilon, purpose):
        self.charge(f"noisy dataset size ({purpose})", epsilon, 1.0)
        return n
    monkeypatch.setattr(dp.Ledger, "noisy_size", exact)
    result = _audit("ug", 300)
    assert not result.passed and result.event.startswith("structure"), str(result)


# ------------------------------------------------------------------------- the audit's attacks
def test_attack1_float_laplace_last_bits_reproduced_and_gone():
    # Mironov 2012: with the old true + rng.laplace(...) in doubles, a share of the cells hold a
    # value that count + 1 cannot produce (infinite loss). The landed export holds integers only.
    data, domain = dp.load_sample("small_city_5k")
    rel = dp.release("identity", data, domain, 1.0, params={"grid_size": 64})
    true = data.histogram(rel.grid).ravel().astype(float)
    old = true + np.random.default_rng(7).laplace(0.0, 1.0, true.size)        # the old release
    assert audit.float_laplace_impossible(old, true, 1.0) > 0.5      # measured: 0.70
    counts = [f["properties"]["noisy_count"] for f in rel.to_geojson()["features"]]
    assert audit.integer_valued(counts) and all(isinstance(c, int) for c in counts)
    # every emitted value is in the support under the neighbour too (integer noise has full support)
    assert np.all(np.asarray(counts) - (true + 1) == np.rint(np.asarray(counts) - (true + 1)))


@pytest.mark.parametrize("name", ["identity", "uniform", "ug", "e2epriv", "privtree", "htf",
                                  "bounded_grid", "euler"])
def test_raw_noisy_counts_are_integers(name):
    # mechanisms that publish raw noisy counts publish integers; smoothed trees (quadtree,
    # kd-tree, AG) and averaged shifted grids publish post-processing of integer noisy counts
    d, _, params, eps, _ = neighbour_pair(name)
    rel = dp.release(name, d, BOX, eps, params=params)
    _, _, values = rel.regions()
    assert audit.integer_valued(values), name


def test_attack2_fixed_seed_is_labelled_and_fresh_seeds_are_unguessable():
    data, domain = dp.load_sample("small_city_5k")
    demo = dp.release("e2epriv", data, domain, 1.0, seed=1)
    again = dp.release("e2epriv", data, domain, 1.0, seed=1)
    assert np.array_equal(demo.counts, again.counts)         # reproducible, hence removable
    meta = demo.metadata()
    assert demo.reproducible_demo and not demo.private and meta["differentially_private"] is False
    assert "NOT private" in meta["reproducible_demo"]
    fresh = [dp.release("e2epriv", data, domain, 1.0) for _ in range(2)]
    assert all(r.private and not r.reproducible_demo for r in fresh)
    assert not np.array_equal(fresh[0].counts, fresh[1].counts)
    text = json.dumps(fresh[0].metadata(), default=str)
    assert "seed" not in text.replace("workload_seed", "")
    # the default generator is seeded from 128 bits of OS entropy, not a small integer
    ss = np.random.SeedSequence()
    assert int(ss.entropy).bit_length() > 64 and dp.noise.make_rng(None) is not None


def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


@pytest.mark.parametrize("name", PRIVATE)
def test_attack3_exports_carry_no_exact_dataset_size(name):
    d, _, params, eps, _ = neighbour_pair(name)
    rel = dp.release(name, d, BOX, eps, params=params, seed=np.random.default_rng(31))
    meta = rel.metadata()
    assert "dataset_size_public" not in meta
    # a released noisy size may equal N by chance (it is a private output); nothing else may
    noisy = meta.pop("noisy_dataset_size", None)
    assert noisy is None or noisy == rel.noisy_size
    n = d.n
    assert n not in set(_numbers(meta)), f"{name} exports the exact dataset size {n}"


def test_every_mechanism_states_its_unit_of_privacy():
    for name, spec in dp.mechanisms().items():
        assert spec.unit in UNITS
        if spec.private and spec.unit == ADD_REMOVE_POINT:
            assert "add/remove one point" in spec.guarantee or "adding or removing one point" in spec.guarantee
