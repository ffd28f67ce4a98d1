"""Points beyond memory: files -> counts (dp.aggregate) -> release -> answered queries.

Writes N clustered city points (default 1e8) as Parquet or CSV parts in a scratch folder
(DuckDB writes them; not timed), then runs each stage in a fresh subprocess so its peak RSS
(VmHWM) is its own:
  aggregate   dp.aggregate over the parts with DuckDB (1 GB memory limit) and with Dask
              (a LocalCluster of 2 worker processes; the workers' peak RSS is reported too),
              beside a bare DuckDB GROUP BY of floor(cell) (no exact edge rule, no report)
  release     HTF, PrivTree and DAWA from the saved counts, and 2,000 queries answered
Prints a table of seconds, peak MB and the ratio to the fastest of each stage, and the end to
end time (aggregate with DuckDB + the slowest release). Usage:
    python benchmarks/scale.py [--points 1e8] [--format parquet|csv] [--parts 8]
                               [--engines duckdb,dask] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402

DOMAIN = dp.PRESETS["New York (Manhattan & Brooklyn)"]
CELLS = 1024
MECHANISMS = ("htf", "privtree", "dawa")
QUERIES = 2_000


def write_points(folder: Path, n: int, parts: int, fmt: str) -> None:
    """n points, half in 20 Gaussian clusters, half uniform over the box, as `parts` files."""
    import duckdb

    d = DOMAIN
    per = n // parts
    with duckdb.connect() as con:
        con.execute("SET enable_progress_bar = false")
        for p in range(parts):
            sql = f"""
                SELECT CASE WHEN i % 2 = 0 THEN {d.west} + random() * {d.width}
                       ELSE {d.west} + ((hash(i % 20) % 1000) / 1000.0
                            + 0.03 * sqrt(-2 * ln(random())) * cos(2 * pi() * random())) * {d.width}
                       END AS lon,
                       CASE WHEN i % 2 = 0 THEN {d.south} + random() * {d.height}
                       ELSE {d.south} + ((hash(i % 20 + 7) % 1000) / 1000.0
                            + 0.03 * sqrt(-2 * ln(random())) * cos(2 * pi() * random())) * {d.height}
                       END AS lat
                FROM range({p * per}, {(p + 1) * per}) t(i)"""
            out = folder / f"part-{p:03d}.{fmt}"
            opts = "(FORMAT parquet)" if fmt == "parquet" else "(HEADER, DELIMITER ',')"
            con.execute(f"COPY ({sql}) TO '{out}' {opts}")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage(kind: str, folder: str, fmt: str, engine: str = "") -> dict:
    """One stage, in this (fresh) process: seconds and peak MB."""
    pattern = str(Path(folder) / f"part-*.{fmt}")
    if kind == "aggregate":
        t = time.perf_counter()
        extra = {}
        if engine == "dask":
            from distributed import Client, LocalCluster
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
            extra["client"] = Client(cluster)
            t = time.perf_counter()     # the cluster's start is not the aggregation's
        counts = dp.aggregate(pattern, DOMAIN, CELLS, engine=engine, **extra)
        seconds = time.perf_counter() - t
        workers = 0.0
        if engine == "dask":
            peaks = extra["client"].run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
            workers = max(peaks.values()) / 1024
            extra["client"].close()
            cluster.close()
        counts.save(Path(folder) / "counts.npz")
        return {"seconds": seconds, "peak_mb": _peak_mb(), "workers_mb": workers, "n": counts.n}
    if kind == "bare":
        import duckdb
        d = DOMAIN
        t = time.perf_counter()
        with duckdb.connect() as con:
            con.execute("SET enable_progress_bar = false")
            reader = f"read_{fmt}('{pattern}')"
            con.execute(f"""SELECT floor((lon - {d.west}) / {d.width} * {CELLS}) AS a,
                                   floor((lat - {d.south}) / {d.height} * {CELLS}) AS b, count(*)
                            FROM {reader} GROUP BY a, b""").fetchnumpy()
        return {"seconds": time.perf_counter() - t, "peak_mb": _peak_mb()}
    counts = dp.load_counts(Path(folder) / "counts.npz")
    Q = dp.random_workload(DOMAIN, QUERIES, area_frac=0.01, rng=1)
    t = time.perf_counter()
    rel = dp.release(kind, counts, DOMAIN, 1.0)
    answers = rel.answer_many(Q)
    return {"seconds": time.perf_counter() - t, "peak_mb": _peak_mb(), "answers": len(answers)}


def _run(kind, folder, fmt, engine="") -> dict:
    out = subprocess.run([sys.executable, __file__, "--stage", kind, folder, fmt, engine],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", type=float, default=1e8)
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--engines", default="duckdb,dask")
    p.add_argument("--keep", help="write the parts here and keep them (default: a scratch folder)")
    p.add_argument("--stage", nargs=4, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.stage:
        print(json.dumps(stage(a.stage[0], a.stage[1], a.stage[2], a.stage[3])))
        return
    n = int(a.points)
    folder = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        if not list(folder.glob(f"part-*.{a.format}")):
            write_points(folder, n, a.parts, a.format)
        size = sum(f.stat().st_size for f in folder.glob(f"part-*.{a.format}")) / 2**30
        print(f"{n:.0e} points in {a.parts} {a.format} parts ({size:.1f} GiB), written in "
              f"{time.perf_counter() - t:.0f} s; {CELLS}-cell base grid over {DOMAIN.name}\n")
        rows = [("aggregate", "bare DuckDB GROUP BY (floor only)", _run("bare", str(folder), a.format))]
        for engine in a.engines.split(","):
            rows.append(("aggregate", f"dp.aggregate, {engine}", _run("aggregate", str(folder), a.format, engine)))
        if "duckdb" in a.engines.split(","):      # the releases read DuckDB's counts
            _run("aggregate", str(folder), a.format, "duckdb")
        for m in MECHANISMS:
            rows.append(("release + 2,000 queries", m, _run(m, str(folder), a.format)))
        print("| stage | what | seconds | ratio | peak MB (driver) | peak MB (a Dask worker) |")
        print("|---|---|---|---|---|---|")
        for st in dict.fromkeys(r[0] for r in rows):
            fastest = min(r[2]["seconds"] for r in rows if r[0] == st)
            for s, what, r in (r for r in rows if r[0] == st):
                w = f"{r['workers_mb']:.0f}" if r.get("workers_mb") else "—"
                print(f"| {s} | {what} | {r['seconds']:.1f} | {r['seconds'] / fastest:.2f} | "
                      f"{r['peak_mb']:.0f} | {w} |")
        agg = next(r[2] for r in rows if r[1] == "dp.aggregate, duckdb") if "duckdb" in a.engines else None
        if agg:
            slowest = max(r[2]["seconds"] for r in rows if r[0] != "aggregate")
            peak = max(r[2]["peak_mb"] for r in rows if r[0] != "aggregate" or r[1].endswith("duckdb"))
            print(f"\nend to end (DuckDB aggregate + slowest release with its queries): "
                  f"{agg['seconds'] + slowest:.1f} s, peak {peak:.0f} MB in any stage; "
                  f"{agg['n']:,} points counted")
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
