"""Which point mechanism to recommend: each contender's error over five data sets and seven ε.

The data sets are the three DPBench matrices and the two built-in point samples binned on
256 x 256 cells of their public boxes; the protocol is `peers.py`'s (2,000 cell-aligned
queries of 2/6/10% of the area, MRE % with ρ = 20, seeds 1-3). It prints each setting's
errors, the winner and how often each contender wins: the evidence behind `dp.recommend`; and
the adaptive mechanism's error over the lowest other's, with two standard errors from the
seeds' spread (three seeds leave wide bands: `--seeds $(seq 1 60)` narrows them).

    python benchmarks/recommend.py [--eps 0.05 0.1 ...] [--seeds 1 2 3] [--mechanisms ...]
                                   [--data BeijingTaxiS ...] [--jobs 2]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
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
DATA = tuple(peers.FILES) + SAMPLES


def positive(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text}")
    return n


def matrices(names=DATA) -> dict:
    """name -> 256 x 256 counts: those of `names` among the DPBench matrices found beside the
    repository and the samples."""
    out = {d: np.load(peers.DATA_DIR / f) for d, f in peers.FILES.items()
           if d in names and (peers.DATA_DIR / f).is_file()}
    for name in (n for n in SAMPLES if n in names):
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


def runs_by_data(data: dict, mechs: dict, eps_list, seeds, jobs: int):
    """Yield (data name, matrix, {(label, ε): MRE per seed}) in `data`'s order, each
    (data set, mechanism) pair measured in one of `jobs` processes."""
    with ProcessPoolExecutor(jobs) as pool:
        futures = {(name, k): pool.submit(peers.measure_runs, m, {k: mechs[k]}, eps_list, seeds)
                   for name, m in data.items() for k in mechs}
        for name, m in data.items():
            runs = {}
            for k in mechs:
                runs.update(futures[(name, k)].result())
            yield name, m, runs


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=list(EPS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--mechanisms", nargs="+", default=list(CONTENDERS), choices=list(peers.PROJECT))
    ap.add_argument("--data", nargs="+", default=list(DATA), choices=DATA,
                    help="data sets (default all five)")
    ap.add_argument("--jobs", type=positive, default=1, help="processes to measure in (default 1)")
    args = ap.parse_args(argv)
    mechs = {k: peers.PROJECT[k] for k in args.mechanisms}
    wins, within, t0 = Counter(), 0, time.perf_counter()
    rec = "adaptive" if "adaptive" in mechs and len(mechs) > 1 else None
    print("| data | N | ε | " + " | ".join(mechs) + " | lowest |"
          + (" adaptive ÷ lowest other (± 2 SE) |" if rec else ""))
    print("|" + "---|" * (len(mechs) + 4 + bool(rec)))
    data = matrices(args.data)
    missing = [d for d in args.data if d not in data]
    if missing:
        print(f"skipped {', '.join(missing)}: the DPBench matrices are not in the shared folder "
              "next to the repository")
    for name, m, runs in runs_by_data(data, mechs, args.eps, args.seeds, args.jobs):
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
        seeds = sorted(set(args.seeds))
        run = seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2
        named = f"{seeds[0]}-{seeds[-1]}" if run else ", ".join(map(str, seeds))
        print(f"adaptive within 10% of the lowest other in {within} of {total} settings "
              f"(seeds {named})")


if __name__ == "__main__":
    main()
