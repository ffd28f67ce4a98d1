"""Queries panel: drawn, typed and random rectangles, each compared private vs true, with the
range the true count lies in (95%, any data) and a CSV download (which adds the noise-only
interval, labelled as such)."""
from __future__ import annotations

import csv
import io
import math
import time
from typing import NamedTuple

import dash_leaflet as dl
import numpy as np
from dash import Input, Output, State, ctx, dash_table, dcc, html, no_update

import dp
from dp.feature_files import stamp
from dp.provenance import provenance

from . import ids, inputs
from server import releases, sessions, state, workspace
from .controls import EXACT_STAGE, fit_to_domain, labelled_rects, parse_typed, rects_from_geojson
from .help import help_box
from .numbers import plural, shown_people

RANGE_HELP = ("Where the true count lies, 95% of the time, whatever the data: between the "
              "noisy count of the cells or leaves wholly inside the rectangle and that of every "
              "one it touches, each widened by its noise. It needs no assumption about how people "
              "spread inside cells, so it is wide where the rectangle cuts big cells. Trees whose "
              "levels are made consistent (quadtree, kd-tree, adaptive grid, full quadtree) use "
              "each region's own noisy count from before that fitting, so the range need not be "
              "centred on the answer. 'none' where no such count exists (DAWA fits its counts "
              "jointly).")
NOISE_ONLY_NOTE = ("The CSV also has a 95% interval of the noise alone (columns "
                   "interval95_noise_only_*): it leaves out the error of spreading people evenly "
                   "inside the cells a rectangle cuts, so it is not a range for the true count.")
COLUMNS = [
    ("id", "#"), ("bounds", "Rectangle (W, S, E, N)"), ("private", "Private answer"),
    ("range", "True count lies in (95%, any data)"),
    ("true", "True count (owner only)"), ("abs_error", "Abs. error"), ("rel_error", "Rel. error"),
]
SNAP_COLUMNS = [("snapped", "Answered rectangle (snapped to cells)"), ("raw", "Raw (before clamping at 0)"),
                ("true_drawn", "True on drawn rectangle (owner only)")]
CLIPPED = " (clipped to the domain)"
# what the CSV holds: the release's answers and public settings only, never a true count
CSV_FIELDS = ("id", "west", "south", "east", "north", "clipped_to_domain", "private_answer",
              "private_people",
              "count_range95_any_data_low", "count_range95_any_data_high",
              "interval95_noise_only_low", "interval95_noise_only_high",
              "differentially_private")
CSV_SNAP_FIELDS = ("answered_rectangle", "raw_answer")


class Query(NamedTuple):
    """A labelled rectangle inside the domain; `clipped` when part of it lay outside."""

    label: str
    rect: dp.Rect
    clipped: bool = False


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        help_box("queries"),
        html.Div(className="query-tools", children=[
            html.Span("Draw with the ▭ tool on the map, or add "),
            html.Label("number of random rectangles", htmlFor=ids.RANDOM_N, className="sr-only"),
            html.Div(dcc.Input(id=ids.RANDOM_N, type="number", value=5, min=1, max=200, step=1),
                     className="small"),
            html.Span(" random rectangles of ", id=ids.QUERY_RANDOM_NOUN),
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
        html.Div(className="hint query-note", children=[
            html.P([html.B("True count lies in: "), RANGE_HELP]),
            html.P(NOISE_ONLY_NOTE, className="small-print"),
        ]),
        dcc.Store(id=ids.QUERY_EXTRA, data=config["page"]["queries"]),
    ])


def answers_layout() -> html.Section:
    """The answers table, under the map (full width, the map stays in view); hidden while it
    has no rows."""
    return html.Section(className="card answers", **{"aria-label": "Answers to the rectangles"}, children=[
        html.Div(className="query-foot", children=[
            html.H3("Answers"),
            html.Span(id=ids.QUERY_COUNT, className="hint"),
            html.Button("Download table (CSV)", id=ids.QUERY_CSV_BUTTON, n_clicks=0),
            dcc.Download(id=ids.QUERY_CSV_DOWNLOAD),
        ]),
        dash_table.DataTable(id=ids.QUERY_TABLE, columns=[{"name": n, "id": i} for i, n in COLUMNS],
                             data=[], page_size=12, style_table={"overflowX": "auto"},
                             style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "4px",
                                         "whiteSpace": "normal", "height": "auto", "minWidth": "48px"},
                             style_cell_conditional=[{"if": {"column_id": "bounds"}, "minWidth": "130px",
                                                      "maxWidth": "170px"}],
                             style_header={"fontWeight": "600", "whiteSpace": "normal"},
                             tooltip_header={"range": RANGE_HELP},
                             tooltip_delay=0, tooltip_duration=None),
    ])


def columns_for(rel: dp.Release, stage: str | None = None) -> list[dict]:
    """Table columns; releases that snap rectangles to cells (Euler) get the snapping columns."""
    cols = list(COLUMNS)
    if stage == EXACT_STAGE:
        cols[2] = ("private", "Exact answer (owner only, NOT private)")
    if rel.capabilities.snapping:
        cols[5] = ("true", "True on snapped rectangle (owner only)")
        cols = cols[:2] + [SNAP_COLUMNS[0]] + cols[2:3] + [SNAP_COLUMNS[1]] + cols[3:6] + [SNAP_COLUMNS[2]] + cols[6:]
    return [{"name": n, "id": i} for i, n in cols]


def _fmt(r) -> str:
    return f"{r.west:.4f}, {r.south:.4f}, {r.east:.4f}, {r.north:.4f}"


def queries_in(domain: dp.Domain, labelled) -> tuple[list[Query], list[str]]:
    """The labelled rectangles fitted to the domain (clipped where partly outside), and a
    plain note for each one refused (wholly outside, or without area)."""
    out, notes = [], []
    for label, rect in labelled:
        try:
            out.append(Query(label, *fit_to_domain(rect, domain)))
        except dp.ParameterError as exc:
            notes.append(f"{label} is not answered: {exc}.")
    return out, notes


def count_range(lo: float, hi: float, rel, noise=(math.nan, math.nan)) -> str:
    """The assumption-free range in whole people, or why the release has none, followed by
    the noise-only interval (`noise`), said to be one, where there is such an interval: both in
    whole people, widened outward, so the table reads one format."""
    if not math.isnan(lo):
        return f"{math.floor(lo):,} to {math.ceil(hi):,}"
    if rel.spec.data_kind == "regions":
        why = "none: regions are counted where they overlap, not per cell"
    elif rel.points_per_user:
        why = "none: user-level counts are of each user's kept points"
    else:
        why = "none: counts fitted jointly" if rel.region_noise_scales() is None else "none for this release"
    if math.isnan(noise[0]):
        return why
    return f"{why} (the noise alone: {math.floor(noise[0]):,} to {math.ceil(noise[1]):,})"


def public_rows(rel, queries: list[Query]) -> list[dict]:
    """Per rectangle what the release alone gives (no data is read): the private answer, the
    range that holds the true count for any data (`Release.bounds`), the noise-only interval
    (for the CSV) and, for releases that snap rectangles to cells (Euler), the answered
    rectangle and the raw answer before clamping."""
    if not queries:
        return []
    rects = [q.rect for q in queries]
    answers = rel.answer_many(rects)
    blo, bhi = rel.bounds(rects)
    snapping = rel.capabilities.snapping
    raw = rel.answer_raw_many(rects) if snapping else None
    rows = []
    for i, (q, p) in enumerate(zip(queries, answers)):
        lo, hi = rel.interval(q.rect)
        r = q.rect
        row = {"id": q.label, "bounds": _fmt(r) + (CLIPPED if q.clipped else ""),
               "west": r.west, "south": r.south, "east": r.east, "north": r.north, "clipped": q.clipped,
               "answer": float(p), "whole": shown_people(p), "private": f"{shown_people(p):,}", "lo": lo, "hi": hi,
               "range": count_range(blo[i], bhi[i], rel, (lo, hi)), "range_lo": float(np.floor(blo[i])), "range_hi": float(np.ceil(bhi[i]))}
        if snapping:
            row.update(snapped=_fmt(rel.snap(r) or r), raw=round(float(raw[i]), 1))
        rows.append(row)
    return rows


def comparison_rows(rel, data, labelled_rects, stage: str | None = None) -> list[dict]:
    """One table row per rectangle: `public_rows` plus the owner-only true count and errors.

    A release that snaps rectangles to its cells (Euler) answers the snapped rectangle, so the
    errors compare with the true count there; the drawn rectangle's true count is shown too.
    With stage "exact" the answer column holds the exact (owner-only) answer.
    `labelled_rects`: `Query` tuples or (label, rect) pairs already inside the domain.
    """
    queries = [Query(*q) for q in labelled_rects]
    rows = public_rows(rel, queries)
    if not rows:
        return []
    rects = [q.rect for q in queries]
    snapping = rel.capabilities.snapping
    true = data.true_counts([rel.snap(r) or r for r in rects] if snapping else rects, rel.domain)
    if stage == EXACT_STAGE:
        for row, t in zip(rows, true):
            row.update(answer=float(t), whole=int(t), private=f"{int(t):,}", lo=float(t), hi=float(t),
                       range=f"{int(t):,} to {int(t):,}", range_lo=float(t), range_hi=float(t),
                       **({"raw": float(t)} if snapping else {}))
    shown = np.array([row["whole"] for row in rows], dtype=np.float64)      # errors of what is shown
    rel_err = dp.metrics.relative_error(shown, true)
    true_drawn = data.true_counts(rects, rel.domain) if snapping else None
    for i, (row, p, t, e) in enumerate(zip(rows, shown, true, rel_err)):
        row.update(true=f"{int(t):,}", abs_error=f"{abs(int(p) - int(t)):,}",
                   rel_error="n/a (true = 0)" if not np.isfinite(e) else f"{100 * e:.1f}%")
        if snapping:
            row["true_drawn"] = f"{int(true_drawn[i]):,}"
    return rows


def csv_text(rows: list[dict], snapping: bool = False, private: bool = True,
             block: dict | None = None) -> str:
    """The public part of the query table as a plain CSV: answers, ranges and noise-only
    intervals, each row saying whether the release is differentially private (a fixed-seed demo
    is not) and, given the provenance `block`, its mechanism, ε and unit of privacy
    (`dp.feature_files.stamp`); no true count or error against the data (see CSV_FIELDS)."""
    mark = stamp(block) if block is not None else {}
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_FIELDS + (CSV_SNAP_FIELDS if snapping else ()) + tuple(mark))
    for r in rows:
        line = [r["id"], r["west"], r["south"], r["east"], r["north"], "yes" if r["clipped"] else "no",
                round(r["answer"], 3), r["whole"], _blank_nan(r["range_lo"]), _blank_nan(r["range_hi"]),
                _blank_nan(r["lo"]), _blank_nan(r["hi"]), "yes" if private else "no"]
        writer.writerow(line + ([r["snapped"], r["raw"]] if snapping else []) + list(mark.values()))
    return out.getvalue()


def _blank_nan(v: float):
    """An interval end for the CSV: blank where it is unknown (no closed form)."""
    return "" if np.isnan(v) else round(float(v), 3)


def current_queries(sid, rinfo, geojson, extra, stage):
    """(release at the chosen stage, the queries inside its domain, notes on refused ones)."""
    rel = releases.release(sid, rinfo["key"])
    if not rel.capabilities.stages:
        stage = None
    elif stage != EXACT_STAGE:            # a new release at that stage, cached apart
        rel = releases.staged_release(sid, rinfo["key"], stage)
    queries, notes = queries_in(rel.domain, labelled_rects(geojson, extra))
    return rel, stage, queries, notes


def label_layer(rect: dp.Rect, label: str, outline: bool):
    """A rectangle's row label on the map; `outline` also draws it (typed and random ones; the
    drawing tool draws its own)."""
    style = {"color": "#7a1fa2", "weight": 2, "fillOpacity": 0.05} if outline else {"stroke": False, "fill": False}
    return dl.Rectangle(bounds=[[rect.south, rect.west], [rect.north, rect.east]], interactive=False,
                        pathOptions=style, children=dl.Tooltip(label, permanent=True, direction="center",
                                                               className="query-label"))


def register_callbacks(app, config: dict):
    app.callback(Output(ids.QUERY_EXTRA, "data"), Output(ids.QUERY_MESSAGE, "children"),
                 Output(ids.QUERY_TYPED, "value"),
                 Input(ids.RANDOM_BUTTON, "n_clicks"), Input(ids.QUERY_TYPED_BUTTON, "n_clicks"),
                 Input(ids.QUERY_TYPED, "n_submit"), Input(ids.CLEAR_BUTTON, "n_clicks"),
                 State(ids.RANDOM_N, "value"), State(ids.RANDOM_AREA, "value"),
                 State(ids.QUERY_TYPED, "value"), State(ids.QUERY_EXTRA, "data"),
                 State(ids.RELEASE, "data"),
                 prevent_initial_call=True)(add_rects)

    app.callback(Output(ids.QUERY_EXTRA, "data", allow_duplicate=True),
                 Output(ids.QUERY_MESSAGE, "children", allow_duplicate=True),
                 Output(ids.EDIT, "editToolbar"),
                 Input(ids.DATASET, "data"), prevent_initial_call=True)(clear_for_new_data)

    app.callback(Input(ids.QUERY_EXTRA, "data"), prevent_initial_call=True)(keep_rects)

    app.callback(Output(ids.QUERY_RANDOM_NOUN, "children"), Input(ids.RANDOM_N, "value"))(random_noun)

    app.callback(Output(ids.DRAWN, "children"), Input(ids.QUERY_EXTRA, "data"), Input(ids.EDIT, "geojson"))(draw_labels)

    app.callback(Output(ids.QUERY_TABLE, "data"), Output(ids.QUERY_TABLE, "columns"),
                 Output(ids.QUERY_WARNING, "children"), Output(ids.QUERY_COUNT, "children"),
                 Input(ids.EDIT, "geojson"), Input(ids.QUERY_EXTRA, "data"), Input(ids.RELEASE, "data"),
                 Input(ids.EULER_STAGE, "value"))(compare)

    app.callback(Output(ids.QUERY_CSV_DOWNLOAD, "data"),
                 Output(ids.QUERY_MESSAGE, "children", allow_duplicate=True),
                 Input(ids.QUERY_CSV_BUTTON, "n_clicks"),
                 State(ids.EDIT, "geojson"), State(ids.QUERY_EXTRA, "data"), State(ids.RELEASE, "data"),
                 State(ids.EULER_STAGE, "value"),
                 prevent_initial_call=True)(download)


def add_rects(_r, _t, _s, _c, n, area, typed, extra, rinfo):
    """Add random or typed rectangles; a typed one empties the box, so Enter followed by Add
    adds it once."""
    extra = list(extra or [])
    if ctx.triggered_id == ids.CLEAR_BUTTON:
        return [], "", no_update
    typing = ctx.triggered_id != ids.RANDOM_BUTTON
    if typing and not (typed or "").strip():
        return no_update, no_update, no_update           # already added (Enter, then Add)
    if not rinfo:
        return no_update, "Run a release first.", no_update
    domain = releases.key_domain(rinfo["key"])
    try:
        if not typing:
            seed = len(extra) + 1000 * (_r or 0)   # public randomness: never reads the data
            rects = dp.random_workload(domain, int(n or 1), area_frac=float(area), rng=seed)
            return extra + [list(map(float, r)) for r in rects], "", no_update
        rect = parse_typed(typed)
        inside, clipped = fit_to_domain(rect, domain)
    except (dp.ParameterError, ValueError) as exc:
        return no_update, html.Div(f"Not added: {exc}.", className="error"), no_update
    note = html.Div(f"R{len(extra) + 1} reaches outside the public domain: it is answered "
                    f"clipped to {_fmt(inside)}.", className="warning") if clipped else ""
    return extra + [list(rect.as_array())], note, ""


def clear_for_new_data(info):
    """New data: the rectangles drawn, typed or drawn at random for the old data go (they
    were asked of another dataset, often in another place)."""
    return [], "", {"mode": "remove", "action": "clear all", "n_clicks": time.time()}


def keep_rects(extra):
    """The workspace keeps the typed and random rectangles: a reload shows them again."""
    workspace.set_queries(sessions.session_id(), extra or [])


def random_noun(n):
    """The words between the count and the size in the random-rectangles line."""
    return f" random {plural(n or 0, 'rectangle')} of "


def draw_labels(extra, geojson):
    """Every rectangle's row label on the map (Q for drawn, R for typed and random). A
    drawing is kept in the workspace first, so a reload shows it again as a kept rectangle
    (the drawing tool cannot be given shapes back), and once its label shows it is kept."""
    drew = f"{ids.EDIT}.geojson" in ctx.triggered_prop_ids      # with the typed list too, at times
    if drew and inputs.fits(geojson, inputs.PROPS["geojson"][0]):
        rects = [r.as_array() for r in rects_from_geojson(geojson)]
        workspace.set_drawn(sessions.session_id(), [r for r in rects if np.isfinite(r).all()])
    return [label_layer(r, label, outline=label.startswith("R"))
            for label, r in labelled_rects(geojson, extra)]


def compare(geojson, extra, rinfo, stage):
    """The drawn and typed rectangles answered by the release beside the true counts, with its
    error summary and notes."""
    sid = sessions.session_id()
    if not rinfo:       # new data without a release: no answers of the previous data stay
        return [], no_update, html.Div("No release of the data now loaded yet, so there are "
                                       "no private answers: release it in step 3 (Release).",
                                       className="warning"), ""
    try:
        rel, stage, queries, notes = current_queries(sid, rinfo, geojson, extra, stage)
        data = state.points(sid, releases.key_fingerprint(rinfo["key"]))
    except LookupError:
        return [], no_update, "", ""
    rows = comparison_rows(rel, data, queries, stage)
    warnings = [html.Div(w, className="warning") for w in rel.warnings() + notes]
    count = f"{len(rows):,} {plural(len(rows), 'row')}"
    return rows, columns_for(rel, stage), warnings or "", count


def download(_n, geojson, extra, rinfo, stage):
    """The query table's public columns as CSV, under the release's provenance block; built
    from the release alone (no data read)."""
    if not rinfo:
        return no_update, "Run a release first."
    try:
        rel, stage, queries, _ = current_queries(sessions.session_id(), rinfo, geojson, extra, stage)
    except LookupError as exc:
        return no_update, html.Div(str(exc), className="error")
    if stage == EXACT_STAGE:
        return no_update, html.Div("The exact stage shows true counts, which are never exported: "
                                   "choose a private stage to download.", className="error")
    if not queries:
        return no_update, "No rectangles to download yet."
    if rel.domain.leaky:
        return no_update, html.Div("The domain was fitted to the data, so rectangles clipped to it "
                                   "would publish the data's extremes: choose a listed or typed "
                                   "box to download.", className="error")
    account = state.account(sessions.session_id(), releases.key_fingerprint(rinfo["key"]))
    text = csv_text(public_rows(rel, queries), rel.capabilities.snapping, rel.private,
                    provenance(rel, account.spent, account.total))
    name = f"queries_{rel.mechanism}" + ("" if rel.private else "_NOT_PRIVATE")
    return dcc.send_string(text, f"{name}.csv"), ""
