"""Parse and validate uploads (CSV, GeoJSON) into PointData, with errors that say what to fix."""
from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import numpy as np

from .errors import DataError
from .points import LoadReport, PointData, user_keys

DEFAULT_MAX_ROWS = 20_000_000
MAX_DROP_FRACTION = 0.5   # above this share of bad rows the file is refused, not cleaned

LON_NAMES = ("longitude", "lon", "lng", "long", "x")
LAT_NAMES = ("latitude", "lat", "y")
USER_NAMES = ("user_id", "userid", "user", "uid")
CSV_EXT = {".csv", ".txt", ".tsv"}
JSON_EXT = {".geojson", ".json"}

_BINARY_MAGIC = {
    b"PK\x03\x04": "a ZIP archive (an .xlsx workbook or zipped shapefile?)",
    b"\x89PNG": "a PNG image",
    b"%PDF": "a PDF document",
    b"\xd0\xcf\x11\xe0": "an old Excel/Office file",
    b"\x1f\x8b": "a gzip archive",
}


def _read_source(source, filename):
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), filename
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise DataError(f"file not found: {str(path)!r}; expected a path to a CSV or GeoJSON file")
        return path.read_bytes(), filename or path.name
    raise DataError(f"expected a file path or bytes, got {type(source).__name__}")


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
TINY = 50      # fewer points than this: warn that a release would be mostly noise


def _text_encoding(raw: bytes) -> str:
    """The encoding of a text file: a byte-order mark, UTF-16 without one (every other byte
    NUL), UTF-8, else Windows-1252; binary data raises DataError."""
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
    try:
        raw.decode("utf-8")
        return "utf-8-sig"
    except UnicodeDecodeError:
        return "cp1252"


def _decode(raw: bytes) -> tuple[str, str | None]:
    """(text, a warning when the file was not UTF-8 and how it was read)."""
    enc = _text_encoding(raw)
    try:
        text = raw.decode(enc)
    except UnicodeDecodeError as exc:
        raise DataError(f"the file is neither UTF-8 nor Windows-1252 text (byte 0x{raw[exc.start]:02x} "
                        f"at position {exc.start}); save it as UTF-8 CSV or GeoJSON and upload again") from None
    if "\x00" in text[:4096]:
        raise DataError("the file contains binary (NUL) bytes; expected CSV text or GeoJSON")
    if enc == "utf-8-sig":
        return text, None
    name = {"utf-32": "UTF-32", "utf-16": "UTF-16", "utf-16-le": "UTF-16 (little-endian)",
            "utf-16-be": "UTF-16 (big-endian)", "cp1252": "Windows-1252 (Latin-1)"}[enc]
    return text, (f"the file is {name} text rather than the expected UTF-8; it was decoded as "
                  "such: check that the column names and ids look right")


def _detect_format(text: str, filename: str | None, fmt: str | None) -> str:
    if fmt:
        fmt = fmt.lower()
        if fmt not in ("csv", "geojson"):
            raise DataError(f"unknown format {fmt!r}; expected 'csv' or 'geojson'")
        return fmt
    if filename:
        ext = Path(filename).suffix.lower()
        if ext in CSV_EXT:
            return "csv"
        if ext in JSON_EXT:
            return "geojson"
        if ext:
            raise DataError(f"unknown file type {ext!r} ({filename}); expected .csv, .tsv, .txt, "
                            ".geojson or .json")
    return "geojson" if text.lstrip().startswith("{") else "csv"


def load_points(source, *, lon=None, lat=None, user=None, fmt: str | None = None,
                filename: str | None = None, max_rows: int = DEFAULT_MAX_ROWS,
                name: str | None = None) -> PointData:
    """Load points from a CSV or GeoJSON path or bytes.

    CSV columns are found by common names (lon/lng/long/longitude/x, lat/latitude/y, any case)
    unless `lon`/`lat` (names or 0-based indices) are given; `user` names an optional id column.
    GeoJSON user ids come from a property named like the CSV column (USER_NAMES), never `id`
    (a feature's own id); points without one are counted in the report's notes.
    Rows with unusable coordinates are dropped and counted in `data.report`; a file that is
    mostly unusable raises DataError instead.
    """
    raw, filename = _read_source(source, filename)
    if not raw or raw.isspace():   # not raw.strip(): no copy of a large file
        raise DataError("the file is empty; expected a CSV with a header row such as 'lon,lat' "
                        "followed by one point per line, or a GeoJSON FeatureCollection of Points")
    text, encoding_warning = _decode(raw)
    if not text or text.isspace():   # e.g. only a byte-order mark
        raise DataError("the file is empty; expected a CSV with a header row such as 'lon,lat' "
                        "followed by one point per line, or a GeoJSON FeatureCollection of Points")
    kind = _detect_format(text, filename, fmt)
    if kind == "csv":
        x, y, uid, report = _parse_csv(text, lon, lat, user, max_rows)
    else:
        x, y, uid, report = _parse_geojson(text, max_rows)
    data = PointData(x, y, uid, report, name=name or filename or "upload")
    _note_missing_ids(data)
    add_load_warnings(report, data.n, "point", encoding_warning)
    return data


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
    missing = 0 if data.user is None else int(np.count_nonzero(data.user == ""))
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


def _sniff_delimiter(line: str) -> str:
    counts = {d: line.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=counts.get)
    return best if counts[best] else ","


_LINE = re.compile(r"([^\r\n]*)(?:\r\n|\r|\n|$)")
_NON_BLANK = re.compile(r"\S")
PARSE_CHUNK_CHARS = 1 << 24


def _header_line(text):
    """The first non-blank line and the offset where the body after it starts."""
    pos = 0
    while True:
        m = _LINE.match(text, pos)
        if m.group(1).strip() or m.end() >= len(text):
            return m.group(1), m.end()
        pos = m.end()


def _count_rows(text, start, limit):
    """Non-blank lines from `start`, counted exactly only when a cheap bound exceeds `limit`."""
    if text.count("\n", start) + 1 <= limit:
        return None
    return sum(1 for m in _LINE.finditer(text, start) if m.group(1).strip())


def _loadtxt_chunks(text, start, delim, usecols):
    """np.loadtxt over text[start:] in line-aligned chunks, so the parser's copy stays small."""
    parts, n = [], len(text)
    while start < n:
        end = text.find("\n", min(start + PARSE_CHUNK_CHARS, n))
        end = n if end < 0 else end + 1
        if _NON_BLANK.search(text, start, end):
            parts.append(np.loadtxt(io.StringIO(text[start:end]), delimiter=delim,
                                    usecols=usecols, dtype=np.float64, ndmin=2, quotechar='"',
                                    comments=None))
        start = end
    return np.concatenate(parts)


def _parse_csv(text, lon, lat, user, max_rows):
    """Header and columns from the first line; a clean numeric body is parsed in C without
    splitting it into Python lines (fast, little memory); anything else takes the slow path."""
    first, start = _header_line(text)
    delim = _sniff_delimiter(first)
    header = next(csv.reader([first], delimiter=delim))
    if all(_is_number(h) for h in header):
        raise DataError("the first line has no column names; expected a header row such as "
                        "'lon,lat' (longitude and latitude in decimal degrees)")
    ilon = _find_column(header, lon, LON_NAMES, "longitude")
    ilat = _find_column(header, lat, LAT_NAMES, "latitude")
    if ilon is None or ilat is None:
        missing = " and ".join(r for r, i in (("longitude", ilon), ("latitude", ilat)) if i is None)
        raise DataError(f"no {missing} column found among: {', '.join(header)}; expected columns "
                        "named lon/lng/longitude/x and lat/latitude/y, or choose them explicitly")
    if ilon == ilat:
        raise DataError(f"longitude and latitude both point to column {header[ilon]!r}")
    iuser = _find_column(header, user, USER_NAMES, "user id")
    if not _NON_BLANK.search(text, start):
        raise DataError("the file has a header but no data rows; expected one point per line "
                        "below the header")
    n_rows = _count_rows(text, start, max_rows)
    if n_rows is not None and n_rows > max_rows:
        raise DataError(f"the file has {n_rows:,} rows, more than the limit of {max_rows:,}; "
                        "upload a sample or raise the limit")
    cols = {"lon": header[ilon].strip(), "lat": header[ilat].strip()}
    generic = lon is None and lat is None and {cols["lon"].lower(), cols["lat"].lower()} == {"x", "y"}
    if iuser is not None:
        cols["user"] = header[iuser].strip()
    dropped: dict[str, int] = {}
    body = None
    try:   # fast path: a clean numeric file, parsed in C
        xy = _loadtxt_chunks(text, start, delim, (ilon, ilat))
        x, y = xy[:, 0], xy[:, 1]
        first_bad = {}
        unparsed = np.zeros(len(x), bool)
    except ValueError:
        body = [ln for ln in text[start:].splitlines() if ln.strip()]
        x, y, first_bad, dropped, unparsed = _parse_csv_tolerant(body, delim, ilon, ilat,
                                                                 len(header))
    n_rows = len(x)
    uid = None
    if iuser is not None:
        body = body or [ln for ln in text[start:].splitlines() if ln.strip()]
        uid = _column_strings(body, delim, iuser)
    keep = ~unparsed   # rows already counted as dropped; a parsed NaN is counted below
    keep, hint = _validate_coords(x, y, keep, dropped)
    report = LoadReport("CSV", n_rows, int(keep.sum()), cols, dropped)
    _refuse_if_mostly_bad(report, first_bad, hint)
    if generic:
        report.warnings.append(
            "the coordinates come from columns named 'x' and 'y', which do not say they are "
            "longitude and latitude in degrees: check that the points land in the right place on "
            "the map, or name the columns under 'Column names'")
    return x[keep], y[keep], (None if uid is None else uid[keep]), report


def _is_number(s: str) -> bool:
    try:
        float(s.strip().strip('"'))
        return True
    except ValueError:
        return False


def _column_strings(body, delim, i):
    rows = csv.reader(body, delimiter=delim)
    return np.array([r[i].strip() if len(r) > i else "" for r in rows], dtype=object)


def _parse_csv_tolerant(body, delim, ilon, ilat, n_cols):
    """Slow path for files the C parser refused: find each bad row and say why."""
    rows = list(csv.reader(body, delimiter=delim))
    need = max(ilon, ilat) + 1
    short = np.array([len(r) < need for r in rows])
    sx = np.array([r[ilon].strip() if len(r) > ilon else "" for r in rows], dtype=object)
    sy = np.array([r[ilat].strip() if len(r) > ilat else "" for r in rows], dtype=object)
    x, badx = _to_float(sx)
    y, bady = _to_float(sy)
    empty = ((sx == "") | (sy == "")) & ~short
    nonnum = (badx | bady) & ~empty & ~short
    dropped = {}
    first_bad = {}
    for reason, mask in (("rows with too few fields", short), ("rows with a missing coordinate", empty),
                         ("rows with a non-numeric coordinate", nonnum)):
        if mask.any():
            dropped[reason] = int(mask.sum())
            i = int(np.argmax(mask))
            first_bad[reason] = (i, delim.join(rows[i]))
    bad = short | empty | nonnum
    x[bad] = np.nan
    y[bad] = np.nan
    return x, y, first_bad, dropped, bad


def _to_float(strings):
    vals = np.full(len(strings), np.nan)
    bad = np.zeros(len(strings), bool)
    for i, s in enumerate(strings):   # error path only; clean files take np.loadtxt
        try:
            vals[i] = float(s.strip('"'))
        except ValueError:
            bad[i] = True
    return vals, bad


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
        example = ""
        if first_bad:
            _, (_, row) = next(iter(first_bad.items()))
            example = f" (first bad row: {row!r})"
        raise DataError(f"{bad:,} of {report.rows_read:,} rows have unusable coordinates: {reasons}"
                        f"{example}. Expected longitude in [-180, 180] and latitude in [-90, 90], "
                        f"as decimal degrees.{hint}")


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
