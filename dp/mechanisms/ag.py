"""AG, the adaptive grid of Qardaji, Yang & Li 2013 (spec 003 section 5.3): a coarse grid sized by
a noisy dataset size, each cell split again by its own noisy count, the two levels reconciled.
The conventions of `dp.mechanisms.trees` hold (integer noise, a noisy size with its own ε)."""
from __future__ import annotations

import math

import numpy as np

from ..budget import Ledger
from ..noise import discrete_laplace_variance
from ..partition_bounds import NodeDraws
from ..summed_area import box_sums
from .base import ADD_REMOVE_POINT, MechanismSpec, Param
from .leaves import LeafRelease, base_shape
from .trees import GUARANTEE_UNIT, P_BASE, SIZE_PART, _base


def snap_edges(n_cells: int, m: int) -> np.ndarray:
    """m + 1 base-grid lines closest to an even split of n_cells into m parts (m <= n_cells).

    Uses floor(j n / m + 1/2) in integer arithmetic; with m <= n the parts are never empty.
    """
    j = np.arange(m + 1, dtype=np.int64)
    return (2 * j * n_cells + m) // (2 * m)


def ag_first_level_size(n: int, epsilon: float, c: float = 10.0, m_min: int = 10) -> int:
    """m1 = max(m_min, ceil(sqrt(N eps / c) / 4)) (Qardaji et al. 2013; spec 003 section 5.3).

    The release passes a noisy size N̂ for N."""
    return max(int(m_min), math.ceil(0.25 * math.sqrt(max(n, 0) * epsilon / c)))


def ag_second_level_size(v_noisy, eps2: float, c2: float = 5.0) -> np.ndarray:
    """m2 = ceil(sqrt(max(v, 0) eps2 / c2)), at least 1, with eps2 = (1 - alpha) eps."""
    return np.maximum(1, np.ceil(np.sqrt(np.maximum(v_noisy, 0.0) * eps2 / c2))).astype(np.int64)


def ag_cells(shape, m1: int) -> np.ndarray:
    """Level-1 cells: an m1 x m1 grid (as UG) with edges snapped to base-grid lines."""
    gy, gx = shape
    re = snap_edges(gy, min(m1, gy))
    ce = snap_edges(gx, min(m1, gx))
    R0, C0 = np.meshgrid(re[:-1], ce[:-1], indexing="ij")
    R1, C1 = np.meshgrid(re[1:], ce[1:], indexing="ij")
    return np.column_stack([R0.ravel(), R1.ravel(), C0.ravel(), C1.ravel()])


def ag_subcells(cells: np.ndarray, m2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split each level-1 cell into m2 x m2 parts snapped to base-grid lines.

    A side shorter than m2 cells is split into as many parts as it has cells. Returns
    (sub-cells, index of each sub-cell's level-1 cell, number of sub-cells k per cell).
    """
    r0, r1, c0, c1 = cells.T
    U, V = r1 - r0, c1 - c0
    ky, kx = np.minimum(m2, U), np.minimum(m2, V)
    k = ky * kx
    cell = np.repeat(np.arange(len(cells)), k)
    j = np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k)
    a, b = j // kx[cell], j % kx[cell]
    Uc, Vc, kyc, kxc = U[cell], V[cell], ky[cell], kx[cell]
    sub = np.column_stack([r0[cell] + (2 * a * Uc + kyc) // (2 * kyc),
                           r0[cell] + (2 * (a + 1) * Uc + kyc) // (2 * kyc),
                           c0[cell] + (2 * b * Vc + kxc) // (2 * kxc),
                           c0[cell] + (2 * (b + 1) * Vc + kxc) // (2 * kxc)])
    return sub, cell, k


def ag_inference(v, u, cell, k, alpha: float) -> np.ndarray:
    """Constrained inference of AG (spec 003 section 5.3), with k = m2^2 sub-cells per cell:

    v' = (alpha^2 k v + (1 - alpha)^2 sum u) / (alpha^2 k + (1 - alpha)^2),
    u' = u + (v' - sum u) / k.  (Inverse-variance weighting of v against sum u.)
    """
    su = np.bincount(cell, u, minlength=len(v))
    a2k = alpha ** 2 * k
    b2 = (1.0 - alpha) ** 2
    v2 = (a2k * v + b2 * su) / (a2k + b2)
    return u + ((v2 - su) / k)[cell]


def ag_inference_weight(eps1: float, eps2: float) -> float:
    """The alpha of `ag_inference` that weights by the discrete Laplace variances V1, V2 of the
    two levels: alpha^2 / (1 - alpha)^2 = V2 / V1; it tends to eps1 / (eps1 + eps2) for small eps."""
    sd1, sd2 = np.sqrt(discrete_laplace_variance(np.array([1.0 / eps1, 1.0 / eps2])))
    return float(sd2 / (sd1 + sd2))


def release_ag(data, domain, epsilon, split, params, rng):
    base, F, S = _base(data, domain, params)
    ledger = Ledger()
    n_hat = ledger.noisy_size(rng, round(S[-1, -1]), epsilon * split[0], "sets the level-1 grid")
    eps1, eps2 = epsilon * split[1], epsilon * split[2]
    alpha = split[1] / (split[1] + split[2])
    m1 = ag_first_level_size(max(n_hat, 1), epsilon, params["c"], params["m1_min"])
    cells = ag_cells(base.shape, m1)
    v = ledger.noisy_counts(rng, box_sums(S, cells), eps1, "AG level-1 counts",
                            note=f"{m1}x{m1} grid (edges on base-grid lines) sized by the noisy "
                                 "dataset size, discrete Laplace(1/(αε_counts)) per cell")
    m2 = ag_second_level_size(v, eps2, params["c2"])
    sub, cell, k = ag_subcells(cells, m2)
    u = ledger.noisy_counts(rng, box_sums(S, sub), eps2, "AG level-2 counts",
                            note="each level-1 cell split into m2 x m2 by its noisy count, discrete "
                                 "Laplace(1/((1−α)ε_counts)) per sub-cell; then constrained "
                                 "inference")
    weight = ag_inference_weight(eps1, eps2)
    counts = ag_inference(v, u, cell, k, weight)
    # nodes for the level view: root (depth 0), level-1 cells (1), sub-cells of split cells (2);
    # a region is listed once (a 1 x 1 level-1 grid is the root itself)
    gy, gx = base.shape
    split_sub = (k > 1)[cell]
    top = 0 if len(cells) == 1 else 1
    nodes = np.concatenate([
        np.zeros((0, 5), np.int64) if top == 0 else np.array([[0, gy, 0, gx, 0]]),
        np.column_stack([cells, np.full(len(cells), top)]),
        np.column_stack([sub[split_sub], np.full(int(split_sub.sum()), top + 1)]),
    ])
    # the ranges' draws: every level-1 cell (v) and every sub-cell (u, inside its cell)
    draws = NodeDraws(np.concatenate([cells, sub]), np.concatenate([np.full(len(cells), -1), cell]),
                      np.concatenate([v, u]),
                      np.concatenate([np.full(len(cells), 1 / eps1), np.full(len(sub), 1 / eps2)]),
                      np.r_[np.zeros(len(cells), bool), np.ones(len(sub), bool)],
                      shaped_by_own_draw=np.r_[np.ones(len(cells), bool), np.zeros(len(sub), bool)])
    return LeafRelease(AG, domain, epsilon, split, params, ledger, base, sub, counts,
                       leaf_var=None, eps_path=np.full(len(sub), epsilon), nodes=nodes,
                       noisy_size=n_hat, draws=draws,
                       diagnostics={"m1": m1, "m2": m2.tolist(), "n_leaves": len(sub),
                                    "alpha": alpha, "inference_weight": weight})


AG = MechanismSpec(
    name="ag", label="Adaptive grid (AG)",
    description="A coarse grid with noisy counts; each cell is then split again into a finer "
                "grid sized by its own noisy count, and the two levels are reconciled "
                "(Qardaji, Yang & Li 2013).",
    guarantee=f"{GUARANTEE_UNIT}, with ε = ε_size + ε1 + ε2 (a noisy dataset size, 5% of ε "
              "by default, which sets the first-level grid; then the level-1 and level-2 counts, "
              "each with discrete Laplace noise). The dataset size N is not public.",
    unit=ADD_REMOVE_POINT,
    params=(P_BASE,
            Param("c", float, 10.0, "Constant c (level 1)",
                  "Level-1 grid m1 = max(m1_min, ⌈√(N̂·ε/c)/4⌉), N̂ a noisy dataset size; 10 as "
                  "in the AG paper.", min=0.01, max=1000),
            Param("c2", float, 5.0, "Constant c₂ (level 2)",
                  "Each cell with noisy count v is split m2 × m2, m2 = ⌈√(v·ε2/c₂)⌉; c₂ = c/2 "
                  "in the AG paper.", min=0.01, max=1000),
            Param("m1_min", int, 10, "Smallest level-1 grid", "Lower bound on m1 (10 in the "
                  "AG paper).", min=1, max=1024)),
    budget_parts=(SIZE_PART, "level-1 counts", "level-2 counts"), default_split=(0.05, 0.475, 0.475),
    finest_grid=base_shape, release=release_ag)


SPECS = (AG,)
