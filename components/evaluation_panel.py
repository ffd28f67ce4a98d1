"""Evaluation panel: mechanisms x ε x query sizes on the user's own data, with error charts."""
from __future__ import annotations

import json

import plotly.graph_objects as go
from dash import Input, Output, State, ctx, dash_table, dcc, html, no_update

import dp
from dp import evaluate

from . import ids, jobs, state
from .controls import domain_from_store
from .help import help_box

SIZES = (0.001, 0.01, 0.04, 0.09, 0.25, 0.64)
PALETTE = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]


DEFAULT_EVAL = ("ug", "e2epriv", "identity")
QUEUED = "Queued: waiting for a free worker (other evaluations are running)…"


def eval_options(kind: str) -> list[dict]:
    """Every registered mechanism for this data kind, the non-private references included."""
    return [{"label": f" {s.label}", "value": k} for k, s in dp.mechanisms().items() if s.data_kind == kind]


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("7 · Evaluation on your data (owner only)"),
        help_box("evaluation"),
        html.Div("Not charged to the dataset's budget: it compares releases with your own true "
                 "counts, for you only, and publishes nothing.", className="hint"),
        html.Div(className="eval-controls", children=[
            html.Div([html.Label("Mechanisms"), dcc.Checklist(
                id=ids.EVAL_MECHS, value=list(DEFAULT_EVAL), options=eval_options("points"))]),
            html.Div([
                html.Label("ε values"), dcc.Input(id=ids.EVAL_EPSILONS, value="0.1, 0.5, 1", debounce=True),
                html.Label("Query sizes (% of the domain's area)"),
                dcc.Checklist(id=ids.EVAL_SIZES, value=[0.01, 0.09, 0.25], inline=True,
                              options=[{"label": f" {100 * a:g}%", "value": a} for a in SIZES]),
                html.Label("Queries per size"),
                dcc.Input(id=ids.EVAL_NQ, type="number", value=100, min=10, max=2000, step=10),
                html.Label("Repetitions"),
                dcc.Input(id=ids.EVAL_REPS, type="number", value=3, min=1, max=50, step=1),
            ]),
        ]),
        html.Button("Run evaluation", id=ids.EVAL_RUN, n_clicks=0, className="primary"),
        html.Button("Cancel", id=ids.EVAL_CANCEL, n_clicks=0, disabled=True),
        html.Progress(id=ids.EVAL_PROGRESS, value="0", max="1", className="progress"),
        html.Div(id=ids.EVAL_STATUS, role="status"),
        dcc.Interval(id=ids.EVAL_POLL, interval=500, disabled=True),
        dcc.Store(id=ids.EVAL_JOB),
        html.Div(id=ids.EVAL_RESULTS, hidden=True, className="eval-figs", children=[
            dcc.Graph(id=ids.EVAL_FIG_EPS), dcc.Graph(id=ids.EVAL_FIG_SIZE)]),
        dash_table.DataTable(id=ids.EVAL_TABLE, data=[], page_size=10, sort_action="native",
                             style_cell={"fontSize": "12px"}),
    ])


def parse_epsilons(text: str) -> list[float]:
    try:
        eps = sorted({float(v) for v in (text or "").replace(";", ",").split(",") if v.strip()})
    except ValueError:
        raise dp.ParameterError(f"ε values must be numbers separated by commas, got {text!r}") from None
    if not eps or any(not 0 < e <= 100 for e in eps):
        raise dp.ParameterError("give at least one ε, each in (0, 100]")
    return eps


def _band_figure(summary, x_key, fixed_key, fixed_value, title, x_title, log_x):
    """Median relative error against x with an interquartile band, one colour per mechanism."""
    fig = go.Figure()
    labels = {k: s.label for k, s in dp.mechanisms().items()}
    mechs = list(dict.fromkeys(r["mechanism"] for r in summary))
    for i, m in enumerate(mechs):
        pts = sorted((r for r in summary if r["mechanism"] == m and r[fixed_key] == fixed_value),
                     key=lambda r: r[x_key])
        if not pts:
            continue
        x = [100 * r[x_key] if x_key == "area_frac" else r[x_key] for r in pts]
        colour = PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(x=x + x[::-1], y=[r["q75_re"] for r in pts] + [r["q25_re"] for r in pts][::-1],
                                 fill="toself", fillcolor=colour, opacity=0.18, line={"width": 0},
                                 hoverinfo="skip", showlegend=False, legendgroup=m))
        comparable = dp.mechanisms()[m].comparable if m in dp.mechanisms() else True
        name = labels.get(m, m) + ("" if comparable else " — other ε, not comparable at equal ε")
        fig.add_trace(go.Scatter(x=x, y=[r["median_re"] for r in pts], mode="lines+markers", name=name,
                                 line={"color": colour, "dash": "solid" if comparable else "dot"},
                                 legendgroup=m))
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title="median relative error",
                      yaxis_type="log", template="plotly_white", margin={"l": 50, "r": 10, "t": 40, "b": 40},
                      legend={"orientation": "h", "y": -0.25}, height=360)
    if log_x:
        fig.update_xaxes(type="log")
    return fig


def figures(summary: list[dict]):
    """(error vs ε at the smallest size, error vs size at the largest ε)."""
    if not summary:
        return go.Figure(), go.Figure()
    small = min(r["area_frac"] for r in summary)
    big_eps = max(r["epsilon"] for r in summary)
    return (_band_figure(summary, "epsilon", "area_frac", small,
                         f"Error vs ε ({100 * small:g}% queries)", "ε", True),
            _band_figure(summary, "area_frac", "epsilon", big_eps,
                         f"Error vs query size (ε = {big_eps:g})", "query area (% of domain)", True))


def table_rows(summary):
    labels = {k: s.label for k, s in dp.mechanisms().items()}
    return [{"mechanism": labels.get(r["mechanism"], r["mechanism"]), "ε": r["epsilon"],
             "query area %": round(100 * r["area_frac"], 3), "median RE": round(r["median_re"], 4),
             "IQR": f"{r['q25_re']:.3g} – {r['q75_re']:.3g}", "mean abs. error": round(r["mean_abs_error"], 1),
             "runs": r["reps"]} for r in summary]


def eval_cache_key(sid: str, cfg) -> str:
    """Where this session's results for one evaluation set-up are kept (never another's)."""
    return f"eval:{sid}:" + json.dumps(cfg, sort_keys=True)


def register_callbacks(app, config: dict):
    @app.callback(Output(ids.EVAL_MECHS, "options"), Output(ids.EVAL_MECHS, "value"),
                  Input(ids.DATASET, "data"), State(ids.EVAL_MECHS, "value"))
    def offer(info, chosen):
        opts = eval_options((info or {}).get("kind", "points"))
        values = [o["value"] for o in opts]
        keep = [v for v in chosen or [] if v in values]
        return opts, keep or values[:3]

    @app.callback(Output(ids.EVAL_JOB, "data"), Output(ids.EVAL_POLL, "disabled"),
                  Output(ids.EVAL_STATUS, "children"), Output(ids.EVAL_CANCEL, "disabled"),
                  Input(ids.EVAL_RUN, "n_clicks"), Input(ids.EVAL_CANCEL, "n_clicks"),
                  State(ids.EVAL_MECHS, "value"), State(ids.EVAL_EPSILONS, "value"),
                  State(ids.EVAL_SIZES, "value"), State(ids.EVAL_NQ, "value"), State(ids.EVAL_REPS, "value"),
                  State(ids.DATASET, "data"), State(ids.DOMAIN, "data"), State(ids.EVAL_JOB, "data"),
                  prevent_initial_call=True)
    def start_or_cancel(_run, _cancel, mechs, eps_text, sizes, nq, reps, info, domain_info, job):
        sid = state.session_id()
        if ctx.triggered_id == ids.EVAL_CANCEL:
            jobs.cancel((job or {}).get("id"), sid)
            return no_update, no_update, "Cancelling…", True
        try:
            if not mechs or not sizes:
                raise dp.ParameterError("choose at least one mechanism and one query size")
            eps = parse_epsilons(eps_text)
            domain = domain_from_store(domain_info)
            data = state.points(sid, info["fingerprint"])
        except (dp.ParameterError, LookupError, TypeError) as exc:
            return no_update, True, html.Div(str(exc), className="error"), True
        cfg = {"fp": info["fingerprint"], "domain": domain.to_dict(), "mechs": sorted(mechs), "eps": eps,
               "sizes": sorted(sizes), "nq": int(nq or 100), "reps": int(reps or 1)}
        cache_key = eval_cache_key(sid, cfg)
        if state.cache.get(cache_key) is not None:
            return {"id": None, "cache_key": cache_key}, True, "Loaded from cache.", True
        job_id = jobs.start(evaluate.evaluate, owner=sid, data=data, domain=domain, mechanisms=cfg["mechs"],
                            epsilons=eps, area_fracs=cfg["sizes"], n_queries=cfg["nq"],
                            repetitions=cfg["reps"], seed=0)
        queued = jobs.status(job_id, sid)["queued"]
        return {"id": job_id, "cache_key": cache_key}, False, QUEUED if queued else "Running…", False

    @app.callback(Output(ids.EVAL_RESULTS, "hidden"), Input(ids.EVAL_TABLE, "data"))
    def show_results(rows):
        return not rows

    @app.callback(Output(ids.EVAL_PROGRESS, "value"), Output(ids.EVAL_PROGRESS, "max"),
                  Output(ids.EVAL_FIG_EPS, "figure"), Output(ids.EVAL_FIG_SIZE, "figure"),
                  Output(ids.EVAL_TABLE, "data"), Output(ids.EVAL_STATUS, "children", allow_duplicate=True),
                  Output(ids.EVAL_POLL, "disabled", allow_duplicate=True),
                  Output(ids.EVAL_CANCEL, "disabled", allow_duplicate=True),
                  Input(ids.EVAL_POLL, "n_intervals"), Input(ids.EVAL_JOB, "data"), prevent_initial_call=True)
    def poll(_, job):
        sid = state.session_id()
        if not job or job["cache_key"].split(":", 2)[1] != sid:      # not this session's job
            return (no_update,) * 8
        summary = state.cache.get(job["cache_key"])
        if summary is not None:
            f1, f2 = figures(summary)
            return "1", "1", f1, f2, table_rows(summary), "Done.", True, True
        st = jobs.status(job["id"], sid)
        if st is None:
            return "0", "1", no_update, no_update, no_update, "The evaluation was lost (server restarted).", True, True
        if st["queued"]:
            return "0", str(st["total"]), no_update, no_update, no_update, QUEUED, False, False
        if not st["finished"]:
            return str(st["done"]), str(st["total"]), no_update, no_update, no_update, \
                f"Running… {st['done']} of {st['total']} releases", False, False
        jobs.forget(job["id"], sid)
        if st["error"]:
            return "0", "1", no_update, no_update, no_update, html.Div(st["error"], className="error"), True, True
        summary = evaluate.summarise(st["result"] or [])
        if st["cancelled"]:
            msg = f"Cancelled after {st['done']} of {st['total']} releases; showing partial results."
        else:
            state.cache.set(job["cache_key"], summary)
            msg = f"Done: {st['total']} releases."
        f1, f2 = figures(summary)
        return str(st["done"]), str(st["total"]), f1, f2, table_rows(summary), msg, True, True

