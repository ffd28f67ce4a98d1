"""Adaptive: a small charged probe of how empty the box is picks PrivTree, PrivTree with a leaf
threshold, or the full quadtree, which each win on different data (`benchmarks/README.md`,
"Two sound mechanisms that beat PrivTree on the DPBench matrices, and lose on the samples").

- Probe (ε_probe, 5% by default): the exact counts of a public 8 × 8 grid over the box, plus
  discrete Laplace(1/ε_probe); the cells are disjoint, so this costs ε_probe. Everything after
  it reads only the probe's output and public inputs (ε, the box): post-processing.
- Decision: the box is *mostly empty* when the noisy mean count m̂ is at least GUARD noise
  scales (so a cell's noise cannot pass for emptiness) and at least EMPTY_SHARE of the cells
  are below EMPTY_LEVEL · m̂. A mostly empty box whose occupied part still spreads over many
  cells (at least BUSY_SHARE of them above m̂) gets the full quadtree, and so does any mostly
  empty box at ε ≤ LOW_EPSILON; other mostly empty boxes get PrivTree with leaves at or below
  THRESHOLD noise scales zeroed; any other box gets PrivTree as it is. Measured on the DPBench
  matrices and the samples at 8 × 8 cells (exact counts): the matrices leave 70-92% of the
  cells below a tenth of the mean, the samples 0-2%; BeijingTaxiS, where the full quadtree
  wins at every ε, has 16% of its cells above the mean, checkin 9% and cabspottingS 3%, where
  the leaf threshold wins above ε 0.05. Those three data sets set BUSY_SHARE: a rule fitted on
  three cases, stated as such in the README.
- Release (the rest of ε): the chosen mechanism at its defaults. The ledger is the probe's
  entry followed by the chosen mechanism's, and sums to ε.
"""
from __future__ import annotations

import numpy as np

from ..budget import Ledger
from ..domain import UniformGrid
from .base import ADD_REMOVE_POINT, MechanismSpec
from .full_quadtree import FULL_QUADTREE
from .leaves import base_shape
from .trees import GUARANTEE_UNIT, P_BASE, PRIVTREE

PROBE_CELLS = 8          # the probe's public grid, cells per side
GUARD = 5.0              # the noisy mean count must be at least this many noise scales
EMPTY_LEVEL = 0.1        # a cell below this share of the mean count counts as empty
EMPTY_SHARE = 0.3        # this share of empty cells makes the box mostly empty
BUSY_SHARE = 0.12        # this share of cells above the mean: the occupied part spreads out
LOW_EPSILON = 0.05       # at or below: the full quadtree for any mostly empty box
THRESHOLD = 5.0          # PrivTree's zero_below when it is chosen for a mostly empty box


def choose(noisy: np.ndarray, eps_probe: float, epsilon: float) -> tuple[str, dict, str]:
    """(mechanism, its parameters, the reason in words) from the probe's noisy counts and ε."""
    mean = max(float(noisy.sum()), 0.0) / noisy.size
    if mean < GUARD / eps_probe:
        return "privtree", {}, ("the probe could not tell how empty the box is (too few points "
                                "for its noise): PrivTree")
    share = float(np.mean(noisy < EMPTY_LEVEL * mean))
    if share < EMPTY_SHARE:
        return "privtree", {}, (f"the points spread over the box ({100 * share:.0f}% of the "
                                "probe's cells near empty): PrivTree")
    busy = float(np.mean(noisy > mean))
    empty = f"the box is mostly empty ({100 * share:.0f}% of the probe's cells near empty)"
    if busy >= BUSY_SHARE:
        return "full_quadtree", {}, (f"{empty} but its occupied part spreads over "
                                     f"{100 * busy:.0f}% of the cells: the full quadtree")
    if epsilon <= LOW_EPSILON:
        return "full_quadtree", {}, f"{empty} and ε ≤ {LOW_EPSILON:g}: the full quadtree"
    return "privtree", {"zero_below": THRESHOLD}, (
        f"{empty} and concentrated in a few cells: PrivTree with near-empty leaves zeroed")


def release_adaptive(data, domain, epsilon, split, params, rng):
    eps_probe, eps_rest = epsilon * split[0], epsilon * split[1]
    ledger = Ledger()
    probe = UniformGrid(domain, PROBE_CELLS, PROBE_CELLS)
    noisy = ledger.noisy_counts(rng, data.histogram(probe), eps_probe,
                                f"probe: {PROBE_CELLS} × {PROBE_CELLS} grid counts",
                                note="discrete Laplace(1/ε_probe) on disjoint cells; decides which "
                                     "mechanism releases (its choice is post-processing)")
    name, sub_params, reason = choose(np.asarray(noisy, dtype=np.float64), eps_probe, epsilon)
    spec = {"privtree": PRIVTREE, "full_quadtree": FULL_QUADTREE}[name]
    sub_params = spec.resolve_params({**sub_params, **({"base_cells": params["base_cells"]}
                                                       if name == "privtree" else {})})
    rel = spec.release(data, domain, eps_rest, tuple(spec.default_split), sub_params, rng)
    ledger.entries += rel.ledger.entries
    rel.spec, rel.epsilon, rel.split, rel.params, rel.ledger = ADAPTIVE, epsilon, split, params, ledger
    rel.eps_path = np.full(len(rel.eps_path), epsilon)
    rel.diagnostics = {**rel.diagnostics, "chosen": name, "chosen_params": sub_params,
                       "reason": reason}
    return rel


ADAPTIVE = MechanismSpec(
    name="adaptive", label="Adaptive (probe + tree)",
    description="Spends a small share of ε on a coarse noisy grid to see how empty the box is, "
                "then releases with the mechanism that measured best for such data: PrivTree "
                "where the points spread over the box; where most of the box is empty, the full "
                "quadtree if the occupied part still covers many cells (or ε is low), else "
                "PrivTree with near-empty leaves zeroed.",
    guarantee=f"{GUARANTEE_UNIT}, with ε = ε_probe + ε_release: the probe's cells are disjoint "
              "noisy counts, the choice reads only them and public inputs, and the chosen "
              "mechanism spends ε_release with its own guarantee.",
    unit=ADD_REMOVE_POINT,
    params=(P_BASE,),
    budget_parts=("probe", "release"), default_split=(0.02, 0.98),
    finest_grid=base_shape, release=release_adaptive)


SPECS = (ADAPTIVE,)
