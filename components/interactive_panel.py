"""Interactive queries (spec 002, Mode A): each rectangle is answered on the spot by users who
keep per-user geo-privacy budgets; savings are reused for later queries."""
from __future__ import annotations

import time

import plotly.graph_objects as go
from dash import ALL, Input, Output, State, ctx, dash_table, dcc, html, no_update
from plotly.subplots import make_subplots

import dp

from . import ids, state
from .data_panel import domain_from_controls
from .help import help_box
from .queries_panel import parse_typed, rects_from_geojson

SIGMA, PLANNED, STRATEGY, METHOD = "ia-sigma", "ia-planned", "ia-strategy", "ia-method"
START, STATUS, GUARANTEE, FOLLOW = "ia-start", "ia-status", "ia-guarantee", "ia-follow-drawn"
TYPED, ASK, TABLE, HIST, PLOT, INFO = "ia-typed", "ia-ask", "ia-table", "ia-hist", "ia-plot", "ia-info"
COLUMNS = [("k", "#"), ("answer", "Private answer"), ("true_count", "True (owner only)"),
           ("rel_error", "Rel. error"), ("baseline_answer", "One-shot baseline (owner only)"),
           ("reference_answer", "Single full-budget release (owner only)"),
           ("sigma_mean_m", "Mean noise σ allocated (m)"), ("saving", "Saved this query"),
           ("remaining", "Budget left (mean)"), ("n_halted", "Users halted")]
ROUNDS = 10                     # elimination rounds per query: at most this many answers per point
CHARGE_RADIUS_M = 100.0         # sessions are charged for telling apart places this far apart


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("8 · Interactive queries with per-user budgets"),
        help_box("interactive"),
        html.Div(className="eval-controls", children=[
            html.Div([
                html.Label("Each user's budget: noise σ if spent on one query (metres)"),
                dcc.Input(id=SIGMA, type="number", value=100, min=1, max=100000, debounce=True),
                html.Div(id=GUARANTEE, className="guarantee"),
            ]),
            html.Div([
                html.Label("Planned queries m"),
                dcc.Input(id=PLANNED, type="number", value=10, min=1, max=1000, step=1),
                html.Label("Budgeting strategy"),
                dcc.Dropdown(id=STRATEGY, value="gamma", clearable=False, options=[
                    {"label": "none: each query gets B/m, savings unused", "value": "none"},
                    {"label": "even: savings spread evenly over what is left", "value": "even"},
                    {"label": "gamma: reuse a share γ of the savings", "value": "gamma"},
                    {"label": "linear: allocation grows with the queries left", "value": "linear"}]),
                html.Label("Method"),
                dcc.Dropdown(id=METHOD, value="pm-dist", clearable=False, options=[
                    {"label": "iterative elimination, distances (pm-dist)", "value": "pm-dist"},
                    {"label": "iterative elimination, points (pm-pt)", "value": "pm-pt"},
                    {"label": "baseline, distances (bm-dist)", "value": "bm-dist"},
                    {"label": "baseline, points (bm-pt)", "value": "bm-pt"}]),
            ]),
        ]),
        html.Button("Start a new session", id=START, n_clicks=0, className="primary"),
        dcc.Checklist(id=FOLLOW, value=["on"], inline=True, options=[
            {"label": " answer every rectangle I draw on the map with this session", "value": "on"}]),
        html.Div(className="query-tools", children=[
            html.Div(dcc.Input(id=TYPED, placeholder="west, south, east, north", debounce=True),
                     className="wide"),
            html.Button("Ask", id=ASK, n_clicks=0)]),
        dcc.Loading(html.Div(id=STATUS, role="status"), type="dot"),
        dash_table.DataTable(id=TABLE, columns=[{"name": n, "id": i} for i, n in COLUMNS], data=[],
                             page_size=10, style_cell={"fontSize": "12px"}),
        html.Div(className="eval-figs", children=[
            dcc.Graph(id=PLOT, style={"height": "320px"}), dcc.Graph(id=HIST, style={"height": "320px"})]),
        dcc.Store(id=INFO),
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
    return [html.Div(f"Whole-session guarantee per user: ρ = {rho:.3g} per m² (Gaussian geo-privacy)."),
            html.Div("Telling two locations apart: " + ", ".join(
                f"{int(r) if r < 1000 else '1 km'}{' m' if r < 1000 else ''} apart: ε = {e:.2g}"
                for r, e in eps.items()) + f" (at δ = 10⁻⁶, for up to {answers} answers per location, "
                f"counting {s:.2g} m of rounding to the noise grid). Nearby places stay hidden; far "
                "ones less so."),
            html.Div(f"Starting a session charges this dataset's sessions line ρ = {charge:.3g} (zCDP: "
                     f"the cost of telling apart places {CHARGE_RADIUS_M:g} m apart over at most "
                     f"{int(planned)} queries; ε ≈ {dp.accountant.epsilon_from_rho(charge):.3g} at δ = 10⁻⁶ "
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
    for key, name, colour in (("rel_error", "this session", "#1f5fa8"),
                              ("baseline_rel_error", "one-shot baseline", "#d95f02"),
                              ("reference_rel_error", "single full-budget release", "#666666")):
        fig.add_trace(go.Scatter(x=k, y=[100 * h[key] for h in history], name=name, mode="lines+markers",
                                 line={"color": colour, "dash": "dot" if key != "rel_error" else "solid"}))
    fig.add_trace(go.Bar(x=k, y=[100 * h["remaining_fraction_mean"] for h in history], name="budget left (%)",
                         marker_color="#9fb3c8", opacity=0.4), secondary_y=True)
    fig.update_layout(template="plotly_white", title="Relative error (%) and budget left per query",
                      margin={"l": 45, "r": 45, "t": 40, "b": 35}, legend={"orientation": "h", "y": -0.25})
    fig.update_xaxes(title="query", dtick=1)
    fig.update_yaxes(title="relative error (%)", secondary_y=False)
    fig.update_yaxes(title="budget left (%)", range=[0, 100], secondary_y=True)
    return fig


def saving_histogram(result) -> go.Figure:
    """Per-user share of this query's allocation that went unused (saved for later)."""
    alloc = result.allocated
    frac = (result.saved[alloc > 0] / alloc[alloc > 0]) if alloc.size else alloc
    fig = go.Figure(go.Histogram(x=100 * frac, nbinsx=20, marker_color="#1b9e77"))
    fig.update_layout(template="plotly_white", title=f"Query {result.k}: budget saved per user",
                      xaxis_title="share of the allocation saved (%)", yaxis_title="users",
                      margin={"l": 45, "r": 10, "t": 40, "b": 35})
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


def start_session(sid, dinfo, preset, box, sigma_m, planned, strategy, method, n_drawn) -> dict:
    """Open a session charged to the dataset's account: its public inputs are checked first, the
    charge is made before the data is read (even a data-dependent refusal is paid for)."""
    if (dinfo or {}).get("kind", "points") != "points":
        raise dp.ParameterError("interactive queries need point data (one location per record); "
                                "load a point dataset first")
    data = state.points(sid, dinfo["fingerprint"])
    domain = domain_from_controls(preset, box, sid, dinfo)
    state.check_live_room(sid)
    rho = session_charge(sigma_m, planned, method)

    def pay():
        state.accounts.update(sid, dinfo["account"], lambda acc: acc.charge(
            f"interactive session (σ = {sigma_m:g} m, {planned} queries)", rho=rho,
            private=not domain.leaky,
            note=f"ρ_B·(r + s)² at r = {CHARGE_RADIUS_M:g} m, s = rounding allowance, for the "
                 "whole session" + ("; box fitted to the data: NOT private" if domain.leaky else "")))
    session = dp.interactive.QuerySession(     # fresh OS entropy
        data, domain, sigma_m=sigma_m, planned_queries=planned, strategy=strategy, method=method,
        rounds=ROUNDS, seed=None, before_data=pay)
    token = state.put_live(sid, session)
    return {"token": token, "asked_drawn": n_drawn, "fingerprint": dinfo["fingerprint"], "rho": rho}


def register_callbacks(app, config: dict):
    @app.callback(Output(GUARANTEE, "children"), Input(SIGMA, "value"), Input(PLANNED, "value"),
                  Input(METHOD, "value"))
    def show_guarantee(sigma, planned, method):
        if not sigma or sigma <= 0:
            return html.Div("Give σ in metres (> 0).", className="error")
        return guarantee_text(float(sigma), int(planned or 10), method or "pm-dist")

    @app.callback(Output(INFO, "data"), Output(STATUS, "children"), Output(TABLE, "data"),
                  Output(PLOT, "figure"), Output(HIST, "figure"),
                  Output(ids.ACCOUNT_TICK, "data", allow_duplicate=True),
                  Input(START, "n_clicks"), Input(ASK, "n_clicks"), Input(TYPED, "n_submit"),
                  Input(ids.EDIT, "geojson"),
                  State(SIGMA, "value"), State(PLANNED, "value"), State(STRATEGY, "value"),
                  State(METHOD, "value"), State(TYPED, "value"), State(FOLLOW, "value"),
                  State(INFO, "data"), State(ids.DATASET, "data"), State(ids.DOMAIN_PRESET, "value"),
                  State({"type": ids.DOMAIN_BOX, "side": ALL}, "value"),
                  prevent_initial_call=True)
    def run(_start, _ask, _submit, geojson, sigma, planned, strategy, method, typed, follow,
            info, dinfo, preset, box):
        sid = state.session_id()
        trig = ctx.triggered_id
        drawn = rects_from_geojson(geojson)
        try:
            if trig == START:
                info = start_session(sid, dinfo, preset, box, float(sigma or 100), int(planned or 10),
                                     strategy, method, len(drawn))
                return info, html.Div(f"New session: m = {int(planned or 10)} planned queries, strategy "
                                      f"{strategy}, method {method}; charged ρ = {info['rho']:.3g} "
                                      "(zCDP) to this dataset's budget.", className="ok"), [], go.Figure(), \
                    go.Figure(), time.time()
            if info is None:
                if trig == ids.EDIT:
                    return (no_update,) * 6
                raise LookupError("start a session first (starting one is charged to this "
                                  "dataset's budget)")
            session, lock = state.live(sid, info.get("token", ""))
            if trig == ids.EDIT:
                if "on" not in (follow or []) or len(drawn) <= info["asked_drawn"]:
                    info = {**info, "asked_drawn": min(info["asked_drawn"], len(drawn))}
                    return info, no_update, no_update, no_update, no_update, no_update
                rects = drawn[info["asked_drawn"]:]
                info = {**info, "asked_drawn": len(drawn)}
            else:
                rects = [parse_typed(typed or "")]
            with lock:                  # one question at a time per session, even from two tabs
                if session.k + len(rects) > session.planned_queries:
                    raise dp.BudgetError(f"this session's {session.planned_queries} planned queries "
                                         "are used up (its charge covers no more); start a new "
                                         "session, which is charged again")
                for r in rects:
                    result = session.ask(r)
                history = list(session.history)
        except (dp.ParameterError, dp.BudgetError, LookupError, TypeError) as exc:
            return no_update, html.Div(str(exc), className="error"), no_update, no_update, no_update, \
                no_update
        msg = html.Div(f"Query {result.k} answered in {result.seconds:.2f} s: private answer "
                       f"{result.answer:,.0f}; {result.n_halted:,} users halted so far.", className="ok")
        return info, msg, [table_row(h) for h in history], session_figure(history), \
            saving_histogram(result), no_update

