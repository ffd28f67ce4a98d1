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
