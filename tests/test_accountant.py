"""dp.Accountant: the dataset's total budget, its composition rule, refusals and storage."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import dp
from dp.accountant import epsilon_from_rho
from server.accounts import AccountStore


def test_basic_composition_and_zcdp_conversion_in_separate_lines():
    acc = dp.Accountant(total=10)
    assert acc.total == 10 and acc.spent == 0 and acc.remaining == 10 and acc.private
    acc.charge("a", epsilon=0.5)
    acc.charge("b", epsilon=1.25)
    assert acc.spent == pytest.approx(1.75) and acc.session_spent == 0   # ε add up (pure DP)
    # Bun & Steinke Prop. 1.3: ρ-zCDP => (ρ + 2 sqrt(ρ ln 1/δ), δ)-DP
    assert epsilon_from_rho(0.5, 1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), rel=1e-15)
    acc.charge("session 1", rho=0.02)
    acc.charge("session 2", rho=0.03)
    # sessions protect another unit (a user's location): their own line, ρ summed, converted once
    assert acc.session_spent == pytest.approx(epsilon_from_rho(0.05, 1e-6), rel=1e-12)
    assert acc.session_spent < epsilon_from_rho(0.02) + epsilon_from_rho(0.03)
    assert acc.spent == pytest.approx(1.75) and acc.remaining == pytest.approx(8.25)


def test_shifted_grids_are_charged_their_add_remove_equivalent(small):
    data, domain = small
    from dp.mechanisms import shifted_grids
    params = dp.mechanisms()["shifted_grids"].resolve_params({})
    m = shifted_grids.plan(domain, params)[1].m
    acc = dp.Accountant()
    acc.release("shifted_grids", data, domain, epsilon=1.0)
    # spec 001 section 1: presence-equivalent ε = m·ε/Δ with Δ = 4 (2 when m = 1)
    assert m > 1 and acc.spent == pytest.approx(m * 1.0 / 4)
    assert "add/remove equivalent" in acc.charges[0].note


def test_refuses_past_the_total_and_keeps_the_account_unchanged():
    acc = dp.Accountant(total=1.0)
    acc.charge("first", epsilon=0.6)
    with pytest.raises(dp.BudgetError, match=r"needs ε = 0.5 but only 0.4 of this dataset's total budget of 1"):
        acc.charge("second", epsilon=0.5)
    assert len(acc.charges) == 1 and acc.spent == pytest.approx(0.6)
    acc.charge("exactly the rest", epsilon=0.4)                  # up to the cap is allowed
    assert acc.remaining == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(dp.BudgetError, match="refused"):
        acc.check(epsilon=1e-6)
    acc.charge("a session", rho=1e-4)                            # sessions have their own line...
    with pytest.raises(dp.BudgetError, match="interactive sessions"):
        acc.charge("a big session", rho=5.0)                     # ...capped at the same total
    for bad in (dict(epsilon=-1), dict(epsilon=math.inf), dict()):
        with pytest.raises(dp.ParameterError):
            dp.Accountant().charge("bad", **bad)


def test_total_is_raised_only_upward_and_only_with_confirmation():
    acc = dp.Accountant()
    assert acc.total == dp.accountant.DEFAULT_TOTAL == 10
    with pytest.raises(dp.ParameterError, match="confirm"):
        acc.raise_total(12)
    with pytest.raises(dp.ParameterError, match="only be raised"):
        acc.raise_total(5, confirm=True)
    acc.raise_total(12, confirm=True)
    assert acc.total == 12
    with pytest.raises(dp.ParameterError):
        dp.Accountant(total=0)


def test_fresh_releases_cost_every_time_and_identical_demos_once(small):
    data, domain = small
    acc = dp.Accountant(total=3)
    r1 = acc.release("ug", data, domain, epsilon=1.0, ref="same")
    r2 = acc.release("ug", data, domain, epsilon=1.0, ref="same")   # fresh: a new draw, charged
    assert acc.spent == pytest.approx(2.0) and not np.array_equal(r1.counts, r2.counts)
    with pytest.raises(dp.BudgetError):
        acc.release("ug", data, domain, epsilon=1.5)
    assert acc.spent == pytest.approx(2.0)                          # refused before any draw
    d1 = acc.release("ug", data, domain, epsilon=0.5, seed=4)
    d2 = acc.release("ug", data, domain, epsilon=0.5, seed=4)
    np.testing.assert_array_equal(d1.counts, d2.counts)             # the same output...
    assert acc.spent == pytest.approx(2.5)                          # ...is paid for once
    assert not acc.private and not acc.charges[-1].private          # a demo voids the guarantee
    # the identity of a demo is built by the accountant, not taken from the caller: any other
    # input, or a Generator (a new draw each time), is charged again
    acc.release("ug", data, domain, epsilon=0.25, seed=4)
    acc.release("ug", data, domain, epsilon=0.125, seed=np.random.default_rng(4))
    acc.release("ug", data, domain, epsilon=0.125, seed=np.random.default_rng(4))
    assert acc.spent == pytest.approx(3.0)


def test_public_input_errors_cost_nothing_but_a_failure_after_the_draw_does(small, monkeypatch):
    data, domain = small
    acc = dp.Accountant()
    with pytest.raises(dp.ParameterError):
        acc.release("ug", data, domain, epsilon=1.0, params={"c": -1})
    with pytest.raises(dp.ParameterError):
        acc.release("nope", data, domain)
    assert acc.charges == []

    def fails(*args, **kwargs):
        raise dp.DataError("failed after reading the data")
    monkeypatch.setattr(dp.accountant, "release", fails)
    with pytest.raises(dp.DataError):
        acc.release("ug", data, domain, epsilon=0.7)
    assert acc.spent == pytest.approx(0.7)       # the failure itself could depend on the data


def test_account_round_trips_and_the_store_keeps_it(tmp_path):
    acc = dp.Accountant(total=4, delta=1e-7)
    acc.charge("r", epsilon=1.0, ref="cache-key")
    acc.charge("r", epsilon=1.0, ref="cache-key")                  # a caller's ref never skips one
    assert acc.spent == 2.0
    acc.charge("s", rho=0.1)
    back = dp.Accountant.from_dict(acc.to_dict())
    assert back.to_dict() == acc.to_dict() and back.spent == acc.spent
    store = AccountStore(tmp_path, key=b"server key")
    store.update("sid", "fp", lambda a: a.charge("x", epsilon=2.5))
    again = AccountStore(tmp_path, key=b"server key")   # a restarted server reads the same folder
    assert again.get("sid", "fp").spent == pytest.approx(2.5)
    assert again.get("other", "fp").spent == 0      # another browser: another account
    assert again.get("sid", "other data").spent == 0


def test_store_refusal_leaves_account_and_concurrent_charges_cannot_overspend(tmp_path):
    store = AccountStore(tmp_path, default_total=1.0)
    with pytest.raises(dp.BudgetError):
        store.update("s", "f", lambda a: a.charge("too much", epsilon=2))
    assert store.get("s", "f").charges == []
    results = []

    def spend():
        try:
            store.update("s", "f", lambda a: a.charge("half+", epsilon=0.6))
            results.append("ok")
        except dp.BudgetError:
            results.append("refused")
    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["ok"] + ["refused"] * 7
    assert store.get("s", "f").spent == pytest.approx(0.6)
    # the stored object is never the one handed out: changing a copy changes nothing
    copy = store.get("s", "f")
    copy.charge("local only", epsilon=0.1)
    assert store.get("s", "f").spent == pytest.approx(0.6)


def test_identical_key_sees_every_rectangle_of_a_long_workload():
    # two fixed-seed releases whose 400-rectangle workloads differ only in the middle are two
    # different outputs, so both are charged (numpy's abbreviated str() would have merged them)
    data, dom = dp.load_sample("small_city_5k")
    w = dp.queries.random_workload(dom, 400, area_frac=0.02, rng=np.random.default_rng(1))
    w2 = w.copy()
    w2[150:250] = dp.queries.random_workload(dom, 100, area_frac=0.03, rng=np.random.default_rng(2))
    acc = dp.Accountant(total=10)
    acc.release("dawa", data, dom, 1.0, seed=3, workload=w)
    acc.release("dawa", data, dom, 1.0, seed=3, workload=w2)
    assert acc.spent == pytest.approx(2.0)
    acc.release("dawa", data, dom, 1.0, seed=3, workload=w)        # the same again: free
    assert acc.spent == pytest.approx(2.0)
