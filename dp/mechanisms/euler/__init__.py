"""Euler histograms for users' convex regions (paper 004, Fanaeepour & Rubinstein).

One convex region ("body") per user. An Euler histogram stores, on an n x n grid, a count per
face (cell), per interior edge and per interior vertex: the number of bodies that touch it. For
a query made of whole cells, faces - edges + vertices inside the query is exactly the number of
bodies meeting it (spec 004 section 3). The pipeline:

- Euler: the exact counts H, stored as the (2n-1) x (2n-1) "doubled grid" G (section 2):
  G[2r, 2c] face, G[2r, 2c+1] vertical edge, G[2r+1, 2c] horizontal edge, G[2r+1, 2c+1] vertex.
  Open touch semantics (positive-area overlap) for faces; edges and vertices are derived from
  the faces (section 3.2), which is exact for convex bodies and keeps the sensitivity tight.
- DiffPriv: discrete Laplace noise of scale Δ/ε (integer, exact sampler) on every component,
  negatives truncated to 0 (section 4). The grid depends only on public parameters; the number
  of users is neither used nor exported.
- LinProg: least-absolute-deviation fit under the consistency constraints C1-C3 (section 5).
- Round: snap, round half up, repair, and check that no constraint is violated (section 6).

Public parameters: the study square (the largest square centred in the domain, or n·d when a
cell size is given), the cell size d = A/n, the region bound B and the neighbour model. With
k = ceil(B/d) a body touches at most a (k+1) x (k+1) block, so Δ = (2k+1)^2 (Lemma 2's looser
4.5·k(k+1) is an option); replace-one neighbours double Δ (section 4.1). `plan()` computes these
before any data is read, for the app to show.

Submodules:

- grid: the public EulerGrid (study square, cells, snapping), k, the sensitivity Δ, row counts.
- build: the exact (NON-PRIVATE) histogram: body pre-processing, touch sets, footprint guard.
- queries: F - E + V on whole-cell rectangles through signed prefix sums.
- consistency: constraints C1-C3, their violations, LinProg and Round (post-processing).
- release: DiffPriv, the immutable EulerRelease and its stages, plan/explain, the EULER spec.

The convex-body geometry they use (touch tests, diameters) lives in `dp.convex`.
"""
from __future__ import annotations

from ...convex import CHUNK, RHO, ConvexBodies, buffer_degenerate, diameters
from .build import GUARD_NOTE, derive, euler_build, face_masks, prepare_bodies
from .consistency import (constraint_matrix, linprog_lad, repair, round_consistent,
                          split_components, violations)
from .grid import (MAX_CELLS, NEIGHBOURS, SNAP_TOL, EulerGrid, constraint_counts, k_cells,
                   make_grid, sensitivity)
from .queries import answer_cells, query, signed_prefix
from .release import (EULER, SPECS, STAGE_LABELS, STAGES, EulerRelease, diffpriv, explain, plan,
                      release_euler)

_buffer_degenerate, _diameters = buffer_degenerate, diameters   # the names before dp.convex

__all__ = [
    "CHUNK", "EULER", "GUARD_NOTE", "MAX_CELLS", "NEIGHBOURS", "RHO", "SNAP_TOL", "SPECS",
    "STAGES", "STAGE_LABELS", "ConvexBodies", "EulerGrid", "EulerRelease", "answer_cells",
    "buffer_degenerate", "constraint_counts", "constraint_matrix", "derive", "diameters",
    "diffpriv", "euler_build", "explain", "face_masks", "k_cells", "linprog_lad", "make_grid",
    "plan", "prepare_bodies", "query", "release_euler", "repair", "round_consistent",
    "sensitivity", "signed_prefix", "split_components", "violations",
]
