"""Data panel: built-in samples, CSV/GeoJSON upload, and the public domain."""
from __future__ import annotations

import base64
import binascii
import warnings

import numpy as np

from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

import dp
from dp.samples import REGION_SAMPLES

from . import controls, ids, pages, server_files
from server import heavy, services, sessions, state, workspace
from .help import help_box
from .numbers import count_of

SIDES = ("west", "south", "east", "north")
DOMAINS, CUSTOM, FIT = controls.DOMAINS, controls.CUSTOM, controls.FIT


def layout(config: dict) -> html.Div:
    """The panel as the workspace left it (`config["page"]`): its dataset, domain and box."""
    limit_mb = config["max_upload_mb"]
    page = config["page"]
    picked = state.sample_name(page["dataset"])
    domain = page["domain"] or {"preset": state.sample(picked or state.DEFAULT_SAMPLE)[1].name,
                                "box": [None] * len(SIDES)}
    return html.Div(className="card", children=[
        help_box("data"),
        html.Label("Built-in sample", htmlFor=ids.SAMPLE_PICK),
        dcc.Dropdown(id=ids.SAMPLE_PICK, clearable=False,
                     value=picked,
                     placeholder="Your upload is loaded: pick a sample to go back to it",
                     options=[{"label": f"Points: {s.label}", "value": k} for k, s in dp.SAMPLES.items()]
                     + [{"label": f"Regions: {s.label}", "value": k} for k, s in REGION_SAMPLES.items()]),
        html.Label("Upload contains", htmlFor=ids.UPLOAD_KIND),
        dcc.RadioItems(id=ids.UPLOAD_KIND, value="points", inline=True, options=[
            {"label": " points (one record each)", "value": "points"},
            {"label": " regions (one per user)", "value": "regions"}]),
        dcc.Upload(id=ids.UPLOAD, multiple=False, className="upload", disabled=not page["uploads"],
                   children=html.Div([
                       "Drop a CSV or GeoJSON here, or ", html.A("choose a file"),
                       html.Div(f"points: longitude/latitude columns or Point features; regions: one "
                                f"Polygon per user, or points with a user id column; up to {limit_mb:g} MB",
                                className="hint")] if page["uploads"] else [
                       "Uploads on this server are for its data owner.",
                       html.Div("Explore the samples, or the published releases in the gallery.",
                                className="hint")])),
        html.Details([
            html.Summary("Column names (optional)"),
            html.Div(className="row2", children=[
                dcc.Input(id=ids.LON_COL, placeholder="longitude column", debounce=True),
                dcc.Input(id=ids.LAT_COL, placeholder="latitude column", debounce=True)]),
            dcc.Input(id=ids.USER_COL, placeholder="user id column", debounce=True),
            html.Div("Leave empty to detect lon/lng/longitude/x, lat/latitude/y and "
                     "user_id/userid/user/uid.", className="hint"),
        ]),
        server_files.layout(config),
        html.Div(id=ids.UPLOAD_STATUS, role="status", children=gone_note(page["gone"])),
        html.Div(id=ids.DATA_SUMMARY, className="summary"),
        html.Div(id=ids.PRIVACY_LEVEL, className="guarantee"),
        html.Div(id=ids.POINTS_PER_USER_BOX, hidden=True, className="param", children=[
            html.Label("Points kept per person (k)", htmlFor=ids.POINTS_PER_USER),
            dcc.Input(id=ids.POINTS_PER_USER, type="number", min=1, max=1000, step=1,
                      value=(page["release"] or {}).get("k") or dp.DEFAULT_POINTS_PER_USER,
                      debounce=True),
            html.Div("Each person keeps at most k of their points, chosen at random; the noise "
                     "grows in proportion to k. Small k: less noise, more of each busy person's "
                     "points left out.", className="hint")]),
        html.Label("Domain (public bounding box)", htmlFor=ids.DOMAIN_PRESET),
        dcc.Dropdown(id=ids.DOMAIN_PRESET, clearable=False, value=domain["preset"],
                     options=domain_options()),
        html.Div(className="box-inputs", children=[
            dcc.Input(id={"type": ids.DOMAIN_BOX, "side": s}, type="number", placeholder=s,
                      debounce=True, step="any", value=v) for s, v in zip(SIDES, domain["box"])]),
        html.Div(id=ids.DOMAIN_WARNING, role="alert"),
    ])


def gone_note(name: str | None):
    """Why the page opened on the sample: the workspace's upload is no longer on the server."""
    if name is None:
        return None
    return html.Div(f"Your upload {name} is no longer on the server (uploads are kept for "
                    f"{services.TIMEOUT // 3600} hours after their last use, and not across a restart "
                    "of the server without its store folder); the built-in sample is loaded instead. "
                    "Upload it again to go on: its budget account is kept.", className="warning")


def domain_options() -> list[dict]:
    """The domain picker's choices: cities, regions, countries, the samples' boxes, a typed
    box and fit-to-data."""
    groups = [("City", dp.presets.CITIES), ("Region", dp.presets.REGIONS),
              ("Country", dp.presets.COUNTRIES)]
    opts = [{"label": f"{group}: {name}", "value": name} for group, boxes in groups for name in boxes]
    opts += [{"label": f"Sample box: {name}", "value": name} for name in DOMAINS if name not in dp.PRESETS]
    return opts + [{"label": "Custom box…", "value": CUSTOM},
                   {"label": "Fit to data (leaks min/max!)", "value": FIT}]


def outside_alert(data, domain: dp.Domain, inside: float) -> html.Div:
    """The owner-only alert when most of the data lies outside the declared box, with the ways
    out: a preset that holds the points, a typed box, or fitting the box to the data."""
    what = "points" if data.kind == "points" else "regions"
    choices = [html.Button(f"Use {name} ({100 * share:.0f}% inside)", n_clicks=0,
                           id={"type": ids.DOMAIN_SUGGEST, "preset": name}, className="suggest")
               for name, share in (dp.presets_containing(data.x, data.y)[:3] if data.raw_points else [])]
    choices += [html.Button("Type a box", n_clicks=0, className="suggest",
                            id={"type": ids.DOMAIN_SUGGEST, "preset": CUSTOM}),
                html.Button("Fit to data (leaks its min/max)", n_clicks=0, className="suggest",
                            id={"type": ids.DOMAIN_SUGGEST, "preset": FIT})]
    return html.Div(className="error domain-alert", role="alert", children=[
        html.B(f"Only {100 * inside:.0f}% of your {what} lie inside the domain box "
               f"“{domain.name}”: nothing is released on it. "),
        "The domain is your public declaration of where the data may lie; choose one that "
        "contains your data (owner only: these suggestions read your data):",
        html.Div(choices, className="suggestions")])


def counts_box_alert(box: list) -> html.Div:
    """The alert when counts are loaded and another box is chosen: they release only over the
    box they were counted on."""
    w, s, e, n = box
    return html.Div(className="error domain-alert", role="alert", children=[
        html.B("These counts were made over another box: nothing is released on this one. "),
        f"They release over the box they were counted on (west {w:g}, south {s:g}, east {e:g}, "
        f"north {n:g}).",
        html.Div(html.Button("Use the counts' box", id=ids.COUNTS_BOX, n_clicks=0,
                             className="suggest"), className="suggestions")])


B64_PIECE = 1 << 20      # base64 characters decoded at a time (a multiple of 4)


def decode_upload(contents: str, filename: str | None, max_bytes: int) -> bytearray:
    """Bytes of a dcc.Upload payload (a `data:...;base64,...` URL), refusing oversize files
    before decoding them. The file's bytes are the only copy made: see `_b64decode`."""
    start = contents.find(",") + 1 if isinstance(contents, str) else 0
    if not start:
        raise dp.DataError("the upload arrived incomplete; try again")
    if (len(contents) - start) * 3 / 4 > max_bytes:
        size = (len(contents) - start) * 3 / 4 / 1e6
        raise dp.DataError(f"{filename or 'the file'} is {size:.1f} MB, over the {max_bytes / 1e6:g} MB "
                           "upload limit; upload a sample of the rows or start the app with a "
                           "larger --max-upload-mb")
    try:
        return _b64decode(contents, start)
    except ValueError:           # binascii.Error, or characters that are not ASCII
        raise dp.DataError("the upload could not be decoded; try again") from None


def _b64decode(text: str, start: int) -> bytearray:
    """base64 `text[start:]` decoded into one preallocated buffer, B64_PIECE characters at a
    time. Why: slicing off the data URL's prefix and `base64.b64decode` (which encodes a str to
    bytes first) each copied the whole payload (2 x 39 MB for a 28 MB file) and held the
    interpreter lock for the whole decode; pieces copy 1 MB at a time and let other request
    threads run between them. Text that is not plain base64 in pieces of whole quads (line
    breaks, stray characters: a piece decodes short) is decoded whole, as before."""
    n = len(text) - start
    if n % 4 or not text.isascii():
        return bytearray(base64.b64decode(text[start:]))
    out = bytearray(n // 4 * 3 - (2 if text.endswith("==") else text.endswith("=")))
    view, at = memoryview(out), 0
    try:
        for i in range(start, len(text), B64_PIECE):
            piece = binascii.a2b_base64(text[i:i + B64_PIECE])
            if len(piece) != min(B64_PIECE // 4 * 3, len(out) - at):
                raise binascii.Error("not whole quads")
            view[at:at + len(piece)] = piece
            at += len(piece)
    except binascii.Error:
        view.release()
        return bytearray(base64.b64decode(text[start:]))
    return out


def parse_upload(contents: str, filename: str | None, kind: str | None, lon, lat, user,
                 max_bytes: int, max_counts_bytes: int | None = None):
    """The data of a dcc.Upload payload: decoded once (`decode_upload`), then read as saved
    counts or Parquet points (both refused before unpacking when they unpack to more than
    `max_counts_bytes`, what the store keeps for one session), regions or points."""
    raw = decode_upload(contents, filename, max_bytes)
    if (filename or "").lower().endswith(server_files.COUNTS_EXT):
        return dp.load_counts(raw, name=filename.rsplit(".", 1)[0], max_bytes=max_counts_bytes)
    if kind == "regions":
        return dp.load_regions(raw, filename=filename, lon=lon or None, lat=lat or None, user=user or None)
    return dp.load_points(raw, filename=filename, lon=lon or None, lat=lat or None, user=user or None,
                         max_bytes=max_counts_bytes)


def domain_from_controls(preset: str, box: list, sid: str | None, info: dict | None) -> dp.Domain:
    """The public domain chosen in the panel; 'fit to data' warns and marks the domain leaky."""
    if preset == CUSTOM:
        if any(v is None for v in box):
            raise dp.ParameterError("enter all four sides of the custom box (west, south, east, north)")
        return dp.Domain(*(float(v) for v in box), name="custom box")
    if preset == FIT:
        data = state.points(sid, info["fingerprint"])
        if info.get("counts"):
            raise dp.ParameterError("counts on a grid have no points to fit a box to: release "
                                    "them over the box they were counted on")
        if data.kind == "points":
            xs, ys = data.x, data.y
        else:   # regions: the corners of their bounding box
            w, s_, e, n = data.bounds
            xs, ys = [w, e], [s_, n]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dp.PrivacyLeakWarning)
            return dp.fit_to_data(xs, ys)
    return DOMAINS[preset]


def shown_sides(preset: str, box: list) -> list:
    """The four sides the box inputs show: a listed box's own, the typed ones for a custom box,
    none for a box fitted to the data."""
    if preset in DOMAINS:
        return [float(v) for v in DOMAINS[preset].bounds]
    return list(box) if preset == CUSTOM else [None] * len(SIDES)


def domain_store(preset: str, box: list, sid: str | None, info: dict | None) -> dict:
    """The `ids.DOMAIN` store for the panel's choice: the domain, or why there is none (the
    other panels read it with `controls.domain_from_store`, which raises the same error)."""
    try:
        return controls.domain_store(domain_from_controls(preset, box, sid, info))
    except dp.ParameterError as exc:
        return controls.error_store(str(exc), controls.PARAMETER)
    except LookupError as exc:
        return controls.error_store(str(exc), controls.MISSING_DATA)
    except TypeError:                       # 'fit to data' before any data was loaded
        return controls.error_store("load data before fitting the box to it", controls.MISSING_DATA)


def points_left_out(data, k: int) -> int:
    """How many points a bound of k per user leaves out, those without a user id included
    (owner only: it reads the data)."""
    missing = data.users.missing()               # no user id: always left out
    counts = np.bincount(data.users.codes[~missing])
    return int(missing.sum() + np.maximum(counts - k, 0).sum())


def level_text(k: int | None, left_out: int = 0, n: int = 0) -> list:
    """Whom a release protects: a whole person (user-level, at most k points) or one point."""
    if k is None:
        return [html.B("Event-level: one point. "),
                "This data has no user id column, so each point is protected as if it belonged "
                "to a different person; someone with many points is protected less. Add a user "
                "id column (user_id, userid, user or uid) to protect people instead."]
    return [html.B(f"User-level, at most {k} points per user. "),
            f"Each person keeps at most {k} of their points (chosen at random by a public rule) "
            "and ε protects everything one person contributed.",
            html.Div(f"Owner only: k = {k} leaves out {left_out:,} of {n:,} points.", className="hint")]


def summary_view(info: dict | None):
    if not info:
        return ""
    return html.Div([               # the summary says the rows dropped and why, once
        html.Div([html.B(info["name"]), f" — {count_of(info['n'], info.get('kind', 'points')[:-1])}"]),
        html.Div(info["summary"], className="hint"),
        html.Div([html.B("Check before releasing: "), html.Ul([html.Li(w) for w in info["warnings"]])],
                 className="warning load-warnings") if info.get("warnings") else None,
    ])


def upload_limit() -> int:
    """The largest upload the app serving this request takes, in bytes (`--max-upload-mb`)."""
    return int(pages.settings()["max_upload_mb"] * 1e6)


def register_callbacks(app, config: dict):
    # The page opens on the workspace's dataset (the layout holds it): only a pick or an upload
    # loads another, and it becomes the workspace's. The upload's contents are emptied after
    # each file, so choosing the same file again loads it again.
    app.callback(Output(ids.DATASET, "data"), Output(ids.UPLOAD_STATUS, "children"),
                 Output(ids.DOMAIN_PRESET, "value"), Output(ids.SAMPLE_PICK, "value"),
                 Output(ids.UPLOAD, "contents"),
                 Input(ids.UPLOAD, "contents"), Input(ids.SAMPLE_PICK, "value"),
                 State(ids.UPLOAD, "filename"), State(ids.LON_COL, "value"),
                 State(ids.LAT_COL, "value"), State(ids.USER_COL, "value"), State(ids.UPLOAD_KIND, "value"),
                 State(ids.DATASET, "data"), prevent_initial_call=True)(load)

    app.callback(Output(ids.DOMAIN_PRESET, "value", allow_duplicate=True),
                 Input({"type": ids.DOMAIN_SUGGEST, "preset": ALL}, "n_clicks"),
                 prevent_initial_call=True)(take_suggestion)

    app.callback(Output(ids.DATA_SUMMARY, "children"), Input(ids.DATASET, "data"))(show_summary)

    app.callback(Output(ids.PRIVACY_LEVEL, "children"), Output(ids.POINTS_PER_USER_BOX, "hidden"),
                 Input(ids.DATASET, "data"), Input(ids.POINTS_PER_USER, "value"))(show_level)

    app.callback(Output(ids.DOMAIN, "data"), Output(ids.DOMAIN_WARNING, "children"),
                 Output({"type": ids.DOMAIN_BOX, "side": ALL}, "disabled"),
                 Output({"type": ids.DOMAIN_BOX, "side": ALL}, "value"),
                 Input(ids.DOMAIN_PRESET, "value"), Input({"type": ids.DOMAIN_BOX, "side": ALL}, "value"),
                 Input(ids.DATASET, "data"))(check_domain)


def load(contents, sample_name, filename, lon, lat, user, kind, current):
    """A sample picked or a file uploaded: load it (an upload parsed in the role's heavy lane,
    within the upload limit) and make it the workspace's data; what went wrong is said and the
    data loaded before stays."""
    sid = sessions.session_id()
    if ctx.triggered_id == ids.UPLOAD:
        if not contents:
            return (no_update,) * 5
        try:
            if not sessions.public_uploads():       # before reading a byte of it
                raise LookupError(state.UPLOADS_OFF)
            data = services.current().heavy.run(parse_upload, contents, filename, kind, lon, lat, user, upload_limit(),
                             services.current().store.session_bytes, idempotent=True,
                             lane=heavy.lane_of(sessions.is_owner()))   # not beside cheap answers' threads
            info = state.put_upload(sid, data)
        except (dp.DataError, dp.ParameterError, LookupError) as exc:
            msg = html.Div(className="error", children=[
                html.B(f"Could not load {filename or 'the file'}: "), str(exc),
                html.Div("The previously loaded data is still in use.", className="hint")])
            return no_update, msg, no_update, no_update, None
        workspace.use_dataset(sid, info)
        what = count_of(info["n"], "region" if info["kind"] == "regions" else "point")
        ok = html.Div(f"Loaded {filename}: {what}"
                      f"{' counted on a grid' if info['counts'] else ''}.", className="ok")
        return info, ok, no_update, None, None     # the sample picker empties: any pick goes back
    if sample_name is None or state.sample_name(current or {}) == sample_name:
        return (no_update,) * 5
    info = state.use_sample(sid, sample_name)
    workspace.use_dataset(sid, info)
    return info, "", state.sample(sample_name)[1].name, no_update, no_update


def take_suggestion(clicks):
    """A click on one of the alert's choices picks that domain."""
    if not any(clicks):
        return no_update
    return ctx.triggered_id["preset"]


def show_summary(info):
    """The loaded data's summary under the picker."""
    return summary_view(info)


def show_level(info, k):
    """The unit of privacy of the loaded data (a record or a whole person, and at how many
    points per user), and whether the points-per-user box is off."""
    if not info:
        return "", True
    if info.get("kind") == "regions":
        return [html.B("User-level: "), "one region per person, so ε protects a whole person."], True
    if info.get("counts") and info.get("per_user"):
        k = info["per_user"]
        return [html.B(f"User-level, at most {k} points per user. "),
                f"Each person's points were bounded to {k} when the counts were made (by "
                "this page when it counted files; a counts file declares it, which cannot be "
                "checked here), and ε protects everything one person contributed."], True
    if not info.get("users"):
        return level_text(None), True
    try:
        k = dp.contributions.check_points_per_user(k)
        data = state.points(sessions.session_id(), info["fingerprint"])
    except (dp.ParameterError, LookupError) as exc:
        return html.Div(str(exc), className="error"), False
    if data.users is None:                   # the data decides, not the page's summary of it
        return level_text(None), True
    return level_text(k, points_left_out(data, k), data.n), False


def check_domain(preset, box, info):
    """Publish the chosen domain to the `ids.DOMAIN` store and warn about it (owner only);
    the workspace keeps the choice for the next page load. The four sides show the listed
    box chosen (a custom box's numbers typed before would read as the box in use) and start
    a custom box from it; fitted to the data, they are left empty."""
    sid = sessions.session_id()
    box = shown_sides(preset, box)
    workspace.use_domain(sid, preset, box)
    disabled = [preset != CUSTOM] * len(SIDES)
    store = domain_store(preset, box, sid, info)
    try:
        domain = controls.domain_from_store(store)
        data = state.points(sid, info["fingerprint"])
    except (dp.ParameterError, LookupError) as exc:
        return store, html.Div(str(exc), className="error"), disabled, box
    notes = []
    if domain.leaky:
        notes.append(html.Div("Fitting the box to the data reveals the extreme coordinates of "
                              "your points: the release is no longer differentially private "
                              "and the ledger says so.", className="warning"))
    if info.get("counts") and list(domain.bounds) != info["box"]:
        notes.insert(0, counts_box_alert(info["box"]))
        return store, notes, disabled, box
    counted = data.count_in(domain)          # one pass over the data for both notes
    inside = counted / max(data.n, 1)
    if inside < controls.MOSTLY_OUTSIDE:
        notes.insert(0, outside_alert(data, domain, inside))
    outside = data.n - counted
    if outside:
        notes.append(html.Div(f"Owner only: {outside:,} of {data.n:,} points lie outside this "
                              "box and are not counted.", className="warning"))
    return store, notes, disabled, box
