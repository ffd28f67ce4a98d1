"""Finding the coordinate and user columns, and checking coordinates row by row (vectorised):
what every points loader shares."""
from __future__ import annotations

import numpy as np

from ..errors import DataError
from ..points import LoadReport, PointData

MAX_DROP_FRACTION = 0.5   # above this share of bad rows the file is refused, not cleaned
LON_NAMES = ("longitude", "lon", "lng", "long", "x")
LAT_NAMES = ("latitude", "lat", "y")
USER_NAMES = ("user_id", "userid", "user", "uid")
TINY = 50      # fewer points than this: warn that a release would be mostly noise


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
        uid = uid[keep] if isinstance(uid, np.ndarray) else uid.filter(keep)
    return x[keep], y[keep], uid, report


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
        reasons = report.dropped_text()
        example = f" (first bad row: {next(iter(first_bad.values()))!r})" if first_bad else ""
        raise DataError(f"{bad:,} of {report.rows_read:,} rows have unusable coordinates: {reasons}"
                        f"{example}. Expected longitude in [-180, 180] and latitude in [-90, 90], "
                        f"as decimal degrees.{hint}")


# ------------------------------------------------------------------------------- Parquet


def _refuse_too_many(n_rows: int, max_rows: int):
    """The row limit: refuse a file with more than `max_rows` rows."""
    if n_rows > max_rows:
        raise DataError(f"the file has {n_rows:,} rows, more than the limit of {max_rows:,}; "
                        "upload a sample or raise the limit")
