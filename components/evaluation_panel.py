"""Evaluation panel: mechanisms x ε x query sizes on the user's own data, with error charts."""
from __future__ import annotations

import csv
import io
import json
import math

import plotly.graph_objects as go
from dash import Input, Output, State, dash_table, dcc, html, no_update

import dp
from dp import evaluate, metrics

from . import ids, render
from server import background, services, sessions, state
from .charts import chart, chart_place, place_id
from .controls import domain_from_store
from .help import help_box

SIZES = (0.001, 0.01, 0.04, 0.09, 0.25, 0.64)


DEFAULT_EVAL = (dp.recommend("points").name, "ug", "identity")   # the recommended one first
QUEUED = "Started: it waits for a free worker if other evaluations are running…"
RHO_HINT = ("Errors of queries with fewer than ρ true points are measured relative to ρ, so a "
            f"query with no points still gets a finite error. {metrics.DEFAULT_RHO:g} is the "
            "papers' choice; a new ρ applies to the next run.")
NOT_RUN = "not run: the evaluation was cancelled before this one"
NOT_COMPUTABLE = "not computable: the mechanism gave no finite answer"
# what the charts can show: the summary keys' suffix (median_*, q25_*, q75_*), names, file name
# floor: the least error a chart's log axis shows; smaller ones (exact answers up to rounding,
# such as 9e-12 on empty rectangles) are drawn at it, and the chart says so
METRICS = {
    "bounded": {"key": "re_sanity", "label": "bounded relative error", "file": "bounded_relative_error",
                "floor": 1e-4},
    "absolute": {"key": "abs_error", "label": "absolute error (points)", "file": "absolute_error",
                 "floor": 0.01},
}
EVAL_CHART = {"responsive": True, "style": {"height": "380px"}}    # each of the two charts
MAX_EPSILONS = 12        # ε values in one evaluation (each is a round of releases of every mechanism)
STORED = ("mechanism", "epsilon", "area_frac", "reps", "n_queries", "n_small",
          *(f"{q}_{m['key']}" for m in METRICS.values() for q in ("median", "q25", "q75")))


def eval_options(kind: str, counts: bool = False) -> list[dict]:
    """Every registered mechanism for this data kind, the non-private references included;
    for counts on a grid, those that need each point are left out."""
    return [{"label": f" {s.label}", "value": k} for k, s in dp.mechanisms().items()
            if s.data_kind == kind and not (counts and s.needs_points)]


def layout(config: dict) -> html.Div:
    """The panel: set-up, run and cancel, progress, then results hidden until a run has some."""
    return html.Div(className="card", children=[
        html.H3("Evaluation on your data (owner only)"),
        help_box("evaluation"),
        html.Div("Not charged to the dataset's budget: it compares releases with your own true "
                 "counts, for you only, and publishes nothing.", className="hint"),
        html.Div(className="eval-controls", children=[
            html.Div([html.Label("Mechanisms"), dcc.Checklist(
                id=ids.EVAL_MECHS, value=list(DEFAULT_EVAL), options=eval_options("points"))]),
            html.Div([
                html.Label("ε values", htmlFor=ids.EVAL_EPSILONS), dcc.Input(id=ids.EVAL_EPSILONS, value="0.1, 0.5, 1", debounce=True),
                html.Label("Query sizes (% of the domain's area)"),
                dcc.Checklist(id=ids.EVAL_SIZES, value=[0.01, 0.09, 0.25], inline=True,
                              options=[{"label": f" {100 * a:g}%", "value": a} for a in SIZES]),
                html.Label("Queries per size", htmlFor=ids.EVAL_NQ),
                dcc.Input(id=ids.EVAL_NQ, type="number", value=100, min=10, max=2000, step=10),
                html.Label("Repetitions", htmlFor=ids.EVAL_REPS),
                dcc.Input(id=ids.EVAL_REPS, type="number", value=3, min=1, max=50, step=1),
                html.Label("ρ: error floor (points)", htmlFor=ids.EVAL_RHO),
                dcc.Input(id=ids.EVAL_RHO, type="number", value=metrics.DEFAULT_RHO, min=1, step=1),
                html.Div(RHO_HINT, className="hint"),
            ]),
        ]),
        html.Button("Run evaluation", id=ids.EVAL_RUN, n_clicks=0, className="primary"),
        html.Button("Cancel", id=ids.EVAL_CANCEL, n_clicks=0, disabled=True),
        html.Progress(id=ids.EVAL_PROGRESS, value="0", max="1", className="progress"),
        html.Div(id=ids.EVAL_PROGRESS_TEXT, role="status"),
        html.Div(id=ids.EVAL_STATUS, role="status"),
        dcc.Store(id=ids.EVAL_SUMMARY),
        html.Div(id=ids.EVAL_RESULTS, hidden=True, children=[
            html.Div(className="eval-result-head", children=[
                html.B("Chart"),
                dcc.RadioItems(id=ids.EVAL_METRIC, value="bounded", inline=True,
                               options=[{"label": f" {m['label']}", "value": k} for k, m in METRICS.items()]),
                html.Button("Download CSV", id=ids.EVAL_CSV_BUTTON, n_clicks=0),
                dcc.Download(id=ids.EVAL_CSV_DOWNLOAD)]),
            html.Div(id=ids.EVAL_NOTE, className="hint"),
            html.Div(className="eval-figs", children=[chart_place(ids.EVAL_FIG_EPS),
                                                      chart_place(ids.EVAL_FIG_SIZE)]),
            dash_table.DataTable(id=ids.EVAL_TABLE, data=[], page_size=10, sort_action="native",
                                 style_table={"overflowX": "auto"},
                                 style_cell={"fontSize": "12px", "whiteSpace": "normal", "height": "auto"},
                                 style_cell_conditional=[{"if": {"column_id": "mechanism"}, "textAlign": "left"}]),
        ]),
    ])


def parse_epsilons(text: str) -> list[float]:
    """The typed ε values, sorted and deduplicated; a ParameterError says what to type instead."""
    try:
        eps = sorted({float(v) for v in (text or "").replace(";", ",").split(",") if v.strip()})
    except ValueError:
        raise dp.ParameterError(f"ε values must be numbers separated by commas, got {text!r}") from None
    if not eps or any(not 0 < e <= 100 for e in eps):
        raise dp.ParameterError("give at least one ε, each in (0, 100]")
    if len(eps) > MAX_EPSILONS:
        raise dp.ParameterError(f"give at most {MAX_EPSILONS} ε values (got {len(eps)}): each is a "
                                "round of releases, and a chart of more is hard to read")
    return eps


def result_store(summary: list[dict], setup: dict) -> dict:
    """What the page keeps of a run: the design, ρ and the summary rows it shows (no inf, no NaN:
    a value that is not finite is stored as None and shown in words)."""
    rows = [{k: (v if not isinstance(v, float) or math.isfinite(v) else None)
             for k, v in r.items() if k in STORED} for r in summary]
    return {**setup, "rows": rows}


def _axis_title(metric: str, rho: float) -> str:
    """The y axis of a chart of `metric`, with ρ where the metric uses it."""
    label = METRICS[metric]["label"]
    return f"median {label}" + (f" (ρ = {rho:g})" if metric == "bounded" else "")


def _band_figure(store, metric, x_key, fixed_key, fixed_value, title, x_title):
    """Median error against x with an interquartile band, one colour per mechanism, on a log
    axis from the metric's floor (errors below it drawn at it, and said). The chart's title
    names the error (the y axis has none: a long one ran into the title when the legend grew)."""
    fig = go.Figure()
    labels = {k: s.label for k, s in dp.mechanisms().items()}
    key, floor = METRICS[metric]["key"], METRICS[metric]["floor"]
    floored = False
    mechs = list(dict.fromkeys(r["mechanism"] for r in store["rows"]))
    plotted = []
    for i, m in enumerate(mechs):
        pts = sorted((r for r in store["rows"] if r["mechanism"] == m and r[fixed_key] == fixed_value),
                     key=lambda r: r[x_key])
        if not pts:
            continue
        x = [100 * r[x_key] if x_key == "area_frac" else r[x_key] for r in pts]
        lo, mid, hi = ([r[f"{q}_{key}"] for r in pts] for q in ("q25", "median", "q75"))
        floored |= any(v is not None and v < floor for v in lo + mid + hi)
        lo, mid, hi = ([None if v is None else max(v, floor) for v in vs] for vs in (lo, mid, hi))
        plotted += [v for v in lo + mid + hi if v is not None]
        colour = render.CATEGORICAL[i % len(render.CATEGORICAL)]
        fig.add_trace(go.Scatter(x=x + x[::-1], y=hi + lo[::-1], fill="toself", fillcolor=colour,
                                 opacity=0.18, line={"width": 0}, hoverinfo="skip", showlegend=False,
                                 legendgroup=m))
        comparable = dp.mechanisms()[m].comparable if m in dp.mechanisms() else True
        name = labels.get(m, m) + ("" if comparable else " — other ε, not comparable at equal ε")
        fig.add_trace(go.Scatter(x=x, y=mid, mode="lines+markers", name=name, legendgroup=m,
                                 line={"color": colour, "dash": "solid" if comparable else "dot"}))
    name = _axis_title(metric, store["rho"])
    if floored:
        x_title += f" · errors under {floor:g} (exact answers) drawn at {floor:g}"
    # the title sits below the modebar's row (top right), so the two never overlap
    fig.update_layout(title=render.chart_title(f"{name[0].upper()}{name[1:]} {title}"), xaxis_title=x_title,
                      template="plotly_white", margin={"l": 55, "r": 10, "t": 70, "b": 40},
                      legend={"orientation": "h", "y": -0.25}, height=380)
    xs = sorted({v for t in fig.data if t.mode for v in t.x})          # the values run, as ticks
    fig.update_xaxes(type="log", tickvals=xs, ticktext=[f"{v:g}" for v in xs])
    vals, ticks = render.log_ticks(plotted)
    fig.update_yaxes(type="log", tickvals=vals, ticktext=ticks,
                     range=[math.log10(vals[0]), math.log10(vals[-1])] if len(vals) > 1 else None)
    return fig


def figures(store: dict, metric: str = "bounded"):
    """(error vs ε at the smallest size, error vs size at the largest ε) of a result store."""
    rows = store["rows"]
    small = min(r["area_frac"] for r in rows)
    big_eps = max(r["epsilon"] for r in rows)
    return (_band_figure(store, metric, "epsilon", "area_frac", small,
                         f"vs ε ({100 * small:g}% queries)", "ε"),
            _band_figure(store, metric, "area_frac", "epsilon", big_eps,
                         f"vs query size (ε = {big_eps:g})", "query area (% of domain)"))


def graph_config(filename: str) -> dict:
    """Plotly's toolbar: no logo, selection tools or cloud sharing (the charts are owner-only);
    its camera saves a PNG named `filename`."""
    return {"displaylogo": False, "showSendToCloud": False,
            "modeBarButtonsToRemove": ["select2d", "lasso2d", "zoomIn2d", "zoomOut2d"],
            "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}}


def figure_filenames(store: dict, metric: str) -> tuple[str, str]:
    """PNG names of the two charts: what they plot, and ρ for the bounded error."""
    name = "evaluation_" + METRICS[metric]["file"]
    if metric == "bounded":
        name += f"_rho{store['rho']:g}"
    return f"{name}_vs_epsilon", f"{name}_vs_query_size"


def _design(store: dict):
    """(mechanism label, ε, area, summary row or None if it never ran) over the whole design."""
    labels = {k: s.label for k, s in dp.mechanisms().items()}
    done = {(r["mechanism"], r["epsilon"], r["area_frac"]): r for r in store["rows"]}
    for m in store["mechs"]:
        for e in store["eps"]:
            for a in store["sizes"]:
                yield labels.get(m, m), e, a, done.get((m, e, a))


def _number(v) -> str:
    """A table value: 3 significant digits below 100, whole numbers above, words if not finite."""
    if v is None:
        return NOT_COMPUTABLE
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def _spread_text(r: dict, key: str) -> str:
    """The interquartile range over repetitions, or why there is none."""
    if r["reps"] < 2:
        return "one run: no spread"
    return f"{_number(r[f'q25_{key}'])} – {_number(r[f'q75_{key}'])}"


def _small_share(r: dict) -> float:
    """Percentage of the group's queries with fewer than ρ true points."""
    return 100 * r["n_small"] / r["n_queries"]


def table_columns(rho: float) -> list[dict]:
    """The table's header: both metrics, ρ named where it is used."""
    names = {"mechanism": "mechanism", "epsilon": "ε", "area": "query area %",
             "bounded": f"bounded relative error, ρ = {rho:g} (median)", "bounded_iqr": "IQR over runs",
             "absolute": "absolute error, points (median)", "absolute_iqr": "IQR over runs",
             "small": f"queries with < {rho:g} points", "runs": "runs"}
    return [{"id": k, "name": v} for k, v in names.items()]


def table_rows(store: dict) -> list[dict]:
    """One row per (mechanism, ε, size) of the design; a cell that has no value says why."""
    out = []
    for label, e, a, r in _design(store):
        row = {"mechanism": label, "epsilon": e, "area": round(100 * a, 3)}
        if r is None:
            row.update({k: NOT_RUN for k in ("bounded", "bounded_iqr", "absolute", "absolute_iqr", "small", "runs")})
        else:
            for metric, m in METRICS.items():
                row[metric] = _number(r[f"median_{m['key']}"])
                row[f"{metric}_iqr"] = _spread_text(r, m["key"])
            row.update({"small": f"{_small_share(r):.0f}%", "runs": r["reps"]})
        out.append(row)
    return out


def csv_text(store: dict) -> str:
    """The evaluation table as CSV: numbers as computed, a header naming each metric and ρ."""
    rho = store["rho"]
    names = {"bounded": f"bounded relative error (rho = {rho:g})", "absolute": "absolute error (points)"}
    header = ["mechanism", "epsilon", "query area (% of domain)"]
    header += [f"{q} {names[k]}" for k in METRICS for q in ("median", "25th percentile", "75th percentile")]
    header += [f"queries with fewer than rho = {rho:g} true points (%)", "runs", "note"]
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(header)
    for label, e, a, r in _design(store):
        if r is None:
            out.writerow([label, e, 100 * a] + [""] * (len(header) - 4) + [NOT_RUN])
            continue
        values = [r[f"{q}_{m['key']}"] for m in METRICS.values() for q in ("median", "q25", "q75")]
        note = "" if None not in values else NOT_COMPUTABLE
        out.writerow([label, e, 100 * a] + ["" if v is None else v for v in values]
                     + [_small_share(r), r["reps"], note])
    return buf.getvalue()


def note(store: dict) -> str:
    """States ρ and how much of the workload held fewer than ρ points (why ρ matters here)."""
    rho = store["rho"]
    n = sum(r["n_queries"] for r in store["rows"])
    share = 100 * sum(r["n_small"] for r in store["rows"]) / n
    return (f"Bounded relative error = |private − true| / max(true, ρ) with ρ = {rho:g} points: a query "
            f"with fewer than {rho:g} true points is measured relative to {rho:g}. In this run "
            f"{share:.0f}% of the queries held fewer than {rho:g} points. Absolute error is "
            "|private − true| in points. Bands and IQR span the middle half of the runs.")


def eval_cache_key(sid: str, cfg) -> str:
    """Where this session's results for one evaluation set-up are kept (never another's)."""
    return f"eval:{sid}:" + json.dumps(cfg, sort_keys=True)


def run_evaluation(set_progress, _run, mechs, eps_text, sizes, nq, reps, rho, info, domain_info):
    """The Run button's background job: checks the set-up, then evaluates (or reads this
    session's cached result of the same set-up), its progress shown as it goes; a cancelled run
    returns the releases it finished. Returns (result store, status line)."""
    sid = sessions.session_id()
    try:
        if not mechs or not sizes:
            raise dp.ParameterError("choose at least one mechanism and one query size")
        eps = parse_epsilons(eps_text)
        rho = metrics.check_rho(rho)
        domain = domain_from_store(domain_info)
        data = state.points(sid, info["fingerprint"])
    except (dp.ParameterError, LookupError, TypeError) as exc:
        return no_update, html.Div(str(exc), className="error")
    setup = {"mechs": sorted(mechs), "eps": eps, "sizes": sorted(sizes), "rho": rho}
    cfg = {"fp": info["fingerprint"], "domain": domain.to_dict(), **setup,
           "nq": int(nq or 100), "reps": int(reps or 1)}
    cache_key = eval_cache_key(sid, cfg)
    cached = services.current().store.get(cache_key)
    if cached is not None:
        return cached, "Loaded from cache."
    seen = {"done": 0, "total": 1}

    def progress(done, total):
        seen.update(done=done, total=total)
        set_progress((str(done), str(total), f"Running… {done} of {total} releases"))

    rows = evaluate.evaluate(data=data, domain=domain, mechanisms=setup["mechs"], epsilons=eps,
                             area_fracs=setup["sizes"], n_queries=cfg["nq"], repetitions=cfg["reps"],
                             seed=0, sanity=rho, progress=progress, should_stop=background.stop_requested)
    store = result_store(evaluate.summarise(rows or []), setup)
    if background.stop_requested():
        return store, f"Cancelled after {seen['done']} of {seen['total']} releases; showing partial results."
    services.current().store.set(cache_key, store)
    return store, f"Done: {seen['total']} releases."


def register_callbacks(app, config: dict):
    app.callback(Output(ids.EVAL_MECHS, "options"), Output(ids.EVAL_MECHS, "value"),
                 Input(ids.DATASET, "data"), State(ids.EVAL_MECHS, "value"))(offer)

    app.callback(Output(ids.EVAL_SUMMARY, "data"), Output(ids.EVAL_STATUS, "children"),
                 Input(ids.EVAL_RUN, "n_clicks"),
                 State(ids.EVAL_MECHS, "value"), State(ids.EVAL_EPSILONS, "value"),
                 State(ids.EVAL_SIZES, "value"), State(ids.EVAL_NQ, "value"), State(ids.EVAL_REPS, "value"),
                 State(ids.EVAL_RHO, "value"), State(ids.DATASET, "data"), State(ids.DOMAIN, "data"),
                 background=True, interval=500, cancel=[Input(ids.EVAL_CANCEL, "n_clicks")],
                 progress=[Output(ids.EVAL_PROGRESS, "value"), Output(ids.EVAL_PROGRESS, "max"),
                           Output(ids.EVAL_PROGRESS_TEXT, "children")],
                 progress_default=["0", "1", ""],
                 running=[(Output(ids.EVAL_RUN, "disabled"), True, False),
                          (Output(ids.EVAL_CANCEL, "disabled"), False, True),
                          (Output(ids.EVAL_STATUS, "children"), QUEUED, "")],
                 prevent_initial_call=True)(run_evaluation)

    app.callback(Output(place_id(ids.EVAL_FIG_EPS), "children"),
                 Output(place_id(ids.EVAL_FIG_SIZE), "children"),
                 Output(ids.EVAL_TABLE, "data"), Output(ids.EVAL_TABLE, "columns"),
                 Output(ids.EVAL_NOTE, "children"), Output(ids.EVAL_RESULTS, "hidden"),
                 Input(ids.EVAL_SUMMARY, "data"), Input(ids.EVAL_METRIC, "value"))(show_results)

    app.callback(Output(ids.EVAL_CSV_DOWNLOAD, "data"), Input(ids.EVAL_CSV_BUTTON, "n_clicks"),
                 State(ids.EVAL_SUMMARY, "data"), prevent_initial_call=True)(download_csv)


def offer(info, chosen):
    """The mechanisms an evaluation can run on this kind of data, the ticked ones kept (else
    the first three)."""
    opts = eval_options((info or {}).get("kind", "points"), (info or {}).get("counts", False))
    values = [o["value"] for o in opts]
    keep = [v for v in chosen or [] if v in values]
    return opts, keep or values[:3]


def show_results(store, metric):
    """Charts, table and note of a finished run; hidden until one has results."""
    if not store or not store["rows"]:
        return [], [], [], [], "", True
    f_eps, f_size = figures(store, metric)
    n_eps, n_size = figure_filenames(store, metric)
    return (chart(ids.EVAL_FIG_EPS, f_eps, config=graph_config(n_eps), **EVAL_CHART),
            chart(ids.EVAL_FIG_SIZE, f_size, config=graph_config(n_size), **EVAL_CHART),
            table_rows(store), table_columns(store["rho"]), note(store), False)


def download_csv(_, store):
    """The shown evaluation table as a CSV file."""
    if not store or not store["rows"]:
        return no_update
    return dcc.send_string(csv_text(store), "evaluation_owner_only.csv", type="text/csv")
