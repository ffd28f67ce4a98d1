"""Export panel: download the public release (noisy cells), its metadata with provenance, its map
as PNG and a script that repeats it; nothing else."""
from __future__ import annotations


from dash import Input, Output, State, ctx, dcc, html, no_update

import dp
from dp.provenance import export_texts, repeat_script

from . import ids, map_image, server_files
from server import published, releases, services, sessions, state
from .help import help_box


def layout(config: dict) -> html.Div:
    return html.Div(className="card", children=[
        html.H3("Export and publish"),
        help_box("export"),
        html.Button("Download release (GeoJSON)", id=ids.EXPORT_BUTTON, n_clicks=0),
        html.Button("Download metadata (JSON)", id=ids.EXPORT_META_BUTTON, n_clicks=0),
        html.Button("Map (PNG)", id=ids.EXPORT_PNG_BUTTON, n_clicks=0),
        html.Button("Repeat script (Python)", id=ids.EXPORT_SCRIPT_BUTTON, n_clicks=0),
        dcc.Download(id=ids.EXPORT_DOWNLOAD), dcc.Download(id=ids.EXPORT_META_DOWNLOAD),
        dcc.Download(id=ids.EXPORT_FILE_DOWNLOAD),
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
    if not sessions.is_owner():                     # checked here, whatever the page shows
        raise LookupError(state.OWNERS_ONLY)
    rel, why_not = _current(rinfo, sid)
    if rel is None:
        return why_not
    if not rel.private:
        return html.Div("Not published: this release is not private (a fixed seed or a box fitted "
                        "to the data). Release it again with fresh randomness over a public box.",
                        className="warning")
    account = _account(sid, rinfo)
    pid = services.current().published.publish(rel, title or "", account.spent, account.total)
    return html.Div(["Published at ", html.A(f"/r/{pid}", href=f"/r/{pid}", target="_blank"),
                     " and listed in the gallery at /r/: anyone can open it; unpublish it from that page."],
                    className="ok")


def export_files(rel, account=None) -> tuple[str, str]:
    """(GeoJSON text, metadata JSON text) built only from the release's public outputs, each with
    the provenance block (`dp.provenance`); `account`: the dataset's account, for its ε spent."""
    return export_texts(rel, *((account.spent, account.total) if account is not None else ()))


def owner_script(rel, data, sample: str | None = None) -> str:
    """The repeat script for the owner's own copy: the upload's file name and the columns read,
    or the built-in `sample` by name."""
    if sample is not None:
        return repeat_script(rel, sample, loader="load_region_sample" if data.kind == "regions"
                             else "load_sample")
    if isinstance(data, dp.CountData):
        return repeat_script(rel, f"{data.name}{server_files.COUNTS_EXT}", loader="load_counts")
    report = getattr(data, "report", None)
    return repeat_script(rel, data.name, getattr(report, "columns", None))


def register_callbacks(app, config: dict):
    app.callback(Output(ids.EXPORT_DOWNLOAD, "data"), Output(ids.EXPORT_STATUS, "children"),
                 Input(ids.EXPORT_BUTTON, "n_clicks"),
                 State(ids.RELEASE, "data"), prevent_initial_call=True)(download)

    app.callback(Output(ids.EXPORT_META_DOWNLOAD, "data"), Output(ids.EXPORT_STATUS, "children",
                                                                  allow_duplicate=True),
                 Input(ids.EXPORT_META_BUTTON, "n_clicks"),
                 State(ids.RELEASE, "data"), prevent_initial_call=True)(download_meta)

    app.callback(Output(ids.EXPORT_FILE_DOWNLOAD, "data"), Output(ids.EXPORT_STATUS, "children",
                                                                  allow_duplicate=True),
                 Input(ids.EXPORT_PNG_BUTTON, "n_clicks"), Input(ids.EXPORT_SCRIPT_BUTTON, "n_clicks"),
                 State(ids.RELEASE, "data"), prevent_initial_call=True)(download_file)

    app.callback(Output(ids.PUBLISH_STATUS, "children"), Input(ids.PUBLISH_BUTTON, "n_clicks"),
                 State(ids.RELEASE, "data"), State(ids.PUBLISH_TITLE, "value"),
                 prevent_initial_call=True)(publish_current)


def download(_, rinfo):
    """The release shown as GeoJSON (its noisy counts and provenance, nothing of the data), or
    why there is none."""
    return _export_file(rinfo, 0, ".geojson")


def download_meta(_, rinfo):
    """The release shown's metadata (settings, ledger, guarantee) as JSON, or why there is
    none."""
    return _export_file(rinfo, 1, "_metadata.json")


def _export_file(rinfo, part: int, suffix: str):
    """(download, status) for one of `export_files`' two texts of the release shown, named
    release_<mechanism><suffix>; or why there is none."""
    sid = sessions.session_id()
    rel, why_not = _current(rinfo, sid)
    if rel is None:
        return no_update, why_not
    return dict(content=export_files(rel, _account(sid, rinfo))[part],
                filename=f"release_{rel.mechanism}{suffix}"), ""


def download_file(_png, _script, rinfo):
    """The release shown as a map image, or as a script that repeats it on the owner's data."""
    sid = sessions.session_id()
    rel, why_not = _current(rinfo, sid)
    if rel is None:
        return no_update, why_not
    if ctx.triggered_id == ids.EXPORT_PNG_BUTTON:
        return (dcc.send_bytes(map_image.map_png_of(rinfo["key"], rel),
                               f"release_{rel.mechanism}_map.png"), "")
    fp = releases.key_fingerprint(rinfo["key"])
    script = owner_script(rel, state.points(sid, fp), state.sample_of(fp))
    return dict(content=script, filename=f"repeat_{rel.mechanism}.py"), ""


def publish_current(_, rinfo, title):
    """Publish the release shown under its title at /r/<id>."""
    return publish(sessions.session_id(), rinfo, title)


def _account(sid, rinfo):
    """The account of the release's dataset (for the provenance's ε spent so far)."""
    return state.account(sid, releases.key_fingerprint(rinfo["key"]))


def _current(rinfo, sid):
    """(the current release, None), or (None, a message saying why there is nothing to export)."""
    if not rinfo:
        return None, html.Div("No release yet: press Release first.", className="warning")
    try:
        return releases.release(sid, rinfo["key"]), None
    except LookupError as exc:
        return None, html.Div(f"Nothing exported: {exc}.", className="warning")
