"""Points from Parquet: plain numeric or text columns only, read column by column."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DataError
from .columns import USER_NAMES, _checked, _columns, _coords_from_texts, _find_column, _refuse_too_many
from .source import IN_MEMORY


def _parse_parquet(src, lon, lat, user, max_rows):
    """Points from a Parquet file: columns found as in a CSV, the row limit from the file's
    metadata (before reading any data), numeric columns read as float64, text ones parsed."""
    try:
        pf = pq.ParquetFile(pa.BufferReader(src) if isinstance(src, IN_MEMORY) else str(src))
    except (pa.ArrowException, OSError):
        raise DataError("the file is not a readable Parquet file; expected a Parquet file with "
                        "longitude and latitude columns, or a CSV or GeoJSON file") from None
    header = pf.schema_arrow.names
    geo = b"geo" in (pf.schema_arrow.metadata or {}) and lon is None and lat is None
    ilon, ilat, iuser, cols = (None, None, None, None) if geo else _columns(header, lon, lat, user)
    _refuse_too_many(pf.metadata.num_rows, max_rows)
    if pf.metadata.num_rows == 0:
        raise DataError("the Parquet file has columns but no rows; expected one point per row")
    if geo:                       # GeoParquet: the points are its primary geometry column
        return _parse_geoparquet(pf, header, user)
    for i, role in ((ilon, "longitude"), (ilat, "latitude"), (iuser, "user id")):
        kind = None if i is None else pf.schema_arrow.field(i).type
        if kind is not None and not _plain(kind):
            raise DataError(f"the {role} column {header[i]!r} holds values of type {kind}; expected "
                            "numbers or text, one value per row")
    try:
        table = pf.read(columns=[header[i] for i in (ilon, ilat, iuser) if i is not None])
    except (pa.ArrowException, OSError):
        raise DataError("the Parquet file is damaged or truncated: its data could not be read; "
                        "expected a complete Parquet file (write it again)") from None
    dropped, first_bad = {}, {}
    tx, ty = table.column(0), table.column(1)
    if pa.types.is_floating(tx.type) and pa.types.is_floating(ty.type) or             pa.types.is_integer(tx.type) and pa.types.is_integer(ty.type):
        # safe=False: an integer beyond 2**53 becomes the nearest float (far out of any
        # coordinate range, so dropped as such) instead of an ArrowInvalid
        x = pc.fill_null(tx.cast(pa.float64(), safe=False), float("nan")).to_numpy()
        y = pc.fill_null(ty.cast(pa.float64(), safe=False), float("nan")).to_numpy()
        bad = np.zeros(len(x), bool)
    else:
        x, y, bad = _coords_from_texts([tx.cast(pa.string())], [ty.cast(pa.string())],
                                       "{},{}".format, dropped, first_bad)
    uid = None if iuser is None else table.column(2).cast(pa.string())
    generic = lon is None and lat is None and {cols["lon"].lower(), cols["lat"].lower()} == {"x", "y"}
    return _checked(x, y, uid, "Parquet", len(x), cols, dropped, first_bad, bad, generic)


def _parse_geoparquet(pf, header, user):
    """Points from a GeoParquet file's geometry (any CRS, reprojected to WGS84: `dp.geo`)."""
    from ..geo import geoparquet_points
    iuser = _find_column(header, user, USER_NAMES, "user id")
    if iuser is not None and not _plain(pf.schema_arrow.field(iuser).type):
        raise DataError(f"the user id column {header[iuser]!r} holds values of type "
                        f"{pf.schema_arrow.field(iuser).type}; expected numbers or text, one value per row")
    x, y, uid, col = geoparquet_points(pf, iuser)
    cols = {"lon": col, "lat": col, **({"user": header[iuser]} if iuser is not None else {})}
    uid = None if uid is None else uid.cast(pa.string())
    return _checked(x, y, uid, "GeoParquet", len(x), cols, {}, {}, np.zeros(len(x), bool), False)


def _plain(kind: pa.DataType) -> bool:
    """A Parquet column type read as one number or text per row (not lists, structs, bytes or
    times, which no coordinate or user id is)."""
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_boolean(kind) or pa.types.is_null(kind))
