"""Counts per H3 hexagon: time of `dp.shapes.shape_counts` (every shape's noise interval at
once: exact for one draw, simulated side by side for two or three, Cornish-Fisher beyond)
against the same counts with each shape's interval from `noise_half_width`, one shape at a
time (the rule rectangles use: simulation up to 64 draws), on the small_city_5k sample at ε 1.

    python benchmarks/shapes_bench.py [--resolutions 7 8]

Prints one row per mechanism and resolution: shapes, seconds for each way, and the ratio to the
faster one; and the median and largest relative difference between the two ways' half-widths.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import dp
from dp import shapes
from dp.mechanisms.half_width import noise_half_width

MECHANISMS = ("privtree", "e2epriv", "full_quadtree")


def one_at_a_time(rel, polys) -> np.ndarray:
    """Each shape's half-width by `noise_half_width` with its own terms, shape by shape."""
    import shapely
    d = rel.domain
    clipped = shapely.intersection(polys, shapely.box(d.west, d.south, d.east, d.north))
    boxes, ranges, values = shapes._region_boxes(rel)
    si, ri = shapely.STRtree(boxes).query(clipped, predicate="intersects")
    frac = shapely.area(shapely.intersection(clipped[si], boxes[ri])) / shapely.area(boxes[ri])
    _, scale = shapes._own_draws(rel, ranges, values)
    var = np.bincount(si, frac ** 2 * dp.noise.discrete_laplace_variance(scale[ri]), minlength=len(polys))
    order = np.argsort(si, kind="stable")
    cuts = np.searchsorted(si[order], np.arange(len(polys) + 1))
    out = np.empty(len(polys))
    for s in range(len(polys)):
        idx = order[cuts[s]:cuts[s + 1]]
        out[s] = noise_half_width(var[s], (frac[idx], scale[ri[idx]]), 0.95, n_sim=shapes.SIMULATIONS)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--resolutions", type=int, nargs="+", default=[7, 8])
    args = p.parse_args(argv)
    data, dom = dp.load_sample("small_city_5k")
    print(f"{'mechanism':<14}{'res':>4}{'shapes':>8}{'all at once s':>15}{'one by one s':>14}"
          f"{'ratio':>8}{'median diff':>13}{'max diff':>10}")
    for name in MECHANISMS:
        rel = dp.release(name, data, dom, 1.0)
        for res in args.resolutions:
            ids, polys = shapes.h3_cells(dom, res)
            t = time.perf_counter()
            sc = shapes.shape_counts(rel, polys, ids)
            fast = time.perf_counter() - t
            t = time.perf_counter()
            ref = one_at_a_time(rel, polys)
            slow = time.perf_counter() - t
            mine = (sc.upper - sc.lower) / 2
            diff = np.abs(mine / np.where(ref > 0, ref, np.nan) - 1)
            print(f"{name:<14}{res:>4}{len(ids):>8}{fast:>15.2f}{slow:>14.2f}"
                  f"{slow / fast:>7.1f}x{np.nanmedian(diff):>12.1%}{np.nanmax(diff):>10.1%}")


if __name__ == "__main__":
    main()
