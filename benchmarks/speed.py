"""Speed and peak memory of load -> bin -> release for 1e5, 1e6 and 1e7 points, and of the samplers.

Load table: dp.load_points beside np.loadtxt and the CSV readers of pandas, pyarrow, polars and
DuckDB (all but pyarrow optional here: a missing one is skipped), reading 1e6 and 1e7 (1e8 with
--big) rows of lon,lat and of uid,lon,lat from a file and from bytes, each run in a fresh
subprocess: seconds, peak RSS (VmHWM) above the interpreter with the reader imported (bytes
sources include the file's bytes), and the ratio to the fastest.
Bin table: the exact 1024x1024 grid histogram (UniformGrid.histogram) beside np.bincount on
precomputed cell indices and np.histogram2d, at 1e6 and 1e7 points (1e8 with --big).
A line under each table says whether the issue's target holds at 1e7.

Sampler table: 1e6 draws of the exact integer samplers (discrete Laplace at several scales,
discrete Gaussian) beside numpy's floating-point Laplace and numpy's two-geometric difference
(both unsafe for releases, shown as the fastest alternatives), with the ratio to the fastest.

Releases: E2EPriv and Heuristic UG in the New York box, and the trees HTF and PrivTree on a
1024x1024 base grid (a box square in metres around the same points, epsilon = 1).

Each size runs in a fresh subprocess so its peak RSS is its own; with --repeat R each stage
and each load-table reader reports its fastest of R cold runs (fresh load, empty caches), which
filters out load from other processes. Usage:
    python benchmarks/speed.py [--quick] [--repeat R] [--samplers-only] [--tables-only] [--big]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
from dp.mechanisms.leaves import square_base_grid  # noqa: E402

DOMAIN = dp.PRESETS["New York (Manhattan & Brooklyn)"]
E2E_PARAMS = {"tuning_queries": 100, "delta": 0.01}   # candidate grid sizes: "auto" (default)
TREE_BASE = 1024
TREE_PARAMS = {"base_cells": TREE_BASE}
TARGETS = ("targets: E2EPriv on 1e6 points <= 1.5 s; 1e7 end to end (load + E2EPriv) <= 15 s "
           "with peak RSS < 2048 MB; HTF and PrivTree on 1e6 points, 1024x1024 base: <= 1 s of "
           "mechanism time; 1e7 end to end (load + bin + release) <= 15 s")


def square_box(d: dp.Domain) -> dp.Domain:
    """The box widened east-west (same centre) until it is square in metres, so that the trees'
    base grid of square cells is TREE_BASE x TREE_BASE; it still contains every point of d."""
    w, h = d.size_m()
    half = d.width * max(h / w, 1.0) / 2
    cx = (d.west + d.east) / 2
    return dp.Domain(cx - half, d.south, cx + half, d.north, name=f"{d.name}, square")


TREE_DOMAIN = square_box(DOMAIN)


def write_csv(path: Path, n: int, seed: int = 0, chunk: int = 1_000_000, users: bool = False):
    """Clustered-city points (the built-in sample's generator) as a lon,lat CSV, in chunks;
    with `users`, a first column uid of ids u0..u99999."""
    x, y = dp.SAMPLES["city_200k"].make(DOMAIN, n, seed)
    with open(path, "w") as f:
        f.write("uid,lon,lat\n" if users else "lon,lat\n")
        for i in range(0, n, chunk):
            cols = [x[i:i + chunk], y[i:i + chunk]]
            if users:
                cols.insert(0, np.arange(i, i + len(cols[0])) % 100_000)
            row = ("u%d," if users else "") + "%.6f,%.6f\n"
            f.write((row * len(cols[0])) % tuple(np.column_stack(cols).ravel().tolist()))


def _read_pyarrow(src, users):
    """pyarrow.csv.read_csv into a table, then float64 numpy columns."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    src = pa.BufferReader(src) if isinstance(src, bytes) else src
    t = pcsv.read_csv(src, convert_options=pcsv.ConvertOptions(
        include_columns=["uid", "lon", "lat"] if users else ["lon", "lat"]))
    return t.column("lon").to_numpy(), t.column("lat").to_numpy()


def _read_pandas(src, users):
    """pandas.read_csv (its default C parser) into a DataFrame, then float64 numpy columns."""
    import io

    import pandas as pd
    df = pd.read_csv(io.BytesIO(src) if isinstance(src, bytes) else src,
                     usecols=["uid", "lon", "lat"] if users else ["lon", "lat"])
    return df["lon"].to_numpy(), df["lat"].to_numpy()


def _read_polars(src, users):
    """polars.read_csv into a DataFrame, then float64 numpy columns."""
    import polars as pl
    df = pl.read_csv(src, columns=["uid", "lon", "lat"] if users else ["lon", "lat"])
    return df["lon"].to_numpy(), df["lat"].to_numpy()


def _read_duckdb(src, users):
    """duckdb.read_csv (bytes through a file object, which needs fsspec), fetched as numpy."""
    import io

    import duckdb
    cols = duckdb.read_csv(io.BytesIO(src) if isinstance(src, bytes) else src).fetchnumpy()
    return cols["lon"], cols["lat"]


def _read_loadtxt(src, users):
    """np.loadtxt of the two coordinate columns (it cannot keep a text column beside floats)."""
    import io
    xy = np.loadtxt(io.BytesIO(src) if isinstance(src, bytes) else src, delimiter=",",
                    skiprows=1, usecols=(1, 2) if users else (0, 1))
    return xy[:, 0], xy[:, 1]


def _read_dp(src, users):
    """dp.load_points: parse and validate, user ids as codes when present (no row limit here)."""
    data = dp.load_points(src, filename="points.csv", max_rows=10**9)
    return data.x, data.y


READERS = {"dp.load_points": ("dp", _read_dp), "np.loadtxt": ("numpy", _read_loadtxt),
           "pandas": ("pandas", _read_pandas), "pyarrow.csv": ("pyarrow.csv", _read_pyarrow),
           "polars": ("polars", _read_polars), "duckdb": ("duckdb", _read_duckdb)}


def load_worker(reader: str, source: str, path: str, users: bool) -> dict:
    """Seconds and peak RSS (MB above the baseline with the reader's module imported) of one
    read of `path` by `reader`, from the file or from its bytes (read before the clock starts)."""
    import importlib
    module, read = READERS[reader]
    importlib.import_module(module)
    base = _reset_peak_rss()
    src = Path(path).read_bytes() if source == "bytes" else path
    t0 = time.perf_counter()
    x, _ = read(src, users)
    dt = time.perf_counter() - t0
    return {"s": dt, "mb": (_peak_rss() - base) / 1024, "n": len(x)}


def _reset_peak_rss() -> int:
    """Reset this process's peak RSS to its current RSS (Linux: /proc/self/clear_refs), so that
    the peak measures what comes next and not the imports' transients; returns it (KB)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _peak_rss()


def _peak_rss() -> int:
    """This process's peak RSS in KB: VmHWM on Linux (ru_maxrss also counts the parent's
    memory at the fork, which would hide a small load), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def load_table(sizes, tmp: Path, repeat: int = 1):
    """Print the load table: every reader on every file and source, in fresh subprocesses
    (np.loadtxt, minutes at 1e8, is left out there); with `repeat` > 1 the fastest time and
    the smallest peak of that many runs each (for a busy machine)."""
    print(f"{'load (fresh process each)':<44} {'s':>7} {'x fastest':>10} {'peak MB':>8} "
          f"{'B/point':>8}")
    goal = None
    for n in sizes:
        for users in (False, True):
            path = tmp / f"load_{n}_{int(users)}.csv"
            write_csv(path, n, users=users)
            rows = []
            for reader in READERS:
                if reader == "np.loadtxt" and n > 10**7:
                    continue
                for source in ("file", "bytes"):
                    runs = [_subprocess_json("--load-worker", reader, source, str(path),
                                             *(["--users"] if users else []))
                            for _ in range(repeat)]
                    r = None if None in runs else {k: min(run[k] for run in runs)
                                                   for k in ("s", "mb")}
                    if r is not None:
                        rows.append((f"{reader} ({source})", r))
                    if (reader, source, n, users) == ("dp.load_points", "file", 10**7, False):
                        goal = r
            fastest = min(r["s"] for _, r in rows)
            print(f"-- {n:,} rows of {'uid,lon,lat' if users else 'lon,lat'} "
                  f"({path.stat().st_size / 2**20:.0f} MB)")
            for name, r in rows:
                print(f"{name:<44} {r['s']:>7.2f} {r['s'] / fastest:>10.1f} {r['mb']:>8.0f} "
                      f"{r['mb'] * 2**20 / n:>8.1f}", flush=True)
            path.unlink()
    print("target: 1e7 lon,lat rows loaded by dp.load_points (file) in <= 1.5 s with <= 40 bytes "
          "per point" + ("" if goal is None else ": " + _met(
              goal["s"] <= 1.5 and goal["mb"] * 2**20 / 1e7 <= 40)) + "\n")


def _met(ok: bool) -> str:
    """How a target line reads: 'met' or 'NOT met'."""
    return "met" if ok else "NOT met"


def _subprocess_json(*args):
    """The JSON a worker run of this script prints, or None when it failed (library missing)."""
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def bin_worker(n: int, repeat: int = 3) -> dict:
    """Best-of-`repeat` seconds of the 1024x1024 grid histogram, np.bincount on precomputed
    flat cell indices, and np.histogram2d, on n clustered-city points."""
    x, y = dp.SAMPLES["city_200k"].make(DOMAIN, n, 0)
    grid = dp.UniformGrid(DOMAIN, 1024)
    j, k, inside = grid.cell_index(x, y)
    flat = (j * grid.gx + k)[inside]
    del j, k, inside
    d = DOMAIN
    runs = {"UniformGrid.histogram": lambda: grid.histogram(x, y),
            "np.bincount (precomputed indices)": lambda: np.bincount(flat, minlength=grid.n_cells),
            "np.histogram2d": lambda: np.histogram2d(y, x, bins=1024, range=[[d.south, d.north],
                                                                              [d.west, d.east]])}
    out = {}
    for name, f in runs.items():
        best = np.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            f()
            best = min(best, time.perf_counter() - t0)
        out[name] = best
    return out


def bin_table(sizes):
    """Print the bin table: each size in a fresh subprocess."""
    print(f"{'bin into 1024x1024 (best of 3)':<44} {'s':>7} {'x fastest':>10}")
    goal = None
    for n in sizes:
        r = _subprocess_json("--bin-worker", str(n))
        goal = r["UniformGrid.histogram"] if n == 10**7 else goal
        fastest = min(r.values())
        print(f"-- {n:,} points")
        for name, t in r.items():
            print(f"{name:<44} {t:>7.3f} {t / fastest:>10.1f}", flush=True)
    print("target: 1e7 points binned in <= 0.3 s"
          + ("" if goal is None else ": " + _met(goal <= 0.3)) + "\n")


def run_once(path: str) -> dict:
    """Seconds per stage of one cold pipeline: load, bin, E2EPriv release, UG release, then the
    trees: one exact histogram on their base grid, and each tree's release on it (memoised, so
    the tree columns are mechanism time; the dataset's histogram is binned once)."""
    t0 = time.perf_counter()
    data = dp.load_points(path)
    t1 = time.perf_counter()
    data.histogram(dp.UniformGrid(DOMAIN, 256))
    t2 = time.perf_counter()
    dp.release("e2epriv", data, DOMAIN, 1.0, params=E2E_PARAMS, seed=0)
    t3 = time.perf_counter()
    dp.release("ug", data, DOMAIN, 1.0, seed=0)
    t4 = time.perf_counter()
    base = square_base_grid(TREE_DOMAIN, TREE_BASE)
    data.histogram(base)
    t5 = time.perf_counter()
    htf = dp.release("htf", data, TREE_DOMAIN, 1.0, params=TREE_PARAMS, seed=0)
    t6 = time.perf_counter()
    pt = dp.release("privtree", data, TREE_DOMAIN, 1.0, params=TREE_PARAMS, seed=0)
    t7 = time.perf_counter()
    return {"n": data.n, "load": t1 - t0, "bin": t2 - t1, "e2epriv": t3 - t2, "ug": t4 - t3,
            "bin_tree": t5 - t4, "htf": t6 - t5, "privtree": t7 - t6,
            "base": f"{base.gx}x{base.gy}", "htf_leaves": htf.n_leaves,
            "privtree_leaves": pt.n_leaves}


def sampler_table(n: int = 1_000_000, repeat: int = 3):
    """Seconds for n draws per sampler (best of `repeat`), with the ratio to the fastest."""
    rng = np.random.default_rng()
    p = -np.expm1(-1.0)
    rows = [("numpy float Laplace, scale 1 (unsafe)", lambda: rng.laplace(0.0, 1.0, n)),
            ("numpy geometric difference, scale 1 (floats inside)",
             lambda: rng.geometric(p, n) - rng.geometric(p, n))]
    rows += [(f"exact discrete Laplace, scale {s:g}", lambda s=s: dp.noise.discrete_laplace(rng, s, n))
             for s in (0.1, 1.0, 10.0, 1000.0)]
    rows += [("exact discrete Laplace, 1e6 mixed scales (tree nodes)",
              lambda: dp.noise.discrete_laplace(rng, rng.choice([0.5, 1.0, 2.0, 4.0], n))),
             ("exact discrete Gaussian, sigma^2 = 100", lambda: dp.noise.discrete_gaussian(rng, 100, n))]
    times = []
    for _, f in rows:
        best = np.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            f()
            best = min(best, time.perf_counter() - t0)
        times.append(best)
    fastest = min(times)
    print(f"{'sampler (' + format(n, ',') + ' draws)':<56} {'s':>7} {'x fastest':>10}")
    for (name, _), t in zip(rows, times):
        print(f"{name:<56} {t:>7.3f} {t / fastest:>10.1f}")
    print("target: 1e6 exact discrete Laplace draws <= 1 s\n", flush=True)


def measure(path: str, repeat: int) -> dict:
    """Fastest time per stage over `repeat` runs, and the peak RSS of this process."""
    runs = [run_once(path) for _ in range(repeat)]
    best = {k: min(r[k] for r in runs) if isinstance(runs[0][k], float) else runs[0][k]
            for k in runs[0]}
    return {**best, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip 1e7 points")
    ap.add_argument("--repeat", type=int, default=1,
                    help="cold runs per size and per load-table reader (default 1)")
    ap.add_argument("--samplers-only", action="store_true", help="only the sampler table")
    ap.add_argument("--tables-only", action="store_true",
                    help="only the sampler, load and bin tables, not the releases")
    ap.add_argument("--big", action="store_true", help="also load and bin 1e8 points")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--load-worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--users", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bin-worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.repeat)))
        return
    if args.load_worker:
        print(json.dumps(load_worker(*args.load_worker, args.users)))
        return
    if args.bin_worker:
        print(json.dumps(bin_worker(args.bin_worker)))
        return
    sampler_table()
    if args.samplers_only:
        return
    with tempfile.TemporaryDirectory() as tmp:
        load_table([10**6] + ([] if args.quick else [10**7]) + ([10**8] if args.big else []),
                   Path(tmp), args.repeat)
    bin_table([10**6, 10**7] + ([10**8] if args.big else []))
    if args.tables_only:
        return
    sizes = [10**5, 10**6] + ([] if args.quick else [10**7])
    print(f"{'N':>10} {'load s':>8} {'bin s':>7} {'e2epriv s':>10} {'ug s':>6} "
          f"{'bin1024 s':>10} {'htf s':>6} {'privtree s':>11} {'load+e2e s':>11} "
          f"{'load+bin+htf s':>15} {'load+bin+privtree s':>20} {'peak RSS MB':>12}")
    leaves = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"points_{n}.csv"
            write_csv(path, n)
            out = subprocess.run([sys.executable, __file__, "--worker", str(path),
                                  "--repeat", str(args.repeat)],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout)
            tree = r["load"] + r["bin_tree"]
            print(f"{r['n']:>10,} {r['load']:>8.2f} {r['bin']:>7.3f} {r['e2epriv']:>10.2f} "
                  f"{r['ug']:>6.2f} {r['bin_tree']:>10.3f} {r['htf']:>6.2f} "
                  f"{r['privtree']:>11.2f} {r['load'] + r['e2epriv']:>11.2f} "
                  f"{tree + r['htf']:>15.2f} {tree + r['privtree']:>20.2f} "
                  f"{r['rss_mb']:>12.0f}", flush=True)
            leaves.append(f"{r['n']:,}: HTF {r['htf_leaves']:,}, PrivTree "
                          f"{r['privtree_leaves']:,}")
            path.unlink()
    b = TREE_DOMAIN
    print(f"trees: base grid {TREE_BASE}x{TREE_BASE} on [{b.west:.4f}, {b.east:.4f}] x "
          f"[{b.south:.4f}, {b.north:.4f}], ε = 1; leaves " + "; ".join(leaves))
    print(TARGETS)


if __name__ == "__main__":
    main()
