"""Paper 000's Fig. 10/11a protocol (spec 000 section 5) on the three DPBench 256x256 matrices.

Median relative error per query size (1..64% of the area) for E2EPriv, Heuristic UG, Leaky and
BestNonPriv at epsilon = 1, and an epsilon sweep at 1% on one dataset. Writes per-release and
summary CSVs and an HTML figure to benchmarks/results/. Usage:
    python benchmarks/accuracy.py [--quick] [--reps R]
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
from dp.evaluate import evaluate, points_from_matrix, summarise  # noqa: E402
from dp.mechanisms.grid import heuristic_grid_size  # noqa: E402

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dpbench2d"
RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = {"checkin": "checkin_256_256.npy", "cabspotting": "cabspottingS_256_256.npy",
            "beijing": "BeijingTaxiS_256_256.npy"}
SWEEP_DATASET = "checkin"   # the paper's Gowalla; the only one with mostly non-empty 1% queries
DOMAIN = dp.Domain(0.0, 0.0, 1.0, 1.0, name="unit square")
SIZES = (0.01, 0.04, 0.09, 0.16, 0.25, 0.64)
EPS_SWEEP = (0.2, 0.4, 0.6, 0.8, 1.0)
# The matrices hold 256x256 cells, so a finer grid cannot see more structure: candidates run
# from 3/8 of that resolution to all of it (the paper's Storage and Gowalla G also span 3/8..1).
GRID_SIZES = [96, 128, 160, 192, 224, 256]
RANDOMISED = ("e2epriv", "ug", "leaky")
ORDER = ("best_nonpriv", "leaky", "e2epriv", "ug")
LABELS = {"e2epriv": "E2EPriv", "ug": "Heuristic", "leaky": "Leaky", "best_nonpriv": "BestNonPriv"}


def delta_for(n: int) -> float:
    """Sanity fraction δ by dataset size, on the paper's scale (9k, 870k, 6.4M points)."""
    return 0.1 if n < 10**5 else 0.01 if n < 10**6 else 0.001


def run_dataset(name, data, eps_list, sizes, mechs, reps, n_queries, seed):
    """Rows of one experiment; BestNonPriv has no randomness, so it gets one repetition."""
    delta = delta_for(data.n)
    tuned = {"grid_sizes": GRID_SIZES, "delta": delta}
    params = {m: tuned for m in ("e2epriv", "leaky", "best_nonpriv")}
    kw = dict(n_queries=n_queries, seed=seed, params=params, sanity=delta * data.n)
    rows = evaluate(data, DOMAIN, [m for m in mechs if m in RANDOMISED], eps_list, sizes,
                    repetitions=reps, **kw)
    if "best_nonpriv" in mechs:
        rows += evaluate(data, DOMAIN, ["best_nonpriv"], eps_list, sizes, repetitions=1, **kw)
    return [{"dataset": name, "n": data.n, "delta": delta, **r} for r in rows]


def write_csv(path: Path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def fmt(v: float) -> str:
    return "inf" if np.isinf(v) else f"{100 * v:.2f}"


def print_table(title, summary, col_key, cols, col_fmt, key="median_re"):
    """Mechanisms down, `col_key` across; RE in %, with the IQR of per-rep medians for median_re."""
    width = 21 if key == "median_re" else 10
    print(f"\n{title}")
    print(f"{'':12}" + "".join(f"{col_fmt(c):>{width}}" for c in cols))
    for m in ORDER:
        cells = {s[col_key]: s for s in summary if s["mechanism"] == m}
        if not cells:
            continue
        line = f"{LABELS[m]:12}"
        for c in cols:
            s = cells.get(c)
            txt = "" if s is None else fmt(s[key]) + (
                f" [{fmt(s['q25_re'])}, {fmt(s['q75_re'])}]"
                if key == "median_re" and s["reps"] > 1 else "")
            line += f"{txt:>{width}}"
        print(line)


def figure(summaries, sweep, path: Path):
    """Median RE vs query size per dataset, and vs epsilon; IQR bands; sanity-bounded row below."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(summaries)
    titles = [f"{n} (ε=1)" for n in names] + [f"{SWEEP_DATASET}, 1% queries"]
    fig = make_subplots(rows=2, cols=len(names) + 1, subplot_titles=titles, vertical_spacing=0.12)
    colours = {"e2epriv": "#d62728", "ug": "#1f77b4", "leaky": "#2ca02c", "best_nonpriv": "#7f7f7f"}
    panels = [(summaries[n], "area_frac", i + 1) for i, n in enumerate(names)]
    panels.append((sweep, "epsilon", len(names) + 1))
    for summary, xkey, col in panels:
        for m in ORDER:
            s = sorted((r for r in summary if r["mechanism"] == m), key=lambda r: r[xkey])
            if not s:
                continue
            x = [100 * r[xkey] if xkey == "area_frac" else r[xkey] for r in s]
            for row, key in ((1, "median_re"), (2, "median_re_sanity")):
                y = [r[key] if 0 < r[key] < np.inf else None for r in s]   # log axis
                fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=LABELS[m],
                                         legendgroup=m, showlegend=(col == 1 and row == 1),
                                         line=dict(color=colours[m])), row=row, col=col)
            if s[0]["reps"] > 1:
                lo = [r["q25_re"] if np.isfinite(r["q25_re"]) else None for r in s]
                hi = [r["q75_re"] if np.isfinite(r["q75_re"]) else None for r in s]
                fig.add_trace(go.Scatter(x=x + x[::-1], y=hi + lo[::-1], fill="toself",
                                         line=dict(width=0), fillcolor=colours[m], opacity=0.2,
                                         legendgroup=m, showlegend=False, hoverinfo="skip"),
                              row=1, col=col)
    for col in range(1, len(names) + 2):
        xt = "ε" if col == len(names) + 1 else "query area (% of domain)"
        for row in (1, 2):
            fig.update_xaxes(title_text=xt, type="log" if col <= len(names) else "linear",
                             row=row, col=col)
            fig.update_yaxes(type="log", row=row, col=col, title_text=(
                ("median RE" if row == 1 else "median RE, sanity bound δN") if col == 1 else None))
    fig.update_layout(height=750, width=380 * (len(names) + 1),
                      title="Paper 000 Fig. 10/11a protocol on DPBench 256x256 matrices "
                            "(missing points: median RE is infinite, or 0 for BestNonPriv)")
    fig.write_html(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repetitions, 30 queries (< 1 min)")
    ap.add_argument("--reps", type=int, help="repetitions per randomised mechanism (default 100)")
    ap.add_argument("--seed", type=int, default=1, help="evaluation seed (workloads and noise)")
    args = ap.parse_args()
    if not DATA_DIR.is_dir():
        print(f"skipped: DPBench matrices not found at {DATA_DIR}; this benchmark needs the "
              "shared data checkout next to the repository")
        return
    reps = args.reps or (3 if args.quick else 100)
    n_queries = 30 if args.quick else 100
    RESULTS.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    rows, summaries, sweep_rows, sweep_new = [], {}, [], []
    for name, file in DATASETS.items():
        M = np.load(DATA_DIR / file)
        data = points_from_matrix(M, DOMAIN, seed=0, name=name)
        r = run_dataset(name, data, [1.0], SIZES, ORDER, reps, n_queries, args.seed)
        rows += r
        summaries[name] = summarise(r)
        delta = delta_for(data.n)
        print(f"{name}: N = {data.n:,}, δ = {delta:g} (ρ = δN = {delta * data.n:,.0f}), "
              f"G = {GRID_SIZES}, UG grid = {heuristic_grid_size(data.n, 1.0)}, "
              f"{reps} reps x {n_queries} queries, {time.perf_counter() - t0:.0f} s")
        if name == SWEEP_DATASET:
            # the epsilon = 1 rows equal the main run's (same derived seeds), so they are reused
            sweep_new = run_dataset(name, data, [e for e in EPS_SWEEP if e != 1.0], SIZES[:1],
                                    RANDOMISED, reps, n_queries, args.seed)
            sweep_rows = sweep_new + [x for x in r if x["area_frac"] == SIZES[0]]
    write_csv(RESULTS / "accuracy_runs.csv", rows + sweep_new)
    summary = [{"dataset": n, **s} for n, ss in summaries.items() for s in ss]
    sweep = summarise(sweep_rows)
    write_csv(RESULTS / "accuracy_summary.csv",
              summary + [{"dataset": f"{SWEEP_DATASET} (ε sweep)", **s} for s in sweep])
    area, eps = (lambda a: f"{100 * a:g}%"), (lambda e: f"ε={e:g}")
    for key, what in (("median_re", "median RE % [IQR of per-rep medians]"),
                      ("median_re_sanity", "median RE % with sanity bound max(true, δN)")):
        for name, s in summaries.items():
            print_table(f"{name}: {what}, ε = 1, by query area", s, "area_frac", SIZES, area, key)
        print_table(f"{SWEEP_DATASET}: {what}, 1% queries, by ε", sweep, "epsilon", EPS_SWEEP,
                    eps, key)
    figure(summaries, sweep, RESULTS / "accuracy.html")
    print(f"\nwrote {RESULTS.name}/accuracy_runs.csv, accuracy_summary.csv, accuracy.html "
          f"in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
