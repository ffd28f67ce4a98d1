"""Points from Parquet: plain numeric or text columns only, read column by column."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DataError
from .columns import _checked, _columns, _coords_from_texts, _refuse_too_many
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
    ilon, ilat, iuser, cols = _columns(header, lon, lat, user)
    _refuse_too_many(pf.metadata.num_rows, max_rows)
    if pf.metadata.num_rows == 0:
        raise DataError("the Parquet file has columns but no rows; expected one point per row")
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
        x = pc.fill_null(tx.cast(pa.float64()), float("nan")).to_numpy()
        y = pc.fill_null(ty.cast(pa.float64()), float("nan")).to_numpy()
        bad = np.zeros(len(x), bool)
    else:
        x, y, bad = _coords_from_texts([tx.cast(pa.string())], [ty.cast(pa.string())],
                                       "{},{}".format, dropped, first_bad)
    uid = None if iuser is None else table.column(2).cast(pa.string())
    generic = lon is None and lat is None and {cols["lon"].lower(), cols["lat"].lower()} == {"x", "y"}
    return _checked(x, y, uid, "Parquet", len(x), cols, dropped, first_bad, bad, generic)


def _plain(kind: pa.DataType) -> bool:
    """A Parquet column type read as one number or text per row (not lists, structs, bytes or
    times, which no coordinate or user id is)."""
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_boolean(kind) or pa.types.is_null(kind))
