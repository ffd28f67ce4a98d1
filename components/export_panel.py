"""Export panel: download the public release (noisy cells) and its metadata; nothing else."""
from __future__ import annotations

import json

from dash import Input, Output, State, dcc, html, no_update

from . import ids
from server import published, state
from .help import help_box


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("6 · Export"),
        help_box("export"),
        html.Button("Download release (GeoJSON)", id=ids.EXPORT_BUTTON, n_clicks=0),
        html.Button("Download metadata (JSON)", id=ids.EXPORT_META_BUTTON, n_clicks=0),
        dcc.Download(id=ids.EXPORT_DOWNLOAD), dcc.Download(id=ids.EXPORT_META_DOWNLOAD),
        html.Div(id=ids.EXPORT_STATUS, role="status"),
        html.H4("Publish"),
        *publish_controls(config["page"]["owner"]),
        html.H4("Share these settings"),
        html.Div("A link that opens the dashboard with this mechanism, ε, split, parameters and "
                 "domain; it carries no data and no seed.", className="hint"),
        html.Button("Make a link", id=ids.SHARE_BUTTON, n_clicks=0),
        html.Div(className="share-row", children=[
            dcc.Input(id=ids.SHARE_LINK, readOnly=True, placeholder="the link appears here"),
            dcc.Clipboard(id=ids.SHARE_COPY, target_id=ids.SHARE_LINK, title="copy the link")]),
    ])


def publish_controls(owner: bool) -> list:
    """The owner's Publish controls; a visitor reads who may publish instead."""
    if not owner:
        return [html.Div("The data owner publishes releases as public pages; see them in the "
                         "gallery of published releases.", className="hint")]
    return [html.Div("A public page of the release shown: its map, legend, guarantee and ledger, "
                     "rectangles answered from the release, and downloads. Nothing else: no true "
                     "count, no data. Free: it spends nothing.", className="hint"),
            dcc.Input(id=ids.PUBLISH_TITLE, maxLength=published.MAX_TITLE, debounce=False,
                      placeholder="title (optional), e.g. Taxi pick-ups in 2024"),
            html.Button("Publish", id=ids.PUBLISH_BUTTON, n_clicks=0),
            html.Div(id=ids.PUBLISH_STATUS, role="status")]


def publish(sid: str, rinfo, title) -> html.Div:
    """Publish the session's current release (owners only, private releases only); the new
    page's address, or why not, in words."""
    if not state.is_owner():                     # checked here, whatever the page shows
        raise LookupError(state.OWNERS_ONLY)
    rel, why_not = _current(rinfo, sid)
    if rel is None:
        return why_not
    if not rel.private:
        return html.Div("Not published: this release is not private (a fixed seed or a box fitted "
                        "to the data). Release it again with fresh randomness over a public box.",
                        className="warning")
    pid = published.publish(rel, title or "")
    return html.Div(["Published at ", html.A(f"/r/{pid}", href=f"/r/{pid}", target="_blank"),
                     " and listed in the gallery at /r/: anyone can open it; unpublish it from that page."],
                    className="ok")


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


    @app.callback(Output(ids.PUBLISH_STATUS, "children"), Input(ids.PUBLISH_BUTTON, "n_clicks"),
                  State(ids.RELEASE, "data"), State(ids.PUBLISH_TITLE, "value"),
                  prevent_initial_call=True)
    def publish_current(_, rinfo, title):
        return publish(state.session_id(), rinfo, title)


def _current(rinfo, sid):
    """(the current release, None), or (None, a message saying why there is nothing to export)."""
    if not rinfo:
        return None, html.Div("No release yet: press Release first.", className="warning")
    try:
        return state.release(sid, rinfo["key"]), None
    except LookupError as exc:
        return None, html.Div(f"Nothing exported: {exc}.", className="warning")
