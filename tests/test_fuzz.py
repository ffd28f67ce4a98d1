"""Wrong-type values sent to every Dash callback end as HTTP 400 (`components.inputs`) or as a
message on the page, never as HTTP 500 with a traceback in the log.

A test client loads the page, picks the small sample, sets its domain and makes one release
through the callbacks, as a browser would; the page's values then are the valid ones. Every
input and state value of every callback is replaced in turn by each wrong value, the others kept
valid, and a few malformed bodies are sent as well.
"""
from __future__ import annotations

import collections
import copy
import itertools
import json
import logging

import pytest

from app import create_app
from helpers import follow_job, page_layout
from components import ids, inputs
from server import sessions

UPDATE = "/_dash-update-component"
SAMPLE = "small_city_5k"


def nested(depth: int):
    """[[[…[1]…]]], `depth` lists deep."""
    value = 1
    for _ in range(depth):
        value = [value]
    return value


WRONG = [{"x": 1}, [[[[1]]]], "zz", -1, 1e308, True, None, nested(30), "z" * 200_000]
REQUESTS = (ids.RELEASE_REQUEST, ids.COMPARE_REQUEST, ids.IA_REQUEST)
# light settings: the evaluations the fuzz starts finish in a moment, the map draws no image
LIGHT = {ids.EVAL_MECHS: ["ug"], ids.EVAL_EPSILONS: "1", ids.EVAL_SIZES: [0.01], ids.EVAL_NQ: 10,
         ids.EVAL_REPS: 1, ids.MAP_LAYER_PICK: "none"}


def key(cid) -> str:
    """A component id as Dash names it in a request: text, or the sorted JSON of a dict id."""
    return json.dumps(cid, sort_keys=True, separators=(",", ":")) if isinstance(cid, dict) else cid


def as_sent(value):
    """A value as a browser sends it back: JSON.stringify writes a whole number without ".0"."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [as_sent(v) for v in value]
    return {k: as_sent(v) for k, v in value.items()} if isinstance(value, dict) else value


def wildcard(cid) -> bool:
    """Whether an id is a pattern with a wildcard (ALL): it names a list of components."""
    return isinstance(cid, dict) and any(isinstance(v, list) for v in cid.values())


def components(node):
    """Every component in a layout's JSON, wherever a prop holds one."""
    if isinstance(node, list):
        for n in node:
            yield from components(n)
    elif isinstance(node, dict):
        if "props" in node and "type" in node:
            yield node
            node = node["props"]
        for v in node.values():
            yield from components(v)


class Page:
    """What a browser holds: every component's props by (id, property), and the ids seen."""

    def __init__(self, app, client):
        self.app, self.client, self.props, self.ids = app, client, {}, {}
        self.clicks = itertools.count()
        self.absorb(client.get("/_dash-layout").get_json())
        self.absorb(page_layout(client))             # the dashboard, as Dash Pages renders it at /
        self.props.update({(ids.PAGES_LOCATION, "pathname"): "/", (ids.PAGES_LOCATION, "search"): "",
                           (ids.PUBLISHED_ID, "data"): "Not-Publishd"})    # a public page's, of an id's shape

    def absorb(self, tree):
        for c in components(tree):
            cid = c["props"].get("id")
            if cid is not None:
                self.ids[key(cid)] = cid
                self.props.update({(key(cid), p): as_sent(v) for p, v in c["props"].items()})

    def value(self, cid, prop):
        if prop == "id":
            return cid
        if prop == "data" and cid in REQUESTS:       # each click has a fresh request id
            return {"id": f"fuzz{next(self.clicks):012d}", "n": 1}
        if prop == "value" and isinstance(cid, str) and cid in LIGHT:
            return copy.deepcopy(LIGHT[cid])
        return copy.deepcopy(self.props.get((key(cid), prop)))

    def item(self, dep: dict):
        """A dependency's request item: its id's, or a list of those of every id seen that fits
        its pattern (ALL)."""
        prop, cid = dep["property"], json.loads(dep["id"]) if dep["id"].startswith("{") else dep["id"]
        if not wildcard(cid):
            return {"id": cid, "property": prop, "value": self.value(cid, prop)}
        return [{"id": i, "property": prop, "value": self.value(i, prop)} for i in self.ids.values()
                if isinstance(i, dict) and i.keys() == cid.keys()
                and all(isinstance(v, list) or i[k] == v for k, v in cid.items())]

    def body(self, output: str, changed: int | None = 0) -> dict:
        """The request a page sends for a callback, its input `changed` marked as triggering."""
        cb = self.app.callback_map[output]
        outs = cb["output"] if isinstance(cb["output"], list) else [cb["output"]]
        outputs = [self.item({"id": o.component_id_str(), "property": o.component_property}) for o in outs]
        for o in outputs:
            for i in o if isinstance(o, list) else [o]:
                i.pop("value")
        body = {"output": output, "inputs": [self.item(d) for d in cb["inputs"]],
                "state": [self.item(d) for d in cb["state"]], "changedPropIds": []}
        if outputs:                           # the page sends none for a callback without any
            body["outputs"] = outputs if isinstance(cb["output"], list) else outputs[0]
        if changed is not None and cb["inputs"]:
            trigger = body["inputs"][changed]
            for t in trigger if isinstance(trigger, list) else [trigger]:
                body["changedPropIds"].append(f"{key(t['id'])}.{t['property']}")
        return body

    def call(self, output_id: str, trigger: str) -> None:
        """Run the callback of an output as the page would after `trigger` changed, and keep
        what it returns."""
        def triggers(cb):
            return [f"{d['id']}.{d['property']}" for d in cb["inputs"]]
        output = next(o for o, cb in self.app.callback_map.items()
                      if output_id in o and "callback" in cb and trigger in triggers(cb))
        changed = triggers(self.app.callback_map[output]).index(trigger)
        body = self.body(output, changed)
        answer = follow_job(self.client, body, self.client.post(UPDATE, json=body))
        assert answer.status_code == 200, answer.get_data(as_text=True)[-2000:]
        for cid, props in answer.get_json()["response"].items():
            self.absorb(props.get("children"))
            self.props.update({(cid, p): as_sent(v) for p, v in props.items()})


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A page on the small sample, its domain set and one release made, as a browser leaves it."""
    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png", "owner_token": "fuzz",
                      "data_dir": str(tmp_path_factory.mktemp("data"))})
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    assert client.get("/owner?token=fuzz").status_code == 302     # the owner: every control
    p = Page(app, client)
    p.props[(ids.SAMPLE_PICK, "value")] = SAMPLE
    p.call(ids.DATASET, f"{ids.SAMPLE_PICK}.value")
    p.call(ids.DOMAIN, f"{ids.DOMAIN_PRESET}.value")
    p.call(ids.PARAMS_BOX, f"{ids.MECHANISM}.value")
    p.call(ids.RELEASE_MADE, f"{ids.RELEASE_REQUEST}.data")     # the click's job, followed
    p.call(ids.RELEASE, f"{ids.RELEASE_MADE}.data")             # the page takes its release
    assert p.props[(ids.RELEASE, "data")]["key"]
    return p


def variants(p: Page, output: str):
    """Requests for one callback: each input and state value replaced by each wrong value (a
    pattern's whole list, and its first item's value; each key of a store's object), the
    others valid."""
    cb = p.app.callback_map[output]
    n_in = len(cb["inputs"])
    for pos in range(n_in + len(cb["state"])):
        part, i = ("inputs", pos) if pos < n_in else ("state", pos - n_in)
        changed = i if part == "inputs" else 0
        slot = p.body(output, changed)[part][i]
        keys = list(slot["value"]) if isinstance(slot, dict) and isinstance(slot.get("value"), dict) else []
        for wrong, k in itertools.product(WRONG, [None, *keys]):
            body = p.body(output, changed)
            slot = body[part][i]
            if isinstance(slot, list):
                yield {**body, part: body[part][:i] + [wrong] + body[part][i + 1:]}
                if not slot:
                    continue
                body = p.body(output, changed)
                slot = body[part][i][0]
            if k is None:
                slot["value"] = wrong
            else:
                slot["value"][k] = wrong
            yield body


def malformed(p: Page):
    """Bodies no page sends: not JSON, the wrong JSON, nested past the parser, wrong outputs."""
    output = f"{ids.QUERY_RANDOM_NOUN}.children"
    good = p.body(output)
    yield {"data": "{not json", "content_type": "application/json"}
    yield {"data": "[" * 100_000 + "]" * 100_000, "content_type": "application/json"}
    for body in ([good], "zz", {}, {**good, "output": "nothing.here"}, {**good, "inputs": []},
                 {**good, "inputs": "zz"}, {**good, "state": [good["inputs"][0]]},
                 {**good, "outputs": [good["outputs"], good["outputs"]]}, {**good, "outputs": None},
                 {**good, "changedPropIds": ["{bad.value"]}, {**good, "changedPropIds": [{"x": 1}]},
                 {**good, "inputs": [{"id": {"x": 1}, "property": "value", "value": 3}]},
                 {**good, "inputs": [{**good["inputs"][0], "value": float("inf")}]}):
        yield {"data": json.dumps(body), "content_type": "application/json"}


@pytest.mark.slow          # worker processes: the quick suite leaves it to the full one
def test_no_callback_answers_a_wrong_type_with_a_server_error(page, caplog):
    caplog.set_level(logging.ERROR)
    valid, fuzzed, failing = {}, collections.Counter(), set()
    for output in page.app.callback_map:
        valid[output] = page.client.post(UPDATE, json=page.body(output)).status_code
        for body in variants(page, output):
            status = page.client.post(UPDATE, json=body).status_code
            fuzzed[status] += 1
            failing |= {output} if status == 500 else set()
    bad_bodies = [page.client.post(UPDATE, **request).status_code for request in malformed(page)]
    assert not failing, f"{fuzzed[500]} of {fuzzed.total()} requests failed with 500: {sorted(failing)}"
    assert set(bad_bodies) == {400}
    assert fuzzed.total() > 5000 and fuzzed[400] > 3000
    # the page's own values pass; the server runs no clientside callback
    assert {o: s for o, s in valid.items() if s not in ((200, 204) if "callback" in page.app.callback_map[o]
                                                        else (400,))} == {}
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_the_boundary_names_the_malformed_control_and_passes_the_page_own_values(page):
    def refusal(output: str, part: str, i: int, value) -> str:
        """The 400 answer's text to the page's request with one value (a pattern's list) replaced."""
        body = page.body(output)
        if isinstance(body[part][i], list):
            body[part][i] = value
        else:
            body[part][i]["value"] = value
        answer = page.client.post(UPDATE, json=body)
        assert answer.status_code == 400
        return answer.get_data(as_text=True)

    text = refusal(f"{ids.QUERY_RANDOM_NOUN}.children", "inputs", 0, "secret-3")
    assert f"control “{ids.RANDOM_N}” (value) is malformed; expected a number from 1 to 200" in text
    assert "secret" not in text and "Traceback" not in text           # nothing sent is echoed
    ledger = next(o for o in page.app.callback_map if o.startswith(f"..{ids.LEDGER_TABLE}.data"))
    text = refusal(ledger, "inputs", 0, {"key": "not a release key"})
    assert f"control “{ids.RELEASE}” (data) is malformed; expected the summary of a release" in text
    text = refusal(f"{ids.EPSILON_READOUT}.children", "state", 0, {"name": "epsilon"})
    assert f"the “{ids.PARAM}” controls (id) should come as a list" in text

    cookies = "; ".join(f"{c}={page.client.get_cookie(c).value}" for c in (sessions.COOKIE, sessions.OWNER_COOKIE))
    with page.app.server.test_request_context("/", headers={"Cookie": cookies}):
        values = inputs.value_shapes(page.app)
    read = {(d["id"], d["property"]) for cb in page.app.callback_map.values() if "callback" in cb
            for d in cb["inputs"] + cb["state"]}
    assert {i for i, prop in read if prop == "value" and not i.startswith("{")} <= values.keys()
    assert {i for i, prop in read if prop == "data"} == inputs.STORES.keys()    # each has its schema
    for output, cb in page.app.callback_map.items():      # everything the page holds passes
        if "callback" in cb:
            assert inputs.request_problem(page.app, page.body(output), values) is None, output
