"""Adaptive: a small charged probe of how concentrated the points are picks the full quadtree or
the adaptive grid (AG) (`benchmarks/README.md`, "Choosing a mechanism that holds on unseen
data").

- Probe (ε_probe, 2% by default), on the full quadtree's public 256-cell grid over the box (or
  the base grid, `base_cells`, where that is coarser; the full quadtree then runs on it too):
  every cell's points cut in three slabs, its first point, its 2nd to (T − 1)th and the rest,
  each slab summed over the cells (O = Σ min(c, 1): the cells holding any point;
  L = Σ clip(c − 1, 0, T − 2); M = Σ max(c − T + 1, 0)) plus discrete Laplace(1/ε_probe). T is
  the count the full quadtree needs in a single cell to keep it at the ε left for the release:
  `zero_sd` standard deviations of its finest level's noise, a public function of ε. One point
  added to a cell adds 1 to exactly one slab, so the three have L1 sensitivity 1 together and
  cost ε_probe. Everything after the probe reads only its output and public inputs (ε, the
  box): post-processing.
- Choice, from the noisy O, L and M (N = O + L + M):
  1. N below GUARD noise scales: the probe cannot tell; PrivTree, which needs
     no model of the data.
  2. M ≥ KEEP_SHARE · N and O < FILLED_SHARE of the cells: most points sit in cells
     holding enough of them for the full quadtree to keep, and most of the map is empty. The
     full quadtree's every-level counts and zeroing then place them exactly.
  3. Otherwise (points spread thinly, or a map mostly filled): AG, whose grid sized by N ε
     suits points spread over the map.
  KEEP_SHARE is one half, "most points", and FILLED_SHARE one third, "two thirds of the map's
  cells empty"; neither is tuned: on the fitting part of the validation corpus every
  KEEP_SHARE from 0.3 to 0.5 and every FILLED_SHARE from 0.25 to 0.45 score the same (the
  measurements are in `benchmarks/README.md`; `benchmarks/corpus.py`,
  `benchmarks/recommend.py --corpus`).
- Release (the rest of ε): the chosen mechanism at its defaults. The ledger is the probe's
  entry followed by the chosen mechanism's, and sums to ε.
"""
from __future__ import annotations

import math

import numpy as np

from ..budget import Ledger
from ..noise import discrete_laplace_variance
from ..points import MEMO_CELLS, PointData
from .base import ADD_REMOVE_POINT, MechanismSpec
from .full_quadtree import FULL_QUADTREE, depth_budgets
from .leaves import base_shape, square_base_grid
from .ag import AG
from .privtree import PRIVTREE
from .trees import GUARANTEE_UNIT, P_BASE, _max_quad_height

GUARD = 3.0              # N must pass this many noise scales for the probe to tell anything
KEEP_SHARE = 0.5         # M / N from which the full quadtree is chosen: "most points"
FILLED_SHARE = 1 / 3     # O / cells below which the map is "mostly empty"
SPECS_BY_NAME = {s.name: s for s in (FULL_QUADTREE, PRIVTREE, AG)}


def keep_count(shape, epsilon: float) -> int:
    """T: the fewest points a single cell of the full quadtree's grid of `shape` needs for its
    default zeroing to keep it at ε (zero_sd standard deviations of the finest level's noise)."""
    p = FULL_QUADTREE.resolve_params({})
    eps_leaf = depth_budgets(_max_quad_height(shape), epsilon, p["ratio"])[-1]
    sd = math.sqrt(float(discrete_laplace_variance(1.0 / eps_leaf)))
    return max(2, math.ceil(p["zero_sd"] * sd))


def probe_counts(H: np.ndarray, t: int) -> np.ndarray:
    """Exact slabs (O, L, M) of counts H: every cell's first point, its 2nd to (t − 1)th and the
    rest, each summed over the cells; they add up to the number of points."""
    c = H.astype(np.int64)
    return np.array([np.minimum(c, 1).sum(), np.clip(c - 1, 0, t - 2).sum(),
                     np.maximum(c - t + 1, 0).sum()], dtype=np.int64)


def choose(noisy: np.ndarray, eps_probe: float, t: int, n_cells: int) -> tuple[str, dict, str]:
    """(mechanism, its parameters, the reason in plain words) from the probe's noisy slabs
    (O, L, M), T and the grid's number of cells."""
    occupied, low, high = (max(float(v), 0.0) for v in noisy)
    n = occupied + low + high
    if n < GUARD / eps_probe:
        return "privtree", {}, ("the probe could not tell how concentrated the points are (too "
                                "few points for its share of ε): PrivTree, which needs no model "
                                "of the data")
    share, filled = high / n, min(occupied / n_cells, 1.0)
    if share >= KEEP_SHARE and filled < FILLED_SHARE:
        return "full_quadtree", {}, (
            f"most points (over {100 * share:.0f}%) sit in places holding at least {t} of "
            f"them, enough to stand out from the noise, and most of the map (about "
            f"{100 * (1 - filled):.0f}%) is empty: the full quadtree, which places concentrated "
            "points exactly")
    if share >= KEEP_SHARE:
        return "ag", {}, (f"points reach about {100 * filled:.0f}% of the map's places: the "
                          "adaptive grid, which suits points spread over the map")
    return "ag", {}, (f"most points are spread thinly (under {max(1, math.ceil(100 * share))}% beyond the first "
                      f"{t - 1} of their place): the adaptive grid, which suits spread-out points")


def release_adaptive(data, domain, epsilon, split, params, rng):
    eps_probe, eps_rest = epsilon * split[0], epsilon * split[1]
    ledger = Ledger()
    side = min(FULL_QUADTREE.resolve_params({})["base_cells"], params["base_cells"])
    grid = square_base_grid(domain, side)
    base_grid = square_base_grid(domain, params["base_cells"])
    if isinstance(data, PointData) and grid.coarsens(base_grid) and \
            base_grid.n_cells + grid.n_cells <= MEMO_CELLS:      # both kept: nothing binned again
        data.histogram(base_grid)   # one pass over the points: the probe's counts are sums of these
    t = keep_count(grid.shape, eps_rest)
    noisy = ledger.noisy_counts(
        rng, probe_counts(data.histogram(grid), t), eps_probe,
        f"probe: points of a {grid.gx} × {grid.gy} grid's cells in three slabs (each cell's first, "
        f"its 2nd to {t - 1}th, the rest)",
        note="discrete Laplace(1/ε_probe) on each slab's total; one point adds 1 to exactly one "
             "slab, so L1 sensitivity 1; decides which mechanism releases (its choice is "
             "post-processing)")
    name, sub_params, reason = choose(noisy, eps_probe, t, grid.gx * grid.gy)
    spec = SPECS_BY_NAME[name]
    # the full quadtree runs on the probe's grid (its own 256 cells, or the base grid if coarser)
    base = side if name == "full_quadtree" else params["base_cells"]
    sub_params = spec.resolve_params({**sub_params, "base_cells": base})
    rel = spec.release(data, domain, eps_rest, tuple(spec.default_split), sub_params, rng)
    ledger.entries += rel.ledger.entries
    rel.spec, rel.epsilon, rel.split, rel.params, rel.ledger = ADAPTIVE, epsilon, split, params, ledger
    rel.eps_path = np.full(len(rel.eps_path), epsilon)
    rel.choice = reason
    rel.diagnostics = {**rel.diagnostics, "chosen": name, "chosen_params": sub_params,
                       "reason": reason}
    return rel


ADAPTIVE = MechanismSpec(
    name="adaptive", label="Adaptive (probe + quadtree or grid)",
    description="Spends a small share of ε measuring how many points sit in places of a fine "
                "grid that hold enough of them to stand out from the noise, and how much of the "
                "map holds any point, then releases with the mechanism that suits such data: "
                "the full quadtree where most points are concentrated in such places and most "
                "of the map is empty, the adaptive grid otherwise.",
    guarantee=f"{GUARANTEE_UNIT}, with ε = ε_probe + ε_release: the probe's three slab totals "
              "have L1 sensitivity 1 together and get discrete Laplace noise of scale 1/ε_probe, "
              "the choice reads only "
              "them and public inputs, and the chosen mechanism spends ε_release with its own "
              "guarantee.",
    unit=ADD_REMOVE_POINT,
    params=(P_BASE,),
    budget_parts=("probe", "release"), default_split=(0.02, 0.98),
    finest_grid=base_shape, release=release_adaptive)


SPECS = (ADAPTIVE,)
