"""Accuracy experiments: mechanisms x epsilons x query sizes x repetitions on one dataset.

Follows spec 000 section 5: fixed random evaluation workloads shared by every method and
repetition, per-size tuning, relative error without a sanity bound, one row per release.
Each row also carries the bounded relative error |est - true| / max(true, ρ) of spec 003 and
the absolute error, which stay finite where most queries hold no points.
"""
from __future__ import annotations

import zlib

import numpy as np

from . import metrics
from .domain import Domain
from .errors import ParameterError
from .noise import make_rng
from .mechanisms import mechanisms as _registry
from .mechanisms import release
from .points import LoadReport, PointData
from .queries import random_workload

ROW_KEYS = ("mechanism", "epsilon", "area_frac", "rep", "median_re", "mean_re",
            "median_re_sanity", "median_abs_error", "mean_abs_error", "n_queries", "n_inf",
            "n_small", "grid_size")


def workloads(domain: Domain, area_fracs, n_queries: int = 100, seed: int = 0) -> dict:
    """area_frac -> (n, 4) evaluation rectangles, one fixed draw per size.

    Streams are seeded with (seed, area), so they never coincide with a mechanism's tuning
    workload, which is seeded with the workload seed alone (spec 000 5.2: different positions).
    """
    return {a: random_workload(domain, n_queries, area_frac=a, rng=[seed, _code(a)])
            for a in area_fracs}


def evaluate(data: PointData, domain: Domain, mechanisms, epsilons, area_fracs,
             n_queries: int = 100, repetitions: int = 5, seed: int = 0, params=None,
             sanity: float = metrics.DEFAULT_RHO, progress=None, should_stop=None) -> list[dict]:
    """One row per release (see ROW_KEYS); returns the rows done so far if `should_stop()`.

    `params` maps a mechanism name to its parameters. A mechanism with a tuning workload is
    tuned on queries of the size it is evaluated on (spec 000 5.2), unless `params` fixes
    `tuning_query_area`. `median_re_sanity` divides by max(true, sanity) (spec 000 5.3's
    optional variant, spec 003's ρ); `n_small` counts queries with fewer than `sanity` true
    points; `grid_size` is the released grid's cells per side (a public output).
    Repetitions are the outer loop, so a stopped run still covers every (mechanism, epsilon,
    size) once it has finished one repetition.
    """
    specs = _registry()
    unknown = [m for m in mechanisms if m not in specs]
    if unknown:
        raise ParameterError(f"unknown mechanism(s) {unknown}; choose from {sorted(specs)}")
    params = params or {}
    W = workloads(domain, area_fracs, n_queries, seed)
    T = {a: data.true_counts(Q, domain).astype(np.float64) for a, Q in W.items()}
    total = repetitions * len(W) * len(epsilons) * len(mechanisms)
    rows: list[dict] = []
    for rep in range(repetitions):
        for a, Q in W.items():
            for eps in epsilons:
                for m in mechanisms:
                    if should_stop is not None and should_stop():
                        return rows
                    p = dict(params.get(m, {}))
                    if any(q.name == "tuning_query_area" for q in specs[m].params):
                        p.setdefault("tuning_query_area", a)
                    rel = release(m, data, domain, eps, params=p,
                                  seed=[seed, rep, zlib.crc32(m.encode()), _code(eps), _code(a)])
                    rows.append(_row(m, eps, a, rep, rel.answer_many(Q), T[a], sanity,
                                     getattr(getattr(rel, "grid", None), "gx", None)))
                    if progress is not None:
                        progress(len(rows), total)
    return rows


def summarise(rows, by=("mechanism", "epsilon", "area_frac")) -> list[dict]:
    """Per group: median and IQR (q25, q75) of the per-rep medians, plus pooled means.

    The spread is given for the RE (`median_re`, `q25_re`, `q75_re`), the bounded RE
    (`*_re_sanity`) and the absolute error (`*_abs_error`). Groups keep the order in which
    they first appear in `rows`.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    out = []
    for key, g in groups.items():
        n = np.array([r["n_queries"] for r in g], dtype=np.float64)
        out.append({**dict(zip(by, key)), "reps": len(g), **_spread(g, "median_re"),
                    **_spread(g, "median_re_sanity"), **_spread(g, "median_abs_error"),
                    "mean_re": _weighted([r["mean_re"] for r in g], n),
                    "mean_abs_error": _weighted([r["mean_abs_error"] for r in g], n),
                    "n_queries": int(n.sum()), "n_inf": int(sum(r["n_inf"] for r in g)),
                    "n_small": int(sum(r["n_small"] for r in g))})
    return out


def points_from_matrix(matrix, domain: Domain, seed: int = 0, name: str = "matrix") -> PointData:
    """Expand a count matrix into points spread uniformly inside each cell (fixed seed).

    matrix[j, k] is the count of cell row j counted from the SOUTH and column k from the
    west: the layout of UniformGrid.histogram, so re-binning on the same grid returns it.
    """
    M = np.asarray(matrix, dtype=np.float64)
    if M.ndim != 2 or np.any(M < 0) or np.any(M != np.round(M)):
        raise ParameterError("expected a 2-D matrix of non-negative integer counts")
    gy, gx = M.shape
    counts = M.astype(np.int64).ravel()
    cell = np.repeat(np.arange(counts.size), counts)
    rng = make_rng(seed)
    # offsets stay off the cell edges so floating-point rounding never moves a point across one
    u = rng.uniform(1e-6, 1 - 1e-6, (2, cell.size))
    x = domain.west + (cell % gx + u[0]) * (domain.width / gx)
    y = domain.south + (cell // gx + u[1]) * (domain.height / gy)
    n = int(cell.size)
    return PointData(x, y, report=LoadReport(f"{gy}x{gx} count matrix", n, n), name=name)


def _code(v: float) -> int:
    """A float parameter as a non-negative integer seed component."""
    return int(round(float(v) * 1e6))


def _row(mechanism, epsilon, area_frac, rep, est, true, sanity, grid_size) -> dict:
    """One release's errors over one workload (see ROW_KEYS)."""
    re = metrics.relative_error(est, true)
    abs_err = metrics.absolute_error(est, true)
    return {"mechanism": mechanism, "epsilon": float(epsilon), "area_frac": float(area_frac),
            "rep": rep, "median_re": float(np.median(re)), "mean_re": float(np.mean(re)),
            "median_re_sanity": metrics.median_relative_error(est, true, sanity),
            "median_abs_error": float(np.median(abs_err)), "mean_abs_error": float(np.mean(abs_err)),
            "n_queries": int(len(true)), "n_inf": int(np.isinf(re).sum()),
            "n_small": int((np.asarray(true) < sanity).sum()), "grid_size": grid_size}


def _spread(group, key: str) -> dict:
    """`key` (a per-rep median) as the median and IQR over the group's repetitions."""
    q25, q50, q75 = _quantiles([r[key] for r in group], (0.25, 0.5, 0.75))
    suffix = key.removeprefix("median_")
    return {key: q50, f"q25_{suffix}": q25, f"q75_{suffix}": q75}


def _quantiles(v, qs) -> list[float]:
    """Linear quantiles; an interpolation touching an infinite RE is infinite (not NaN)."""
    with np.errstate(invalid="ignore"):
        q = np.quantile(np.asarray(v, dtype=np.float64), qs)
    return [float(x) for x in np.where(np.isnan(q), np.inf, q)]


def _weighted(values, weights) -> float:
    v = np.asarray(values, dtype=np.float64)
    return float(np.sum(v * weights) / np.sum(weights))
