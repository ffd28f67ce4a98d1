"""Euler histograms (spec 004): speed of the build, LinProg, Round and queries, and the
T-Drive-like accuracy setting (10,000 regions, 20x20 cells, B = 2 km, ε = 1).

Usage:
    python benchmarks/euler_bench.py            # speed + accuracy, 100 repetitions (~1 min)
    python benchmarks/euler_bench.py --quick    # 10 repetitions
    python benchmarks/euler_bench.py --speed    # speed only
    python benchmarks/euler_bench.py --accuracy # accuracy only

Prints tables; nothing is asserted. Accuracy rows go to results/euler_accuracy.csv.
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np
import shapely

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
from dp.mechanisms import euler as eu  # noqa: E402
from dp.samples import _square_domain  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = ("targets: build 1e5 regions on 64x64 <= 2 s; LinProg n=20/64/128 <= 0.2/2/10 s; "
           "a query < 1 ms")


def best_of(fn, repeat=3):
    """Fastest wall time of `repeat` calls, and the last result."""
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def random_regions(domain: dp.Domain, count: int, bound_km: float, seed: int, vertices: int = 8):
    """Convex regions in lon/lat: hulls of random points in a disc of diameter <= B."""
    rng = np.random.default_rng(seed)
    proj = dp.Projection(domain)
    w, h = domain.size_m()
    c = rng.uniform(0, 1, (count, 2)) * [w, h]
    r = rng.uniform(0.05, 0.5, (count, 1)) * bound_km * 1000
    ang = rng.uniform(0, 2 * np.pi, (count, vertices))
    rad = r * np.sqrt(rng.uniform(0.3, 1, (count, vertices)))
    x = c[:, 0:1] + rad * np.cos(ang)
    y = c[:, 1:2] + rad * np.sin(ang)
    lon, lat = proj.to_lonlat(x.ravel(), y.ravel())
    pts = shapely.multipoints(np.column_stack([lon, lat]), indices=np.repeat(np.arange(count), vertices))
    return shapely.convex_hull(pts)


# ----------------------------------------------------------------------------- speed
def speed(repeat: int):
    print("\n## Speed (fastest of %d)" % repeat)
    dom = _square_domain(116.4074, 39.9042, 64.0, "Beijing 64 km square")
    g = eu.make_grid(dom, 64, bound_km=2.0)
    geoms = random_regions(dom, 100_000, 2.0, seed=1)
    data = dp.RegionData(geoms)
    cells = g.geometries_to_cells(data.geoms)
    prepared, _, _ = eu.prepare_bodies(cells, g.n, g.bound_cells)
    mbrs = shapely.envelope(prepared)
    rows = []
    t, _ = best_of(lambda: eu.euler_build(prepared, 64, k=g.k), repeat)
    rows.append(("Euler build, 1e5 convex regions, 64x64 (grid units)", t, "<= 2 s"))
    t, _ = best_of(lambda: eu.euler_build(mbrs, 64, k=g.k), repeat)
    rows.append(("Euler build, 1e5 rectangles (difference-array path)", t, ""))

    def full():
        data._hists.clear()
        return data.euler_histogram(g)
    t, _ = best_of(full, repeat)
    rows.append(("RegionData.euler_histogram, 1e5 (project+clip+build)", t, "<= 2 s"))
    for n, target in ((20, "<= 0.2 s"), (64, "<= 2 s"), (128, "<= 10 s")):
        gn = eu.make_grid(dom, n, bound_km=2.0 * 64 / n)     # B = 2 d: k = 2, Δ = 25
        H = data.euler_histogram(gn)
        delta = eu.sensitivity(gn.bound_km, gn.cell_km)
        Hp = eu.diffpriv(H, 1.0, delta, np.random.default_rng(n), ledger=dp.Ledger())
        t, (H2, info) = best_of(lambda: eu.linprog_lad(Hp), 1 if n == 128 else repeat)
        rows.append((f"LinProg n={n} ({info['variables']:,} vars, {info['rows']:,} rows)", t, target))
        t3, _ = best_of(lambda: eu.linprog_lad(Hp, include_c3=False), 1 if n == 128 else repeat)
        rows.append((f"LinProg n={n} without C3", t3, ""))
        t, _ = best_of(lambda: eu.round_consistent(H2), repeat)
        rows.append((f"Round n={n}", t, ""))
    rel = dp.release("euler", data, dom, 1.0, seed=0, params={"cells": 64, "stage": "diffpriv"})
    rng = np.random.default_rng(0)
    lo = rng.uniform(0, 0.7, (1000, 2))
    rects = [dp.Rect(dom.west + a * dom.width, dom.south + b * dom.height,
                     dom.west + (a + 0.2) * dom.width, dom.south + (b + 0.25) * dom.height)
             for a, b in lo]
    rel.answer(rects[0])

    def one_by_one():
        for r in rects:
            rel.answer(r)
    t, _ = best_of(one_by_one, repeat)
    rows.append(("query: rel.answer(rect), snap + prefix sums (per query)", t / len(rects), "< 1 ms"))
    t, _ = best_of(lambda: rel.answer_many(rects), repeat)
    rows.append(("query: rel.answer_many, 1000 rects (per query)", t / len(rects), ""))
    t, _ = best_of(lambda: data.true_counts(rects[:20]), 1)
    rows.append(("true count on a drawn rect, 1e5 regions (per query)", t / 20, "owner side"))
    print(f"| {'step':<62} | {'ms':>9} | {'target':>10} |")
    print(f"|{'-' * 64}|{'-' * 11}|{'-' * 12}|")
    for name, t, target in rows:
        print(f"| {name:<62} | {t * 1000:>9.3f} | {target:>10} |")
    print(TARGETS)


# -------------------------------------------------------------------------- accuracy
def shapes_for(size_pct: float, n: int):
    """Spec 004 10.4: every (a, b) with a·b = N_c and a, b <= n, else the nearest product."""
    nc = max(1, round(size_pct / 100 * n * n))
    exact = [(a, nc // a) for a in range(1, n + 1) if nc % a == 0 and nc // a <= n]
    if exact:
        return exact
    cand = [(a, b) for a in range(1, n + 1) for b in range(1, n + 1)]
    best = min(cand, key=lambda ab: (abs(ab[0] * ab[1] - nc), -ab[0] * ab[1]))
    return [ab for ab in cand if ab[0] * ab[1] == best[0] * best[1]]


SIZES = {"1-10%": list(range(1, 11)), "10-100%": list(range(10, 101, 10))}


def accuracy(reps: int, dataset: str):
    data, dom = dp.load_region_sample(dataset) if dataset != "random" else (None, None)
    if dataset == "random":
        dom = dp.samples.BEIJING_20KM
        data = dp.RegionData(random_regions(dom, 10_000, 2.0, seed=7))
    g = eu.make_grid(dom, 20, bound_km=2.0)
    H = data.euler_histogram(g)
    P_true = eu.signed_prefix(H)
    n = g.n
    rng = np.random.default_rng(2024)
    runs = []
    hist_diff = {s: [] for s in eu.STAGES}
    viol = {s: np.zeros(3) for s in eu.STAGES}
    times = {s: [] for s in eu.STAGES}
    full = {s: [] for s in eu.STAGES}
    for rep in range(reps):
        t0 = time.perf_counter()
        rel = dp.release("euler", data, dom, 1.0, seed=10_000 + rep, params={"stage": "diffpriv"})
        times["diffpriv"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rel = rel.with_stage("linprog")
        times["linprog"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rel = rel.with_stage("round")
        times["round"].append(time.perf_counter() - t0)
        qs, sizes, bands = [], [], []
        for band, pcts in SIZES.items():
            for s in pcts:
                for a, b in shapes_for(s, n):
                    r0, c0 = rng.integers(0, n - a + 1), rng.integers(0, n - b + 1)
                    qs.append((r0, r0 + a - 1, c0, c0 + b - 1))
                    sizes.append(s)
                    bands.append(band)
        qs = np.array(qs)
        truth = eu.answer_cells(P_true, qs)
        base = np.abs(rel.values("diffpriv") - H).sum()
        for st in eu.STAGES:
            est = rel.answer_cells(qs, st)
            re = np.abs(est - truth) / np.maximum(truth, 1)
            runs += [(rep, st, band, s, t, e, r) for band, s, t, e, r in zip(bands, sizes, truth, est, re)]
            hist_diff[st].append(100 * np.abs(H - rel.values(st)).sum() / base)
            v = rel.violations(st)
            viol[st] += [v["C1"], v["C2"], v["C3"]]
            full[st].append(rel.answer_cells([(0, n - 1, 0, n - 1)], st)[0])
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / f"euler_accuracy_{dataset}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rep", "stage", "band", "size_pct", "true", "estimate", "rel_error"])
        w.writerows(runs)
    arr = {(st, band): np.array([r[6] for r in runs if r[1] == st and r[2] == band])
           for st in eu.STAGES for band in SIZES}
    mean_face = H[0::2, 0::2].mean()
    print(f"\n## Accuracy: {dataset} ({data.n:,} regions, 20x20 cells of {g.cell_km:.3f} km, "
          f"B = 2 km, k = {g.k}, Δ = 25, ε = 1, λ = 25; {reps} repetitions; mean true face "
          f"count {mean_face:.1f})")
    print("Median relative error |N̂ − N| / max(N, 1) over all (repetition, query) pairs "
          "(raw answers, before clamping):\n")
    print(f"| {'query size':<10} | {'DiffPriv':>8} | {'LinProg':>8} | {'Round':>8} | {'queries':>8} |")
    print(f"|{'-' * 12}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 10}|")
    for band in SIZES:
        med = [np.median(arr[(st, band)]) for st in eu.STAGES]
        print(f"| {band:<10} | {med[0]:>8.3f} | {med[1]:>8.3f} | {med[2]:>8.3f} | "
              f"{len(arr[('round', band)]):>8,} |")
    print("\nPer size (median RE, DiffPriv / LinProg / Round):")
    for band, pcts in SIZES.items():
        cells = []
        for s in pcts:
            m = [np.median([r[6] for r in runs if r[1] == st and r[3] == s and r[2] == band])
                 for st in eu.STAGES]
            cells.append(f"{s}%: {m[0]:.2f}/{m[1]:.2f}/{m[2]:.2f}")
        print(f"  {band}: " + "; ".join(cells))
    cc = eu.constraint_counts(n)
    tot = np.array([cc["C1"], cc["C2"], cc["C3"]])
    print(f"\n| {'stage':<8} | {'D_M (%)':>7} | {'C1 viol %':>9} | {'C2 viol %':>9} | "
          f"{'C3 viol %':>9} | {'full-area N̂':>11} | {'time s':>7} |")
    print(f"|{'-' * 10}|{'-' * 9}|{'-' * 11}|{'-' * 11}|{'-' * 11}|{'-' * 13}|{'-' * 9}|")
    for st in eu.STAGES:
        v = 100 * viol[st] / reps / tot
        print(f"| {st:<8} | {np.mean(hist_diff[st]):>7.1f} | {v[0]:>9.1f} | {v[1]:>9.1f} | "
              f"{v[2]:>9.1f} | {np.mean(full[st]):>11.0f} | {np.median(times[st]):>7.3f} |")
    print(f"(true full-area count {int(eu.answer_cells(P_true, [(0, n - 1, 0, n - 1)])[0]):,}; "
          "DiffPriv time includes the exact build on the first repetition only: it is cached)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 repetitions instead of 100")
    ap.add_argument("--speed", action="store_true", help="speed only")
    ap.add_argument("--accuracy", action="store_true", help="accuracy only")
    ap.add_argument("--repeat", type=int, default=3, help="timing repeats (fastest reported)")
    args = ap.parse_args()
    both = not (args.speed or args.accuracy)
    if args.speed or both:
        speed(args.repeat)
    if args.accuracy or both:
        reps = 10 if args.quick else 100
        for ds in ("tdrive_like_10k", "random"):
            accuracy(reps, ds)


if __name__ == "__main__":
    main()
