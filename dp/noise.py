"""Exact noise samplers and a float-safe exponential mechanism; every draw takes the release's Generator.

Why exact: a count released as `true + Laplace` in doubles leaks through its last bits, because
the doubles reachable from x and from x + 1 differ (Mironov, CCS 2012). Here counts get integer
noise and no floating-point number decides an outcome. The samplers follow Canonne, Kamath &
Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020): Algorithm 2
(discrete Laplace) and Algorithm 3 (discrete Gaussian), written over numpy int64 arrays: every
element runs the same loop, and the elements still rejecting are redrawn together, so there is
no Python loop over values. Their Bernoulli(exp(-gamma)) draws (the paper's Algorithm 1) are
decided from one 62-bit uniform against integer bounds on exp(-gamma) with a proven margin,
and finished exactly with decimal arithmetic in the rare case the uniform falls inside it.

A noise scale is a public real number; it is rounded UP to a rational t / 2^m (relative error
below 2^-30), so the noise drawn is never smaller than asked and the charged epsilon stays an
upper bound on the loss.

Randomness: `make_rng(None)` seeds numpy's PCG64 from `SeedSequence()`, 128 bits of OS entropy.
A fixed seed makes the noise reproducible, so anyone who knows it can remove the noise: such a
release is a labelled demo, never private (the mechanisms record that in the ledger).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .errors import ParameterError

_SCALE_BITS = 30          # noise scales are rounded up to t / 2^m with t about 2^30
_SMALL = 4096            # arrays up to this size draw two candidates per element and pass
_GAUSS_BITS = 10          # a real-valued Gaussian is drawn on a grid g with sigma/g in [2^10, 2^11)
EM_GRANULARITY = 1024     # exponential-mechanism scores (in units of their sensitivity) are floored to 1/1024


def make_rng(seed=None, *, allow_int: bool = True) -> np.random.Generator:
    """The one seed-to-generator rule: None draws 128 bits of fresh OS entropy, a Generator is
    used as given, an integer makes a reproducible demo (refused with `allow_int=False`, as
    inside mechanisms, which must never turn a number into their noise)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng(np.random.SeedSequence())
    if not allow_int:
        raise TypeError(f"rng must be a numpy Generator or None, got {type(seed).__name__}")
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------- exact Bernoulli draws
_BITS = 62                    # one uniform integer R in [0, 2^62) decides almost every draw
_MARGIN = 2.0 ** -40          # proven bound on the relative error of the float guide (see below)
_FAST_GAMMA = 64.0            # beyond this, exp(-gamma) * 2^62 < 1e-9: only R = 0 is undecided


def _uniform_below(rng: np.random.Generator, high) -> np.ndarray:
    """Exact uniform integers in [0, high) for int64 `high` >= 1 (numpy's unbiased method)."""
    return rng.integers(0, high, dtype=np.int64)


def bernoulli_exp(rng: np.random.Generator, num, den) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) for int64 arrays num >= 0, den >= 1.

    A draw is true when the uniform U in [0, 1) lies below x = exp(-num/den). U's first 62 bits
    R are drawn for all elements at once and compared with integer bounds lo <= x 2^62 < hi from
    a float guide widened by 2^-40 relative. For gamma = num/den < 64 the guide's error is below
    3 gamma 2^-53 (the conversions and division) plus a few units in 2^-53 (exp), under 2^-45,
    so the bounds hold; for gamma >= 64, x 2^62 < 1 and the bounds are [0, 1). R < lo means
    U < x, R >= hi means U > x. The rare R in [lo, hi) (probability below 2^-39) are finished
    exactly with more random bits against decimal bounds of x (`_decide_exactly`).
    """
    num = np.asarray(num, dtype=np.int64)
    den = np.broadcast_to(np.asarray(den, dtype=np.int64), num.shape)
    if np.any(num < 0) or np.any(den < 1):
        raise ParameterError("bernoulli_exp needs num >= 0 and den >= 1")
    lo, hi = guide_bounds(num, den)
    r = rng.integers(0, 1 << _BITS, size=num.shape, dtype=np.int64)
    out = r < lo
    for i in np.flatnonzero(((r >= lo) & (r < hi)).ravel()):
        out.flat[i] = _decide_exactly(rng, int(r.flat[i]), int(num.flat[i]), int(den.flat[i]))
    return out


def guide_bounds(num, den) -> tuple[np.ndarray, np.ndarray]:
    """Integer bounds lo <= exp(-num/den) 2^62 < hi from the float guide (see `bernoulli_exp`)."""
    gamma = np.asarray(num, dtype=np.int64) / np.asarray(den, dtype=np.int64)
    fast = gamma < _FAST_GAMMA
    x = np.ldexp(np.exp(-np.where(fast, gamma, 0.0)), _BITS)
    lo = np.where(fast, np.floor(x * (1.0 - _MARGIN)), 0.0).astype(np.int64)
    hi = np.where(fast, np.minimum(np.ceil(x * (1.0 + _MARGIN)), 2.0 ** _BITS), 0.0).astype(np.int64) + 1
    return lo, hi


class _LazyUniform:
    """One uniform U in [0, 1) known to its first bits (U in [value, value + 1) / 2^bits), extended
    with more random bits only when a comparison needs them; every comparison sees the same U."""

    def __init__(self, rng, r: int):
        self.rng, self.value, self.bits = rng, int(r), _BITS

    def below_exp(self, num: int, den: int) -> bool:
        """U < exp(-num/den), exactly: x is bracketed with Python's decimal module (division and
        exp correctly rounded at the working precision, relative error below (gamma + 2) 10^(2 - prec))."""
        from decimal import MIN_EMIN, Decimal, localcontext
        prec = 40
        while True:
            prec += 40
            with localcontext() as ctx:
                ctx.prec, ctx.Emin = prec, MIN_EMIN
                x = Fraction((-(Decimal(num) / Decimal(den))).exp())
            err = (Fraction(num, den) + 2) / 10 ** (prec - 2)
            lo_x, hi_x = x * (1 - err), x * (1 + err)
            while True:
                scale = 1 << self.bits
                if self.value + 1 <= lo_x * scale:
                    return True
                if self.value >= hi_x * scale:
                    return False
                if self.bits >= 62 + 4 * prec:        # the bracket is the limit: refine x
                    break
                self.value = (self.value << 62) | int(self.rng.integers(0, 1 << 62))
                self.bits += 62


def _decide_exactly(rng, r: int, num: int, den: int) -> bool:
    """U < exp(-num/den) for a uniform U whose first 62 bits are r (see `_LazyUniform`)."""
    return _LazyUniform(rng, r).below_exp(num, den)


def _geometric_exp1(rng, n: int) -> np.ndarray:
    """V ~ Geometric with P(V >= v) = e^-v (Bernoulli(exp(-1)) successes before a failure), exactly.

    One uniform U per element: V = #{v >= 1 : U < e^-v}, read off a table of integer bounds on
    e^-v 2^62. Elements whose first 62 bits leave any comparison open (probability ~2^-39) are
    finished with one `_LazyUniform` each, which has no upper limit on V.
    """
    r = rng.integers(0, 1 << _BITS, size=n, dtype=np.int64)
    lo, hi = _EXP_TABLE
    lo_up, hi_up = lo[::-1], hi[::-1]                # ascending
    j = np.searchsorted(lo_up, r, side="right")      # lo_k <= r for the j smallest bounds
    v = (lo.size - j).astype(np.int64)               # k with r < lo_k: U < e^-k for sure
    near = np.maximum(j - 1, 0)
    # open if r sits in the window of the bound just below it, or among the smallest bounds
    # (there e^-k 2^62 < 2^3 and the windows of neighbouring k may overlap)
    unsure = ((j > 0) & (r < hi_up[near])) | (r < hi[lo.size - 1] + 8)
    for i in np.flatnonzero(unsure):
        u, k = _LazyUniform(rng, int(r[i])), 0
        while u.below_exp(k + 1, 1):
            k += 1
        v[i] = k
    return v


def _exp_table(kmax: int = 44):
    """Integer bounds lo_k <= e^-k 2^62 < hi_k for k = 1..kmax (beyond 44, e^-k 2^62 < 1)."""
    k = np.arange(1, kmax + 1, dtype=np.float64)
    x = np.ldexp(np.exp(-k), _BITS)
    return np.floor(x * (1 - _MARGIN)).astype(np.int64), np.ceil(x * (1 + _MARGIN)).astype(np.int64) + 1


_EXP_TABLE = _exp_table()


def rational_scale(scale) -> tuple[int, int]:
    """(t, s) with t / s >= scale, s = 2^m <= 2^40, t about 2^30: scale rounded UP exactly.

    Scales above 2^56 are refused: U + tV must stay in int64 for V up to about 60.

    Scales below 2^-40 (ε above 10^12 per unit of sensitivity) become 2^-40: noise that is
    zero with probability 1 - 10^-(4.7 10^11), never less noise than asked.
    """
    scale = float(scale)
    if not (scale > 0 and math.isfinite(scale)) or scale > 2.0 ** 56:
        raise ParameterError(f"noise scale must be positive, finite and at most 2^56, got {scale}")
    m = min(40, max(0, _SCALE_BITS - math.frexp(scale)[1]))
    s = 1 << m
    t = math.ceil(Fraction(scale) * s)
    return t, s


def _shape(size, scale) -> tuple:
    """Output shape: `size` broadcast with the shape of `scale`."""
    size = () if size is None else ((size,) if np.ndim(size) == 0 else tuple(size))
    return np.broadcast_shapes(np.shape(scale), size)


def discrete_laplace(rng: np.random.Generator, scale, size=None) -> np.ndarray:
    """Integer noise with P(k) proportional to exp(-|k| / scale) (two-sided geometric), exactly.

    `scale` is one number or an array broadcastable to `size` (e.g. one scale per tree node);
    for a count of sensitivity Delta at budget epsilon use scale = Delta / epsilon. CKS20
    Algorithm 2 with scale = t/s: U uniform in [0, t) kept with probability exp(-U/t),
    V ~ Geometric(1 - e^-1), Y = floor((U + tV)/s), a random sign, and (sign -, Y = 0) rejected.
    Variance: 2 e^(-1/scale) / (1 - e^(-1/scale))^2 (see `discrete_laplace_variance`).
    """
    shape = _shape(size, scale)
    n = int(np.prod(shape))
    if np.ndim(scale) == 0:
        t_all, s_all = (np.int64(v) for v in rational_scale(scale))
    else:
        scales = np.broadcast_to(np.asarray(scale, dtype=np.float64), shape).ravel()
        if not np.all((scales > 0) & np.isfinite(scales)):
            raise ParameterError("discrete Laplace scale must be positive and finite")
        uniq, inv = np.unique(scales, return_inverse=True)
        ts = np.array([rational_scale(v) for v in uniq], dtype=np.int64).reshape(-1, 2)
        t_all, s_all = ts[inv.ravel(), 0], ts[inv.ravel(), 1]
    out = np.zeros(n, np.int64)
    todo = np.arange(n)
    while todo.size:                               # every pass redraws the rejected elements
        # small arrays draw two candidates per element, so most finish in one pass
        c = 2 if todo.size <= _SMALL else 1
        idx = np.repeat(todo, c)
        t = t_all if np.ndim(t_all) == 0 else t_all[idx]
        s = s_all if np.ndim(s_all) == 0 else s_all[idx]
        u = _uniform_below(rng, np.broadcast_to(t, idx.shape))
        d = bernoulli_exp(rng, u, t)
        v = _geometric_exp1(rng, idx.size)
        y = (u + t * v) // s
        neg = rng.integers(0, 2, idx.size, dtype=np.int8).astype(bool)
        ok = (d & ~(neg & (y == 0))).reshape(-1, c)
        val = np.where(neg, -y, y).reshape(-1, c)
        got = ok.any(axis=1)                       # first accepted candidate of each element
        out[todo[got]] = val[got, ok[got].argmax(axis=1)]
        todo = todo[~got]
    return out.reshape(shape)


def discrete_laplace_variance(scale) -> np.ndarray:
    """Variance of `discrete_laplace(scale)`: 2 q / (1 - q)^2 with q = exp(-1/scale)."""
    q = np.exp(-1.0 / np.asarray(scale, dtype=np.float64))
    return 2.0 * q / (1.0 - q) ** 2


def discrete_laplace_fourth_cumulant(scale) -> np.ndarray:
    """Fourth cumulant of `discrete_laplace(scale)`, twice a geometric variable's:
    2 q (1 + 4 q + q^2) / (1 - q)^4 with q = exp(-1/scale)."""
    q = np.exp(-1.0 / np.asarray(scale, dtype=np.float64))
    return 2.0 * q * (1.0 + 4.0 * q + q * q) / (1.0 - q) ** 4


def discrete_laplace_quantile(scale, level: float):
    """Smallest integer h with P(|Z| <= h) >= level for Z ~ discrete_laplace(scale) (for
    intervals): an int, or an integer array for an array of scales."""
    q = np.exp(-1.0 / np.asarray(scale, dtype=np.float64))
    # P(|Z| > h) = 2 q^(h+1) / (1 + q)
    h = np.maximum(0, np.ceil(np.log((1.0 - level) * (1.0 + q) / 2.0) / np.log(q) - 1.0 - 1e-12))
    return int(h) if h.ndim == 0 else h.astype(np.int64)


def count_noise(rng, epsilon, sensitivity=1, size=None) -> np.ndarray:
    """Integer noise for counts of sensitivity `sensitivity` at budget `epsilon` (per element)."""
    eps = np.asarray(epsilon, dtype=np.float64)
    if not np.all((eps > 0) & np.isfinite(eps)):
        raise ParameterError("count noise needs a positive, finite epsilon")
    return discrete_laplace(rng, np.asarray(sensitivity, dtype=np.float64) / eps, size)


# ------------------------------------------------------------------------- discrete Gaussian
def discrete_gaussian(rng: np.random.Generator, sigma2, size=None) -> np.ndarray:
    """Integer noise with P(k) proportional to exp(-k^2 / (2 sigma2)), exactly (CKS20 Algorithm 3).

    `sigma2` is an integer variance parameter in [1, 2^24], one number or one per element (the
    interactive module gives nearly every user its own). Proposals Y ~ discrete Laplace(t) are
    kept with probability exp(-(t|Y| - sigma2)^2 / (2 sigma2 t^2)), exact for any t > 0; one t
    per octave of sigma2 (just above sigma) lets each octave use one Laplace scale.
    """
    shape = _shape(size, sigma2)
    flat = np.broadcast_to(np.asarray(sigma2), shape).ravel()
    if not np.all(flat == np.rint(flat)) or np.any((flat < 1) | (flat > 1 << 24)):
        raise ParameterError("discrete Gaussian needs integer sigma^2 in [1, 2^24]")
    flat = flat.astype(np.int64)
    out = np.zeros(flat.size, dtype=np.int64)
    octave = np.frexp(flat.astype(np.float64))[1]            # sigma2 in [2^(o-1), 2^o)
    for o in np.unique(octave):
        t = math.isqrt(1 << int(o)) + 1
        todo = np.flatnonzero(octave == o)
        while todo.size:
            y = discrete_laplace(rng, float(t), todo.size)
            a = np.abs(y)
            # |y| >= 2^31/t (beyond 90 sigma, mass below e^-4000) is rejected so num fits int64
            fits = a < (1 << 31) // t
            ss = flat[todo]
            num = (t * np.where(fits, a, 0) - ss) ** 2
            ok = fits & bernoulli_exp(rng, num, 2 * t * t * ss)
            out[todo[ok]] = y[ok]
            todo = todo[~ok]
    return out.reshape(shape)


def gaussian_real(rng: np.random.Generator, values, sigma) -> tuple[np.ndarray, np.ndarray]:
    """Values snapped to a public grid g plus g * discrete Gaussian noise of std at least `sigma`.

    g is the power of two with sigma/g in [1024, 2048); (sigma/g)^2 is rounded UP to an integer
    (a 2^-40 margin covers the float product), so the noise is never smaller than asked.
    Snapping moves each value by at most g/2, which a caller adds to its sensitivity (about
    sigma/2000). `sigma` is one number or one per row of `values`. Returns (noisy values, g).
    """
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(sigma, dtype=np.float64)
    if not np.all((s > 0) & np.isfinite(s)):
        raise ParameterError("Gaussian sigma must be positive and finite")
    g = np.ldexp(1.0, np.frexp(s)[1] - 1 - _GAUSS_BITS)        # exact powers of two
    r = s / g                                                    # exact, in [1024, 2048)
    sigma2 = (np.floor(r * r * (1.0 + 2.0 ** -40)) + 1.0).astype(np.int64)
    gv = g.reshape(g.shape + (1,) * (v.ndim - g.ndim))
    z = discrete_gaussian(rng, np.broadcast_to(sigma2.reshape(gv.shape), v.shape))
    return (np.rint(v / gv) + z) * gv, g


# ------------------------------------------------------------------------- real-valued queries
def laplace_real(rng: np.random.Generator, values, sensitivity: float, epsilon: float,
                 granularity: float | None = None) -> np.ndarray:
    """Discretised Laplace mechanism for real-valued queries (e.g. HTF's homogeneity objective).

    Each value is rounded to a public grid g (default: sensitivity / 1024), and integer noise
    with scale (sensitivity/g + 1)/epsilon is added in grid units: rounding can move two
    neighbouring values at most one grid step further apart, hence the + 1. The result is an
    integer multiple of g, so its low bits carry nothing about the data.
    """
    if not (epsilon > 0 and sensitivity > 0):
        raise ParameterError("laplace_real needs epsilon > 0 and sensitivity > 0")
    g = float(granularity) if granularity else float(sensitivity) / EM_GRANULARITY
    units = np.rint(np.asarray(values, dtype=np.float64) / g)
    z = discrete_laplace(rng, (float(sensitivity) / g + 1.0) / float(epsilon), units.shape)
    return (units + z) * g


# ------------------------------------------------------------------------- exponential mechanism
def exponential_mechanism_probabilities(scores, epsilon: float, sensitivity) -> np.ndarray:
    """Ideal selection probabilities exp(eps s_r / (2 Delta_r)) / sum, via log-sum-exp.

    `sensitivity` may be one number or one per response (spec 000 A5 line 8-9, Algorithm 1
    line 17 uses the per-response Delta_r). Owner-only diagnostics: the sampler below draws
    from the discretised version of this distribution.
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
    """Sample one index with an exact, discretised exponential mechanism; returns (index, probs).

    Scores in units of their sensitivity, u_r = s_r / Delta_r (sensitivity 1 each), are floored
    to a grid of 1/K (K = 1024): k_r = floor(K u_r) moves by at most K + 1 between neighbours
    (the + 1 absorbs rounding). The index is drawn with probability proportional to
    exp(eps' (k_r - max k) / (2 (K + 1))), eps' = eps rounded down to a multiple of 2^-20, by
    rejection: propose r uniformly, accept with an exact Bernoulli(exp(-gamma_r)). Hence
    eps-DP with no floating point in the draw. `probs` are the ideal (continuous) probabilities,
    an owner-only diagnostic.
    """
    p = exponential_mechanism_probabilities(scores, epsilon, sensitivity)
    if np.isinf(epsilon):
        return int(np.flatnonzero(p)[0]), p
    k, e_num, den = _em_exponents(scores, epsilon, sensitivity)
    if e_num == 0:
        return int(_uniform_below(rng, np.int64(len(k)))), p      # epsilon < 2^-20: uniform
    while True:
        r = int(_uniform_below(rng, np.int64(len(k))))
        if _bernoulli_exp_int(rng, -k[r] * e_num, den):
            return r, p


def _em_exponents(scores, epsilon: float, sensitivity) -> tuple[list, int, int]:
    """The discretised exponential mechanism's integers: response r is drawn with probability
    proportional to exp(k_r e_num / den), k_r <= 0 (see `exponential_mechanism`)."""
    s = np.asarray(scores, dtype=np.float64)
    d = np.broadcast_to(np.asarray(sensitivity, dtype=np.float64), s.shape)
    # clipping the scaled scores to +-2^60 is 1-Lipschitz, so it keeps their sensitivity
    k = np.clip(np.floor(s / d * EM_GRANULARITY), -2.0 ** 60, 2.0 ** 60)
    k = [int(v) for v in (k - k.max())]            # <= 0; the best response has gamma = 0
    return k, math.floor(float(epsilon) * (1 << 20)), (1 << 21) * (EM_GRANULARITY + 1)


def exponential_mechanism_log_probs(scores, epsilon: float, sensitivity) -> np.ndarray:
    """ln of the probabilities the exact sampler `exponential_mechanism` really draws with (the
    discretised ones), for computing its privacy loss exactly (`dp.testing.draw_audit`)."""
    k, e_num, den = _em_exponents(scores, epsilon, sensitivity)
    x = np.array([Fraction(v * e_num, den) for v in k], dtype=np.float64)
    return x - (np.log(np.exp(x - x.max()).sum()) + x.max())


def _bernoulli_exp_int(rng, num: int, den: int) -> bool:
    """Exact Bernoulli(exp(-num/den)) for Python integers of any size (gamma >= 2^31 included)."""
    if num < 1 << 62:
        return bool(bernoulli_exp(rng, np.array([num], np.int64), den)[0])
    # gamma > 64 here: exp(-gamma) 2^62 < 1, so U < x needs its first 62 bits to be zero
    return int(rng.integers(0, 1 << _BITS)) == 0 and _decide_exactly(rng, 0, num, den)
