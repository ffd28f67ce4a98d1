"""`dp.summed_area`: the one bilinear summed-area lookup every answer path uses (grids, leaf
releases, shifted grids, saved counts). Checked against the direct formula of spec 000 A2,
Σ_j Σ_k ay_j H_jk ax_k, the dense rectangle x cell product grid answers used to be."""
from __future__ import annotations

import numpy as np
import pytest

import dp
from dp.queries import grid_answers, overlap_vectors
from dp.summed_area import integral, rect_integrals, summed_area


def dense(grid, H, rects) -> np.ndarray:
    ay, ax = overlap_vectors(grid, rects)
    return np.einsum("qj,qj->q", ay @ H, ax)


@pytest.mark.parametrize("gx,gy", [(1, 1), (7, 3), (64, 64), (200, 5)])
def test_grid_answers_are_the_spec_formula(gx, gy):
    rng = np.random.default_rng(gx * 1000 + gy)
    box = dp.Domain(-1.0, 10.0, 3.0, 12.0)
    grid = dp.UniformGrid(box, gx, gy)
    H = rng.normal(50, 30, (gy, gx)).round()                      # noisy counts, some negative
    x = rng.uniform(-2, 4, (500, 2))                              # inside, outside, across the box
    y = rng.uniform(9, 13, (500, 2))
    rects = np.column_stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]])  # a quarter inverted: empty
    rects[:5] = [box.west, box.south, box.east, box.north]        # the whole box: the total
    got, want = grid_answers(grid, H, rects), dense(grid, H, rects)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9 * np.abs(H).sum())
    assert got[0] == pytest.approx(H.sum())
    assert grid_answers(grid, H, np.zeros((0, 4))).shape == (0,)


def test_the_integral_is_exact_at_cell_corners_and_bilinear_inside():
    H = np.array([[1.0, 2.0], [3.0, 4.0]])
    S = summed_area(H)
    assert integral(S, 2, 2) == 10 and integral(S, 1, 1) == 1 and integral(S, 2, 1) == 3
    assert integral(S, 0.5, 0.5) == pytest.approx(0.25)           # a quarter of cell (0, 0)
    assert integral(S, 1.5, 2) == pytest.approx(1 + 3 + 0.5 * (2 + 4))
    assert rect_integrals(S, [[0.5, 0.5, 1.5, 1.5]])[0] == pytest.approx(0.25 * 10)
