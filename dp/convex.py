"""Convex bodies in the plane and their vectorised touch tests against axis-aligned boxes.
Pure geometry, no mechanism: the Euler build and RegionData's true counts share one "touch"."""
from __future__ import annotations

import numpy as np
import shapely

RHO = 1e-6            # buffer of zero-area bodies, in cells (rho = 1e-6 d, spec 004 section 3.2)
CHUNK = 1 << 21       # elements per vectorised block of the face-touch test


class ConvexBodies:
    """Convex bodies as ragged vertex rings (no closing vertex), for vectorised tests.

    `touch_*` use the separating-axis theorem: the interiors of two convex polygons are
    disjoint iff one of their edge normals separates them, so a body meets an axis-aligned box
    iff the bounding boxes overlap and no edge normal of the body separates it from the box.
    Points and segments ("degenerate") are tested as closed sets.
    """

    def __init__(self, coords, start, count, degenerate, geoms=None):
        self.coords = np.asarray(coords, float).reshape(-1, 2)
        self.start = np.asarray(start, np.int64)
        self.count = np.asarray(count, np.int64)
        self.degenerate = np.asarray(degenerate, bool)
        self.geoms = geoms
        n = len(self.count)
        if n and self.count.min() < 1:
            raise ValueError("every body needs at least one vertex")
        if n:
            lo = np.minimum.reduceat(self.coords, self.start, axis=0)
            hi = np.maximum.reduceat(self.coords, self.start, axis=0)
            self.bounds = np.column_stack([lo, hi])
            body = np.repeat(np.arange(n), self.count)
            nxt = np.arange(len(self.coords)) + 1
            last = self.start + self.count - 1
            nxt[last] = self.start
            a, b = self.coords, self.coords[nxt]
            o = self.coords[self.start][body]
            cross = (a[:, 0] - o[:, 0]) * (b[:, 1] - o[:, 1]) - (b[:, 0] - o[:, 0]) * (a[:, 1] - o[:, 1])
            self.area2 = np.bincount(body, cross, minlength=n)
        else:
            self.bounds = np.zeros((0, 4))
            self.area2 = np.zeros(0)
        self.orient = np.where(self.area2 < 0, -1.0, 1.0)

    def __len__(self):
        return len(self.count)

    @classmethod
    def from_geometries(cls, geoms) -> "ConvexBodies":
        """From shapely Polygons (convex), LineStrings and Points; zero-area polygons count as
        degenerate. Other types raise ValueError."""
        geoms = np.asarray(geoms, dtype=object)
        n = len(geoms)
        if n == 0:
            return cls(np.zeros((0, 2)), np.zeros(0, int), np.zeros(0, int), np.zeros(0, bool), geoms)
        tid = shapely.get_type_id(geoms)
        if np.any(~np.isin(tid, (0, 1, 3))) or np.any(shapely.is_empty(geoms)):
            raise ValueError("convex bodies must be non-empty Polygons, LineStrings or Points")
        poly = tid == 3
        parts = geoms.copy()
        parts[poly] = shapely.get_exterior_ring(geoms[poly])
        coords, idx = shapely.get_coordinates(parts, return_index=True)
        cnt = np.bincount(idx, minlength=n)
        first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        pos = np.arange(len(idx)) - first[idx]
        keep = ~(poly[idx] & (pos == cnt[idx] - 1))      # drop each ring's closing vertex
        coords, idx = coords[keep], idx[keep]
        cnt = np.bincount(idx, minlength=n)
        start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        out = cls(coords, start, cnt, ~poly, geoms)
        out.degenerate |= out.area2 == 0
        return out

    def subset(self, idx) -> "ConvexBodies":
        idx = np.asarray(idx, np.int64)
        cnt = self.count[idx]
        start = np.concatenate([[0], np.cumsum(cnt)[:-1]]).astype(np.int64)
        flat = np.repeat(self.start[idx] - start, cnt) + np.arange(cnt.sum())
        return ConvexBodies(self.coords[flat], start, cnt, self.degenerate[idx],
                            None if self.geoms is None else self.geoms[idx])

    def edges(self, idx):
        """Outward edge normals (nx, ny), offsets h (relative to each body's first vertex, o)
        and a validity mask, padded to the largest vertex count among `idx`."""
        cnt = self.count[idx]
        V = int(cnt.max()) if len(cnt) else 1
        pos = np.arange(V)[None, :]
        st = self.start[idx][:, None]
        c = cnt[:, None]
        a = self.coords[st + np.minimum(pos, c - 1)]
        b = self.coords[st + np.where(pos + 1 < c, pos + 1, 0)]
        o = self.coords[self.start[idx]]
        ex, ey = b[..., 0] - a[..., 0], b[..., 1] - a[..., 1]
        valid = (pos < c) & ((ex != 0) | (ey != 0))
        s = self.orient[idx][:, None]
        nx, ny = ey * s, -ex * s
        h = nx * (a[..., 0] - o[:, None, 0]) + ny * (a[..., 1] - o[:, None, 1])
        return nx, ny, h, valid, o

    def touch_rect(self, rect, idx=None) -> np.ndarray:
        """Bool per body (of idx): the body meets the rectangle [w, s, e, n] (open semantics
        for bodies with area, closed for points and segments)."""
        w, s, e, n = (float(v) for v in rect)
        idx = np.arange(len(self)) if idx is None else np.asarray(idx, np.int64)
        bx = self.bounds[idx]
        deg = self.degenerate[idx]
        cand = np.where(deg, (bx[:, 0] <= e) & (bx[:, 2] >= w) & (bx[:, 1] <= n) & (bx[:, 3] >= s),
                        (bx[:, 0] < e) & (bx[:, 2] > w) & (bx[:, 1] < n) & (bx[:, 3] > s))
        out = np.zeros(len(idx), bool)
        ci = np.flatnonzero(cand)
        for part in np.array_split(ci, max(1, len(ci) // 20000)):
            if not len(part):
                continue
            nx, ny, h, valid, o = self.edges(idx[part])
            mb = nx * (np.where(nx > 0, w, e) - o[:, None, 0]) + \
                ny * (np.where(ny > 0, s, n) - o[:, None, 1])
            closed = deg[part][:, None]
            sep = np.where(closed, mb > h, mb >= h) & valid
            out[part] = ~sep.any(axis=1)
        return out

    def cell_ranges(self, n: int, closed=False):
        """Candidate cells per body in grid units: rows r0..r1, columns c0..c1 (inclusive),
        clipped to the grid; open: cells whose interior meets the bounding box."""
        b = self.bounds
        if np.ndim(closed) == 0:
            closed = np.full(len(self), bool(closed))
        c0 = np.where(closed, np.ceil(b[:, 0]) - 1, np.floor(b[:, 0]))
        c1 = np.where(closed, np.floor(b[:, 2]), np.ceil(b[:, 2]) - 1)
        r0 = np.where(closed, np.ceil(b[:, 1]) - 1, np.floor(b[:, 1]))
        r1 = np.where(closed, np.floor(b[:, 3]), np.ceil(b[:, 3]) - 1)
        lim = lambda v: np.clip(v, -1, n).astype(np.int64)   # noqa: E731
        r0, r1, c0, c1 = (np.maximum(lim(r0), 0), np.minimum(lim(r1), n - 1),
                          np.maximum(lim(c0), 0), np.minimum(lim(c1), n - 1))
        return r0, r1, c0, c1

    def touch_blocks(self, n: int, closed: bool = False, idx=None):
        """Yield (body indices, r0, c0, T) with T[b, i, j] = body b touches face
        (r0[b]+i, c0[b]+j): the face-touch sets, vectorised per bounding-box block.

        Bodies are grouped by block shape and vertex-count class so each group is one
        (bodies x edges x rows x cols) array of at most CHUNK elements.
        """
        r0, r1, c0, c1 = self.cell_ranges(n, closed)
        hh, ww = r1 - r0 + 1, c1 - c0 + 1
        ok = (hh > 0) & (ww > 0)
        if idx is not None:
            m = np.zeros(len(self), bool)
            m[idx] = True
            ok &= m
        ids = np.flatnonzero(ok)
        if not len(ids):
            return
        vclass = np.ceil(np.log2(np.maximum(self.count[ids], 1))).astype(np.int64)
        key = (hh[ids] * (n + 1) + ww[ids]) * 64 + vclass
        order = np.argsort(key, kind="stable")
        ids, key = ids[order], key[order]
        bounds = np.flatnonzero(np.diff(key)) + 1
        for grp in np.split(ids, bounds):
            h, w = int(hh[grp[0]]), int(ww[grp[0]])
            V = int(self.count[grp].max())
            step = max(1, CHUNK // (h * w * V))
            for i in range(0, len(grp), step):
                b = grp[i:i + step]
                nx, ny, hv, valid, o = self.edges(b)
                cols = c0[b][:, None] + np.arange(w)[None, :] - o[:, 0:1]     # (B, w)
                rows = r0[b][:, None] + np.arange(h)[None, :] - o[:, 1:2]     # (B, h)
                X = nx[..., None] * cols[:, None, :] + np.minimum(nx, 0)[..., None]
                Y = ny[..., None] * rows[:, None, :] + np.minimum(ny, 0)[..., None]
                mb = Y[..., :, None] + X[..., None, :]                        # (B, V, h, w)
                hv4 = hv[..., None, None]
                sep = (mb > hv4) if closed else (mb >= hv4)
                sep &= valid[..., None, None]
                yield b, r0[b], c0[b], ~sep.any(axis=1)


def as_geoms(bodies):
    """The shapely geometries of a ConvexBodies, or the given geometries as an object array."""
    if isinstance(bodies, ConvexBodies):
        return bodies.geoms
    return np.asarray(bodies, dtype=object)


def buffer_degenerate(geoms):
    """Zero-area bodies buffered by rho = 1e-6 d (grid units; spec 004 section 3.2).
    Returns (geometries, the mask of buffered ones)."""
    geoms = np.asarray(geoms, dtype=object).copy()
    if not len(geoms):
        return geoms, np.zeros(0, bool)
    deg = (shapely.get_type_id(geoms) != 3) | (shapely.area(geoms) == 0)
    if deg.any():
        geoms[deg] = shapely.buffer(geoms[deg], RHO, quad_segs=2)
    return geoms, deg


def is_axis_rect(cb: ConvexBodies) -> np.ndarray:
    """Bodies that are axis-aligned rectangles with positive area (the fast path)."""
    out = np.zeros(len(cb), bool)
    four = np.flatnonzero((cb.count == 4) & ~cb.degenerate)
    if not len(four):
        return out
    v = cb.coords[cb.start[four][:, None] + np.arange(4)]
    bx = cb.bounds[four]
    onx = (v[..., 0] == bx[:, None, 0]) | (v[..., 0] == bx[:, None, 2])
    ony = (v[..., 1] == bx[:, None, 1]) | (v[..., 1] == bx[:, None, 3])
    out[four] = onx.all(1) & ony.all(1) & (bx[:, 2] > bx[:, 0]) & (bx[:, 3] > bx[:, 1])
    return out


def diameters(geoms) -> np.ndarray:
    """Exact diameters (largest vertex-to-vertex distance) of polygons."""
    cb = ConvexBodies.from_geometries(geoms)
    out = np.zeros(len(cb))
    vclass = np.ceil(np.log2(np.maximum(cb.count, 1))).astype(int)
    for vc in np.unique(vclass):
        ids = np.flatnonzero(vclass == vc)
        V = int(cb.count[ids].max())
        step = max(1, CHUNK // (V * V))
        for i in range(0, len(ids), step):
            b = ids[i:i + step]
            P = cb.coords[cb.start[b][:, None] + np.minimum(np.arange(V), cb.count[b][:, None] - 1)]
            d2 = ((P[:, :, None, :] - P[:, None, :, :]) ** 2).sum(-1)
            out[b] = np.sqrt(d2.max(axis=(1, 2)))
    return out
