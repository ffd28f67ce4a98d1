"""Callback requests checked at the boundary: a request to Dash's update endpoint whose output,
inputs or state have a shape no page of this app sends is refused with HTTP 400, in words naming
the control and what it takes, so that no callback ever sees a wrong type (and none fails with
a traceback and HTTP 500). Messages name controls, never a value that was sent.

The shape of a control's `value` is read from the page's layout (the component's type, its
fixed options, min and max); each store's is declared below, from what the server writes in it
and what the callbacks read out of it."""
from __future__ import annotations

import json
import math

import dash
import flask
from dash import dcc, html
from werkzeug.exceptions import BadRequest

import dp
from server import published, workspace

from . import ids, map_panel, tour_panel
from dp.constraints import (ANY, BOOL, MAX_ITEMS, NUMBER, SCALAR, TEXT, Check, Either, Json, ListOf,
                          MapOf, Num, OneOf, Record, Row, Text, fits)

MAX_VALUES = 200_000    # JSON values in one callback request, counted before it is parsed (a
                        # page sends a few thousand; a file travels as one string), so parsing
                        # costs a small multiple of the body, not 20 times it
MAX_CONTAINERS = 50_000  # lists and objects among them: an empty one is 2 bytes of body and
                         # about 60 of memory parsed


COUNT = Num(0, 2 ** 53, whole=True)        # up to JavaScript's largest exact integer
SCALARS = Either((SCALAR, ListOf(SCALAR)))     # a control of a shape nobody declared
MECHANISM = Check(lambda v: isinstance(v, str) and v in dp.mechanisms())
DOMAIN = Record({"west": NUMBER, "south": NUMBER, "east": NUMBER, "north": NUMBER},
                {"name": TEXT, "leaky": BOOL})
RELEASE_KEY = Json(Row((TEXT, DOMAIN, MECHANISM, Record({}), ListOf(NUMBER), NUMBER,
                        Either((TEXT, Num(whole=True))), Either((None, Num(lo=1, whole=True))))))
REQUEST = Either((None, Record({"id": Check(workspace.valid_request)})))
RELEASE_SUMMARY = Record({"key": RELEASE_KEY}, {"mechanism": MECHANISM, "label": TEXT, "epsilon": NUMBER})
SETUP = {"mechs": ListOf(TEXT), "eps": ListOf(NUMBER), "sizes": ListOf(NUMBER), "rho": NUMBER}
EVAL_ROW = Record({"mechanism": TEXT, "epsilon": NUMBER, "area_frac": NUMBER, "reps": COUNT,
                   "n_queries": Num(lo=1, whole=True), "n_small": COUNT,
                   **{f"{q}_{m}": Either((None, NUMBER)) for m in ("re_sanity", "abs_error")
                      for q in ("median", "q25", "q75")}})

BOX = Row((NUMBER,) * 4)
SUMMARY = {"fingerprint": TEXT, "name": TEXT, "n": COUNT, "summary": TEXT}
DETAILS = {"origin": TEXT, "kind": OneOf(("points", "regions")), "users": BOOL,
           "per_user": Either((None, COUNT)), "dropped": MapOf(COUNT), "warnings": ListOf(TEXT)}

# (shape, what it is in words) of each store's `data` a server callback reads
STORES = {
    ids.DATASET: (Either((Record({**SUMMARY, "counts": OneOf((True,)), "box": BOX}, DETAILS, closed=True),
                          Record({**SUMMARY, "box": Either((None, BOX))},     # closed: no account
                                 {**DETAILS, "counts": OneOf((False,))}, closed=True))),   # name
                  "the summary of the dataset loaded"),
    ids.DOMAIN: (Either((None, Record({"domain": DOMAIN}), Record({"error": TEXT}, {"reason": TEXT}))),
                 "a domain box, or why there is none"),
    ids.RELEASE: (Either((None, RELEASE_SUMMARY)), "the summary of a release this server made"),
    ids.RELEASE_MADE: (Either((None, Record({"summary": RELEASE_SUMMARY}, {"unkept": TEXT}),
                               Record({"error": TEXT}))), "a release this server made, or why not"),
    ids.COMPARE_RELEASE: (Either((None, Record({"key": RELEASE_KEY, "base": TEXT, "label": TEXT},
                                               {"mechanism": MECHANISM}))),
                          "the summary of a comparison release this server made"),
    ids.RELEASE_REQUEST: (REQUEST, "a click's request id"),
    ids.COMPARE_REQUEST: (REQUEST, "a click's request id"),
    ids.IA_REQUEST: (REQUEST, "a click's request id"),
    ids.LINK_OVER: (Either((None, BOOL)), "true or false"),
    ids.ACCOUNT_TICK: (Either((None, NUMBER)), "a time stamp"),
    ids.QUERY_EXTRA: (Either((None, ListOf(BOX))), "a list of rectangles of four numbers each"),
    ids.PLAN_MADE: (Either((None, Record({"request": Record(
        {"area": NUMBER, "target": NUMBER, "level": NUMBER, "points": NUMBER}, {"exact": BOOL}),
        "domain": DOMAIN, "k": Either((None, COUNT))}))), "a plan this server made"),
    ids.EVAL_SUMMARY: (Either((None, Record({**SETUP, "rows": ListOf(EVAL_ROW)}))),
                       "the results of an evaluation"),
    ids.IA_INFO: (Either((None, Record({"token": TEXT, "asked_drawn": COUNT, "fingerprint": TEXT}))),
                  "an interactive session this server started"),
    ids.TOUR_STEP: (Either((None, Num(0, len(tour_panel.STEPS) - 1, whole=True))), "a step of the tour"),
    ids.TOUR_MARGINS: (Either((None, Record({"points": ListOf(Row((NUMBER,) * 3))}, {"series": ANY}))),
                       "the tour's noise margins"),
    ids.GROW_DRAWN: (Either((None, COUNT)), "a tree depth, or nothing"),
    ids.SHAPES_TICK: (Either((None, Text(64))), "a district file's token, or nothing"),
    ids.PUBLISHED_ID: (Check(published.valid_id), "the id of a published release"),
}

POSITION = Row((NUMBER, NUMBER))
GEOMETRY = Either((Record({"type": OneOf(("Polygon",)),
                           "coordinates": ListOf(ListOf(POSITION, min_items=1), min_items=1)}),
                   Record({"type": Check(lambda v: v != "Polygon")}), Record({}, {"type": None})))
FEATURE = Record({}, {"geometry": Either((None, GEOMETRY))})
# (shape, words) by property, for every property but `value`, `data` and `id`
PROPS = {
    **dict.fromkeys(("n_clicks", "n_intervals", "n_submit", "submit_n_clicks"),
                    (Either((None, COUNT)), "a count: a whole number from 0, or nothing")),
    **dict.fromkeys(("search", "href", "filename"), (Either((None, TEXT)), "text, or nothing")),
    "pathname": (Check(lambda v: isinstance(v, str) and v.startswith("/") and len(v) <= 2000),
                 "an address on this server, starting with /"),        # what Dash Pages' router reads
    "contents": (Either((None, Text(math.inf))), "a file's contents as text, or nothing"),
    "max": (NUMBER, "a number"),
    "geojson": (Either((None, Record({}, {"features": ListOf(FEATURE)}))),
                "GeoJSON of the rectangles drawn, or nothing"),
}
# `value` of controls that callbacks make, by the "type" of their pattern id (others: SCALARS)
PATTERN_VALUES = {
    ids.SPLIT: (Num(0, 100), "a share from 0 to 100"),
    ids.DOMAIN_BOX: (Either((None, NUMBER)), "a number, or nothing"),
}
# the choices of pickers whose options callbacks fill in
CHOICES = {
    ids.MECHANISM: lambda: tuple(dp.mechanisms()),
    ids.COMPARE_PICK: lambda: tuple(dp.mechanisms()),
    ids.EVAL_MECHS: lambda: tuple(dp.mechanisms()),
    ids.EULER_STAGE: lambda: tuple(o["value"] for o in map_panel.stage_options()),
}


def _options(options) -> tuple:
    """The values of a picker's options (a list of dicts or of values, or a dict of labels)."""
    if isinstance(options, dict):
        return tuple(options)
    return tuple(o["value"] if isinstance(o, dict) else o for o in options or ())


def _value_shape(c, fixed) -> tuple | None:
    """(shape, words) of a layout component's `value`; `fixed(prop)`: no callback sets it."""
    def prop(name, default=None):
        v = getattr(c, name, None)
        return default if v is None or not fixed(name) else v
    if isinstance(c, (dcc.Input, dcc.Slider)):
        lo, hi, step = prop("min", -math.inf), prop("max", math.inf), prop("step")
        num = Num(lo, hi, isinstance(step, int) and not isinstance(step, bool))
        words = num.describe()
        if isinstance(c, dcc.Slider):
            return num, words
        if getattr(c, "type", None) == "number":
            return Either((None, num)), words + ", or nothing"
        return Either((None, TEXT)), "text, or nothing"
    if isinstance(c, (dcc.Dropdown, dcc.RadioItems, dcc.Checklist)):
        # emptied by its user (a clearable picker) or by a callback, else never
        empty = not fixed("value") or not fixed("options") or (
            isinstance(c, dcc.Dropdown) and getattr(c, "clearable", None) is not False)
        if c.id in CHOICES:
            one, words = OneOf(CHOICES[c.id]()), "one of the choices offered"
        elif fixed("options"):
            one, words = OneOf(_options(getattr(c, "options", None))), "one of the choices offered"
        else:
            one, words = SCALAR, "a choice"
        if isinstance(c, dcc.Checklist) or getattr(c, "multi", False):
            one, words = ListOf(one), f"a list, each item {words}"
        return (Either((None, one)), words + ", or nothing") if empty else (one, words)
    return None


def value_shapes(app) -> dict:
    """(shape, words) of the `value` of every control in the app's pages, by its id."""
    outputs = set()
    for cb in app.callback_map.values():
        for o in cb["output"] if isinstance(cb["output"], list) else [cb["output"]]:
            outputs.add((o.component_id_str(), o.component_property))
    layouts = [app.layout, *(page["layout"] for page in dash.page_registry.values())]
    layout = html.Div([part() if callable(part) else part for part in layouts])
    shapes = {}
    for c in layout._traverse_ids():
        cid = getattr(c, "id", None)
        if isinstance(cid, str):
            shape = _value_shape(c, lambda name: (cid, name) not in outputs)
            if shape is not None:
                shapes[cid] = shape
    return shapes


def _pattern(dep_id: str):
    """A dependency's id: text, or the dict of a pattern id (wildcards as ["ALL"] etc.)."""
    return json.loads(dep_id) if dep_id.startswith("{") else dep_id


def _name(dep_id) -> str:
    """How a message names a control: its id, or the type of a pattern's controls."""
    return f"a “{dep_id.get('type')}” control" if isinstance(dep_id, dict) else f"control “{dep_id}”"


def _fits_id(value, dep_id) -> bool:
    """Whether an item's id is the dependency's (a pattern's wildcards take any scalar)."""
    if not isinstance(dep_id, dict):
        return value == dep_id
    return isinstance(value, dict) and value.keys() == dep_id.keys() and all(
        fits(value[k], SCALAR) and value[k] is not None if isinstance(v, list) else value[k] == v
        for k, v in dep_id.items())


def _many(dep_id) -> bool:
    """A pattern with ALL or ALLSMALLER: its request item is a list of matching items."""
    return isinstance(dep_id, dict) and any(v in (["ALL"], ["ALLSMALLER"]) for v in dep_id.values())


def _shape_of(dep_id, prop: str, item_id, values: dict) -> tuple:
    """(shape, words) of one property of a control a callback reads."""
    if prop == "id":
        return OneOf((item_id,)), "the control's own id"
    if prop == "data":
        return STORES.get(dep_id, (ANY, "a store's data"))
    if prop == "value":
        found = PATTERN_VALUES.get(dep_id.get("type")) if isinstance(dep_id, dict) else values.get(dep_id)
        return found or (SCALARS, "a value or a list of values")
    return PROPS.get(prop, (ANY, "a JSON value"))


def _item_problem(dep: dict, item, values: dict, poll: bool = False) -> str | None:
    """Why one item of a request's inputs or state is not what its dependency takes, or None.
    A background callback's poll (`poll`) sends every value as null (Dash reads none of them),
    except a pattern's list of items, which the renderer sends as they are (checked as ever)."""
    dep_id, prop = _pattern(dep["id"]), dep["property"]
    items = item if _many(dep_id) else [item]
    poll = poll and not _many(dep_id)
    if _many(dep_id) and not (isinstance(item, list) and len(item) <= MAX_ITEMS):
        return f"the “{dep_id.get('type')}” controls ({prop}) should come as a list"
    for one in items:
        if not (isinstance(one, dict) and _fits_id(one.get("id"), dep_id) and one.get("property") == prop):
            return f"an item should be {_name(dep_id)} ({prop}) of the callback"
        shape, words = _shape_of(dep_id, prop, one["id"], values)
        if poll and one.get("value") is not None:
            return f"{_name(dep_id)} ({prop}) should be null in a background callback's poll"
        if not poll and not fits(one.get("value"), shape):
            return f"{_name(dep_id)} ({prop}) is malformed; expected {words}"
    return None


def _outputs_problem(spec, outputs) -> str | None:
    """Why a request's outputs are not the callback's, or None (a page sends none for a callback
    without outputs)."""
    if spec == []:
        return None if outputs in (None, []) else "the callback has no outputs"
    many = isinstance(spec, list)
    specs, outputs = (spec, outputs) if many else ([spec], [outputs])
    if not isinstance(outputs, list) or len(outputs) != len(specs):
        return "the outputs should be those of the callback"
    for o, out in zip(specs, outputs):
        dep_id = _pattern(o.component_id_str())
        items = out if _many(dep_id) else [out]
        if not isinstance(items, list) or not all(
                isinstance(i, dict) and _fits_id(i.get("id"), dep_id) and isinstance(i.get("property"), str)
                and i["property"].split("@")[0] == o.component_property for i in items):
            return "the outputs should be those of the callback"
    return None


def _changed_problem(deps: list, changed) -> str | None:
    """Why a request's changedPropIds do not name inputs of the callback, or None."""
    if not isinstance(changed, list) or len(changed) > MAX_ITEMS:
        return "changedPropIds should be a list of the callback's inputs"
    for c in changed:
        cid, _, prop = c.rpartition(".") if isinstance(c, str) else ("", "", "")
        try:
            cid = json.loads(cid) if cid.startswith("{") else cid
        except (ValueError, RecursionError):
            cid = None
        if not any(dep["property"] == prop and _fits_id(cid, _pattern(dep["id"])) for dep in deps):
            return "changedPropIds should name inputs of the callback"
    return None


def request_problem(app, body, values: dict, poll: bool = False) -> str | None:
    """Why a callback request is malformed, in words, or None when it is what a page sends;
    `values`: the `value` shapes of the layout's controls (`value_shapes`); `poll`: the request
    polls a background callback's job (its values are all null)."""
    if not isinstance(body, dict):
        return "the body should be a JSON object naming a callback's output, inputs and state"
    cb = app.callback_map.get(body.get("output")) if isinstance(body.get("output"), str) else None
    if cb is None or "callback" not in cb:
        return "no callback of this server updates the output named"
    poll = poll and bool(cb.get("background"))     # any other callback runs on the values sent
    for part in ("inputs", "state"):
        items, deps = body.get(part, []), cb[part]
        if not isinstance(items, list) or len(items) != len(deps):
            return f"the {part} should list the callback's {len(deps)} controls in order"
        why = next(filter(None, (_item_problem(d, i, values, poll) for d, i in zip(deps, items))), None)
        if why:
            return why
    return _outputs_problem(cb["output"], body.get("outputs")) \
        or _changed_problem(cb["inputs"], body.get("changedPropIds", []))


def register(app) -> None:
    """Check every request to the app's callback endpoint before Dash runs the callback; the
    layout's shapes are read at the first one (the layout may need a request to render)."""
    path = app.config.routes_pathname_prefix + "_dash-update-component"
    values = {}

    @app.server.before_request
    def check_callback_request():
        if flask.request.path != path or flask.request.method != "POST":
            return None
        if not values:
            values.update(value_shapes(app))
        raw = flask.request.get_data(cache=True)
        if raw.count(b",") + raw.count(b":") >= MAX_VALUES:
            return BadRequest(f"Refused callback request: it holds more than {MAX_VALUES:,} values, "
                              "far more than the page sends (a file travels as one text).")
        if raw.count(b"[") + raw.count(b"{") >= MAX_CONTAINERS:
            return BadRequest(f"Refused callback request: it holds more than {MAX_CONTAINERS:,} lists "
                              "and objects, far more than the page sends.")
        try:
            body = flask.request.get_json(silent=True)
        except RecursionError:           # nested deeper than the JSON parser goes
            body = None
        why = request_problem(app, body, values, poll=bool(flask.request.args.get("cacheKey")))   # as Dash tells a poll
        # returned, not raised: a debug app's catch-all error handler would make it a 500
        return BadRequest(f"Refused callback request: {why}.") if why else None
