"""Reading shared controls, for every panel: the public domain the data panel publishes in the
`ids.DOMAIN` store, the total ε, the mechanisms offered for the loaded data, the mechanism's
parameter controls and query rectangles (drawn on the map or typed).

Panels read each other's controls only through these helpers (and the stores they read), never
by importing another panel.
"""
from __future__ import annotations

import numpy as np
from dash import Input, Output

import dp

PARAMETER, MISSING_DATA = "parameter", "missing data"   # what went wrong in an error store
# the domain picker's boxes: presets plus the built-in samples' boxes (all chosen without the
# data), and its two other choices
DOMAINS = {**dp.PRESETS, **{s.domain.name: s.domain for s in dp.samples.REGION_SAMPLES.values()}}
CUSTOM, FIT = "__custom__", "__fit__"
EXACT_STAGE = "exact"   # value of the Euler stage control for the owner-only exact histogram


def domain_store(domain: dp.Domain) -> dict:
    """What the data panel writes to the `ids.DOMAIN` store for a valid domain."""
    return {"domain": domain.to_dict()}


def error_store(message: str, reason: str = PARAMETER) -> dict:
    """What the data panel writes when the chosen domain is not valid: the message, and the
    reason (PARAMETER or MISSING_DATA) that says which error readers raise."""
    return {"error": message, "reason": reason}


def domain_from_store(store: dict | None) -> dp.Domain:
    """The public domain in the `ids.DOMAIN` store; raises what choosing it raised: ParameterError
    for an invalid box, LookupError when 'fit to data' found no data on the server."""
    if not store:
        raise dp.ParameterError("choose a domain (the public bounding box) first")
    if "error" in store:
        error = LookupError if store.get("reason") == MISSING_DATA else dp.ParameterError
        raise error(store["error"])
    return dp.Domain.from_dict(store["domain"])


MOSTLY_OUTSIDE = 0.5     # below this share of the data inside the domain, nothing is released
EPS_MIN, EPS_MAX = 0.01, 10.0     # the ε control's range (the slider is log10 of it)


def epsilon_from_slider(v) -> float:
    """Slider position (log10 ε) to ε rounded to 2 significant digits, so that a slider set
    near 0.5 or 3 gives exactly 0.5 or 3 (the typed box takes any other value)."""
    return float(f"{10 ** float(v):.2g}")


def epsilon_value(x) -> float:
    """The total ε typed in the ε box, checked: a number from EPS_MIN to EPS_MAX."""
    try:
        eps = float(x)
    except (TypeError, ValueError):
        eps = float("nan")
    if not EPS_MIN <= eps <= EPS_MAX:
        raise dp.ParameterError(f"type a total ε from {EPS_MIN:g} to {EPS_MAX:g} "
                                "(for example 0.5); smaller is more private")
    return eps


def split_from_weights(weights) -> list[float]:
    """The budget split sliders' weights as fractions of ε."""
    w = [max(float(x or 0), 0.0) for x in weights]
    total = sum(w)
    if total <= 0:
        raise dp.ParameterError("every budget part needs a positive share")
    return [x / total for x in w]


def read_split(spec: dp.MechanismSpec, weights) -> list[float]:
    """The split from the sliders, or the mechanism's default while they show another's parts."""
    if len(weights) != len(spec.budget_parts):
        return list(spec.default_split)
    return split_from_weights(weights)


def read_params(spec: dp.MechanismSpec, values: list, id_list: list) -> dict:
    """Parameter values from the pattern-matched controls, converted back to Python values."""
    out = {}
    for pid, v in zip(id_list, values):
        p = next((q for q in spec.params if q.name == pid["name"]), None)
        if p is None:
            continue
        out[p.name] = bool(v) if p.kind is bool else v
    return out


def mechanism_options(kind: str, counts: bool = False) -> list[dict]:
    """Private mechanisms that apply to this kind of data ('points' or 'regions'), the
    recommended one marked; with `counts` (points counted on a grid) those that need each
    point are shown but disabled."""
    best = dp.recommend(kind).name
    return [{"label": s.label + (" ★ recommended" if k == best else "")
             + (" (needs the points, not counts)" if counts and s.needs_points else ""),
             "value": k, "disabled": counts and s.needs_points}
            for k, s in dp.mechanisms(private_only=True).items() if s.data_kind == kind]


def usable(options: list[dict]) -> list[str]:
    """The values of the options that can be picked."""
    return [o["value"] for o in options if not o.get("disabled")]


def share_inside(data, domain: dp.Domain) -> float:
    """The share of the data a release on `domain` counts (owner only: it reads the data)."""
    return data.count_in(domain) / max(data.n, 1)


def next_cost(eps_v, name, pvals, pids, domain_info: dict | None) -> float | None:
    """What a release with these mechanism-panel settings would charge the dataset's account
    (None if they are invalid), for the ledger's forecast and the guided demo's warnings;
    `domain_info` is the `ids.DOMAIN` store."""
    spec = dp.mechanisms().get(name)
    if eps_v is None or spec is None:
        return None
    try:
        params = read_params(spec, pvals, pids)
        domain = domain_from_store(domain_info)
        return dp.accountant.release_cost(name, domain, epsilon_value(eps_v), params)
    except (dp.ParameterError, LookupError, TypeError):
        return None


def rects_from_geojson(geojson: dict | None) -> list[dp.Rect]:
    """Rectangles drawn with the map's EditControl (their polygon's bounding box)."""
    out = []
    for f in (geojson or {}).get("features", []):
        geom = f.get("geometry") or {}
        if geom.get("type") != "Polygon":
            continue
        ring = np.asarray(geom["coordinates"][0], dtype=float)
        out.append(dp.Rect(ring[:, 0].min(), ring[:, 1].min(), ring[:, 0].max(), ring[:, 1].max()))
    return out


def labelled_rects(geojson: dict | None, extra: list | None) -> list[tuple[str, dp.Rect]]:
    """The query rectangles with their table labels: drawn ones (the EditControl's geojson) as
    Q1, Q2, ..., typed and random ones (the `ids.QUERY_EXTRA` store) as R1, R2, ..."""
    labelled = [(f"Q{i + 1}", r) for i, r in enumerate(rects_from_geojson(geojson))]
    return labelled + [(f"R{i + 1}", dp.Rect(*r)) for i, r in enumerate(extra or [])]


def parse_typed(text: str) -> dp.Rect:
    """A rectangle typed as 'west, south, east, north'."""
    try:
        vals = [float(v) for v in text.replace(";", ",").split(",")]
    except ValueError:
        vals = []
    if len(vals) != 4:
        raise dp.ParameterError(f"expected four numbers 'west, south, east, north', got {text!r}")
    return dp.Rect(*vals)


def fit_to_domain(rect: dp.Rect, domain: dp.Domain) -> tuple[dp.Rect, bool]:
    """(the part of a query rectangle inside the public domain, whether it was clipped); one
    without area there is refused: its answer would be a meaningless 0."""
    if rect.area <= 0:
        raise dp.ParameterError("the rectangle has no area: west must be below east and south "
                                "below north")
    inside = rect.clip(domain)
    if inside is None:
        raise dp.ParameterError(
            f"the rectangle lies wholly outside the public domain ({domain.west:g}, "
            f"{domain.south:g}, {domain.east:g}, {domain.north:g}), where nothing is counted")
    return inside, inside != rect


def request_ids(app, button: str, store: str) -> None:
    """Give each click of `button` a fresh random request id in `store` (made in the browser),
    so the server can tell one click from a callback that fired twice: a spend keyed by it is
    done once (`server.workspace.once`)."""
    app.clientside_callback(
        """function(n) {
            if (!n) { return window.dash_clientside.no_update; }
            var b = crypto.getRandomValues(new Uint8Array(16));   // works over plain HTTP too
            var id = Array.from(b, function (x) { return (x + 256).toString(16).slice(1); }).join("");
            return {id: id, n: n};
        }""", Output(store, "data"), Input(button, "n_clicks"), prevent_initial_call=True)
