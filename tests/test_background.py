"""Dash's background callbacks on the server's jobs (`server.background`): the evaluation, the
plan, the count of server files and the release run as jobs of the session that asked, report progress,
stop when cancelled with what they did so far, keep visitors to their bound and their lane,
and speak their refusals. Driven as a page drives them (`benchmarks/app_latency.Browser`, which
polls the jobs with their signed handles as the renderer does)."""
from __future__ import annotations

import re
import subprocess
import threading

import numpy as np
import pytest
from dash import no_update
from dash.exceptions import BackgroundCallbackError

import dp
from app import create_app
from components import controls, ids, mechanism_panel
from server import background, jobs, services, sessions, state, workspace
from server.faults import Unavailable
from helpers import endless_count, set_off_by, wait_until
from test_faults import Browser  # noqa: E402 (benchmarks/ is on the path through test_faults)
from app_latency import poll_body  # noqa: E402


def page(server, evaluation: dict | None = None, client=None) -> Browser:
    """A page of a new browser (or of `client`'s), opened and loaded, its evaluation set-up
    changed by `evaluation`."""
    b = Browser(client or server.test_client())
    b.open()
    b.load()
    for control, value in {ids.EVAL_EPSILONS: "0.5, 1", ids.EVAL_NQ: 50, ids.EVAL_REPS: 5,
                           ids.EVAL_RHO: 1, **(evaluation or {})}.items():
        b.comps[control]["value"] = value
    return b


def session_of(b: Browser) -> str:
    """The page's session id."""
    cookie = b.client.get_cookie(sessions.COOKIE).value
    with b.client.application.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={cookie}"}):
        return sessions.session_id()


def session_and_job(b: Browser) -> tuple[str, str]:
    """(the page's session id, the id of its last background job)."""
    return session_of(b), b.job["handles"]["job"].rpartition("~")[0]


def job_state(b: Browser, sid: str | None = None) -> dict | None:
    """The stored state of the page's last background job, as its session (or `sid`) sees it."""
    own, job = session_and_job(b)
    return services.current().jobs.status(job, sid or own)


@pytest.fixture()
def server():
    return create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"}).server


def test_an_evaluation_runs_as_a_job_and_its_progress_reaches_the_page(server):
    b = page(server)
    b.act(ids.EVAL_RUN, "n_clicks", 1)
    total = 3 * 2 * 3 * 5              # mechanisms x ε x sizes x repetitions
    assert b.comps[ids.EVAL_STATUS]["children"] == f"Done: {total} releases."
    shown = [p[f"{ids.EVAL_PROGRESS_TEXT}.children"] for p in b.progress]
    done = [int(re.match(rf"Running… (\d+) of {total} releases$", text).group(1)) for text in shown]
    assert done and done == sorted(done) and done[-1] <= total        # polled while it ran, in order
    assert b.comps[ids.EVAL_RESULTS]["hidden"] is False and b.comps[ids.EVAL_TABLE]["data"]


def test_a_cancelled_evaluation_stops_and_returns_what_it_did(server):
    b = page(server, {ids.EVAL_REPS: 50})
    b.poll_jobs = False
    b.act(ids.EVAL_RUN, "n_clicks", 1)
    wait_until(lambda: job_state(b)["progress"] is not None, timeout=60)
    b.act(ids.EVAL_CANCEL, "n_clicks", 1)          # Dash's cancel callback, the job's handle with it
    assert job_state(b)["cancelled"]
    b.finish()
    status = b.comps[ids.EVAL_STATUS]["children"]
    done, total = map(int, re.match(r"Cancelled after (\d+) of (\d+) releases; showing partial results",
                                    status).groups())
    assert 0 < done < total == 3 * 2 * 3 * 50
    rows = b.comps[ids.EVAL_SUMMARY]["data"]["rows"]
    assert rows and b.comps[ids.EVAL_RESULTS]["hidden"] is False     # the partial results, shown


def test_another_session_replaying_a_jobs_handles_gets_nothing(server):
    a, b = page(server), page(server)
    a.poll_jobs = False
    a.act(ids.EVAL_RUN, "n_clicks", 1)
    b.job, b.end_id = a.job, a.end_id              # B sends A's signed handles and page token
    answer = b.follow()                            # as for a job the store lost: no outputs, and
    assert set(answer) == {ids.SERVER_ALERT, ids.SERVER_ALERT_TEXT}      # the banner says so
    assert jobs.LOST in answer[ids.SERVER_ALERT_TEXT]["children"]
    wait_until(lambda: job_state(a)["finished"], timeout=60)
    assert job_state(a, sid="0" * 32) is None
    a.finish()
    assert a.comps[ids.EVAL_STATUS]["children"].startswith("Done")


def test_a_visitor_holds_at_most_its_share_of_jobs_and_is_told_so(server, monkeypatch):
    monkeypatch.setattr(jobs, "SESSION_JOBS", 1)
    b = page(server, {ids.EVAL_REPS: 50})
    b.poll_jobs = False
    b.act(ids.EVAL_RUN, "n_clicks", 1)
    first = b.job
    b.poll_jobs = True
    b.act(ids.EVAL_RUN, "n_clicks", 2)             # a second page of the same browser, say
    assert not b.comps[ids.SERVER_ALERT]["hidden"]     # told at its first poll
    assert jobs.BUSY in b.comps[ids.SERVER_ALERT_TEXT]["children"]
    b.job = first
    b.act(ids.EVAL_CANCEL, "n_clicks", 1)
    b.finish()
    assert b.comps[ids.EVAL_STATUS]["children"].startswith("Cancelled after")


def test_a_visitors_job_runs_in_a_process_of_the_background_lane(tmp_path):
    """With heavy workers, a visitor's background callback is pickled to the lowest-priority
    lane: the callback's body and its arguments travel there and its result back."""
    server = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "heavy_workers": 1,
                         "accounts_dir": str(tmp_path / "accounts")}).server
    try:
        b = page(server, {ids.EVAL_EPSILONS: "1", ids.EVAL_REPS: 1})
        b.act(ids.EVAL_RUN, "n_clicks", 1)
        assert b.comps[ids.EVAL_STATUS]["children"] == "Done: 9 releases."
        assert "background" in services.current().heavy.lanes()           # the lane was used
    finally:
        services.current().close()


def _refuses(_value):
    raise LookupError("the store is full")


def _breaks(_value):
    raise ValueError("a bug")


@pytest.mark.parametrize("body, error", [(_refuses, LookupError), (_breaks, ValueError)])
def test_a_jobs_error_is_raised_where_the_page_polls(server, body, error):
    """The callback's exception reaches the app's on_error at the poll that finds it finished
    (which shows a message-bearing one in words and lets a bug fail loudly, as in any
    callback), not only its text as Dash's managers keep it."""
    manager, client = background.JobsManager(b"k" * 32), server.test_client()
    client.get("/")
    cookie = {"Cookie": f"{sessions.COOKIE}={client.get_cookie(sessions.COOKIE).value}"}
    with server.test_request_context(headers=cookie):
        sid = sessions.session_id()
        key = manager.build_cache_key(body, [1], [], None)
        manager.call_job_fn(key, manager.make_job_fn(body, False), [1], {})
    wait_until(lambda: services.current().jobs.status(key, sid)["finished"])
    with server.test_request_context(headers=cookie):
        assert manager.job_running(key) is False
        assert "background_callback_error" in manager.get_result(key, key)
        assert isinstance(background.raised(BackgroundCallbackError("its text")), error)
        again = manager.get_result(key, key)                            # forgotten once read
        assert again["background_callback_error"]["msg"] == jobs.LOST


def test_a_poll_sends_nulls_and_only_a_background_callback_takes_them(server):
    b = page(server)
    b.poll_jobs = False
    b.act(ids.EVAL_RUN, "n_clicks", 1)
    args = f"?cacheKey={b.job['handles']['cacheKey']}&job={b.job['handles']['job']}"
    sent = b.client.post("/_dash-update-component" + args, json=b.job["body"])    # values not nulled
    assert sent.status_code == 400 and "should be null" in sent.get_data(as_text=True)
    other = next(d for d in b.deps if d["output"].startswith(f"..{ids.PAGES_CONTENT}."))
    body = {"output": other["output"], "changedPropIds": [],
            "outputs": [{"id": ids.PAGES_CONTENT, "property": "children"}, {"id": ids.PAGES_STORE, "property": "data"}],
            "inputs": [{"id": ids.PAGES_LOCATION, "property": "pathname", "value": None},
                       {"id": ids.PAGES_LOCATION, "property": "search", "value": None}], "state": []}
    refused = b.client.post("/_dash-update-component" + args, json=body)
    assert refused.status_code == 400                  # a plain callback's values are checked as ever
    b.finish()


def test_a_job_whose_worker_died_is_reported_lost_not_running_for_ever(server):
    """A worker killed (or replaced) while its job ran leaves the job's state unfinished in the
    shared store; the next poll, whichever worker answers, finds its process gone and says so."""
    b = page(server, {ids.EVAL_REPS: 50})
    b.poll_jobs = False
    b.act(ids.EVAL_RUN, "n_clicks", 1)
    wait_until(lambda: job_state(b)["progress"] is not None, timeout=60)
    dead = subprocess.Popen(["true"])
    dead.wait()
    key, store = jobs._key(*reversed(session_and_job(b))), services.current().store
    with store.lock(key):            # as if the job ran in that process, which is gone now
        store.set(key, {**store.get(key), "worker": (*jobs.this_process()[:3], dead.pid, "0")})
    b.finish()
    assert not b.comps[ids.SERVER_ALERT]["hidden"]
    assert jobs.LOST in b.comps[ids.SERVER_ALERT_TEXT]["children"]
    services.current().jobs.cancel_all()                              # the real job, still running
    services.current().jobs.stop_all()


def _refuse_to_load():
    raise TypeError("this cannot be read back")


class _Unloadable:
    """Pickles, but unpickling it fails (as an exception whose class takes other arguments)."""

    def __reduce__(self):
        return _refuse_to_load, ()


def test_an_exception_that_cannot_be_read_back_is_kept_as_its_text_only():
    """One that pickles but fails to unpickle would make the job's entry unreadable in every
    other process (each poll a 500); it is kept as text instead."""
    assert jobs._keepable(LookupError("full")).args == ("full",)
    broken = LookupError("full")
    broken.detail = _Unloadable()
    assert jobs._keepable(broken) is None


def test_only_the_machine_and_namespace_of_a_workers_process_can_call_it_gone():
    dead = subprocess.Popen(["true"])
    dead.wait()
    here = jobs.this_process()
    assert not jobs.gone(here)
    assert jobs.gone((*here[:3], dead.pid, here[4]))
    assert not jobs.gone(("another host", *here[1:3], dead.pid, here[4]))
    assert not jobs.gone((here[0], here[1], "pid:[1]", dead.pid, here[4]))    # another container
    assert not jobs.gone(None) and not jobs.gone(("old", 1, "x"))


def test_an_owners_count_never_waits_behind_its_evaluation(tmp_path):
    """Each kind of background callback has its own pool: with one job thread per role, the
    owner's saved counts open while its long evaluation holds that thread for the evaluations."""
    folder = tmp_path / "data"
    folder.mkdir()
    box = dp.Domain(-0.2, 51.4, 0.0, 51.6, name="Test box")
    rng = np.random.default_rng(5)
    (folder / "trips.csv").write_text("lon,lat\n" + "\n".join(
        f"{x},{y}" for x, y in zip(rng.uniform(-0.2, 0.0, 500), rng.uniform(51.4, 51.6, 500))))
    dp.aggregate(str(folder / "trips.csv"), box, 32).save(folder / "city.npz")
    server = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "owner_token": "t" * 32,
                         "data_dir": str(folder), "eval_workers": 1}).server
    client = server.test_client()
    client.get("/")
    assert client.get(f"/owner?token={'t' * 32}").status_code == 302
    b = page(server, {ids.EVAL_REPS: 50}, client)
    b.poll_jobs = False
    b.act(ids.EVAL_RUN, "n_clicks", 1)
    evaluation = b.job
    wait_until(lambda: job_state(b)["progress"] is not None, timeout=60)
    b.poll_jobs = True
    b.comps[ids.SERVER_PATH]["value"] = "city.npz"
    b.act(ids.SERVER_OPEN, "n_clicks", 1)
    assert "Loaded city.npz: 500 points counted" in str(b.comps[ids.UPLOAD_STATUS]["children"])
    b.job = evaluation
    assert not job_state(b)["finished"]                 # the evaluation was running all along
    b.act(ids.EVAL_CANCEL, "n_clicks", 1)
    b.finish()


def charges(b: Browser) -> int:
    """How many charges the page's session has on the account of the data it shows."""
    return len(state.account(session_of(b), b.comps[ids.DATASET]["data"]["fingerprint"]).charges)


def test_a_release_is_a_job_the_page_follows_to_its_result(server):
    """A Release click starts a job of the session (a background callback polled every
    RELEASE_POLL_MS) whose result the page shows; the click's charge is made once."""
    b = page(server)
    b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
    assert b.job is None and b.comps[ids.RELEASE]["data"]["key"]            # followed to its end
    assert str(b.comps[ids.RELEASE_STATUS]["children"]).count("Released") == 1
    assert charges(b) == 1


def test_a_release_cancelled_before_its_draw_charges_nothing(server, monkeypatch):
    """Cancel, while the release job has not drawn its noise yet, stops it there: the page says
    nothing was charged and the account has no charge. (The job is held just before that
    point until the page's cancel has reached the server.)"""
    b = page(server)
    b.poll_jobs = False
    running, cancelled, real = threading.Event(), threading.Event(), mechanism_panel.check_coverage

    def held(data, domain):
        running.set()
        assert cancelled.wait(30)
        real(data, domain)
    monkeypatch.setattr(mechanism_panel, "check_coverage", held)
    b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
    assert running.wait(30)                            # started (a queued one never runs at all)
    b.act(ids.RELEASE_CANCEL, "n_clicks", 1)           # Dash's cancel callback, the job's handle with it
    assert job_state(b)["cancelled"]
    cancelled.set()
    b.finish()
    assert mechanism_panel.CANCELLED in str(b.comps[ids.RELEASE_STATUS]["children"])
    assert charges(b) == 0


def test_a_visitors_release_is_never_refused_behind_its_evaluations(server, monkeypatch):
    """Visitors' bounds count jobs of one kind: a browser holding its share of evaluations still
    releases."""
    monkeypatch.setattr(jobs, "SESSION_JOBS", 1)
    b = page(server, {ids.EVAL_REPS: 50})
    b.poll_jobs = False
    b.act(ids.EVAL_RUN, "n_clicks", 1)
    evaluation = b.job
    b.poll_jobs = True
    b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
    assert "Released" in str(b.comps[ids.RELEASE_STATUS]["children"]) and charges(b) == 1
    assert b.comps[ids.SERVER_ALERT]["hidden"]
    b.job = evaluation
    b.act(ids.EVAL_CANCEL, "n_clicks", 1)
    b.finish()


def test_a_release_made_while_the_page_moved_to_other_data_or_box_is_kept_not_shown(server):
    """A click's release reaches the page only if the page still shows that data and box, read
    as they are when its result arrives (`take_release`): made for data or a box the page has
    left, it stays charged and recorded, and the page shows the release paid for of what it
    shows now (`show_release`: Dash may have dropped the call that moved it for this one)."""
    b = page(server)
    info, box, sid = b.comps[ids.DATASET]["data"], b.comps[ids.DOMAIN]["data"], session_of(b)
    settings = ("ug", 0.5, [], [], [], "fresh", None, None)
    controls_now = ("htf", 1.0, "fresh", None, None, True)     # mechanism, ε, seed mode, seed, link, link over
    with sessions.acting(False, sid):
        made = mechanism_panel.release_click(lambda _: None, {"id": "m" * 32}, info, box, *settings)
    assert mechanism_panel.take_release(made, info, box, None)[0]["key"] == made["summary"]["key"]
    other_box = controls.domain_store(dp.Domain(-74.1, 40.6, -73.8, 40.9, name="Elsewhere"))
    for now_info, now_box in (({**info, "fingerprint": "other data"}, box), (info, other_box), (None, box)):
        assert mechanism_panel.take_release(made, now_info, now_box, None) is None
    with sessions.acting(False, sid), set_off_by(f"{ids.RELEASE_MADE}.data"):
        shown = mechanism_panel.show_release(made, info, box, None, *controls_now)
        assert shown[0]["key"] == made["summary"]["key"] and "Released" in str(shown[1])
        assert shown[2:7] == (no_update,) * 5 and shown[7] is True        # the controls as they are
        elsewhere = mechanism_panel.show_release(made, info, other_box, made["summary"], *controls_now)
        assert elsewhere[0] is None and "Nothing released" in str(elsewhere[1])   # what that box has
        assert len(state.account(sid, info["fingerprint"]).charges) == 1
        assert workspace.latest(sid, info["fingerprint"], controls.domain_from_store(box))["mechanism"] == "ug"
    error = {"error": "a reason"}                 # words always reach the status line
    assert "a reason" in str(mechanism_panel.take_release(error, {**info, "fingerprint": "x"}, box, None)[1])


def test_a_visitors_release_runs_in_its_lane_not_the_background_lane(tmp_path):
    """A release is quick work: a visitor's runs in a job thread and its draw in the visitors'
    release lane of the heavy processes, never in the lowest-priority lane of evaluations."""
    server = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "heavy_workers": 1,
                         "accounts_dir": str(tmp_path / "accounts")}).server
    try:
        b = page(server)
        b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
        assert "Released" in str(b.comps[ids.RELEASE_STATUS]["children"])
        assert services.current().heavy.lanes() == {"visitor"}
    finally:
        services.current().close()


def test_a_job_the_store_cannot_start_says_why_at_the_first_poll(server, monkeypatch):
    """A job refused at its start for a reason of the moment (the shared store down) gets a
    handle carrying those words, and the page's banner says them at the first poll (Dash drops
    what on_error says while it starts a job); nothing is charged."""
    why = "the server's store is not answering (Redis is down or unreachable): nothing was charged"

    def down(*_args, **_kw):
        raise Unavailable(why)
    b = page(server)
    monkeypatch.setattr(jobs.Jobs, "start", down)
    b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
    assert not b.comps[ids.SERVER_ALERT]["hidden"] and why in b.comps[ids.SERVER_ALERT_TEXT]["children"]
    assert charges(b) == 0
    assert background.refusal(background.refused_handle(why)) == why
    assert background.refusal("refused-%%%") is None and background.refusal("a-job-id") is None


def test_a_store_failing_while_the_page_polls_is_said_and_the_job_taken_to_run_on(server, monkeypatch):
    """While the shared store fails, a poll cannot tell whether the job finished: the page is told
    in words that do not claim nothing was done, and Dash is told the job still runs (it would
    otherwise take it for cancelled and stop polling in silence)."""
    manager = background.JobsManager(b"k" * 32)

    def failing(*_args):
        raise Unavailable("the server's store is not answering")
    monkeypatch.setattr(jobs.Jobs, "status", failing)
    with server.test_request_context():
        assert manager.job_running("a-job") is True
        assert manager.get_progress("a-job") is None
        mark = manager.get_result("a-job", "a-job")
        assert mark["background_callback_error"]["msg"] == background.STORE_FAILED
        assert "nothing was charged" not in background.STORE_FAILED
        assert manager.get_result("a-job", None)["background_callback_error"]["msg"] == background.STORE_FAILED


def test_a_cancelled_plan_shows_the_mechanisms_it_planned(server):
    """Cancel stops the plan after the mechanism being planned; the page shows those planned."""
    b = page(server)
    b.poll_jobs = False
    b.act(ids.PLAN_RUN, "n_clicks", 1)
    wait_until(lambda: job_state(b)["progress"] is not None, timeout=120)
    b.act(ids.PLAN_CANCEL, "n_clicks", 1)
    assert job_state(b)["cancelled"]
    b.finish()
    done, total = map(int, re.match(r"Cancelled after (\d+) of (\d+) mechanisms: showing those planned",
                                    b.comps[ids.PLAN_STATUS]["children"]).groups())
    assert 0 < done < total


def test_a_cancelled_count_of_server_files_loads_nothing(tmp_path, monkeypatch):
    """Cancel stops a count of files on the server at its next progress step (a long count is
    stood in for by one that only reports progress until it is stopped): nothing is loaded and
    the data shown stays."""
    from components import server_files
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "trips.csv").write_text("lon,lat\n-0.1,51.5\n")
    monkeypatch.setattr(server_files, "count", endless_count)
    server = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "owner_token": "t" * 32,
                         "data_dir": str(folder)}).server
    client = server.test_client()
    client.get("/")
    assert client.get(f"/owner?token={'t' * 32}").status_code == 302
    b = page(server, client=client)
    shown = b.comps[ids.DATASET]["data"]
    b.poll_jobs = False
    b.comps[ids.SERVER_PATH]["value"] = "trips.csv"
    b.act(ids.SERVER_OPEN, "n_clicks", 1)
    wait_until(lambda: job_state(b)["progress"] is not None, timeout=60)
    b.act(ids.SERVER_CANCEL, "n_clicks", 1)
    b.finish()
    assert str(b.comps[ids.UPLOAD_STATUS]["children"]).count(server_files.CANCELLED) == 1
    assert b.comps[ids.DATASET]["data"] == shown


def test_a_job_ending_between_a_polls_two_reads_still_reaches_the_page(server, monkeypatch):
    """Dash reads a job's result and then whether it still runs, two reads of the store: a job
    that ends between them was taken for cancelled (204, the page stops polling and never shows
    the result: a release charged and never shown). The poll must answer "still running" so the
    next one brings the result. The job is made to end exactly between the two reads."""
    b = page(server)
    b.poll_jobs = False
    reads, real = [], jobs.Jobs.status

    def racing(self, job_id, owner):
        found = real(self, job_id, owner)
        reads.append(found and found["finished"])
        if len(reads) == 2 and not found["finished"]:        # get_result's read saw it running:
            hold.set()                                       # let it end before job_running reads
            wait_until(lambda: real(self, job_id, owner)["finished"], 30)
        return found
    hold, real_check = threading.Event(), mechanism_panel.check_coverage

    def held(data, domain):
        assert hold.wait(30)
        real_check(data, domain)
    monkeypatch.setattr(mechanism_panel, "check_coverage", held)
    b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
    monkeypatch.setattr(jobs.Jobs, "status", racing)
    first = b._post(b.job["dep"], poll_body(b.job["body"]),
                    {"endId": b.end_id, "cacheKey": b.job["handles"]["cacheKey"], "job": b.job["handles"]["job"]})
    assert reads[:2] == [False, False] and hold.is_set()     # progress, result: running; then it ended
    assert first is not None and "response" not in first     # "still running", not 204
    b.finish()
    assert str(b.comps[ids.RELEASE_STATUS]["children"]).count("Released") == 1
    assert charges(b) == 1
