"""The peers' table on the DPBench matrices, with the project's mechanisms measured beside it.

Reproduces the protocol of `../shared/benchmarks/peers.md` exactly: 256x256 matrices (row =
y); 2,000 cell-aligned queries of 2, 6 or 10% of the area and aspect ratio in [1/4, 4] from
numpy default_rng(5); MRE % = mean over queries and seeds of 100|answer - true| / max(true, 20);
seeds 1, 2, 3; each cell's count expanded into points uniformly inside the cell
(default_rng(7)) in a public box square in metres (lon 0..1, lat -0.5..0.5; peers.md allows
any box). The protocol's domain is the 256 x 256 grid the peers ran on, so every mechanism with
a base grid is given it (`base_cells` = 256, a public input). A workload-aware mechanism (DAWA)
is given the evaluation workload, as the peers' DAWA was. The peers' numbers are read from peers.md, never typed here.

    python benchmarks/peers.py [--eps 0.1 0.5 1] [--seeds 1 2 3] [--data checkin ...]
                               [--mechanisms privtree htf ...]
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dp  # noqa: E402
from dp.evaluate import points_from_matrix  # noqa: E402
from dp.summed_area import box_sums, summed_area  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
PEERS_MD = SHARED / "benchmarks" / "peers.md"
DATA_DIR = SHARED / "data" / "dpbench2d"
FILES = {"checkin": "checkin_256_256.npy", "BeijingTaxiS": "BeijingTaxiS_256_256.npy",
         "cabspottingS": "cabspottingS_256_256.npy"}
# square in metres (it straddles the equator), so the mechanisms' square base grids of 256 or
# 1024 cells fall exactly on the matrix's cells; lon 0..10, lat 0..10 gives 256 x 255 cells
BOX = dp.Domain(0.0, -0.5, 1.0, 0.5, name="lon 0..1, lat -0.5..0.5")
SIDE, N_QUERIES, RHO = 256, 2000, 20.0
PEER_COLUMNS = ("UG", "AG", "QuadTree", "HB2D", "DAWA")
# label -> (mechanism, parameters): each mechanism's defaults on the protocol's grid
PROJECT = {
    "recommended": (dp.recommend("points").name, {}),
    "dawa": ("dawa", {}),
    "htf (paper)": ("htf", {"budget_mode": "paper"}),
    "htf (search)": ("htf", {"split_rule": "search"}),
    "htf (midpoint)": ("htf", {}),
    "e2epriv": ("e2epriv", {}),
    "privtree": ("privtree", {}),
    "privtree + leaf threshold": ("privtree", {"zero_below": 5.0}),
    "full quadtree + inference": ("full_quadtree", {}),
    "adaptive": ("adaptive", {}),
}


def read_peers(path: Path = PEERS_MD) -> dict:
    """(data, eps) -> {peer: MRE %} from the first MRE table of peers.md."""
    rows, last = {}, None
    in_table = False
    for line in path.read_text().splitlines():
        if line.startswith("| data (points)"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if not in_table or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = re.sub(r"\s*\(.*\)", "", cells[0]) or last
        last = name
        rows[(name, float(cells[1]))] = dict(zip(PEER_COLUMNS, map(float, cells[2:])))
    return rows


def workload() -> np.ndarray:
    """The 2,000 cell-aligned queries as (q, 4) [r0, r1, c0, c1) in cells (peers.md protocol)."""
    rng = np.random.default_rng(5)
    out = []
    for _ in range(N_QUERIES):
        a = rng.choice([0.02, 0.06, 0.10])
        ar = np.exp(rng.uniform(np.log(0.25), np.log(4)))
        w = max(1, min(SIDE, round(np.sqrt(a * ar) * SIDE)))
        h = max(1, min(SIDE, round(np.sqrt(a / ar) * SIDE)))
        r0 = rng.integers(0, SIDE - h + 1)
        c0 = rng.integers(0, SIDE - w + 1)
        out.append((r0, r0 + h, c0, c0 + w))
    return np.array(out, dtype=np.int64)


def as_rects(cells: np.ndarray) -> np.ndarray:
    """Cell ranges to [west, south, east, north] in the public box (row 0 = south)."""
    step = BOX.width / SIDE
    r0, r1, c0, c1 = cells.T
    return np.column_stack([BOX.west + c0 * step, BOX.south + r0 * step,
                            BOX.west + c1 * step, BOX.south + r1 * step])


def mre(answers: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(100.0 * np.abs(answers - truth) / np.maximum(truth, RHO)))


def measure(matrix, mechanisms: dict, eps_list, seeds) -> dict:
    """(label, eps) -> MRE % over the workload, averaged over the seeds."""
    return {k: float(np.mean(v)) for k, v in measure_runs(matrix, mechanisms, eps_list, seeds).items()}


def measure_runs(matrix, mechanisms: dict, eps_list, seeds, counts: bool = False) -> dict:
    """(label, eps) -> MRE % over the workload, one per seed. `counts`: give the mechanisms the
    matrix as counts on the protocol's grid (`dp.CountData`) instead of points spread in its
    cells: the same histograms on that grid, without making millions of points."""
    cells = workload()
    truth = box_sums(summed_area(matrix, whole=True), cells).astype(np.float64)
    rects = as_rects(cells)
    data = dp.CountData(matrix, BOX) if counts else points_from_matrix(matrix, BOX, seed=7)
    out = {}
    for label, (name, params) in mechanisms.items():
        if name not in dp.mechanisms():
            continue
        if any(p.name == "base_cells" for p in dp.mechanisms()[name].params):
            params = {"base_cells": SIDE, **params}       # the protocol's grid
        extra = {"workload": rects} if dp.mechanisms()[name].workload_aware else {}
        for eps in eps_list:
            out[(label, eps)] = [mre(dp.release(name, data, BOX, eps, params=params, **extra,
                                                seed=np.random.default_rng(s)).answer_many(rects),
                                     truth) for s in seeds]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.05, 0.1, 0.5, 1.0, 2.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--data", nargs="+", default=list(FILES), choices=list(FILES))
    ap.add_argument("--mechanisms", nargs="+", default=list(PROJECT), choices=list(PROJECT))
    args = ap.parse_args(argv)
    if not (PEERS_MD.is_file() and DATA_DIR.is_dir()):
        print(f"skipped: needs {PEERS_MD.name} and the DPBench matrices in the shared folder "
              "next to the repository")
        return
    peers = read_peers()
    mechs = {k: PROJECT[k] for k in args.mechanisms}
    ours = {}
    t0 = time.perf_counter()
    for d in args.data:
        m = np.load(DATA_DIR / FILES[d])
        for key, v in measure(m, mechs, args.eps, args.seeds).items():
            ours[(d,) + key] = v
        print(f"  {d}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"\nMRE % (ρ = {RHO:g}), {N_QUERIES} queries of 2/6/10% area, seeds {args.seeds}; peers "
          f"from {PEERS_MD.name}\n")
    print_table(peers, ours, args.data, args.eps, list(mechs))


def print_table(peers: dict, ours: dict, data_names, eps_list, labels) -> None:
    """The issue's table: DAWA, the best other peer, then the project's rows (results keyed
    (data, label, eps)), per data set and ε."""
    head = ["data", "eps", "DPComp DAWA (not DP as implemented)", "best sound peer"] + list(labels)
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for d in data_names:
        for eps in eps_list:
            peer = peers.get((d, eps))
            if peer:
                others = {k: v for k, v in peer.items() if k != "DAWA"}
                best = min(others, key=others.get)
                cols = [f"{peer['DAWA']:.1f}", f"{best} {others[best]:.1f}"]
            else:
                cols = ["—", "—"]     # peers.md measured ε 0.1 and 1 only
            cols += [f"{ours[(d, lab, eps)]:.1f}" if (d, lab, eps) in ours else "—"
                     for lab in labels]
            print(f"| {d} | {eps:g} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    main()
