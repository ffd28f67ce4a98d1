"""Uniform-grid mechanisms (paper 000): Identity, Uniform, Heuristic UG, E2EPriv, and the
non-private references Leaky and BestNonPriv used in the paper's experiments."""
from __future__ import annotations

import math

import numpy as np

from ..budget import Ledger
from ..domain import UniformGrid
from ..errors import ParameterError
from ..noise import exponential_mechanism, laplace
from ..queries import alpha_l1, grid_answers, random_workload
from .base import GridRelease, MechanismSpec, Param

ADD_REMOVE = "add/remove one point"

P_GRID_SIZES = Param("grid_sizes", list, [30, 40, 50, 60, 70, 80], "Candidate grid sizes G",
                     "Cells per side the tuning may choose from (paper 000 Table 2, Storage).",
                     min=1, max=2048)
P_DELTA = Param("delta", float, 0.01, "Sanity fraction δ",
                "Relative errors are divided by max(true, δ·N); δ·N must exceed 1. The paper uses "
                "0.1 for ~9k points, 0.01 for ~870k and 0.001 for ~6.4M.", min=1e-6, max=0.99)
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


def n_in_domain(data, domain) -> int:
    """N = |D| after the per-record 'drop points outside the domain' rule (spec 000 P12)."""
    return int(np.count_nonzero(data.in_domain(domain)))


def _noisy_grid(spec, data, domain, epsilon, split, params, rng, g, *, n_public=None,
                ledger=None, step="noisy cell counts", diagnostics=None):
    """Histogram on a g x g grid plus Laplace(1/eps_counts) on every cell (spec 000 A6)."""
    ledger = ledger or Ledger()
    eps_counts = epsilon * split[-1]
    grid = UniformGrid(domain, g)
    H = data.histogram(grid)
    scale = 1.0 / eps_counts
    noisy = H + laplace(rng, scale, H.shape)
    ledger.charge(step, eps_counts, 1.0, "laplace", scale,
                  note=f"{grid.gx}x{grid.gy} cells, Laplace(1/ε) on every cell")
    return GridRelease(spec, domain, epsilon, split, params, ledger, grid, noisy, scale,
                       diagnostics=diagnostics, n_public=n_public)


# ---------------------------------------------------------------------------- Identity, Uniform
def release_identity(data, domain, epsilon, split, params, rng):
    return _noisy_grid(IDENTITY, data, domain, epsilon, split, params, rng, params["grid_size"])


def release_uniform(data, domain, epsilon, split, params, rng):
    return _noisy_grid(UNIFORM, data, domain, epsilon, split, params, rng, 1, step="noisy total")


IDENTITY = MechanismSpec(
    name="identity", label="Identity (fine grid)",
    description="Laplace noise on every cell of a fixed fine grid; no tuning, no smoothing.",
    guarantee=f"ε-differential privacy, {ADD_REMOVE}.",
    params=(Param("grid_size", int, 128, "Cells per side",
                  "Fixed grid resolution; finer grids add noise from more cells.", min=1, max=1024),),
    release=release_identity)

UNIFORM = MechanismSpec(
    name="uniform", label="Uniform (one total)",
    description="One noisy total spread evenly over the domain: the no-structure baseline.",
    guarantee=f"ε-differential privacy, {ADD_REMOVE}.",
    release=release_uniform)


# ------------------------------------------------------------------------------ Heuristic UG
def release_ug(data, domain, epsilon, split, params, rng):
    n = n_in_domain(data, domain)
    g = heuristic_grid_size(n, epsilon, params["c"])
    return _noisy_grid(UG, data, domain, epsilon, split, params, rng, g, n_public=n)


UG = MechanismSpec(
    name="ug", label="Uniform grid (Heuristic UG)",
    description="Grid with m = √(N·ε/c) cells per side (Qardaji et al. 2013); all ε on the counts.",
    guarantee=f"ε-differential privacy, {ADD_REMOVE}; the dataset size N is treated as public "
              "(it sets the grid size).",
    params=(Param("c", float, 10.0, "Constant c", "The rule's constant; 10 was tuned by its "
                  "authors on their own datasets.", min=0.01, max=1000),),
    release=release_ug)


# --------------------------------------------------------------------------------- E2EPriv
def tuning_workload(domain, params) -> np.ndarray:
    """The public tuning workload Q: random rectangles from a public seed (spec 000 5.2, P7)."""
    return random_workload(domain, params["tuning_queries"], area_frac=params["tuning_query_area"],
                           rng=params["workload_seed"])


def rel_sensitivity(n: float, delta: float, lam: float, mean_l1) -> np.ndarray:
    """Corollary 7.9: 1/(δ(ρ+1)) + λ·L̄/(ρ(ρ+1)) + 1/(ρ+δ), ρ = δN (spec 000 A4)."""
    rho = delta * n
    return 1.0 / (delta * (rho + 1)) + lam * np.asarray(mean_l1, float) / (rho * (rho + 1)) + 1.0 / (rho + delta)


def grid_scores(data, domain, grid_sizes, Q, lam, delta, variant="rel"):
    """Phase-1 scores s(D, g) for every candidate (spec 000 A3) and the mean ||α||_1 per g.

    Returns (scores, mean_l1, l1_matrix) with l1_matrix[g, t] = ||α^{g,t}||_1.
    """
    n = n_in_domain(data, domain)
    rho = delta * n
    T = data.true_counts(Q, domain).astype(np.float64)       # computed once, reused for every g
    scores, l1s = [], []
    for g in grid_sizes:
        grid = UniformGrid(domain, g)
        R = grid_answers(grid, data.histogram(grid), Q)
        L = alpha_l1(grid, Q)
        bound = np.abs(R - T) + lam * L
        scores.append(-np.mean(bound / np.maximum(T, rho)) if variant == "rel" else -np.mean(bound))
        l1s.append(L)
    l1 = np.array(l1s)
    return np.array(scores), l1.mean(axis=1), l1


def sensitivities(n, delta, lam, mean_l1, l1_matrix, grid_sizes, variant, sens_mode, conservative):
    """Δ_g per candidate: Cor. 7.9 (resp), Eq. 7, Eq. 8, or 1 for the absolute score (A4)."""
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


def release_e2epriv(data, domain, epsilon, split, params, rng):
    """Spec 000 A7: exponential-mechanism grid choice (ε1), then a Laplace histogram (ε2)."""
    G = params["grid_sizes"]
    delta = params["delta"]
    n = n_in_domain(data, domain)
    if params["variant"] == "rel" and not delta * (n - params["conservative"]) > 1:
        raise ParameterError(f"E2EPriv needs δ·N > 1 (spec 000 P6); δ={delta} and N={n} give "
                             f"{delta * n:g}. Use δ ≥ {2 / max(n, 1):.3g} or the absolute score")
    eps1, eps2 = epsilon * split[0], epsilon * split[1]
    lam = 1.0 / eps2
    Q = tuning_workload(domain, params)
    scores, mean_l1, l1 = grid_scores(data, domain, G, Q, lam, delta, params["variant"])
    sens = sensitivities(n, delta, lam, mean_l1, l1, G, params["variant"], params["sens_mode"],
                         params["conservative"])
    idx, probs = exponential_mechanism(rng, scores, eps1, sens)
    ledger = Ledger()
    ledger.charge("grid-size selection (exponential mechanism)", eps1, float(sens[idx]),
                  "exponential", None, note=f"{params['variant']} score, {params['sens_mode']} "
                  f"sensitivity per candidate; chose g = {G[idx]} of {G}")
    diag = {"grid_sizes": list(G), "scores": scores.tolist(), "sensitivities": sens.tolist(),
            "probabilities": probs.tolist(), "chosen": G[idx]}
    return _noisy_grid(E2EPRIV, data, domain, epsilon, split, params, rng, G[idx], n_public=n,
                       ledger=ledger, diagnostics=diag)


E2EPRIV = MechanismSpec(
    name="e2epriv", label="E2EPriv (privately tuned grid)",
    description="Picks the grid size privately with the exponential mechanism, then releases "
                "that grid with Laplace noise (Fanaeepour & Rubinstein 2017).",
    guarantee=f"(ε1 + ε2)-differential privacy, {ADD_REMOVE}, for point data only; the dataset "
              "size N is treated as public (it enters the score's sensitivity).",
    params=(P_GRID_SIZES, P_DELTA, P_QUERY_AREA, P_N_QUERIES, P_WORKLOAD_SEED,
            Param("variant", str, "rel", "Score", "rel: relative-error bound (Eq. 6); abs: "
                  "absolute-error bound (sensitivity 1).", choices=("rel", "abs")),
            Param("sens_mode", str, "resp", "Sensitivity", "resp: per-grid Δ_g (Cor. 7.9); eq7 "
                  "and eq8: the looser global bounds, for comparison.", choices=("resp", "eq7", "eq8")),
            Param("conservative", bool, False, "Conservative N", "Evaluate Δ at N−1, covering "
                  "the removal direction (spec 000 P1).")),
    budget_parts=("grid-size tuning", "counts"), default_split=(0.2, 0.8),
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
    for g in G:
        grid = UniformGrid(domain, g)
        noisy = data.histogram(grid) + laplace(rng, 1.0 / epsilon, (g, g))
        draws.append((grid, noisy))
        errs.append(np.mean(np.abs(grid_answers(grid, noisy, Q) - T) / np.maximum(T, rho)))
    best = int(np.argmin(errs))
    grid, noisy = draws[best]
    ledger = Ledger()
    ledger.charge("noisy cell counts", epsilon, 1.0, "laplace", 1.0 / epsilon)
    ledger.record_leak("grid choice on true answers",
                       f"{len(G)} noisy grids compared against true counts; no guarantee")
    return GridRelease(LEAKY, domain, epsilon, split, params, ledger, grid, noisy, 1.0 / epsilon,
                       diagnostics={"grid_sizes": list(G), "tuning_errors": errs, "chosen": G[best]})


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
    params=_REF_PARAMS, private=False, release=release_leaky)

BEST_NONPRIV = MechanismSpec(
    name="best_nonpriv", label="Best non-private grid (NOT private)",
    description="The exact histogram at the grid size with the lowest aggregation error: the "
                "accuracy floor no private method can beat.",
    guarantee="NOT differentially private: exact counts, no noise.",
    params=_REF_PARAMS, private=False, release=release_best_nonpriv)

SPECS = (IDENTITY, UNIFORM, UG, E2EPRIV, LEAKY, BEST_NONPRIV)
