"""Error metrics with the conventions of spec 000 section 5.3."""
from __future__ import annotations

import numpy as np


def absolute_error(estimate, true) -> np.ndarray:
    return np.abs(np.asarray(estimate, dtype=np.float64) - np.asarray(true, dtype=np.float64))


def relative_error(estimate, true, sanity: float | None = None) -> np.ndarray:
    """|est - true| / true, or / max(true, sanity) with a sanity bound.

    Without a bound (spec 000 5.3): a zero true count gives 0 when the estimate is 0, else inf.
    """
    est = np.asarray(estimate, dtype=np.float64)
    tru = np.asarray(true, dtype=np.float64)
    err = np.abs(est - tru)
    if sanity is not None:
        return err / np.maximum(tru, sanity)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = err / tru
    zero = tru == 0
    return np.where(zero, np.where(err == 0, 0.0, np.inf), out)


def median_relative_error(estimate, true, sanity: float | None = None) -> float:
    """Median RE; robust to the inf values of zero-count queries (spec 000 5.3)."""
    return float(np.median(relative_error(estimate, true, sanity)))


def mean_relative_error(estimate, true, sanity: float | None = None) -> float:
    """Mean RE; use a sanity bound (spec 003 uses max(c, 20)) or infinities dominate."""
    return float(np.mean(relative_error(estimate, true, sanity)))
