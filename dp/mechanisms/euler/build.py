"""The exact Euler histogram: body pre-processing, touch sets, footprint guard (spec 004 3.2, 7).
NON-PRIVATE and apart from the noise: RegionData builds it on the owner's side."""
from __future__ import annotations

import numpy as np
import shapely

from ...convex import ConvexBodies, as_geoms, buffer_degenerate, diameters, is_axis_rect
from ...errors import ParameterError

GUARD_NOTE = "footprint guard: clipped to the k+1 rows/columns with the largest area"


def derive(T) -> np.ndarray:
    """Doubled-grid footprint from face-touch masks (..., h, w) -> (..., 2h-1, 2w-1) (3.2)."""
    T = np.asarray(T, bool)
    h, w = T.shape[-2:]
    D = np.zeros(T.shape[:-2] + (2 * h - 1, 2 * w - 1), bool)
    D[..., 0::2, 0::2] = T
    D[..., 0::2, 1::2] = T[..., :, :-1] & T[..., :, 1:]
    D[..., 1::2, 0::2] = T[..., :-1, :] & T[..., 1:, :]
    D[..., 1::2, 1::2] = T[..., :-1, :-1] & T[..., 1:, :-1] & T[..., :-1, 1:] & T[..., 1:, 1:]
    return D


def _guard(T, r0, c0, k, geoms, b):
    """Footprint guard (3.2): a touch set spanning more than k+1 rows (columns) is cut to the
    k+1 consecutive rows (columns) where the body has the largest area, ties to the lower
    index. For open semantics the clipped body's touch set is T restricted to the window.
    Returns the number of bodies clipped."""
    m = k + 1
    rows_any, cols_any = T.any(axis=2), T.any(axis=1)

    def span(a):
        first = np.argmax(a, axis=1)
        last = a.shape[1] - 1 - np.argmax(a[:, ::-1], axis=1)
        return first, last - first + 1

    fr, sr = span(rows_any)
    fc, sc = span(cols_any)
    bad = np.flatnonzero((sr > m) | (sc > m))
    for i in bad:   # rare: only floating noise or buffered zero-area bodies get here
        g = geoms[b[i]]
        keep_r = np.zeros(T.shape[1], bool)
        keep_c = np.zeros(T.shape[2], bool)
        lo, hi = shapely.bounds(g)[[0, 2]]
        if sr[i] > m:
            starts = np.arange(fr[i], fr[i] + sr[i] - m + 1)
            wins = shapely.intersection(g, shapely.box(lo - 1, r0[i] + starts, hi + 1,
                                                       r0[i] + starts + m))
            score = shapely.area(wins) + 1e-12 * shapely.length(wins)
            j = int(starts[np.argmax(score)])
            keep_r[j:j + m] = True
            g = shapely.intersection(g, shapely.box(lo - 1, r0[i] + j, hi + 1, r0[i] + j + m))
        else:
            keep_r[:] = True
        if sc[i] > m:
            blo, bhi = shapely.bounds(g)[[1, 3]]
            starts = np.arange(fc[i], fc[i] + sc[i] - m + 1)
            wins = shapely.intersection(g, shapely.box(c0[i] + starts, blo - 1,
                                                       c0[i] + starts + m, bhi + 1))
            score = shapely.area(wins) + 1e-12 * shapely.length(wins)
            j = int(starts[np.argmax(score)])
            keep_c[j:j + m] = True
        else:
            keep_c[:] = True
        T[i] &= keep_r[:, None] & keep_c[None, :]
    return len(bad)


def face_masks(bodies, n: int, *, semantics: str = "open", k: int | None = None) -> np.ndarray:
    """(N, n, n) face-touch masks T(x) per body, in grid units (cells of side 1 from the
    origin). Zero-area bodies are buffered by rho under open semantics; with k the footprint
    guard is applied. For tests and small data; `euler_build` never materialises this."""
    geoms = as_geoms(bodies)
    if semantics == "open":
        geoms, _ = buffer_degenerate(geoms)
    cb = ConvexBodies.from_geometries(geoms)
    out = np.zeros((len(cb), n, n), bool)
    for b, r0, c0, T in cb.touch_blocks(n, closed=semantics == "closed"):
        if k is not None:
            _guard(T, r0, c0, k, cb.geoms, b)
        h, w = T.shape[1:]
        ii = r0[:, None] + np.arange(h)
        jj = c0[:, None] + np.arange(w)
        out[b[:, None, None], ii[:, :, None], jj[:, None, :]] = T
    return out


def euler_build(bodies, n: int, *, k: int | None = None, semantics: str = "open",
                return_stats: bool = False):
    """Exact Euler histogram G ((2n-1) x (2n-1) int64) of convex bodies in grid units.

    Algorithm 1 with the touch sets computed per body bounding box (vectorised), edges and
    vertices derived from faces, axis-aligned rectangles through a 2-D difference array, and
    the footprint guard when k is given. `bodies`: shapely geometries (convex Polygons,
    LineStrings, Points) in grid units, or a ConvexBodies with geometries.
    """
    if semantics not in ("open", "closed"):
        raise ParameterError(f"semantics must be 'open' or 'closed', got {semantics!r}")
    geoms = as_geoms(bodies)
    m = 2 * n - 1
    stats = {"bodies": int(len(geoms)), "guard_clipped": 0, "rectangles": 0, "touching": 0}
    if semantics == "open":
        geoms, deg = buffer_degenerate(geoms)
        stats["buffered"] = int(deg.sum())
    cb = ConvexBodies.from_geometries(geoms)
    flat = np.zeros(m * m, np.int64)
    r0, r1, c0, c1 = cb.cell_ranges(n, semantics == "closed")
    fast = is_axis_rect(cb) if semantics == "open" else np.zeros(len(cb), bool)
    fast &= (r1 >= r0) & (c1 >= c0)
    if k is not None:
        fast &= (r1 - r0 + 1 <= k + 1) & (c1 - c0 + 1 <= k + 1)
    if fast.any():   # difference array over the doubled grid, one cumsum
        diff = np.zeros((m + 1, m + 1), np.int64)
        a0, a1, b0, b1 = 2 * r0[fast], 2 * r1[fast] + 1, 2 * c0[fast], 2 * c1[fast] + 1
        np.add.at(diff, (a0, b0), 1)
        np.add.at(diff, (a0, b1), -1)
        np.add.at(diff, (a1, b0), -1)
        np.add.at(diff, (a1, b1), 1)
        flat += diff.cumsum(0).cumsum(1)[:m, :m].ravel()
        stats["rectangles"] = int(fast.sum())
        stats["touching"] += int(fast.sum())
    rest = np.flatnonzero(~fast)
    for b, br0, bc0, T in cb.touch_blocks(n, semantics == "closed", idx=rest):
        if k is not None:
            stats["guard_clipped"] += _guard(T, br0, bc0, k, cb.geoms, b)
        stats["touching"] += int(T.any(axis=(1, 2)).sum())
        D = derive(T)
        h2, w2 = D.shape[1:]
        ii = 2 * br0[:, None] + np.arange(h2)
        jj = 2 * bc0[:, None] + np.arange(w2)
        pos = ii[:, :, None] * m + jj[:, None, :]
        flat += np.bincount(pos[D], minlength=m * m)
    G = flat.reshape(m, m)
    return (G, stats) if return_stats else G


def prepare_bodies(geoms, n: int, bound_cells: float):
    """Per-record pre-processing of bodies in grid units (spec 004 section 7 steps 1-2).

    Zero-area bodies are buffered by rho; bodies are clipped to the study square [0, n]^2
    and dropped without a positive-area overlap; a body with diameter above B is clipped to
    the disc of diameter B about its centroid. Returns (geoms, kept index, stats).
    """
    geoms, deg = buffer_degenerate(geoms)
    stats = {"regions": int(len(geoms)), "zero_area_buffered": int(deg.sum())}
    if not len(geoms):
        stats.update(outside_square=0, clipped_to_square=0, clipped_to_bound=0)
        return geoms, np.zeros(0, np.int64), stats
    bx = shapely.bounds(geoms)
    out_sq = (bx[:, 0] < 0) | (bx[:, 1] < 0) | (bx[:, 2] > n) | (bx[:, 3] > n)
    if out_sq.any():
        geoms[out_sq] = shapely.clip_by_rect(geoms[out_sq], 0.0, 0.0, float(n), float(n))
    keep = shapely.area(geoms) > 0
    stats["outside_square"] = int((~keep).sum())
    stats["clipped_to_square"] = int((out_sq & keep).sum())
    idx = np.flatnonzero(keep)
    geoms = geoms[idx]
    multi = shapely.get_type_id(geoms) != 3     # clipping a convex body gives one polygon,
    if multi.any():                               # but rounding could split it: keep the hull
        geoms[multi] = shapely.convex_hull(geoms[multi])
    bx = shapely.bounds(geoms)
    diag = np.hypot(bx[:, 2] - bx[:, 0], bx[:, 3] - bx[:, 1])
    cand = np.flatnonzero(diag > bound_cells)
    clipped = 0
    if len(cand):
        too_big = cand[diameters(geoms[cand]) > bound_cells * (1 + 1e-12)]
        if len(too_big):
            disc = shapely.buffer(shapely.centroid(geoms[too_big]), bound_cells / 2 * (1 - 1e-9),
                                  quad_segs=16)
            geoms[too_big] = shapely.convex_hull(shapely.intersection(geoms[too_big], disc))
            clipped = len(too_big)
    stats["clipped_to_bound"] = clipped
    return geoms, idx, stats
