"""Two browser sessions against one server: neither can read, hit or time the other's entries.

Each test client is a browser with its own cookie jar. Session A uploads, releases and evaluates;
session B then forges requests naming A's release key and A's evaluation, as an attacker who
guessed them would. Every cache read B causes is recorded: none touches A's namespace, so B's
answers (and their timing) are those of a key that never existed.
"""
from __future__ import annotations

import json
import math
import pickle
from urllib.parse import urlencode

import pytest

import dp
from app import create_app
from components import evaluation_panel, ids
from server import file_store, jobs, live, releases, services, sessions, state, store, workspace
from helpers import new_sid, wait_until
from test_faults import Browser  # noqa: E402 (benchmarks/ is on the path through test_faults)
from app_latency import poll_body  # noqa: E402

CSV = b"lon,lat\n-0.12,51.50\n-0.10,51.51\n-0.13,51.49\n-0.11,51.52\n"


@pytest.fixture()
def server():
    return create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"}).server


def browser(server):
    """A test client that has loaded the page, and so holds its own session cookie."""
    client = server.test_client()
    assert client.get("/").status_code == 200
    cookie = client.get_cookie(sessions.COOKIE)
    assert cookie is not None and cookie.http_only and cookie.same_site == "Lax"
    with server.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={cookie.value}"}):
        return client, sessions.session_id()


def post(client, output: str, outputs: list, inputs: list):
    """Call one Dash callback the way the page does."""
    body = {"output": output, "outputs": outputs, "inputs": inputs, "state": [],
            "changedPropIds": [f"{i['id']}.{i['property']}" for i in inputs]}
    return client.post("/_dash-update-component", json=body)


def ledger_request(client, rinfo):
    outs = [{"id": ids.LEDGER_TABLE, "property": "data"}, {"id": ids.LEDGER_TOTAL, "property": "children"},
            {"id": ids.LEDGER_GUARANTEE, "property": "children"}]
    name = f"..{ids.LEDGER_TABLE}.data...{ids.LEDGER_TOTAL}.children...{ids.LEDGER_GUARANTEE}.children.."
    return post(client, name, outs, [{"id": ids.RELEASE, "property": "data", "value": rinfo}])


def start_evaluation(client) -> Browser:
    """A page of this browser that started a small evaluation of the default sample (its job's
    signed handles in `.job`), not yet polled."""
    page = Browser(client)
    page.open()
    page.load()
    for control, value in ((ids.EVAL_EPSILONS, "1"), (ids.EVAL_NQ, 10), (ids.EVAL_REPS, 1), (ids.EVAL_RHO, 1)):
        page.comps[control]["value"] = value
    page.poll_jobs = False
    page.act(ids.EVAL_RUN, "n_clicks", 1)
    return page


def poll_request(client, page: Browser):
    """A poll of `page`'s evaluation job, with its handles, sent from `client`."""
    args = urlencode({"endId": page.end_id, **{k: page.job["handles"][k] for k in ("cacheKey", "job")}})
    return client.post(f"/_dash-update-component?{args}", json=poll_body(page.job["body"]))


@pytest.fixture()
def recorder(monkeypatch):
    """Every key read from the server cache, with whether it was a hit."""
    reads = []
    real_get = services.current().store.get

    def get(key):
        value = real_get(key)
        reads.append((key, value is not None))
        return value
    monkeypatch.setattr(services.current().store, "get", get)
    return reads


def test_sessions_get_distinct_http_only_cookies(server):
    (_, a), (_, b) = browser(server), browser(server)
    assert a != b and len(a) == 32


def test_forged_keys_reach_only_the_forgers_own_entries(server, recorder):
    (client_a, a), (client_b, b) = browser(server), browser(server)
    data = dp.load_points(CSV, name="mine.csv")
    fp = state.put_upload(a, data)["fingerprint"]
    domain = dp.PRESETS["London"]
    fresh = releases.release_key(fp, domain, "ug", {}, [0.05, 0.95], 1.0, None)
    demo = releases.release_key(fp, domain, "ug", {}, [0.05, 0.95], 1.0, 7)
    releases.release(a, fresh, create=True)
    releases.release(a, demo, create=True)
    page_a = start_evaluation(client_a)                  # A's evaluation: a job of A's session
    job = page_a.job["handles"]["job"].rpartition("~")[0]
    wait_until(lambda: services.current().jobs.status(job, a)["finished"])   # A's job thread reads no more

    # A sees its own release through the page's callbacks
    own = ledger_request(client_a, {"key": fresh})
    assert own.status_code == 200 and "This release" in own.get_data(as_text=True)
    recorder.clear()
    unused = {"fresh": releases.release_key(fp, domain, "ug", {}, [0.05, 0.95], 1.0, None),
              "demo": releases.release_key(fp, domain, "ug", {}, [0.05, 0.95], 1.0, 8)}  # keys nobody used
    answers = {}
    for label, key in (("fresh", fresh), ("demo", demo), ("unused fresh", unused["fresh"]),
                       ("unused demo", unused["demo"])):
        answers[label] = ledger_request(client_b, {"key": key}).get_data(as_text=True)
    # B's answer for A's releases is exactly its answer for keys that never existed
    assert answers["fresh"] == answers["unused fresh"] and answers["demo"] == answers["unused demo"]
    assert "no longer on the server" in answers["demo"]   # B cannot rebuild A's demo either
    assert "This release" not in "".join(answers.values())
    b_poll = poll_request(client_b, page_a)              # A's job handles, replayed by B: nothing of
    assert b_poll.status_code == 200 and jobs.LOST in b_poll.get_data(as_text=True)   # A's job, as for
    assert ids.EVAL_SUMMARY not in b_poll.get_data(as_text=True)    # a job the store lost
    assert services.current().jobs.status(job, b) is None
    with pytest.raises(LookupError):
        state.points(b, fp)
    b_reads = list(recorder)
    assert services.current().jobs.status(job, a) is not None          # still there for A, who gets it
    assert "Done" in json.dumps(poll_request(client_a, page_a).get_json())
    assert services.current().accounts.get(b, state.account_key(data)).spent == 0 and state.account(a, fp).spent == pytest.approx(2.0)
    # every cache read B caused stayed in B's namespace: no hit, no miss, no timing on A's entries
    assert b_reads and all(f":{a}:" not in key for key, _ in b_reads), [k for k, _ in b_reads if f":{a}:" in k]
    assert not any(hit for _, hit in b_reads)


def test_evaluation_results_are_cached_per_session():
    a, b = "a" * 32, "b" * 32
    cfg = {"fp": "x", "mechs": ["ug"]}
    key_a = evaluation_panel.eval_cache_key(a, cfg)
    assert key_a != evaluation_panel.eval_cache_key(b, cfg) and f":{a}:" in key_a


def test_a_reload_continues_the_same_account(server):
    client, sid = browser(server)
    data, _ = state.sample("small_city_5k")
    services.current().accounts.update(sid, data.fingerprint, lambda acc: acc.charge("r", epsilon=1.5))
    assert client.get("/").status_code == 200            # the reload sends the same cookie
    assert client.get_cookie(sessions.COOKIE) is not None
    with server.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={client.get_cookie(sessions.COOKIE).value}"}):
        assert sessions.session_id() == sid
        assert state.account(sessions.session_id(), data.fingerprint).spent == pytest.approx(1.5)


@pytest.mark.parametrize("forged", ["a" * 24, "é" * 32, "x" * 32 + "." + "0" * 32, ""])
def test_a_cookie_the_server_did_not_issue_is_replaced(server, forged):
    client = server.test_client()
    client.set_cookie(sessions.COOKIE, forged)
    client.get("/")
    issued = client.get_cookie(sessions.COOKIE).value
    assert issued != forged and sessions.TOKEN_SHAPE.fullmatch(issued)
    with server.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={forged}"}):
        one = sessions.session_id()
    with server.test_request_context(headers={"Cookie": f"{sessions.COOKIE}={forged}"}):
        assert sessions.session_id() != one          # an unsigned cookie never names a session


def test_one_session_filling_the_cache_evicts_only_its_own_entries(server):
    (_, a), (_, b) = browser(server), browser(server)
    services.current().store.set(f"release:{a}:mine", "A's release")
    for i in range(5 * store.PER_SESSION):
        services.current().store.set(f"dataset:{b}:{i}", i)
    assert services.current().store.get(f"release:{a}:mine") == "A's release"
    assert services.current().store.get(f"dataset:{b}:0") is None                          # B's oldest went
    assert services.current().store.get(f"dataset:{b}:{5 * store.PER_SESSION - 1}") is not None


def test_a_full_cache_refuses_newcomers_instead_of_evicting_others(tmp_path):
    blob = bytes(900)
    entry = len(pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)) + store.MAC_BYTES + file_store.HEADER
    small = file_store.FileStore(tmp_path, max_bytes=math.ceil(4 * entry / store.VISITOR_SHARE),
                            front_bytes=10_000)                    # visitors: 4 entries
    assert small.set("release:a:1", blob) and small.set("dataset:b:1", blob)
    assert small.set("release:c:1", blob) and small.set("release:d:1", blob)   # full now
    assert not small.room_for("e") and not small.set("dataset:e:1", blob)     # refused, no eviction
    assert small.set("dataset:b:2", blob)                                     # b drops its own oldest
    assert all(small.get(f"release:{s}:1") == blob for s in "acd")
    assert small.get("dataset:b:1") is None and small.get("dataset:b:2") == blob


def test_a_visitor_at_a_full_store_is_refused_before_a_charge_not_after(server, monkeypatch, tmp_path):
    """Issue 41, item 10: with the store filled by other sessions, an existing visitor (a small
    entry of its own to drop) was let through, charged, and its release not kept ("Released",
    then "no longer on the server"). Its few bytes are not room for a release: it is refused
    before anything is charged."""
    monkeypatch.setattr(services.current(), "store", file_store.FileStore(tmp_path, max_bytes=4_000_000, front_bytes=0))
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    assert services.current().store.set(f"job:{sid}:small", bytes(10))          # its own small entry
    fillers = []
    for size in (50_000, 1000, 100):                                # other sessions fill it up
        while services.current().store.set(f"release:filler{len(fillers)}:1", bytes(size)):
            fillers.append(f"release:filler{len(fillers)}:1")
    assert not services.current().store.room_for(sid)
    domain = state.sample("small_city_5k")[1]
    key = releases.release_key(info["fingerprint"], domain, "ug", {}, [0.05, 0.95], 0.1, None)
    with pytest.raises(LookupError, match="nothing was charged"):
        releases.release(sid, key, create=True)
    assert state.account(sid, info["fingerprint"]).charges == []
    assert services.current().store.get(f"job:{sid}:small") == bytes(10)        # nor was its entry dropped
    services.current().store.delete(fillers[0])                                  # 50 kB free: it releases
    assert services.current().store.room_for(sid)
    releases.release(sid, key, create=True)
    assert len(state.account(sid, info["fingerprint"]).charges) == 1 and releases.release(sid, key)


def test_a_release_larger_than_the_room_left_is_neither_kept_nor_charged(server, monkeypatch, tmp_path):
    """Item 10's other half: room for a typical release (1% of the store) was there, but this
    release is larger. It was charged and said "Released" beside a map saying it is no longer on
    the server; now the charge goes with the release it could not keep, and the click says so."""
    from components import controls, mechanism_panel
    monkeypatch.setattr(services.current(), "store", file_store.FileStore(tmp_path, max_bytes=4_000_000, front_bytes=0))
    sid = new_sid()
    info = state.use_sample(sid, "small_city_5k")
    filler = 0
    while services.current().store.room_for(sid, 60_000):                        # others leave 40-60 kB
        assert services.current().store.set(f"release:filler{filler}:1", bytes(20_000))
        filler += 1
    assert services.current().store.room_for(sid)
    domain_info = controls.domain_store(state.sample("small_city_5k")[1])
    result = mechanism_panel.spend(sid, info, domain_info, "privtree", 1.0, [], [], [], "fresh", None, None)
    assert result == {"error": releases.NO_ROOM}
    assert state.account(sid, info["fingerprint"]).charges == []
    _, status = mechanism_panel.release_view(result, None)
    assert status.children[:2] == ["Not released: ", releases.NO_ROOM]
    assert workspace.get(sid).get("releases") is None               # nothing offered as paid for
    for i in range(filler):                                         # with room, the same click releases
        services.current().store.delete(f"release:filler{i}:1")
    assert "summary" in mechanism_panel.spend(sid, info, domain_info, "privtree", 1.0, [], [], [], "fresh", None, None)
    assert len(state.account(sid, info["fingerprint"]).charges) == 1


def test_the_owners_workspace_and_paid_requests_survive_a_hundred_visitors(server, monkeypatch, tmp_path):
    """Workspaces are their session's own entries and never dropped to make room: 100 fresh
    visitors filling the store (the audit's 70 evicted the owner's workspace, and with it the
    record of a paid click, which was then charged again) leave the owner's alone."""
    monkeypatch.setattr(services.current(), "store", file_store.FileStore(tmp_path, max_bytes=300_000, front_bytes=0))
    owner, charged = new_sid(), []
    paid = workspace.once(owner, "owner-click-1", lambda: charged.append(1) or {"released": "k"})
    workspace.add_release(owner, {"key": "k"})
    refused = 0
    for _ in range(100):
        visitor = new_sid()
        try:
            workspace.update(visitor, queries=[[0.0, 0.0, 1.0, 1.0]] * 20)
            if not services.current().store.set(f"dataset:{visitor}:upload", bytes(4000)):
                refused += 1
        except LookupError:          # the store is full: a newcomer is refused, nobody evicted
            refused += 1
    assert refused > 0                                               # the store did fill up
    assert workspace.once(owner, "owner-click-1", lambda: charged.append(2)) == paid
    assert charged == [1] and workspace.shown(owner)["key"] == "k"
    for i in range(3 * store.PER_SESSION):         # nor do the owner's own releases push it out
        services.current().store.set(f"release:{owner}:{i}", bytes(100))
    assert workspace.get(owner)["requests"]["owner-click-1"] == paid


def test_interactive_sessions_of_others_are_never_pushed_out(server, monkeypatch, tmp_path):
    monkeypatch.setattr(services.current(), "store", file_store.FileStore(tmp_path, max_bytes=8000, front_bytes=0))
    a = live.put_live("a", "A's session")
    for i in range(3):
        live.put_live("b", f"b{i}")
    filler = 0
    while services.current().store.set(f"release:filler{filler}:1", filler):     # other sessions fill it
        filler += 1
    with pytest.raises(LookupError, match="nothing was charged"):
        live.check_live_room("c")                       # full: a newcomer is refused...
    with live.live("a", a) as obj:                      # ...and nobody else's session dropped
        assert obj == "A's session"
    live.put_live("b", "b3")                            # b replaces its own oldest
    with live.live("a", a) as obj:
        assert obj == "A's session"
    assert sum(kind == "live" for _, kind, _ in services.current().store._own("b")) == live.LIVE_PER_SESSION


def test_one_budget_for_the_same_people_with_or_without_user_ids():
    x, y = [0.1, 0.2, 0.3], [0.1, 0.2, 0.3]
    plain, users = dp.PointData(x, y), dp.PointData(x, y, user=["a", "a", "b"])
    assert plain.fingerprint != users.fingerprint                  # different releases and caches
    assert state.account_key(plain) == state.account_key(users)    # one budget for these people
