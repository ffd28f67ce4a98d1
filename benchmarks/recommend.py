"""Which point mechanism to recommend: each contender's error over five data sets and seven ε.

The data sets are the three DPBench matrices and the two built-in point samples binned on
256 x 256 cells of their public boxes; the protocol is `peers.py`'s (2,000 cell-aligned
queries of 2/6/10% of the area, MRE % with ρ = 20, seeds 1-3). It prints each setting's
errors, the winner and how often each contender wins: the evidence behind `dp.recommend`; and
the adaptive mechanism's error over the lowest other's, with two standard errors from the
seeds' spread (three seeds leave wide bands: `--seeds $(seq 1 20)` narrows them).

    python benchmarks/recommend.py [--eps 0.05 0.1 ...] [--seeds 1 2 3] [--mechanisms ...]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
import peers  # noqa: E402

EPS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
CONTENDERS = ("adaptive", "privtree", "privtree + leaf threshold", "full quadtree + inference",
              "htf (midpoint)", "dawa", "e2epriv")
SAMPLES = ("city_200k", "small_city_5k")


def matrices() -> dict:
    """name -> 256 x 256 counts: the DPBench matrices found beside the repository, the samples."""
    out = {d: np.load(peers.DATA_DIR / f) for d, f in peers.FILES.items()
           if (peers.DATA_DIR / f).is_file()}
    for name in SAMPLES:
        data, domain = dp.load_sample(name)
        out[name] = data.histogram(dp.UniformGrid(domain, peers.SIDE, peers.SIDE))
    return out


def ratio_band(a, b) -> tuple[float, float]:
    """mean(a) / mean(b) and two standard errors of it (delta method, independent seeds): how
    far above the best the recommended mechanism is, and how much of that the seeds explain."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    r = a.mean() / b.mean()
    if len(a) < 2:
        return r, float("nan")
    rel = np.sqrt(a.var(ddof=1) / len(a) / a.mean() ** 2 + b.var(ddof=1) / len(b) / b.mean() ** 2)
    return r, 2 * r * rel


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=list(EPS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--mechanisms", nargs="+", default=list(CONTENDERS), choices=list(peers.PROJECT))
    args = ap.parse_args(argv)
    mechs = {k: peers.PROJECT[k] for k in args.mechanisms}
    wins, within, t0 = Counter(), 0, time.perf_counter()
    rec = "adaptive" if "adaptive" in mechs and len(mechs) > 1 else None
    print("| data | N | ε | " + " | ".join(mechs) + " | lowest |"
          + (" adaptive ÷ lowest other (± 2 SE) |" if rec else ""))
    print("|" + "---|" * (len(mechs) + 4 + bool(rec)))
    for name, m in matrices().items():
        runs = peers.measure_runs(m, mechs, args.eps, args.seeds)
        for eps in args.eps:
            errs = {k: float(np.mean(runs[(k, eps)])) for k in mechs}
            best = min(errs, key=errs.get)
            wins[best] += 1
            row = (f"| {name} | {int(m.sum()):,} | {eps:g} | "
                   + " | ".join(f"{v:.1f}" for v in errs.values()) + f" | {best} |")
            if rec:
                other = min((k for k in mechs if k != rec), key=errs.get)
                r, band = ratio_band(runs[(rec, eps)], runs[(other, eps)])
                within += r <= 1.1
                row += f" {r:.2f} ± {band:.2f} |"
            print(row, flush=True)
    total = sum(wins.values())
    print("\nlowest MRE in: " + ", ".join(f"{k} {wins[k]} of {total}" for k in mechs)
          + f" settings ({time.perf_counter() - t0:.0f} s)")
    if rec:
        print(f"adaptive within 10% of the lowest other in {within} of {total} settings "
              f"(seeds {', '.join(map(str, args.seeds))})")


if __name__ == "__main__":
    main()
