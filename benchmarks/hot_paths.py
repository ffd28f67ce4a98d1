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
twice per call, the areas each time); the summed-area table is made before timing. And small
rectangles, whose few noise terms are simulated (one term: its exact quantile), asked again as
the page asks at each render: the simulated quantiles kept per release (now) and dropped before
each call (before).

**Grid answers** (`Release.answer_many` of a uniform grid, the evaluation panel's workloads and
every answered rectangle): 100,000 rectangles of 1% of the box on a UG release of about 1000 x
1000 cells, from the release's summed-area table (fractional edges bilinear), beside its floor
(the rectangles rounded to whole cells of the same table: their cell coordinates, then four
integer lookups) and beside the dense overlap vectors it replaced (a1^T H a2 per
rectangle, on the first 1,000 rectangles only); the answers now and before are checked equal.

**Loading Parquet** (`dp.load_points` of a `lon, lat` Parquet file of --points rows, as an
upload or `python -m dp release` reads it) beside pyarrow's and polars' plain reads to float64
numpy columns, each in a fresh process: seconds and peak memory above the process with its
reader imported (VmHWM, reset after the imports), in bytes per point; best of --repeat.

**The adaptive release of points in memory** (`python -m dp release --mechanism adaptive`): its
probe and the chosen mechanism read counts of nested grids, binned from the points once; beside
its floor, one binning pass plus the same release on points already binned.

    python benchmarks/hot_paths.py [--points 10000000] [--repeat 3]
                                   [--only export interval grid parquet adaptive]
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import dp  # noqa: E402
from dp.feature_files import geojson_text, json_default, release_features, stamp  # noqa: E402
from dp.provenance import provenance  # noqa: E402
from dp.queries import cell_coords, overlap_vectors  # noqa: E402
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


def stamped_dicts(rel, block) -> dict:
    """The FeatureCollection as the writer before the column one built it: one dict per
    feature, whole people added, each stamped, the provenance on top."""
    doc = rel.features().to_dict()
    add_people(doc["features"])
    mark = stamp(block)
    return {**doc, "properties": {**doc["properties"], "provenance": block},
            "features": [{**f, "properties": {**f["properties"], **mark}} for f in doc["features"]]}


def dicts_json(rel, block) -> str:
    """The writer before the column one: the dicts, then `json.dumps`."""
    return json.dumps(stamped_dicts(rel, block), default=json_default)


def dicts_orjson(rel, block) -> str:
    """The same dicts, serialized by orjson."""
    return orjson.dumps(stamped_dicts(rel, block), default=json_default,
                        option=orjson.OPT_SERIALIZE_NUMPY).decode()


def columns(rel, block) -> str:
    """The column writer, as the exports call it."""
    return geojson_text(release_features(rel), block)


WRITERS = (("one dict per feature, json.dumps (before)", dicts_json),
           ("one dict per feature, orjson", dicts_orjson),
           ("columns: dp.rect_features (now)", columns))


def timed(fn, repeat: int) -> tuple[float, float, str]:
    """Best wall and CPU seconds of `repeat` calls, and the last output (the garbage collector
    on, as in an export: a writer making millions of objects pays for its collections)."""
    walls, cpus = [], []
    for _ in range(repeat):
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), out


def digest(text: str) -> str:
    """The parsed document's fingerprint (keys sorted), to check writers agree without keeping
    a million parsed features."""
    return hashlib.sha256(orjson.dumps(json.loads(text), option=orjson.OPT_SORT_KEYS)).hexdigest()


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
            mb, same = len(text) / 1e6, digest(text)
            del text
            reference = same if reference is None else reference
            rows.append((name, wall, cpu, mb, same == reference))
        fastest = min(r[1] for r in rows)
        for name, wall, cpu, mb, same in rows:
            print(f"| {mech} | {len(rel.features()):,} | {name} | {wall:.2f} | {cpu:.2f} | {mb:.0f} | "
                  f"{wall / fastest:.2f} | {'yes' if same else 'NO'} |")


def interval_table(n: int, calls: int = 200) -> None:
    data, box = city_points(n)
    rel = dp.release("privtree", data, box, 1.0)
    rects = dp.random_workload(box, calls, area_frac=0.01, rng=1)
    small = dp.random_workload(box, calls, area_frac=1e-5, rng=2)
    rel.interval(rects[0])

    def kept(workload):
        return lambda: [rel.interval(r) for r in workload]

    def dropped():
        out = []
        for r in rects:
            rel._leaf_frame = rel._last_fractions = None
            out.append(rel.interval(r))
        return out

    def simulated_each_call():
        out = []
        for r in small:
            rel.__dict__.pop("_half_widths", None)
            out.append(rel.interval(r))
        return out
    terms = [rel.noise_terms(r) for r in small]
    few = sum(t is not None and 1 < np.count_nonzero(t[0]) <= 64 for t in terms)
    one = sum(t is not None and np.count_nonzero(t[0]) == 1 for t in terms)
    print(f"\n### interval() on a PrivTree release of {n:,} points ({rel.n_leaves:,} leaves), {calls} "
          f"rectangles\n\n1% rectangles (many leaves: the normal approximation), and rectangles of "
          f"0.001% asked again as the page does at each render ({few} of them simulated, {one} with "
          f"one term and its exact quantile)\n\n| path | ms per call (wall) | CPU ms | ÷ fastest of its "
          f"rectangles | same intervals |\n|---|---|---|---|---|")
    for label, pairs in (("1%", (("frame and last fractions kept (now)", kept(rects)),
                                 ("recomputed each call (before)", dropped))),
                         ("0.001%", (("simulated quantiles kept per release (now)", kept(small)),
                                     ("simulated at each call (before)", simulated_each_call)))):
        rows = [(name, *timed(fn, 3)) for name, fn in pairs]
        fastest = min(r[1] for r in rows)
        for name, wall, cpu, out in rows:
            print(f"| {label}: {name} | {1000 * wall / calls:.2f} | {1000 * cpu / calls:.2f} | "
                  f"{wall / fastest:.2f} | {'yes' if np.allclose(out, rows[0][3]) else 'NO'} |")


def grid_table(n: int, repeat: int, queries: int = 100_000, dense: int = 1_000) -> None:
    data, box = city_points(n)
    rel = dp.release("ug", data, box, 1.0, seed=np.random.default_rng(0))
    rects = dp.random_workload(box, queries, area_frac=0.01, rng=2)
    rel.answer_many(rects[:1])                        # the release's summed-area table, made once
    g, sat = rel.grid, rel._sat

    def floor():
        cells = np.rint(cell_coords(box, g, rects)).astype(np.int64)     # x0, y0, x1, y1, whole cells
        return sat[cells[:, 3], cells[:, 2]] - sat[cells[:, 1], cells[:, 2]] \
            - sat[cells[:, 3], cells[:, 0]] + sat[cells[:, 1], cells[:, 0]]

    def overlap_vectors_before():
        ay, ax = overlap_vectors(g, rects[:dense])
        return ((ay @ rel.counts) * ax).sum(axis=1)
    rows = [("summed-area table, bilinear edges (now)", queries, *timed(lambda: rel.answer_many(rects), repeat)),
            ("floor: whole cells, four lookups each", queries, *timed(floor, repeat)),
            ("dense overlap vectors (before)", dense, *timed(overlap_vectors_before, 1))]
    same = np.allclose(rows[0][4][:dense], rows[2][4], rtol=1e-9, atol=1e-6)
    fastest = min(r[2] / r[1] for r in rows)
    print(f"\n### Grid answers: {queries:,} rectangles of 1% on a {g.gx} x {g.gy} UG release\n\n"
          f"| path | rectangles | µs per rectangle (wall) | CPU µs | ÷ fastest |\n|---|---|---|---|---|")
    for name, q, wall, cpu, _ in rows:
        print(f"| {name} | {q:,} | {1e6 * wall / q:.2f} | {1e6 * cpu / q:.2f} | {wall / q / fastest:.2f} |")
    print(f"\nanswers now and before the same on the first {dense:,}: {'yes' if same else 'NO'}")


def adaptive_table(n: int, repeat: int) -> None:
    """The adaptive release of n points held in memory, from a fresh PointData each time (as
    the command line does), beside its floor: one binning pass of the points on the base grid,
    plus the same release once the points are binned (a second release on the same data)."""
    data, box = city_points(n)
    base = dp.UniformGrid(box, 1024)

    def fresh():
        return dp.release("adaptive", dp.PointData(data.x, data.y), box, 1.0, seed=np.random.default_rng(0))

    def binned_once():
        return base.histogram(data.x, data.y)

    kept = dp.PointData(data.x, data.y)
    dp.release("adaptive", kept, box, 1.0, seed=np.random.default_rng(0))
    rows = [(name, *timed(fn, repeat)) for name, fn in (
        ("adaptive release, points in memory (now)", fresh),
        ("one binning pass on its 1,024-cell base grid", binned_once),
        ("the same release, points already binned", lambda: dp.release(
            "adaptive", kept, box, 1.0, seed=np.random.default_rng(0))))]
    floor = rows[1][1] + rows[2][1]
    print(f"\n### The adaptive release of {n:,} points in memory ({rows[0][3].diagnostics['chosen']} "
          f"chosen)\n\n| path | wall s | CPU s | ÷ floor (one pass + the binned release) |\n|---|---|---|---|")
    for name, wall, cpu, _ in rows:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {wall / floor:.2f} |")


def _parquet_dp(path):
    data = dp.load_points(path, max_rows=10**9)
    return data.x, data.y


def _parquet_pyarrow(path):
    import pyarrow.parquet as pq
    t = pq.read_table(path, columns=["lon", "lat"])
    return t.column("lon").to_numpy(), t.column("lat").to_numpy()


def _parquet_polars(path):
    import polars as pl
    df = pl.read_parquet(path, columns=["lon", "lat"])
    return df["lon"].to_numpy(), df["lat"].to_numpy()


PARQUET_READERS = {"dp.load_points": ("dp", _parquet_dp),
                   "pyarrow.parquet.read_table": ("pyarrow.parquet", _parquet_pyarrow),
                   "polars.read_parquet": ("polars", _parquet_polars)}


def parquet_worker(reader: str, path: str) -> dict:
    """Seconds and peak bytes per point of one read, in this (fresh) process."""
    import importlib

    from speed import _peak_rss, _reset_peak_rss
    module, read = PARQUET_READERS[reader]
    importlib.import_module(module)
    base = _reset_peak_rss()
    t0 = time.perf_counter()
    x, y = read(path)
    dt = time.perf_counter() - t0
    assert np.isfinite(x).all() and len(x) == len(y)
    return {"s": dt, "bytes_per_point": (_peak_rss() - base) * 1024 / len(x)}


def parquet_table(n: int, repeat: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    data, _ = city_points(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "points.parquet")
        pq.write_table(pa.table({"lon": data.x, "lat": data.y}), path)
        del data
        rows = []
        for reader in PARQUET_READERS:
            runs = []
            for _ in range(repeat):
                out = subprocess.run([sys.executable, __file__, "--parquet-worker", reader, path],
                                     capture_output=True, text=True)
                if out.returncode:
                    break                                # the reader is not installed
                runs.append(json.loads(out.stdout))
            if runs:
                rows.append((reader, min(r["s"] for r in runs), min(r["bytes_per_point"] for r in runs)))
    fastest = min(r[1] for r in rows)
    print(f"\n### Loading a Parquet file of {n:,} points (lon, lat), best of {repeat}\n\n"
          f"| reader | s | ÷ fastest | peak B/point |\n|---|---|---|---|")
    for reader, sec, bpp in rows:
        print(f"| {reader} | {sec:.2f} | {sec / fastest:.2f} | {bpp:.1f} |")


TABLES = ("export", "interval", "grid", "parquet", "adaptive")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=TABLES, default=TABLES)
    ap.add_argument("--parquet-worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.parquet_worker:
        print(json.dumps(parquet_worker(*args.parquet_worker)))
        return
    if "export" in args.only:
        export_table(args.points, args.repeat)
    if "interval" in args.only:
        interval_table(args.points)
    if "grid" in args.only:
        grid_table(args.points, args.repeat)
    if "parquet" in args.only:
        parquet_table(args.points, args.repeat)
    if "adaptive" in args.only:
        adaptive_table(args.points, args.repeat)


if __name__ == "__main__":
    main()
