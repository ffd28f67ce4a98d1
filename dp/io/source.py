"""Reading an upload: where its bytes are, their format and text encoding, refused with words
when they are not what a loader reads (a binary file, NUL bytes, an unknown encoding)."""
from __future__ import annotations

import codecs
import os
from pathlib import Path

from ..errors import DataError

DEFAULT_MAX_ROWS = 20_000_000

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


_EMPTY_MSG = ("the file is empty; expected a CSV with a header row such as 'lon,lat' followed by "
              "one point per line, or a GeoJSON FeatureCollection of Points")
