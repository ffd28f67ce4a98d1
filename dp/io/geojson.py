"""Points from GeoJSON: Point and MultiPoint features, with a user id from a property."""
from __future__ import annotations

import json

import numpy as np

from ..errors import DataError
from ..points import LoadReport, user_keys
from .columns import USER_NAMES, _refuse_if_mostly_bad, _validate_coords


def _parse_geojson(text, max_rows):
    """Points (and user ids) from GeoJSON text: the features, their Point/MultiPoint positions,
    then the same coordinate checks as a CSV."""
    features = _point_features(text)
    coords, users, skipped, user_props = _collect_points(features)
    n_read = len(coords) + sum(skipped.values())
    if n_read > max_rows:
        raise DataError(f"the file has {n_read:,} points, more than the limit of {max_rows:,}; "
                        "upload a sample or raise the limit")
    if not coords:
        found = "; ".join(f"{n:,} {why}" for why, n in skipped.items())
        raise DataError(f"no Point or MultiPoint features found ({found}); expected point data. "
                        "Region (Polygon) uploads are handled by the region loader")
    x, y, keep = _coordinate_arrays(coords, skipped)
    keep, hint = _validate_coords(x, y, keep, skipped)
    uid = np.fromiter(users, dtype=object, count=len(users))[keep]   # 1-d even if ids are lists
    uid = uid if (user_keys(uid) != "").any() else None    # no id anywhere: event-level data
    cols = {"geometry": "Point/MultiPoint"}
    if uid is not None:
        cols["user"] = "/".join(k for k in USER_NAMES if k in user_props)
    report = LoadReport("GeoJSON", n_read, int(keep.sum()), cols, skipped)
    _refuse_if_mostly_bad(report, {}, hint)
    return x[keep], y[keep], uid, report


def _point_features(text):
    """The features of a GeoJSON document (a FeatureCollection, a Feature or a bare geometry),
    at least one, or a DataError saying what was expected."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                        f"{exc.msg}); expected a GeoJSON FeatureCollection of Points") from None
    if not isinstance(doc, dict) or "type" not in doc:
        raise DataError("the JSON has no GeoJSON 'type'; expected a FeatureCollection, Feature or "
                        "Point/MultiPoint geometry")
    if doc["type"] == "FeatureCollection":
        features = doc.get("features")
        if not isinstance(features, list):
            raise DataError("the FeatureCollection has no 'features' list; expected "
                            "\"features\": [...] with Point or MultiPoint features")
    elif doc["type"] == "Feature":
        features = [doc]
    else:
        features = [{"type": "Feature", "geometry": doc, "properties": {}}]
    if not features:
        raise DataError("the GeoJSON has no features; expected Point or MultiPoint features")
    return features


def _collect_points(features):
    """(positions [lon, lat, ...] as given, a user id per position, skipped counts by reason,
    the user id property names seen). JSON is parsed object by object; numpy takes it next."""
    coords, users, skipped, user_props = [], [], {}, set()
    for f in features:
        geom = (f or {}).get("geometry") or {}
        gtype = geom.get("type")
        key, uid = _point_user((f or {}).get("properties") or {})
        if gtype == "Point":
            pts = [geom.get("coordinates")]
        elif gtype == "MultiPoint":
            pts = geom.get("coordinates") or []
        else:
            why = f"features that are not Point/MultiPoint ({gtype or 'no geometry'})"
            skipped[why] = skipped.get(why, 0) + 1
            continue
        for p in pts:
            if not isinstance(p, (list, tuple)) or len(p) < 2:
                skipped["points without [lon, lat] coordinates"] = skipped.get(
                    "points without [lon, lat] coordinates", 0) + 1
                continue
            coords.append(p[:2])
            users.append(uid)
            user_props.add(key)
    return coords, users, skipped, user_props


def _point_user(props):
    """(property name, user id) of a feature: the first of USER_NAMES it has, never 'id' (a
    feature's own id); (None, None) without one."""
    key = next((k for k in USER_NAMES if k in props), None)
    uid = props[key] if key else None
    if isinstance(uid, float) and uid.is_integer():
        uid = int(uid)                                     # 7.0 and 7 are the same user
    return key, uid


def _coordinate_arrays(coords, skipped):
    """x, y as float arrays and the mask of numeric positions; non-numeric ones become NaN and
    are counted in `skipped`."""
    try:
        xy = np.array(coords, dtype=np.float64)
    except (TypeError, ValueError):
        xy = np.array([[_safe_float(a), _safe_float(b)] for a, b in coords])
        skipped["points with non-numeric coordinates"] = int(np.isnan(xy).any(axis=1).sum())
    x, y = xy[:, 0], xy[:, 1]
    keep = ~(np.isnan(x) | np.isnan(y)) if "points with non-numeric coordinates" in skipped else \
        np.ones(len(x), bool)
    return x, y, keep


def _safe_float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan
