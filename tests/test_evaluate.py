"""dp.evaluate: experiment runner, summaries and matrix expansion (small data, fast)."""
from pathlib import Path

import numpy as np
import pytest

import dp
from dp.evaluate import ROW_KEYS, evaluate, points_from_matrix, summarise, workloads
from dp.metrics import DEFAULT_RHO, bounded_relative_error
from dp.mechanisms.grid import P_WORKLOAD_SEED, tuning_workload

DOMAIN = dp.Domain(0, 0, 1, 1)
DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dpbench2d"
SMALL = {"grid_sizes": [4, 8, 16], "delta": 0.05, "tuning_queries": 20}
PARAMS = {"e2epriv": SMALL, "leaky": SMALL, "best_nonpriv": SMALL}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    M = rng.poisson(rng.gamma(0.5, 20, (16, 16)))
    return points_from_matrix(M, DOMAIN, seed=1)


def run(data, **kw):
    args = dict(mechanisms=["e2epriv", "ug", "best_nonpriv"], epsilons=[0.5, 1.0],
                area_fracs=[0.04, 0.25], n_queries=30, repetitions=3, seed=11, params=PARAMS)
    args.update(kw)
    return evaluate(data, DOMAIN, **args)


def test_rows_cover_the_full_design(data):
    rows = run(data)
    assert len(rows) == 3 * 2 * 2 * 3
    assert all(tuple(r) == ROW_KEYS for r in rows)
    assert {(r["mechanism"], r["epsilon"], r["area_frac"], r["rep"]) for r in rows} == {
        (m, e, a, k) for m in ("e2epriv", "ug", "best_nonpriv") for e in (0.5, 1.0)
        for a in (0.04, 0.25) for k in range(3)}
    assert all(r["n_queries"] == 30 and r["median_re"] >= 0 for r in rows)


def test_same_seed_same_rows_other_seed_other_noise(data):
    assert run(data) == run(data)
    a = [r["mean_abs_error"] for r in run(data, mechanisms=["ug"])]
    b = [r["mean_abs_error"] for r in run(data, mechanisms=["ug"], seed=12)]
    assert a != b


def test_repetitions_draw_fresh_noise(data):
    rows = run(data, mechanisms=["ug"], epsilons=[1.0], area_fracs=[0.04])
    assert len({r["mean_abs_error"] for r in rows}) == 3


def test_best_nonpriv_is_exact_on_aligned_data():
    # one point per cell of a 4x4 grid: cell-aligned answers are exact at g = 4, 8, 16
    data = points_from_matrix(np.ones((4, 4)), DOMAIN, seed=0)
    rows = evaluate(data, DOMAIN, ["best_nonpriv"], [1.0], [0.25], n_queries=10,
                    repetitions=1, params={"best_nonpriv": {"grid_sizes": [4], "delta": 0.1}})
    assert rows[0]["mean_abs_error"] < 1.0


def test_progress_called_after_each_release(data):
    calls = []
    run(data, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 36) for i in range(1, 37)]


def test_should_stop_returns_rows_so_far(data):
    n = []
    rows = run(data, progress=lambda done, total: n.append(done), should_stop=lambda: len(n) >= 5)
    assert len(rows) == 5
    assert run(data, should_stop=lambda: True) == []


def test_tuning_follows_the_evaluated_size_unless_fixed(data, monkeypatch):
    seen = []

    def spy(name, *args, params=None, **kw):
        seen.append((name, params.get("tuning_query_area")))
        return dp.release(name, *args, params=params, **kw)

    monkeypatch.setattr(dp.evaluate, "release", spy)
    run(data, mechanisms=["e2epriv", "ug"], epsilons=[1.0], repetitions=1)
    assert seen == [("e2epriv", 0.04), ("ug", None), ("e2epriv", 0.25), ("ug", None)]
    seen.clear()
    run(data, mechanisms=["e2epriv"], epsilons=[1.0], repetitions=1,
        params={"e2epriv": {**SMALL, "tuning_query_area": 0.04}})
    assert seen == [("e2epriv", 0.04), ("e2epriv", 0.04)]


def test_evaluation_workload_differs_from_tuning_workload():
    params = {"tuning_queries": 100, "tuning_query_area": 0.01,
              "workload_seed": P_WORKLOAD_SEED.default}
    ev = workloads(DOMAIN, [0.01], 100, seed=P_WORKLOAD_SEED.default)[0.01]
    assert ev.shape == (100, 4)
    assert not np.isclose(ev, tuning_workload(DOMAIN, params)).all(axis=1).any()
    np.testing.assert_allclose((ev[:, 2] - ev[:, 0]) * (ev[:, 3] - ev[:, 1]), 0.01)


def test_summarise_quantiles_and_pooled_numbers():
    rows = [{"mechanism": "m", "epsilon": 1.0, "area_frac": 0.01, "rep": i, "median_re": v,
             "mean_re": 2 * v, "median_re_sanity": v / 2, "median_abs_error": 4 * v,
             "mean_abs_error": 10 * v, "n_queries": 100, "n_inf": i % 2, "n_small": 30,
             "grid_size": 8}
            for i, v in enumerate([0.1, 0.2, 0.3, 0.4, 0.5])]
    rows.append({**rows[0], "mechanism": "other", "median_re": np.inf})
    s = summarise(rows)
    assert [g["mechanism"] for g in s] == ["m", "other"]
    m = s[0]
    assert (m["reps"], m["n_queries"], m["n_inf"], m["n_small"]) == (5, 500, 2, 150)
    assert m["median_re"] == pytest.approx(0.3)
    assert (m["q25_re"], m["q75_re"]) == pytest.approx((0.2, 0.4))
    assert m["mean_re"] == pytest.approx(0.6) and m["mean_abs_error"] == pytest.approx(3.0)
    assert m["median_re_sanity"] == pytest.approx(0.15)
    assert (m["q25_re_sanity"], m["q75_re_sanity"]) == pytest.approx((0.1, 0.2))
    assert (m["q25_abs_error"], m["median_abs_error"], m["q75_abs_error"]) == pytest.approx((0.8, 1.2, 1.6))
    assert s[1]["median_re"] == s[1]["q25_re"] == np.inf
    by_mech = summarise(rows, by=("mechanism",))
    assert [g["reps"] for g in by_mech] == [5, 1]


def test_points_from_matrix_rebins_exactly_small():
    M = np.arange(12).reshape(3, 4)
    pts = points_from_matrix(M, dp.Domain(10, 20, 12, 23), seed=5)
    assert pts.n == M.sum()
    np.testing.assert_array_equal(pts.histogram(dp.UniformGrid(dp.Domain(10, 20, 12, 23), 4, 3)), M)
    # row 0 is the south edge
    assert pts.y[pts.y < 21].size == M[0].sum()


def test_points_from_matrix_rejects_non_counts():
    with pytest.raises(dp.ParameterError):
        points_from_matrix(np.array([[1.5, 2.0]]), DOMAIN)
    with pytest.raises(dp.ParameterError):
        points_from_matrix(np.array([[-1.0, 2.0]]), DOMAIN)


def test_points_from_matrix_rebins_real_256_matrix_exactly():
    path = DATA_DIR / "cabspottingS_256_256.npy"
    if not path.exists():
        pytest.skip(f"real DPBench matrices not found at {DATA_DIR} (shared data checkout absent)")
    M = np.load(path)
    pts = points_from_matrix(M, DOMAIN, seed=0)
    np.testing.assert_array_equal(pts.histogram(dp.UniformGrid(DOMAIN, 256)), M)


def test_bounded_relative_error_worked_examples():
    # |est - true| / max(true, rho): 5 against an empty query at rho 20 is 5/20
    assert bounded_relative_error([5], [0], 20).tolist() == [0.25]
    assert bounded_relative_error([0, 90, 25, 13, 3], [0, 100, 20, 10, 0], 20).tolist() == \
        [0.0, 0.1, 0.25, 0.15, 0.15]
    assert bounded_relative_error([3, 7], [0, 10], rho=1).tolist() == [3.0, 0.3]
    assert bounded_relative_error([5], [0]).tolist() == [5 / DEFAULT_RHO] and DEFAULT_RHO == 20
    # the sanity-bounded relative_error is the same metric
    assert dp.metrics.relative_error([5, 130], [0, 100], sanity=20).tolist() == [0.25, 0.3]


def test_bounded_relative_error_never_infinite_on_empty_queries():
    est = np.random.default_rng(7).laplace(0, 1e6, 1000)
    out = bounded_relative_error(est, np.zeros(1000), 0.5)
    assert np.isfinite(out).all() and np.array_equal(out, np.abs(est) / 0.5)
    assert np.isinf(dp.metrics.relative_error([5], [0])).all()     # the unbounded RE is not


@pytest.mark.parametrize("rho", [0, -1, float("nan"), float("inf"), None, "twenty"])
def test_bounded_relative_error_refuses_a_bad_rho(rho):
    with pytest.raises(dp.ParameterError, match="ρ"):
        bounded_relative_error([1], [1], rho)


def test_evaluate_is_finite_where_most_queries_are_empty():
    # every point in the south-west cell of a 20x20 grid: most 1% queries hold none
    M = np.zeros((20, 20), dtype=int)
    M[0, 0] = 200
    data = points_from_matrix(M, DOMAIN, seed=2)
    rows = evaluate(data, DOMAIN, ["ug", "identity"], [1.0], [0.01], n_queries=50, repetitions=2,
                    seed=4, sanity=20)
    true = data.true_counts(workloads(DOMAIN, [0.01], 50, seed=4)[0.01], DOMAIN)
    assert (true == 0).mean() > 0.8
    assert all(r["n_small"] == int((true < 20).sum()) for r in rows)
    assert any(np.isinf(r["median_re"]) for r in rows)          # what the panel used to show
    for g in summarise(rows):
        vals = [g[k] for k in ("median_re_sanity", "q25_re_sanity", "q75_re_sanity",
                               "median_abs_error", "q25_abs_error", "q75_abs_error")]
        assert np.isfinite(vals).all() and g["q25_re_sanity"] <= g["median_re_sanity"] <= g["q75_re_sanity"]
