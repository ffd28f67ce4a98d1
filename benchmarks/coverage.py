"""Does the range hold the true count? Coverage and width of `Release.bounds` on the corpus.

Every private point mechanism on the data sets of `corpus.py` (default: its validation part,
never used to choose anything), at ε 0.1 and 1: each release answers six classes of
rectangles, cell-aligned on the 256 grid or with free corners, tiny (0.05% of the box), mid
(2-10%) or huge (40-80%). For each class: the share of (release, rectangle) pairs whose true
count lies in the 95% range, with its standard error across releases (the rectangles of one
release share its draws, so their misses come together: the error is that of the mean of the
per-release shares, not a binomial one over pairs), and for all classes together the median
width over the true count (at least 1) and the number of empty ranges (upper < lower). A
mechanism whose release has no range says "none".

    python benchmarks/coverage.py [--part validation] [--data ring ...] [--eps 0.1 1]
                                  [--seeds 1-5] [--queries 200] [--mechanisms privtree ...]
    python benchmarks/coverage.py --structure --data dense_cores_b street_grid ring country --seeds 1 --queries 100

`--structure` prints instead, per (data, ε, mechanism), the median share of the 95% range's
width that is the release's structure: the range at a level near 0 (no noise widening) over the
95% one.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
import peers  # noqa: E402 (puts the repository on the path)
import dp  # noqa: E402
from dp.evaluate import points_from_matrix  # noqa: E402
from recommend import seed_list  # noqa: E402

MECHANISMS = sorted(k for k, s in dp.mechanisms(private_only=True).items() if s.data_kind == "points")
SIZES = {"tiny": (0.0005, 0.0005), "mid": (0.02, 0.10), "huge": (0.40, 0.80)}   # area shares
LEVEL = 0.95


def rect_classes(n: int, seed: int = 5) -> dict[str, np.ndarray]:
    """(class -> (n, 4) rectangles in the peers' box): aligned to the 256 grid or free, three
    sizes, aspect ratios from 1/4 to 4, fixed seed (public, chosen without the data)."""
    rng = np.random.default_rng(seed)
    box = peers.BOX
    out = {}
    for size, (a_lo, a_hi) in SIZES.items():
        a = rng.uniform(a_lo, a_hi, n)
        ar = np.exp(rng.uniform(np.log(0.25), np.log(4), n))
        w = np.minimum(np.sqrt(a * ar), 1.0) * box.width
        h = np.minimum(np.sqrt(a / ar), 1.0) * box.height
        x0 = box.west + rng.uniform(0, 1, n) * (box.width - w)
        y0 = box.south + rng.uniform(0, 1, n) * (box.height - h)
        free = np.column_stack([x0, y0, x0 + w, y0 + h])
        step = box.width / peers.SIDE
        snap = np.round((free - [box.west, box.south, box.west, box.south]) / step)
        snap[:, 2:] = np.maximum(snap[:, 2:], snap[:, :2] + 1)        # at least one cell
        out[f"aligned {size}"] = snap * step + [box.west, box.south, box.west, box.south]
        out[f"free {size}"] = free
    return out


def release(name: str, data, eps: float, seed: int):
    """One release on the peers' box and 256 base grid (as `peers.py` runs them); DAWA with its
    own random workload (tuning it to these rectangles takes minutes and changes no premise)."""
    spec = dp.mechanisms()[name]
    params = {"base_cells": peers.SIDE} if any(p.name == "base_cells" for p in spec.params) else {}
    return dp.release(name, data, peers.BOX, eps, params=params, seed=np.random.default_rng(seed))


def measure(name: str, data, eps: float, seeds, classes: dict, truth: dict) -> dict | None:
    """Per class the share covered in each release; all classes' widths over truth; empty
    ranges. None: no range."""
    allr = np.concatenate(list(classes.values()))
    hits = {c: [] for c in classes}
    widths, empty = [], 0
    for s in seeds:
        lo, hi = release(name, data, eps, s).bounds(allr, LEVEL)
        if np.isnan(lo).all():
            return None
        i = 0
        for c, r in classes.items():
            t = truth[c]
            a, b = lo[i:i + len(r)], hi[i:i + len(r)]
            hits[c].append(float(np.mean((a <= t) & (t <= b))))
            widths.append((b - a) / np.maximum(t, 1.0))
            empty += int(np.sum(b < a))
            i += len(r)
    return {"hits": hits, "width": float(np.median(np.concatenate(widths))), "empty": empty}


def structure(args, rects) -> None:
    """Per (data, ε, mechanism): the median over rectangles and seeds of the range's width at a
    level near 0 (its ends without noise widening) over its width at 95%."""
    print("| data | ε | mechanism | structural share of the width (median) |\n|---|---|---|---|")
    for e in corpus.entries(None if args.part == "all" else args.part, args.data):
        data = points_from_matrix(e.make(), peers.BOX, seed=7)
        for eps in args.eps:
            for name in args.mechanisms:
                shares = []
                for s in args.seeds:
                    rel = release(name, data, eps, s)
                    lo, hi = rel.bounds(rects, LEVEL)
                    lo0, hi0 = rel.bounds(rects, 1e-9)
                    shares.append((hi0 - lo0) / np.maximum(hi - lo, 1.0))
                share = np.concatenate(shares)
                text = "none" if np.isnan(share).all() else f"{np.nanmedian(share):.2f}"
                print(f"| {e.name} | {eps:g} | {name} | {text} |", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="validation", choices=[*corpus.PARTS, "all"])
    ap.add_argument("--data", nargs="+", default=None, help="corpus names (default: the part's)")
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seeds", nargs="+", default=["1-5"], help="numbers or ranges, e.g. 1-5")
    ap.add_argument("--queries", type=int, default=200, help="rectangles per class")
    ap.add_argument("--mechanisms", nargs="+", default=MECHANISMS, choices=MECHANISMS)
    ap.add_argument("--structure", action="store_true", help="the structural share of the width instead")
    args = ap.parse_args(argv)
    args.seeds = seed_list(args.seeds)
    classes = rect_classes(args.queries)
    if args.structure:
        return structure(args, np.concatenate(list(classes.values())))
    names = list(classes)
    t0 = time.perf_counter()
    print(f"Coverage of the {LEVEL:.0%} range (± one standard error across releases), "
          f"{args.queries} rectangles per class, seeds {args.seeds[0]}-{args.seeds[-1]}\n")
    print("| data | ε | mechanism | " + " | ".join(names) + " | median width ÷ truth | empty |")
    print("|---|---|---|" + "---|" * len(names) + "---|---|")
    worst = []
    for e in corpus.entries(None if args.part == "all" else args.part, args.data):
        data = points_from_matrix(e.make(), peers.BOX, seed=7)
        truth = {c: data.true_counts(r, peers.BOX).astype(np.float64) for c, r in classes.items()}
        for eps in args.eps:
            for name in args.mechanisms:
                m = measure(name, data, eps, args.seeds, classes, truth)
                if m is None:
                    print(f"| {e.name} | {eps:g} | {name} | " + " | ".join(["none"] * len(names))
                          + " | — | — |", flush=True)
                    continue
                cols = []
                for c in names:
                    share = np.asarray(m["hits"][c])
                    p = float(share.mean())
                    se = float(share.std(ddof=1) / math.sqrt(len(share))) if len(share) > 1 else math.nan
                    cols.append(f"{100 * p:.1f} ± {100 * se:.1f}%")
                    worst.append((p + 2 * se, p, e.name, eps, name, c))
                print(f"| {e.name} | {eps:g} | {name} | " + " | ".join(cols)
                      + f" | {m['width']:.2f} | {m['empty']} |", flush=True)
    short = [w for w in worst if w[0] < LEVEL]
    print(f"\n{len(short)} of {len(worst)} (data, ε, mechanism, class) cells below "
          f"{LEVEL:.0%} by more than two standard errors" + (":" if short else "."))
    for _, p, d, eps, name, c in sorted(short)[:20]:
        print(f"  {d} ε {eps:g} {name} {c}: {100 * p:.1f}%")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
