"""Uniform-grid mechanisms (paper 000): Identity, Uniform, Heuristic UG, E2EPriv, and the
non-private references Leaky and BestNonPriv used in the paper's experiments."""
from __future__ import annotations

import math

import numpy as np

from ..budget import Ledger
from ..domain import UniformGrid
from ..queries import alpha_l1, grid_answers, random_workload
from .base import ADD_REMOVE_POINT, NOT_PRIVATE, GridRelease, MechanismSpec, Param

ADD_REMOVE = ADD_REMOVE_POINT
SIZE_SHARE = 0.05            # default share of ε spent on a noisy dataset size where a rule needs N
SIZE_PART = "dataset size"

P_GRID_SIZES = Param("grid_sizes", list, [30, 40, 50, 60, 70, 80], "Candidate grid sizes G",
                     "Cells per side the tuning may choose from (paper 000 Table 2, Storage). "
                     "E2EPriv uses this list only when 'Grid sizes to try' is 'paper'.",
                     min=1, max=2048)
AUTO_STEPS = tuple(range(-4, 2))   # auto candidates: m0 * 2^(k/2) for these k (m0/4 .. 1.41*m0)
AUTO_MAX_GRID = 1024               # public cap: at most 1024 x 1024 cells per candidate
P_CANDIDATES = Param("candidates", str, "auto", "Grid sizes to try",
                     "Which grid sizes the private tuning chooses between. auto: up to six sizes "
                     "from a quarter of to 1.4 times the usual rule of thumb √(N̂·ε/10) cells per "
                     "side (N̂ the noisy number of points; at most 1024), so the grid follows the "
                     "amount of data and ε. paper: the fixed list in 'Candidate grid sizes G' "
                     "(the paper's 30 to 80). Either way the choice itself is private.",
                     choices=("auto", "paper"))
P_DELTA = Param("delta", float, 0.01, "Sanity fraction δ",
                "Relative errors are divided by max(true, ρ), ρ = max(δ·N̂, 1) with N̂ the noisy "
                "dataset size. The paper uses 0.1 for ~9k points, 0.01 for ~870k and 0.001 for ~6.4M.",
                min=1e-6, max=0.99)
P_QUERY_AREA = Param("tuning_query_area", float, 0.01, "Tuning query area (fraction)",
                     "Area of each tuning rectangle as a fraction of the domain (0.01 = 1%).",
                     min=1e-4, max=1.0)
P_N_QUERIES = Param("tuning_queries", int, 100, "Tuning workload size |Q|",
                    "Number of random tuning rectangles; public, drawn from the workload seed.",
                    min=1, max=10000)
P_WORKLOAD_SEED = Param("workload_seed", int, 2017, "Tuning workload seed",
                        "Seed of the public tuning workload (it never looks at the data).",
                        min=0, max=2**31 - 1)


def heuristic_grid_size(n: int, epsilon: float, c: float = 10.0) -> int:
    """Qardaji et al.'s rule m = sqrt(N eps / c), rounded half up, at least 1 (spec 000 A8, P15)."""
    return max(1, int(math.floor(math.sqrt(n * epsilon / c) + 0.5)))


def capped(g: int, data) -> int:
    """A grid size chosen from public values or a noisy size, no finer than the data's own
    resolution (counts on a grid: public; points: no limit)."""
    return g if data.finest is None else min(g, *data.finest)


def square(g: int) -> tuple[int, int]:
    """(columns, rows) of a g x g grid, for MechanismSpec.finest_grid."""
    return int(g), int(g)


def n_in_domain(data, domain) -> int:
    """N = |D| after the per-record 'drop points outside the domain' rule (spec 000 P12)."""
    return data.count_in(domain)


def _noisy_grid(spec, data, domain, epsilon, split, params, rng, g, eps_counts, *, ledger=None,
                step="noisy cell counts", diagnostics=None, noisy_n=None):
    """Histogram on a g x g grid plus discrete Laplace(1/ε_counts) on every cell (spec 000 A6)."""
    ledger = ledger or Ledger()
    grid = UniformGrid(domain, g)
    noisy = ledger.noisy_counts(rng, data.histogram(grid), eps_counts, step,
                                note=f"{grid.gx}x{grid.gy} cells, discrete Laplace(1/ε) on every cell")
    return GridRelease(spec, domain, epsilon, split, params, ledger, grid, noisy, 1.0 / eps_counts,
                       diagnostics=diagnostics, noisy_size=noisy_n)


# ---------------------------------------------------------------------------- Identity, Uniform
def release_identity(data, domain, epsilon, split, params, rng):
    return _noisy_grid(IDENTITY, data, domain, epsilon, split, params, rng, params["grid_size"],
                       epsilon)


def release_uniform(data, domain, epsilon, split, params, rng):
    return _noisy_grid(UNIFORM, data, domain, epsilon, split, params, rng, 1, epsilon,
                       step="noisy total")


IDENTITY = MechanismSpec(
    name="identity", label="Identity (fine grid)",
    description="Laplace noise on every cell of a fixed fine grid; no tuning, no smoothing.",
    guarantee=f"ε-differential privacy, {ADD_REMOVE}; integer counts with discrete Laplace noise.",
    params=(Param("grid_size", int, 128, "Cells per side",
                  "Fixed grid resolution; finer grids add noise from more cells.", min=1, max=1024),),
    finest_grid=lambda domain, p: square(p["grid_size"]),
    release=release_identity)

UNIFORM = MechanismSpec(
    name="uniform", label="Uniform (one total)",
    description="One noisy total spread evenly over the domain: the no-structure baseline.",
    guarantee=f"ε-differential privacy, {ADD_REMOVE}; the total gets discrete Laplace noise.",
    release=release_uniform)


# ------------------------------------------------------------------------------ Heuristic UG
def release_ug(data, domain, epsilon, split, params, rng):
    """Qardaji et al.'s grid sized from a noisy N̂ (ε_size), then noisy counts (ε_counts)."""
    ledger = Ledger()
    n_hat = ledger.noisy_size(rng, n_in_domain(data, domain), epsilon * split[0], "sets the grid size")
    g = capped(heuristic_grid_size(max(n_hat, 0), epsilon, params["c"]), data)
    return _noisy_grid(UG, data, domain, epsilon, split, params, rng, g, epsilon * split[1],
                       ledger=ledger, noisy_n=n_hat)


UG = MechanismSpec(
    name="ug", label="Uniform grid (Heuristic UG)",
    description="Grid with m = √(N̂·ε/c) cells per side (Qardaji et al. 2013), N̂ a noisy "
                "dataset size; the rest of ε on the counts.",
    guarantee=f"ε-differential privacy, {ADD_REMOVE}, with ε = ε_size + ε_counts: the dataset "
              "size is not public, a noisy size (5% of ε by default) sets the grid.",
    params=(Param("c", float, 10.0, "Constant c", "The rule's constant; 10 was tuned by its "
                  "authors on their own datasets.", min=0.01, max=1000),),
    budget_parts=(SIZE_PART, "counts"), default_split=(SIZE_SHARE, 1 - SIZE_SHARE),
    release=release_ug)


# --------------------------------------------------------------------------------- E2EPriv
def tuning_workload(domain, params) -> np.ndarray:
    """The public tuning workload Q: random rectangles from a public seed (spec 000 5.2, P7)."""
    return random_workload(domain, params["tuning_queries"], area_frac=params["tuning_query_area"],
                           rng=params["workload_seed"])


def auto_grid_sizes(n_hat: float, epsilon: float, *, c: float = 10.0, steps=AUTO_STEPS,
                    max_grid: int = AUTO_MAX_GRID) -> list[int]:
    """The "auto" candidate set: m0 · 2^(k/2) for k in `steps` around the UG rule
    m0 = √(N̂·ε/c), rounded half up, clipped to [1, max_grid], sorted, without repeats.

    It reads only the noisy size N̂, ε and public constants, never the data, so choosing it
    costs no budget beyond N̂'s and leaves the exponential mechanism's guarantee as it is.
    k = 0 is `heuristic_grid_size(N̂, ε, c)` (clipped to max_grid), the size UG would use.
    """
    m0 = math.sqrt(max(float(n_hat), 0.0) * epsilon / c)
    sizes = {int(math.floor(m0 * 2.0 ** (k / 2.0) + 0.5)) for k in steps}
    sizes.add(heuristic_grid_size(max(n_hat, 0), epsilon, c))
    return sorted({min(max(g, 1), int(max_grid)) for g in sizes})


def grid_scores(data, domain, grid_sizes, Q, lam, delta, variant="rel", *, rho=None, cap=None):
    """Phase-1 scores s(D, g) for every candidate (spec 000 A3) and the mean ||α||_1 per g.

    ρ defaults to the paper's δ·N (spec worked examples); a release passes ρ = max(δ·N̂, 1) from
    a noisy size and `cap` = 1/δ, which bounds each query's term so the score's sensitivity does
    not depend on N (`capped_sensitivity`). Returns (scores, mean_l1, l1_matrix) with
    l1_matrix[g, t] = ||α^{g,t}||_1.
    """
    if variant == "rel" and rho is None:    # the paper's δ·N: spec worked examples only
        rho = delta * n_in_domain(data, domain)
    T = data.true_counts(Q, domain).astype(np.float64)       # computed once, reused for every g
    scores, l1s = [], []
    for g in grid_sizes:
        grid = UniformGrid(domain, g)
        R = grid_answers(grid, data.histogram(grid), Q)
        L = alpha_l1(grid, Q)
        bound = np.abs(R - T) + lam * L
        if variant == "rel":
            term = bound / np.maximum(T, rho)
            scores.append(-np.mean(term if cap is None else np.minimum(term, cap)))
        else:
            scores.append(-np.mean(bound))
        l1s.append(L)
    l1 = np.array(l1s)
    return np.array(scores), l1.mean(axis=1), l1


def rel_sensitivity(n: float, delta: float, lam: float, mean_l1) -> np.ndarray:
    """The paper's Corollary 7.9 with N public: 1/(δ(ρ+1)) + λ·L̄/(ρ(ρ+1)) + 1/(ρ+δ), ρ = δN (A4).

    Kept for the spec's worked examples and as an owner-only comparison: a release uses
    `capped_sensitivity`, which needs no exact N.
    """
    rho = delta * n
    return 1.0 / (delta * (rho + 1)) + lam * np.asarray(mean_l1, float) / (rho * (rho + 1)) + 1.0 / (rho + delta)


def sensitivities(n, delta, lam, mean_l1, l1_matrix, grid_sizes, variant, sens_mode, conservative):
    """The paper's Δ_g per candidate: Cor. 7.9 (resp), Eq. 7, Eq. 8, or 1 for the absolute score (A4)."""
    if variant == "abs":
        return np.ones(len(grid_sizes))
    n_eff = n - 1 if conservative else n      # P1: Δ decreases in N, so N-1 covers removal
    if sens_mode == "resp":
        return rel_sensitivity(n_eff, delta, lam, mean_l1)
    if sens_mode == "eq7":
        worst = l1_matrix.max(axis=0).mean()
        return np.full(len(grid_sizes), rel_sensitivity(n_eff, delta, lam, worst))
    gmax = max(grid_sizes)
    return np.full(len(grid_sizes), rel_sensitivity(n_eff, delta, lam, float(gmax) ** 2))


def capped_sensitivity(rho: float, cap: float) -> float:
    """Sensitivity (cap + 1)/ρ of the capped relative score with a fixed, public ρ >= 1.

    Per query, term = min((|R−T| + λL) / max(T, ρ), cap). Adding or removing a point moves
    |R−T| by at most 1 (a change of at most 1/ρ) and T by at most 1; with the numerator fixed,
    the step from max(T, ρ) to max(T+1, ρ) lowers a term that is below the cap by at most
    cap·1/max(T+1, ρ) <= cap/ρ. The mean over queries keeps the bound. With cap = 1/δ this is
    (1/δ + 1)/ρ, about the paper's 1/(δ(ρ+1)) + 1/(ρ+δ), without treating N as public.
    The bound has no g in it (λL is fixed by g and the public queries), so it holds for every
    candidate grid, including the auto candidates of any size.
    """
    return (float(cap) + 1.0) / float(rho)


def release_e2epriv(data, domain, epsilon, split, params, rng):
    """Spec 000 A7 with N private: noisy N̂ (ε0), grid choice by an exact exponential mechanism
    over capped scores (ε1), then a discrete Laplace histogram (ε2).

    Candidates: "paper" is the `grid_sizes` list; "auto" is `auto_grid_sizes(N̂, ε)`, a
    function of the released N̂ and public values only. The capped score's sensitivity
    (1/δ + 1)/ρ does not depend on g, so it holds for every candidate; the absolute score's is 1.
    """
    delta, auto = params["delta"], params["candidates"] == "auto"
    eps0, eps1, eps2 = (epsilon * f for f in split)
    ledger = Ledger()
    Q = tuning_workload(domain, params)
    n = n_in_domain(data, domain)
    if params["variant"] == "rel":
        n_hat = ledger.noisy_size(rng, n, eps0, "sets the sanity bound ρ")
    elif auto:                 # the absolute score needs no N, but the auto candidates do
        n_hat = ledger.noisy_size(rng, n, eps0, "sets the candidate grid sizes")
    else:                      # no size needed at all: its share goes to the counts
        n_hat, eps2 = None, eps2 + eps0
    if auto:
        G = auto_grid_sizes(n_hat, epsilon, max_grid=capped(AUTO_MAX_GRID, data))
        what = (f"auto candidates m0·2^(k/2), k = {AUTO_STEPS[0]}..{AUTO_STEPS[-1]}, around "
                f"m0 = √(N̂·ε/10) = {math.sqrt(max(n_hat, 0) * epsilon / 10):.1f}, at most "
                f"{AUTO_MAX_GRID}")
    else:
        G = list(params["grid_sizes"])
        what = "paper candidates (the grid_sizes list)"
    lam = 1.0 / eps2
    if params["variant"] == "rel":
        rho, cap = max(delta * n_hat, 1.0), 1.0 / delta
        scores, _, _ = grid_scores(data, domain, G, Q, lam, delta, "rel", rho=rho, cap=cap)
        sens = capped_sensitivity(rho, cap)
        note = f"capped relative score, ρ = max(δ·N̂, 1), Δ = (1/δ + 1)/ρ = {sens:.4g}"
    else:
        scores, _, _ = grid_scores(data, domain, G, Q, lam, delta, "abs")
        sens = 1.0
        note = ("absolute score, Δ = 1 (N̂ only sets the candidates)" if auto else
                "absolute score, Δ = 1 (no dataset size needed; its share went to the counts)")
    idx, probs = ledger.select(rng, scores, eps1, sens, "grid-size selection (exponential "
                               "mechanism)", G, note=f"{what}; {note}; exact discretised sampler")
    diag = {"candidates": params["candidates"], "grid_sizes": list(G), "scores": scores.tolist(),
            "sensitivity": sens, "probabilities": probs.tolist(), "chosen": G[idx]}
    return _noisy_grid(E2EPRIV, data, domain, epsilon, split, params, rng, G[idx], eps2,
                       ledger=ledger, diagnostics=diag, noisy_n=n_hat)


E2EPRIV = MechanismSpec(
    name="e2epriv", label="E2EPriv (privately tuned grid)",
    description="Picks the grid size privately with the exponential mechanism, then releases "
                "that grid with discrete Laplace noise (Fanaeepour & Rubinstein 2017).",
    guarantee=f"(ε0 + ε1 + ε2)-differential privacy, {ADD_REMOVE}, for point data only: a noisy "
              "dataset size (ε0, 5% by default) fixes the sanity bound and, with auto candidates, "
              "the grid sizes to try; the grid choice (ε1) uses a capped relative-error score "
              "whose sensitivity needs no exact N, and the counts (ε2) get discrete Laplace noise.",
    params=(P_CANDIDATES, P_GRID_SIZES, P_DELTA, P_QUERY_AREA, P_N_QUERIES, P_WORKLOAD_SEED,
            Param("variant", str, "rel", "Score", "rel: capped relative-error bound (Eq. 6); abs: "
                  "absolute-error bound (sensitivity 1; needs a dataset size only for auto candidates).",
                  choices=("rel", "abs"))),
    budget_parts=(SIZE_PART, "grid-size tuning", "counts"), default_split=(SIZE_SHARE, 0.15, 0.80),
    finest_grid=lambda domain, p: None if p["candidates"] == "auto" else square(max(p["grid_sizes"])),
    release=release_e2epriv)


# ------------------------------------------------------------- Non-private references (A8)
def release_leaky(data, domain, epsilon, split, params, rng):
    """Leaky (spec 000 A8): a noisy grid per candidate, the best one picked on TRUE answers."""
    G, delta = params["grid_sizes"], params["delta"]
    n = n_in_domain(data, domain)
    Q = tuning_workload(domain, params)
    T = data.true_counts(Q, domain)
    rho = max(delta * n, 1e-12)
    draws, errs = [], []
    for g in G:            # one ledger per candidate: the one chosen becomes the release's
        grid, ledger = UniformGrid(domain, g), Ledger()
        noisy = ledger.noisy_counts(rng, data.histogram(grid), epsilon, "noisy cell counts")
        draws.append((grid, noisy, ledger))
        errs.append(np.mean(np.abs(grid_answers(grid, noisy, Q) - T) / np.maximum(T, rho)))
    best = int(np.argmin(errs))
    grid, noisy, ledger = draws[best]
    ledger.record_leak("grid choice on true answers",
                       f"{len(G)} noisy grids compared against true counts; no guarantee")
    rel = GridRelease(LEAKY, domain, epsilon, split, params, ledger, grid, noisy, 1.0 / epsilon,
                      diagnostics={"grid_sizes": list(G), "tuning_errors": errs, "chosen": G[best]})
    rel.bounds_hold = False          # the draws kept were chosen by their errors on true answers
    return rel


def release_best_nonpriv(data, domain, epsilon, split, params, rng):
    """BestNonPriv (spec 000 A8): the EXACT histogram at argmin of the λ = 0 score."""
    G = params["grid_sizes"]
    Q = tuning_workload(domain, params)
    scores, _, _ = grid_scores(data, domain, G, Q, 0.0, params["delta"], "rel")
    g = G[int(np.argmax(scores))]
    grid = UniformGrid(domain, g)
    ledger = Ledger()
    ledger.record_leak("exact counts", "no noise at all: a lower-bound reference, not a release")
    return GridRelease(BEST_NONPRIV, domain, epsilon, split, params, ledger, grid,
                       data.histogram(grid), None,
                       diagnostics={"grid_sizes": list(G), "scores": scores.tolist(), "chosen": g,
                                    "chose_largest": g == max(G)})


_REF_PARAMS = (P_GRID_SIZES, P_DELTA, P_QUERY_AREA, P_N_QUERIES, P_WORKLOAD_SEED)

LEAKY = MechanismSpec(
    name="leaky", label="Leaky tuning (NOT private)",
    description="Adds noise to each candidate grid but picks the grid by comparing with true "
                "answers; an experimental reference from paper 000.",
    guarantee="NOT differentially private: the grid is chosen on the true data.",
    params=_REF_PARAMS, private=False, unit=NOT_PRIVATE, release=release_leaky,
    finest_grid=lambda domain, p: square(max(p["grid_sizes"])))

BEST_NONPRIV = MechanismSpec(
    name="best_nonpriv", label="Best non-private grid (NOT private)",
    description="The exact histogram at the grid size with the lowest aggregation error: the "
                "accuracy floor no private method can beat.",
    guarantee="NOT differentially private: exact counts, no noise.",
    params=_REF_PARAMS, private=False, unit=NOT_PRIVATE, release=release_best_nonpriv,
    finest_grid=lambda domain, p: square(max(p["grid_sizes"])))

SPECS = (IDENTITY, UNIFORM, UG, E2EPRIV, LEAKY, BEST_NONPRIV)
