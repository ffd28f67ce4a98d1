"""Regions from files (`load_regions`): GeoJSON polygons, one per user, checked, repaired and
made convex, or CSV points with a user id column, one region built per user (spec 004)."""
from __future__ import annotations

import json

import numpy as np
import shapely

from ..errors import DataError
from ..regions import (DEFAULT_BOUND_KM, DEFAULT_KNN, KDE_MAX, RegionData,
                       RegionLoadReport, _regions_from_pointdata, clip_to_bound, diameters_km)
from . import DEFAULT_MAX_ROWS, MAX_DROP_FRACTION, USER_NAMES, add_load_warnings, load_points
from .source import _decode, _detect_format, _read_source

ID_NAMES = USER_NAMES + ("id",)
CHANGED_HULL = "non-convex polygons replaced by their convex hull"
CHANGED_MULTI = "multi-part regions replaced by their convex hull"
CHANGED_REPAIRED = "invalid polygons repaired (made valid, then convex hull)"
CHANGED_BOUND = "regions wider than B clipped to a disc of diameter B about their centroid"
CHANGED_MERGED = "users with several features merged into one convex hull"
_EMPTY_MSG = ("the file is empty; expected a GeoJSON FeatureCollection with one Polygon or "
              "MultiPolygon feature per user, or a CSV of points with a header row such as "
              "'user_id,lon,lat'")


def load_regions(source, *, filename: str | None = None, fmt: str | None = None,
                 user=None, lon=None, lat=None, max_rows: int = DEFAULT_MAX_ROWS,
                 bound_km: float | None = None, knn: int = DEFAULT_KNN, kde_max: int = KDE_MAX,
                 merge: bool = False, name: str | None = None) -> RegionData:
    """Load one region per user from a GeoJSON or CSV path or bytes.

    GeoJSON: one Polygon or MultiPolygon feature per user; the user id is the property `user`
    names, else the first of user_id/userid/user/uid/id, else the feature's id, else each
    feature is its own user. Non-convex and multi-part regions become their convex hull,
    invalid ones are repaired (or rejected when nothing is left), and with `bound_km` regions
    wider than B are clipped to a disc of diameter B about their centroid; `data.report` counts
    each change. A user with several features is an error unless merge=True (their convex
    hull). Point features with user ids are treated like a CSV of points.

    CSV: points with a user id column (`user`, else user_id/userid/user/uid); columns as in
    dp.load_points. Each user's region comes from spec 004 section 10.2 with B = bound_km
    (default 2 km) and `knn` nearest points.
    """
    raw, filename = _read_source(source, filename)
    if not raw or raw.isspace():
        raise DataError(_EMPTY_MSG)
    text, encoding_warning = _decode(raw)
    if not text or text.isspace():
        raise DataError(_EMPTY_MSG)
    kind = _detect_format(text, filename, fmt)
    label = name or filename or "upload"
    if kind == "csv":
        pts = load_points(raw, lon=lon, lat=lat, user=user, fmt="csv", filename=filename,
                          max_rows=max_rows, name=label)
        if pts.users is None:
            raise DataError("the CSV has no user id column (looked for " + "/".join(USER_NAMES) +
                            "); one region is built per user, so name the column with user=...")
        return _regions_from_pointdata(pts, bound_km or DEFAULT_BOUND_KM, knn, kde_max, label,
                                       pts.report)
    data = _load_geojson_regions(raw, text, user, max_rows, bound_km, knn, kde_max, merge, label)
    add_load_warnings(data.report, data.n, "region", encoding_warning)
    return data


def _feature_list(doc):
    if not isinstance(doc, dict) or "type" not in doc:
        raise DataError("the JSON has no GeoJSON 'type'; expected a FeatureCollection of Polygon "
                        "or MultiPolygon features (one per user)")
    t = doc["type"]
    if t == "FeatureCollection":
        feats = doc.get("features")
        if not isinstance(feats, list):
            raise DataError("the FeatureCollection has no 'features' list; expected "
                            "\"features\": [...] with one Polygon or MultiPolygon per user")
        return feats
    if t == "Feature":
        return [doc]
    if t == "GeometryCollection":
        return [{"type": "Feature", "geometry": g, "properties": {}}
                for g in (doc.get("geometries") or [])]
    return [{"type": "Feature", "geometry": doc, "properties": {}}]


def _load_geojson_regions(raw, text, user_prop, max_rows, bound_km, knn, kde_max, merge, label):
    """GeoJSON regions: parse, keep the polygons, drop unusable ones, repair, take convex hulls,
    one region per user, clip to B, report. Point features go to the CSV-like point path."""
    features = _geojson_features(text, max_rows)
    polys, ids, n_points, skipped = _sort_features(features, user_prop)
    if not polys and n_points:
        return _regions_from_geojson_points(raw, max_rows, bound_km, knn, kde_max, label)
    if n_points:
        skipped["features that are not Polygon/MultiPolygon (Point)"] = n_points
    n_read = len(features)
    if not polys:
        found = "; ".join(f"{n:,} {why}" for why, n in skipped.items())
        raise DataError(f"no Polygon or MultiPolygon features found ({found}); expected one "
                        "region per user as a Polygon or MultiPolygon feature")
    geoms = shapely.force_2d(shapely.from_geojson(np.array(polys, dtype=object),
                                                  on_invalid="ignore"))
    dropped = dict(skipped)
    keep = _usable_polygons(geoms, n_read, dropped)
    geoms, ids = geoms[keep], np.array(ids, dtype=object)[keep]
    changed = {CHANGED_REPAIRED: 0, CHANGED_MULTI: 0, CHANGED_HULL: 0}
    geoms, ids, invalid = _repair_invalid(geoms, ids, n_read, dropped, changed)
    geoms = _convex_hulls(geoms, invalid, changed)
    geoms, ids = _one_region_per_user(geoms, ids, merge, changed)
    geoms, notes = _bound_regions(geoms, bound_km, changed)
    report = RegionLoadReport("GeoJSON", n_read, int(keep.sum()), {"geometry": "Polygon/MultiPolygon"},
                              dropped, notes=notes, unit="features", regions=len(geoms),
                              changed=changed)
    return RegionData(geoms, ids, report, name=label)


def _geojson_features(text, max_rows):
    """The document's features (at least one, at most max_rows), or a DataError saying why not."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                        f"{exc.msg}); expected a GeoJSON FeatureCollection of Polygons") from None
    features = _feature_list(doc)
    if not features:
        raise DataError("the GeoJSON has no features; expected one Polygon or MultiPolygon "
                        "feature per user")
    if len(features) > max_rows:
        raise DataError(f"the file has {len(features):,} features, more than the limit of "
                        f"{max_rows:,}; upload a sample or raise the limit")
    return features


def _sort_features(features, user_prop):
    """(polygon geometries as JSON text, their user ids, the number of Point features, skipped
    counts by reason). JSON objects one by one; coordinates go to shapely later."""
    polys, ids, n_points, skipped = [], [], 0, {}
    found_prop = user_prop is None
    for i, f in enumerate(features):
        if not isinstance(f, dict):
            _count(skipped, "entries that are not GeoJSON features")
            continue
        geom = f.get("geometry") if f.get("type") == "Feature" else f
        gtype = geom.get("type") if isinstance(geom, dict) else None
        props = f.get("properties") if isinstance(f.get("properties"), dict) else {}
        uid = _feature_user(f, props, user_prop)
        found_prop |= user_prop is not None and user_prop in props
        if gtype in ("Polygon", "MultiPolygon"):
            polys.append(json.dumps(geom))
            ids.append(f"feature {i}" if uid is None else str(uid))
        elif gtype in ("Point", "MultiPoint"):
            n_points += 1
        else:
            _count(skipped,
                   f"features that are not Polygon/MultiPolygon ({gtype or 'no geometry'})")
    if not found_prop:
        raise DataError(f"no feature has a property named {user_prop!r} for the user id")
    return polys, ids, n_points, skipped


def _feature_user(feature, props, user_prop):
    """The user id: the `user_prop` property when named, else the first of ID_NAMES, else the
    feature's id (None when there is none)."""
    if user_prop is not None:
        return props.get(user_prop)
    return next((props[k] for k in ID_NAMES if props.get(k) is not None), feature.get("id"))


def _count(counts: dict, why: str, n: int = 1):
    counts[why] = counts.get(why, 0) + n


def _regions_from_geojson_points(raw, max_rows, bound_km, knn, kde_max, label):
    """A GeoJSON of Point features with user ids: regions built per user, as from a CSV."""
    pts = load_points(raw, fmt="geojson", max_rows=max_rows, name=label)
    if pts.users is None:
        raise DataError("the GeoJSON has Point features but no user id property "
                        "(user_id/userid/user/uid/id); expected one Polygon or MultiPolygon "
                        "per user, or points with a user id from which regions are built")
    return _regions_from_pointdata(pts, bound_km or DEFAULT_BOUND_KM, knn, kde_max, label,
                                   pts.report)


def _usable_polygons(geoms, n_read, dropped):
    """Mask of the polygons with well-formed, finite lon/lat coordinates, counting each dropped
    one in `dropped` by reason; refuses the file when too few are usable."""
    keep = np.ones(len(geoms), bool)
    _drop(keep, dropped, np.array([g is None for g in geoms]), "polygons with malformed "
          "coordinates (expected rings of 4 or more [lon, lat] positions, the first equal to the "
          "last)")
    ok = np.flatnonzero(keep)
    _drop(keep, dropped, np.isin(np.arange(len(geoms)), ok[shapely.is_empty(geoms[ok])]),
          "empty geometries")
    hint = _drop_bad_coordinates(geoms, keep, dropped)
    n_bad = n_read - int(keep.sum())
    if not keep.any() or n_bad > MAX_DROP_FRACTION * n_read:
        reasons = "; ".join(f"{n:,} {why}" for why, n in dropped.items())
        raise DataError(f"{n_bad:,} of {n_read:,} features are unusable: {reasons}. Expected "
                        "Polygon or MultiPolygon features with [longitude, latitude] positions "
                        f"in decimal degrees.{hint}")
    return keep


def _drop(keep, dropped, mask, why):
    """Drop the still-kept polygons in `mask` (in place), counting them under `why`."""
    mask = mask & keep
    if mask.any():
        _count(dropped, why, int(mask.sum()))
        keep[mask] = False


def _drop_bad_coordinates(geoms, keep, dropped) -> str:
    """Drop polygons with non-finite or out-of-range coordinates; returns a hint for the error
    message when the coordinates look projected or swapped ("" otherwise)."""
    ok = np.flatnonzero(keep)
    coords, gi = shapely.get_coordinates(geoms[ok], return_index=True)
    nonfinite = np.bincount(gi, ~np.isfinite(coords).all(1), minlength=len(ok)) > 0
    lon_bad = np.bincount(gi, np.abs(coords[:, 0]) > 180, minlength=len(ok)) > 0
    lat_bad = np.bincount(gi, np.abs(coords[:, 1]) > 90, minlength=len(ok)) > 0
    for mask, why in ((nonfinite, "regions with NaN or infinite coordinates"),
                      (lon_bad, "regions with longitude outside [-180, 180]"),
                      (lat_bad, "regions with latitude outside [-90, 90]")):
        full = np.zeros(len(geoms), bool)
        full[ok[mask]] = True
        _drop(keep, dropped, full, why)
    if len(coords) and np.nanmax(np.abs(coords)) > 1000:
        return (" The coordinates look projected (metres?); expected longitude and latitude in "
                "decimal degrees (EPSG:4326).")
    if lat_bad.any() and not lon_bad.any():
        return " The latitudes look like longitudes: are the coordinates [lat, lon] instead of [lon, lat]?"
    return ""


def _repair_invalid(geoms, ids, n_read, dropped, changed):
    """Invalid polygons made valid and replaced by their convex hull; those with no area left
    are rejected (all of them rejected: DataError). Returns (geoms, ids, invalid mask)."""
    invalid = ~shapely.is_valid(geoms)
    if not invalid.any():
        return geoms, ids, invalid
    fixed = shapely.convex_hull(shapely.make_valid(geoms[invalid]))
    dead = shapely.area(fixed) <= 0
    geoms = geoms.copy()
    geoms[invalid] = fixed
    changed[CHANGED_REPAIRED] = int((~dead).sum())
    if dead.any():
        gone = np.zeros(len(geoms), bool)
        gone[np.flatnonzero(invalid)[dead]] = True
        dropped["invalid polygons rejected (no area left after repair)"] = int(dead.sum())
        geoms, ids, invalid = geoms[~gone], ids[~gone], invalid[~gone]
    if not len(geoms):
        raise DataError(f"all {n_read:,} polygons are invalid and have no area once "
                        "repaired; expected simple polygons (rings that do not cross "
                        "themselves) in [longitude, latitude]")
    return geoms, ids, invalid


def _convex_hulls(geoms, invalid, changed):
    """Every region's convex hull, counting the multi-part and non-convex ones it replaced
    (repaired ones are counted already)."""
    hull = shapely.convex_hull(geoms)
    multi = ~invalid & (shapely.get_num_geometries(geoms) > 1)
    nonconvex = ~invalid & ~multi & (shapely.area(geoms) < shapely.area(hull) * (1 - 1e-9))
    changed[CHANGED_MULTI] = int(multi.sum())
    changed[CHANGED_HULL] = int(nonconvex.sum())
    return hull


def _one_region_per_user(geoms, ids, merge, changed):
    """One region per user: a user with several features is refused, or with merge=True
    given the convex hull of all of them. Returns (geoms, ids)."""
    uids, inv, cnt = np.unique(ids.astype(str), return_inverse=True, return_counts=True)
    if not (cnt > 1).any():
        return geoms, ids
    worst = int(np.argmax(cnt))
    if not merge:
        raise DataError(f"{int((cnt > 1).sum()):,} users have more than one feature (e.g. user "
                        f"{str(uids[worst])!r} has {cnt[worst]:,}); the Euler histogram needs one "
                        "region per user, or that user is counted several times and the "
                        "privacy bound fails. Merge each user's polygons into one, or load "
                        "with merge=True to use the convex hull of each user's features")
    coords, gi = shapely.get_coordinates(geoms, return_index=True)
    u = inv[gi]
    o = np.argsort(u, kind="stable")
    geoms = shapely.convex_hull(shapely.multipoints(coords[o], indices=u[o]))
    changed[CHANGED_MERGED] = int((cnt > 1).sum())
    return geoms, uids.astype(object)


def _bound_regions(geoms, bound_km, changed):
    """With a bound B, regions wider than B clipped to a disc of diameter B; without one, a
    note on how many are wider than the default B. Returns (geoms, notes)."""
    if bound_km:
        geoms, n_clip = clip_to_bound(geoms, bound_km)
        changed[CHANGED_BOUND] = n_clip
        return geoms, []
    notes = []
    wide = int((diameters_km(geoms) > DEFAULT_BOUND_KM).sum())
    if wide:
        notes.append(f"{wide:,} regions are wider than {DEFAULT_BOUND_KM:g} km; the Euler "
                     "histogram clips each region to a disc of diameter B (its bound "
                     "parameter) and reports how many it clipped")
    return geoms, notes
