"""Paths people wait on, each beside its floor or fastest alternative, measured in one run.

**Exporting a release as GeoJSON** (the command line's `--output x.geojson`, the app's and the
public page's downloads): the text of a release's rectangles with their stamp, provenance and
whole people, written three ways: one dict per feature and `json.dumps` (the writer before
`dp.rect_features`), the same dicts and orjson (the fastest serializer of dicts), and the column
writer (`dp.feature_files.geojson_text` on `RectFeatures`). Each parsed output is checked equal
to the first's. Best of --repeat, wall and CPU seconds; ratios to the fastest.

**An interval on a tree release** (`Release.interval`, on every answered query of the page):
per call on a PrivTree release, with the leaves' frame and the last rectangle's overlap
fractions kept (now) and with both dropped before each call (as before: the fractions computed
twice per call, the areas each time); the summed-area table is made before timing.

    python benchmarks/hot_paths.py [--points 10000000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
from dp.feature_files import geojson_text, json_default, release_features, stamp  # noqa: E402
from dp.provenance import provenance  # noqa: E402
from dp.whole_counts import add_people  # noqa: E402


def city_points(n: int, seed: int = 0) -> tuple[dp.PointData, dp.Domain]:
    """n points: a dense centre, 40 towns and an even background over a 1 x 1 degree box."""
    rng = np.random.default_rng(seed)
    kind = rng.choice(3, size=n, p=[0.4, 0.4, 0.2])
    towns = rng.uniform(0.1, 0.9, (40, 2))
    which = towns[rng.integers(0, 40, n)]
    x = np.where(kind == 0, 0.5 + rng.normal(0, 0.05, n),
                 np.where(kind == 1, which[:, 0] + rng.normal(0, 0.01, n), rng.uniform(0, 1, n)))
    y = np.where(kind == 0, 0.5 + rng.normal(0, 0.05, n),
                 np.where(kind == 1, which[:, 1] + rng.normal(0, 0.01, n), rng.uniform(0, 1, n)))
    x, y = np.clip(x, 0, 1), np.clip(y, 0, 1)
    return dp.PointData(x, y), dp.Domain(0.0, 0.0, 1.0, 1.0, name="benchmark box")


def dicts_json(rel, block) -> str:
    """The writer before the column one: one dict per feature, then `json.dumps`."""
    doc = rel.features().to_dict()
    add_people(doc["features"])
    mark = stamp(block)
    return json.dumps({**doc, "properties": {**doc["properties"], "provenance": block},
                       "features": [{**f, "properties": {**f["properties"], **mark}}
                                    for f in doc["features"]]}, default=json_default)


def dicts_orjson(rel, block) -> str:
    """The same dicts, serialized by orjson."""
    doc = rel.features().to_dict()
    add_people(doc["features"])
    mark = stamp(block)
    return orjson.dumps({**doc, "properties": {**doc["properties"], "provenance": block},
                         "features": [{**f, "properties": {**f["properties"], **mark}}
                                      for f in doc["features"]]},
                        default=json_default, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def columns(rel, block) -> str:
    """The column writer, as the exports call it."""
    return geojson_text(release_features(rel), block)


WRITERS = (("one dict per feature, json.dumps (before)", dicts_json),
           ("one dict per feature, orjson", dicts_orjson),
           ("columns: dp.rect_features (now)", columns))


def timed(fn, repeat: int) -> tuple[float, float, str]:
    """Best wall and CPU seconds of `repeat` calls, and the last output."""
    walls, cpus = [], []
    for _ in range(repeat):
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), out


def export_table(n: int, repeat: int) -> None:
    data, box = city_points(n)
    print(f"\n### GeoJSON export of a release ({n:,} points)\n\n| release | features | writer | "
          f"wall s | CPU s | MB | ÷ fastest (wall) | same document |\n|---|---|---|---|---|---|---|---|")
    for mech, eps in (("privtree", 1.0), ("ug", 1.0)):
        rel = dp.release(mech, data, box, eps)
        block = provenance(rel)
        rows, reference = [], None
        for name, fn in WRITERS:
            wall, cpu, text = timed(lambda: fn(rel, block), repeat)
            parsed = json.loads(text)
            reference = parsed if reference is None else reference
            rows.append((name, wall, cpu, len(text) / 1e6, parsed == reference))
        fastest = min(r[1] for r in rows)
        for name, wall, cpu, mb, same in rows:
            print(f"| {mech} | {len(rel.features()):,} | {name} | {wall:.2f} | {cpu:.2f} | {mb:.0f} | "
                  f"{wall / fastest:.2f} | {'yes' if same else 'NO'} |")


def interval_table(n: int, calls: int = 200) -> None:
    data, box = city_points(n)
    rel = dp.release("privtree", data, box, 1.0)
    rects = dp.random_workload(box, calls, area_frac=0.01, rng=1)
    rel.interval(rects[0])

    def kept():
        return [rel.interval(r) for r in rects]

    def dropped():
        out = []
        for r in rects:
            rel._leaf_frame = rel._last_fractions = None
            out.append(rel.interval(r))
        return out
    rows = [(name, *timed(fn, 3)) for name, fn in (("frame and last fractions kept (now)", kept),
                                                    ("recomputed each call (before)", dropped))]
    fastest = min(r[1] for r in rows)
    print(f"\n### interval() on a PrivTree release of {n:,} points ({rel.n_leaves:,} leaves), {calls} "
          f"rectangles of 1%\n\n| path | ms per call (wall) | CPU ms | ÷ fastest | same intervals |"
          f"\n|---|---|---|---|---|")
    for name, wall, cpu, out in rows:
        print(f"| {name} | {1000 * wall / calls:.2f} | {1000 * cpu / calls:.2f} | {wall / fastest:.2f} | "
              f"{'yes' if np.allclose(out, rows[0][3]) else 'NO'} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    export_table(args.points, args.repeat)
    interval_table(args.points)


if __name__ == "__main__":
    main()
