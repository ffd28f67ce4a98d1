"""Does a plan keep its promise on data it never saw? `dp.plan` against real releases.

For each data set of a part of the corpus (`corpus.py`; default its fresh part, scored only
after `dp.plan.MARGIN_VALUES` was chosen on the fitting part) and each stated need "rectangles of A%
of the box within ±T people, 95% of the time" (T a share of N, at least 5), the plan is made
from public inputs only (the box, the owner's stated N, here the true one); the real points are
then released at the planned ε raised by each margin of rungs asked, with five fresh seeds, and
the 95th percentile of |answer − true| is measured over 400 random rectangles of that area.
Beside it, the least ε of the plan's ladder that meets the need on the real data (same
releases, by bisection): planned ÷ needed below 1 means the plan under-spent and missed, above
1 that it over-spent (one step of the ladder is 1.47 times). `--least` records only the least
margin meeting each need (what `dp.plan.MARGIN` is chosen from).

    python benchmarks/plan_forecast.py [--part fresh] [--data ring ...] [--mechanisms ...]
                                       [--margins 0 1 2 3 4] [--least] [--no-exact-values]
                                       [--out rows.jsonl]
    python benchmarks/plan_forecast.py --rows rows.jsonl       # the tables from saved rows
"""
from __future__ import annotations

import argparse
import contextlib
import json
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
CHOOSE_SHARE = 0.95                        # a mechanism's margin: the least meeting this share of its plans


def real_errors(mech: str, data, eps: float, rects, truth) -> np.ndarray:
    """|answer − true|, one row per each of SEEDS fresh releases, one column per rectangle."""
    return np.array([np.abs(dp.release(mech, data, peers.BOX, eps, seed=np.random.default_rng(100 + s))
                            .answer_many(rects) - truth) for s in range(SEEDS)])


def within(errs: np.ndarray, target: float) -> tuple[float, float]:
    """The share of (release, rectangle) pairs within the target, and its standard error with
    the rectangles as clusters (a rectangle's errors across releases are not independent)."""
    per_rect = np.mean(errs <= target, axis=0)
    return float(per_rect.mean()), float(per_rect.std(ddof=1) / np.sqrt(per_rect.size))


class RealErrors:
    """The real data's error at each rung of the plan's ladder, measured once per rung."""

    def __init__(self, mech, data, rects, truth):
        self.mech, self.data, self.rects, self.truth, self.cache = mech, data, rects, truth, {}

    def errors(self, i: int) -> np.ndarray:
        if i not in self.cache:
            self.cache[i] = real_errors(self.mech, self.data, planning.LADDER[i], self.rects, self.truth)
        return self.cache[i]

    def __call__(self, i: int) -> float:
        """The LEVEL quantile of |answer − true| at rung i, over rectangles and releases."""
        return float(np.quantile(self.errors(i), LEVEL))

    def needed(self, target: float) -> int | None:
        """The least rung meeting the target on the real data (None: not even the top)."""
        top = len(planning.LADDER) - 1
        if self(top) > target:
            return None
        lo, hi = -1, top
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if self(mid) <= target else (mid, hi)
        return hi


def measure(entries, mechanisms, margins, out=None, least=False, shapes=planning.SHAPES) -> list[dict]:
    """One row per (data, need, mechanism): the plan's rung without margin (on twins of
    `shapes`), the real error at that rung raised by each margin, and the rung the real data
    needed. With `least` (for choosing the margin, cheaper): only the least of `margins` at
    which the need was met."""
    rows = []
    top = len(planning.LADDER) - 1
    for e in entries:
        m = e.make()
        data = points_from_matrix(m, peers.BOX, seed=7)
        n = int(m.sum())
        for area, share in NEEDS:
            target = max(round(share * n), MIN_TARGET)
            twin = planning.Twin(peers.BOX, area, n, shapes=shapes)
            rects = dp.random_workload(peers.BOX, 400, area_frac=area, rng=11)
            truth = data.true_counts(rects, peers.BOX)
            for mech in mechanisms:
                real = RealErrors(mech, data, rects, truth)
                p = planning.epsilon_for(twin, mech, target, LEVEL, margin=0)
                rung = planning.LADDER.index(p.epsilon) if p.met else None
                row = {"data": e.name, "part": e.part, "area": area, "target": target, "mechanism": mech,
                       "rung": rung}
                if least:
                    row["least"] = next((k for k in sorted(margins) if p.met
                                         and real(min(rung + k, top)) <= target), None)
                else:
                    row["needed"] = real.needed(target)
                    row["real"] = {k: real(min(rung + k, top)) / target for k in margins} if p.met else {}
                    row["within"] = ({k: within(real.errors(min(rung + k, top)), target) for k in margins}
                                     if p.met else {})
                rows.append(row)
                if out:
                    print(json.dumps(row), file=out, flush=True)
    return rows


def summary(rows, margin: int | None, own: dict) -> None:
    """Per mechanism, the plans raised by `margin` rungs (None: each mechanism's own, `own`:
    `dp.plan.MARGIN` or `MARGIN_VALUES`): met, missed far, ε over what was needed."""
    top = len(planning.LADDER) - 1
    name = "dp.plan's margins" if margin is None else f"margin {margin} rung(s)"
    print(f"\n{name}:\n\n| mechanism | margin | plans | met (real ≤ target) | missed by > 1.5× | "
          f"planned ÷ needed: median, worst | met where ε was to spare: median real ÷ target | "
          f"within target ≥ 95% less two standard errors |\n|---|---|---|---|---|---|---|---|")
    tot = [0, 0, 0, 0, 0]
    kept = margin
    for mech in dict.fromkeys(r["mechanism"] for r in rows):
        margin = own.get(mech, 0) if kept is None else kept
        mine = [r for r in rows if r["mechanism"] == mech and r["rung"] is not None
                and margin in r["real"]]
        real = np.array([r["real"][margin] for r in mine])
        over = np.array([planning.LADDER[min(r["rung"] + margin, top)] / planning.LADDER[r["needed"]]
                         for r in mine if r["needed"] is not None])
        spare = [r["real"][margin] for r in mine
                 if r["needed"] is not None and min(r["rung"] + margin, top) > r["needed"]]
        shares = [r["within"][margin] for r in mine if margin in r.get("within", {})]
        held = sum(share >= LEVEL - 2 * se for share, se in shares)
        tot = [tot[0] + len(mine), tot[1] + int(np.sum(real <= 1)), tot[2] + int(np.sum(real > 1.5)),
               tot[3] + held, tot[4] + len(shares)]
        print(f"| {mech} | {margin} | {len(mine)} | {int(np.sum(real <= 1))} | {int(np.sum(real > 1.5))} | "
              f"{np.median(over) if over.size else float('nan'):.2f}, "
              f"{over.max() if over.size else float('nan'):.1f} | "
              f"{np.median(spare) if spare else float('nan'):.2f} | "
              f"{f'{held} of {len(shares)}' if shares else 'not recorded'} |")
    print(f"\n{name}: {tot[1]} of {tot[0]} plans met ({100 * tot[1] / max(tot[0], 1):.1f}%), "
          f"{tot[2]} missed by more than 1.5×"
          + (f"; {tot[3]} of {tot[4]} held 95% within two standard errors" if tot[4] else ""))


def least_summary(rows, margins) -> None:
    """For choosing the margin: the share of plans met when raised by each margin, in all and
    per mechanism, and each mechanism's least margin meeting CHOOSE_SHARE of its plans (at most
    the largest margin asked): the rule `dp.plan.MARGIN` is chosen by."""
    made = [r for r in rows if r["rung"] is not None]
    print("\n| margin (rungs) | plans met | share |\n|---|---|---|")
    for k in sorted(margins):
        met = sum(r["least"] is not None and r["least"] <= k for r in made)
        print(f"| {k} | {met} of {len(made)} | {100 * met / max(len(made), 1):.1f}% |")
    print(f"\n| mechanism | plans | {' | '.join(f'met at {k}' for k in sorted(margins))} | chosen |")
    print(f"|---|---|{'---|' * len(margins)}---|")
    for mech in dict.fromkeys(r["mechanism"] for r in made):
        mine = [r for r in made if r["mechanism"] == mech]
        shares = [sum(r["least"] is not None and r["least"] <= k for r in mine) / len(mine)
                  for k in sorted(margins)]
        chosen = next((k for k, sh in zip(sorted(margins), shares) if sh >= CHOOSE_SHARE), max(margins))
        print(f"| {mech} | {len(mine)} | {' | '.join(f'{100 * sh:.0f}%' for sh in shares)} | {chosen} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="fresh", choices=[*corpus.PARTS, "all"])
    ap.add_argument("--data", nargs="+", default=None, help="corpus names (default: the part's)")
    ap.add_argument("--mechanisms", nargs="+", default=planning.plannable())
    ap.add_argument("--margins", type=int, nargs="+", default=None,
                    help="rungs added to the plan's ε, each scored, and dp.plan's own margins "
                         "when all of theirs are among them (default: 0 and dp.plan's)")
    ap.add_argument("--exact-values", action=argparse.BooleanOptionalAction, default=True,
                    help="plan on the six twins with MARGIN_VALUES, as `dp.plan` does by default "
                         "(--no-exact-values: the four twins with MARGIN)")
    ap.add_argument("--out", type=Path, help="also write one JSON line per plan here")
    ap.add_argument("--rows", type=Path, help="summarise rows written by --out instead of measuring")
    ap.add_argument("--least", action="store_true",
                    help="only the least margin meeting each need (to choose dp.plan.MARGIN)")
    args = ap.parse_args(argv)
    shapes, own = ((planning.WITH_VALUES, planning.MARGIN_VALUES) if args.exact_values
                   else (planning.SHAPES, planning.MARGIN))
    if args.margins is None:
        args.margins = sorted({0, *own.values()})
    t0 = time.perf_counter()
    if args.rows:
        rows = [json.loads(line) for line in args.rows.read_text().splitlines()]
        for r in rows:
            r["real"] = {int(k): v for k, v in r.get("real", {}).items()}
            r["within"] = {int(k): v for k, v in r.get("within", {}).items()}
    else:
        entries = corpus.entries(None if args.part == "all" else args.part, args.data)
        with open(args.out, "w") if args.out else contextlib.nullcontext() as out:
            rows = measure(entries, args.mechanisms, args.margins, out, args.least, shapes)
    if args.least or any("least" in r for r in rows):
        least_summary(rows, args.margins)
    measured = {k for r in rows for k in r.get("real", {})}
    for k in sorted(measured):
        summary(rows, k, own)
    if set(own.values()) <= measured:
        summary(rows, None, own)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
