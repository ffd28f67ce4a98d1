"""Typical total error of a mechanism's answers, measured on PUBLIC synthetic data only.

A release's 95% interval covers the noise alone. Answering a rectangle that cuts through a cell
or leaf also assumes the points are spread evenly inside it, which adds error no interval can
show without the true data. This module gives an honest sense of the total: it generates a
synthetic city (fixed seed, the same public box, a public assumed size), releases it with the
same mechanism, ε, split and parameters, and measures the median absolute error of random
rectangles per query area. Nothing here reads the user's data, its size or its bounding box.
"""
from __future__ import annotations

import math

import numpy as np

from .domain import Domain
from .errors import ParameterError
from .mechanisms import release
from .noise import make_rng
from .points import LoadReport, PointData
from .queries import random_workload
from .samples import _city

DEFAULT_POINTS = 100_000         # the public assumed dataset size
SHAPES = ("clustered", "uniform")
# query areas as fractions of the domain: a ladder with ratio 2 from 1/65536 to the whole box
AREA_BUCKETS = tuple(2.0 ** -k for k in range(16, -1, -1))


def synthetic_points(domain: Domain, n: int, shape: str = "clustered", seed: int = 0) -> PointData:
    """n synthetic points in the public box: a clustered city (as the built-in samples) or uniform."""
    if shape not in SHAPES:
        raise ParameterError(f"shape must be one of {SHAPES}, got {shape!r}")
    if shape == "clustered":
        x, y = _city(domain, n, seed)
    else:
        u = make_rng(seed).uniform(0, 1, (2, n))
        x, y = domain.west + u[0] * domain.width, domain.south + u[1] * domain.height
    return PointData(x, y, report=LoadReport(f"synthetic {shape} points", n, n), name=f"synthetic {shape}")


def area_bucket(area_frac: float) -> float:
    """The bucket of AREA_BUCKETS nearest (on a log scale) to a query's share of the domain."""
    if not (area_frac > 0):
        raise ParameterError(f"a query's area fraction must be positive, got {area_frac}")
    k = min(max(round(-math.log2(min(area_frac, 1.0))), 0), len(AREA_BUCKETS) - 1)
    return 2.0 ** -k


def typical_errors(mechanism: str, domain: Domain, epsilon: float, split=None, params=None,
                   n_points: int = DEFAULT_POINTS, shape: str = "clustered",
                   area_fracs=AREA_BUCKETS, n_queries: int = 200, repetitions: int = 5,
                   seed: int = 0) -> dict[float, float]:
    """Median absolute error (noise plus even-spread error) per query area on synthetic data.

    Every input is public: the mechanism's settings, the public box and an assumed size. The
    points, the releases (fixed seeds: this is a simulation, nothing is published) and the
    rectangles (`random_workload`, shaped like the domain) are all synthetic; the median runs
    over `repetitions` releases x `n_queries` rectangles per area.
    """
    if int(n_points) < 1:
        raise ParameterError(f"the assumed size must be at least 1 point, got {n_points}")
    data = synthetic_points(domain, int(n_points), shape, seed=[seed, 0])
    work = {a: random_workload(domain, n_queries, area_frac=a, rng=[seed, 1, k])
            for k, a in enumerate(area_fracs)}
    truth = {a: data.true_counts(q, domain) for a, q in work.items()}
    errors: dict[float, list] = {a: [] for a in area_fracs}
    for rep in range(repetitions):
        rel = release(mechanism, data, domain, epsilon, split=split, params=params, seed=[seed, 2, rep])
        for a, q in work.items():
            errors[a].append(np.abs(rel.answer_many(q) - truth[a]))
    return {a: float(np.median(np.concatenate(e))) for a, e in errors.items()}
