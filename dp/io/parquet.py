"""Points from Parquet: plain numeric or text columns only, read column by column, and never
more bytes than a limit (`read_bounded`): a small file can hold a column that unpacks a
thousand times (one long text repeated, stored once in the column's dictionary)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DataError
from .arrow_values import _coords_from_texts, _floats_of
from .columns import (
    USER_NAMES,
    _checked,
    _columns,
    _find_column,
    _refuse_too_many,
)
from .source import IN_MEMORY

BYTES_PER_ROW = 256       # what a row may unpack to when no byte limit is given...
MIN_BYTES = 64 * 2**20    # ...or a small file altogether
BATCH_ROWS = 1 << 20      # row groups read together, up to about this many rows
DAMAGED = ("the Parquet file is damaged or truncated: its data could not be read; expected a "
           "complete Parquet file (write it again)")


def open_parquet(source, read_dictionary=None) -> pq.ParquetFile:
    """A Parquet file from its bytes or a path (`read_dictionary`: columns kept as dictionaries)."""
    return pq.ParquetFile(pa.BufferReader(source) if isinstance(source, IN_MEMORY) else str(source),
                          read_dictionary=read_dictionary)


def read_bounded(source, pf: pq.ParquetFile, names: list[str], max_bytes: int | None,
                 already: int = 0) -> pa.Table:
    """The columns `names` of a Parquet file (`source`: its bytes or path, `pf` opened on it),
    refused in words when they unpack to more than
    `max_bytes` (None: BYTES_PER_ROW a row, at least MIN_BYTES): first by the file's own account of its pages
    (before reading them), then by the lengths of the texts its dictionaries stand for
    (text and binary columns are read as dictionaries, which take about the pages' size,
    and decoded only once their full size is known). `already`: bytes other columns of the
    file take once decoded, counted with these against the same limit."""
    limit = byte_limit(pf, max_bytes)
    _refuse_bigger(_packed(pf, names), limit)
    fields = [pf.schema_arrow.field(n) for n in names]
    texts = [f.name for f in fields if _is_text(f.type)]
    try:
        table = open_parquet(source, texts).read(columns=names)
    except (pa.ArrowException, OSError, KeyError):    # KeyError: two columns of one name
        raise DataError(DAMAGED) from None
    _refuse_bigger(already + sum(_unpacked_bytes(table.column(i)) for i in range(table.num_columns)), limit)
    for f in fields:
        if f.name in texts:
            i = table.schema.get_field_index(f.name)
            table = table.set_column(i, f, table.column(i).cast(f.type))
    return table


def byte_limit(pf: pq.ParquetFile, max_bytes: int | None) -> int:
    """What a file's columns may unpack to: `max_bytes`, else BYTES_PER_ROW a row, at least
    MIN_BYTES."""
    return max(pf.metadata.num_rows * BYTES_PER_ROW, MIN_BYTES) if max_bytes is None else max_bytes


def _packed(pf: pq.ParquetFile, names: list[str]) -> int:
    """The file's own account of what the columns `names` unpack to (pages, before reading)."""
    md = pf.metadata
    return sum(md.row_group(g).column(j).total_uncompressed_size
               for g in range(md.num_row_groups) for j in range(md.num_columns)
               if md.row_group(g).column(j).path_in_schema.split(".")[0] in names)


def read_numbers(pf: pq.ParquetFile, names: list[str], max_bytes: int | None,
                 already: int = 0) -> list[np.ndarray]:
    """Numeric columns as float64 arrays, a null as NaN, read row group by row group into
    arrays made once (no copy of the whole table: 8 bytes a value, and as fast as any reader
    measured, `benchmarks/hot_paths.py`); refused in words, before anything is read, when
    they and `already` (other columns' bytes) exceed `max_bytes` (`byte_limit`)."""
    n = pf.metadata.num_rows
    _refuse_bigger(already + max(_packed(pf, names), 8 * n * len(names)), byte_limit(pf, max_bytes))
    out = [np.empty(n) for _ in names]
    at = 0
    try:
        for batch in _batches(pf):
            group = pf.read_row_groups(batch, columns=names)
            for values, column in zip(out, group.columns):
                pos = at
                for chunk in column.chunks:
                    values[pos:pos + len(chunk)] = _floats_of(chunk)
                    pos += len(chunk)
            at += group.num_rows
            del group
            pa.default_memory_pool().release_unused()   # a row group's buffers, not one per group
    except (pa.ArrowException, OSError, KeyError, ValueError):
        raise DataError(DAMAGED) from None
    if at != n:
        raise DataError(DAMAGED)
    return out


def _batches(pf: pq.ParquetFile) -> list[list[int]]:
    """The file's row groups in runs of about BATCH_ROWS rows: one read each (a file of many
    tiny row groups would otherwise cost a call per group)."""
    batches, rows = [], BATCH_ROWS
    for g in range(pf.num_row_groups):
        if rows >= BATCH_ROWS:
            batches.append([])
            rows = 0
        batches[-1].append(g)
        rows += pf.metadata.row_group(g).num_rows
    return batches


def _is_text(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind))


def _unpacked_bytes(column: pa.ChunkedArray) -> int:
    """Bytes a column takes once decoded: a dictionary chunk's texts counted once per row."""
    total = 0
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            sizes = pc.binary_length(chunk.dictionary).to_numpy(zero_copy_only=False)
            idx = pc.fill_null(chunk.indices, 0).to_numpy()     # a missing value: counted as one
            total += int(sizes[idx].sum()) + 8 * len(chunk)
        else:
            total += chunk.nbytes
    return total


def _refuse_bigger(nbytes: int, limit: int):
    if nbytes > limit:
        raise DataError(f"the Parquet file's columns unpack to {nbytes / 1e6:,.1f} MB, more than the "
                        f"{limit / 1e6:,.1f} MB this reader takes from one file; expected plain "
                        "columns of coordinates and short user ids (long texts repeated in every "
                        "row unpack far beyond the file's size)")


def _parse_parquet(src, lon, lat, user, max_rows, max_bytes=None):
    """Points from a Parquet file: columns found as in a CSV, the row limit from the file's
    metadata (before reading any data), at most `max_bytes` unpacked (`read_bounded`),
    numeric columns read as float64, text ones parsed."""
    try:
        pf = open_parquet(src)
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
        return _parse_geoparquet(src, pf, header, user, max_bytes)
    for i, role in ((ilon, "longitude"), (ilat, "latitude"), (iuser, "user id")):
        kind = None if i is None else pf.schema_arrow.field(i).type
        if kind is not None and not _plain(kind):
            raise DataError(f"the {role} column {header[i]!r} holds values of type {kind}; expected "
                            "numbers or text, one value per row")
    dropped, first_bad = {}, {}
    kinds = [pf.schema_arrow.field(i).type for i in (ilon, ilat)]
    uid = None
    if all(pa.types.is_floating(k) for k in kinds) or all(pa.types.is_integer(k) for k in kinds):
        coords = 16 * pf.metadata.num_rows          # two float64 columns, once decoded
        if iuser is not None:        # the ids first: the whole file's size is then said at once
            uid = read_bounded(src, pf, [header[iuser]], max_bytes, coords).column(0)
        x, y = read_numbers(pf, [header[ilon], header[ilat]], max_bytes,
                            0 if uid is None else _unpacked_bytes(uid))
        bad = np.zeros(len(x), bool)
    else:
        table = read_bounded(src, pf, [header[i] for i in (ilon, ilat, iuser) if i is not None], max_bytes)
        x, y, bad = _coords_from_texts([table.column(0).cast(pa.string())], [table.column(1).cast(pa.string())],
                                       "{},{}".format, dropped, first_bad)
        uid = None if iuser is None else table.column(2)
    uid = None if uid is None else uid.cast(pa.string())
    generic = lon is None and lat is None and {cols["lon"].lower(), cols["lat"].lower()} == {"x", "y"}
    return _checked(x, y, uid, "Parquet", len(x), cols, dropped, first_bad, bad, generic)


def _parse_geoparquet(src, pf, header, user, max_bytes=None):
    """Points from a GeoParquet file's geometry (any CRS, reprojected to WGS84: `dp.geo`)."""
    from ..geo import geoparquet_points
    iuser = _find_column(header, user, USER_NAMES, "user id")
    if iuser is not None and not _plain(pf.schema_arrow.field(iuser).type):
        raise DataError(f"the user id column {header[iuser]!r} holds values of type "
                        f"{pf.schema_arrow.field(iuser).type}; expected numbers or text, one value per row")
    x, y, uid, col = geoparquet_points(src, pf, iuser, max_bytes)
    cols = {"lon": col, "lat": col, **({"user": header[iuser]} if iuser is not None else {})}
    uid = None if uid is None else uid.cast(pa.string())
    return _checked(x, y, uid, "GeoParquet", len(x), cols, {}, {}, np.zeros(len(x), bool), False)


def _plain(kind: pa.DataType) -> bool:
    """A Parquet column type read as one number or text per row (not lists, structs, bytes or
    times, which no coordinate or user id is)."""
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_boolean(kind) or pa.types.is_null(kind))
