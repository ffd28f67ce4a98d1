"""Which point mechanism to recommend: each contender's error over data sets and ε.

By default the data sets are the three DPBench matrices and the two built-in point samples
binned on 256 x 256 cells of their public boxes; `--corpus fit|validation|all` measures the
validation corpus instead (`corpus.py`: generated data of varied structure and the DPBench
matrices, split into a fitting and a validation part), given to the mechanisms as counts on
the protocol's grid. The protocol is `peers.py`'s (2,000 cell-aligned queries of 2/6/10% of the
area, MRE % with ρ = 20). It prints each setting's errors, the winner and how often each
contender wins: the evidence behind `dp.recommend`; the adaptive mechanism's error over the
lowest other's, with two standard errors from the seeds' spread; and, leave one data set out,
the single mechanism per ε that is best on the other data sets, scored on the one left out
(the simplest fitted rule, as a bar for any rule that is fitted), and the adaptive rule's
two shares refitted on the fitting part without the data set left out, beside the fixed ones.

    python benchmarks/recommend.py [--eps 0.05 0.1 ...] [--seeds 1-20] [--mechanisms ...]
                                   [--data BeijingTaxiS ...] [--corpus validation] [--jobs 2]
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
from dp.mechanisms import adaptive as A  # noqa: E402
import corpus  # noqa: E402
import peers  # noqa: E402

EPS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
CONTENDERS = ("adaptive", "privtree", "privtree + leaf threshold", "full quadtree + inference",
              "htf (midpoint)", "dawa", "e2epriv")
# every sound point mechanism that reads a grid, for "the best of the project's mechanisms"
ALL_SOUND = ("adaptive", "privtree", "privtree + leaf threshold", "full quadtree + inference",
             "htf (midpoint)", "dawa", "e2epriv", "ag", "ug", "quadtree", "kdtree", "identity")
MECHANISMS = {**peers.PROJECT, "ag": ("ag", {}), "ug": ("ug", {}), "quadtree": ("quadtree", {}),
              "kdtree": ("kdtree", {}), "identity": ("identity", {})}
CORPUS_EPS = (0.05, 0.1, 0.5, 1.0, 2.0)
RULE_KEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)                     # shares the leave-one-out scans
RULE_FILLED = (0.2, 0.25, 0.3, 1 / 3, 0.4, 0.45, 0.5, 0.6, 1.01)
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


def seed_list(texts) -> list[int]:
    """Seeds given as numbers or ranges ("1-20")."""
    out = []
    for t in texts:
        lo, _, hi = str(t).partition("-")
        out += list(range(positive(lo), positive(hi) + 1)) if hi else [positive(lo)]
    return out


def loo_choices(errs: dict, mechs) -> dict:
    """Leave one data set out: {(data, ε): the mechanism of `mechs` with the lowest geometric
    mean of error over the lowest error, on every other data set at that ε}. `errs` maps
    (data, label, ε) to mean MRE; the lowest is over every label measured."""
    names = sorted({d for d, _, _ in errs})
    labels = sorted({k for _, k, _ in errs})
    eps_all = sorted({e for _, _, e in errs})
    low = {(d, e): min(errs[(d, k, e)] for k in labels) for d in names for e in eps_all}
    out = {}
    for e in eps_all:
        for left in names:
            score = {k: np.mean([np.log(errs[(d, k, e)] / low[(d, e)]) for d in names if d != left])
                     for k in mechs}
            out[(left, e)] = min(score, key=score.get)
    return out


def runs_by_data(data: dict, mechs: dict, eps_list, seeds, jobs: int, counts: bool = False):
    """Yield (data name, matrix, {(label, ε): MRE per seed}) in `data`'s order, each
    (data set, mechanism) pair measured in one of `jobs` processes (`counts`: the matrices
    given as counts, `peers.measure_runs`)."""
    with ProcessPoolExecutor(jobs) as pool:
        futures = {(name, k): pool.submit(peers.measure_runs, m, {k: mechs[k]}, eps_list, seeds,
                                          counts)
                   for name, m in data.items() for k in mechs}
        for name, m in data.items():
            runs = {}
            for k in mechs:
                runs.update(futures[(name, k)].result())
            yield name, m, runs


def rule_stats(m: np.ndarray, eps: float) -> tuple[float, float]:
    """The adaptive probe's two statistics, exact (no noise): the share of points beyond the
    first T − 1 of their cell, and the share of cells holding any point (`dp.mechanisms.adaptive`)."""
    t = A.keep_count(m.shape, eps * A.ADAPTIVE.default_split[1])
    occupied, low, high = A.probe_counts(m, t)
    return high / max(occupied + low + high, 1), occupied / m.size


def print_rule_loo(errs: dict, data: dict, eps_list) -> None:
    """Leave one data set out for the adaptive rule's two shares: chosen on the fitting part
    without the data set left out (lowest geometric mean of error ÷ lowest, exact statistics),
    scored on it, beside the fixed shares the mechanism uses."""
    fq, ag = "full quadtree + inference", "ag"
    labels = sorted({k for _, k, _ in errs} - {"adaptive"})
    part = {e.name: e.part for e in corpus.CORPUS}
    rows = []
    for name, m in data.items():
        for eps in eps_list:
            low = min(errs[(name, k, eps)] for k in labels)
            rows.append((name, eps, *rule_stats(m, eps), errs[(name, fq, eps)] / low,
                         errs[(name, ag, eps)] / low))

    def ratio(row, keep, filled):
        return row[4] if row[2] >= keep and row[3] < filled else row[5]

    grid = [(k, f) for k in RULE_KEEP for f in RULE_FILLED]
    print("\nThe adaptive rule's shares, leave one data set out (exact statistics; error ÷ "
          "lowest of every mechanism but adaptive)\n")
    print("| data | part | shares chosen on the other fitting data | its error ÷ lowest | "
          "fixed shares (½, ⅓) |")
    print("|---|---|---|---|---|")
    out = {p: ([], []) for p in dict.fromkeys(e.part for e in corpus.CORPUS)}
    for name in data:
        train = [r for r in rows if part[r[0]] == "fit" and r[0] != name]
        if not train:
            continue
        k, f = min(grid, key=lambda c: np.mean([np.log(ratio(r, *c)) for r in train]))
        mine = [r for r in rows if r[0] == name]
        loo = [ratio(r, k, f) for r in mine]
        fixed = [ratio(r, A.KEEP_SHARE, A.FILLED_SHARE) for r in mine]
        out[part[name]][0].extend(loo)
        out[part[name]][1].extend(fixed)
        print(f"| {name} | {part[name]} | {k:g}, {f:.2g} | {np.exp(np.mean(np.log(loo))):.2f} | "
              f"{np.exp(np.mean(np.log(fixed))):.2f} |")
    for p, (loo, fixed) in out.items():
        if loo:
            a, b = np.array(loo), np.array(fixed)
            print(f"\n{p}: refitted shares within 10% of the lowest in {int(np.sum(a <= 1.1))} of "
                  f"{a.size} settings (geometric mean {np.exp(np.mean(np.log(a))):.2f}, at most "
                  f"{a.max():.1f}); the fixed shares in {int(np.sum(b <= 1.1))} "
                  f"(geometric mean {np.exp(np.mean(np.log(b))):.2f}, at most {b.max():.1f})")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", help="ε values (default 0.05 to 2)")
    ap.add_argument("--seeds", nargs="+", default=["1", "2", "3"],
                    help="seeds, as numbers or ranges such as 1-20 (default 1 2 3)")
    ap.add_argument("--mechanisms", nargs="+", choices=list(MECHANISMS),
                    help="contenders (default: the trees; with --corpus every sound mechanism)")
    ap.add_argument("--data", nargs="+", help="data sets (default all of the chosen set)")
    ap.add_argument("--corpus", choices=("fit", "validation", "holdout", "all"),
                    help="measure a part of the validation corpus (corpus.py) instead")
    ap.add_argument("--jobs", type=positive, default=1, help="processes to measure in (default 1)")
    args = ap.parse_args(argv)
    seeds = seed_list(args.seeds)
    eps_list = args.eps or list(CORPUS_EPS if args.corpus else EPS)
    mechs = {k: MECHANISMS[k] for k in args.mechanisms or (ALL_SOUND if args.corpus else CONTENDERS)}
    if args.corpus:
        part = None if args.corpus == "all" else args.corpus
        known = [e.name for e in corpus.entries(part)]
        asked = args.data or known
        data = {e.name: e.make() for e in corpus.entries(part, asked)}
        missing = [d for d in asked if d not in data]
    else:
        asked = args.data or list(DATA)
        unknown = [d for d in asked if d not in DATA]
        if unknown:
            ap.error(f"unknown data set(s) {', '.join(unknown)}; choose from {', '.join(DATA)}")
        data = matrices(asked)
        missing = [d for d in asked if d not in data]
    wins, within, t0 = Counter(), 0, time.perf_counter()
    rec = "adaptive" if "adaptive" in mechs and len(mechs) > 1 else None
    print("| data | N | ε | " + " | ".join(mechs) + " | lowest |"
          + (" adaptive ÷ lowest other (± 2 SE) |" if rec else ""))
    print("|" + "---|" * (len(mechs) + 4 + bool(rec)))
    if missing:
        print(f"skipped {', '.join(missing)}: not in this part of the corpus, or the DPBench "
              "matrices are not in the shared folder next to the repository")
    errs, ratios = {}, {}
    for name, m, runs in runs_by_data(data, mechs, eps_list, seeds, args.jobs, bool(args.corpus)):
        for eps in eps_list:
            e = {k: float(np.mean(runs[(k, eps)])) for k in mechs}
            errs.update({(name, k, eps): v for k, v in e.items()})
            best = min(e, key=e.get)
            wins[best] += 1
            row = (f"| {name} | {int(m.sum()):,} | {eps:g} | "
                   + " | ".join(f"{v:.1f}" for v in e.values()) + f" | {best} |")
            if rec:
                other = min((k for k in mechs if k != rec), key=e.get)
                r, band = ratio_band(runs[(rec, eps)], runs[(other, eps)])
                ratios[(name, eps)] = r
                within += r <= 1.1
                row += f" {r:.2f} ± {band:.2f} |"
            print(row, flush=True)
    total = sum(wins.values())
    print("\nlowest MRE in: " + ", ".join(f"{k} {wins[k]} of {total}" for k in mechs)
          + f" settings ({time.perf_counter() - t0:.0f} s)")
    s = sorted(set(seeds))
    named = (f"{s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) and len(s) > 2
             else ", ".join(map(str, s)))
    if rec:
        r = np.array(list(ratios.values()))
        print(f"adaptive within 10% of the lowest other in {within} of {total} settings (seeds "
              f"{named}); within 30% in {int(np.sum(r <= 1.3))}, at most {r.max():.2f} times it")
    if len(data) > 2 and len(mechs) > 2:
        print_loo(errs, [k for k in mechs if k != rec], ratios)
    if args.corpus and {"full quadtree + inference", "ag"} <= set(mechs) and len(data) > 2:
        print_rule_loo(errs, data, eps_list)


def print_loo(errs: dict, mechs, rec_ratios: dict) -> None:
    """The leave-one-data-set-out table: per data set and ε the single mechanism best on the
    others, and its error and the recommended one's over the lowest."""
    choice = loo_choices(errs, mechs)
    labels = sorted({k for _, k, _ in errs})
    print("\nLeave one data set out: the single mechanism best on the other data sets at that ε "
          "(geometric mean of error ÷ lowest), scored on the one left out\n")
    print("| data | ε | chosen on the others | its error ÷ lowest | adaptive ÷ lowest other |")
    print("|---|---|---|---|---|")
    r_loo = []
    for (d, e), k in choice.items():
        low = min(errs[(d, lab, e)] for lab in labels if lab != "adaptive")
        r_loo.append(errs[(d, k, e)] / low)
        rec = rec_ratios.get((d, e))
        print(f"| {d} | {e:g} | {k} | {r_loo[-1]:.2f} | {'—' if rec is None else f'{rec:.2f}'} |")
    r = np.array(r_loo)
    print(f"\nleave-one-out choice within 10% of the lowest in {int(np.sum(r <= 1.1))} of {r.size}"
          f" settings, within 30% in {int(np.sum(r <= 1.3))}, geometric mean "
          f"{np.exp(np.mean(np.log(r))):.2f}, at most {r.max():.2f}")


if __name__ == "__main__":
    main()
