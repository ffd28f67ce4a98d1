"""Error metrics with the conventions of spec 000 section 5.3 and spec 003's bounded error."""
from __future__ import annotations

import numpy as np

from .constraints import positive_finite

# spec 003 (HTF) and the DPBench peers' table: errors are divided by max(true, 20)
DEFAULT_RHO = 20.0


def absolute_error(estimate, true) -> np.ndarray:
    """|est - true| per query, in points."""
    return np.abs(np.asarray(estimate, dtype=np.float64) - np.asarray(true, dtype=np.float64))


def relative_error(estimate, true, sanity: float | None = None) -> np.ndarray:
    """|est - true| / true, or / max(true, sanity) with a sanity bound.

    Without a bound (spec 000 5.3): a zero true count gives 0 when the estimate is 0, else inf.
    """
    if sanity is not None:
        return bounded_relative_error(estimate, true, sanity)
    tru = np.asarray(true, dtype=np.float64)
    err = absolute_error(estimate, tru)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = err / tru
    zero = tru == 0
    return np.where(zero, np.where(err == 0, 0.0, np.inf), out)


def bounded_relative_error(estimate, true, rho: float = DEFAULT_RHO) -> np.ndarray:
    """|est - true| / max(true, rho): the papers' relative error, finite even where true = 0.

    A query with fewer than rho true points is measured relative to rho (rho > 0, in points).
    """
    rho = check_rho(rho)
    tru = np.asarray(true, dtype=np.float64)
    return absolute_error(estimate, tru) / np.maximum(tru, rho)


def check_rho(rho) -> float:
    """ρ as a positive finite float, else a ParameterError a reader can act on."""
    return positive_finite("ρ (the smallest count errors are divided by)", rho)


def median_relative_error(estimate, true, sanity: float | None = None) -> float:
    """Median RE; robust to the inf values of zero-count queries (spec 000 5.3)."""
    return float(np.median(relative_error(estimate, true, sanity)))


def mean_relative_error(estimate, true, sanity: float | None = None) -> float:
    """Mean RE; use a sanity bound (spec 003 uses max(c, 20)) or infinities dominate."""
    return float(np.mean(relative_error(estimate, true, sanity)))
