"""Export panel: download the public release (noisy cells) and its metadata; nothing else."""
from __future__ import annotations

import json

from dash import Input, Output, State, dcc, html, no_update

from . import ids
from server import state
from .help import help_box


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("6 · Export"),
        help_box("export"),
        html.Button("Download release (GeoJSON)", id=ids.EXPORT_BUTTON, n_clicks=0),
        html.Button("Download metadata (JSON)", id=ids.EXPORT_META_BUTTON, n_clicks=0),
        dcc.Download(id=ids.EXPORT_DOWNLOAD), dcc.Download(id=ids.EXPORT_META_DOWNLOAD),
        html.Div(id=ids.EXPORT_STATUS, role="status"),
        html.H4("Share these settings"),
        html.Div("A link that opens the dashboard with this mechanism, ε, split, parameters and "
                 "domain; it carries no data and no seed.", className="hint"),
        html.Button("Make a link", id=ids.SHARE_BUTTON, n_clicks=0),
        html.Div(className="share-row", children=[
            dcc.Input(id=ids.SHARE_LINK, readOnly=True, placeholder="the link appears here"),
            dcc.Clipboard(id=ids.SHARE_COPY, target_id=ids.SHARE_LINK, title="copy the link")]),
    ])


def export_files(rel) -> tuple[str, str]:
    """(GeoJSON text, metadata JSON text) built only from the release's public outputs."""
    return rel.to_json(), json.dumps(rel.metadata(), indent=2, default=str)


def register_callbacks(app, config: dict):
    @app.callback(Output(ids.EXPORT_DOWNLOAD, "data"), Output(ids.EXPORT_STATUS, "children"),
                  Input(ids.EXPORT_BUTTON, "n_clicks"),
                  State(ids.RELEASE, "data"), prevent_initial_call=True)
    def download(_, rinfo):
        sid = state.session_id()
        rel, why_not = _current(rinfo, sid)
        if rel is None:
            return no_update, why_not
        return dict(content=export_files(rel)[0], filename=f"release_{rel.mechanism}.geojson"), ""

    @app.callback(Output(ids.EXPORT_META_DOWNLOAD, "data"), Output(ids.EXPORT_STATUS, "children",
                                                                   allow_duplicate=True),
                  Input(ids.EXPORT_META_BUTTON, "n_clicks"),
                  State(ids.RELEASE, "data"), prevent_initial_call=True)
    def download_meta(_, rinfo):
        sid = state.session_id()
        rel, why_not = _current(rinfo, sid)
        if rel is None:
            return no_update, why_not
        return dict(content=export_files(rel)[1], filename=f"release_{rel.mechanism}_metadata.json"), ""


def _current(rinfo, sid):
    """(the current release, None), or (None, a message saying why there is nothing to export)."""
    if not rinfo:
        return None, html.Div("No release yet: press Release first.", className="warning")
    try:
        return state.release(sid, rinfo["key"]), None
    except LookupError as exc:
        return None, html.Div(f"Nothing exported: {exc}.", className="warning")
