"""Map panel: the private structure on a Leaflet map, owner-only layers, hover readout, drawing."""
from __future__ import annotations

import dash_leaflet as dl
from dash import Input, Output, State, ctx, dcc, html, no_update

from . import ids, render, state
from .help import help_box

LAYERS = {
    "private": "Private counts (published)",
    "true": "True counts (owner only, not private)",
    "error": "Error: private − true (owner only)",
    "none": "No cells",
}
MAX_HOVER_CELLS = 512 * 512
POINT_SAMPLE = 2000
LEGEND_TITLE = "map-legend-title"


def layout(config: dict) -> html.Div:
    d = state.sample(state.DEFAULT_SAMPLE)[1]
    return html.Div(className="card map-card", children=[
        html.Div(className="map-head", children=[
            html.H3("3 · Map"),
            dcc.RadioItems(id=ids.MAP_LAYER_PICK, value="private", inline=True,
                           options=[{"label": f" {v}", "value": k} for k, v in LAYERS.items()]),
            dcc.Checklist(id=ids.MAP_POINTS_TOGGLE, value=[], inline=True, options=[
                {"label": f" raw point sample ({POINT_SAMPLE:,}, owner only)", "value": "points"}]),
        ]),
        help_box("map"),
        html.Div(className="map-wrap", children=[
            dl.Map(id=ids.MAP, bounds=[[d.south, d.west], [d.north, d.east]], style={"height": "560px"},
                   trackViewport=False, zoomSnap=0.25,
                   eventHandlers={"mousemove": {"variable": "dpMap.hover"},
                                  "mouseout": {"variable": "dpMap.leave"}},
                   children=[
                       dl.TileLayer(url=config["tiles_url"], attribution=config["tiles_attribution"]),
                       dl.LayerGroup(id=ids.MAP_LAYERS),
                       dl.LayerGroup(id=ids.DRAWN),
                       dl.FeatureGroup([dl.EditControl(
                           id=ids.EDIT, position="topleft",
                           draw={"rectangle": {"shapeOptions": {"color": "#1f4e99", "weight": 2}},
                                 "polyline": False, "polygon": False, "circle": False,
                                 "marker": False, "circlemarker": False})]),
                       dl.ScaleControl(position="bottomleft"),
                   ]),
            html.Div(id=ids.MAP_HOVER, className="hover-readout",
                     children="Hover over a cell to read its counts."),
            html.Div(id=LEGEND_TITLE, className="legend-title"),
        ]),
        dcc.Store(id=ids.MAP_GRID_STORE),
    ])


def cell_layers(rel, data, layer: str):
    """(map children, hover payload, legend title) for the chosen layer of a release."""
    values, grid = rel.raster()
    d = rel.domain
    bounds = (d.west, d.south, d.east, d.north)
    truth = data.histogram(grid) if layer in ("true", "error") or grid.n_cells <= MAX_HOVER_CELLS else None
    children = [dl.Rectangle(bounds=[[d.south, d.west], [d.north, d.east]], interactive=False,
                             pathOptions={"color": "#333", "weight": 2, "fill": False, "dashArray": "6 4"})]
    if layer != "none":
        shown = {"private": values, "true": truth,
                 "error": None if truth is None else values - truth}[layer]
        diverging = layer == "error"
        if not diverging:
            shown = shown.clip(min=0)   # display only (spec 000 P11); numbers stay raw
        vmin, vmax = render.colour_range(shown, diverging)
        colours = render.DIVERGING if diverging else render.SEQUENTIAL
        children.append(dl.ImageOverlay(url=render.grid_image(shown, bounds, vmin, vmax, colours),
                                        bounds=[[d.south, d.west], [d.north, d.east]],
                                        opacity=0.85, className="grid-raster", id="grid-raster"))
        unit = {"private": "noisy count per cell", "true": "true count per cell (not private)",
                "error": "private − true per cell"}[layer]
        children.append(dl.Colorbar(id=ids.MAP_LEGEND, colorscale=colours, min=vmin, max=vmax,
                                    nTicks=5, width=260, height=14, position="bottomright",
                                    tickDecimals=0 if vmax - vmin > 10 else 1))
    else:
        unit = ""
    hover = None
    if grid.n_cells <= MAX_HOVER_CELLS:
        hover = {"bounds": list(bounds), "gx": grid.gx, "gy": grid.gy,
                 "noisy": values.round(1).ravel().tolist(),
                 "truth": None if truth is None else truth.astype(int).ravel().tolist()}
    return children, hover, unit


def points_layer(data, n: int = POINT_SAMPLE):
    pts = data.sample(n)
    feats = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [x, y]}}
             for x, y in pts.tolist()]
    return dl.GeoJSON(data={"type": "FeatureCollection", "features": feats},
                      pointToLayer={"variable": "dpMap.point"}, id="raw-points")


def register_callbacks(app, config: dict):
    @app.callback(Output(ids.MAP_LAYERS, "children"), Output(ids.MAP_GRID_STORE, "data"),
                  Output(ids.MAP, "viewport"), Output(LEGEND_TITLE, "children"),
                  Input(ids.RELEASE, "data"), Input(ids.MAP_LAYER_PICK, "value"),
                  Input(ids.MAP_POINTS_TOGGLE, "value"),
                  State(ids.SESSION, "data"), State(ids.DATASET, "data"))
    def draw(rinfo, layer, toggles, sid, info):
        if not rinfo or not info:
            return no_update, no_update, no_update, no_update
        try:
            rel = state.release(sid, rinfo["key"])
            data = state.points(sid, state.key_fingerprint(rinfo["key"]))
        except LookupError as exc:
            return [], None, no_update, str(exc)
        children, hover, legend = cell_layers(rel, data, layer)
        if "points" in (toggles or []):
            children.append(points_layer(data))
        d = rel.domain
        viewport = {"bounds": [[d.south, d.west], [d.north, d.east]]} \
            if ctx.triggered_id == ids.RELEASE else no_update
        return children, hover, viewport, legend

    app.clientside_callback(
        "function(data){ window.dpGrid = data; return window.dash_clientside.no_update; }",
        Output(ids.MAP_HOVER, "title"), Input(ids.MAP_GRID_STORE, "data"))
