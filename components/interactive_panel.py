"""Interactive queries (spec 002, Mode A): each rectangle is answered on the spot by users who
keep per-user geo-privacy budgets; savings are reused for later queries."""
from __future__ import annotations

import time

import plotly.graph_objects as go
from dash import Input, Output, State, ctx, dash_table, dcc, html, no_update
from plotly.subplots import make_subplots

import dp

from . import ids, render
from server import live, sessions, state, workspace
from .charts import chart, chart_place, place_id
from .controls import domain_from_store, parse_typed, rects_from_geojson, request_ids
from .help import help_box
from .numbers import significant

# labels of the values dp.interactive accepts (dp.interactive.STRATEGIES and METHODS)
STRATEGY_LABELS = {"none": "none: each query gets B/m, savings unused",
                   "even": "even: savings spread evenly over what is left",
                   "gamma": "gamma: reuse a share γ of the savings",
                   "linear": "linear: allocation grows with the queries left"}
METHOD_LABELS = {"pm-dist": "iterative elimination, distances (pm-dist)",
                 "pm-pt": "iterative elimination, points (pm-pt)",
                 "bm-dist": "baseline, distances (bm-dist)",
                 "bm-pt": "baseline, points (bm-pt)"}
DEFAULT_STRATEGY, DEFAULT_METHOD = "gamma", "pm-dist"
DEFAULT_SIGMA, DEFAULT_PLANNED = 100, 10
COLUMNS = [("k", "#"), ("answer", "Private answer"), ("true_count", "True (owner only)"),
           ("rel_error", "Rel. error"), ("baseline_answer", "One-shot baseline (owner only)"),
           ("reference_answer", "Single full-budget release (owner only)"),
           ("sigma_mean_m", "Mean noise σ allocated (m)"), ("saving", "Saved this query"),
           ("remaining", "Budget left (mean)"), ("n_halted", "Users halted")]
IA_CHART = {"style": {"height": "320px"}}     # each of the session's two charts
ROUNDS = 10                     # elimination rounds per query: at most this many answers per point
CHARGE_RADIUS_M = 100.0         # sessions are charged for telling apart places this far apart


def choice_options(values, labels: dict) -> list[dict]:
    """Dropdown options for the values dp accepts, in the order of `labels`; a value dp adds
    later is offered under its own name."""
    ordered = [v for v in labels if v in values] + [v for v in values if v not in labels]
    return [{"label": labels.get(v, v), "value": v} for v in ordered]


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("Interactive queries with per-user budgets"),
        help_box("interactive"),
        html.Div(className="eval-controls", children=[
            html.Div([
                html.Label("Each user's budget: noise σ if spent on one query (metres)", htmlFor=ids.IA_SIGMA),
                dcc.Input(id=ids.IA_SIGMA, type="number", value=DEFAULT_SIGMA, min=1, max=100000,
                          debounce=True),
                html.Div(id=ids.IA_GUARANTEE, className="guarantee"),
            ]),
            html.Div([
                html.Label("Planned queries m", htmlFor=ids.IA_PLANNED),
                dcc.Input(id=ids.IA_PLANNED, type="number", value=DEFAULT_PLANNED, min=1, max=1000, step=1),
                html.Label("Budgeting strategy"),
                dcc.Dropdown(id=ids.IA_STRATEGY, value=DEFAULT_STRATEGY, clearable=False,
                             options=choice_options(dp.interactive.STRATEGIES, STRATEGY_LABELS)),
                html.Label("Method"),
                dcc.Dropdown(id=ids.IA_METHOD, value=DEFAULT_METHOD, clearable=False,
                             options=choice_options(dp.interactive.METHODS, METHOD_LABELS)),
            ]),
        ]),
        html.Button("Start a new session (spends budget)", id=ids.IA_START, n_clicks=0, className="primary"),
        dcc.Checklist(id=ids.IA_FOLLOW, value=["on"], inline=True, options=[
            {"label": " answer every rectangle I draw on the map with this session", "value": "on"}]),
        html.Div(className="query-tools", children=[
            html.Div(dcc.Input(id=ids.IA_TYPED, placeholder="west, south, east, north", debounce=True),
                     className="wide"),
            html.Button("Ask", id=ids.IA_ASK, n_clicks=0)]),
        dcc.Loading(html.Div(id=ids.IA_STATUS, role="status"), type="dot"),
        dash_table.DataTable(id=ids.IA_TABLE, columns=[{"name": n, "id": i} for i, n in COLUMNS], data=[],
                             page_size=10, style_cell={"fontSize": "12px"}),
        html.Div(className="eval-figs", children=[chart_place(ids.IA_PLOT), chart_place(ids.IA_HIST)]),
        dcc.Store(id=ids.IA_INFO), dcc.Store(id=ids.IA_REQUEST),
    ])


def guarantee_text(sigma_m: float, planned: int = 10, method: str = "pm-dist") -> list:
    """The per-user guarantee at 10 m, 100 m and 1 km (ε at δ = 1e-6 for two such locations),
    with the noise grid's rounding allowance for the answers one point gives over the plan."""
    ia = dp.interactive
    rho = float(ia.rho_from_sigma(sigma_m))
    answers = int(planned) * ROUNDS
    s = snap_allowance(sigma_m, planned, method)
    eps = {r: ia.cgp_epsilon_at(rho, r + s, 1e-6) for r in (10.0, 100.0, 1000.0)}
    charge = session_charge(sigma_m, planned, method)
    return [html.Div(f"Whole-session guarantee per user: ρ = {significant(rho, 3, trim=True)} per m² (Gaussian geo-privacy)."),
            html.Div("Telling two locations apart: " + ", ".join(
                f"{int(r) if r < 1000 else '1 km'}{' m' if r < 1000 else ''} apart: ε = {significant(e, trim=True)}"
                for r, e in eps.items()) + f" (at δ = 10⁻⁶, for up to {answers} answers per location, "
                f"counting {significant(s, trim=True)} m of rounding to the noise grid). Nearby places stay hidden; far "
                "ones less so."),
            html.Div(f"Starting a session charges this dataset's sessions line ρ = {significant(charge, 3, trim=True)} (zCDP: "
                     f"the cost of telling apart places {CHARGE_RADIUS_M:g} m apart over at most "
                     f"{int(planned)} queries; ε ≈ {significant(dp.accountant.epsilon_from_rho(charge), 3, trim=True)} at δ = 10⁻⁶ "
                     "on its own). It protects where people are, not whether they take part. The "
                     "one-shot baseline and full-budget reference columns are simulations shown to "
                     "you, the owner, only: they publish nothing and are not charged.",
                     className="hint")]


def table_row(s: dict) -> dict:
    return {"k": s["k"], "answer": round(s["answer"], 1), "true_count": s["true_count"],
            "rel_error": f"{100 * s['rel_error']:.1f}%",
            "baseline_answer": "budget used up" if s["baseline_answer"] != s["baseline_answer"]
            else round(s["baseline_answer"], 1),
            "reference_answer": round(s["reference_answer"], 1),
            "sigma_mean_m": round(s["sigma_mean_m"], 1), "saving": f"{100 * s['saving']:.0f}%",
            "remaining": f"{100 * s['remaining_fraction_mean']:.0f}%", "n_halted": s["n_halted"]}


def session_figure(history: list[dict]) -> go.Figure:
    """Errors of the session, the baseline and the reference, and the budget left, per query."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    k = [h["k"] for h in history]
    for key, name, colour in (("rel_error", "this session", render.CATEGORICAL[0]),
                              ("baseline_rel_error", "one-shot baseline", render.CATEGORICAL[1]),
                              ("reference_rel_error", "single full-budget release", render.CATEGORICAL[7])):
        fig.add_trace(go.Scatter(x=k, y=[100 * h[key] for h in history], name=name, mode="lines+markers",
                                 line={"color": colour, "dash": "dot" if key != "rel_error" else "solid"}))
    fig.add_trace(go.Bar(x=k, y=[100 * h["remaining_fraction_mean"] for h in history], name="budget left (%)",
                         marker_color="#9fb3c8", opacity=0.4), secondary_y=True)
    fig.update_layout(template="plotly_white", title=render.chart_title("Relative error (%) and budget left per query"),
                      margin={"l": 45, "r": 45, "t": 70, "b": 35}, legend={"orientation": "h", "y": -0.25})
    fig.update_xaxes(title="query", dtick=1)
    fig.update_yaxes(title="relative error (%)", secondary_y=False)
    fig.update_yaxes(title="budget left (%)", range=[0, 100], secondary_y=True)
    return fig


def saving_histogram(result) -> go.Figure:
    """Per-user share of this query's allocation that went unused (saved for later)."""
    alloc = result.allocated
    frac = (result.saved[alloc > 0] / alloc[alloc > 0]) if alloc.size else alloc
    fig = go.Figure(go.Histogram(x=100 * frac, nbinsx=20, marker_color=render.CATEGORICAL[2]))
    fig.update_layout(template="plotly_white", title=render.chart_title(f"Query {result.k}: budget saved per user"),
                      xaxis_title="share of the allocation saved (%)", yaxis_title="users",
                      margin={"l": 45, "r": 10, "t": 70, "b": 35})
    return fig


def snap_allowance(sigma_m: float, planned: int, method: str) -> float:
    """Metres of rounding to the noise grid after the plan's answers (planned x ROUNDS per point)."""
    ia = dp.interactive
    return float(ia.snap_allowance_bound(float(ia.rho_from_sigma(sigma_m)), int(planned) * ROUNDS,
                                         1 if method.endswith("dist") else 2))


def session_charge(sigma_m: float, planned: int, method: str) -> float:
    """zCDP ρ a session charges the dataset's account: ρ_B·(r + s)² at r = CHARGE_RADIUS_M.

    Two locations r metres apart are ρ_B·(r + s)²-zCDP indistinguishable over a whole session of
    at most `planned` queries (s: the rounding allowance), so this is the session's cost for
    telling apart places CHARGE_RADIUS_M apart; sessions stop at their plan to keep it true.
    """
    rho_b = float(dp.interactive.rho_from_sigma(sigma_m))
    return rho_b * (CHARGE_RADIUS_M + snap_allowance(sigma_m, planned, method)) ** 2


def start_session(sid, dinfo, domain_info, sigma_m, planned, strategy, method, n_drawn) -> dict:
    """Charge step: open a session charged to the dataset's account. Its public inputs are
    checked first, the charge is made before the data is read (even a data-dependent refusal
    is paid for). `domain_info` is the `ids.DOMAIN` store."""
    if (dinfo or {}).get("kind", "points") != "points":
        raise dp.ParameterError("interactive queries need point data (one location per record); "
                                "load a point dataset first")
    data = state.points(sid, dinfo["fingerprint"])
    domain = domain_from_store(domain_info)
    live.check_live_room(sid)
    rho = session_charge(sigma_m, planned, method)

    def pay():
        state.charge(sid, dinfo["fingerprint"], lambda acc: acc.charge(
            f"interactive session (σ = {sigma_m:g} m, {planned} queries)", rho=rho,
            private=not domain.leaky,
            note=f"ρ_B·(r + s)² at r = {CHARGE_RADIUS_M:g} m, s = rounding allowance, for the "
                 "whole session" + ("; box fitted to the data: NOT private" if domain.leaky else "")))
    session = dp.interactive.QuerySession(     # fresh OS entropy
        data, domain, sigma_m=sigma_m, planned_queries=planned, strategy=strategy, method=method,
        rounds=ROUNDS, seed=None, before_data=pay)
    try:
        token = live.put_live(sid, session)
    except LookupError:                     # paid for above: say so, never "nothing was charged"
        raise LookupError("the session was charged (see the budget ledger) but the server could "
                          "not keep it: it is full or its store failed; start a new session once "
                          "it has room") from None
    return {"token": token, "asked_drawn": n_drawn, "fingerprint": dinfo["fingerprint"], "rho": rho}


def refusal_or(start, *args) -> dict:
    """start(*args), or {"error": why} for a refusal, kept as the click's result either way."""
    try:
        return start(*args)
    except (dp.ParameterError, dp.BudgetError, LookupError, TypeError) as exc:
        return {"error": str(exc)}


def session_settings(sigma, planned) -> tuple[float, int]:
    """Parse step for a new session: σ in metres and the planned queries, with their defaults."""
    return float(sigma or DEFAULT_SIGMA), int(planned or DEFAULT_PLANNED)


def questions(trigger, info: dict, drawn: list, follow, typed) -> tuple[dict, list]:
    """Parse step for a running session: (its updated info, the rectangles to ask now). A
    rectangle drawn on the map is asked when the session follows the map; a typed one always."""
    if trigger == ids.EDIT:
        if "on" not in (follow or []) or len(drawn) <= info["asked_drawn"]:
            return {**info, "asked_drawn": min(info["asked_drawn"], len(drawn))}, []
        return {**info, "asked_drawn": len(drawn)}, drawn[info["asked_drawn"]:]
    return info, [parse_typed(typed or "")]


def ask(sid: str, token: str, rects: list):
    """Run step: answer the rectangles in turn, one question at a time per session (even from
    two tabs on two worker processes); (the session's history, the last result). Refused past
    the planned queries."""
    with live.live(sid, token) as session:
        if session.k + len(rects) > session.planned_queries:
            raise dp.BudgetError(f"this session's {session.planned_queries} planned queries "
                                 "are used up (its charge covers no more); start a new "
                                 "session, which is charged again")
        for r in rects:
            result = session.ask(r)
        return list(session.history), result


def started_view(info: dict, planned: int, strategy, method) -> tuple:
    """Render step after a session was started and charged: the run callback's outputs."""
    msg = html.Div(f"New session: m = {planned} planned queries, strategy {strategy}, method "
                   f"{method}; charged ρ = {significant(info['rho'], 3, trim=True)} (zCDP) to this dataset's budget.",
                   className="ok")
    return info, msg, [], [], [], time.time()


def answers_view(info: dict, history: list, result) -> tuple:
    """Render step after questions were answered: the run callback's outputs."""
    msg = html.Div(f"Query {result.k} answered in {result.seconds:.2f} s: private answer "
                   f"{result.answer:,.0f}; {result.n_halted:,} users halted so far.", className="ok")
    return info, msg, [table_row(h) for h in history], chart(ids.IA_PLOT, session_figure(history), **IA_CHART), \
        chart(ids.IA_HIST, saving_histogram(result), **IA_CHART), no_update


def error_view(exc: Exception) -> tuple:
    """Render step for a refusal: the message only; nothing else on the page changes."""
    return no_update, html.Div(str(exc), className="error"), no_update, no_update, no_update, no_update


def register_callbacks(app, config: dict):
    app.callback(Output(ids.IA_GUARANTEE, "children"), Input(ids.IA_SIGMA, "value"),
                 Input(ids.IA_PLANNED, "value"), Input(ids.IA_METHOD, "value"))(show_guarantee)

    request_ids(app, ids.IA_START, ids.IA_REQUEST)

    app.callback(Output(ids.IA_INFO, "data", allow_duplicate=True),
                 Output(ids.IA_STATUS, "children", allow_duplicate=True),
                 Output(ids.IA_TABLE, "data", allow_duplicate=True),
                 Output(place_id(ids.IA_PLOT), "children", allow_duplicate=True),
                 Output(place_id(ids.IA_HIST), "children", allow_duplicate=True),
                 Input(ids.DATASET, "data"), State(ids.IA_INFO, "data"), prevent_initial_call=True)(end_for_new_data)

    app.callback(Output(ids.IA_INFO, "data"), Output(ids.IA_STATUS, "children"),
                 Output(ids.IA_TABLE, "data"), Output(place_id(ids.IA_PLOT), "children"),
                 Output(place_id(ids.IA_HIST), "children"),
                 Output(ids.ACCOUNT_TICK, "data", allow_duplicate=True),
                 Input(ids.IA_REQUEST, "data"), Input(ids.IA_ASK, "n_clicks"),
                 Input(ids.IA_TYPED, "n_submit"), Input(ids.EDIT, "geojson"),
                 State(ids.IA_SIGMA, "value"), State(ids.IA_PLANNED, "value"),
                 State(ids.IA_STRATEGY, "value"), State(ids.IA_METHOD, "value"),
                 State(ids.IA_TYPED, "value"), State(ids.IA_FOLLOW, "value"),
                 State(ids.IA_INFO, "data"), State(ids.DATASET, "data"), State(ids.DOMAIN, "data"),
                 prevent_initial_call=True)(run)


def show_guarantee(sigma, planned, method):
    """The interactive session's guarantee in words for σ, the planned queries and the method
    (or what to type)."""
    if not sigma or sigma <= 0:
        return html.Div("Give σ in metres (> 0).", className="error")
    return guarantee_text(float(sigma), int(planned or DEFAULT_PLANNED), method or DEFAULT_METHOD)


def end_for_new_data(info, session):
    """New data ends the session on the old data: its answers no longer apply."""
    if not session or (info or {}).get("fingerprint") == session.get("fingerprint"):
        return (no_update,) * 5
    return None, html.Div("New data is loaded: start a new session to ask about it.",
                          className="hint"), [], [], []


def run(_start, _ask, _submit, geojson, sigma, planned, strategy, method, typed, follow,
        info, dinfo, domain_info):
    """Start a session (parse, charge, render) or ask it (parse, run, render)."""
    sid = sessions.session_id()
    trigger = ctx.triggered_id
    drawn = rects_from_geojson(geojson)
    try:
        if trigger == ids.IA_REQUEST:        # one click, one charge (`workspace.once`)
            sigma_m, m = session_settings(sigma, planned)
            result = workspace.once(sid, (_start or {}).get("id"), lambda: refusal_or(
                start_session, sid, dinfo, domain_info, sigma_m, m, strategy, method, len(drawn)))
            if "error" in result:
                raise dp.ParameterError(result["error"])
            return started_view(result, m, strategy, method)
        if info is None:
            if trigger == ids.EDIT:           # drawing on the map before any session: ignored
                return (no_update,) * 6
            raise LookupError("start a session first (starting one is charged to this "
                              "dataset's budget)")
        token = info.get("token", "")
        info, rects = questions(trigger, info, drawn, follow, typed)
        if not rects:
            return (info,) + (no_update,) * 5
        history, result = ask(sid, token, rects)
    except (dp.ParameterError, dp.BudgetError, LookupError, TypeError) as exc:
        return error_view(exc)
    return answers_view(info, history, result)
