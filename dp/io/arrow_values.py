"""Coordinates from Arrow columns, for the CSV and Parquet readers: float columns as numpy views,
text columns parsed as Python's float() reads them, in pyarrow (apart from `columns` so that
`import dp` does not import pyarrow)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _float_values(arr: pa.Array) -> np.ndarray:
    """The values of a float64 Arrow array without nulls, as a numpy view of its data buffer
    (no copy). Why not `to_numpy`: pyarrow's conversion imports pandas when it is installed
    (0.3 s and 50 MB in each process that reads a first file), which a server process reading
    uploads then pays in the middle of a request."""
    return np.frombuffer(arr.buffers()[1], np.float64, len(arr), arr.offset * 8)


def _floats_of(chunk: pa.Array) -> np.ndarray:
    """A numeric Arrow array as float64 values (a view where it already is one), a null as NaN.
    safe=False: an integer beyond 2**53 becomes the nearest float (far out of any coordinate
    range, so dropped as such) instead of an ArrowInvalid."""
    if chunk.type != pa.float64():
        chunk = chunk.cast(pa.float64(), safe=False)
    if chunk.null_count:
        chunk = pc.fill_null(chunk, float("nan"))
    return _float_values(chunk)


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
