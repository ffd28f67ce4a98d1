"""Data already on the server: files in the configured data folder, counted on a grid over the
chosen public box (dp.aggregate, in the background with progress), or counts saved earlier
(dp.CountData.save, a .npz). For data bigger than a browser upload can carry."""
from __future__ import annotations

import glob
import os
from pathlib import Path

from dash import Input, Output, State, dcc, html, no_update

import dp

from . import controls, ids, pages
from .numbers import count_of
from server import background, services, sessions, state, workspace

COUNTS_EXT = ".npz"
DATA_EXT = (".csv", ".txt", ".tsv", ".parquet")


def layout(config: dict) -> html.Details:
    folder = config.get("data_dir")
    if not folder:
        body = [html.Div("Start the app with --data-dir FOLDER to open CSV or Parquet files, "
                         "or saved counts, that are already on the server.", className="hint")]
    elif not config["page"]["owner"]:
        body = [html.Div("Files on the server are opened by the data owner only: the person who "
                         "started the server opens the owner link it printed.", className="hint",
                         id=ids.SERVER_OWNERS_ONLY)]
    else:
        body = [
            html.Div(className="row2", children=[
                dcc.Input(id=ids.SERVER_PATH, placeholder="e.g. trips/*.parquet or city.npz",
                          debounce=False, className="server-path"),
                html.Button("Open", id=ids.SERVER_OPEN, n_clicks=0),
                html.Button("Cancel", id=ids.SERVER_CANCEL, n_clicks=0, hidden=True,
                            title="Stop counting: nothing is loaded, the data shown stays")]),
            html.Div(["A path or a glob inside the server's data folder. CSV and Parquet files "
                      "are counted on a grid of ", dcc.Input(id=ids.SERVER_CELLS, type="number",
                                                            min=16, max=8192, step=1,
                                                            value=dp.counts.DEFAULT_CELLS,
                                                            className="cells-input"),
                      " cells (longer side) over the domain box chosen below, without loading "
                      "the points; a .npz of counts (dp.CountData.save) is read as it is. "
                      "Counts release with the grid, tree and DAWA mechanisms."], className="hint"),
            html.Progress(id=ids.SERVER_PROGRESS, value="0", max="1", hidden=True),
            html.Div(id=ids.SERVER_PROGRESS_TEXT, role="status")]
    return html.Details(open=bool(folder) and config["page"]["owner"], className="server-files", children=[
        html.Summary("Files on the server (too big to upload)"), *body])


def resolve(folder: str | os.PathLike, text: str | None) -> list[str]:
    """The files a path or glob names inside the data folder, or a DataError in words that name
    only what the owner typed (never where the folder is)."""
    text = (text or "").strip()
    if not text:
        raise dp.DataError("type a file name or a glob, e.g. trips/*.parquet")
    root = Path(folder).resolve()
    if Path(text).is_absolute() or ".." in Path(text).parts:
        raise dp.DataError(f"{text!r} is outside the data folder: give a path inside it, e.g. "
                           "trips/*.parquet")
    found = sorted(glob.glob(text, root_dir=root)) if glob.has_magic(text) else [text]
    files = [str(p) for p in (Path(root, f).resolve() for f in found)
             if p.is_file() and p.is_relative_to(root)]
    if not files:
        raise dp.DataError(f"no file in the data folder matches {text!r}")
    if any(glob.has_magic(f) for f in files):
        raise dp.DataError(f"{text!r} names a file whose name holds *, ? or [: rename it")
    ext = {Path(f).suffix.lower() for f in files}
    if not ext <= {COUNTS_EXT, *DATA_EXT} or (COUNTS_EXT in ext and len(files) > 1):
        raise dp.DataError(f"{text!r} names {', '.join(sorted(ext))} files; expected CSV or "
                           f"Parquet files, or one {COUNTS_EXT} of saved counts")
    return files


def count(files: list[str], folder, domain: dp.Domain, cells: int, progress) -> dp.CountData:
    """dp.aggregate for a background job, its progress in thousandths. The files are checked to
    be in the folder again just before they are read, and no message names the folder."""
    root = Path(folder).resolve()
    if not all(Path(f).resolve().is_relative_to(root) for f in files):
        raise dp.DataError("a file moved out of the data folder before it was read")
    try:
        return dp.aggregate(files, domain, cells, progress=lambda f: progress(round(1000 * f), 1000))
    except (dp.DataError, dp.ParameterError, OSError) as exc:
        raise dp.DataError(str(exc).replace(f"{root}{os.sep}", "").replace(str(root), "the data folder")) from None


class Stopped(Exception):
    """A count cancelled (Cancel, or a newer Open) while it ran."""


CANCELLED = "Cancelled: nothing was loaded; the data shown before stays."


def open_files(set_progress, _click, _enter, text, cells, domain_info):
    """The Open button's background job: saved counts are read as they are, data files counted
    on the grid with progress; the counts then become the session's data. Returns (dataset,
    status line, sample picker)."""
    sid = sessions.session_id()
    try:
        if not sessions.is_owner():              # checked here, whatever the page shows
            raise LookupError(state.OWNERS_ONLY)
        folder = pages.settings()["data_dir"]    # an owner's job runs in its app's worker
        files = resolve(folder, text)
        if files[0].lower().endswith(COUNTS_EXT):
            data = dp.load_counts(files[0], name=Path(text).stem,
                                  max_bytes=services.current().store.session_bytes)
        else:
            domain = controls.domain_from_store(domain_info)
            if domain.leaky:
                raise dp.ParameterError("counting files needs a public box: choose a preset or "
                                        "type one (there are no points here to fit a box to)")
            set_progress(("0", f"Counting {text} on the server over “{domain.name}”…"))

            def progress(done, total):        # also where a cancelled count stops (dp.aggregate
                if background.stop_requested():    # lets its progress callback's error through)
                    raise Stopped
                set_progress((f"{done / total:.3f}", f"Counting {text} on the server… {100 * done / total:.0f}%"))
            data = count(files, folder, domain, _cells(cells), progress=progress)
        if background.stop_requested():       # Cancel, or another Open, came meanwhile
            raise Stopped
        info = state.put_server_data(sid, data)
        workspace.use_dataset(sid, info)
    except Stopped:
        return no_update, html.Div(CANCELLED, className="hint"), no_update
    except (dp.DataError, dp.ParameterError, LookupError) as exc:
        return no_update, failed(text, exc), no_update
    return info, loaded(text, data), None


def register_callbacks(app, config: dict):
    folder = config.get("data_dir")
    if not folder:
        return

    app.callback(Output(ids.DATASET, "data", allow_duplicate=True),
                 Output(ids.UPLOAD_STATUS, "children", allow_duplicate=True),
                 Output(ids.SAMPLE_PICK, "value", allow_duplicate=True),
                 Input(ids.SERVER_OPEN, "n_clicks"), Input(ids.SERVER_PATH, "n_submit"),
                 State(ids.SERVER_PATH, "value"), State(ids.SERVER_CELLS, "value"),
                 State(ids.DOMAIN, "data"),
                 background=True, interval=400, cancel=[Input(ids.SERVER_CANCEL, "n_clicks")],
                 progress=[Output(ids.SERVER_PROGRESS, "value"), Output(ids.SERVER_PROGRESS_TEXT, "children")],
                 progress_default=["0", ""],
                 running=[(Output(ids.SERVER_OPEN, "disabled"), True, False),
                          (Output(ids.SERVER_CANCEL, "hidden"), False, True),
                          (Output(ids.SERVER_PATH, "disabled"), True, False),
                          (Output(ids.SERVER_PROGRESS, "hidden"), False, True)],
                 prevent_initial_call=True)(open_files)

    app.callback(Output(ids.DOMAIN_PRESET, "value", allow_duplicate=True),
                 Output({"type": ids.DOMAIN_BOX, "side": "west"}, "value", allow_duplicate=True),
                 Output({"type": ids.DOMAIN_BOX, "side": "south"}, "value", allow_duplicate=True),
                 Output({"type": ids.DOMAIN_BOX, "side": "east"}, "value", allow_duplicate=True),
                 Output({"type": ids.DOMAIN_BOX, "side": "north"}, "value", allow_duplicate=True),
                 Input(ids.COUNTS_BOX, "n_clicks"), State(ids.DATASET, "data"),
                 prevent_initial_call=True)(use_counts_box)


def use_counts_box(clicks, info):
    """The alert's button: release over the box the counts were made on."""
    if not clicks or not info or not info.get("box"):
        return (no_update,) * 5
    return (controls.CUSTOM, *info["box"])


def _cells(value) -> int:
    """The grid's longer side from the cells box, or a ParameterError saying what is expected."""
    if value is None or int(value) != value or not 16 <= value <= 8192:
        raise dp.ParameterError("cells must be a whole number from 16 to 8192 (the grid's longer side)")
    return int(value)


def loaded(text: str, data) -> html.Div:
    """The status line for counts now in use."""
    gy, gx = data.counts.shape
    return html.Div(f"Loaded {text}: {count_of(data.n, 'point')} counted on {gx} x {gy} cells.", className="ok")


def failed(text: str | None, why) -> html.Div:
    """The status line for a file that could not be opened; what was loaded stays."""
    return html.Div(className="error", children=[
        html.B(f"Could not open {text or 'the file'}: "), str(why),
        html.Div("The previously loaded data is still in use.", className="hint")])
