"""Points from CSV: the header found past blank lines and a BOM, rows counted before parsing,
the body streamed through pyarrow in blocks."""
from __future__ import annotations

import csv
import codecs
import re

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from ..errors import DataError
from .arrow_values import _coords_from_texts, _float_values
from .columns import _checked, _columns, _is_number, _refuse_too_many, _sniff_delimiter
from .source import BLOCK_BYTES, IN_MEMORY, _chunks

_BLANK_LINES = re.compile(rb"(?:[ \t\f\v]*(?:\r\n|\r|\n))*")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_BLANK_AFTER_NEWLINE = re.compile(rb"\n[ \t\r\f\v]*(?=\n)")
_BLANK_FIRST_LINE = re.compile(rb"[ \t\r\f\v]*\n")


def _header(head: bytes):
    """(header line, offset where the body starts): the first non-blank line after any UTF-8
    byte-order mark."""
    pos = _BLANK_LINES.match(head, 3 if head.startswith(codecs.BOM_UTF8) else 0).end()
    end = _LINE_END.search(head, pos)
    line = head[pos:end.start() if end else len(head)]
    return line.decode("utf-8", errors="replace"), end.end() if end else len(head)


def _count_rows(src, start: int) -> int:
    """Non-blank lines from byte `start`, counted at C speed: newline bytes minus blank lines,
    plus a last line without a newline."""
    rows, last = 0, b""
    for chunk in _chunks(src, start):
        rows += chunk.count(b"\n") - bool(_BLANK_FIRST_LINE.match(chunk))
        rows -= sum(1 for _ in _BLANK_AFTER_NEWLINE.finditer(chunk))   # loops over blank lines
        last = chunk
    return rows + bool(last.rpartition(b"\n")[2].strip())


def _parse_csv(src, head, newlines, lon, lat, user, max_rows):
    """Header and columns from the first line, the row limit from the newline count (exact
    only when that bound exceeds it), then the body parsed by pyarrow: coordinates straight to
    float64, or as text when some are not numbers, to say which rows were bad and why."""
    first, start = _header(head)
    delim = _sniff_delimiter(first)
    header = next(csv.reader([first], delimiter=delim))
    if all(_is_number(h) for h in header):
        raise DataError("the first line has no column names; expected a header row such as "
                        "'lon,lat' (longitude and latitude in decimal degrees)")
    ilon, ilat, iuser, cols = _columns(header, lon, lat, user)
    if all(chunk.isspace() for chunk in _chunks(src, start)):   # stops at the first data
        raise DataError("the file has a header but no data rows; expected one point per line "
                        "below the header")
    bound = newlines - head[:start].count(b"\n") + 1
    if bound > max_rows:
        _refuse_too_many(_count_rows(src, start), max_rows)
    generic = lon is None and lat is None and {cols["lon"].lower(), cols["lat"].lower()} == {"x", "y"}
    body = _CsvBody(src, start, delim, len(header), (ilon, ilat, iuser))
    x, y, uid, dropped, first_bad, unparsed = body.read(bound)
    pa.default_memory_pool().release_unused()   # the parser's buffers, before the checks
    n_rows = len(x) + dropped.get("rows with too few fields", 0)
    _refuse_too_many(n_rows, max_rows)   # lines ended by a lone carriage return
    return _checked(x, y, uid, "CSV", n_rows, cols, dropped, first_bad, unparsed, generic)


class _CsvBody:
    """The rows below a CSV header, read by pyarrow's streaming reader straight into float64
    arrays. Rows with another number of fields than the header are handed to Python: those
    missing a coordinate are counted, the others parsed by the csv module and kept."""

    def __init__(self, src, start, delim, n_cols, roles):
        self.src, self.start, self.delim, self.n_cols = src, start, delim, n_cols
        self.ilon, self.ilat, self.iuser = roles
        self.need = max(self.ilon, self.ilat) + 1

    def read(self, bound: int):
        """(x, y, user ids or None, dropped counts, first bad row per reason, mask of rows
        whose coordinates did not parse), coordinates as float64 in C unless some are blank or
        not numbers: then they are read again as text, to say which rows were bad and why."""
        try:
            got = self._read(bound, pa.float64())
        except pa.ArrowInvalid:
            got = None
        return got or self._read(bound, pa.string())

    def _reader(self, coord_type):
        """A pyarrow CSV stream over the body, with this object's handler for uneven rows."""
        if isinstance(self.src, IN_MEMORY):
            stream = pa.BufferReader(pa.py_buffer(self.src)[self.start:])
        else:
            stream = pa.OSFile(str(self.src))
            stream.seek(self.start)
        names = [f"c{i}" for i in range(self.n_cols)]
        roles = [i for i in (self.ilon, self.ilat, self.iuser) if i is not None]
        types = {names[self.ilon]: coord_type, names[self.ilat]: coord_type}
        if self.iuser is not None:
            types[names[self.iuser]] = pa.string()
        return pcsv.open_csv(
            stream, read_options=pcsv.ReadOptions(column_names=names, block_size=BLOCK_BYTES),
            parse_options=pcsv.ParseOptions(delimiter=self.delim,
                                            invalid_row_handler=self._uneven_row),
            convert_options=pcsv.ConvertOptions(
                include_columns=[names[i] for i in roles], column_types=types,
                null_values=[""] if coord_type == pa.float64() else [],
                strings_can_be_null=False, quoted_strings_can_be_null=False))

    def _uneven_row(self, row) -> str:
        """pyarrow's handler for a row with another number of fields than the header: blank
        lines are skipped, rows without both coordinates counted, the rest kept for later."""
        if row.text.strip():
            if row.actual_columns < self.need:
                self.short += 1
                self.first_short = self.first_short or \
                    f"a line with {row.actual_columns} of {self.need} fields"   # never the row's text
            else:
                self.uneven.append(row.text)
        return "skip"

    def _read(self, bound, coord_type):
        """One pass of the reader; None when float64 coordinates came out blank (null)."""
        self.short, self.first_short, self.uneven = 0, None, []
        floats = coord_type == pa.float64()
        x, y = (np.empty(bound), np.empty(bound)) if floats else (None, None)
        sx, sy, users, n = [], [], [], 0
        for batch in self._reader(coord_type):
            m = batch.num_rows
            if floats:
                if batch.column(0).null_count or batch.column(1).null_count:
                    return None
                x[n:n + m] = _float_values(batch.column(0))
                y[n:n + m] = _float_values(batch.column(1))
            else:
                sx.append(batch.column(0))
                sy.append(batch.column(1))
            if self.iuser is not None:
                users.append(batch.column(2))
            n += m
        extra = list(csv.reader(self.uneven, delimiter=self.delim))
        if extra or not floats:     # a clean file has no text to convert (and imports nothing)
            for texts, i in ((sx, self.ilon), (sy, self.ilat)):
                texts.append(pa.array([r[i] for r in extra], pa.string()))
        dropped, first_bad = {}, {}
        if self.short:
            dropped["rows with too few fields"] = self.short
            first_bad["rows with too few fields"] = self.first_short
        if floats and not extra:
            x, y, bad = x[:n], y[:n], np.zeros(n, bool)
        elif floats:
            ex, ey, bad = _coords_from_texts(sx, sy, self._field_order, dropped, first_bad)
            x, y = np.concatenate([x[:n], ex]), np.concatenate([y[:n], ey])
            bad = np.concatenate([np.zeros(n, bool), bad])
        else:
            x, y, bad = _coords_from_texts(sx, sy, self._field_order, dropped, first_bad)
        uid = None
        if self.iuser is not None:
            if extra or not users:
                users.append(pa.array([r[self.iuser] if len(r) > self.iuser else "" for r in extra],
                                      pa.string()))
            uid = pa.chunked_array(users, pa.string())
        return x, y, uid, dropped, first_bad, bad

    def _field_order(self, lon_text: str, lat_text: str) -> str:
        """A bad row's coordinate fields, in the file's column order, for the error message."""
        pair = (lon_text, lat_text) if self.ilon < self.ilat else (lat_text, lon_text)
        return self.delim.join(pair)
