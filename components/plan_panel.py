"""Plan before spending (in the mechanism panel): state the accuracy needed, see the ε each
mechanism needs for it and a preview, from synthetic twins in the same public box (`dp.plan`).
Free: it reads no data and charges nothing. "Use" fills in the mechanism and ε; the Release
button, labelled with what it spends, releases."""
from __future__ import annotations

import base64

from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

import dp
from dp import plan as planning

from . import ids, map_image
from .controls import domain_from_store, epsilon_value, mechanism_options, usable
from .numbers import count_text, significant
from server import background

DEFAULTS = {"area": 1.0, "target": 50, "level": 95, "points": planning.DEFAULT_POINTS}


def layout() -> html.Div:
    def field(label, cid, value, **kw):
        return html.Div(className="plan-field", children=[
            html.Label(label, htmlFor=cid),
            dcc.Input(id=cid, type="number", value=value, debounce=True, **kw)])
    return html.Div(id=ids.PLAN_BOX, className="card plan", children=[
        html.P("Say what you need; each mechanism's ε for it is found on a synthetic city of the "
               "size you assume, in the same public box. Nothing of your data is read and nothing "
               "is charged.", className="hint"),
        html.Div(className="plan-fields", children=[
            field("Rectangles of about (% of the box)", ids.PLAN_AREA, DEFAULTS["area"], min=0.01, max=100, step="any"),
            field("within ± (people)", ids.PLAN_TARGET, DEFAULTS["target"], min=1, step="any"),
            field("this share of the time (%)", ids.PLAN_LEVEL, DEFAULTS["level"], min=50, max=99.9, step="any"),
            field("assuming this many points (a public guess)", ids.PLAN_POINTS, DEFAULTS["points"],
                  min=100, max=2_000_000, step=1)]),
        dcc.Checklist(id=ids.PLAN_EXACT, value=["exact"], className="plan-exact", options=[
            {"label": " My points may sit on exact values (a census table, ages in whole years, a "
                      "street grid): plan for that too. Untick only if they cannot: the plan is "
                      "cheaper, but missed on such data about half the time", "value": "exact"}]),
        html.Button("Plan (free)", id=ids.PLAN_RUN, n_clicks=0),
        html.Button("Cancel", id=ids.PLAN_CANCEL, n_clicks=0, hidden=True,
                    title="Stop after the mechanism being planned: the ones planned are shown"),
        html.Progress(id=ids.PLAN_PROGRESS, value="0", max="1", className="plan-progress"),
        html.Div(id=ids.PLAN_PROGRESS_TEXT, role="status"),
        html.Div(id=ids.PLAN_STATUS, role="status"),
        html.Div(id=ids.PLAN_RESULT),
        html.Img(id=ids.PLAN_PREVIEW, className="plan-preview", hidden=True, alt=""),
        dcc.Store(id=ids.PLAN_MADE),
    ])


def read_request(area, target, level, points, exact=("exact",)) -> dict:
    """The plan's inputs, checked (ParameterError in words otherwise); `exact`: the exact-values
    box's value (ticked by default; unticked is a public statement about the data's kind)."""
    try:
        area, target, level, points = (float(v) for v in (area, target, level, points))
    except (TypeError, ValueError):
        raise dp.ParameterError("fill in all four numbers: the rectangles' size, the error you "
                                "accept, the share of the time and the assumed number of points") from None
    if not 0.01 <= area <= 100:
        raise dp.ParameterError("the rectangles' size must be from 0.01% to 100% of the box")
    if not 50 <= level < 100:
        raise dp.ParameterError("the share of the time must be from 50% to below 100%")
    if not 100 <= points <= 2_000_000:
        raise dp.ParameterError("the assumed number of points must be from 100 to 2,000,000")
    if not target > 0:
        raise dp.ParameterError("the error you accept must be above 0 people")
    return {"area": area / 100, "target": target, "level": level / 100, "points": int(points),
            "exact": "exact" in (exact or ())}


def make_plan(set_progress, _, area, target, level, points, exact, domain, info, k):
    """The Plan button's background job, on public inputs only (the box, the stated need, the
    assumed size, the bound per user): `dp.plan.plan` on the twins, its progress shown as it
    goes. Returns (the plan made, status line, result table)."""
    info = info or {}
    try:
        request = read_request(area, target, level, points, exact)
        dom = domain_from_store(domain)
        per_user = dp.contributions.check_points_per_user(k) if info.get("users") else None
    except (dp.ParameterError, LookupError, TypeError) as exc:
        return no_update, html.Div(str(exc), className="error"), no_update
    if dom.leaky:
        return no_update, html.Div("Choose a public box first: planning on a box fitted to the data "
                                   "would leak its extent.", className="error"), no_update
    if info.get("kind", "points") != "points":
        return no_update, html.Div("Planning works for point data: its synthetic twin is a city of "
                                   "points.", className="error"), no_update
    offered = usable(mechanism_options("points", info.get("counts", False)))
    names = [n for n in planning.plannable() if n in offered]

    def progress(done, total):
        set_progress((str(done), str(total), f"Planning… {done} of {total} mechanisms (free)"))

    made = {"request": request, "domain": dom.to_dict(), "k": per_user}
    rows = run_plan(progress, background.stop_requested, made["domain"], request, names, per_user)
    if background.stop_requested():
        return made, (f"Cancelled after {len(rows)} of {len(names)} mechanisms: showing those planned "
                      "(nothing read, nothing charged)."), result_view(rows, request)
    return made, "Planned: nothing read, nothing charged.", result_view(rows, request)


def run_plan(progress, should_stop, domain: dict, request: dict, names: list, k):
    """`dp.plan.plan` on the twins (reads public inputs only); rows for the page."""
    plans = planning.plan(dp.Domain.from_dict(domain), request["area"], request["target"],
                          request["level"], request["points"], names=names, points_per_user=k,
                          progress=progress, should_stop=should_stop,
                          exact_values=request.get("exact", True))
    return [{"mechanism": p.mechanism, "epsilon": p.epsilon, "error": p.error} for p in plans]


TWIN_WORDS = {"clustered": "a clustered city", "uniform": "an even spread", "cores": "three tight cores",
              "lines": "thirty roads", "values": "points on exact values",
              "strips": "points in parallel strips"}     # dp.plan's twins, as the page names them
COUNT_WORDS = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def result_view(rows: list, request: dict) -> html.Div:
    """The plan as a table: mechanism, ε needed, the error there, and a Use button; under it
    the twins it was made on and how far to trust it."""
    exact = request.get("exact", True)
    made_on = [TWIN_WORDS[s] for s in (planning.WITH_VALUES if exact else planning.SHAPES)]
    twins = COUNT_WORDS[len(made_on)]
    shapes = ", ".join(made_on[:-1]) + " and " + made_on[-1]
    labels = {k: s.label for k, s in dp.mechanisms().items()}
    head = html.Tr([html.Th("Mechanism"), html.Th("ε needed"),
                    html.Th(f"error {request['level'] * 100:g}% of the time"), html.Th("")])
    body = []
    for r in rows:
        met = r["epsilon"] is not None
        body.append(html.Tr([
            html.Td(labels.get(r["mechanism"], r["mechanism"])),
            html.Td(f"{r['epsilon']:g}" if met else f"more than {planning.LADDER[-1]:g}"),
            html.Td(f"±{count_text(round(r['error']))}" + ("" if met else " at ε = 10")),
            html.Td(html.Button(f"Use ε = {r['epsilon']:g}", n_clicks=0,
                                id={"type": ids.PLAN_USE, "mechanism": r["mechanism"], "epsilon": r["epsilon"]})
                    if met else "")]))
    return html.Div([
        html.Table(className="plan-table", children=[html.Thead(head), html.Tbody(body)]),
        html.P(f"Forecast on {twins} synthetic twins of {request['points']:,} points in your box "
               f"({shapes}), rectangles of {significant(request['area'] * 100, trim=True)}% of the "
               f"box: each ε meets the need on all {twins}, raised a few steps as a safety margin, "
               "so it may spend more than data like yours needs. Nothing of your data is read. The "
               "preview shows the clustered city.",
               className="hint"),
        html.P(planning.TRUST_VALUES if exact else planning.TRUST, className="hint plan-trust")])


def preview_src(domain: dict, request: dict, mechanism: str, epsilon: float, k) -> str:
    """The twin released with this mechanism at this ε, as a PNG data URL: what the release would
    look like (simulated with a fixed seed, never published)."""
    twin = planning.Twin(dp.Domain.from_dict(domain), request["area"], request["points"])
    rel = twin.release(mechanism, epsilon / (k or 1))
    return "data:image/png;base64," + base64.b64encode(map_image.layer_png(rel)).decode()


def register_callbacks(app, config: dict):
    app.callback(Output(ids.PLAN_MADE, "data"), Output(ids.PLAN_STATUS, "children"),
                 Output(ids.PLAN_RESULT, "children"),
                 Input(ids.PLAN_RUN, "n_clicks"),
                 State(ids.PLAN_AREA, "value"), State(ids.PLAN_TARGET, "value"),
                 State(ids.PLAN_LEVEL, "value"), State(ids.PLAN_POINTS, "value"),
                 State(ids.PLAN_EXACT, "value"),
                 State(ids.DOMAIN, "data"), State(ids.DATASET, "data"), State(ids.POINTS_PER_USER, "value"),
                 background=True, interval=500, cancel=[Input(ids.PLAN_CANCEL, "n_clicks")],
                 progress=[Output(ids.PLAN_PROGRESS, "value"), Output(ids.PLAN_PROGRESS, "max"),
                           Output(ids.PLAN_PROGRESS_TEXT, "children")],
                 progress_default=["0", "1", ""],
                 running=[(Output(ids.PLAN_RUN, "disabled"), True, False),
                          (Output(ids.PLAN_CANCEL, "hidden"), False, True),
                          (Output(ids.PLAN_STATUS, "children"), "Planning… (free)", "")],
                 prevent_initial_call=True)(make_plan)

    app.callback(Output(ids.MECHANISM, "value", allow_duplicate=True),
                 Output(ids.EPSILON_VALUE, "value", allow_duplicate=True),
                 Output(ids.PLAN_PREVIEW, "src"), Output(ids.PLAN_PREVIEW, "hidden"),
                 Output(ids.PLAN_PREVIEW, "alt"),
                 Input({"type": ids.PLAN_USE, "mechanism": ALL, "epsilon": ALL}, "n_clicks"),
                 State(ids.PLAN_MADE, "data"), prevent_initial_call=True)(use)

    app.callback(Output(ids.RELEASE_BUTTON, "children"), Input(ids.EPSILON_VALUE, "value"))(release_label)


def use(clicks, job):
    """Fill in the mechanism and ε of a plan's row, and preview it on the twin."""
    if not ctx.triggered_id or not any(clicks) or not job:
        return (no_update,) * 5
    mech, eps = ctx.triggered_id["mechanism"], ctx.triggered_id["epsilon"]
    if mech not in planning.plannable() or eps not in planning.LADDER:
        return (no_update,) * 5                       # not a row a plan made
    try:
        src = preview_src(job["domain"], job["request"], mech, eps, job.get("k"))
    except dp.ParameterError:
        return (no_update,) * 5
    label = dp.mechanisms()[mech].label
    return mech, eps, src, False, f"Preview: {label} at ε = {eps:g} on the synthetic city (not your data)"


def release_label(typed):
    """The Release button says what it spends."""
    try:
        return f"Release (spends ε = {epsilon_value(typed):g})"
    except dp.ParameterError:
        return "Release (spends ε)"
