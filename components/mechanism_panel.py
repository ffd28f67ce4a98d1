"""Mechanism panel: picker, total epsilon (log scale), budget split, parameters, seed, release."""
from __future__ import annotations

import math

from dash import ALL, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import MissingCallbackContextException, PreventUpdate

import dp

from . import ids, share
from server import background, releases, sessions, state, workspace
from server.faults import Unavailable
from server.release_key import ReleaseKey
from .controls import (EPS_MAX, EPS_MIN, MOSTLY_OUTSIDE, domain_from_store, epsilon_from_slider,
                       epsilon_value, mechanism_options, read_params, read_split, request_ids,
                       share_inside, split_from_weights, usable)
from .help import help_box

EPS_MARKS = {-2: "0.01", -1: "0.1", 0: "1", 1: "10"}


def layout(config: dict) -> html.Div:
    """The panel at the settings of the release the workspace shows (`config["page"]`), else at
    the defaults for the loaded data."""
    info, rec = config["page"]["dataset"], config["page"]["release"]
    kind = info.get("kind", "points")
    opts = mechanism_options(kind, info.get("counts", False))
    start = config.get("mechanism") if config.get("mechanism") in usable(opts) else dp.recommend(kind).name
    rec = rec or {"mechanism": start, "epsilon": 1, "seed": None}
    return html.Div(className="card", children=[
        help_box("mechanism"),
        dcc.Dropdown(id=ids.MECHANISM, clearable=False, value=rec["mechanism"], options=opts),
        html.Div(recommendation_line(kind), id=ids.MECH_RECOMMENDATION, className="hint"),
        html.Div(id=ids.MECH_DESCRIPTION, className="mech-description"),
        html.Label("Total privacy budget ε (type it, or drag the log-scale slider)",
                   htmlFor=ids.EPSILON_VALUE),
        html.Div(className="epsilon-row", children=[
            dcc.Input(id=ids.EPSILON_VALUE, type="number", value=rec["epsilon"], min=EPS_MIN,
                      max=EPS_MAX, step="any", debounce=True, className="epsilon-input"),
            html.Div(dcc.Slider(id=ids.EPSILON, min=-2, max=1, step=0.01, value=math.log10(rec["epsilon"]),
                                marks=EPS_MARKS, allow_direct_input=False),
                     className="epsilon-slider", **{"data-a11y-label": "total privacy budget ε, log scale"})]),
        html.Div(id=ids.EPSILON_READOUT, className="readout"),
        html.Div(id=ids.PARAMS_BOX),
        html.Div(className="seed-row", children=[
            dcc.RadioItems(id=ids.SEED_MODE, value="fresh" if rec["seed"] is None else "fixed",
                           inline=True, options=[
                {"label": " fresh randomness (private)", "value": "fresh"},
                {"label": " fixed seed: reproducible demo, NOT private ", "value": "fixed"}]),
            html.Label("demo seed", htmlFor=ids.SEED, className="sr-only"),
            dcc.Input(id=ids.SEED, type="number", value=1 if rec["seed"] is None else rec["seed"],
                      min=0, step=1, debounce=True,
                      className="seed-input"),
        ]),
        html.Div([
            html.Button("Release (spends ε)", id=ids.RELEASE_BUTTON, className="primary", n_clicks=0),
            html.Button("Cancel", id=ids.RELEASE_CANCEL, n_clicks=0, hidden=True,
                        title="Stop this release if its noise is not drawn yet: nothing is charged then")]),
        html.Div(id=ids.RELEASE_PROGRESS_TEXT, role="status", className="hint"),
        dcc.Loading(html.Div(id=ids.RELEASE_STATUS, role="status"), type="dot"),
        dcc.Store(id=ids.RELEASE_MADE),
    ])


def point_mechanisms() -> list[str]:
    """Names of the private mechanisms for point data: what the app may start with."""
    return [o["value"] for o in mechanism_options("points")]


def recommendation_line(kind: str) -> str:
    """One line naming the recommended mechanism for this kind of data and why."""
    rec = dp.recommend(kind)
    return f"★ Recommended: {dp.mechanisms()[rec.name].label}, {rec.reason}."


def param_control(p: dp.Param, value):
    """A labelled control for one mechanism parameter at `value`, with its help text."""
    pid = {"type": ids.PARAM, "name": p.name}
    if p.kind is bool:
        ctrl = dcc.Checklist(id=pid, options=[{"label": " on", "value": "on"}],
                             value=["on"] if value else [])
    elif p.choices:
        ctrl = dcc.Dropdown(id=pid, options=list(p.choices), value=value, clearable=False)
    elif p.kind is list:
        ctrl = dcc.Input(id=pid, type="text", value=", ".join(map(str, value)), debounce=True)
    else:
        ctrl = dcc.Input(id=pid, type="number", value=value, min=p.min, max=p.max,
                         step=1 if p.kind is int else "any", debounce=True)
    return html.Div(className="param", children=[html.Label([html.Span(p.label, className="param-label"), ctrl]),
                                                  html.Div(p.help, className="hint")])


def split_controls(spec: dp.MechanismSpec, split):
    """One slider per budget part, at `split` (fractions of ε)."""
    if len(spec.budget_parts) == 1:
        return [html.Div(f"All of ε goes to the {spec.budget_parts[0]}.", className="hint"),
                html.Div(id=ids.SPLIT_READOUT, hidden=True)]
    return [html.Label("Budget split")] + [
        html.Div(className="split-row", children=[
            html.Span(part, className="split-name"),
            html.Div(dcc.Slider(id={"type": ids.SPLIT, "part": i}, min=1, max=99, step=1,
                                value=round(100 * split[i]), marks=None, updatemode="drag",
                                allow_direct_input=False),
                     className="split-slider", **{"data-a11y-label": f"share of ε for {part}, percent"})])
        for i, part in enumerate(spec.budget_parts)] + [html.Div(id=ids.SPLIT_READOUT, className="readout")]


def split_readout(spec, split, epsilon) -> list:
    return [html.Div(f"{part}: {100 * f:.0f}% = ε {epsilon * f:.3g}")
            for part, f in zip(spec.budget_parts, split)]


def describe(rel: dp.Release) -> str:
    """One phrase for the released structure (the release's own `describe()`) and its level,
    and for a mechanism that picks its method (the adaptive one) why it picked it
    (`Release.choice`, read off its charged probe)."""
    level = f", user-level (at most {rel.points_per_user} points per user)" if rel.points_per_user else ""
    return rel.describe() + level + (f"; {rel.choice}" if rel.choice else "")


def register_callbacks(app, config: dict):
    app.callback(Output(ids.MECHANISM, "options"), Output(ids.MECH_RECOMMENDATION, "children"),
                 Input(ids.DATASET, "data"))(offer_mechanisms)

    app.callback(Output(ids.MECH_DESCRIPTION, "children"), Output(ids.PARAMS_BOX, "children"),
                 Input(ids.MECHANISM, "value"), State(ids.URL, "search"))(show_mechanism)

    app.callback(Output(ids.EPSILON_VALUE, "value"), Output(ids.EPSILON, "value"),
                 Input(ids.EPSILON_VALUE, "value"), Input(ids.EPSILON, "value"),
                 prevent_initial_call=True)(sync_epsilon)

    app.callback(Output(ids.EPSILON_READOUT, "children"), Input(ids.EPSILON_VALUE, "value"),
                 Input(ids.MECHANISM, "value"), Input({"type": ids.PARAM, "name": ALL}, "value"),
                 Input(ids.DOMAIN, "data"), State({"type": ids.PARAM, "name": ALL}, "id"))(show_epsilon)

    app.callback(Output(ids.SPLIT_READOUT, "children"),
                 Input({"type": ids.SPLIT, "part": ALL}, "value"), Input(ids.EPSILON_VALUE, "value"),
                 State(ids.MECHANISM, "value"))(show_split)

    request_ids(app, ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)

    # One click, one spend: the click's request id keys the spend (`workspace.once`), so a
    # callback fired twice charges once. The click is a background callback (a job of its own,
    # shown step by step, cancelled up to the draw) whose result goes to a store; one callback
    # (`show_release`) writes what the page shows of releases, so Dash's rule that the newest
    # call of a callback wins orders a click's result against new data, a new box or a page
    # load (two callbacks writing these outputs could land in either order).
    app.callback(Output(ids.RELEASE_MADE, "data"),
                 Input(ids.RELEASE_REQUEST, "data"), State(ids.DATASET, "data"), State(ids.DOMAIN, "data"),
                 State(ids.MECHANISM, "value"), State(ids.EPSILON_VALUE, "value"),
                 State({"type": ids.SPLIT, "part": ALL}, "value"),
                 State({"type": ids.PARAM, "name": ALL}, "value"),
                 State({"type": ids.PARAM, "name": ALL}, "id"),
                 State(ids.SEED_MODE, "value"), State(ids.SEED, "value"),
                 State(ids.POINTS_PER_USER, "value"),
                 background=True, interval=RELEASE_POLL_MS, cancel=[Input(ids.RELEASE_CANCEL, "n_clicks")],
                 progress=[Output(ids.RELEASE_PROGRESS_TEXT, "children")], progress_default=[""],
                 running=[(Output(ids.RELEASE_BUTTON, "disabled"), True, False),
                          (Output(ids.RELEASE_CANCEL, "hidden"), False, True)],
                 prevent_initial_call=True)(release_click)
    app.callback(Output(ids.RELEASE, "data"), Output(ids.RELEASE_STATUS, "children"),
                 Output(ids.MECHANISM, "value"), Output(ids.EPSILON_VALUE, "value", allow_duplicate=True),
                 Output(ids.SEED_MODE, "value"), Output(ids.SEED, "value"),
                 Output(ids.PARAMS_BOX, "children", allow_duplicate=True), Output(ids.LINK_OVER, "data"),
                 Input(ids.RELEASE_MADE, "data"), Input(ids.DATASET, "data"), Input(ids.DOMAIN, "data"),
                 State(ids.RELEASE, "data"), State(ids.MECHANISM, "value"), State(ids.EPSILON_VALUE, "value"),
                 State(ids.SEED_MODE, "value"), State(ids.SEED, "value"), State(ids.URL, "search"),
                 State(ids.LINK_OVER, "data"), prevent_initial_call="initial_duplicate")(show_release)


def offer_mechanisms(info):
    """The mechanisms for the loaded data (the release callback moves the picker)."""
    kind = (info or {}).get("kind", "points")
    return mechanism_options(kind, (info or {}).get("counts", False)), recommendation_line(kind)


def show_mechanism(name, search):
    """The mechanism's description, split sliders and parameter controls: at the values of
    the link the page was opened with when it names this mechanism, else at those of the
    release shown when it is of this mechanism, else the defaults."""
    if name not in dp.mechanisms():       # the picker empties while it switches to new data
        raise PreventUpdate
    spec = dp.mechanisms()[name]
    desc = [html.Div(spec.description), html.Div(["Guarantee: ", spec.guarantee], className="guarantee")]
    return desc, settings_controls(spec, *shown_settings(sessions.session_id(), name, search, spec))


def sync_epsilon(typed, v):
    """The slider writes a rounded ε into the box; a typed ε moves the slider (the box holds
    the exact value every reader uses)."""
    if ctx.triggered_id == ids.EPSILON:
        return epsilon_from_slider(v), no_update
    try:
        return no_update, math.log10(epsilon_value(typed))
    except dp.ParameterError:
        return no_update, no_update     # the readout says what is wrong


def show_epsilon(typed, name, pvals, domain, pids):
    """The ε typed, checked, and what the mechanism says of it before release (e.g. the shifted
    grids' equivalent ε)."""
    try:
        eps = epsilon_value(typed)
    except dp.ParameterError as exc:
        return html.Div(str(exc), className="error")
    spec = dp.mechanisms().get(name)
    if spec is None or spec.explain is None:
        return f"ε = {eps:g}"
    try:
        params = spec.resolve_params(read_params(spec, pvals, pids))
        note = spec.explain(domain_from_store(domain), params, eps)
    except (dp.ParameterError, LookupError, TypeError) as exc:
        note = str(exc)
    return [html.Div(f"ε = {eps:g}"), html.Div(note, className="equivalent-eps")]


def show_split(weights, typed, name):
    """The budget split in percent and ε per part."""
    spec = dp.mechanisms().get(name)
    if spec is None or len(weights) != len(spec.budget_parts):
        return no_update
    try:
        return split_readout(spec, split_from_weights(weights), epsilon_value(typed))
    except dp.ParameterError as exc:
        return html.Div(str(exc), className="error")


RELEASE_POLL_MS = 50       # how often a page asks for a running release (a release takes tens of ms)
KEEP_CONTROLS = (no_update,) * 5   # the mechanism, ε, seed mode, seed and parameters, as they are
RELEASING = "Releasing: drawing the noise and charging ε…"
CANCELLED = "cancelled before its noise was drawn; nothing was charged"


@background.quick
def release_click(set_progress, request, info: dict, domain_info, name, eps_v, weights, pvals, pids,
                  seed_mode, seed, k) -> dict:
    """A Release click, as a background job of the session: the release with the panel's
    settings, spent once per click's request id; returns {"summary": …} or {"error": why
    nothing was spent} for the page to take (`take_release`). Cancelled before the draw,
    nothing is spent."""
    if not info:
        raise PreventUpdate
    sid = sessions.session_id()
    set_progress(RELEASING)
    settings = (name, eps_v, weights, pvals, pids, seed_mode, seed, k)
    try:
        return workspace.once(sid, (request or {}).get("id"), lambda: spend(sid, info, domain_info, *settings))
    except LookupError as exc:         # the click could not be recorded: nothing ran
        return {"error": str(exc)}


def show_release(made: dict | None, info: dict | None, domain_info, current, name, eps_v, seed_mode,
                 seed, search, link_over) -> tuple:
    """What the page shows of releases: a Release click's result when that set it off
    (`take_release`), else the release already paid for of the data and box shown
    (`shown_release`). Returns the release store, status line, mechanism, ε, seed mode, seed,
    parameters and whether the link's first view is over."""
    if triggered(ids.RELEASE_MADE) and made:
        taken = take_release(made, info, domain_info, current)
        if taken is not None:
            return taken[:2] + KEEP_CONTROLS + taken[2:]
    return shown_release(info, domain_info, name, eps_v, seed_mode, seed, search, link_over)


def take_release(made: dict, info: dict | None, domain_info, current) -> tuple | None:
    """(release store, status line, link's first view over) for a Release click's result, or
    None when the page has moved to other data or another box since: that release stays
    recorded and charged (choosing that data and box again shows it) and the page shows the
    release paid for of what it shows now (Dash may have dropped that call for this one)."""
    if "summary" in made and not of_page(made["summary"]["key"], info, domain_info):
        return None
    return release_view(made, current) + (True,)


def of_page(key: str, info: dict | None, domain_info) -> bool:
    """True when the release with this key is of the data and box the page shows."""
    try:
        k = ReleaseKey.parse(key)
        return bool(info) and k.fingerprint == info["fingerprint"] and k.box == domain_from_store(domain_info)
    except (dp.ParameterError, LookupError, TypeError, ValueError):
        return False


def shown_release(info: dict, domain_info, name, eps_v, seed_mode, seed, search, link_over) -> tuple:
    """When new data, a new box or a page load arrives (spending nothing): the release already
    paid for and the controls set to its settings, or, on a link's first view (the link not yet
    over: new data ends it), only a release made with the link's settings, whose controls the
    link filled in. The picker moves with data of another kind. Returns the release store,
    status line, mechanism, ε, seed mode, seed, parameters and whether the link is over."""
    if not info:
        return (None, "") + KEEP_CONTROLS + (no_update,)
    sid = sessions.session_id()
    link_over = bool(link_over) or triggered(ids.DATASET)
    kind = info.get("kind", "points")
    link = link_settings(search, kind) if not link_over else None
    rec, status = paid_release(sid, info, domain_info, link)
    if rec is None:                        # data of another kind: the picker moves with it
        offered = usable(mechanism_options(kind, info.get("counts", False)))
        return (None, status, no_update if name in offered else dp.recommend(kind).name) \
            + KEEP_CONTROLS[1:] + (link_over,)
    if link is not None:                   # made with the link's settings: its controls stay
        return (rec, status) + KEEP_CONTROLS + (link_over,)
    return (rec, status) + control_values(rec, name, eps_v, seed_mode, seed) + (link_over,)


def triggered(component: str) -> bool:
    """True when the callback running was set off by this component's data store (False
    outside a Dash callback)."""
    try:
        return f"{component}.data" in ctx.triggered_prop_ids
    except MissingCallbackContextException:
        return False


def spend(sid: str, info: dict, domain_info, name, eps_v, weights, pvals, pids, seed_mode, seed,
          k) -> dict:
    """Release the loaded data with the panel's settings (charged to its account) and record it
    in the workspace as the release shown: {"summary": …}, or {"error": why nothing was spent}."""
    kind = info.get("kind", "points")
    try:
        spec = dp.mechanisms()[name]
        if name not in usable(mechanism_options(kind, info.get("counts", False))):
            raise dp.ParameterError(f"{spec.label} does not apply to this data; pick one of the "
                                    "mechanisms offered")
        epsilon = epsilon_value(eps_v)
        split = read_split(spec, weights)
        params = spec.resolve_params(read_params(spec, pvals, pids))
        domain = domain_from_store(domain_info)
        seed = None if seed_mode == "fresh" else int(seed if seed is not None else 0)
        k = points_per_user(info, k)
        check_coverage(state.points(sid, info["fingerprint"]), domain)
        key = releases.release_key(info["fingerprint"], domain, name, params, split, epsilon, seed, k)
        if background.stop_requested(fresh=True):  # cancelled (or the server stopping): not drawn
            return {"error": CANCELLED}
        rel = releases.release(sid, key, create=True)
    except (dp.ParameterError, dp.DataError, dp.BudgetError, LookupError) as exc:
        return {"error": str(exc)}
    summary = release_summary(key, rel)
    try:
        workspace.add_release(sid, summary)
    except LookupError as exc:   # released and charged, but the store keeps no record of it
        return {"summary": summary, "unkept": str(exc)}
    return {"summary": summary}


def release_summary(key: str, rel) -> dict:
    """The workspace's record of a release: its settings (read back from its key) and what the
    page says of it."""
    k = ReleaseKey.parse(key)
    return {"key": key, "mechanism": k.mechanism, "label": dp.mechanisms()[k.mechanism].label,
            "epsilon": k.epsilon, "split": k.split, "params": k.params, "seed": k.seed,
            "k": k.points_per_user, "private": rel.private, "description": describe(rel),
            "domain": k.box.name}


def release_view(result: dict, current) -> tuple:
    """(release store, status line) for the result of a Release click."""
    if "error" in result:
        still = html.Div("The map and tables still show your previous release.", className="hint") \
            if current else None
        return no_update, html.Div(["Not released: ", result["error"], still], className="error")
    s = result["summary"]
    if result.get("unkept"):
        return s, html.Div([f"Released {s['label']} at ε = {s['epsilon']:g}, {s['description']} "
                            "(charged). ", html.Strong("The server could not record it, so a reload "
                                                       "will not show it again.")], className="warning")
    if s["seed"] is not None:
        return s, html.Div([f"Released {s['label']} at ε = {s['epsilon']:g}, {s['description']}. ",
                            html.Strong(f"Reproducible demo (seed {s['seed']}): NOT private, the "
                                        "noise can be removed by anyone who knows the seed.")],
                           className="warning demo-release")
    return s, html.Div(f"Released {s['label']} at ε = {s['epsilon']:g}, {s['description']} "
                       "(fresh randomness).", className="ok")


def paid_release(sid: str, info: dict, domain_info, link=None) -> tuple:
    """(release record or None, status) for data and a domain newly shown: the workspace's latest
    release of them, already paid for, when it is still on the server (with a link, only one
    made with the link's settings); the workspace then shows it. Nothing is spent here."""
    rec, gone = None, False
    try:
        domain = domain_from_store(domain_info)
        adopt_unrecorded(sid, info["fingerprint"], domain)
        rec = workspace.latest(sid, info["fingerprint"], domain)
        if rec is not None and link is not None and not link.matches(
                rec["mechanism"], rec["epsilon"], rec["split"], rec["params"], domain):
            rec = None
        if rec is not None:
            releases.release(sid, rec["key"])
    except Unavailable as exc:                 # the store or the accounts failed: say so
        return None, html.Div(["Cannot show your releases: ", str(exc)], className="error")
    except (dp.ParameterError, LookupError) as exc:
        gone = rec is not None
        if not gone:
            workspace.show(sid, None)
            return None, html.Div(["No release: ", str(exc)], className="error")
    workspace.show(sid, None if gone or rec is None else rec["key"])
    if rec is not None and not gone:
        demo = f" Reproducible demo (seed {rec['seed']}): NOT private." if rec["seed"] is not None else ""
        return rec, html.Div(f"Showing your release of this data on “{domain.name}”: {rec['label']} "
                             f"at ε = {rec['epsilon']:g}, {rec['description']} (already paid for; "
                             f"no new spend).{demo}", className="warning" if demo else "ok")
    if gone:
        return None, html.Div("Your last release of this data on this box is no longer on the "
                              "server. Press Release for a new one (it spends ε again).",
                              className="warning")
    try:
        check_coverage(state.points(sid, info["fingerprint"]), domain)
    except (dp.DataError, LookupError) as exc:
        return None, html.Div(["No release of this data yet: ", str(exc)], className="error")
    if link is not None:
        return None, html.Div(f"The link's settings are filled in: {dp.mechanisms()[link.mechanism].label} "
                              f"at ε = {link.epsilon:g} on “{link.domain.name}”. Press Release to "
                              "publish them (it spends ε); opening a link spends nothing.",
                              className="hint")
    return None, html.Div("Nothing released on this data and box yet: press Release to publish "
                          "(it spends ε).", className="hint")


def adopt_unrecorded(sid: str, fingerprint: str, domain: dp.Domain) -> None:
    """Record a paid release whose record was lost (its worker stopped between the charge and
    the record), so the page shows it as the last one paid for, not an older one."""
    recorded = {r["key"] for r in workspace.get(sid).get("releases", [])}
    key = releases.unrecorded_release(sid, fingerprint, domain, recorded)
    if key is not None:
        workspace.add_release(sid, release_summary(key, releases.release(sid, key)))


def control_values(rec: dict, name, eps_v, seed_mode, seed) -> tuple:
    """(mechanism, ε, seed mode, seed, parameter controls) set to a release record's settings;
    no_update where they already agree (the mechanism's own callback draws its controls then)."""
    spec = dp.mechanisms()[rec["mechanism"]]
    mode = "fresh" if rec["seed"] is None else "fixed"
    return (rec["mechanism"] if rec["mechanism"] != name else no_update,
            rec["epsilon"] if eps_v != rec["epsilon"] else no_update,
            mode if mode != seed_mode else no_update,
            rec["seed"] if rec["seed"] is not None and rec["seed"] != seed else no_update,
            settings_controls(spec, rec["split"], rec["params"]) if rec["mechanism"] == name else no_update)


def settings_controls(spec: dp.MechanismSpec, split, values: dict) -> list:
    """The split sliders and parameter controls of a mechanism at these settings."""
    return split_controls(spec, split) + [param_control(p, values.get(p.name, p.default))
                                          for p in spec.params]


def shown_settings(sid: str, name: str, search, spec: dp.MechanismSpec) -> tuple:
    """(split, parameters) a mechanism's controls open at: the link's when it names it, else
    those of the release shown when it is of this mechanism, else the defaults."""
    link = link_settings(search, spec.data_kind)
    if link is not None and link.mechanism == name:
        return link.split, link.params
    rec = workspace.shown(sid)
    if rec is not None and rec["mechanism"] == name:
        return rec["split"], rec["params"]
    return spec.default_split, {}


def check_coverage(data, domain: dp.Domain) -> None:
    """Refuse a release on a box that leaves out most of the data: it would publish noise over
    the wrong place (the Data panel offers boxes that fit)."""
    if share_inside(data, domain) < MOSTLY_OUTSIDE:
        raise dp.DataError(f"most of the data lies outside the domain box “{domain.name}”; "
                           "choose a domain that contains it in step 1 (Data), which offers some")


def points_per_user(info: dict, k) -> int | None:
    """k for points with user ids (dp applies it to the mechanisms it fits), else None."""
    if info.get("kind", "points") != "points" or not info.get("users"):
        return None
    return dp.contributions.check_points_per_user(dp.DEFAULT_POINTS_PER_USER if k is None else k)


def link_settings(search: str | None, kind: str):
    """The settings of the link the page was opened with, if any apply to this kind of data (a
    broken link is reported by the share module and ignored here)."""
    link = share.valid_link(search)
    return link if link is not None and dp.mechanisms()[link.mechanism].data_kind == kind else None
