"""The public pages: `/r/` is a gallery of published releases and `/r/<id>` one of them (its
private map and legend, its guarantee and ledger in plain words, rectangles answered from it,
and downloads), pages of the dashboard's app (`pages`). They read only what was published
(`server.published`), never the data, so nothing here can show a true count.
"""
from __future__ import annotations

import datetime
import functools

import dash_leaflet as dl
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import shapely
from dash import Dash, Input, Output, State, ctx, dash_table, dcc, html, no_update

from dp.feature_files import geojson_text, release_features, stamp
from dp.provenance import provenance
from dp.whole_counts import whole_nonnegative

from . import ids, inputs, ledger_panel, map_image, map_panel, queries_panel
from .controls import labelled_rects
from .numbers import count_of
from .tour_panel import likelihood_sentence
from server import published, services, sessions

BASE = "/r/"
TITLE = "Published releases · Private location statistics"
BODY, CONTENT, PID = "pub-body", "pub-content", ids.PUBLISHED_ID
MAP, EDIT, GRID, ANSWERS, ANSWER_NOTES = "pub-map", "pub-edit", "pub-grid", "pub-answers", "pub-answer-notes"
GEOJSON_BUTTON, CSV_BUTTON, PNG_BUTTON, DOWNLOAD = "pub-geojson", "pub-csv", "pub-png", "pub-download"
UNPUBLISH, UNPUBLISH_STATUS = "pub-unpublish", "pub-unpublish-status"
ANSWER_COLUMNS = [("id", "#"), ("bounds", "Rectangle (W, S, E, N)"), ("count", "Private count"),
                  ("range", "True count lies in (95%, any data)")]
SNAPPED_COLUMN = ("snapped", "Answered rectangle (snapped to cells)")
MAX_DRAWN = 100           # rectangles a visitor's drawing gets answered (each takes a little CPU)
TABLE_STYLE = {**ledger_panel.TABLE_STYLE, "fontFamily": "inherit"}
NOT_OWNER = ("only the data owner can unpublish a release: the person who started this server "
             "opens the owner link it printed")


def gallery_page(**_query):
    """The page at /r/: every published release (`pages` registers it)."""
    return shell(gallery_view())


def release_page(pid: str, config: dict):
    """The page at /r/<pid>: one published release, or a page saying it is not published."""
    return shell(page(pid, config))


def shell(body: list) -> html.Div:
    """What every public page has around its body: the header back to the gallery."""
    return html.Div(className="public-page", children=[
        html.Header(className="top public-top", children=[
            html.A("Published releases", href=BASE, className="public-home"),
            html.Span(" · private location statistics with differential privacy", className="public-tagline")]),
        html.Main(id=BODY, className="public-body", children=html.Div(id=CONTENT, children=body)),
    ])


def is_owner() -> bool:
    """True when this browser opened the server's owner link (checked on the server, in the
    request; the page's word is never taken for it)."""
    return sessions.is_owner()


def when(record: dict) -> str:
    """The publication time of a record as people read it (UTC)."""
    try:
        t = datetime.datetime.fromisoformat(record["time"])
    except (KeyError, TypeError, ValueError):
        return "unknown date"
    return t.astimezone(datetime.timezone.utc).strftime("%d %b %Y, %H:%M UTC")


def box_name(domain: dict) -> str:
    """The public box's name, or its corners when it has none."""
    name = domain.get("name")
    if name and name != "custom":
        return name
    return ", ".join(f"{domain[k]:g}" for k in ("west", "south", "east", "north"))


def whole(x: float) -> str:
    """A private answer rounded to a whole count for display ('1,234', '-3')."""
    return f"{int(round(x)):,}"


# ------------------------------------------------------------------------------ the gallery
def gallery_view() -> list:
    """Cards of every published release, newest first."""
    records = services.current().published.gallery()
    head = [html.H1("Published releases"),
            html.P("Counts of people in places, published with differential privacy: each map's "
                   "counts have random noise added so that no one person can be singled out. "
                   "Open one to see its map, ask it about any rectangle and download it.",
                   className="public-intro")]
    if not records:
        return head + [html.P("Nothing is published on this server yet.", className="hint")]
    return head + [html.Div(className="gallery", children=[card(r) for r in records])]


def card(r: dict) -> html.A:
    """One published release in the gallery: title, mechanism, ε, box, date; a link to it."""
    return html.A(className="gallery-card", href=f"{BASE}{r['id']}", children=[
        html.H2(r["title"]),
        html.Div(f"{r['mechanism']} · {r['describe']}", className="gallery-mech"),
        html.Dl([html.Dt("ε"), html.Dd(f"{r['epsilon']:g}"),
                 html.Dt("Box"), html.Dd(box_name(r["domain"])),
                 html.Dt("Published"), html.Dd(when(r))])])


def not_published(message: str = published.MISSING) -> list:
    """A friendly page for an address that has no published release."""
    return [html.H1("Not published"),
            html.P(message[:1].upper() + message[1:] + ".", className="warning"),
            html.P(["See what is published in the ", html.A("gallery of published releases", href=BASE), "."])]


# ---------------------------------------------------------------------- one published release
@functools.lru_cache(maxsize=8)
def map_layers(pid: str) -> tuple:
    """(map children, hover payload, legend) of a published release's private layer, made once
    per process (ids are never reused)."""
    return map_panel.cell_layers(services.current().published.release(pid), None, "private")


def release_view(pid: str, record: dict, rel, config: dict) -> list:
    """The page of one published release: title, intro, map with legend and rectangle tool,
    answers, guarantee, downloads, and 'About these numbers'; the owner also gets Unpublish."""
    children, hover, legend = map_layers(pid)
    d = rel.domain
    meta = rel.metadata()
    who = "users' regions" if rel.spec.data_kind == "regions" else "people (points)"
    side = [
        html.Section(className="card pub-guarantee", children=[
            html.H2("The privacy guarantee"),
            html.P([html.B("ε = "), f"{rel.epsilon:g}. ", epsilon_words(rel)]),
            html.P([html.B("Whom it protects: "), meta["privacy_level"], "."]),
            html.P([html.B("Unit of privacy: "), meta["unit_of_privacy"], "."])]),
        html.Section(className="card pub-ask", children=[
            html.H2("Ask about an area"),
            html.P("Draw a rectangle with the ▭ tool at the map's top left: its count is added up "
                   "from the published cells only, so asking is free and reveals nothing more.",
                   className="hint"),
            dash_table.DataTable(
                id=ANSWERS, data=[], page_size=8,
                columns=[{"name": n, "id": i} for i, n in answer_columns(rel)],
                style_table={"overflowX": "auto"},
                style_cell={**TABLE_STYLE, "fontSize": "13px", "padding": "4px"},
                style_header={"fontWeight": "600"},
                tooltip_header={"range": queries_panel.RANGE_HELP}, tooltip_delay=0,
                tooltip_duration=None),
            html.Div(id=ANSWER_NOTES, role="status")]),
        html.Section(className="card pub-downloads", children=[
            html.H2("Download"),
            html.Button("Cells (GeoJSON)", id=GEOJSON_BUTTON, n_clicks=0),
            html.Button("Cells (CSV)", id=CSV_BUTTON, n_clicks=0),
            html.Button("Map (PNG)", id=PNG_BUTTON, n_clicks=0),
            dcc.Download(id=DOWNLOAD),
            html.P("The published cells and their noisy counts, with the settings and ledger; "
                   "nothing else.", className="hint")]),
    ]
    if is_owner():
        side.append(html.Section(className="card pub-owner", children=[
            html.H2("Owner"),
            html.P("You published this page. Unpublishing removes it and its address stops "
                   "working; anyone who downloaded it keeps their copy.", className="hint"),
            dcc.ConfirmDialogProvider(
                html.Button("Unpublish", className="danger"), id=UNPUBLISH,
                message="Unpublish this release? Its page and address stop working."),
            html.Div(id=UNPUBLISH_STATUS, role="status")]))
    return [
        dcc.Store(id=PID, data=pid), dcc.Store(id=GRID, data=hover),
        html.Div(className="pub-head", children=[
            html.A("← All published releases", href=BASE, className="pub-back"),
            html.H1(record["title"], className="pub-title"),
            html.P(className="public-intro", children=[
                f"The map shows how many {who} were counted in each area of the box "
                f"{box_name(record['domain'])}. The counts have random noise added so no one "
                f"person can be singled out; ε = {rel.epsilon:g} says how well (smaller is more "
                "private). A rectangle's answer comes from the published cells only."]),
            html.Div(className="pub-facts", children=[
                f"{record['mechanism']} · {record['describe']} · published {when(record)}"])]),
        html.Div(className="pub-layout", children=[
            html.Div(className="pub-map-col", children=[
                html.Div(className="map-wrap pub-map-wrap", children=[
                    dl.Map(id=MAP, bounds=[[d.south, d.west], [d.north, d.east]], className="pub-map",
                           trackViewport=False, zoomSnap=0.25,
                           eventHandlers={"mousemove": {"variable": "dpMap.hover"},
                                          "mouseout": {"variable": "dpMap.leave"}},
                           children=[
                               map_panel.tile_layer(config),
                               map_panel.world_outlines(),
                               dl.LayerGroup(children),
                               map_panel.rectangle_tool(EDIT),
                               dl.ScaleControl(position="bottomleft")]),
                    html.Div(id=ids.MAP_HOVER, className="hover-readout",
                             children="Hover over a cell to read its published count."),
                    html.Div(legend, className="map-legend")])]),
            html.Aside(className="pub-side", children=side)]),
        about(rel, meta),
    ]


def epsilon_words(rel) -> str:
    """ε in everyday terms, for releases whose ε is about adding or removing someone; the
    others (a δ-move, replace-one) say their ε is not the usual one."""
    if rel.spec.comparable:
        return likelihood_sentence(rel.epsilon)
    return (f"Here ε protects against: {rel.spec.unit}. It is not comparable with the ε of "
            "releases that protect adding or removing a person; see the guarantee below.")


def answering_words(rel) -> str:
    """How this release turns its cells into a rectangle's count, in a sentence or two."""
    if rel.capabilities.snapping:
        return ("The rectangle is first snapped to the release's grid lines (the table shows the "
                "rectangle answered), then counted from the published values alone.")
    return ("Its count adds up the published cells inside it, and the cells it cuts in proportion "
            "to the area it covers: people are assumed spread evenly inside a cell, which adds "
            "error that only the range shows.")


def about(rel, meta: dict) -> html.Section:
    """'About these numbers': the guarantee in full, how ε was spent (the ledger) and how a
    rectangle is answered."""
    split = ", ".join(f"{part} {100 * share:.0f}%" for part, share in meta["split"].items())
    total = sum(e.epsilon for e in rel.ledger)
    return html.Section(className="card pub-about", children=[
        html.H2("About these numbers"),
        html.P([html.B("What was published. "), f"{rel.spec.label}: {rel.describe()} over the "
                f"public box {box_name(meta['domain'])} (west, south, east, north = "
                f"{rel.domain.west:g}, {rel.domain.south:g}, {rel.domain.east:g}, {rel.domain.north:g}). "
                "The box is public: the publisher declared it, it was not fitted to the data."]),
        html.P([html.B("The guarantee. "), meta["guarantee"]]),
        html.P([html.B("How ε was spent. "), f"The budget ε = {rel.epsilon:g} was split "
                f"({split}); each step below spent its part, and they add up to ε = {total:g}."]),
        dash_table.DataTable(
            id="pub-ledger", data=ledger_panel.ledger_rows(rel), columns=[
                {"name": "Step", "id": "step"}, {"name": "ε spent", "id": "epsilon"},
                {"name": "Share", "id": "share"}, {"name": "Noise", "id": "noise"},
                {"name": "Note", "id": "note"}],
            style_table={"overflowX": "auto"}, style_cell=TABLE_STYLE),
        html.P([html.B("How a rectangle is answered. "), answering_words(rel), " Beside each count, "
                "'True count lies in' is a range that holds the true count 95% of the time "
                "whatever the data: it covers both the noise and the even-spreading error. "
                "Answers are rounded to whole counts here. ", cells_words(rel)]),
        html.P([html.B("What is not here. "), "The true counts and the data itself never leave "
                "the owner's server; this page and its downloads hold only the noisy cells and "
                "the settings above."]),
    ])


def cells_words(rel) -> str:
    """What the downloaded cells hold, said from the very values the download writes: how many
    cells, how many of their noisy counts are negative or exactly 0."""
    counts = np.asarray(rel.regions()[2], dtype=np.float64)
    n, negative, zero = len(counts), int((counts < 0).sum()), int((counts == 0).sum())
    cells = f"The downloaded cells ({count_of(n, 'cell')}) keep each cell's noisy count"
    if negative:
        kept = (f"; {negative:,} of them are below 0: noise is added to every cell, empty ones too, "
                "and nothing is clipped, since clipping would bias every sum")
    else:
        kept = f"; none is below 0 (this mechanism's own processing keeps them at 0 or more; {zero:,} are exactly 0)"
    return (cells + kept + ". Their 'people' column makes them whole numbers of 0 or more with the "
            "same total.")


def answer_columns(rel) -> list[tuple[str, str]]:
    """The answer table's columns; releases that snap rectangles to cells show where."""
    cols = list(ANSWER_COLUMNS)
    if rel.capabilities.snapping:
        cols.insert(2, SNAPPED_COLUMN)
    return cols


def answer_rows(rel, geojson) -> tuple[list[dict], list[str]]:
    """(table rows, notes) for the drawn rectangles: private answers and the ranges their true
    counts lie in, from the release alone, rounded to whole counts; notes for rectangles not answered. Drawn
    shapes are checked as the dashboard's are (`inputs.PROPS`), and at most MAX_DRAWN answered."""
    if not inputs.fits(geojson, inputs.PROPS["geojson"][0]):
        return [], [f"The drawn shapes could not be read: expected {inputs.PROPS['geojson'][1]}."]
    labelled = labelled_rects(geojson, None)
    notes = [f"Only the first {MAX_DRAWN} rectangles are answered."] if len(labelled) > MAX_DRAWN else []
    queries, refused = queries_panel.queries_in(rel.domain, labelled[:MAX_DRAWN])
    notes += refused
    rows = []
    for r in queries_panel.public_rows(rel, queries):
        rows.append({"id": r["id"], "bounds": r["bounds"], "count": r["private"], "range": r["range"],
                     **({"snapped": r["snapped"]} if "snapped" in r else {})})
    return rows, notes


# -------------------------------------------------------------------------------- downloads
def cells_csv(rel, block: dict) -> str:
    """The released cells (or leaves) as a plain CSV: west, south, east, north, the unbiased
    noisy count, the people (whole, non-negative, same total: `dp.whole_counts`), the release's
    mechanism, ε and unit of privacy on every row (`dp.feature_files.stamp`) and the cell as WKT,
    which GDAL (QGIS) reads as its geometry."""
    grid, regions, counts = rel.regions()
    ex, ey = np.asarray(grid.edges_x), np.asarray(grid.edges_y)
    w, s, e, n = ex[regions[:, 2]], ey[regions[:, 0]], ex[regions[:, 3]], ey[regions[:, 1]]
    counts = np.asarray(counts, dtype=np.float64)
    table = pa.table({"west": w, "south": s, "east": e, "north": n, "count": counts,
                      "people": whole_nonnegative(counts),
                      **{k: pa.array([v] * len(counts)) for k, v in stamp(block).items()},
                      "WKT": shapely.to_wkt(shapely.box(w, s, e, n), rounding_precision=-1)})
    out = pa.BufferOutputStream()
    pacsv.write_csv(table, out, pacsv.WriteOptions(quoting_style="needed"))
    return out.getvalue().to_pybytes().decode()


def download(which: str, pid: str):
    """What the browser saves for a download button: the release's GeoJSON, its cells as CSV
    (both with the provenance block), or its map as PNG."""
    rel = services.current().published.release(pid)
    if which not in (GEOJSON_BUTTON, CSV_BUTTON):            # the PNG carries no provenance block
        return dcc.send_bytes(map_image.map_png_of(f"published/{pid}", rel), f"published_{pid}_map.png")
    record = services.current().published.record(pid) or {}
    block = provenance(rel, record.get("epsilon_spent_so_far"), record.get("epsilon_budget"))
    if which == GEOJSON_BUTTON:
        return dict(content=geojson_text(release_features(rel), block), filename=f"published_{pid}.geojson")
    return dict(content=cells_csv(rel, block), filename=f"published_{pid}_cells.csv")


# -------------------------------------------------------------------------------- callbacks
def page(pid: str, config: dict) -> list:
    """The body for a published release's id: its page, else a 'not published' page."""
    pid = pid.strip("/")
    if not published.valid_id(pid):
        return not_published()
    try:
        record = services.current().published.record(pid)
        if record is None:
            return not_published()
        return release_view(pid, record, services.current().published.release(pid), config)
    except LookupError as exc:
        return not_published(str(exc))


def register_callbacks(app: Dash, config: dict):
    app.callback(Output(ANSWERS, "data"), Output(ANSWER_NOTES, "children"),
                 Input(EDIT, "geojson"), State(PID, "data"), prevent_initial_call=True)(answer)

    app.callback(Output(DOWNLOAD, "data"), Input(GEOJSON_BUTTON, "n_clicks"),
                 Input(CSV_BUTTON, "n_clicks"), Input(PNG_BUTTON, "n_clicks"), State(PID, "data"),
                 prevent_initial_call=True)(save)

    app.callback(Output(CONTENT, "children"), Output(UNPUBLISH_STATUS, "children"),
                 Input(UNPUBLISH, "submit_n_clicks"), State(PID, "data"), prevent_initial_call=True)(unpublish)

    app.clientside_callback(      # the hover readout reads the published counts (dpMap.hover)
        "function (data) { window.dpGrid = data; return window.dash_clientside.no_update; }",
        Output(GRID, "id"), Input(GRID, "data"))


def answer(geojson, pid):
    """Drawn rectangles answered from the published release: post-processing, free."""
    try:
        rel = services.current().published.release(pid)
    except LookupError as exc:
        return [], html.Div(str(exc), className="warning")
    rows, notes = answer_rows(rel, geojson)
    return rows, [html.Div(n, className="warning") for n in rel.warnings() + notes]


def save(_g, _c, _p, pid):
    """A download button of the public page: the published release in that format."""
    if ctx.triggered_id is None or not ctx.triggered[0]["value"]:
        return no_update
    try:
        return download(ctx.triggered_id, pid)
    except LookupError:
        return no_update


def unpublish(n, pid):
    """Unpublish, for the owner only: ownership is checked here, whatever the page showed."""
    if not n:
        return no_update, no_update
    if not is_owner():
        return no_update, html.Div(f"Not unpublished: {NOT_OWNER}.", className="error")
    services.current().published.unpublish(pid)
    return [html.H1("No longer published"),
            html.P("This release was unpublished: its page and address no longer work.", className="ok"),
            html.P(["See what is still published in the ",
                    html.A("gallery of published releases", href=BASE), "."])], no_update
