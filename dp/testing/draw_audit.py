"""Privacy evidence from the noise draws themselves: each draw against the claim it was made for.

The stochastic tester (`dp.testing.audit`) looks only at releases, so it cannot tell noise 1.5 times too
small on one of several steps (that step's loss stays under the total ε) or see a structure that
is new in every run. This module records every discrete Laplace draw a release makes, at the
point where a mechanism asks for it, with the claim it asks under: the scale (and, for
real-valued queries, the values and their stated L1 sensitivity), and every exponential
mechanism with its scores. The checks that read the records:

- `calibration`: are the draws as wide as the scale they were asked for? Each |Z| is
  standardised by the exact mean and standard deviation of |Z| for discrete Laplace of that
  scale; under the claim their sum over a call site's n draws is about N(0, n) (a sampler whose
  scale was rounded up only raises it), so a z below −5 at any site means narrower noise.
- `unpaid`: was that scale paid for? A step charged at ε with sensitivity Δ pays for discrete
  Laplace noise of scale Δ/ε: a draw made with its charge (`Ledger.noisy_counts`) must have
  exactly that scale, any other no less than 1 / Σ ε/Δ of its ledger's charges so far (a tree
  node that stops early may spend the levels below it). `Ledger.charge` and `noisy_counts` are
  wrapped while recording. Together: no draw is narrower than what the ledger charged for.
- `sensitivity_excess`: for draws that carry their values (`laplace_real`), the L1 change of the
  values between neighbouring datasets, measured on the first such draw of a release (nothing
  released before it, so the two runs ask the same question), against the stated sensitivity.
- `selection_loss`: an exponential mechanism's exact loss between neighbours asked the same
  question, from the probabilities its discretised sampler really draws with.
- `dp.testing.audit.privtree_path_loss` (beside the tester): PrivTree's split decisions, whose exact
  privacy loss follows from the biased counts on the probe's path.

Every discrete Laplace draw must pass through a recorded call: the sampler at the bottom counts
the draws made outside one, and `Recorder.unrecorded` must stay 0, so a new way of drawing
integer noise cannot slip past. Randomness drawn otherwise (the exponential mechanism called
through another name, a raw `rng` call) is not seen here; the stochastic tester still covers it.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .. import budget as _budget
from .. import noise as _noise

ROOT = "discrete_laplace"
CLAIMS = ("count_noise", "discrete_laplace", "laplace_real",    # what mechanisms call to draw
          "exponential_mechanism")


@dataclass
class Draws:
    """One recorded call: where it was made, the claimed scale of each draw and the noise drawn
    (both in the call's units: counts, or grid steps for `laplace_real`), and for a real-valued
    query its values and stated L1 sensitivity in grid steps."""
    site: str
    scale: np.ndarray
    noise: np.ndarray
    values: np.ndarray | None = None
    sensitivity: float | None = None
    unit: float = 1.0               # counts per unit of `scale` (the grid step of laplace_real)
    own: float | None = None        # Δ/ε of the charge made in the same call (`Ledger.noisy_counts`)
    budget: float = np.inf          # Σ ε/Δ its ledger had charged before it (noise steps)


@dataclass
class Selection:
    """One recorded exponential mechanism: its scores, ε and stated sensitivity."""
    site: str
    scores: np.ndarray
    epsilon: float
    sensitivity: np.ndarray


@dataclass
class Recorder:
    """The draws of every release made inside `recording()`, in order; a release's draws are
    `calls[start:]` where start was `len(calls)` before it."""
    calls: list = field(default_factory=list)
    selections: list = field(default_factory=list)
    unrecorded: int = 0
    depth: int = 0
    own: float | None = None        # Δ/ε while inside `Ledger.noisy_counts`
    budget: float = np.inf          # Σ ε/Δ charged so far by the latest ledger (`Ledger.charge`)


def _wrap(rec: Recorder, site: str, name: str, fn):
    """A stand-in for `fn` at `site` that records the claim and the draws it returns."""
    def claimed(rng, *args, **kw):
        rec.depth += 1
        try:
            out = fn(rng, *args, **kw)
        finally:
            rec.depth -= 1
        if name == "exponential_mechanism":             # (scores, epsilon, sensitivity)
            rec.selections.append(Selection(site, np.asarray(args[0], dtype=np.float64), float(args[1]),
                                            np.asarray(args[2], dtype=np.float64)))
            return out
        z = np.asarray(out, dtype=np.float64)
        if name == "count_noise":
            eps = np.asarray(args[0] if args else kw["epsilon"], dtype=np.float64)
            sens = np.asarray(args[1] if len(args) > 1 else kw.get("sensitivity", 1), dtype=np.float64)
            rec.calls.append(Draws(site, np.broadcast_to(sens / eps, z.shape).ravel(), z.ravel(),
                                   own=rec.own, budget=rec.budget))
        elif name == "discrete_laplace":
            scale = np.asarray(args[0] if args else kw["scale"], dtype=np.float64)
            rec.calls.append(Draws(site, np.broadcast_to(scale, z.shape).ravel(), z.ravel(),
                                   own=rec.own, budget=rec.budget))
        else:                                           # laplace_real(values, sens, eps, g)
            values, sens, eps = (np.asarray(args[0], dtype=np.float64), float(args[1]), float(args[2]))
            g = args[3] if len(args) > 3 else kw.get("granularity")
            g = float(g) if g else sens / _noise.EM_GRANULARITY
            units = np.rint(values / g).ravel()
            rec.calls.append(Draws(site, np.full(units.shape, (sens / g + 1.0) / eps),
                                   np.rint(z.ravel() / g) - units, units, sens / g + 1.0, g,
                                   rec.own, rec.budget))
        return out
    return claimed


@contextmanager
def recording():
    """Record every draw of the `dp` package's mechanisms while inside: each module-level name
    of a drawing function outside `dp.noise` is wrapped where the mechanisms look it up, and
    `dp.noise`'s own sampler counts the draws no wrapper saw. Whatever is bound there on entry
    (a planted bug too) is what gets recorded; every name is restored on exit."""
    rec = Recorder()
    saved = [(mod, name, getattr(mod, name))
             for modname, mod in list(sys.modules.items())
             if modname.startswith("dp.") and mod is not None and mod is not _noise
             for name in CLAIMS if callable(getattr(mod, name, None))]
    root = getattr(_noise, ROOT)
    charge = _budget.Ledger.charge

    def counted(rng, *args, **kw):
        if rec.depth == 0:
            rec.unrecorded += 1
        return root(rng, *args, **kw)

    charged: dict = {}                     # per ledger: Σ ε/Δ of its noise steps so far
    noisy_counts = _budget.Ledger.noisy_counts

    def paid(self, step, epsilon, sensitivity, noise="discrete laplace", *args, **kw):
        entry = charge(self, step, epsilon, sensitivity, noise, *args, **kw)
        if noise != "exponential":
            charged[id(self)] = charged.get(id(self), 0.0) + float(epsilon) / float(sensitivity)
            rec.budget = charged[id(self)]
        return entry

    def charged_and_drawn(self, rng, counts, epsilon, step, sensitivity=1.0, note=""):
        rec.own = float(sensitivity) / float(epsilon)
        try:
            return noisy_counts(self, rng, counts, epsilon, step, sensitivity, note)
        finally:
            rec.own = None
    try:
        for mod, name, fn in saved:
            setattr(mod, name, _wrap(rec, f"{mod.__name__}.{name}", name, fn))
        setattr(_noise, ROOT, counted)
        _budget.Ledger.charge = paid
        _budget.Ledger.noisy_counts = charged_and_drawn
        yield rec
    finally:
        _budget.Ledger.charge = charge
        _budget.Ledger.noisy_counts = noisy_counts
        setattr(_noise, ROOT, root)
        for mod, name, fn in saved:
            setattr(mod, name, fn)
        for modname, mod in list(sys.modules.items()):      # modules first imported inside
            if modname.startswith("dp.") and mod is not None and getattr(mod, ROOT, None) is counted:
                setattr(mod, ROOT, root)


def _abs_moments(scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of |Z| for Z ~ discrete Laplace(scale): with q = e^(−1/scale),
    E|Z| = 2q/(1 − q²) and E Z² = 2q/(1 − q)²."""
    q = np.exp(-1.0 / scale)
    mean = 2 * q / ((1 - q) * (1 + q))
    return mean, np.sqrt(2 * q / (1 - q) ** 2 - mean ** 2)


@dataclass(frozen=True)
class Calibration:
    """How wide the draws were against their claims, per call site: the narrowest site's z
    below −limit fails (its noise is narrower than claimed)."""
    draws: int
    z: float                 # the lowest of the sites' z
    site: str                # where it was drawn
    ratio: float             # that site's total |Z| over its claimed mean total

    def passed(self, limit: float = 5.0) -> bool:
        return self.z >= -limit

    def __str__(self):
        return (f"{self.draws:,} draws; narrowest at {self.site}: z = {self.z:.2f} (below −5 "
                f"means narrower than claimed), |Z| {self.ratio:.3f} × its claimed mean")


def _testable(c: Draws) -> Draws:
    """The draws whose |Z| has a spread to test: a scale below 1/700 is zero noise in doubles."""
    keep = c.scale > 1.0 / 700
    return c if keep.all() else Draws(c.site, c.scale[keep], c.noise[keep])


def calibration(calls) -> Calibration:
    """Per call site, Stouffer's z of the draws' |Z| standardised by their claimed scales (each
    site on its own, so a step with few draws is not drowned by one with many); the lowest."""
    sites: dict = {}
    for c in calls:
        c = _testable(c)
        if c.noise.size:
            mean, sd = _abs_moments(c.scale)
            s = sites.setdefault(c.site, [0.0, 0, 0.0, 0.0])
            s[0] += float(np.sum((np.abs(c.noise) - mean) / sd))
            s[1] += c.noise.size
            s[2] += float(np.abs(c.noise).sum())
            s[3] += float(mean.sum())
    if not sites:
        return Calibration(0, 0.0, "none", 1.0)
    z = {k: v[0] / np.sqrt(v[1]) for k, v in sites.items()}
    site = min(z, key=z.get)
    return Calibration(sum(v[1] for v in sites.values()), float(z[site]), site,
                       sites[site][2] / sites[site][3])


@dataclass(frozen=True)
class Unpaid:
    """Draws narrower than what their ledger charged for them."""
    draws: int
    site: str
    ratio: float            # the worst such draw's scale over the narrowest scale paid for it

    def __str__(self):
        return (f"{self.draws:,} draws narrower than their charge; the worst at {self.site}, at "
                f"{self.ratio:.3f} × the scale paid for")


def unpaid(calls) -> Unpaid:
    """Draws narrower than their charge. A draw made with its charge (`Ledger.noisy_counts`)
    must have that step's scale Δ/ε; any other draw may be narrower than one step's (a tree node
    that stops early spends the levels below it too), but never than everything charged so far,
    scale 1 / Σ ε/Δ."""
    n, worst = 0, ("none", 1.0)
    for c in calls:
        if not c.noise.size:
            continue
        floor = c.own if c.own is not None else 1.0 / c.budget
        ratio = c.scale * c.unit / floor
        short = ratio < 1 - 1e-9
        n += int(short.sum())
        if short.any() and ratio.min() < worst[1]:
            worst = (c.site, float(ratio.min()))
    return Unpaid(n, *worst)


def selection_loss(a: Selection, b: Selection) -> float:
    """The exact privacy loss of one exponential mechanism asked the same question on
    neighbouring datasets: the largest |ln P_D(r) / P_D'(r)| over its responses, with the
    probabilities the discretised sampler really draws with; ε-DP needs it at most ε."""
    if a.scores.shape != b.scores.shape or a.epsilon != b.epsilon:
        raise ValueError("the two runs asked different questions")
    la = _noise.exponential_mechanism_log_probs(a.scores, a.epsilon, a.sensitivity)
    lb = _noise.exponential_mechanism_log_probs(b.scores, b.epsilon, b.sensitivity)
    return float(np.max(np.abs(la - lb)))


def sensitivity_excess(a: Draws, b: Draws) -> float:
    """The L1 change of a real-valued query's values between neighbours, in grid steps, over its
    stated sensitivity (1 or less holds the claim). Only meaningful for a draw nothing released
    came before, so that both runs asked the same question."""
    if a.values.shape != b.values.shape:
        raise ValueError("the two runs asked queries of different sizes: not the first draw")
    return float(np.abs(a.values - b.values).sum() / a.sensitivity)
