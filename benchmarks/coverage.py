"""Does the interval hold the true count? Coverage of the assumption-free interval
(`Release.bounds`, `dp.partition_bounds`) and of the noise-only one, on the DPBench matrices.

The `peers.py` protocol (2,000 cell-aligned queries of 2/6/10% of the area, points spread
evenly inside each matrix cell, the square box, every mechanism on the 256 grid): for each
private point mechanism, the share of queries whose true count lies inside each 95% interval,
and the median width. A mechanism without independent per-region noise has no assumption-free
interval ("none"); its noise-only interval is "n/a" where no closed form exists.

    python benchmarks/coverage.py [--eps 0.1 1] [--seeds 1 2 3 4 5] [--data checkin ...]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
import peers  # noqa: E402
from dp.evaluate import points_from_matrix  # noqa: E402
from dp.summed_area import box_sums, summed_area  # noqa: E402

MECHANISMS = sorted(k for k, s in dp.mechanisms(private_only=True).items()
                    if s.data_kind == "points" and s.comparable)


def run(name: str, data, eps: float, seed: int, rects, truth) -> dict:
    """Coverage and median width of both intervals for one release."""
    spec = dp.mechanisms()[name]
    params = {"base_cells": peers.SIDE} if any(p.name == "base_cells" for p in spec.params) else {}
    extra = {"workload": rects} if spec.workload_aware else {}
    rel = dp.release(name, data, peers.BOX, eps, params=params, **extra, seed=np.random.default_rng(seed))
    out = {}
    lo, hi = rel.bounds(rects)
    if not np.isnan(lo).all():
        out["bounds"] = (np.mean((lo <= truth) & (truth <= hi)), np.median(hi - lo))
    var = rel.noise_variance(rects)
    if np.isfinite(var).all():
        half = 1.959964 * np.sqrt(var)        # the normal rule; the app simulates few-term sums
        out["noise"] = (np.mean(np.abs(rel.answer_many(rects) - truth) <= half), np.median(2 * half))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--data", nargs="+", default=list(peers.FILES), choices=list(peers.FILES))
    ap.add_argument("--mechanisms", nargs="+", default=MECHANISMS, choices=MECHANISMS)
    args = ap.parse_args(argv)
    if not peers.DATA_DIR.is_dir():
        print("skipped: needs the DPBench matrices in the shared folder next to the repository")
        return
    cells = peers.workload()
    rects = peers.as_rects(cells)
    t0 = time.perf_counter()
    print("| data | ε | mechanism | assumption-free: coverage | median width | noise-only: coverage | median width |")
    print("|---|---|---|---|---|---|---|")
    for d in args.data:
        m = np.load(peers.DATA_DIR / peers.FILES[d])
        truth = box_sums(summed_area(m, whole=True), cells).astype(np.float64)
        data = points_from_matrix(m, peers.BOX, seed=7)
        for eps in args.eps:
            for name in args.mechanisms:
                res = [run(name, data, eps, s, rects, truth) for s in args.seeds]
                cols = []
                for kind in ("bounds", "noise"):
                    got = [r[kind] for r in res if kind in r]
                    cols += ([f"{100 * np.mean([g[0] for g in got]):.1f}%",
                              f"{np.median([g[1] for g in got]):,.0f}"] if got else
                             ["none" if kind == "bounds" else "n/a", "—"])
                print(f"| {d} | {eps:g} | {name} | " + " | ".join(cols) + " |", flush=True)
    print(f"\n{len(rects)} queries, seeds {args.seeds}, {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
