"""Interactive geo-private range queries (spec 002): savings, error and server time.

20 square range queries (sides 0.5, 1 and 2 km in turn, centres in the central 10 x 10 km) on
1e5 clustered points (the built-in city generator) in a 20 km square over Beijing. Every user
has the total budget sigma_B = 50 m (rho_B = 1/(2 sigma_B^2)), planned over m = 20 queries.
For each budgeting strategy and each method, baselines (BM, no savings) and iterative
elimination (PM, doubling split, c = 10, beta = 0.1), one session asks the same 20 queries.
Users answer with exact discrete Gaussian noise on public grids; sessions use fixed seeds so
that every method sees the same data and randomness (a reproducible simulation, not a release).

Printed per (strategy, method): the mean relative error |est - true| / max(true, 1) with its
25th/50th/75th percentiles over queries and repetitions (a few near-empty queries in the sparse
suburbs make the mean much larger than the median), the mean per-query saving
1 - sum(used)/sum(allocated), the mean fraction of B spent after the 20 queries, and the server
time of the private answer per query (median and max). The one-shot reference (one noisy
release of every point at the full budget, spec P13) is printed as a line to compare with.
A second table times a whole `ask` as the app runs it (PM-dist, gamma, with the baseline world
and the reference release on) at 1e5 points: target under 1 s per query. Nothing is asserted.

    python benchmarks/interactive_bench.py            # 3 repetitions (about 5 min)
    python benchmarks/interactive_bench.py --quick    # 1 repetition (about 2 min)
    python benchmarks/interactive_bench.py --quick --points 5000   # a smoke run (seconds)
Writes results/interactive_runs.csv (one row per query and session).
"""
from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
from dp import interactive as ia  # noqa: E402
from dp.samples import BEIJING_20KM  # noqa: E402

N = 100_000
M = 20
SIGMA_B = 50.0
SIDES = (500.0, 1000.0, 2000.0)
METHODS = ("bm-dist", "pm-dist", "bm-pt", "pm-pt")
RESULTS = Path(__file__).resolve().parent / "results"


def dataset(seed: int):
    x, y = dp.SAMPLES["city_200k"].make(BEIJING_20KM, N, 1000 + seed)
    return dp.PointData(x, y, name=f"clustered {N:,} (seed {seed})")


def workload(seed: int) -> list[dp.Rect]:
    proj = dp.Projection(BEIJING_20KM)
    w_m, h_m = BEIJING_20KM.size_m()
    rng = np.random.default_rng(2000 + seed)
    rects = []
    for q in range(M):
        side = SIDES[q % len(SIDES)]
        cx, cy = rng.uniform(0.25, 0.75, 2) * (w_m, h_m)
        (w, e), (s, n) = proj.to_lonlat([cx - side / 2, cx + side / 2], [cy - side / 2, cy + side / 2])
        rects.append(dp.Rect(float(w), float(s), float(e), float(n)))
    return rects


def run(reps: int):
    rows = []
    ref_err = []
    for rep in range(reps):
        data = dataset(rep)
        rects = workload(rep)
        # the one-shot reference depends on neither strategy nor method
        s = ia.QuerySession(data, BEIJING_20KM, sigma_m=SIGMA_B, planned_queries=M, seed=rep,
                            compare=False, reference=True)
        for r in rects:
            res = s.ask(r)
            ref_err.append(res.relative_error("reference"))
        for strategy in ia.STRATEGIES:
            for method in METHODS:
                if method.startswith("bm") and strategy != "none":
                    # BM consumes its whole allocation, so every strategy is 'none' for it
                    continue
                s = ia.QuerySession(data, BEIJING_20KM, sigma_m=SIGMA_B, planned_queries=M,
                                    strategy=strategy, method=method, rounds=10, split="doubling",
                                    beta=0.1, seed=rep, compare=False, reference=False)
                for r in rects:
                    res = s.ask(r)
                    rows.append({"rep": rep, "strategy": strategy, "method": method, "k": res.k,
                                 "side_m": round(res.rect_m[2] - res.rect_m[0]),
                                 "true": res.true_count, "answer": res.answer,
                                 "rel_error": res.relative_error(), "saving": res.saving,
                                 "allocated_x": res.allocated_mean / (s.budget.mean() / M),
                                 "spent_fraction": float(res.spent_fraction.mean()),
                                 "seconds": res.seconds})
            print(f"  rep {rep}: {strategy} done", file=sys.stderr)
    return rows, ref_err


def app_path_times(reps: int = 1):
    """Whole `ask` as the app runs it: PM-dist, gamma, baseline world and reference on."""
    data = dataset(0)
    rects = workload(0)
    times, private = [], []
    for rep in range(reps):
        s = ia.QuerySession(data, BEIJING_20KM, sigma_m=SIGMA_B, planned_queries=M, strategy="gamma",
                            method="pm-dist", seed=rep, compare=True, reference=True)
        for r in rects:
            t0 = time.perf_counter()
            res = s.ask(r)
            times.append(time.perf_counter() - t0)
            private.append(res.seconds)
    return np.array(times), np.array(private)


def main():
    global N
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repetition")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--points", type=int, default=N, help="number of points (default 100,000)")
    args = ap.parse_args()
    N = args.points
    reps = 1 if args.quick else args.reps
    t0 = time.perf_counter()
    rows, ref_err = run(reps)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "interactive_runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    print(f"\n{N:,} clustered points, 20 km square, sigma_B = {SIGMA_B:g} m, m = {M}, sides "
          f"{'/'.join(f'{s / 1000:g}' for s in SIDES)} km, {reps} repetition(s); PM: doubling, "
          f"c = 10, beta = 0.1, theta uniform-exact\n")
    head = (f"{'strategy':<9}{'method':<9}{'rel err':>9}{'p25':>8}{'median':>8}{'p75':>8}{'saving':>8}"
            f"{'B spent':>9}{'last b':>8}{'med s':>8}{'max s':>8}")
    print(head)
    print("-" * len(head))
    base = {}
    for strategy in ia.STRATEGIES:
        for method in METHODS:
            sel = [r for r in rows if r["strategy"] == strategy and r["method"] == method]
            if not sel:
                continue
            e = np.array([r["rel_error"] for r in sel])
            sv = np.array([r["saving"] for r in sel])
            sec = np.array([r["seconds"] for r in sel])
            last = [r for r in sel if r["k"] == M]
            spent = np.mean([r["spent_fraction"] for r in last])
            lastb = np.mean([r["allocated_x"] for r in last])
            if method.startswith("bm"):
                base[method.split("-")[1]] = e.mean()
            print(f"{strategy:<9}{method:<9}{e.mean():>9.4f}{np.percentile(e, 25):>8.4f}{np.median(e):>8.4f}"
                  f"{np.percentile(e, 75):>8.4f}{sv.mean():>8.3f}{spent:>9.3f}{lastb:>7.2f}x"
                  f"{np.median(sec):>8.3f}{sec.max():>8.3f}")
    print(f"{'one-shot':<9}{'full B':<9}{np.mean(ref_err):>9.4f}{np.percentile(ref_err, 25):>8.4f}{np.median(ref_err):>8.4f}"
          f"{np.percentile(ref_err, 75):>8.4f}")
    print("\n'last b': the 20th query's mean allocation in units of B/m. Error ratio PM / BM-none:")
    for strategy in ia.STRATEGIES:
        parts = []
        for priv in ("dist", "pt"):
            sel = [r["rel_error"] for r in rows if r["strategy"] == strategy and r["method"] == f"pm-{priv}"]
            parts.append(f"{priv} {np.mean(sel) / base[priv]:.2f}")
        print(f"  {strategy:<7} " + ", ".join(parts))

    times, private = app_path_times()
    print(f"\nserver time per query at {N:,} points (PM-dist, gamma, baseline world and "
          f"reference on), {times.size} queries:")
    print(f"  whole ask: median {np.median(times):.3f} s, max {times.max():.3f} s   "
          f"(private answer alone: median {np.median(private):.3f} s, max {private.max():.3f} s)")
    print("  target: under 1 s per query")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; rows in {RESULTS / 'interactive_runs.csv'}")


if __name__ == "__main__":
    main()
