"""F - E + V on whole-cell rectangles through signed prefix sums (spec 004 section 3.3), shared
by the grid (exact answers) and the release (private answers)."""
from __future__ import annotations

import numpy as np

from ...summed_area import box_sums, summed_area


def signed_prefix(G) -> np.ndarray:
    """2-D prefix sums of sigma ⊙ G with a zero first row and column (3.3): the summed-area
    table of G with faces and vertices counted +1 and edges -1."""
    G = np.asarray(G)
    m = G.shape[0]
    sign = np.where((np.add.outer(np.arange(m), np.arange(m)) % 2) == 0, 1, -1)
    return summed_area(G * sign)


def answer_cells(P, cells) -> np.ndarray:
    """N(Q) for cell ranges [r0, r1, c0, c1] (inclusive) from a signed prefix array;
    rows of -1 (off the grid) answer 0."""
    c = np.atleast_2d(np.asarray(cells, np.int64))
    ok = c[:, 0] >= 0
    r0, r1, c0, c1 = (np.where(ok, c[:, i], 0) for i in range(4))
    v = box_sums(P, np.column_stack([2 * r0, 2 * r1 + 1, 2 * c0, 2 * c1 + 1]))
    return np.where(ok, v, 0)


def query(G, r0: int, r1: int, c0: int, c1: int):
    """N(Q) for rows r0..r1 and columns c0..c1 (inclusive): the direct signed sum (3.3)."""
    G = np.asarray(G)
    block = G[2 * r0:2 * r1 + 1, 2 * c0:2 * c1 + 1]
    i, j = np.indices(block.shape)
    return (block * np.where((i + j) % 2 == 0, 1, -1)).sum()
