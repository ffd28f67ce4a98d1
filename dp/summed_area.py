"""Summed-area tables: the one way every module sums a matrix over many boxes at once."""
from __future__ import annotations

import numpy as np


def summed_area(values, whole: bool = False) -> np.ndarray:
    """S with S[..., i, j] = sum of values[..., :i, :j] over the last two axes (zero first row
    and column), so any box sum costs four lookups. `whole=True` checks the values are whole
    numbers and sums them exactly in int64 (counts); otherwise float64."""
    v = np.asarray(values)
    if whole:
        ints = np.rint(v).astype(np.int64)
        if not np.array_equal(ints, v):
            raise ValueError("a count matrix must hold whole numbers")
        v, dtype = ints, np.int64
    else:
        dtype = np.int64 if v.dtype.kind in "iub" else np.float64
    S = np.zeros(v.shape[:-2] + (v.shape[-2] + 1, v.shape[-1] + 1), dtype=dtype)
    S[..., 1:, 1:] = v.cumsum(-2).cumsum(-1)
    return S


def box_sums(S: np.ndarray, boxes) -> np.ndarray:
    """Sum over each box [r0, r1) x [c0, c1) (rows of `boxes`) from its summed-area table S."""
    b = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
    r0, r1, c0, c1 = b.T
    return S[r1, c1] - S[r0, c1] - S[r1, c0] + S[r0, c0]


def integral(S: np.ndarray, x, y) -> np.ndarray:
    """The integral over [0, x) x [0, y) (fractional cell coordinates: x columns, y rows) of
    counts spread evenly inside their cells, from their summed-area table S: bilinear in S
    within a cell, so exact for that even spread."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    gy, gx = S.shape[-2] - 1, S.shape[-1] - 1
    j = np.clip(np.floor(x).astype(np.int64), 0, gx - 1)
    i = np.clip(np.floor(y).astype(np.int64), 0, gy - 1)
    fx, fy = x - j, y - i
    return ((1 - fy) * ((1 - fx) * S[i, j] + fx * S[i, j + 1])
            + fy * ((1 - fx) * S[i + 1, j] + fx * S[i + 1, j + 1]))


def rect_integrals(S: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The even-spread sum over each rectangle [x0, y0, x1, y1] (rows of `cells`, fractional
    cell coordinates within the grid) from the summed-area table S: four `integral` lookups."""
    x0, y0, x1, y1 = np.asarray(cells, dtype=np.float64).reshape(-1, 4).T
    return integral(S, x1, y1) - integral(S, x0, y1) - integral(S, x1, y0) + integral(S, x0, y0)
