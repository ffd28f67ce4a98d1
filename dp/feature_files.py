"""Write a release's features to the file type its name asks for, with its provenance where GIS
tools read it.

GeoJSON, GeoParquet, GeoPackage, FlatGeobuf or CSV, by the file's extension; any other is
refused in words before anything is released. Every feature carries the release's mechanism,
ε and unit of privacy in its own properties (GDAL, and so QGIS, drops a GeoJSON's top-level
members); the whole provenance block goes into the format's own metadata (GeoParquet file
metadata, GeoPackage dataset and layer metadata, FlatGeobuf layer metadata) or, for GeoJSON, its
top-level "provenance" member. A CSV is a plain table (one row per feature, the geometry as WKT
in a column GDAL reads as such) with the provenance in a sidecar `<name>.provenance.json`.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import shapely

from .rect_features import RectFeatures

FORMATS = {".geojson": "GeoJSON", ".json": "GeoJSON", ".parquet": "GeoParquet",
           ".geoparquet": "GeoParquet", ".gpkg": "GeoPackage", ".fgb": "FlatGeobuf", ".csv": "CSV"}
EXTENSIONS = ".geojson, .parquet, .gpkg, .fgb or .csv"
GDAL_DRIVERS = {"GeoPackage": "GPKG", "FlatGeobuf": "FlatGeobuf"}
GPKG_VERSION = "1.2"      # the version GDAL 3.6 (Debian 12's, QGIS 3.28's) opens without a warning


def file_format(path) -> str:
    """The format a file name asks for ("GeoJSON", "GeoParquet", ...); ValueError in words for
    any other extension."""
    ext = Path(str(path)).suffix.lower()
    if ext not in FORMATS:
        said = f"'{ext}'" if ext else "no extension"
        raise ValueError(f"{path}: cannot tell which file type to write from {said}; name the "
                         f"file {EXTENSIONS} (GeoJSON, GeoParquet, GeoPackage, FlatGeobuf, CSV)")
    return FORMATS[ext]


def writable(path) -> str:
    """`file_format`, and the optional packages its writer needs checked now (MissingExtra),
    so a command refuses before it reads or releases anything."""
    kind = file_format(path)
    if kind in GDAL_DRIVERS:
        from .geo import require
        require("geopandas", f"writing {kind}")
        require("pyogrio", f"writing {kind}")
    return kind


def stamp(block: dict) -> dict:
    """What each feature carries of the provenance: enough to read its counts right alone."""
    return {"mechanism": block["mechanism"], "epsilon": block["epsilon"],
            "unit_of_privacy": block["unit_of_privacy"],
            "software_version": block["software"]["version"]}


def release_features(rel) -> dict | RectFeatures:
    """The release's features as exported: each region's noisy count and its whole "people"
    (`dp.whole_counts`); a grid's or tree's rectangles as columns (`RectFeatures`), any other
    release's as a FeatureCollection dict."""
    table = rel.features()
    if table is not None:
        return table.with_people()
    from .whole_counts import add_people
    doc = rel.to_geojson()
    add_people(doc["features"])
    return doc


def geojson_text(doc: dict | RectFeatures, block: dict | None) -> str:
    """Features as GeoJSON text: each feature stamped, the whole block on top (neither when
    `block` is None)."""
    return geojson_bytes(doc, block).decode()


def geojson_bytes(doc: dict | RectFeatures, block: dict | None) -> bytes:
    """`geojson_text` as UTF-8 bytes, what a file gets (no decoding of a large text)."""
    mark = stamp(block) if block is not None else {}
    props = {**doc.get("properties", {})} if isinstance(doc, dict) else dict(doc.properties)
    if block is not None:
        props["provenance"] = block
    if isinstance(doc, RectFeatures):
        return doc.geojson_bytes(mark, props, default=json_default)
    return json.dumps({**doc, "properties": props,
                       "features": [{**f, "properties": {**f["properties"], **mark}}
                                    for f in doc["features"]]}, default=json_default).encode()


def write_features(doc: dict | RectFeatures, path, block: dict, kind: str | None = None) -> list[str]:
    """Write a FeatureCollection or `RectFeatures` (WGS84) to `path` in the format its name asks for (or `kind`,
    e.g. GeoParquet to a binary file), each feature stamped (`stamp`) and the provenance `block`
    in the format's metadata. Returns the files written (a CSV's sidecar too). OSError when a
    file cannot be written; MissingExtra when GeoPackage or FlatGeobuf lack the geo extra."""
    kind = kind or file_format(path)
    if kind == "GeoJSON":
        Path(path).write_bytes(geojson_bytes(doc, block))
        return [str(path)]
    mark = stamp(block)
    if isinstance(doc, RectFeatures):
        rows, geoms = doc.records(mark), doc.shapes()
    else:
        rows = [{**f["properties"], **mark} for f in doc["features"]]
        geoms = shapely.from_geojson([json.dumps(f["geometry"]) for f in doc["features"]])
    if kind == "GeoParquet":
        from .geo import write_geoparquet
        write_geoparquet(_flat(rows), geoms, path if hasattr(path, "write") else str(path),
                         {"provenance": block})
        return [str(path)]
    if kind == "CSV":
        return _write_csv(rows, geoms, Path(path), block)
    from .geo import require
    gpd = require("geopandas", f"writing {kind}")
    pyogrio = require("pyogrio", f"writing {kind}")
    frame = gpd.GeoDataFrame(_flat(rows), geometry=list(geoms), crs="OGC:CRS84")
    meta = {"provenance": json.dumps(block, default=json_default)}
    options = {"VERSION": GPKG_VERSION, "dataset_metadata": meta} if kind == "GeoPackage" else {}
    Path(path).unlink(missing_ok=True)          # a new file, not a layer added to an old one
    pyogrio.write_dataframe(frame, str(path), driver=GDAL_DRIVERS[kind], layer=Path(path).stem,
                            layer_metadata=meta, **options)
    return [str(path)]


def sidecar(path) -> Path:
    """Where a CSV's provenance goes: `cells.csv` -> `cells.provenance.json`."""
    return Path(path).with_suffix(".provenance.json")


def _write_csv(rows: list[dict], geoms, path: Path, block: dict) -> list[str]:
    names = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as out:
        w = csv.writer(out)
        w.writerow([*names, "WKT"])
        for r, wkt in zip(_flat(rows), shapely.to_wkt(geoms, rounding_precision=-1)):
            w.writerow([*("" if r.get(k) is None else r[k] for k in names), wkt])
    side = sidecar(path)
    side.write_text(json.dumps(block, indent=1, default=json_default, ensure_ascii=False), encoding="utf-8")
    return [str(path), str(side)]


def _flat(rows: list[dict]) -> list[dict]:
    """Table cells hold scalars: a list or dict value becomes its JSON text."""
    return [{k: json.dumps(v, default=json_default) if isinstance(v, (list, dict)) else _plain(v)
             for k, v in r.items()} for r in rows]


def _plain(value):
    """numpy scalars as Python numbers (JSON and table writers take those)."""
    return value.item() if isinstance(value, np.generic) else value


def json_default(value):
    """JSON for what `json` cannot write itself: numpy values as numbers or lists, else text."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    return _plain(value) if isinstance(value, np.generic) else str(value)
