"""Parse and validate uploads (CSV, GeoJSON, Parquet) into PointData, with errors that say what to fix.

One module per format (`csv_points`, `geojson`, `parquet`), what they share in `source` (bytes,
format, encoding), `columns` (column names, coordinate checks) and `arrow_values` (coordinates
from Arrow columns); `load_points` picks one, importing the CSV and Parquet readers (and so
pyarrow) on first use.
"""
from __future__ import annotations

from pathlib import Path

from ..points import PointData
from .columns import (LAT_NAMES, LON_NAMES, MAX_DROP_FRACTION, USER_NAMES, _note_missing_ids,
                      add_load_warnings)
from .geojson import _parse_geojson
from .source import DEFAULT_MAX_ROWS, _as_utf8, _detect_format, _head, _is_parquet, _locate

__all__ = ["load_points", "add_load_warnings", "DEFAULT_MAX_ROWS", "MAX_DROP_FRACTION",
           "LON_NAMES", "LAT_NAMES", "USER_NAMES"]


def load_points(source, *, lon=None, lat=None, user=None, fmt: str | None = None,
                filename: str | None = None, max_rows: int = DEFAULT_MAX_ROWS,
                name: str | None = None, max_bytes: int | None = None) -> PointData:
    """Load points from a CSV, GeoJSON, Parquet or GeoParquet path or bytes, or a GeoDataFrame.

    CSV and Parquet columns are found by common names (lon/lng/long/longitude/x,
    lat/latitude/y, any case) unless `lon`/`lat` (names or 0-based indices) are given; `user`
    names an optional id column. GeoJSON user ids come from a property named like the CSV
    column (USER_NAMES), never `id` (a feature's own id); points without one are counted in the
    report's notes. Rows with unusable coordinates are dropped and counted in `data.report`; a
    file that is mostly unusable raises DataError instead. CSV is parsed by pyarrow, streamed
    from a file path; more than `max_rows` rows are refused before parsing. GeoParquet files and
    GeoDataFrames give their point geometries, in any coordinate system, as WGS84 (`dp.geo`; a
    frame without one is taken as WGS84 when its coordinates could be degrees). A Parquet file's
    columns may unpack to at most `max_bytes` (default 256 bytes a row, at least 64 MiB), checked before they are
    decoded (`dp.io.parquet.read_bounded`).
    """
    if hasattr(source, "geometry") and hasattr(source, "crs"):        # a GeoDataFrame
        from ..geo import geodataframe_table
        return load_points(geodataframe_table(source, user), fmt="parquet", lon="lon", lat="lat",
                           user="user_id" if user is not None else None, max_rows=max_rows,
                           name=name or "GeoDataFrame")
    src, filename = _locate(source, filename)
    head = _head(src)
    if _is_parquet(head, filename, fmt):
        from .parquet import _parse_parquet      # pyarrow on first use, not at `import dp`
        x, y, uid, report = _parse_parquet(src, lon, lat, user, max_rows, max_bytes)
        encoding_warning = None
    else:
        src, head, head_text, newlines, encoding_warning = _as_utf8(src, head)
        kind = _detect_format(head_text, filename, fmt)
        if kind == "csv":
            from .csv_points import _parse_csv
            x, y, uid, report = _parse_csv(src, head, newlines, lon, lat, user, max_rows)
        else:
            text = (src.read_bytes() if isinstance(src, Path) else src).decode("utf-8-sig")
            x, y, uid, report = _parse_geojson(text, max_rows)
    data = PointData(x, y, uid, report, name=name or filename or "upload", copy=False)
    _note_missing_ids(data)
    add_load_warnings(report, data.n, "point", encoding_warning)
    return data
