"""Write assets/world_outlines.json: country borders and coastlines as GeoJSON lines, the map's
offline geography (drawn only when base-map tiles cannot be loaded).

The source is Natural Earth (public domain) as TopoJSON in the `world-atlas` npm package
(version 2.0.2, file countries-10m.json). Each topology arc is a border or coastline drawn
once; arcs are delta-decoded with the topology's transform and rounded to 3 decimals (~100 m):

    npm pack world-atlas@2.0.2 && tar xzf world-atlas-2.0.2.tgz
    python scripts/world_outlines.py package/countries-10m.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "assets" / "world_outlines.json"


def arcs_to_lines(topology: dict, decimals: int = 3) -> list[list[list[float]]]:
    """Every arc of a quantized TopoJSON topology as a list of [lon, lat] points."""
    scale = np.asarray(topology["transform"]["scale"], dtype=np.float64)
    shift = np.asarray(topology["transform"]["translate"], dtype=np.float64)
    lines = []
    for arc in topology["arcs"]:
        pts = np.cumsum(np.asarray(arc, dtype=np.float64), axis=0) * scale + shift
        pts = np.round(pts, decimals)
        keep = np.r_[True, np.any(np.diff(pts, axis=0) != 0, axis=1)]   # drop repeats
        if keep.sum() >= 2:
            lines.append(pts[keep].tolist())
    return lines


def main(source: str) -> None:
    lines = arcs_to_lines(json.loads(Path(source).read_text()))
    doc = {"type": "FeatureCollection", "features": [{
        "type": "Feature", "properties": {"source": "Natural Earth via world-atlas 2.0.2"},
        "geometry": {"type": "MultiLineString", "coordinates": lines}}]}
    OUT.write_text(json.dumps(doc, separators=(",", ":")))
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.1f} MB, {len(lines):,} lines)")


if __name__ == "__main__":
    main(sys.argv[1])
