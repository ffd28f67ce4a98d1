"""Noise samplers and the exponential mechanism; every draw takes the release's one Generator.

These functions only draw noise. Charging the ledger is the caller's job, done next to the
draw so the two can be read together.
"""
from __future__ import annotations

import numpy as np

from .errors import ParameterError


def make_rng(seed=None) -> np.random.Generator:
    """One Generator per release: a fixed seed for reproducible demos, OS entropy otherwise."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def laplace(rng: np.random.Generator, scale: float, size=None):
    """Laplace(0, scale) draws: density exp(-|y|/scale) / (2 scale), variance 2 scale^2."""
    if not scale > 0:
        raise ParameterError(f"Laplace scale must be positive, got {scale}")
    return rng.laplace(0.0, scale, size)


def two_sided_geometric(rng: np.random.Generator, epsilon_over_sensitivity: float, size=None):
    """Discrete Laplace on the integers: P(k) proportional to exp(-a |k|), a = epsilon / sensitivity.

    Drawn as the difference of two iid geometric variables with success 1 - exp(-a).
    """
    a = float(epsilon_over_sensitivity)
    if not a > 0:
        raise ParameterError(f"geometric noise needs epsilon/sensitivity > 0, got {a}")
    p = -np.expm1(-a)
    return rng.geometric(p, size) - rng.geometric(p, size)


def gaussian(rng: np.random.Generator, sigma: float, size=None):
    """Gaussian(0, sigma^2) draws."""
    if not sigma > 0:
        raise ParameterError(f"Gaussian sigma must be positive, got {sigma}")
    return rng.normal(0.0, sigma, size)


def exponential_mechanism_probabilities(scores, epsilon: float, sensitivity) -> np.ndarray:
    """Selection probabilities exp(eps s_r / (2 Delta_r)) / sum, via log-sum-exp.

    `sensitivity` may be one number or one per response (spec 000 A5 line 8-9, Algorithm 1
    line 17 uses the per-response Delta_r).
    """
    s = np.asarray(scores, dtype=np.float64)
    d = np.broadcast_to(np.asarray(sensitivity, dtype=np.float64), s.shape)
    if not epsilon > 0 or np.any(d <= 0):
        raise ParameterError("exponential mechanism needs epsilon > 0 and positive sensitivities")
    if np.isinf(epsilon):   # the limit concentrates on argmax s_r / Delta_r (inf * s is not usable)
        r = s / d
        best = r == r.max()
        return best / best.sum()
    u = epsilon * s / (2.0 * d)
    u = u - u.max()
    p = np.exp(u)
    return p / p.sum()


def exponential_mechanism(rng: np.random.Generator, scores, epsilon: float, sensitivity):
    """Sample one index with the exponential mechanism; returns (index, probabilities)."""
    p = exponential_mechanism_probabilities(scores, epsilon, sensitivity)
    return int(rng.choice(len(p), p=p)), p
