"""Mechanism panel: picker, total epsilon (log scale), budget split, parameters, seed, release."""
from __future__ import annotations

import json
import math

from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

import dp

from . import ids, share
from server import state
from .controls import (EPS_MAX, EPS_MIN, MOSTLY_OUTSIDE, domain_from_store, epsilon_from_slider,
                       epsilon_value, mechanism_options, read_params, read_split, share_inside,
                       split_from_weights, usable)
from .help import help_box

EPS_MARKS = {-2: "0.01", -1: "0.1", 0: "1", 1: "10"}


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("2 · Mechanism"),
        help_box("mechanism"),
        dcc.Dropdown(id=ids.MECHANISM, clearable=False,
                     value=config.get("mechanism") or dp.recommend("points").name,
                     options=mechanism_options("points")),
        html.Div(recommendation_line("points"), id=ids.MECH_RECOMMENDATION, className="hint"),
        html.Div(id=ids.MECH_DESCRIPTION, className="mech-description"),
        html.Label("Total privacy budget ε (type it, or drag the log-scale slider)",
                   htmlFor=ids.EPSILON_VALUE),
        html.Div(className="epsilon-row", children=[
            dcc.Input(id=ids.EPSILON_VALUE, type="number", value=1, min=EPS_MIN, max=EPS_MAX,
                      step="any", debounce=True, className="epsilon-input"),
            dcc.Slider(id=ids.EPSILON, min=-2, max=1, step=0.01, value=0, marks=EPS_MARKS,
                       allow_direct_input=False, className="epsilon-slider")]),
        html.Div(id=ids.EPSILON_READOUT, className="readout"),
        html.Div(id=ids.PARAMS_BOX),
        html.Div(className="seed-row", children=[
            dcc.RadioItems(id=ids.SEED_MODE, value="fresh", inline=True, options=[
                {"label": " fresh randomness (private)", "value": "fresh"},
                {"label": " fixed seed: reproducible demo, NOT private ", "value": "fixed"}]),
            dcc.Input(id=ids.SEED, type="number", value=1, min=0, step=1, debounce=True,
                      className="seed-input"),
        ]),
        html.Button("Release (spends ε)", id=ids.RELEASE_BUTTON, className="primary", n_clicks=0),
        dcc.Loading(html.Div(id=ids.RELEASE_STATUS, role="status"), type="dot"),
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
    return html.Div(className="param", children=[html.Label(p.label), ctrl,
                                                  html.Div(p.help, className="hint")])


def split_controls(spec: dp.MechanismSpec, split):
    """One slider per budget part, at `split` (fractions of ε)."""
    if len(spec.budget_parts) == 1:
        return [html.Div(f"All of ε goes to the {spec.budget_parts[0]}.", className="hint"),
                html.Div(id=ids.SPLIT_READOUT, hidden=True)]
    return [html.Label("Budget split")] + [
        html.Div(className="split-row", children=[
            html.Span(part, className="split-name"),
            dcc.Slider(id={"type": ids.SPLIT, "part": i}, min=1, max=99, step=1,
                       value=round(100 * split[i]), marks=None, updatemode="drag",
                       allow_direct_input=False)])
        for i, part in enumerate(spec.budget_parts)] + [html.Div(id=ids.SPLIT_READOUT, className="readout")]


def split_readout(spec, split, epsilon) -> list:
    return [html.Div(f"{part}: {100 * f:.0f}% = ε {epsilon * f:.3g}")
            for part, f in zip(spec.budget_parts, split)]


def describe(rel: dp.Release) -> str:
    """One phrase for the released structure (the release's own `describe()`) and its level."""
    level = f", user-level (at most {rel.points_per_user} points per user)" if rel.points_per_user else ""
    return rel.describe() + level


def register_callbacks(app, config: dict):
    @app.callback(Output(ids.MECHANISM, "options"), Output(ids.MECHANISM, "value"),
                  Output(ids.MECH_RECOMMENDATION, "children"),
                  Input(ids.DATASET, "data"), State(ids.MECHANISM, "value"))
    def offer_mechanisms(info, current):
        kind = (info or {}).get("kind", "points")
        opts = mechanism_options(kind, (info or {}).get("counts", False))
        value = no_update if current in usable(opts) else dp.recommend(kind).name
        return opts, value, recommendation_line(kind)

    @app.callback(Output(ids.MECH_DESCRIPTION, "children"), Output(ids.PARAMS_BOX, "children"),
                  Input(ids.MECHANISM, "value"), State(ids.URL, "search"))
    def show_mechanism(name, search):
        """The mechanism's description, split sliders and parameter controls: at the values of
        the link the page was opened with when it names this mechanism, else the defaults."""
        spec = dp.mechanisms()[name]
        link = link_settings(search, spec.data_kind)
        split, values = (link.split, link.params) if link and link.mechanism == name \
            else (spec.default_split, {})
        desc = [html.Div(spec.description), html.Div(["Guarantee: ", spec.guarantee], className="guarantee")]
        params = split_controls(spec, split) + [param_control(p, values.get(p.name, p.default))
                                                for p in spec.params]
        return desc, params

    @app.callback(Output(ids.EPSILON_VALUE, "value"), Output(ids.EPSILON, "value"),
                  Input(ids.EPSILON_VALUE, "value"), Input(ids.EPSILON, "value"),
                  prevent_initial_call=True)
    def sync_epsilon(typed, v):
        """The slider writes a rounded ε into the box; a typed ε moves the slider (the box holds
        the exact value every reader uses)."""
        if ctx.triggered_id == ids.EPSILON:
            return epsilon_from_slider(v), no_update
        try:
            return no_update, math.log10(epsilon_value(typed))
        except dp.ParameterError:
            return no_update, no_update     # the readout says what is wrong

    @app.callback(Output(ids.EPSILON_READOUT, "children"), Input(ids.EPSILON_VALUE, "value"),
                  Input(ids.MECHANISM, "value"), Input({"type": ids.PARAM, "name": ALL}, "value"),
                  Input(ids.DOMAIN, "data"), State({"type": ids.PARAM, "name": ALL}, "id"))
    def show_epsilon(typed, name, pvals, domain, pids):
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

    @app.callback(Output(ids.SPLIT_READOUT, "children"),
                  Input({"type": ids.SPLIT, "part": ALL}, "value"), Input(ids.EPSILON_VALUE, "value"),
                  State(ids.MECHANISM, "value"))
    def show_split(weights, typed, name):
        spec = dp.mechanisms()[name]
        if len(weights) != len(spec.budget_parts):
            return no_update
        try:
            return split_readout(spec, split_from_weights(weights), epsilon_value(typed))
        except dp.ParameterError as exc:
            return html.Div(str(exc), className="error")

    # The domain is an Input only so that a release for newly loaded data waits for the data
    # panel to publish the domain that comes with it; a change of domain alone releases nothing.
    @app.callback(Output(ids.RELEASE, "data"), Output(ids.RELEASE_STATUS, "children"),
                  Input(ids.RELEASE_BUTTON, "n_clicks"), Input(ids.DATASET, "data"),
                  Input(ids.DOMAIN, "data"),
                  State(ids.MECHANISM, "value"), State(ids.EPSILON_VALUE, "value"),
                  State({"type": ids.SPLIT, "part": ALL}, "value"),
                  State({"type": ids.PARAM, "name": ALL}, "value"),
                  State({"type": ids.PARAM, "name": ALL}, "id"),
                  State(ids.SEED_MODE, "value"), State(ids.SEED, "value"),
                  State(ids.POINTS_PER_USER, "value"), State(ids.URL, "search"),
                  State(ids.RELEASE, "data"))
    def run_release(_, info, domain_info, name, eps_v, weights, pvals, pids, seed_mode, seed, k,
                    search, current):
        triggers = {prop.rsplit(".", 1)[0] for prop in ctx.triggered_prop_ids}
        if not info or not triggers & {ids.RELEASE_BUTTON, ids.DATASET}:
            return no_update, no_update
        sid = state.session_id()
        kind = info.get("kind", "points")
        # a link sets the page's first release of the built-in sample; an upload is released with
        # the settings on screen (a link must never spend the owner's budget on their own data)
        first_sample = ids.DATASET in triggers and current is None and info["origin"].startswith("sample:")
        link = link_settings(search, kind) if first_sample else None
        if ids.DATASET in triggers:   # a reload or a re-load of data: show what was paid for
            restored = restore(sid, info, link)
            if restored is not None:
                return restored
            if link is None and any(state.key_fingerprint(c.ref) == info["fingerprint"]   # paid for, but gone
                                    for c in state.account(sid, info["account"]).charges if c.ref):
                return None, html.Div("Your last release of this data is no longer on the server. "
                                      "Press Release for a new one (it spends ε again).",
                                      className="warning")
        if name not in usable(mechanism_options(kind, info.get("counts", False))):
            name = dp.recommend(kind).name   # new data of another kind: the picker is switching too
        try:
            if link is not None:          # the page's first release follows the link it was opened with
                name, epsilon, split, params, domain = (link.mechanism, link.epsilon, list(link.split),
                                                        link.params, link.domain)
            else:
                spec = dp.mechanisms()[name]
                epsilon = epsilon_value(eps_v)
                split = read_split(spec, weights)
                params = spec.resolve_params(read_params(spec, pvals, pids))
                domain = domain_from_store(domain_info)
            spec = dp.mechanisms()[name]
            seed = None if seed_mode == "fresh" else int(seed if seed is not None else 0)
            k = points_per_user(info, k)
            check_coverage(state.points(sid, info["fingerprint"]), domain)
            key = state.release_key(info["fingerprint"], domain, name, params, split, epsilon, seed, k)
            rel = state.release(sid, key, create=True)
        except (dp.ParameterError, dp.DataError, dp.BudgetError, LookupError) as exc:
            if ids.DATASET in triggers:       # new data: no panel may keep showing the old release
                return None, html.Div(["No release of this data yet: ", str(exc)], className="error")
            return no_update, html.Div(["Not released: ", str(exc), html.Div(
                "The map and tables still show your previous release of this data.",
                className="hint")], className="error")
        summary = {"key": key, "mechanism": name, "label": spec.label, "epsilon": epsilon,
                   "split": split, "private": rel.private}
        if rel.reproducible_demo:
            status = html.Div([f"Released {spec.label} at ε = {epsilon:g}, {describe(rel)}. ",
                               html.Strong(f"Reproducible demo (seed {seed}): NOT private, the noise "
                                           "can be removed by anyone who knows the seed.")],
                              className="warning demo-release")
        else:
            status = html.Div(f"Released {spec.label} at ε = {epsilon:g}, {describe(rel)} "
                              "(fresh randomness).", className="ok")
        return summary, status


def check_coverage(data, domain: dp.Domain) -> None:
    """Refuse a release on a box that leaves out most of the data: it would publish noise over
    the wrong place (the Data panel offers boxes that fit)."""
    if share_inside(data, domain) < MOSTLY_OUTSIDE:
        raise dp.DataError(f"most of the data lies outside the domain box “{domain.name}”; "
                           "choose a domain that contains it in panel 1 (Data), which offers some")


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


def restore(sid: str, info: dict, link=None):
    """(release summary, status) of this session's latest release of the data still on the
    server, or None: reloading the page shows it again instead of spending ε on a new draw. With
    a link's settings, only a release made with those settings is shown again."""
    key = state.last_release_key(sid, info)
    try:
        rel = state.release(sid, key) if key else None
    except LookupError:      # dropped between the two reads
        return None
    if rel is None:
        return None
    _, dom, name, params, split, epsilon, _, _ = json.loads(key)
    if link is not None and not link.matches(name, epsilon, split, params, dp.Domain.from_dict(dom)):
        return None
    summary = {"key": key, "mechanism": name, "label": rel.spec.label, "epsilon": epsilon,
               "split": split, "private": rel.private}
    return summary, html.Div(f"Showing your last release of this data: {rel.spec.label} at "
                             f"ε = {epsilon:g}, {describe(rel)} (already paid for; no new spend).",
                             className="ok")
