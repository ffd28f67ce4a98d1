"""The geospatial Python ecosystem: points from a GeoDataFrame or a GeoParquet file (any CRS,
reprojected to WGS84), releases and shape counts as GeoDataFrames and GeoParquet.

GeoParquet's points are read with pyarrow and shapely alone (WKB); reprojection needs pyproj and
GeoDataFrames need geopandas, both in the `[geo]` extra (`pip install -e ".[geo]"`), with a
message saying so when they are missing. The app's default install stays light.
"""
from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import shapely

from .errors import DataError, MissingExtra

WGS84 = ("OGC:CRS84", "EPSG:4326", "WGS 84", "WGS84")
GEOMETRY_TYPES = {0: "Point", 1: "LineString", 3: "Polygon", 4: "MultiPoint", 5: "MultiLineString",
                  6: "MultiPolygon", 7: "GeometryCollection"}      # shapely's type ids, GeoParquet's names
GEO_EXTRA = 'install the geo extra: pip install -e ".[geo]" (geopandas, pyproj)'


def require(module: str, what: str):
    """Import an optional package, or say which extra provides it."""
    try:
        return __import__(module)
    except ImportError:
        raise MissingExtra(f"{what} needs the {module} package; {GEO_EXTRA}") from None


def _is_wgs84(crs) -> bool:
    """Whether a CRS (a PROJJSON dict, a string or a pyproj CRS) is longitude/latitude WGS84."""
    if crs is None:
        return True
    if isinstance(crs, str) and crs.strip().upper() in WGS84:
        return True
    if isinstance(crs, dict):
        ident = crs.get("id") if isinstance(crs.get("id"), dict) else {}
        if (ident.get("authority"), str(ident.get("code"))) in (("OGC", "CRS84"), ("EPSG", "4326")):
            return True
    return _crs(crs).equals(_crs("OGC:CRS84"))


def _crs(crs):
    """A pyproj CRS, or a DataError saying the coordinate system could not be read."""
    pyproj = require("pyproj", "a coordinate system other than WGS84")
    try:
        return pyproj.CRS.from_user_input(crs)
    except (pyproj.exceptions.CRSError, TypeError, ValueError):
        raise DataError("the coordinate system given with the data could not be read; expected "
                        "one pyproj knows (e.g. EPSG:4326 or a PROJJSON object)") from None


def to_wgs84(x, y, crs):
    """Longitude and latitude in degrees of coordinates in `crs` (pyproj, axis order x, y)."""
    if _is_wgs84(crs):
        return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    pyproj = require("pyproj", "reprojecting to WGS84")
    t = pyproj.Transformer.from_crs(_crs(crs), "OGC:CRS84", always_xy=True)
    lon, lat = t.transform(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    return np.asarray(lon, dtype=np.float64), np.asarray(lat, dtype=np.float64)


def _point_xy(geoms: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """x, y of point geometries (NaN for missing ones, dropped later with the other bad rows);
    anything but points is refused."""
    kinds = shapely.get_type_id(geoms)
    other = (kinds != 0) & (kinds != -1)           # -1: a missing geometry
    if other.any():
        name = shapely.GeometryType(int(kinds[other][0])).name.title()
        raise DataError(f"the {what} holds {name} geometries; expected points (one per row). "
                        "Regions, one per user, load with dp.load_regions")
    empty = (kinds == -1) | shapely.is_empty(geoms)       # missing or POINT EMPTY: dropped later
    x, y = np.full(len(geoms), np.nan), np.full(len(geoms), np.nan)
    x[~empty], y[~empty] = shapely.get_x(geoms[~empty]), shapely.get_y(geoms[~empty])
    return x, y


def geodataframe_table(gdf, user=None) -> bytes:
    """A GeoDataFrame of points as Parquet bytes with lon, lat (WGS84) and user columns, for
    `dp.load_points` to check like any file. A frame without a CRS is taken as WGS84 when its
    coordinates could be degrees, and refused otherwise."""
    if len(gdf) == 0:
        raise DataError("the GeoDataFrame has no rows; expected one point per row")
    geoms = np.asarray(gdf.geometry.values, dtype=object)
    x, y = _point_xy(geoms, "GeoDataFrame")
    if gdf.crs is None:
        inside = np.isnan(x) | ((np.abs(x) <= 180) & (np.abs(y) <= 90))
        if not inside.all():
            raise DataError("the GeoDataFrame has no coordinate system and its coordinates are not "
                            "degrees; set it first, e.g. gdf.set_crs('EPSG:27700')")
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    else:
        x, y = to_wgs84(x, y, gdf.crs.to_json_dict())
    cols = {"lon": pa.array(x), "lat": pa.array(y)}
    if user is not None:
        if user not in gdf.columns:
            raise DataError(f"no column named {user!r} for user id; the GeoDataFrame has: "
                            f"{', '.join(map(str, gdf.columns))}")
        cols["user_id"] = pa.array(gdf[user].astype("string").to_numpy(na_value=None), pa.string())
    out = io.BytesIO()
    pq.write_table(pa.table(cols), out)
    return out.getvalue()


def _geometries(source, pf: pq.ParquetFile, extra: list[str], what: str, max_bytes: int | None = None):
    """(geometries of a GeoParquet file's primary column, the table of it and `extra` columns,
    the column's name, its CRS): GeoParquet 1.x, WKB encoding, read with pyarrow and shapely,
    at most `max_bytes` unpacked (`dp.io.parquet.read_bounded`)."""
    from .io.parquet import read_bounded
    try:
        meta = json.loads(pf.schema_arrow.metadata[b"geo"])
        col = meta["primary_column"]
        spec = meta["columns"][col]
        if not isinstance(spec, dict) or col not in pf.schema_arrow.names:
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise DataError("the file's GeoParquet metadata is damaged; expected GeoParquet 1.x with "
                        "a primary geometry column") from None
    if str(spec.get("encoding", "")).upper() != "WKB":
        raise DataError(f"the GeoParquet geometry column is encoded as {spec.get('encoding')!r}; "
                        "expected WKB (what GeoPandas and GDAL write)")
    if "crs" in spec and spec["crs"] is None:
        raise DataError("the GeoParquet file says its coordinate system is unknown (crs: null); "
                        "write it again with one, e.g. gdf.set_crs('EPSG:4326').to_parquet(...)")
    table = read_bounded(source, pf, [col] + [c for c in extra if c != col], max_bytes)
    try:
        geoms = shapely.from_wkb(table.column(0).to_numpy(zero_copy_only=False), on_invalid="raise")
    except (shapely.errors.GEOSException, TypeError, ValueError):
        raise DataError(f"the GeoParquet geometry column {col!r} holds values that are not "
                        f"geometries; expected WKB {what}") from None
    return geoms, table, col, spec.get("crs")


def geoparquet_points(source, pf: pq.ParquetFile, user_index, max_bytes: int | None = None):
    """(x, y, the user column or None, the geometry column's name) of a GeoParquet file's
    primary geometry column, in WGS84 (`source`: the file's bytes or path, `pf` opened on it)."""
    extra = [pf.schema_arrow.names[user_index]] if user_index is not None else []
    geoms, table, col, crs = _geometries(source, pf, extra, "points", max_bytes)
    x, y = to_wgs84(*_point_xy(geoms, "GeoParquet file"), crs)
    return x, y, (table.column(1) if user_index is not None else None), col


def geoparquet_polygons(source, pf: pq.ParquetFile, id_column: str | None,
                        max_bytes: int | None = None) -> tuple[np.ndarray, list | None]:
    """(geometries in WGS84, the values of `id_column` or None) of a GeoParquet file of shapes
    (`source`: its bytes or path, `pf` opened on it)."""
    geoms, table, _col, crs = _geometries(source, pf, [id_column] if id_column else [], "polygons", max_bytes)
    if not _is_wgs84(crs):
        geoms = shapely.transform(geoms, lambda xy: np.column_stack(to_wgs84(xy[:, 0], xy[:, 1], crs)))
    return geoms, (table.column(1).to_pylist() if id_column else None)


def write_geoparquet(properties: list[dict], geometries, target, extra: dict | None = None) -> None:
    """GeoParquet 1.1 (WKB; no "crs" key, which the standard reads as OGC:CRS84) of features'
    properties and WGS84 geometries, to a path or a binary file: pyarrow and shapely alone, so
    the app's light install writes it too. `extra`: more file metadata, each value as JSON
    (e.g. the release's provenance)."""
    geoms = np.asarray(geometries, dtype=object)
    if shapely.is_missing(geoms).any():
        raise ValueError("every feature needs a geometry")
    names = list(dict.fromkeys(k for p in properties for k in p))
    table = pa.table({**{k: [p.get(k) for p in properties] for k in names},
                      "geometry": pa.array(shapely.to_wkb(geoms), pa.binary())})
    types = sorted({GEOMETRY_TYPES[int(t)] + (" Z" if z else "")
                    for t, z in zip(shapely.get_type_id(geoms), shapely.has_z(geoms))})
    column = {"encoding": "WKB", "geometry_types": types}
    bbox = shapely.total_bounds(geoms)
    if np.isfinite(bbox).all():                       # all empty: no bbox (NaN is not JSON)
        column["bbox"] = bbox.tolist()
    meta = {"version": "1.1.0", "primary_column": "geometry", "columns": {"geometry": column}}
    more = {k.encode(): json.dumps(v, default=str).encode() for k, v in (extra or {}).items()}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **more,
                                           b"geo": json.dumps(meta).encode()})
    pq.write_table(table, target)


def geodataframe(features):
    """A GeoDataFrame (WGS84) of a GeoJSON FeatureCollection's (or `RectFeatures`') features
    and properties."""
    gpd = require("geopandas", "a GeoDataFrame")
    if isinstance(features, dict):
        return gpd.GeoDataFrame.from_features(features["features"], crs="OGC:CRS84")
    return gpd.GeoDataFrame(features.columns, geometry=features.shapes(), crs="OGC:CRS84")
