"""Compare panel: a second mechanism released beside step 3's at the same ε, on two
synchronised maps with one colour scale, and both answers to every query rectangle in one table."""
from __future__ import annotations

import time

import dash_leaflet as dl
import numpy as np
from dash import ClientsideFunction, Input, Output, State, ctx, dash_table, dcc, html, no_update

import dp
from dp.whole_counts import whole_nonnegative

from . import ids, map_panel, pages, queries_panel, render
from .numbers import count_text, shown_people
from server import releases, sessions, state, workspace
from .controls import labelled_rects, mechanism_options, request_ids
from .help import help_box

MAP_HEIGHT = "420px"
CLOSER = {"A": "err_a", "B": "err_b"}      # which error cell is highlighted when that release won


def layout(config: dict) -> html.Div:
    """The picker and its button; maps, summary and table stay hidden until there is a pair."""
    return html.Div(className="card compare-card", children=[
        html.H3("Compare two mechanisms at the same ε"),
        help_box("compare"),
        html.Label("Second mechanism (its default split and parameters; the same ε, data, domain "
                   "and randomness as step 3's release)", htmlFor=ids.COMPARE_PICK),
        html.Div(className="compare-tools", children=[
            dcc.Dropdown(id=ids.COMPARE_PICK, clearable=False, options=[], className="compare-pick"),
            html.Button("Release for comparison (spends ε)", id=ids.COMPARE_BUTTON, n_clicks=0,
                        className="primary", disabled=True),
        ]),
        html.Div(id=ids.COMPARE_COST, className="hint"),
        dcc.Loading(html.Div(id=ids.COMPARE_STATUS, role="status"), type="dot"),
        html.Div(id=ids.COMPARE_MESSAGE, role="status"),
        html.Div(id=ids.COMPARE_RESULTS, hidden=True, children=[
            html.Div(id=ids.COMPARE_MAPS, className="compare-maps"),
            html.Div(id=ids.COMPARE_SCALE, className="hint"),
            html.Div(id=ids.COMPARE_SUMMARY, className="compare-summary"),
            dash_table.DataTable(id=ids.COMPARE_TABLE, columns=table_columns("A", "B"), data=[],
                                 page_size=12, style_table={"overflowX": "auto"},
                                 style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "4px"},
                                 style_header={"fontWeight": "600", "whiteSpace": "normal", "height": "auto"},
                                 style_data_conditional=[
                                     {"if": {"filter_query": f'{{closer}} = "{w}"', "column_id": col},
                                      "backgroundColor": "#e7f5ea", "fontWeight": "600"}
                                     for w, col in CLOSER.items()]),
        ]),
        dcc.Store(id=ids.COMPARE_RELEASE), dcc.Store(id=ids.COMPARE_REQUEST),
    ])


def compare_options(current: str) -> list[dict]:
    """Mechanisms a release of `current` can be compared with at equal ε: the private ones for
    the same kind of data whose ε protects the same unit, other than `current` itself."""
    specs = dp.mechanisms()
    spec = specs[current]
    if not spec.comparable:
        return []
    return [o for o in mechanism_options(spec.data_kind)
            if o["value"] != current and specs[o["value"]].comparable]


def default_pick(options: list[dict], current: str | None, kind: str) -> str | None:
    """The picker's value: the one already picked if still offered, else the recommended
    mechanism, else the first offered (None when nothing is)."""
    values = [o["value"] for o in options]
    for name in (current, dp.recommend(kind).name):
        if name in values:
            return name
    return values[0] if values else None


def no_options_reason(spec: dp.MechanismSpec) -> str:
    """Why no mechanism is offered for comparison with a release of `spec`."""
    if not spec.comparable:
        return (f"The ε of {spec.label} protects a different unit ({spec.unit}), so no other "
                "mechanism can be compared with it at the same ε. Release a standard mechanism "
                "in step 3 (Release) to compare.")
    return f"No other mechanism takes this kind of data, so there is nothing to compare {spec.label} with."


def cost_line(cost: float, spent: float, total: float) -> str:
    """What the comparison release spends from the dataset's account, or that it will be refused."""
    if spent + cost > total * (1 + dp.accountant.TOLERANCE):
        return (f"Another ε = {cost:g} would take this dataset past its total budget "
                f"({total - spent:.4g} of {total:g} left): the comparison will be refused. "
                "Raise the total in step 6 (Ledger) first.")
    return (f"This is a second release of the same data: it spends another ε = {cost:g} from the "
            f"dataset's budget, leaving {total - spent - cost:.4g} of {total:g}.")


def missing(info: dict | None, rinfo: dict | None, cinfo: dict | None) -> str | None:
    """Why there is nothing to compare (None when there is a pair to show): no release of the
    data now loaded, data loaded since that release, or no comparison beside this release yet."""
    if not info or not rinfo:
        return ("No release of the data now loaded yet, so there is nothing to compare: release it "
                "in step 3 (Release) first.")
    if releases.key_fingerprint(rinfo["key"]) != info["fingerprint"]:
        return ("The loaded data changed since step 3's release: release the new data in step 3 (Release) "
                "first, then compare.")
    if not cinfo or cinfo.get("base") != rinfo["key"]:
        return "Pick a second mechanism above and press “Release for comparison” to see both side by side."
    return None


def closer(err_a: float, err_b: float) -> str:
    """Which answer was nearer the true count: "A", "B" or "tie"."""
    return "A" if err_a < err_b else "B" if err_b < err_a else "tie"


def answers(rel_a, rel_b, data, labelled: list) -> tuple:
    """(labels, answers of A, answers of B, true counts) for the labelled query rectangles."""
    if not labelled:
        return (), np.zeros(0), np.zeros(0), np.zeros(0, dtype=int)
    labels, rects = zip(*labelled)
    rects = list(rects)
    return (labels, rel_a.answer_many(rects), rel_b.answer_many(rects),
            data.true_counts(rects, rel_a.domain))


def answer_rows(labels, answers_a, answers_b, truth) -> list[dict]:
    """One table row per rectangle: both answers as whole people, the true count, both absolute
    errors of what is shown, and which answer was closer (equal shown errors are a tie)."""
    rows = []
    for lab, a, b, t in zip(labels, shown_people(answers_a), shown_people(answers_b), truth):
        ea, eb = abs(int(a) - int(t)), abs(int(b) - int(t))
        rows.append({"id": lab, "a": f"{a:,}", "b": f"{b:,}", "true": f"{int(t):,}",
                     "err_a": f"{ea:,}", "err_b": f"{eb:,}", "closer": closer(ea, eb)})
    return rows


def _rectangles(n: int) -> str:
    return f"{n} rectangle{'s' * (n != 1)}"


def short_label(label: str) -> str:
    """A mechanism's label without its parenthesised detail ("PrivTree (Zhang et al.)" -> "PrivTree"),
    to name it inside a sentence."""
    return label.split(" (")[0]


def summary_line(answers_a, answers_b, truth, label_a: str = "A", label_b: str = "B") -> str:
    """One line: which release was closer on how many rectangles, and each one's median absolute
    error (A and B name the releases as the maps and the table do; labels add their short names)."""
    truth = np.asarray(truth, dtype=float)
    err_a = np.abs(shown_people(answers_a) - truth)          # errors of the answers as shown
    err_b = np.abs(shown_people(answers_b) - truth)
    n = len(truth)
    if n == 0:
        return "Draw or type rectangles in step 4 (Explore): each gets a row here with both answers."
    wins = {w: sum(closer(a, b) == w for a, b in zip(err_a, err_b)) for w in ("A", "B", "tie")}
    names = {k: k if label == k else f"{k} ({short_label(label)})"
             for k, label in (("A", label_a), ("B", label_b))}
    first, second = ("B", "A") if wins["B"] > wins["A"] else ("A", "B")
    both = f"{names['A']} and {names['B']}"
    if wins["tie"] == n:
        line = f"{both} were equally close on " + ("the one rectangle" if n == 1 else f"all {n} rectangles")
    elif wins["A"] == wins["B"]:
        line = f"{both} were each closer on {wins['A']} of {_rectangles(n)}"
    else:
        line = f"{names[first]} was closer on {wins[first]} of {_rectangles(n)}, {names[second]} on {wins[second]}"
    if 0 < wins["tie"] < n:
        line += f", tied on {wins['tie']}"
    return f"{line}; median absolute error A {count_text(np.median(err_a))}, B {count_text(np.median(err_b))}."


def table_columns(label_a: str, label_b: str) -> list[dict]:
    """The table's columns, the answers headed by the mechanisms' names."""
    return [{"name": n, "id": i} for i, n in (
        ("id", "#"), ("a", f"A: {label_a}"), ("b", f"B: {label_b}"), ("true", "True count (owner only)"),
        ("err_a", "Abs. error A"), ("err_b", "Abs. error B"), ("closer", "Closer"))]


def density(rel) -> np.ndarray:
    """The release's people per km² (whole, non-negative: `dp.whole_counts`) on its base grid,
    as on the main map, ready for an image overlay."""
    grid, regions, counts = rel.regions()
    return render.on_grid(grid, regions, whole_nonnegative(counts) / render.region_km2(grid, regions))


def comparison_map(map_id: str, rects_id: str, rel, image: np.ndarray, scale: render.Legend,
                   config: dict, rects: list) -> dl.Map:
    """One of the two maps: the domain outline, the release's cells on the shared scale and the
    query rectangles with the labels the table uses (Q1…, R1…)."""
    d = rel.domain
    bounds = [[d.south, d.west], [d.north, d.east]]
    url = render.grid_image(image, (d.west, d.south, d.east, d.north), scale.vmin, scale.vmax, render.SEQUENTIAL)
    # a centre and zoom from the start: tracking the viewport compares every move with them
    return dl.Map(id=map_id, bounds=bounds, center=[(d.south + d.north) / 2, (d.west + d.east) / 2],
                  zoom=1, viewport={"bounds": bounds}, zoomSnap=0.25, trackViewport=True,
                  style={"height": MAP_HEIGHT}, children=[
                      map_panel.tile_layer(config), map_panel.world_outlines(),
                      render.domain_outline(d),
                      dl.ImageOverlay(url=url, bounds=bounds, opacity=0.85, className=ids.COMPARE_RASTER),
                      dl.LayerGroup(id=rects_id, children=rect_layers(rects)),
                      dl.ScaleControl(position="bottomleft")])


def rect_layers(rects: list) -> list:
    """The labelled query rectangles, outlined, as on the main map."""
    return [queries_panel.label_layer(r, label, outline=True) for label, r in rects]


def map_column(title: str, rel, map_: dl.Map) -> html.Div:
    """A map with its mechanism's name and what was released above it."""
    demo = " Reproducible demo: NOT private." if rel.reproducible_demo else ""
    return html.Div(className="compare-column", children=[
        html.Div(title, className="compare-label"), html.Div(rel.describe() + "." + demo, className="hint"),
        map_])


def release_status(label: str, epsilon: float, rel) -> html.Div:
    """The line under the button after a comparison release."""
    text = f"Released {label} for comparison at ε = {epsilon:g}, {rel.describe()}"
    if rel.reproducible_demo:
        return html.Div([text + ". ", html.Strong("Reproducible demo (the same fixed seed as step 3's "
                                                  "release): NOT private.")], className="warning")
    return html.Div(text + " (fresh randomness).", className="ok")


def pair(sid: str, rinfo: dict, cinfo: dict) -> tuple:
    """(release A, release B, data) for step 3's release and its comparison; LookupError when the
    server no longer holds one of them."""
    return (releases.release(sid, rinfo["key"]), releases.release(sid, cinfo["key"]),
            state.points(sid, releases.key_fingerprint(rinfo["key"])))


def comparison(sid: str, rinfo: dict, name: str) -> dict:
    """Release `name` beside step 3's release (charged): {"cinfo", "status", "class"} or
    {"error"}, small enough to be kept as the click's result."""
    key = releases.comparison_key(rinfo["key"], name)
    label = dp.mechanisms()[name].label
    try:
        rel = releases.release(sid, key, create=True)
    except (dp.ParameterError, dp.DataError, dp.BudgetError, LookupError) as exc:
        return {"error": str(exc)}
    line = release_status(label, rinfo["epsilon"], rel)
    return {"cinfo": {"key": key, "base": rinfo["key"], "mechanism": name, "label": label},
            "status": line.children, "class": line.className}


def register_callbacks(app, config: dict):
    app.callback(Output(ids.COMPARE_PICK, "options"), Output(ids.COMPARE_PICK, "value"),
                 Output(ids.COMPARE_BUTTON, "disabled"),
                 Input(ids.RELEASE, "data"), State(ids.COMPARE_PICK, "value"))(offer)

    app.callback(Output(ids.COMPARE_COST, "children"),
                 Input(ids.RELEASE, "data"), Input(ids.DATASET, "data"), Input(ids.ACCOUNT_TICK, "data"),
                 Input(ids.COMPARE_PICK, "value"))(show_cost)

    request_ids(app, ids.COMPARE_BUTTON, ids.COMPARE_REQUEST)

    # A new release in step 3 (or new data) ends the comparison: it was made beside the old one.
    # One click spends once: the click's request id keys the spend (`workspace.once`).
    app.callback(Output(ids.COMPARE_RELEASE, "data"), Output(ids.COMPARE_STATUS, "children"),
                 Output(ids.ACCOUNT_TICK, "data", allow_duplicate=True),
                 Input(ids.COMPARE_REQUEST, "data"), Input(ids.RELEASE, "data"),
                 Input(ids.DATASET, "data"), State(ids.COMPARE_PICK, "value"), prevent_initial_call=True)(release_comparison)

    app.callback(Output(ids.COMPARE_RESULTS, "hidden"), Output(ids.COMPARE_MAPS, "children"),
                 Output(ids.COMPARE_SCALE, "children"), Output(ids.COMPARE_MESSAGE, "children"),
                 Input(ids.COMPARE_RELEASE, "data"), Input(ids.RELEASE, "data"), Input(ids.DATASET, "data"),
                 State(ids.EDIT, "geojson"), State(ids.QUERY_EXTRA, "data"))(draw)

    app.callback(Output(ids.COMPARE_RECTS_A, "children"), Output(ids.COMPARE_RECTS_B, "children"),
                 Input(ids.EDIT, "geojson"), Input(ids.QUERY_EXTRA, "data"), prevent_initial_call=True)(show_rects)

    app.callback(Output(ids.COMPARE_TABLE, "data"), Output(ids.COMPARE_TABLE, "columns"),
                 Output(ids.COMPARE_SUMMARY, "children"),
                 Input(ids.COMPARE_RELEASE, "data"), Input(ids.RELEASE, "data"), Input(ids.DATASET, "data"),
                 Input(ids.EDIT, "geojson"), Input(ids.QUERY_EXTRA, "data"))(table)

    app.clientside_callback(
        ClientsideFunction(namespace="dpCompare", function_name="sync"),
        Output(ids.COMPARE_MAP_A, "viewport"), Output(ids.COMPARE_MAP_B, "viewport"),
        Input(ids.COMPARE_MAP_A, "center"), Input(ids.COMPARE_MAP_A, "zoom"),
        Input(ids.COMPARE_MAP_B, "center"), Input(ids.COMPARE_MAP_B, "zoom"),
        State(ids.COMPARE_MAP_B, "id"))


def draw(cinfo, rinfo, info, geojson, extra):
    """The two releases' density maps side by side on one colour scale, with the rectangles, or
    why there is nothing to compare."""
    why = missing(info, rinfo, cinfo)
    if why:
        return True, [], "", html.Div(why, className="hint")
    try:
        rel_a, rel_b, _ = pair(sessions.session_id(), rinfo, cinfo)
    except LookupError as exc:
        return True, [], "", html.Div(str(exc), className="warning")
    image_a, image_b = density(rel_a), density(rel_b)
    scale = render.legend_scale(np.concatenate([image_a.ravel(), image_b.ravel()]))   # one for both
    rects = labelled_rects(geojson, extra)
    maps = [map_column(f"A · {rinfo['label']} (step 3's release)", rel_a,
                       comparison_map(ids.COMPARE_MAP_A, ids.COMPARE_RECTS_A, rel_a, image_a, scale,
                                      pages.settings(), rects)),
            map_column(f"B · {cinfo['label']} (for comparison)", rel_b,
                       comparison_map(ids.COMPARE_MAP_B, ids.COMPARE_RECTS_B, rel_b, image_b, scale,
                                      pages.settings(), rects))]
    legend = html.Div(className="compare-legend", children=map_panel.legend_box(
        scale, render.SEQUENTIAL, "private points per km², both maps", title_id=None))
    note = html.Span("One colour scale for both maps, so the same colour means the same density. "
                     "Moving or zooming one map moves the other.")
    return False, maps, [legend, note], ""


def offer(rinfo, current):
    """The mechanisms the release can be compared with, one picked (keeping the current pick),
    and whether the picker is off."""
    if not rinfo:
        return [], None, True
    opts = compare_options(rinfo["mechanism"])
    return opts, default_pick(opts, current, dp.mechanisms()[rinfo["mechanism"]].data_kind), not opts


def show_cost(rinfo, info, _tick, name):
    """What a comparison release would spend, against the account's budget left (or why there
    is none to compare)."""
    if not rinfo or not info:
        return ""
    if not compare_options(rinfo["mechanism"]):
        return no_options_reason(dp.mechanisms()[rinfo["mechanism"]])
    if not name:
        return ""
    acc = state.account(sessions.session_id(), info["fingerprint"])
    cost = dp.accountant.release_cost(name, releases.key_domain(rinfo["key"]), rinfo["epsilon"])
    return cost_line(cost, acc.spent, acc.total)


def release_comparison(request, rinfo, _info, name):
    """Compare-button click: release the second mechanism once per request id (it spends); the
    comparison store, status line and account tick."""
    if ctx.triggered_id != ids.COMPARE_REQUEST:
        return None, "", no_update
    if not rinfo or not name:
        return no_update, html.Div("Release the data in step 3 (Release) first, then pick a second "
                                   "mechanism.", className="error"), no_update
    sid = sessions.session_id()
    try:
        result = workspace.once(sid, (request or {}).get("id"), lambda: comparison(sid, rinfo, name))
    except LookupError as exc:
        result = {"error": str(exc)}
    if "error" in result:
        return no_update, html.Div(["Not released: ", result["error"]], className="error"), time.time()
    return result["cinfo"], html.Div(result["status"], className=result["class"]), time.time()


def show_rects(geojson, extra):
    """The rectangles follow the main map's drawing and the typed and random ones."""
    layers = rect_layers(labelled_rects(geojson, extra))
    return layers, layers


def table(cinfo, rinfo, info, geojson, extra):
    """Both releases' answers to the rectangles beside the true counts, the table's columns and
    a one-line summary."""
    if missing(info, rinfo, cinfo):
        return [], no_update, ""
    try:
        rel_a, rel_b, data = pair(sessions.session_id(), rinfo, cinfo)
    except LookupError:
        return [], no_update, ""
    labels, a, b, truth = answers(rel_a, rel_b, data, labelled_rects(geojson, extra))
    return answer_rows(labels, a, b, truth), table_columns(rinfo["label"], cinfo["label"]), \
        summary_line(a, b, truth, rinfo["label"], cinfo["label"])
