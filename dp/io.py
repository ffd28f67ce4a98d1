"""Parse and validate uploads (CSV, GeoJSON, Parquet) into PointData, with errors that say what to fix."""
from __future__ import annotations

import codecs
import csv
import json
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from .errors import DataError
from .points import LoadReport, PointData, user_keys

DEFAULT_MAX_ROWS = 20_000_000
MAX_DROP_FRACTION = 0.5   # above this share of bad rows the file is refused, not cleaned

LON_NAMES = ("longitude", "lon", "lng", "long", "x")
LAT_NAMES = ("latitude", "lat", "y")
USER_NAMES = ("user_id", "userid", "user", "uid")
CSV_EXT = {".csv", ".txt", ".tsv"}
JSON_EXT = {".geojson", ".json"}
PARQUET_EXT = ".parquet"
PARQUET_MAGIC = b"PAR1"
HEAD_BYTES = 1 << 16      # read for the format, encoding and header checks
CHUNK_BYTES = 1 << 24     # pieces in which a file is scanned for newlines and UTF-8
BLOCK_BYTES = 1 << 20     # pyarrow's CSV block: its buffers stay small beside the output
IN_MEMORY = (bytes, bytearray)   # a source held in memory (else a Path of a file)

_BINARY_MAGIC = {
    b"PK\x03\x04": "a ZIP archive (an .xlsx workbook or zipped shapefile?)",
    b"\x89PNG": "a PNG image",
    b"%PDF": "a PDF document",
    b"\xd0\xcf\x11\xe0": "an old Excel/Office file",
    b"\x1f\x8b": "a gzip archive",
}


def _locate(source, filename):
    """(the bytes, or the Path of an existing file, and the filename): a file is not read here,
    so that a large CSV can be streamed by the parser instead of held in memory whole. Bytes
    and a bytearray (a decoded upload) are used as they are, never copied; a memoryview is
    copied to bytes."""
    if isinstance(source, IN_MEMORY):
        return source, filename
    if isinstance(source, memoryview):
        return bytes(source), filename
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise DataError(f"file not found: {str(path)!r}; expected a path to a CSV, GeoJSON "
                            "or Parquet file")
        return path, filename or path.name
    raise DataError(f"expected a file path or bytes, got {type(source).__name__}")


def _read_source(source, filename):
    """(the source's bytes, filename), for loaders that need the whole file (GeoJSON, regions)."""
    src, filename = _locate(source, filename)
    return (src.read_bytes() if isinstance(src, Path) else src), filename


def _chunks(src, start: int = 0):
    """The bytes from `start` in pieces of about CHUNK_BYTES that end at a newline, so that a
    file is scanned without being held in memory whole and no line is split."""
    if isinstance(src, IN_MEMORY):
        while start < len(src):
            end = src.find(b"\n", start + CHUNK_BYTES)
            end = len(src) if end < 0 else end + 1
            yield src[start:end] if start or end < len(src) else src
            start = end
        return
    with open(src, "rb") as f:
        f.seek(start)
        while chunk := f.read(CHUNK_BYTES):
            yield chunk + f.readline()


def _head(src) -> bytes:
    """The first HEAD_BYTES bytes: enough for the format, encoding and header checks."""
    if isinstance(src, IN_MEMORY):
        return src[:HEAD_BYTES]
    with open(src, "rb") as f:
        return f.read(HEAD_BYTES)


def _scan(src) -> tuple[int, bool, bool]:
    """(newline bytes, whether the bytes are valid UTF-8, whether they are all whitespace) in
    one pass at C speed: ASCII pieces need no decoding, others go through an incremental decoder
    so that no str of the whole file is built. A file is read into one reused buffer."""
    newlines, utf8, blank = 0, True, True
    decoder = None
    for piece in _pieces(src):
        newlines += piece.count(b"\n")
        blank = blank and piece.isspace()
        if utf8 and (decoder is not None or not piece.isascii()):
            decoder = decoder or codecs.getincrementaldecoder("utf-8")()
            try:
                decoder.decode(piece)
            except UnicodeDecodeError:
                utf8 = False
    if utf8 and decoder is not None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            utf8 = False
    return newlines, utf8, blank


def _pieces(src):
    """The bytes in pieces of CHUNK_BYTES, split anywhere (for counts and incremental decoding);
    a file is read through one reused buffer, so that scanning it allocates nothing more."""
    if isinstance(src, IN_MEMORY):
        for start in range(0, len(src), CHUNK_BYTES):
            yield src[start:start + CHUNK_BYTES] if len(src) > CHUNK_BYTES else src
        return
    buf = bytearray(CHUNK_BYTES)
    with open(src, "rb") as f:
        while n := f.readinto(buf):
            yield buf if n == len(buf) else buf[:n]


def _valid_utf8(raw: bytes) -> bool:
    """Whether `raw` is UTF-8, without decoding it when it is ASCII."""
    return _scan(raw)[1]


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
TINY = 50      # fewer points than this: warn that a release would be mostly noise


def _text_encoding(raw: bytes, utf8: bool | None = None) -> str:
    """The encoding of a text file from its first bytes `raw`: a byte-order mark, UTF-16
    without one (every other byte NUL), UTF-8 (`utf8`: already known for the whole file, else
    `raw` is the whole file), else Windows-1252; binary data raises DataError."""
    for magic, what in _BINARY_MAGIC.items():
        if raw.startswith(magic):
            raise DataError(f"the file is {what}, not text; expected a CSV (comma-separated text) "
                            "or a GeoJSON file")
    for bom, enc in _BOMS:
        if raw.startswith(bom):
            return enc
    head = raw[:4096]
    if len(head) >= 4 and head.count(0) > len(head) // 3:
        if head[1::2].count(0) > 0.9 * len(head[1::2]):
            return "utf-16-le"
        if head[0::2].count(0) > 0.9 * len(head[0::2]):
            return "utf-16-be"
        raise DataError("the file contains binary (NUL) bytes, not text; expected a UTF-8 CSV "
                        "or GeoJSON file")
    return "utf-8-sig" if (_valid_utf8(raw) if utf8 is None else utf8) else "cp1252"


def _refuse_nul(text: str):
    """Refuse text whose start holds NUL bytes: a binary file that happened to decode."""
    if "\x00" in text[:4096]:
        raise DataError("the file contains binary (NUL) bytes; expected CSV text or GeoJSON")


def _decode(raw: bytes, enc: str | None = None) -> tuple[str, str | None]:
    """(text, a warning when the file was not UTF-8 and how it was read)."""
    enc = enc or _text_encoding(raw)
    try:
        text = raw.decode(enc)
    except UnicodeDecodeError as exc:
        raise DataError(f"the file is neither UTF-8 nor Windows-1252 text (byte 0x{raw[exc.start]:02x} "
                        f"at position {exc.start}); save it as UTF-8 CSV or GeoJSON and upload again") from None
    _refuse_nul(text)
    if enc == "utf-8-sig":
        return text, None
    name = {"utf-32": "UTF-32", "utf-16": "UTF-16", "utf-16-le": "UTF-16 (little-endian)",
            "utf-16-be": "UTF-16 (big-endian)", "cp1252": "Windows-1252 (Latin-1)"}[enc]
    return text, (f"the file is {name} text rather than the expected UTF-8; it was decoded as "
                  "such: check that the column names and ids look right")


def _detect_format(text: str, filename: str | None, fmt: str | None) -> str:
    if fmt:
        fmt = fmt.lower()
        if fmt not in ("csv", "geojson", "parquet"):
            raise DataError(f"unknown format {fmt!r}; expected 'csv' or 'geojson' (text) or "
                            "'parquet'")
        return fmt
    if filename:
        ext = Path(filename).suffix.lower()
        if ext in CSV_EXT:
            return "csv"
        if ext in JSON_EXT:
            return "geojson"
        if ext == PARQUET_EXT:
            return "parquet"
        if ext:
            raise DataError(f"unknown file type {ext!r} ({filename}); expected .csv, .tsv, .txt, "
                            ".geojson, .json or .parquet")
    return "geojson" if text.lstrip().startswith("{") else "csv"


_EMPTY_MSG = ("the file is empty; expected a CSV with a header row such as 'lon,lat' followed by "
              "one point per line, or a GeoJSON FeatureCollection of Points")


def load_points(source, *, lon=None, lat=None, user=None, fmt: str | None = None,
                filename: str | None = None, max_rows: int = DEFAULT_MAX_ROWS,
                name: str | None = None) -> PointData:
    """Load points from a CSV, GeoJSON or Parquet path or bytes.

    CSV and Parquet columns are found by common names (lon/lng/long/longitude/x,
    lat/latitude/y, any case) unless `lon`/`lat` (names or 0-based indices) are given; `user`
    names an optional id column. GeoJSON user ids come from a property named like the CSV
    column (USER_NAMES), never `id` (a feature's own id); points without one are counted in the
    report's notes. Rows with unusable coordinates are dropped and counted in `data.report`; a
    file that is mostly unusable raises DataError instead. CSV is parsed by pyarrow, streamed
    from a file path; more than `max_rows` rows are refused before parsing.
    """
    src, filename = _locate(source, filename)
    head = _head(src)
    if _is_parquet(head, filename, fmt):
        x, y, uid, report = _parse_parquet(src, lon, lat, user, max_rows)
        encoding_warning = None
    else:
        src, head, head_text, newlines, encoding_warning = _as_utf8(src, head)
        kind = _detect_format(head_text, filename, fmt)
        if kind == "csv":
            x, y, uid, report = _parse_csv(src, head, newlines, lon, lat, user, max_rows)
        else:
            text = (src.read_bytes() if isinstance(src, Path) else src).decode("utf-8-sig")
            x, y, uid, report = _parse_geojson(text, max_rows)
    data = PointData(x, y, uid, report, name=name or filename or "upload", copy=False)
    _note_missing_ids(data)
    add_load_warnings(report, data.n, "point", encoding_warning)
    return data


def _is_parquet(head: bytes, filename: str | None, fmt: str | None) -> bool:
    """A Parquet file by its format, its extension or its magic bytes."""
    if fmt:
        return fmt.lower() == "parquet"
    ext = Path(filename).suffix.lower() if filename else ""
    return ext == PARQUET_EXT or (not ext and head.startswith(PARQUET_MAGIC))


def _as_utf8(src, head: bytes):
    """(UTF-8 source, its head, the head decoded, its newline count, the encoding warning): a UTF-8 file
    is checked in one pass and kept as it is; other encodings are decoded and re-encoded."""
    newlines, utf8, blank = _scan(src)
    if blank:
        raise DataError(_EMPTY_MSG)
    enc = _text_encoding(head, utf8)
    if enc == "utf-8-sig":
        head_text = head.decode("utf-8-sig", errors="ignore")   # a character cut at the end
        _refuse_nul(head_text)
        warning = None
    else:
        text, warning = _decode(src.read_bytes() if isinstance(src, Path) else src, enc)
        src = text.encode("utf-8")
        head, head_text = src[:HEAD_BYTES], text[:HEAD_BYTES]
        newlines = src.count(b"\n")
    if len(head) < HEAD_BYTES and (not head_text or head_text.isspace()):   # only a BOM
        raise DataError(_EMPTY_MSG)
    return src, head, head_text, newlines, warning


def add_load_warnings(report: LoadReport, n: int, what: str, encoding_warning: str | None) -> None:
    """Put first how the file was decoded when it was not UTF-8, and last a warning when there
    are too few records (`what`: 'point' or 'region') for a release that is more than noise."""
    report.warnings[:0] = [encoding_warning] if encoding_warning else []
    if n < TINY:
        report.warnings.append(
            f"only {n} {what}{'s' if n != 1 else ''}: the noise that protects people is about as "
            f"large as such counts, so a release of so few {what}s is mostly noise. Use it to try "
            "the tool, not to publish")


def _note_missing_ids(data: PointData):
    """Count the points without a user id in the report: user-level releases leave them out."""
    missing = 0 if data.users is None else int(np.count_nonzero(data.users.missing()))
    if missing:
        data.report.notes.append(f"{missing:,} points have no user id: user-level releases "
                                 "leave them out")


# ----------------------------------------------------------------------------------- CSV
def _find_column(header, wanted, candidates, role):
    lowered = [h.strip().strip('"').strip().lower() for h in header]
    if wanted is not None:
        if isinstance(wanted, (int, np.integer)):
            if not 0 <= wanted < len(header):
                raise DataError(f"{role} column index {wanted} is out of range; the file has "
                                f"{len(header)} columns: {', '.join(header)}")
            return int(wanted)
        if str(wanted).lower() in lowered:
            return lowered.index(str(wanted).lower())
        raise DataError(f"no column named {wanted!r} for {role}; the file has: {', '.join(header)}")
    for cand in candidates:
        if cand in lowered:
            return lowered.index(cand)
    return None


def _shown(header, most: int = 12, width: int = 40) -> str:
    """The header's names for a message, short: at most `most` names of at most `width`
    characters (a file that is not a table can make one huge 'name')."""
    names = [n if len(n) <= width else n[:width - 1] + "…" for n in header[:most]]
    more = len(header) - most
    return ", ".join(names) + (f" and {more:,} more" if more > 0 else "")


def _columns(header, lon, lat, user):
    """(lon, lat, user) column indices (user None when absent) and the report's column names,
    or a DataError saying which columns were found and which names were expected."""
    ilon = _find_column(header, lon, LON_NAMES, "longitude")
    ilat = _find_column(header, lat, LAT_NAMES, "latitude")
    if ilon is None or ilat is None:
        missing = " and ".join(r for r, i in (("longitude", ilon), ("latitude", ilat)) if i is None)
        raise DataError(f"no {missing} column found among: {_shown(header)}; expected columns "
                        "named lon/lng/longitude/x and lat/latitude/y, or choose them explicitly")
    if ilon == ilat:
        raise DataError(f"longitude and latitude both point to column {header[ilon]!r}")
    iuser = _find_column(header, user, USER_NAMES, "user id")
    cols = {"lon": header[ilon].strip(), "lat": header[ilat].strip()}
    if iuser is not None:
        cols["user"] = header[iuser].strip()
    return ilon, ilat, iuser, cols


def _sniff_delimiter(line: str) -> str:
    counts = {d: line.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=counts.get)
    return best if counts[best] else ","


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


def _refuse_too_many(n_rows: int, max_rows: int):
    """The row limit: refuse a file with more than `max_rows` rows."""
    if n_rows > max_rows:
        raise DataError(f"the file has {n_rows:,} rows, more than the limit of {max_rows:,}; "
                        "upload a sample or raise the limit")


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


def _checked(x, y, uid, what, n_rows, cols, dropped, first_bad, unparsed, generic):
    """Drop unusable coordinates (counting why), refuse a mostly bad file, warn about columns
    merely named x and y; returns (x, y, user ids, report) of the rows kept."""
    if not unparsed.any() and _in_range(x, y):   # a clean file: no masks of its size
        keep, hint = None, ""
    else:
        keep, hint = _validate_coords(x, y, ~unparsed, dropped)
    report = LoadReport(what, n_rows, len(x) if keep is None else int(keep.sum()), cols, dropped)
    _refuse_if_mostly_bad(report, first_bad, hint)
    if generic:
        report.warnings.append(
            "the coordinates come from columns named 'x' and 'y', which do not say they are "
            "longitude and latitude in degrees: check that the points land in the right place on "
            "the map, or name the columns under 'Column names'")
    if keep is None or keep.all():   # no copies of a clean file
        return x, y, uid, report
    if uid is not None:   # Arrow strings from CSV and Parquet, a numpy array otherwise
        uid = uid[keep] if isinstance(uid, np.ndarray) else uid.filter(pa.array(keep))
    return x[keep], y[keep], uid, report


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


def _float_values(arr: pa.Array) -> np.ndarray:
    """The values of a float64 Arrow array without nulls, as a numpy view of its data buffer
    (no copy). Why not `to_numpy`: pyarrow's conversion imports pandas when it is installed
    (0.3 s and 50 MB in each process that reads a first file), which a server process reading
    uploads then pays in the middle of a request."""
    return np.frombuffer(arr.buffers()[1], np.float64, len(arr), arr.offset * 8)


_FLOAT = r"(?i)^\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf|infinity|nan)\s*$"   # float()


def _floats(texts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, blank, not a number) of text fields, vectorised in pyarrow: blank after
    stripping spaces, else a number as Python's float() reads it (quotes around it allowed)."""
    s = pc.utf8_trim_whitespace(pa.chunked_array(texts, pa.string()))
    blank = pc.fill_null(pc.equal(s, ""), True)              # a null field is a missing one
    s = pc.utf8_trim(s, '"')
    numeric = pc.fill_null(pc.match_substring_regex(s, _FLOAT), False)
    values = pc.cast(pc.if_else(numeric, s, "nan"), pa.float64())
    return values.to_numpy(), blank.to_numpy(), pc.invert(numeric).to_numpy()


def _coords_from_texts(sx, sy, row_text, dropped, first_bad):
    """x, y and the mask of rows whose coordinates did not parse, from text fields; counts
    blank and non-numeric rows in `dropped` and keeps the first of each in `first_bad`."""
    x, blank_x, bad_x = _floats(sx)
    y, blank_y, bad_y = _floats(sy)
    blank = blank_x | blank_y
    nonnum = (bad_x | bad_y) & ~blank
    for reason, mask in (("rows with a missing coordinate", blank),
                         ("rows with a non-numeric coordinate", nonnum)):
        if mask.any():
            dropped[reason] = int(mask.sum())
            i = int(np.argmax(mask))
            first_bad[reason] = row_text(_nth(sx, i), _nth(sy, i))
    return x, y, blank | nonnum


def _nth(texts, i: int) -> str:
    """The i-th field of text chunks."""
    return pa.chunked_array(texts, pa.string())[i].as_py()


def _is_number(s: str) -> bool:
    try:
        float(s.strip().strip('"'))
        return True
    except ValueError:
        return False


def _in_range(x, y) -> bool:
    """Whether every coordinate is a longitude in [-180, 180] and latitude in [-90, 90], from
    four reductions (NaN fails the comparisons), so a clean file needs no per-row masks."""
    return bool(x.size == 0 or (-180 <= x.min() and x.max() <= 180 and -90 <= y.min()
                                and y.max() <= 90))


def _validate_coords(x, y, keep, dropped):
    """Drop non-finite and out-of-range coordinates, counting each reason; returns (keep, hint)."""
    nonfinite = keep & ~(np.isfinite(x) & np.isfinite(y))
    lon_bad = keep & ~nonfinite & ((x < -180) | (x > 180))
    lat_bad = keep & ~nonfinite & ~lon_bad & ((y < -90) | (y > 90))
    for reason, mask in (("rows with NaN or infinite coordinates", nonfinite),
                         ("rows with longitude outside [-180, 180]", lon_bad),
                         ("rows with latitude outside [-90, 90]", lat_bad)):
        if mask.any():
            dropped[reason] = dropped.get(reason, 0) + int(mask.sum())
    hint = ""
    if lat_bad.any() and np.all(np.abs(x[lat_bad]) <= 90):
        hint = " The latitude values look like longitudes: are the two columns swapped?"
    return keep & ~nonfinite & ~lon_bad & ~lat_bad, hint


def _refuse_if_mostly_bad(report: LoadReport, first_bad: dict, hint: str = ""):
    bad = report.rows_dropped
    if report.rows_loaded == 0 or bad > MAX_DROP_FRACTION * report.rows_read:
        reasons = "; ".join(f"{n:,} {why}" for why, n in report.dropped.items())
        example = f" (first bad row: {next(iter(first_bad.values()))!r})" if first_bad else ""
        raise DataError(f"{bad:,} of {report.rows_read:,} rows have unusable coordinates: {reasons}"
                        f"{example}. Expected longitude in [-180, 180] and latitude in [-90, 90], "
                        f"as decimal degrees.{hint}")


# ------------------------------------------------------------------------------- Parquet
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


# ------------------------------------------------------------------------------- GeoJSON
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
