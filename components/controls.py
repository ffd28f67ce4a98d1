"""Reading shared controls, for every panel: the public domain the data panel publishes in the
`ids.DOMAIN` store, the ε slider, the mechanism's parameter controls and query rectangles
(drawn on the map or typed).

Panels read each other's controls only through these helpers (and the stores they read), never
by importing another panel.
"""
from __future__ import annotations

import numpy as np

import dp

PARAMETER, MISSING_DATA = "parameter", "missing data"   # what went wrong in an error store
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


def epsilon_from_slider(v) -> float:
    """Slider position (log10 ε) to ε, rounded to 3 significant digits for readable ledgers."""
    eps = 10 ** float(v)
    return float(f"{eps:.3g}")


def read_params(spec: dp.MechanismSpec, values: list, id_list: list) -> dict:
    """Parameter values from the pattern-matched controls, converted back to Python values."""
    out = {}
    for pid, v in zip(id_list, values):
        p = next((q for q in spec.params if q.name == pid["name"]), None)
        if p is None:
            continue
        out[p.name] = bool(v) if p.kind is bool else v
    return out


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
