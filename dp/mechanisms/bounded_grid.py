"""The shifted grids' baseline: one uniform grid under bounded (replace-one) DP (spec 2.6).

Split from `dp.mechanisms.shifted_grids`, which re-exports `BoundedGridRelease` so releases
pickled before the split (published ones) still load.
"""
from __future__ import annotations

import math

import numpy as np

from ..budget import Ledger
from ..domain import UniformGrid
from ..errors import ParameterError
from .base import REPLACE_POINT, GridRelease, MechanismSpec, Param
from .shifted_lattice import MAX_BINS, BoxMetres, resolve_bin_width

BOUNDED_KIND = "standard-bounded"


class BoundedGridRelease(GridRelease):
    """The paper's baseline uniform grid (spec 2.6) with its guarantee marker."""

    guarantee_kind = BOUNDED_KIND
    bin_km: tuple = (math.nan, math.nan)   # actual cell width and height, set by the release
    clamps_into_box = True      # points outside the box are counted in its edge cells

    def metadata(self) -> dict:
        meta = super().metadata()
        meta.update({"guarantee_kind": self.guarantee_kind, "sensitivity": 2,
                     "noise_scale": self.noise_scale,
                     "bin_km": [self.bin_km[0], self.bin_km[1]]})
        return meta


def release_bounded_grid(data, domain, epsilon, split, params, rng):
    """Spec 2.6: K_x x K_y cells of width about w, discrete Laplace(2/ε) per cell; points clamped."""
    box = BoxMetres.of(domain)
    w = resolve_bin_width(box, params)
    kx = max(1, int(round(box.width / w)))
    ky = max(1, int(round(box.height / w)))
    if kx * ky > MAX_BINS:
        raise ParameterError(f"{kx}×{ky} cells exceeds {MAX_BINS:,}: widen the bins")
    grid = UniformGrid(domain, kx, ky)
    lon = np.clip(np.nan_to_num(np.asarray(data.x, dtype=np.float64), nan=domain.west), domain.west, domain.east)
    lat = np.clip(np.nan_to_num(np.asarray(data.y, dtype=np.float64), nan=domain.south), domain.south, domain.north)
    H = grid.histogram(lon, lat)
    eps = epsilon * split[-1]
    ledger = Ledger()
    noisy = ledger.noisy_counts(rng, H, eps, "noisy cell counts", sensitivity=2.0,
                                note=f"{kx}×{ky} cells; replace-one relation: replacing one point "
                                     "changes two cells by 1")
    rel = BoundedGridRelease(BOUNDED_GRID, domain, epsilon, split, params, ledger, grid, noisy,
                             2.0 / eps,
                             diagnostics={"points_clamped_into_box":
                                          int(np.count_nonzero(~domain.contains(data.x, data.y)))})
    rel.bin_km = (box.width / kx / 1000, box.height / ky / 1000)
    return rel


P_BIN_KM = Param("bin_km", float, 0.0, "Bin width w (km)",
                 "Width of each grid bin in kilometres. Leave at 0 to size the bins from "
                 "'Bins per side' instead; a positive width takes precedence.", min=0.0, max=20000.0)
P_BINS_PER_SIDE = Param("bins_per_side", int, 32, "Bins per side",
                        "Used when the bin width is 0: the longer side of the box is cut into this "
                        "many bins (w = longer side / bins).", min=1, max=4096)

BOUNDED_GRID = MechanismSpec(
    needs_points=True,
    name="bounded_grid", label="Uniform grid, bounded DP (baseline)",
    description="One equi-width grid with discrete Laplace noise of scale 2/ε per cell: the "
                "shifted grids' baseline (Fang & Chang 2014, sec. 5.4.2). Standard DP with "
                "bounded (replace-one) neighbours.",
    guarantee="ε-differential privacy for replacing one point (bounded neighbours, standard DP): "
              "replacing one person's location by any other location in the box changes output "
              "probabilities by at most a factor of e^ε. The dataset size is public under this "
              "relation (the guarantee compares datasets of equal size, so no budget is spent on "
              "it), but the release never states it. Adding or removing one point changes one "
              "cell by 1, which this noise covers at ε/2. Points outside the box are clamped to "
              "its edge, never dropped.",
    unit=REPLACE_POINT,
    params=(P_BIN_KM, P_BINS_PER_SIDE),
    release=release_bounded_grid)
