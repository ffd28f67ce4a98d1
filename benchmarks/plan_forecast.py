"""How well a plan's forecast holds on real data: `dp.plan` on a synthetic twin, then real releases.

For each shared DPBench matrix (points spread inside their cells, as in `peers.py`), and each
stated need "rectangles of A% of the box within ±T people, 95% of the time", the plan is made on
a synthetic twin of the matrix's size (the owner's public guess, here the true size) in the
same public box; the real data is then released at the planned ε with fresh seeds and the 95th
percentile of |answer − true| is measured on random rectangles of that area. A forecast that
holds prints a ratio real / target near or below 1.

    python benchmarks/plan_forecast.py [--data checkin ...] [--mechanisms privtree ug ...] [--seeds 5]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
from dp import plan as planning  # noqa: E402
from dp.evaluate import points_from_matrix  # noqa: E402
from peers import BOX, DATA_DIR, FILES  # noqa: E402

NEEDS = ((0.01, 0.002), (0.1, 0.002))      # (area share, target as a share of N): ±0.2% of N


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="*", default=list(FILES))
    ap.add_argument("--mechanisms", nargs="*", default=[dp.recommend("points").name, "privtree", "ug", "dawa"])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    missing = [d for d in args.data if not (DATA_DIR / FILES[d]).exists()]
    if missing:
        sys.exit(f"the shared matrices are not here ({DATA_DIR}): {missing}")
    print(f"{'data':13s} {'area':>5s} {'target':>8s} {'mechanism':14s} {'planned ε':>9s} "
          f"{'twin q95':>9s} {'real q95':>9s} {'real/target':>11s}")
    for name in args.data:
        m = np.load(DATA_DIR / FILES[name])
        data = points_from_matrix(m, BOX, seed=7)
        n = int(m.sum())
        for area, share in NEEDS:
            target = round(share * n)
            twin = planning.Twin(BOX, area, n)
            rects = dp.random_workload(BOX, 400, area_frac=area, rng=11)
            truth = data.true_counts(rects, BOX)
            for mech in args.mechanisms:
                p = planning.epsilon_for(twin, mech, target)
                if not p.met:
                    print(f"{name:13s} {100 * area:4g}% {target:8,d} {mech:14s} {'> 10':>9s} "
                          f"{p.error:9,.0f} {'':>9s} {'':>11s}", flush=True)
                    continue
                errs = np.concatenate([np.abs(dp.release(mech, data, BOX, p.epsilon, seed=np.random.default_rng(s))
                                              .answer_many(rects) - truth) for s in range(args.seeds)])
                real = float(np.quantile(errs, 0.95))
                print(f"{name:13s} {100 * area:4g}% {target:8,d} {mech:14s} {p.epsilon:9g} "
                      f"{p.error:9,.0f} {real:9,.0f} {real / target:11.2f}", flush=True)


if __name__ == "__main__":
    main()
