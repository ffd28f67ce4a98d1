"""A release's rectangles as columns: cells or leaves exported without one dict per feature.

A grid or tree release has thousands to millions of axis-aligned rectangles. `RectFeatures`
keeps them as (L, 4) bounds and one array per property; GeoJSON text is written column by
column (orjson writes each column at C speed, numpy interleaves the pieces, one join), the
table formats take the columns and shapely boxes as they are, and `to_dict` gives the same
FeatureCollection as a dict for code that wants one.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import shapely

from .whole_counts import whole_nonnegative


def dumps(value, default=None) -> bytes:
    """JSON bytes of `value` (numpy arrays and scalars as numbers, NaN as null). orjson is
    imported here, on the first export, not with `import dp`."""
    import orjson
    return orjson.dumps(value, default=default, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def _column_texts(values: np.ndarray) -> list[bytes]:
    """Each value's JSON text: one orjson call over the column, split at its commas (numbers
    hold none)."""
    values = np.ascontiguousarray(values)
    if values.dtype.kind not in "iuf":
        raise TypeError(f"a feature column holds numbers, not {values.dtype}")
    return dumps(values)[1:-1].split(b",") if values.size else []


@dataclass
class RectFeatures:
    """Axis-aligned rectangles (WGS84 west, south, east, north) with numeric property columns,
    in order, and the collection's own properties (public metadata)."""
    bounds: np.ndarray
    columns: dict[str, np.ndarray]
    properties: dict = field(default_factory=dict)

    def __post_init__(self):
        self.bounds = np.asarray(self.bounds, dtype=np.float64).reshape(-1, 4)
        self.columns = {k: np.asarray(v) for k, v in self.columns.items()}

    def __len__(self) -> int:
        return len(self.bounds)

    def with_people(self) -> RectFeatures:
        """The same features with "people": whole, non-negative counts keeping each collection's
        rounded total (one collection per value of a "grid" column, else all), as
        `dp.whole_counts.add_people` gives dicts."""
        counts = self.columns["noisy_count"].astype(np.float64)
        people = np.zeros(len(self), dtype=np.int64)
        groups = self.columns.get("grid")
        for g in (np.unique(groups) if groups is not None else [None]):
            at = slice(None) if g is None else groups == g
            people[at] = whole_nonnegative(counts[at])
        return replace(self, columns={**self.columns, "people": people})

    def shapes(self) -> np.ndarray:
        """The rectangles as shapely polygons (counter-clockwise, as the GeoJSON writes them)."""
        w, s, e, n = self.bounds.T
        return shapely.box(w, s, e, n, ccw=True)

    def records(self, extra: dict | None = None) -> list[dict]:
        """One dict of properties per feature (Python numbers), each with `extra` added."""
        names = list(self.columns)
        values = zip(*(self.columns[k].tolist() for k in names)) if names else ([] for _ in range(len(self)))
        return [{**dict(zip(names, row)), **(extra or {})} for row in values]

    def _rings(self) -> list[bytes]:
        """Each rectangle's closed ring as JSON text without its outer brackets, "w,s],[e,s],
        [e,n],[w,n],[w,s": one orjson call over all of them, split where one ends."""
        if not len(self):
            return []
        ring = np.ascontiguousarray(self.bounds[:, [0, 1, 2, 1, 2, 3, 0, 3, 0, 1]]).reshape(-1, 5, 2)
        return dumps(ring)[3:-3].split(b"]],[[")

    def to_dict(self) -> dict:
        """The FeatureCollection as a dict, as `Release.to_geojson` returns it."""
        feats = [{"type": "Feature", "properties": props, "geometry": {
            "type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}}
                 for props, (w, s, e, n) in zip(self.records(), self.bounds.tolist())]
        return {"type": "FeatureCollection", "features": feats, "properties": self.properties}

    def geojson_bytes(self, extra: dict | None = None, properties: dict | None = None,
                      default=None) -> bytes:
        """The FeatureCollection as GeoJSON (UTF-8), each feature's properties followed by the
        constant `extra` ones, the collection's properties replaced by `properties` if given;
        `default` writes what orjson cannot."""
        tail = dumps(extra, default)[1:-1] if extra else b""
        names = list(self.columns)
        pieces: list = []
        for i, name in enumerate(names):
            pieces += [(b'{"type":"Feature","properties":{' if i == 0 else b",") + dumps(name) + b":",
                       _column_texts(self.columns[name])]
        sep = b"," if names and tail else b""
        pieces += [(b"" if names else b'{"type":"Feature","properties":{') + sep + tail
                   + b'},"geometry":{"type":"Polygon","coordinates":[[[', self._rings(), b"]]]}},"]
        grid = np.empty((len(self), len(pieces)), dtype=object)
        for k, piece in enumerate(pieces):
            grid[:, k] = piece
        body = b"".join(grid.ravel().tolist())[:-1] if len(self) else b""
        props = self.properties if properties is None else properties
        return (b'{"type":"FeatureCollection","properties":' + dumps(props, default)
                + b',"features":[' + body + b"]}")
