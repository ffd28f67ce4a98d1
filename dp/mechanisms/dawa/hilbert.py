"""Hilbert order of a 2^k x 2^k grid and the rectangles of its aligned dyadic intervals.

Index d = 0 .. 4^k - 1 walks the grid so that consecutive cells share an edge, and every
interval [j 4^m, (j + 1) 4^m) is an aligned 2^m x 2^m square (the curve finishes a quadrant
before it enters the next). An interval [j 2 4^m, (j + 1) 2 4^m) is two consecutive quadrants
of one aligned square of side 2^(m+1), which share an edge: a 2^m x 2^(m+1) rectangle. So the
aligned dyadic intervals DAWA's partition uses are rectangles of the grid.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...errors import ParameterError


@lru_cache(maxsize=8)
def hilbert_cells(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of the cell at each Hilbert index d of the 2^k x 2^k grid (read-only arrays).

    The classic index-to-point conversion, run for every index at once: two bits of d per
    scale s = 1, 2, 4, ..., each choosing a quadrant, with the quadrant's frame rotated or
    reflected so the sub-curves join up.
    """
    if int(k) != k or not 0 <= k <= 15:
        raise ParameterError(f"Hilbert order needs 0 <= k <= 15, got {k}")
    side = 1 << k
    t = np.arange(side * side, dtype=np.int64)
    x = np.zeros_like(t)
    y = np.zeros_like(t)
    s = 1
    while s < side:
        rx = (t >> 1) & 1
        ry = (t ^ rx) & 1
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, s - 1 - x, x)
        y = np.where(flip, s - 1 - y, y)
        x, y = np.where(ry == 0, y, x), np.where(ry == 0, x, y)
        x += s * rx
        y += s * ry
        t >>= 2
        s <<= 1
    row, col = y, x
    row.flags.writeable = False
    col.flags.writeable = False
    return row, col


def hilbert_vector(F: np.ndarray) -> np.ndarray:
    """A 2^k x 2^k matrix read in Hilbert order (a vector of 4^k values)."""
    side = F.shape[0]
    k = side.bit_length() - 1
    if F.shape != (side, side) or side != 1 << k:
        raise ParameterError(f"Hilbert order needs a 2^k x 2^k matrix, got shape {F.shape}")
    row, col = hilbert_cells(k)
    return F[row, col]


def interval_rects(k: int, starts, lengths) -> np.ndarray:
    """(B, 4) [r0, r1, c0, c1) of the cells of each Hilbert interval [start, start + length),
    as its bounding box (for an aligned dyadic interval the box is exactly its cells)."""
    row, col = hilbert_cells(k)
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.empty((len(starts), 4), dtype=np.int64)
    for L in np.unique(lengths):                       # one pass per interval length
        sel = np.flatnonzero(lengths == L)
        idx = starts[sel, None] + np.arange(L)[None, :]
        r, c = row[idx], col[idx]
        out[sel] = np.column_stack([r.min(1), r.max(1) + 1, c.min(1), c.max(1) + 1])
    return out
