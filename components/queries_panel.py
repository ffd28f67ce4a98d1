"""Queries panel: drawn, typed and random rectangles, each compared private vs true."""
from __future__ import annotations

import dash_leaflet as dl
import numpy as np
from dash import Input, Output, State, ctx, dash_table, dcc, html, no_update

import dp

from . import ids, state
from .controls import EXACT_STAGE, labelled_rects, parse_typed
from .help import help_box

COLUMNS = [
    ("id", "#"), ("bounds", "Rectangle (W, S, E, N)"), ("private", "Private answer"),
    ("interval", "95% noise interval"), ("true", "True count (owner only)"),
    ("abs_error", "Abs. error"), ("rel_error", "Rel. error"),
]


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("4 · Queries: private vs true"),
        help_box("queries"),
        html.Div(className="query-tools", children=[
            html.Span("Draw with the ▭ tool on the map, or add "),
            html.Div(dcc.Input(id=ids.RANDOM_N, type="number", value=5, min=1, max=200, step=1),
                     className="small"),
            html.Span(" random rectangles of "),
            dcc.Dropdown(id=ids.RANDOM_AREA, value=0.01, clearable=False, className="inline-dd",
                         options=[{"label": f"{a:g}% area", "value": a / 100} for a in (0.1, 1, 4, 9, 25)]),
            html.Button("Add random", id=ids.RANDOM_BUTTON, n_clicks=0),
            html.Div(dcc.Input(id=ids.QUERY_TYPED, placeholder="west, south, east, north", debounce=True),
                     className="wide"),
            html.Button("Add", id=ids.QUERY_TYPED_BUTTON, n_clicks=0),
            html.Button("Clear added", id=ids.CLEAR_BUTTON, n_clicks=0),
        ]),
        html.Div(id=ids.QUERY_MESSAGE, role="alert"),
        html.Div(id=ids.QUERY_WARNING, role="alert"),
        dash_table.DataTable(id=ids.QUERY_TABLE, columns=[{"name": n, "id": i} for i, n in COLUMNS],
                             data=[], page_size=12, style_table={"overflowX": "auto"},
                             style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "4px"},
                             style_header={"fontWeight": "600"}),
        dcc.Store(id=ids.QUERY_EXTRA, data=[]),
    ])


SNAP_COLUMNS = [("snapped", "Answered rectangle (snapped to cells)"), ("raw", "Raw (before clamping at 0)"),
                ("true_drawn", "True on drawn rectangle (owner only)")]


def columns_for(rel: dp.Release, stage: str | None = None) -> list[dict]:
    """Table columns; releases that snap rectangles to cells (Euler) get the snapping columns."""
    cols = list(COLUMNS)
    if stage == EXACT_STAGE:
        cols[2] = ("private", "Exact answer (owner only, NOT private)")
    if rel.capabilities.snapping:
        cols[4] = ("true", "True on snapped rectangle (owner only)")
        cols = cols[:2] + [SNAP_COLUMNS[0]] + cols[2:3] + [SNAP_COLUMNS[1]] + cols[3:5] + [SNAP_COLUMNS[2]] + cols[5:]
    return [{"name": n, "id": i} for i, n in cols]


def _fmt(r) -> str:
    return f"{r.west:.4f}, {r.south:.4f}, {r.east:.4f}, {r.north:.4f}"


def comparison_rows(rel, data, labelled_rects, stage: str | None = None) -> list[dict]:
    """One table row per rectangle: private answer, noise interval, true count and errors.

    A release that snaps rectangles to its cells (Euler) answers the snapped rectangle, so the
    errors compare with the true count there; the drawn rectangle's true count is shown too.
    With stage "exact" the answer column holds the exact (owner-only) answer.
    """
    if not labelled_rects:
        return []
    labels, rects = zip(*labelled_rects)
    rects = list(rects)
    exact = stage == EXACT_STAGE
    snapping = rel.capabilities.snapping
    answered = [rel.snap(r) or r for r in rects] if snapping else rects
    true = data.true_counts(answered, rel.domain)
    private = true.astype(float) if exact else rel.answer_many(rects)
    rel_err = dp.metrics.relative_error(private, true)
    extra = {}
    if snapping:
        raw = true.astype(float) if exact else rel.answer_raw_many(rects)
        extra = {"raw": raw, "true_drawn": data.true_counts(rects, rel.domain)}
    rows = []
    for i, (lab, r, p, t, e) in enumerate(zip(labels, rects, private, true, rel_err)):
        lo, hi = (p, p) if exact else rel.interval(r)
        row = {
            "id": lab, "bounds": _fmt(r), "private": round(float(p), 1),
            "interval": "n/a (no closed form for this stage)" if np.isnan(lo) else f"[{lo:.1f}, {hi:.1f}]",
            "true": int(t), "abs_error": round(abs(float(p) - int(t)), 1),
            "rel_error": "n/a (true = 0)" if not np.isfinite(e) else f"{100 * e:.1f}%",
        }
        if snapping:
            row.update(snapped=_fmt(answered[i]), raw=round(float(extra["raw"][i]), 1),
                       true_drawn=int(extra["true_drawn"][i]))
        rows.append(row)
    return rows


def register_callbacks(app, config: dict):
    @app.callback(Output(ids.QUERY_EXTRA, "data"), Output(ids.QUERY_MESSAGE, "children"),
                  Input(ids.RANDOM_BUTTON, "n_clicks"), Input(ids.QUERY_TYPED_BUTTON, "n_clicks"),
                  Input(ids.QUERY_TYPED, "n_submit"), Input(ids.CLEAR_BUTTON, "n_clicks"),
                  State(ids.RANDOM_N, "value"), State(ids.RANDOM_AREA, "value"),
                  State(ids.QUERY_TYPED, "value"), State(ids.QUERY_EXTRA, "data"),
                  State(ids.RELEASE, "data"),
                  prevent_initial_call=True)
    def add_rects(_r, _t, _s, _c, n, area, typed, extra, rinfo):
        extra = list(extra or [])
        if ctx.triggered_id == ids.CLEAR_BUTTON:
            return [], ""
        try:
            if ctx.triggered_id == ids.RANDOM_BUTTON:
                if not rinfo:
                    return no_update, "Run a release first."
                domain = state.key_domain(rinfo["key"])
                seed = len(extra) + 1000 * (_r or 0)   # public randomness: never reads the data
                rects = dp.random_workload(domain, int(n or 1), area_frac=float(area), rng=seed)
                extra += [list(map(float, r)) for r in rects]
            else:
                extra.append(list(parse_typed(typed or "").as_array()))
        except (dp.ParameterError, ValueError) as exc:
            return no_update, html.Div(str(exc), className="error")
        return extra, ""

    @app.callback(Output(ids.DRAWN, "children"), Input(ids.QUERY_EXTRA, "data"))
    def draw_extra(extra):
        return [dl.Rectangle(bounds=[[s, w], [n, e]], interactive=False,
                             pathOptions={"color": "#7a1fa2", "weight": 2, "fillOpacity": 0.05},
                             children=dl.Tooltip(f"R{i + 1}", permanent=True, direction="center"))
                for i, (w, s, e, n) in enumerate(extra or [])]

    @app.callback(Output(ids.QUERY_TABLE, "data"), Output(ids.QUERY_TABLE, "columns"),
                  Output(ids.QUERY_WARNING, "children"),
                  Input(ids.EDIT, "geojson"), Input(ids.QUERY_EXTRA, "data"), Input(ids.RELEASE, "data"),
                  Input(ids.EULER_STAGE, "value"))
    def compare(geojson, extra, rinfo, stage):
        sid = state.session_id()
        if not rinfo:       # new data without a release: no answers of the previous data stay
            return [], no_update, html.Div("No release of the data now loaded yet, so there are "
                                           "no private answers: release it in panel 2.", className="warning")
        try:
            rel = state.release(sid, rinfo["key"])
            data = state.points(sid, state.key_fingerprint(rinfo["key"]))
            if not rel.capabilities.stages:
                stage = None
            elif stage != EXACT_STAGE:        # a new release at that stage, cached apart
                rel = state.staged_release(sid, rinfo["key"], stage)
        except LookupError:
            return [], no_update, ""
        labelled = labelled_rects(geojson, extra)
        warnings = [html.Div(w, className="warning") for w in rel.warnings()]
        return comparison_rows(rel, data, labelled, stage), columns_for(rel, stage), warnings or ""
