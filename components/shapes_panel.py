"""Counts per district or hexagon: the shown release answered for public shapes (H3 hexagons
over the box, or districts the user uploads), drawn on the map as a choropleth and downloaded
as GeoJSON or GeoParquet. Post-processing of the release (`dp.shapes`): nothing is charged.

What is chosen (hexagons or districts, the resolution, the district file, shown or not) lives
in the workspace (`server.workspace`, one field each, so concurrent changes never undo each
other), so a reload or another worker draws the same map; the districts themselves are a store
entry of the session, known to every worker.
"""
from __future__ import annotations

import hashlib
import io
import secrets

import dash_leaflet as dl
import numpy as np
import shapely
from dash import Input, Output, State, ctx, dcc, html, no_update

import dp
from dp import shapes
from dp.errors import MissingExtra
from dp.feature_files import geojson_text

from . import ids, render
from .data_panel import decode_upload, upload_limit
from .help import help_box
from .numbers import count_of
from .map_panel import legend_box
from server import releases, services, sessions, state, workspace

MAX_APP_SHAPES = 5000     # drawn and downloaded here; the command line makes up to shapes.MAX_SHAPES
H3_RESOLUTIONS = {0: "1,300 km", 1: "480 km", 2: "180 km", 3: "70 km", 4: "26 km", 5: "10 km",
                  6: "3.7 km", 7: "1.4 km", 8: "530 m", 9: "200 m", 10: "76 m"}   # mean edge (H3 v4)
# kept as workspace fields shapes_<key>; "place" is the [data fingerprint, box] the choice was
# made for: a release of other data or another box hides the layer and fits the size anew
DEFAULT = {"kind": "h3", "res": 7, "shown": False, "districts": None, "place": None}
UNIT = "count per km² of the shape's area in the box"
KEPT_COUNTS = 2           # computed choropleths a session keeps for its downloads


def layout(config: dict) -> html.Div:
    """The card in step 4, its controls set to the workspace's choice."""
    choice = choice_in(config["page"].get("shapes") or {})
    return html.Div(className="card", children=[
        html.H3("Counts per district or hexagon"),
        help_box("shapes"),
        dcc.RadioItems(id=ids.SHAPES_KIND, value=choice["kind"], options=[
            {"label": " H3 hexagons over the box", "value": "h3"},
            {"label": " districts from a file (public boundaries)", "value": "districts"}]),
        html.Div(className="row", children=[
            html.Label("Hexagon size (H3 resolution)", htmlFor=ids.SHAPES_H3_RES),
            dcc.Dropdown(id=ids.SHAPES_H3_RES, value=choice["res"], clearable=False, searchable=False,
                         options=res_options(None))]),
        dcc.Checklist(id=ids.SHAPES_PUBLIC, value=[], options=[
            {"label": " These districts are public (published boundaries), not drawn from the data",
             "value": "public"}]),
        dcc.Upload(id=ids.SHAPES_UPLOAD, className="upload", multiple=False, disabled=True,
                   max_size=int(config["max_upload_mb"] * 1e6),
                   children=html.Div(["Tick the box above, then drop districts here (GeoJSON or "
                                      "GeoParquet) or ", html.A("choose a file")])),
        html.Div(id=ids.SHAPES_FILE, className="hint", children=districts_note(choice["districts"])),
        html.Button("Show on map", id=ids.SHAPES_SHOW, n_clicks=0),
        html.Button("Hide", id=ids.SHAPES_HIDE, n_clicks=0),
        html.Button("Download (GeoJSON)", id=ids.SHAPES_DL_GEOJSON, n_clicks=0),
        html.Button("Download (GeoParquet)", id=ids.SHAPES_DL_PARQUET, n_clicks=0),
        dcc.Download(id=ids.SHAPES_DOWNLOAD),
        dcc.Store(id=ids.SHAPES_TICK),
        dcc.Loading(html.Div(id=ids.SHAPES_STATUS, role="status"), type="dot"),
    ])


def fitting(domain: dp.Domain | None) -> dict[int, bool]:
    """Per offered resolution, whether its hexagons over the box are few enough to draw (all,
    before there is a box)."""
    return {r: domain is None or shapes.h3_estimate(domain, r) <= MAX_APP_SHAPES for r in H3_RESOLUTIONS}


def res_options(domain: dp.Domain | None) -> list[dict]:
    """The hexagon sizes, those too small for the box greyed out and saying why."""
    fits = fitting(domain)
    return [{"label": f"{r}: edges about {edge}" + ("" if fits[r] else
                                                    f" (over {MAX_APP_SHAPES:,} hexagons in this box)"),
             "value": r, "disabled": not fits[r]} for r, edge in H3_RESOLUTIONS.items()]


def fitted_res(domain: dp.Domain, res: int) -> int:
    """`res` when its hexagons fit the box, else the finest size that does (0 at worst)."""
    fits = fitting(domain)
    return res if fits.get(res) else max([r for r, ok in fits.items() if ok], default=0)


def place_of(rinfo: dict | None) -> list | None:
    """[data fingerprint, box] of the shown release: what a shapes choice was made for."""
    if not rinfo:
        return None
    return [releases.key_fingerprint(rinfo["key"]), releases.key_domain(rinfo["key"]).to_dict()]


def districts_note(districts: dict | None) -> str:
    """The line naming the district file loaded."""
    if not districts:
        return "No district file loaded."
    return f"Districts: {districts['name']} ({count_of(districts['n'], 'shape')})."


def choice_in(ws: dict) -> dict:
    """The shapes chosen in a workspace (`DEFAULT` for what it does not say); a kind or a
    resolution that is not offered (a crafted request) falls back to the default."""
    choice = {k: ws.get(f"shapes_{k}", v) for k, v in DEFAULT.items()}
    for k, offered in (("kind", ("h3", "districts")), ("res", H3_RESOLUTIONS)):
        if choice[k] not in offered:
            choice[k] = DEFAULT[k]
    return choice


def _fields(changes: dict) -> dict:
    return {f"shapes_{k}": v for k, v in changes.items()}


def choice_of(sid: str, **changes) -> dict:
    """The session's shapes choice, with `changes` (not saved)."""
    return choice_in({**workspace.get(sid), **_fields(changes)})


def _remember(sid: str, **changes) -> dict:
    """Change fields of the session's shapes choice (each its own workspace field, written under
    the workspace's lock) and return the choice; not kept on a full store (a reload then shows
    the one before)."""
    try:
        return choice_in(workspace.update(sid, **_fields(changes)))
    except LookupError:
        return choice_of(sid, **changes)


def read_districts(contents: str, filename: str | None, max_bytes: int) -> tuple[list, np.ndarray]:
    """(ids, polygons) of an uploaded district file, or a DataError saying what was wrong."""
    try:
        ids_, polys = shapes.load_shapes(decode_upload(contents, filename, max_bytes), MAX_APP_SHAPES)
    except dp.DataError as exc:
        if "allowed here" not in str(exc):
            raise
        raise dp.DataError(f"{exc}: the map draws at most {MAX_APP_SHAPES:,} (the command line, "
                           "python -m dp release ... --shapes FILE, takes more)") from None
    return [str(i) for i in ids_], polys


def wanted(rel, choice: dict) -> tuple[list, np.ndarray]:
    """(ids, polygons) of the shapes chosen, over the release's box. A box fitted to the data is
    refused: hexagons over it, and the shares of districts inside it, would show its edges."""
    if rel.domain.leaky:
        raise dp.ParameterError("counts per shape need a public box, and this release's box was "
                                "fitted to the data; choose a public box in step 1 and release again")
    if choice["kind"] == "h3":
        estimate = shapes.h3_estimate(rel.domain, choice["res"])
        if estimate > MAX_APP_SHAPES:
            raise dp.ParameterError(f"H3 resolution {choice['res']} gives about {estimate:,.0f} "
                                    f"hexagons over this box; the map draws at most {MAX_APP_SHAPES:,}. "
                                    "Choose a larger hexagon size (or use the command line, "
                                    f"python -m dp release ... --h3 {choice['res']})")
        cells = shapes.h3_cells(rel.domain, choice["res"])
        if len(cells[0]) > MAX_APP_SHAPES:                # the estimate is a little short at times
            raise dp.ParameterError(f"H3 resolution {choice['res']} gives {len(cells[0]):,} hexagons "
                                    f"over this box; the map draws at most {MAX_APP_SHAPES:,}. "
                                    "Choose a larger hexagon size")
        return cells
    if not choice["districts"]:
        raise dp.ParameterError("no district file loaded; tick that the districts are public and "
                                "drop a GeoJSON or GeoParquet file of them above")
    kept = services.current().store.get(choice["districts"]["key"])
    if kept is None:
        raise LookupError("the district file is no longer on the server; upload it again")
    return kept["ids"], shapely.from_wkb(kept["wkb"])


def counts_for(sid: str, key: str, choice: dict) -> shapes.ShapeCounts:
    """The shown release's counts for the chosen shapes, computed once per (release, shapes) and
    kept for the downloads."""
    spec = [choice["kind"], choice["res"] if choice["kind"] == "h3" else choice["districts"]["key"]]
    ckey = f"shapecounts:{sid}:{hashlib.sha256(repr([key, spec]).encode()).hexdigest()[:24]}"
    found = services.current().store.get(ckey)
    if found is not None:
        return found
    rel = releases.release(sid, key)
    ids_, polys = wanted(rel, choice)
    out = shapes.shape_counts(rel, polys, ids_)
    services.current().store.trim(sid, "shapecounts", KEPT_COUNTS - 1)
    services.current().store.set(ckey, out)          # not kept on a full store: the next download computes it again
    return out


def density(sc: shapes.ShapeCounts, domain: dp.Domain) -> np.ndarray:
    """Each shape's count per km² of its area inside the box (equirectangular at the box's
    middle, as the cell layer's densities): shapes of different sizes compare by colour."""
    p = dp.Projection(domain)
    km2 = shapely.area(sc.shapes) * p.mx * p.my / 1e6
    return np.divide(sc.count, km2, out=np.zeros(len(km2)), where=km2 > 0)


def is_private(sc: shapes.ShapeCounts) -> bool:
    return bool((sc.provenance or {}).get("differentially_private", True))


def choropleth(sc: shapes.ShapeCounts, domain: dp.Domain):
    """(the map layer's children, the legend's) of shape counts: colour by density, a tooltip
    per shape with its count, the range its true count lies in (or the noise-only interval,
    labelled so, where the release has no range) and the share the release resolves."""
    values = np.maximum(density(sc, domain), 0.0)       # below 0 is noise: drawn as empty, as cells are
    scale = render.legend_scale(values)
    rgba = render.colourise(values, scale.vmin, scale.vmax, render.SEQUENTIAL)
    label = "" if is_private(sc) else "NOT private · "
    features = []
    for row, geom, (r, g, b, _a) in zip(sc.rows(), sc.shapes, rgba):
        interval = shape_range_words(row, sc.level)
        tip = (f"{label}{row['id']}: count {row['count']:,.1f} · {interval} · "
               f"{row['resolved']:.0%} resolved by whole released regions")
        features.append({"type": "Feature", "geometry": shapely.geometry.mapping(geom),
                         "properties": {"colour": f"#{r:02x}{g:02x}{b:02x}", "tip": tip}})
    layer = dl.GeoJSON(data={"type": "FeatureCollection", "features": features}, id=ids.SHAPES_GEOJSON_LAYER,
                       style={"variable": "dpMap.shapeStyle"}, onEachFeature={"variable": "dpMap.shapeTip"})
    return [layer], legend_box(scale, render.SEQUENTIAL, f"Per shape: {UNIT}", title_id=None)


def shape_range_words(row: dict, level: float) -> str:
    """What a shape's tooltip says of its accuracy: the range its true count lies in, else the
    noise-only interval said to be one, else that there is neither."""
    if row["range_low"] is not None:
        return f"true count lies in {row['range_low']:,} to {row['range_high']:,} ({level:.0%}, any data)"
    if row["noise_only_low"] is not None:
        return (f"{level:.0%} interval of the noise only {row['noise_only_low']:,.1f} to {row['noise_only_high']:,.1f} "
                "(not a range for the true count)")
    return "no range (this release keeps no per-region noise)"


def summary(sc: shapes.ShapeCounts, kind: str) -> html.Div:
    """One line under the controls: how many shapes, their total, how much the release resolves
    and the median width of their ranges; a release that is not private says so first."""
    ranged = sc.range_low is not None and np.isfinite(sc.range_low).any()
    width = np.nanmedian(sc.range_high - sc.range_low) if ranged else None
    tiling = " (they tile the box: the release's answer for it)" if kind == "h3" else ""
    parts = [] if is_private(sc) else ["This release is NOT private (a fixed seed, or a mechanism "
                                       "that is not private), and neither are these counts. "]
    parts.append(f"{count_of(len(sc.ids), 'shape')} on the map, adding up to {sc.count.sum():,.0f}{tiling}. "
                 f"Median share resolved by whole released regions: {np.median(sc.resolved):.0%}; "
                 "the rest is spread by area.")
    if width is not None:
        parts.append(f" Median width of the range each true count lies in ({sc.level:.0%}, any "
                     f"data): {width:,.0f}.")
    parts.append(" Hover a shape for its numbers. Free: nothing is charged.")
    return html.Div("".join(parts), className="ok" if is_private(sc) else "warning")


def register_callbacks(app, config: dict):
    """The declaration, the upload, the choropleth and the downloads."""
    app.callback(Output(ids.SHAPES_UPLOAD, "disabled"), Input(ids.SHAPES_PUBLIC, "value"))(declared)

    app.callback(Output(ids.SHAPES_FILE, "children"), Output(ids.SHAPES_KIND, "value"),
                 Output(ids.SHAPES_TICK, "data"), Output(ids.SHAPES_STATUS, "children"),
                 Output(ids.SHAPES_UPLOAD, "contents"),
                 Input(ids.SHAPES_UPLOAD, "contents"), State(ids.SHAPES_UPLOAD, "filename"),
                 State(ids.SHAPES_PUBLIC, "value"), prevent_initial_call=True)(upload)

    app.callback(Output(ids.SHAPES_H3_RES, "options"), Output(ids.SHAPES_H3_RES, "value"),
                 Input(ids.RELEASE, "data"))(fit_sizes)

    app.callback(Output(ids.SHAPES_LAYER, "children"), Output(ids.SHAPES_LEGEND, "children"),
                 Output(ids.SHAPES_STATUS, "children", allow_duplicate=True),
                 Input(ids.SHAPES_SHOW, "n_clicks"), Input(ids.SHAPES_HIDE, "n_clicks"),
                 Input(ids.SHAPES_KIND, "value"), Input(ids.SHAPES_H3_RES, "value"),
                 Input(ids.SHAPES_TICK, "data"), Input(ids.RELEASE, "data"),
                 prevent_initial_call="initial_duplicate")(draw)

    app.callback(Output(ids.SHAPES_DOWNLOAD, "data"), Output(ids.SHAPES_STATUS, "children",
                                                             allow_duplicate=True),
                 Input(ids.SHAPES_DL_GEOJSON, "n_clicks"), Input(ids.SHAPES_DL_PARQUET, "n_clicks"),
                 State(ids.SHAPES_KIND, "value"), State(ids.SHAPES_H3_RES, "value"),
                 State(ids.RELEASE, "data"), prevent_initial_call=True)(download)


def upload(contents, filename, public):
    """Keep an uploaded district file (declared public: checked here too, whatever the page
    sent) for this session and switch to it; anything wrong is said and the districts
    loaded before stay."""
    if contents is None:
        return no_update, no_update, no_update, no_update, no_update

    def refused(text: str):
        return (no_update, no_update, no_update,
                html.Div(f"Not loaded: {text}. The districts loaded before are kept.",
                         className="error"), None)
    if "public" not in (public or []):
        return refused("tick that these districts are public first (counts per shape are "
                       "private only for shapes that do not depend on the data)")
    if not sessions.public_uploads():
        return refused(state.UPLOADS_OFF)
    sid = sessions.session_id()
    try:
        ids_, polys = read_districts(contents, filename, upload_limit())
    except (dp.DataError, MissingExtra) as exc:
        return refused(str(exc))
    before = choice_of(sid)["districts"]
    key = f"shapes:{sid}:{secrets.token_hex(12)}"
    if not services.current().store.set(key, {"ids": ids_, "wkb": shapely.to_wkb(polys)}):
        return refused(state.FULL)
    if before:
        services.current().store.delete(before["key"])
    districts = {"key": key, "name": filename or "districts", "n": len(ids_)}
    _remember(sid, kind="districts", districts=districts)
    return districts_note(districts), "districts", key.rsplit(":", 1)[1], "", None


def declared(public):
    """Districts upload only once declared public."""
    return "public" not in (public or [])


def fit_sizes(rinfo):
    """The sizes offered for the shown release's box; a release of other data or another box
    hides the layer and takes the chosen size, or the finest that fits."""
    if not rinfo:
        return res_options(None), no_update
    sid, place = sessions.session_id(), place_of(rinfo)
    choice, domain = choice_of(sid), releases.key_domain(rinfo["key"])
    res = fitted_res(domain, choice["res"])
    if choice["place"] != place:
        choice = _remember(sid, res=res, shown=False, place=place)
    return res_options(domain), choice["res"]


def draw(_show, _hide, kind, res, _tick, rinfo):
    """The choropleth of the shown release for the chosen shapes, when shown; it follows
    the release and the choice, and a page load draws what the workspace says is shown."""
    sid = sessions.session_id()
    trigger = ctx.triggered_id
    if trigger in (ids.SHAPES_SHOW, ids.SHAPES_HIDE):
        choice = _remember(sid, kind=kind, res=res, shown=trigger == ids.SHAPES_SHOW, place=place_of(rinfo))
    elif trigger in (ids.SHAPES_KIND, ids.SHAPES_H3_RES):
        choice = _remember(sid, kind=kind, res=res)
    else:
        choice = choice_of(sid)
    if not choice["shown"] or choice["place"] != place_of(rinfo):     # other data or box: hidden
        return [], [], "" if trigger == ids.SHAPES_HIDE else no_update
    if not rinfo:
        return [], [], html.Div("No release yet: press Release first (step 3).", className="warning")
    try:
        sc = counts_for(sid, rinfo["key"], choice)
    except (dp.ParameterError, dp.DataError, LookupError) as exc:
        return [], [], html.Div(f"Not shown: {exc}.", className="warning")
    return (*choropleth(sc, releases.key_domain(rinfo["key"])), summary(sc, choice["kind"]))


def download(_geojson, _parquet, kind, res, rinfo):
    """The chosen shapes' counts, intervals and resolved shares with the release's
    provenance; a release that is not private is named so in the file name."""
    if not rinfo:
        return no_update, html.Div("No release yet: press Release first (step 3).", className="warning")
    sid = sessions.session_id()
    choice = choice_of(sid, kind=kind, res=res)
    try:
        sc = counts_for(sid, rinfo["key"], choice)
    except (dp.ParameterError, dp.DataError, LookupError) as exc:
        return no_update, html.Div(f"Nothing downloaded: {exc}.", className="warning")
    name = (f"counts_{'h3_' + str(choice['res']) if choice['kind'] == 'h3' else 'districts'}"
            f"{'' if is_private(sc) else '_NOT_PRIVATE'}")
    if ctx.triggered_id == ids.SHAPES_DL_PARQUET:
        out = io.BytesIO()
        sc.to_parquet(out)
        return dcc.send_bytes(out.getvalue(), f"{name}.parquet"), no_update
    return dict(content=geojson_text(sc.to_geojson(), sc.provenance), filename=f"{name}.geojson"), no_update
