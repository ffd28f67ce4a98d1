"""Registry of mechanisms and the single entry point `release`."""
from __future__ import annotations

import numpy as np

from ..contributions import DEFAULT_POINTS_PER_USER, bound_contributions, check_points_per_user
from ..domain import Domain
from ..constraints import positive_finite
from ..errors import DataError, ParameterError
from ..noise import make_rng
from ..counts import CountData
from ..points import PointData
from ..queries import Rect, as_rect_array
from . import adaptive, ag, dawa, euler, full_quadtree, grid, htf, privtree, shifted_grids, trees
from .base import USER_LEVEL_UNITS, GridRelease, MechanismSpec, Param, Release
from .leaves import LeafRelease

_REGISTRY: dict[str, MechanismSpec] = {s.name: s for m in (grid, htf, ag, trees, privtree, full_quadtree, adaptive, shifted_grids, euler, dawa) for s in m.SPECS}


def mechanisms(private_only: bool = False) -> dict[str, MechanismSpec]:
    """name -> MechanismSpec for every registered mechanism (label, params, budget parts, guarantee)."""
    return {k: v for k, v in _REGISTRY.items() if v.private or not private_only}


def release(name: str, data, domain: Domain, epsilon: float = 1.0, split=None, params=None,
            seed=None, max_points_per_user=None, workload=None) -> Release:
    """Run mechanism `name` on `data` inside the public `domain` and return its Release.

    `split` gives the fraction of epsilon per budget part (default: the mechanism's). `seed`:
    None (default) draws 128 bits of fresh OS entropy; an integer makes a reproducible demo,
    which anyone who knows the seed can de-noise, so it is recorded as NOT private; a
    numpy Generator is used as given (the caller answers for how it was seeded). The ledger
    must add up to epsilon or no release is returned.

    Points with user ids get a user-level release from a private point mechanism: at most
    k = `max_points_per_user` (default DEFAULT_POINTS_PER_USER) random points per user, the
    mechanism run at epsilon/k, and its ledger restated per user (group privacy).

    `workload`: public rectangles a workload-aware mechanism (`spec.workload_aware`, e.g. DAWA)
    tunes its measurements for, instead of its random public workload; others refuse it. It
    must not be derived from the private data (e.g. boxes around its hot spots), or the
    release's guarantee does not hold: it is treated as public and spends nothing.
    """
    if name not in _REGISTRY:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of {sorted(_REGISTRY)}")
    spec = _REGISTRY[name]
    if not isinstance(domain, Domain):
        raise ParameterError("domain must be a dp.Domain (a public box), not "
                             f"{type(domain).__name__}")
    epsilon = positive_finite("epsilon", epsilon)
    split = spec.resolve_split(split)
    params = spec.resolve_params(params)
    check_inputs(spec, data, domain, params)
    k = _points_per_user(spec, data, max_points_per_user)
    extra = _workload(spec, workload)
    rng = make_rng(seed)
    if k is not None and not isinstance(data, CountData):    # counts were bounded when made
        data = bound_contributions(data, k, rng)
    rel = spec.release(data, domain, epsilon / (k or 1), split, params, rng, **extra)
    rel.requested_split = split      # the split asked for; `rel.split` is what each part spent
    if k is not None:
        rel.restate_per_user(k, epsilon)
    if k is not None or not _counts_on_release_lines(data, rel):
        rel.bounds_hold = False     # the counts are not those of the points inside each region
    if seed is not None and not isinstance(seed, np.random.Generator):
        rel.ledger.record_fixed_seed()
    if domain.leaky:
        rel.ledger.record_leak("domain fitted to data", "the public box was derived from the "
                               "private points (min/max leak)")
    if spec.private:
        rel.ledger.check(epsilon)
    elif rel.ledger.total > epsilon * (1 + 1e-9):
        rel.ledger.check(epsilon)
    return rel


def _counts_on_release_lines(data, rel) -> bool:
    """Whether every base cell of counts data lies in one region of the release (the release's
    grid lines are lines of the counts' grid), as `dp.partition_bounds` needs; true for points."""
    if not isinstance(data, CountData):
        return True
    grid = rel.regions()[0]
    gx, gy = data.finest
    return gx % grid.gx == 0 and gy % grid.gy == 0


def check_inputs(spec: MechanismSpec, data, domain: Domain, params: dict) -> None:
    """Refuse, before anything is charged or drawn, data of the wrong kind (naming what the
    mechanism takes); counts only for mechanisms that read histograms, only over the box they
    were made on, and only for public settings no finer than their cells."""
    kind = getattr(data, "kind", None)
    if kind != spec.data_kind:
        others = sorted(k for k, s in _REGISTRY.items() if s.data_kind == kind)
        got = f"{kind} data" if kind else f"a {type(data).__name__}"
        raise DataError(f"{spec.label} takes {spec.data_kind} data "
                        f"({'dp.load_points' if spec.data_kind == 'points' else 'dp.load_regions'}), "
                        f"got {got}" + (f"; for {kind} use one of {others}" if others else ""))
    if isinstance(data, CountData):
        if spec.needs_points:
            takes = sorted(k for k, s in _REGISTRY.items() if s.data_kind == kind and not s.needs_points)
            raise DataError(f"{spec.label} needs each point's coordinates, and counts on a grid "
                            f"have none: load the points (dp.load_points), or release the counts "
                            f"with one of {takes}")
        if domain.bounds != data.domain.bounds:
            raise DataError(f"these counts were made over the box {data.domain.bounds}; release "
                            f"them over that same box, not {domain.bounds}")
        finest = spec.finest_grid(domain, params) if spec.finest_grid else None
        if finest is not None and (finest[0] > data.finest[0] or finest[1] > data.finest[1]):
            raise ParameterError(f"{spec.label} with these settings reads a {finest[0]} x "
                                 f"{finest[1]} grid, finer than the counts' {data.finest[0]} x "
                                 f"{data.finest[1]} cells: choose a coarser setting, or count on "
                                 "more cells (dp.aggregate(..., cells=...))")


def _workload(spec: MechanismSpec, workload) -> dict:
    """{"workload": rectangles} for a workload-aware mechanism given one, else {}."""
    if workload is None:
        return {}
    if not spec.workload_aware:
        aware = sorted(k for k, s in _REGISTRY.items() if s.workload_aware)
        raise ParameterError(f"{spec.label} takes no workload; workload-aware mechanisms: {aware}")
    try:
        rects = as_rect_array(workload) if isinstance(workload, Rect) or (
            len(workload) and isinstance(workload[0], Rect)) else np.asarray(workload, float)
    except (TypeError, ValueError):
        rects = np.zeros((0, 3))
    ok = rects.ndim == 2 and rects.shape[1] == 4 and len(rects) > 0 and np.isfinite(rects).all()
    if not ok or np.any(rects[:, 0] >= rects[:, 2]) or np.any(rects[:, 1] >= rects[:, 3]):
        raise ParameterError("workload: expected one or more rectangles [west, south, east, "
                             "north] with finite coordinates, west < east and south < north")
    return {"workload": rects}


def _points_per_user(spec: MechanismSpec, data, k) -> int | None:
    """k for a user-level release (a private point mechanism on points with user ids), else None."""
    if isinstance(data, CountData):
        if k is not None and k != data.points_per_user:
            raise ParameterError("these counts were made with each user's points bounded when "
                                 "they were aggregated (dp.aggregate(..., max_points_per_user=)); "
                                 "leave max_points_per_user unset here")
        return data.points_per_user if spec.unit in USER_LEVEL_UNITS else None
    users = isinstance(data, PointData) and data.users is not None
    if k is not None:
        k = check_points_per_user(k)
        if not users:
            raise ParameterError(f"max_points_per_user bounds each user's points, but this "
                                 f"{type(data).__name__} has no user id per point: expected "
                                 "points loaded with a user id column (user_id, userid, user or "
                                 "uid); otherwise leave max_points_per_user unset")
    if users and spec.unit in USER_LEVEL_UNITS:
        return DEFAULT_POINTS_PER_USER if k is None else k
    return None


__all__ = ["GridRelease", "LeafRelease", "MechanismSpec", "Param", "Release", "mechanisms", "release"]
