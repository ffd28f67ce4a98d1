"""Map panel: the private structure on a Leaflet map, owner-only layers, hover readout, drawing,
and a level-by-level view of tree releases ("watch it grow")."""
from __future__ import annotations

import dash_leaflet as dl
import numpy as np
import plotly.graph_objects as go
from dash import Input, Output, State, ctx, dcc, html, no_update

import dp
from dp.mechanisms.euler import STAGE_LABELS, STAGES
from dp.summed_area import box_sums, summed_area
from dp.whole_counts import whole_nonnegative

from . import ids, render
from server import releases, sessions, state
from .charts import chart, chart_place, place_id
from .controls import EXACT_STAGE, domain_from_store
from .help import help_box

# the box fitted to the map clear of the zoom and drawing toolbars down its left side (its
# outline lay under them) and a little in from the other edges
CLEAR_OF_CONTROLS = {"paddingTopLeft": [56, 12], "paddingBottomRight": [12, 12]}

LAYERS = {
    "private": "Private counts (published)",
    "true": "True counts (owner only, not private)",
    "error": "Error: private − true (owner only)",
    "none": "No cells",
}
UNITS = {"private": "private points per km²", "true": "true points per km² (not private)",
         "error": "private − true, points per km²"}
MAX_HOVER_CELLS = 512 * 512
MAX_HOVER_REGIONS = 20000
MAX_OUTLINED = 6000   # more borders than this would hide the colours
POINT_SAMPLE = 2000
MAX_EDGE_CELLS = 64
EXACT_LABEL = "exact (owner only, not private)"


def stage_options(stages=STAGES) -> list[dict]:
    """The Euler stage choices: the owner-only exact histogram, then the release's stages."""
    return [{"label": f" {EXACT_LABEL}", "value": EXACT_STAGE}] + \
        [{"label": f" {STAGE_LABELS.get(s, s)}", "value": s} for s in stages]


def opening_box(page: dict) -> dp.Domain:
    """Where the map opens: the shown release's box, else the loaded sample's, else the default
    sample's (the callbacks then fit it to the domain chosen)."""
    if page["release"] is not None:
        return releases.key_domain(page["release"]["key"])
    return state.sample(state.sample_name(page["dataset"]) or state.DEFAULT_SAMPLE)[1]


def layout(config: dict) -> html.Div:
    d = opening_box(config["page"])
    return html.Div(className="card map-card", children=[
        html.Div(className="map-head", children=[
            html.H3("Map", className="sr-only"),
            dcc.RadioItems(id=ids.MAP_LAYER_PICK, value="private", inline=True,
                           options=[{"label": f" {v}", "value": k} for k, v in LAYERS.items()]),
            dcc.Checklist(id=ids.MAP_POINTS_TOGGLE, value=[], inline=True, options=[
                {"label": f" raw point sample ({POINT_SAMPLE:,}, owner only)", "value": "points"}]),
            html.Button("Zoom to domain", id=ids.MAP_ZOOM_DOMAIN, n_clicks=0,
                        title="fit the map to the public domain box"),
            help_box("map"),
            # the tree's depth and the shifted grids' pick share the controls' row where it has
            # room, so the map keeps its height in short windows (issue 44)
            html.Div(id=ids.GROW_BOX, hidden=True, className="grow-box", children=[
                html.Span("Tree depth", className="grow-label"),
                html.Button("▶ Play", id=ids.GROW_PLAY, n_clicks=0,
                            title="watch the tree grow, one level at a time"),
                html.Div(dcc.Slider(id=ids.GROW_DEPTH, min=0, max=1, step=1, value=1, marks=None,
                                    allow_direct_input=False,
                                    tooltip={"placement": "bottom", "always_visible": False}),
                         className="grow-slider", **{"data-a11y-label": "tree depth shown"}),
                dcc.Interval(id=ids.GROW_TIMER, interval=700, disabled=True),
                dcc.Store(id=ids.GROW_DRAWN),
            ]),
            html.Div(id=ids.SERIES_BOX, hidden=True, className="grow-box", children=[
                html.Span("Grid shown (0 = all grids averaged, the published estimate)", className="grow-label"),
                html.Div(dcc.Slider(id=ids.SERIES_PICK, min=0, max=1, step=1, value=0, marks=None,
                                    allow_direct_input=False,
                                    tooltip={"placement": "bottom", "always_visible": True}),
                         className="grow-slider", **{"data-a11y-label": "grid shown, 0 for all grids averaged"}),
            ]),
        ]),
        html.Div(id=ids.EULER_BOX, hidden=True, className="euler-box", children=[
            html.Div(className="grow-box", children=[
                html.Span("Stage", className="grow-label"),
                dcc.RadioItems(id=ids.EULER_STAGE, value=STAGES[-1], inline=True,
                               options=stage_options()),
                dcc.Checklist(id=ids.EULER_EXTRAS, value=[], inline=True, options=[
                    {"label": f" edges and vertices (grids up to {MAX_EDGE_CELLS}×{MAX_EDGE_CELLS})",
                     "value": "edges"}]),
            ]),
            dcc.Loading(html.Div(id=ids.EULER_STATUS, className="hint"), type="dot"),
        ]),
        html.Div(className="map-wrap", children=[
            dl.Map(id=ids.MAP, bounds=[[d.south, d.west], [d.north, d.east]], style={"height": "560px"},
                   boundsOptions=CLEAR_OF_CONTROLS, trackViewport=False, zoomSnap=0.25,
                   eventHandlers={"mousemove": {"variable": "dpMap.hover"},
                                  "mouseout": {"variable": "dpMap.leave"}},
                   children=[
                       tile_layer(config),
                       world_outlines(),
                       dl.LayerGroup(id=ids.MAP_LAYERS),
                       # counts per shape (components/shapes_panel) above the cells, below the borders
                       dl.Pane(dl.LayerGroup(id=ids.SHAPES_LAYER), name="shapes", style={"zIndex": 420}),
                       dl.LayerGroup(id=ids.DRAWN),
                       rectangle_tool(ids.EDIT),
                       dl.ScaleControl(position="bottomleft"),
                   ]),
            html.Div(id=ids.MAP_HOVER, className="hover-readout",
                     children="Hover over a cell to read its counts."),
            html.Div(id=ids.MAP_LEGEND, className="map-legend"),
            html.Div(id=ids.SHAPES_LEGEND, className="map-legend shapes-legend"),
        ]),
        html.Div(id=ids.EULER_CHART_BOX, hidden=True, children=[chart_place(ids.EULER_CHART)]),
        dcc.Store(id=ids.MAP_GRID_STORE),
    ])


def tile_layer(config: dict):
    """The base map's tiles with their attribution; the page notices when none loads (offline).
    Tiles are fetched as anonymous cross-origin images, without cookies or referrer: a tile
    server on the dashboard's host (cookies ignore the port) never sees the owner's cookies."""
    return dl.TileLayer(url=config["tiles_url"], crossOrigin="anonymous", referrerPolicy="no-referrer",
                        attribution=f'<span class="tile-attribution">{config["tiles_attribution"]}</span>'
                                    '<span class="outline-attribution">Outlines: Natural Earth</span>',
                        eventHandlers={"tileerror": {"variable": "dpMap.tileError"},
                                       "tileload": {"variable": "dpMap.tileLoad"}})


def rectangle_tool(edit_id: str):
    """Leaflet.draw limited to query rectangles."""
    return dl.FeatureGroup([dl.EditControl(
        id=edit_id, position="topleft",
        draw={"rectangle": {"shapeOptions": {"color": "#1f4e99", "weight": 2}},
              "polyline": False, "polygon": False, "circle": False,
              "marker": False, "circlemarker": False})])


def structure(rel: dp.Release, depth: int | None = None, series: int = 0):
    """(base grid, regions, noisy counts, path epsilon or None, people) of a release, of a tree
    cut at `depth` (growth view), or of grid `series` (1..m) of a series of grids; all of them
    post-processing of what was released. What applies is read from `rel.capabilities`.
    People are the counts made whole and non-negative (`dp.whole_counts`) in the release's own
    order of regions, as its export has them; cells of a full cover come back in row-major order."""
    caps = rel.capabilities
    grid, regions, counts = rel.regions()
    eps = rel.eps_path if caps.budget_layer else None
    if series and caps.grids > 1:
        regions, counts = rel.grid_regions(series - 1)
        eps = None
    elif depth is not None and depth < caps.depths:
        regions, counts = rel.partition_at(depth)
        eps = None
    people = whole_nonnegative(counts)
    return (grid, *render.in_row_major(grid, regions, counts, eps, people))     # what a cell layer reads


def region_truth(data, grid: dp.UniformGrid, regions: np.ndarray) -> np.ndarray:
    """True count per released region (owner only): points by prefix sums of their histogram,
    users' regions by counting the regions that meet each rectangle."""
    if data.kind == "points":
        return box_sums(summed_area(data.histogram(grid)), regions)
    ex, ey = grid.edges_x, grid.edges_y
    rects = np.column_stack([ex[regions[:, 2]], ey[regions[:, 0]], ex[regions[:, 3]], ey[regions[:, 1]]])
    return data.true_counts(rects, grid.domain).astype(np.float64)


def world_outlines():
    """Country borders and coastlines (Natural Earth 1:50m, assets/world_outlines.json) in a
    pane the page shows only when base-map tiles fail to load (the tile layer's attribution
    then names Natural Earth instead of the tiles' source)."""
    return dl.Pane(dl.GeoJSON(url="/assets/world_outlines.json", interactive=False,
                              style={"color": "#7d8b99", "weight": 1, "fill": False}),
                   name="world", style={"zIndex": 250})


def no_release_view(domain_info):
    """(children, hover, viewport, legend) with no release of the loaded data: the declared
    domain alone, and why the map is empty."""
    try:
        d = domain_from_store(domain_info)
    except (dp.ParameterError, LookupError):
        return [], None, no_update, legend_note("No release yet: choose a domain in step 1 (Data)")
    return [render.domain_outline(d)], None, box_viewport(d), \
        legend_note("No release of the data now loaded yet (see step 3, Release)")


def box_viewport(d: dp.Domain) -> dict:
    """The map's viewport fitted to a box clear of its toolbars, at once (no animation: on a
    busy machine an animated zoom could leave the outlines drawn at a stale scale)."""
    return {"bounds": [[d.south, d.west], [d.north, d.east]], "transition": "fitBounds",
            "options": {"animate": False, **CLEAR_OF_CONTROLS}}


def legend_note(text: str):
    """The legend box holding a sentence instead of a colour scale."""
    return [html.Div(text, id=ids.MAP_LEGEND_TITLE, className="legend-title")]


def cell_layers(rel, data, layer: str, depth: int | None = None, series: int = 0):
    """(map children, hover payload, legend contents) for the chosen layer of a release.
    `data` None (a published page) reads no truth: the private layer alone, no true counts."""
    if data is None and layer in ("true", "error"):
        raise ValueError(f"the {layer} layer needs the data")
    grid, regions, counts, eps, people = structure(rel, depth, series)
    d = rel.domain
    bounds = (d.west, d.south, d.east, d.north)
    n = len(regions)
    is_cells = render.is_row_major(grid, regions)
    area = render.region_km2(grid, regions)
    need_truth = data is not None and (layer in ("true", "error") or (is_cells and n <= MAX_HOVER_CELLS)
                                       or (not is_cells and n <= MAX_HOVER_REGIONS))
    truth = region_truth(data, grid, regions) if need_truth else None
    children = [render.domain_outline(d)]
    legend = []
    people = people.astype(np.float64)             # what the map shows (dp.whole_counts)
    if layer != "none":
        per_region = {"private": people, "true": truth,
                      "error": None if truth is None else people - truth}[layer] / area
        diverging = layer == "error"
        painted = render.on_grid(grid, regions, per_region)
        scale = render.legend_scale(painted, diverging)
        colours = render.DIVERGING if diverging else render.SEQUENTIAL
        children.append(dl.ImageOverlay(url=render.grid_image(painted, bounds, scale.vmin, scale.vmax, colours),
                                        bounds=[[d.south, d.west], [d.north, d.east]],
                                        opacity=0.85, className=ids.MAP_RASTER, id=ids.MAP_RASTER))
        if n <= MAX_OUTLINED:
            children.append(outlines(grid, regions))
        kind = rel.spec.data_kind if data is None else data.kind
        unit = UNITS[layer] if kind == "points" else UNITS[layer].replace("points", "users' regions")
        legend = legend_box(scale, colours, unit)
    return children, hover_payload(grid, regions, people, truth, eps, area, is_cells), legend


def legend_box(scale: render.Legend, colours, unit: str, title_id: str | None = ids.MAP_LEGEND_TITLE) -> list:
    """The map legend: its unit, the colour bar and round tick labels kept inside the box
    (the first label starts at the bar's left end, the last ends at its right end)."""
    named = {"id": title_id} if title_id else {}
    return [html.Div(unit, className="legend-title", **named),
            html.Div(className="legend-bar",
                     style={"background": f"linear-gradient(to right, {', '.join(colours)})"}),
            html.Div(className="legend-ticks", children=[
                html.Span(label, className="legend-tick", style={"left": f"{100 * pos:.2f}%"})
                for pos, label in scale.ticks])]


def outlines(grid: dp.UniformGrid, regions: np.ndarray):
    """Region borders as one vector MultiPolygon (a single SVG path): crisp at every zoom."""
    ex, ey = grid.edges_x, grid.edges_y
    w, e = ex[regions[:, 2]], ex[regions[:, 3]]
    s, n = ey[regions[:, 0]], ey[regions[:, 1]]
    rings = np.stack([np.column_stack(c) for c in ((w, s), (e, s), (e, n), (w, n), (w, s))], axis=1)
    geom = {"type": "MultiPolygon", "coordinates": rings[:, None].round(7).tolist()}
    layer = dl.GeoJSON(data={"type": "Feature", "geometry": geom, "properties": {}}, id=ids.MAP_OUTLINES,
                       interactive=False, style={"color": "#3c4655", "weight": 0.6, "opacity": 0.55,
                                                 "fill": False})
    # its own pane ignores the mouse, so drawing and hovering work through the borders
    return dl.Pane(layer, name="outlines", id=ids.MAP_OUTLINES_PANE, style={"pointerEvents": "none", "zIndex": 450})


def hover_payload(grid, regions, people, truth, eps, area, is_cells):
    """Per-region values the browser needs for the hover readout (None when too many): the
    release's whole, non-negative people per region, as painted."""
    d = grid.domain
    base = {"bounds": [d.west, d.south, d.east, d.north], "gx": grid.gx, "gy": grid.gy,
            "noisy": np.asarray(people).astype(np.int64).tolist(),
            "truth": None if truth is None else np.round(truth).astype(int).tolist()}
    if is_cells:
        return {**base, "kind": "cells"} if grid.n_cells <= MAX_HOVER_CELLS else None
    if len(regions) > MAX_HOVER_REGIONS:
        return None
    return {**base, "kind": "regions", "regions": regions.ravel().tolist(),
            "area": np.round(area, 4).tolist(), "eps": None if eps is None else np.round(eps, 5).tolist()}


def staged(sid, key: str, rel, stage: str | None, layer: str):
    """(release, layer) for the chosen consistency stage of a release with stages; the exact
    stage is the owner-only true layer of the release itself.

    The release at another stage is a new release, cached under its own entry (running LinProg
    the first time takes a moment); the cached release is never changed.
    """
    if stage == EXACT_STAGE:
        return rel, ("true" if layer == "private" else layer)
    return releases.staged_release(sid, key, stage), layer


def stage_status(rel, stage: str | None, at=None) -> str:
    """One line on the chosen Euler stage: its constraint violations and the LP's time.
    `at(stage)` gives the release at a stage (by default `rel.with_stage`)."""
    if stage == EXACT_STAGE:
        return "Exact Euler histogram: the true counts, shown to the owner only; not private."
    stage = stage or rel.capabilities.stage
    r = (at or rel.with_stage)(stage)
    total = sum(r.violations().values())
    text = f"{stage}: {total:,} violated consistency constraints"
    secs = r.stage_info("linprog").get("seconds") if stage in ("linprog", "round") else None
    if secs is not None:
        text += f"; LP solved in {secs:.2f} s (cached)"
    return text


def violations_figure(rel, at=None) -> go.Figure:
    """Bars of C1/C2/C3 violations for every stage of the release (each is post-processing).
    `at(stage)` gives the release at a stage (by default `rel.with_stage`, a new release)."""
    at = at or rel.with_stage
    table = {st: at(st).violations() for st in rel.capabilities.stages}
    fig = go.Figure()
    for c, colour in (("C1", "#1b9e77"), ("C2", "#d95f02"), ("C3", "#7570b3")):
        fig.add_trace(go.Bar(x=list(table), y=[table[st].get(c, 0) for st in table], name=c,
                             marker_color=colour))
    fig.update_layout(barmode="group", template="plotly_white", height=220,
                      title="Constraint violations per stage", margin={"l": 40, "r": 10, "t": 36, "b": 30},
                      yaxis_title="violated constraints")
    return fig


def euler_extras(rel) -> list:
    """Edges as coloured lines and vertices as dots, with their noisy values (small grids)."""
    _, grid = rel.raster()
    if max(grid.gx, grid.gy) > MAX_EDGE_CELLS:
        return []
    segs, ev = rel.edges_layer()
    pts, vv = rel.vertices_layer()
    lo, hi = render.colour_range(np.concatenate([ev, vv]))
    def colour(v):
        return render.colourise(np.asarray(v, float), lo, hi, render.SEQUENTIAL)[..., :3]
    ec, vc = colour(ev), colour(vv)
    lines = [{"type": "Feature", "geometry": {"type": "LineString", "coordinates": seg},
              "properties": {"value": round(float(v), 1), "colour": "#%02x%02x%02x" % tuple(c)}}
             for seg, v, c in zip(segs.tolist(), ev.tolist(), ec.tolist())]
    dots = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": p},
             "properties": {"value": round(float(v), 1), "colour": "#%02x%02x%02x" % tuple(c)}}
            for p, v, c in zip(pts.tolist(), vv.tolist(), vc.tolist())]
    return [dl.GeoJSON(data={"type": "FeatureCollection", "features": lines}, id=ids.EULER_EDGES,
                       style={"variable": "dpMap.valueStyle"}, onEachFeature={"variable": "dpMap.valueTip"}),
            dl.GeoJSON(data={"type": "FeatureCollection", "features": dots}, id=ids.EULER_VERTICES,
                       pointToLayer={"variable": "dpMap.vertex"}, onEachFeature={"variable": "dpMap.valueTip"})]


def points_layer(data, n: int = POINT_SAMPLE):
    pts = data.sample(n)
    feats = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [x, y]}}
             for x, y in pts.tolist()]
    return dl.GeoJSON(data={"type": "FeatureCollection", "features": feats},
                      pointToLayer={"variable": "dpMap.point"}, id=ids.MAP_RAW_POINTS)


def current_release(sid, rinfo):
    """The session's current release, or None when there is none (or it can't be rebuilt)."""
    try:
        return releases.release(sid, rinfo["key"]) if rinfo else None
    except LookupError:
        return None


def layers(sid: str, key: str, layer: str, stage, depth, series: int, extras, toggles):
    """(map children, hover payload, legend, the release's domain) of a session's release: the
    heavy part of drawing the map, run in the heavy pool (`state.heavy_call`)."""
    rel = releases.release(sid, key)
    data = state.points(sid, releases.key_fingerprint(key))
    if rel.capabilities.stages:
        rel, layer = staged(sid, key, rel, stage, layer)
    children, hover, legend = cell_layers(rel, data, layer, depth, series)
    if rel.capabilities.edges_layer and "edges" in (extras or []):
        children += euler_extras(rel)
    if "points" in (toggles or []):
        children.append(points_layer(data))
    return children, hover, legend, rel.domain


def register_callbacks(app, config: dict):
    app.callback(Output(ids.MAP_LAYERS, "children"), Output(ids.MAP_GRID_STORE, "data"),
                 Output(ids.MAP, "viewport"), Output(ids.MAP_LEGEND, "children"),
                 Output(ids.GROW_DRAWN, "data"),
                 Input(ids.RELEASE, "data"), Input(ids.MAP_LAYER_PICK, "value"),
                 Input(ids.MAP_POINTS_TOGGLE, "value"), Input(ids.GROW_DEPTH, "value"),
                 Input(ids.SERIES_PICK, "value"), Input(ids.EULER_STAGE, "value"),
                 Input(ids.EULER_EXTRAS, "value"), Input(ids.DOMAIN, "data"))(draw)

    app.callback(Output(ids.MAP, "viewport", allow_duplicate=True),
                 Input(ids.MAP_ZOOM_DOMAIN, "n_clicks"), State(ids.DOMAIN, "data"),
                 prevent_initial_call=True)(zoom_to_domain)

    app.callback(Output(ids.GROW_BOX, "hidden"), Output(ids.GROW_DEPTH, "max"),
                 Output(ids.GROW_DEPTH, "value"), Output(ids.GROW_TIMER, "disabled"),
                 Input(ids.RELEASE, "data"), Input(ids.GROW_PLAY, "n_clicks"),
                 Input(ids.GROW_TIMER, "n_intervals"),
                 State(ids.GROW_DEPTH, "value"), State(ids.GROW_DEPTH, "max"),
                 State(ids.GROW_DRAWN, "data"))(grow)

    app.callback(Output(ids.EULER_BOX, "hidden"), Output(ids.EULER_STAGE, "options"),
                 Output(ids.EULER_STAGE, "value"),
                 Output(ids.EULER_CHART_BOX, "hidden"), Output(place_id(ids.EULER_CHART), "children"),
                 Input(ids.RELEASE, "data"))(euler_panel)

    app.callback(Output(ids.EULER_STATUS, "children"), Input(ids.EULER_STAGE, "value"),
                 Input(ids.RELEASE, "data"))(euler_status)

    app.callback(Output(ids.SERIES_BOX, "hidden"), Output(ids.SERIES_PICK, "max"),
                 Output(ids.SERIES_PICK, "value"), Input(ids.RELEASE, "data"))(series)

    app.clientside_callback(     # a new map: the readout no longer shows a cell of the old one
        """function(data, rinfo){ window.dpGrid = data;
            if (data) { return "Hover over a cell to read its counts."; }
            return rinfo ? "Too many cells to read by hovering: draw a rectangle to read a count."
                         : "No release on the map to read."; }""",
        Output(ids.MAP_HOVER, "children"), Input(ids.MAP_GRID_STORE, "data"), State(ids.RELEASE, "data"))


def draw(rinfo, layer, toggles, depth, series, stage, extras, domain_info):
    """The release's map layers, hover values and legend (a new release fits the map to it; a
    new box alone keeps it), and the tree depth drawn."""
    sid = sessions.session_id()
    if not rinfo:
        return *no_release_view(domain_info), None
    if set(ctx.triggered_prop_ids) == {f"{ids.DOMAIN}.data"}:   # a new box alone: keep the release
        return no_update, no_update, no_update, no_update, no_update
    fresh = f"{ids.RELEASE}.data" in ctx.triggered_prop_ids     # a new release: fit the map to it
    drawn = None if fresh else depth      # what Play's next step waits for (see `grow`)
    try:
        children, hover, legend, d = state.heavy_call(
            layers, sid, rinfo["key"], layer, stage, None if fresh else depth,
            0 if fresh else int(series or 0), extras, toggles, idempotent=True)
    except LookupError as exc:
        return [], None, no_update, legend_note(str(exc)), drawn
    viewport = box_viewport(d) if fresh else no_update
    return children, hover, viewport, legend, drawn


def zoom_to_domain(_, domain_info):
    """Fit the map to the declared domain box (`box_viewport`; an animated zoom left the
    outlines at a stale scale on a busy machine, found by the zoom-to-domain browser test)."""
    try:
        d = domain_from_store(domain_info)
    except (dp.ParameterError, LookupError):
        return no_update
    return box_viewport(d)


def grow(rinfo, _play, _tick, depth, top, drawn):
    """Show or hide the depth control; Play goes back to the root and each tick of the timer
    one level deeper, once the map has drawn the level shown: on a busy server a draw can
    take longer than a tick, and Dash drops a draw still running when the next is asked for,
    so ticking on regardless would show no level between the root and the full tree."""
    sid = sessions.session_id()
    if ctx.triggered_id == ids.GROW_PLAY:
        return no_update, no_update, 0, False
    if ctx.triggered_id == ids.GROW_TIMER:
        if drawn != depth:                # this level is not on the map yet: wait a tick
            return no_update, no_update, no_update, no_update
        nxt = min((depth or 0) + 1, top)
        return no_update, no_update, nxt, nxt >= top
    rel = current_release(sid, rinfo)
    if rel is None:
        return True, no_update, no_update, True
    top = rel.capabilities.depths
    if not top:
        return True, 1, 1, True
    return False, top, top, True


def euler_panel(rinfo):
    """The Euler histogram's stage picker and its chart of violated constraints, shown only for
    a release with stages."""
    sid = sessions.session_id()
    rel = current_release(sid, rinfo)
    if rel is None or not rel.capabilities.stages:
        return True, no_update, no_update, True, no_update
    caps = rel.capabilities
    try:
        fig = violations_figure(rel, lambda st: releases.staged_release(sid, rinfo["key"], st))
    except LookupError:               # dropped between the two reads
        return True, no_update, no_update, True, no_update
    return False, stage_options(caps.stages), caps.stage, False, chart(
        ids.EULER_CHART, fig, config={"displayModeBar": False}, style={"height": "220px"})


def euler_status(stage, rinfo):
    """The line saying what the Euler stage shown does and how many constraints it violates."""
    sid = sessions.session_id()
    rel = current_release(sid, rinfo)
    if rel is None or not rel.capabilities.stages:
        return ""
    try:
        return stage_status(rel, stage, lambda st: releases.staged_release(sid, rinfo["key"], st))
    except LookupError as exc:
        return str(exc)


def series(rinfo):
    """The shifted grids' slider: hidden unless the release has more than one grid, and how
    many it has."""
    sid = sessions.session_id()
    rel = current_release(sid, rinfo)
    m = rel.capabilities.grids if rel is not None else 0
    return (False, m, 0) if m > 1 else (True, 1, 0)
