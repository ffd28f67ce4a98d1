"""Does a plan keep its promise on data it never saw? `dp.plan` against real releases.

For each data set of the corpus (`corpus.py`; default its validation part, which no plan
setting was chosen on) and each stated need "rectangles of A% of the box within ±T people,
95% of the time" (T a share of N, at least 5), the plan is made from public inputs only (the
box, the owner's stated N, here the true one); the real points are then released at the
planned ε with five fresh seeds and the 95th percentile of |answer − true| is measured over
400 random rectangles of that area. Beside it, the least ε of the plan's ladder that meets the
need on the real data (same releases, by bisection): planned ÷ needed below 1 means the plan
under-spent and missed, above 1 that it over-spent (one step of the ladder is 1.47 times).

    python benchmarks/plan_forecast.py [--part validation] [--data ring ...] [--mechanisms ...]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
import peers  # noqa: E402 (puts the repository on the path)
import dp  # noqa: E402
from dp import plan as planning  # noqa: E402
from dp.evaluate import points_from_matrix  # noqa: E402

NEEDS = ((0.01, 0.002), (0.1, 0.002))      # (area share, target as a share of N)
MIN_TARGET = 5
LEVEL = 0.95
SEEDS = 5


def real_error(mech: str, data, eps: float, rects, truth) -> float:
    """The LEVEL quantile of |answer − true| over the rectangles and SEEDS fresh releases."""
    errs = [np.abs(dp.release(mech, data, peers.BOX, eps, seed=np.random.default_rng(100 + s))
                   .answer_many(rects) - truth) for s in range(SEEDS)]
    return float(np.quantile(np.concatenate(errs), LEVEL))


def needed_epsilon(mech: str, data, target: float, rects, truth) -> float | None:
    """The least ε of the plan's ladder meeting the target on the real data (None: not even 10)."""
    ladder = planning.LADDER
    cache: dict[int, float] = {}

    def err(i):
        if i not in cache:
            cache[i] = real_error(mech, data, ladder[i], rects, truth)
        return cache[i]
    if err(len(ladder) - 1) > target:
        return None
    lo, hi = -1, len(ladder) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if err(mid) <= target else (mid, hi)
    return ladder[hi]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="validation", choices=["fit", "validation", "all"])
    ap.add_argument("--data", nargs="+", default=None, help="corpus names (default: the part's)")
    ap.add_argument("--mechanisms", nargs="+", default=planning.plannable())
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print("| data | area | target | mechanism | planned ε | needed ε | planned ÷ needed | real q95 ÷ target |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for e in corpus.entries(None if args.part == "all" else args.part, args.data):
        m = e.make()
        data = points_from_matrix(m, peers.BOX, seed=7)
        n = int(m.sum())
        for area, share in NEEDS:
            target = max(round(share * n), MIN_TARGET)
            twin = planning.Twin(peers.BOX, area, n)
            rects = dp.random_workload(peers.BOX, 400, area_frac=area, rng=11)
            truth = data.true_counts(rects, peers.BOX)
            for mech in args.mechanisms:
                p = planning.epsilon_for(twin, mech, target, LEVEL)
                need = needed_epsilon(mech, data, target, rects, truth)
                real = real_error(mech, data, p.epsilon, rects, truth) if p.met else None
                rows.append((mech, p.epsilon, need, real, target))
                show = lambda v: "> 10" if v is None else f"{v:g}"      # noqa: E731
                ratio = (f"{p.epsilon / need:.2f}" if p.met and need else "—")
                print(f"| {e.name} | {100 * area:g}% | {target:,} | {mech} | {show(p.epsilon)} | "
                      f"{show(need)} | {ratio} | {'—' if real is None else f'{real / target:.2f}'} |",
                      flush=True)
    print("\n| mechanism | plans | met (real ≤ target) | missed by > 1.5x | planned ÷ needed, worst over-spend |")
    print("|---|---|---|---|---|")
    for mech in args.mechanisms:
        mine = [r for r in rows if r[0] == mech and r[1] is not None]
        met = sum(r[3] <= r[4] for r in mine)
        far = sum(r[3] > 1.5 * r[4] for r in mine)
        over = [r[1] / r[2] for r in mine if r[2]]
        print(f"| {mech} | {len(mine)} | {met} | {far} | {max(over, default=float('nan')):.2f} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
