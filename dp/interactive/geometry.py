"""Signed distances to query rectangles and the BM-dist threshold shift theta (spec 4.1, 4.3,
App A-B): the plane geometry that decides whether a (noisy) point or score counts as inside.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError

THETA_MODES = ("uniform-exact", "paper", "none")
THETA_GRID = 256                # uniform-exact theta: distinct sigmas solved directly, else interpolated


def signed_distance(x, y, rect_m) -> np.ndarray:
    """phi_R (eq 11) for the axis-aligned R = [x0, x1] x [y0, y1]: minus the distance to the
    boundary inside (boundary included, phi = 0), plus the distance to R outside. 1-Lipschitz."""
    x0, y0, x1, y1 = (float(v) for v in rect_m)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dx = np.maximum(np.maximum(x0 - x, x - x1), 0.0)
    dy = np.maximum(np.maximum(y0 - y, y - y1), 0.0)
    depth = np.minimum(np.minimum(x - x0, x1 - x), np.minimum(y - y0, y1 - y))
    return np.where(depth >= 0, -np.maximum(depth, 0.0), np.hypot(dx, dy))


def signed_distance_rotated(x, y, vertices) -> np.ndarray:
    """phi_R for a rectangle given by its 4 vertices in order (App A)."""
    v = np.asarray(vertices, dtype=np.float64).reshape(4, 2)
    p = np.stack([np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)], axis=-1)

    def lam(a, b):
        e = v[b] - v[a]
        return ((p - v[a]) @ e) / (e @ e)

    l12, l23 = lam(0, 1), lam(1, 2)
    inside = (l12 >= 0) & (l12 <= 1) & (l23 >= 0) & (l23 <= 1)
    dist = np.full(p.shape[:-1], np.inf)
    for a in range(4):
        b = (a + 1) % 4
        t = np.clip(lam(a, b), 0.0, 1.0)
        q = v[a] + t[..., None] * (v[b] - v[a])
        dist = np.minimum(dist, np.linalg.norm(p - q, axis=-1))
    return np.where(inside, -dist, dist)


def theta_paper(L, W, w):
    """Closed-form threshold shift (App B, spec 4.3) for side lengths L, W and noise std w.

    Case 1, inner band non-empty: theta = [(L+W) - sqrt((L+W)^2 - 16 w^2)] / 4; otherwise
    (including when case 1 leaves L - 2w - 2theta <= 0 or W - 2w - 2theta <= 0) case 2:
    theta = w - [sqrt((L+W)^2 + 4LW) - (L+W)] / 4. Square corners, uniform density.
    """
    L, W, w = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (L, W, w)))
    s = L + W
    disc = s ** 2 - 16.0 * w ** 2
    t1 = (s - np.sqrt(np.maximum(disc, 0.0))) / 4.0
    t2 = w - (np.sqrt(s ** 2 + 4.0 * L * W) - s) / 4.0
    case1 = (np.minimum(L, W) > 2.0 * w) & (disc >= 0) & (L - 2 * w - 2 * t1 > 0) & (W - 2 * w - 2 * t1 > 0)
    return np.where(case1, t1, t2)


def _tail0(u):
    """int_u^inf Q(v) dv with Q the standard normal upper tail."""
    from scipy import special          # here, not at `import dp`: scipy's first import is slow
    return np.exp(-u * u / 2.0) / math.sqrt(2.0 * math.pi) - u * special.ndtr(-u)


def _tail1(u):
    """int_u^inf v Q(v) dv."""
    from scipy import special
    return 0.5 * ((1.0 - u * u) * special.ndtr(-u) + u * np.exp(-u * u / 2.0) / math.sqrt(2.0 * math.pi))


def expected_inside_mass(theta, L, W, sigma):
    """int Phi((-theta - s)/sigma) P(s) ds for uniform density 1 around an L x W rectangle,
    with P(s) = 2(L+W) + 2 pi s outside (rounded offsets) and 2(L+W) + 8 s inside (spec 4.3):
    the expected BM-dist count at threshold -theta, in closed form."""
    theta, L, W, sigma = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                               for v in (theta, L, W, sigma)))
    a = 2.0 * (L + W)
    h = np.minimum(L, W) / 2.0
    u0 = theta / sigma
    outside = sigma * ((a - 2 * math.pi * theta) * _tail0(u0) + 2 * math.pi * sigma * _tail1(u0))
    ua = (theta - h) / sigma
    inside = sigma * ((a - 8.0 * theta) * (_tail0(ua) - _tail0(u0))
                      + 8.0 * sigma * (_tail1(ua) - _tail1(u0)))
    return outside + inside


def theta_uniform_exact(L, W, sigma, iters: int = 80):
    """Shift theta with expected_inside_mass(theta) = L W, by bisection (spec 4.3 [ext])."""
    L, W, sigma = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (L, W, sigma)))
    lo = -10.0 * sigma - (L + W)
    hi = 10.0 * sigma + (L + W)
    target = L * W
    for _ in range(iters):
        mid = (lo + hi) / 2.0
        big = expected_inside_mass(mid, L, W, sigma) > target
        lo = np.where(big, mid, lo)
        hi = np.where(big, hi, mid)
    return (lo + hi) / 2.0


def theta_shift(L, W, sigma, mode: str = "uniform-exact") -> np.ndarray:
    """BM-dist threshold shift per user (spec 4.3, P7, P14): 'paper' closed form,
    'uniform-exact' (bisection, cached by sigma rounded to 4 significant digits) or 'none'."""
    sigma = np.atleast_1d(np.asarray(sigma, dtype=np.float64))
    if mode == "none":
        return np.zeros_like(sigma)
    if mode == "paper":
        return theta_paper(L, W, sigma)
    if mode != "uniform-exact":
        raise ParameterError(f"theta_mode must be one of {THETA_MODES}, got {mode!r}")
    if sigma.size == 0:
        return sigma.copy()
    e = np.floor(np.log10(sigma)) - 3
    rounded = np.round(sigma / 10.0 ** e) * 10.0 ** e
    uniq, inv = np.unique(rounded, return_inverse=True)
    if uniq.size <= THETA_GRID:
        return theta_uniform_exact(L, W, uniq)[inv]
    # many distinct budgets (after reuse): theta/sigma is smooth in log sigma, so solve on a
    # log-spaced grid and interpolate (relative error far below the 4-digit rounding)
    grid = np.geomspace(uniq[0], uniq[-1], THETA_GRID)
    ratio = theta_uniform_exact(L, W, grid) / grid
    return (np.interp(np.log(uniq), np.log(grid), ratio) * uniq)[inv]


def _phi_score(rect_m):
    """The public score x -> phi_R(x) that users privatize in the distance methods."""
    return lambda xy: signed_distance(xy[:, 0], xy[:, 1], rect_m)


def _points_phi(z, rect_m):
    """phi_R at (noisy) points z of shape (n, 2)."""
    return signed_distance(z[:, 0], z[:, 1], rect_m)
