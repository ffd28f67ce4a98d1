"""The workspace on the server (`server.workspace`): one record per browser of what its page
shows, and spends that happen once per click whatever the number of requests carrying it.

Both store backends (the folder and Redis, as in test_store); the races use threads of this
process and a second process, as two gunicorn workers would race.
"""
from __future__ import annotations

import multiprocessing
import threading

import pytest

import dp
from helpers import new_sid
from server import releases, services, sessions, state, workspace
from test_store import config, redis_url  # noqa: F401  (fixtures: a store of each backend)

TILES = "http://127.0.0.1:9/{z}/{x}/{y}.png"


@pytest.fixture
def app_on(config, tmp_path):  # noqa: F811
    from app import create_app
    create_app({"tiles_url": TILES, "accounts_dir": str(tmp_path / "accounts"), **config})
    return {**config, "accounts_dir": str(tmp_path / "accounts")}


def release_once(sid: str, rid: str, info: dict, domain: dp.Domain) -> dict:
    """What the Release button's callback does with a click: one charged release per id."""
    def spend():
        key = releases.release_key(info["fingerprint"], domain, "ug", {}, [0.05, 0.95], 0.5, None)
        releases.release(sid, key, create=True)
        workspace.add_release(sid, {"key": key, "mechanism": "ug"})
        return {"key": key}
    return workspace.once(sid, rid, spend)


def test_the_same_request_id_charges_once_and_returns_the_first_result(app_on):
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    domain = state.sample("small_city_5k")[1]
    results = []
    threads = [threading.Thread(target=lambda: results.append(release_once(sid, "a" * 32, info, domain)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r["key"] for r in results}) == 1                  # four requests, one release
    assert len(state.account(sid, info["fingerprint"]).charges) == 1
    assert workspace.shown(sid)["key"] == results[0]["key"]
    other = release_once(sid, "b" * 32, info, domain)             # a new click: a new draw
    assert other["key"] != results[0]["key"]
    assert len(state.account(sid, info["fingerprint"]).charges) == 2
    assert workspace.latest(sid, info["fingerprint"], domain)["key"] == other["key"]


def _click_in_another_worker(config, sid, rid, replies):
    from app import create_app
    create_app({"tiles_url": TILES, **config})
    info = state.use_sample(sid, "small_city_5k")
    replies.put(release_once(sid, rid, info, state.sample("small_city_5k")[1]))


@pytest.mark.slow          # worker processes: the quick suite leaves it to the full one
def test_two_workers_given_the_same_click_charge_once(app_on):
    sid, rid = new_sid(), "c" * 32
    ctx = multiprocessing.get_context("spawn")
    replies = ctx.Queue()
    worker = ctx.Process(target=_click_in_another_worker, args=(app_on, sid, rid, replies))
    worker.start()
    info = state.use_sample(sid, "small_city_5k")
    here = release_once(sid, rid, info, state.sample("small_city_5k")[1])
    there = replies.get(timeout=120)
    worker.join(timeout=60)
    assert here == there
    assert len(state.account(sid, info["fingerprint"]).charges) == 1


@pytest.mark.parametrize("rid", [None, "", "short", "x" * 65, "a b c d e f g h", "ü" * 10, 12345678])
def test_a_request_without_a_valid_id_spends_nothing(app_on, rid):
    called = []
    with pytest.raises(LookupError, match="no valid request id"):
        workspace.once(new_sid(), rid, lambda: called.append(1) or {})
    assert not called


def test_a_page_load_shows_the_workspace_and_falls_back_when_an_upload_is_gone(app_on):
    sid = new_sid()
    fresh = workspace.page(sid, "small_city_5k")
    assert fresh["dataset"]["origin"] == "sample:small_city_5k" and fresh["release"] is None
    data = dp.PointData([-73.99, -73.98], [40.72, 40.73], name="mine.csv")
    info = state.put_upload(sid, data)
    workspace.use_dataset(sid, info)
    workspace.use_domain(sid, "__custom__", [-74.1, 40.6, -73.8, 40.9])
    workspace.add_release(sid, {"key": releases.release_key(info["fingerprint"], dp.Domain(-74.1, 40.6, -73.8, 40.9),
                                                         "ug", {}, [0.05, 0.95], 1.0, 1)})
    workspace.set_queries(sid, [[-74.0, 40.7, -73.9, 40.8]])
    page = workspace.page(sid, "small_city_5k")
    assert page["dataset"]["name"] == "mine.csv" and page["release"] is not None
    assert page["queries"] == [[-74.0, 40.7, -73.9, 40.8]]
    assert page["domain"] == {"preset": "__custom__", "box": [-74.1, 40.6, -73.8, 40.9]}
    assert workspace.page(new_sid(), "small_city_5k")["dataset"]["origin"].startswith("sample:")  # not another's
    services.current().store.delete(f"dataset:{sid}:{info['fingerprint']}")    # the upload expired
    gone = workspace.page(sid, "small_city_5k")
    assert gone["gone"] == "mine.csv" and gone["dataset"]["origin"] == "sample:small_city_5k"
    assert gone["release"] is None and gone["queries"] == []


def test_drawn_rectangles_come_back_after_a_reload_as_kept_ones(app_on):
    # issue 44: drawn rectangles vanished on reload (typed ones stayed). The drawing tool cannot
    # be given shapes back, so they return among the kept rectangles, once, after the typed ones
    sid = new_sid()
    workspace.page(sid, "small_city_5k")
    typed, drawn = [-0.2, 51.45, -0.1, 51.55], [[-0.3, 51.4, -0.25, 51.45], [0.0, 51.5, 0.1, 51.6]]
    workspace.set_queries(sid, [typed])
    workspace.set_drawn(sid, drawn)
    first = workspace.page(sid, "small_city_5k")
    assert first["queries"] == [typed, *drawn]
    assert workspace.get(sid)["drawn"] == [] and workspace.get(sid)["queries"] == [typed, *drawn]
    assert workspace.page(sid, "small_city_5k")["queries"] == [typed, *drawn]      # not twice
    workspace.set_drawn(sid, [[0.05, 51.4, 0.1, 51.45]])     # drawn after the reload: appended next time
    assert workspace.page(sid, "small_city_5k")["queries"] == [typed, *drawn, [0.05, 51.4, 0.1, 51.45]]


def test_every_sample_is_known_to_a_process_that_never_made_it(app_on):
    """A worker asked for a sample's data by fingerprint makes the samples it lacks (they are
    built from fixed seeds, so their fingerprints agree in every process)."""
    from dp.samples import REGION_SAMPLES
    name = next(iter(REGION_SAMPLES))
    fingerprint = state.sample(name)[0].fingerprint
    state._samples.pop(name)
    state._sample_by_fp.pop(fingerprint)
    assert state.points(new_sid(), fingerprint).fingerprint == fingerprint


def test_a_request_whose_first_run_failed_half_way_is_never_run_again(app_on):
    """A first run that died after it may have charged leaves its mark: the same click again
    gets an error, not a second draw."""
    sid, runs = new_sid(), []

    def dies_after_charging():
        runs.append("first")
        raise RuntimeError("the process died after charging")
    with pytest.raises(RuntimeError):
        workspace.once(sid, "d" * 32, dies_after_charging)
    again = workspace.once(sid, "d" * 32, lambda: runs.append("second") or {"summary": {}})
    assert runs == ["first"] and "ledger shows whether it was charged" in again["error"]


def test_a_paid_release_whose_record_was_lost_is_shown_on_the_next_load(app_on):
    """Issue 41, item 9: a worker stopped between a release's charge and its workspace record
    left the paid release in the store but not on the page, which offered the previous one as
    the last paid for. The next page load finds it from the account's charges and records it;
    another session's release of the same data is never taken."""
    from components import controls, mechanism_panel
    sid, other = new_sid(), new_sid()
    info = state.use_sample(sid, "small_city_5k")
    domain = state.sample("small_city_5k")[1]
    first = release_once(sid, "d" * 32, info, domain)["key"]
    lost = releases.release_key(info["fingerprint"], domain, "ug", {}, [0.2, 0.8], 0.4, None)
    releases.release(sid, lost, create=True)                 # charged and stored; no record made
    state.use_sample(other, "small_city_5k")
    assert workspace.latest(sid, info["fingerprint"], domain)["key"] == first
    rec, status = mechanism_panel.paid_release(sid, info, controls.domain_store(domain))
    assert rec["key"] == lost and rec["mechanism"] == "ug" and rec["epsilon"] == 0.4
    assert rec["seed"] is None and rec["split"] == [0.2, 0.8]
    assert "already paid for" in str(status)
    assert workspace.shown(sid)["key"] == lost
    assert len(state.account(sid, info["fingerprint"]).charges) == 2     # nothing new charged
    # another session of the same data: nothing of this one's
    assert mechanism_panel.paid_release(other, info, controls.domain_store(domain))[0] is None
    assert workspace.latest(other, info["fingerprint"], domain) is None


def test_the_release_callbacks_are_functions_a_test_calls(app_on):
    """The release callbacks without Dash: a click spends once per request id (a second call
    with the same id returns the first result, nothing more charged); a page load shows the
    release paid for and sets the controls to its settings, spending nothing; a link's first
    view shows only a release made with the link's settings and leaves the controls the link
    filled in."""
    from dash import no_update

    from components import controls, mechanism_panel
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    box = controls.domain_store(state.sample("small_city_5k")[1])
    settings = ("ug", 0.5, [], [], [], "fresh", None, None)
    steps = []
    with sessions.acting(False, sid):
        made = mechanism_panel.release_click(steps.append, {"id": "e" * 32}, info, box, *settings)
        assert steps == [mechanism_panel.RELEASING]
        first = mechanism_panel.take_release(made, info, box, None)
        assert first[0]["mechanism"] == "ug" and first[0]["epsilon"] == 0.5 and first[-1] is True
        assert "Released" in str(first[1]) and len(first) == 3
        again = mechanism_panel.release_click(steps.append, {"id": "e" * 32}, info, box, *settings)
        assert again["summary"]["key"] == first[0]["key"]
        assert len(state.account(sid, info["fingerprint"]).charges) == 1
        shown = mechanism_panel.shown_release(info, box, "htf", 1.0, "fresh", None, None, True)
        assert shown[0]["key"] == first[0]["key"] and shown[2] == "ug" and shown[3] == 0.5
        from components import share                            # a link's first view: not that release
        link = share.to_query("htf", 2.0, dp.mechanisms()["htf"].default_split, {}, state.sample("small_city_5k")[1])
        on_link = mechanism_panel.shown_release(info, box, "htf", 2.0, "fresh", None, link, False)
        assert on_link[0] is None and on_link[2:7] == (no_update,) * 5 and on_link[-1] is False
    assert len(state.account(sid, info["fingerprint"]).charges) == 1      # nothing spent on loads
