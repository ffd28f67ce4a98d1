"""Queries panel: drawn, typed and random rectangles, each compared private vs true."""
from __future__ import annotations

import dash_leaflet as dl
import numpy as np
from dash import Input, Output, State, ctx, dash_table, dcc, html, no_update

import dp

from . import ids, state
from .help import help_box

EXTRA = "extra-rects"     # store of random / typed rectangles (the EditControl owns drawn ones)
TYPED = "typed-rect"
TYPED_BUTTON = "typed-rect-button"
QUERY_MSG = "query-message"

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
            html.Div(dcc.Input(id=TYPED, placeholder="west, south, east, north", debounce=True),
                     className="wide"),
            html.Button("Add", id=TYPED_BUTTON, n_clicks=0),
            html.Button("Clear added", id=ids.CLEAR_BUTTON, n_clicks=0),
        ]),
        html.Div(id=QUERY_MSG, role="alert"),
        dash_table.DataTable(id=ids.QUERY_TABLE, columns=[{"name": n, "id": i} for i, n in COLUMNS],
                             data=[], page_size=12, style_table={"overflowX": "auto"},
                             style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "4px"},
                             style_header={"fontWeight": "600"}),
        dcc.Store(id=EXTRA, data=[]),
    ])


def rects_from_geojson(geojson: dict | None) -> list[dp.Rect]:
    """Rectangles drawn with the EditControl (their polygon's bounding box)."""
    out = []
    for f in (geojson or {}).get("features", []):
        geom = f.get("geometry") or {}
        if geom.get("type") != "Polygon":
            continue
        ring = np.asarray(geom["coordinates"][0], dtype=float)
        out.append(dp.Rect(ring[:, 0].min(), ring[:, 1].min(), ring[:, 0].max(), ring[:, 1].max()))
    return out


def parse_typed(text: str) -> dp.Rect:
    try:
        vals = [float(v) for v in text.replace(";", ",").split(",")]
    except ValueError:
        vals = []
    if len(vals) != 4:
        raise dp.ParameterError(f"expected four numbers 'west, south, east, north', got {text!r}")
    return dp.Rect(*vals)


def comparison_rows(rel, data, labelled_rects) -> list[dict]:
    """One table row per rectangle: private answer, noise interval, true count and errors."""
    if not labelled_rects:
        return []
    labels, rects = zip(*labelled_rects)
    private = rel.answer_many(list(rects))
    true = data.true_counts(list(rects), rel.domain)
    rel_err = dp.metrics.relative_error(private, true)
    rows = []
    for lab, r, p, t, e in zip(labels, rects, private, true, rel_err):
        lo, hi = rel.interval(r)
        rows.append({
            "id": lab, "bounds": f"{r.west:.4f}, {r.south:.4f}, {r.east:.4f}, {r.north:.4f}",
            "private": round(float(p), 1), "interval": f"[{lo:.1f}, {hi:.1f}]", "true": int(t),
            "abs_error": round(abs(float(p) - int(t)), 1),
            "rel_error": "n/a (true = 0)" if not np.isfinite(e) else f"{100 * e:.1f}%",
        })
    return rows


def register_callbacks(app, config: dict):
    @app.callback(Output(EXTRA, "data"), Output(QUERY_MSG, "children"),
                  Input(ids.RANDOM_BUTTON, "n_clicks"), Input(TYPED_BUTTON, "n_clicks"),
                  Input(TYPED, "n_submit"), Input(ids.CLEAR_BUTTON, "n_clicks"),
                  State(ids.RANDOM_N, "value"), State(ids.RANDOM_AREA, "value"),
                  State(TYPED, "value"), State(EXTRA, "data"), State(ids.RELEASE, "data"),
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

    @app.callback(Output(ids.DRAWN, "children"), Input(EXTRA, "data"))
    def draw_extra(extra):
        return [dl.Rectangle(bounds=[[s, w], [n, e]], interactive=False,
                             pathOptions={"color": "#7a1fa2", "weight": 2, "fillOpacity": 0.05},
                             children=dl.Tooltip(f"R{i + 1}", permanent=True, direction="center"))
                for i, (w, s, e, n) in enumerate(extra or [])]

    @app.callback(Output(ids.QUERY_TABLE, "data"),
                  Input(ids.EDIT, "geojson"), Input(EXTRA, "data"), Input(ids.RELEASE, "data"),
                  State(ids.SESSION, "data"))
    def compare(geojson, extra, rinfo, sid):
        if not rinfo:
            return no_update
        try:
            rel = state.release(sid, rinfo["key"])
            data = state.points(sid, state.key_fingerprint(rinfo["key"]))
        except LookupError:
            return []
        labelled = [(f"Q{i + 1}", r) for i, r in enumerate(rects_from_geojson(geojson))]
        labelled += [(f"R{i + 1}", dp.Rect(*r)) for i, r in enumerate(extra or [])]
        return comparison_rows(rel, data, labelled)
