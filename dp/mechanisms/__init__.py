"""Registry of mechanisms and the single entry point `release`."""
from __future__ import annotations

import math

import numpy as np

from ..domain import Domain
from ..errors import ParameterError
from ..noise import make_rng
from . import euler, grid, htf, shifted_grids, trees
from .base import GridRelease, MechanismSpec, Param, Release
from .leaves import LeafRelease

_REGISTRY: dict[str, MechanismSpec] = {s.name: s for m in (grid, htf, trees, shifted_grids, euler) for s in m.SPECS}


def mechanisms(private_only: bool = False) -> dict[str, MechanismSpec]:
    """name -> MechanismSpec for every registered mechanism (label, params, budget parts, guarantee)."""
    return {k: v for k, v in _REGISTRY.items() if v.private or not private_only}


def release(name: str, data, domain: Domain, epsilon: float = 1.0, split=None, params=None,
            seed=None) -> Release:
    """Run mechanism `name` on `data` inside the public `domain` and return its Release.

    `split` gives the fraction of epsilon per budget part (default: the mechanism's). `seed`:
    None (default) draws 128 bits of fresh OS entropy; an integer makes a reproducible demo,
    which anyone who knows the seed can de-noise, so it is recorded as NOT private; a
    numpy Generator is used as given (the caller answers for how it was seeded). The ledger
    must add up to epsilon or no release is returned.
    """
    if name not in _REGISTRY:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of {sorted(_REGISTRY)}")
    spec = _REGISTRY[name]
    if not isinstance(domain, Domain):
        raise ParameterError("domain must be a dp.Domain (a public box), not "
                             f"{type(domain).__name__}")
    try:
        epsilon = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"epsilon must be a number, got {epsilon!r}") from None
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ParameterError(f"epsilon must be positive and finite, got {epsilon}")
    split = spec.resolve_split(split)
    params = spec.resolve_params(params)
    rel = spec.release(data, domain, epsilon, split, params, make_rng(seed))
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


__all__ = ["GridRelease", "LeafRelease", "MechanismSpec", "Param", "Release", "mechanisms", "release"]
