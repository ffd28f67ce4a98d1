"""RegionData: one convex region per user (the private input of the Euler histogram), and the
regions built from each user's points (spec 004); the file loader is `dp.io.region_files`.

Regions are stored as shapely geometries in lon/lat. Every region is convex (the loader takes
convex hulls); a user whose points are all equal or collinear has a zero-area region (a Point
or LineString) that the Euler build buffers by 1e-6 of a cell (spec 004 section 3.2).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

import numpy as np
import shapely

from .domain import EARTH_RADIUS_M, Domain
from .errors import DataError
from .convex import ConvexBodies, diameters
from .mechanisms.euler.build import euler_build, prepare_bodies
from .mechanisms.euler.grid import EulerGrid
from .noise import make_rng
from .points import LoadReport, PointData
from .queries import Rect, as_rect_array

DEFAULT_BOUND_KM = 2.0     # B of the paper's experiments
DEFAULT_KNN = 5760         # k nearest points to the mode: GeoLife's "8 hours" at 5 s sampling
KDE_MAX = 10_000           # points per user the KDE is fitted on (spec 004 section 10.2)
M_PER_DEG = math.pi * EARTH_RADIUS_M / 180.0
KDE_CHUNK = 1 << 21
MEMO_WORKLOADS = 64

CHANGED_DEGENERATE = "zero-area regions (one point or collinear points) kept as a point or line"



@dataclass
class RegionLoadReport(LoadReport):
    """A LoadReport for regions: rows are features (GeoJSON) or points (CSV); `changed` counts
    regions the loader altered (hull, repair, clip), each with its reason."""

    unit: str = "features"
    regions: int = 0
    changed: dict = field(default_factory=dict)

    def summary(self) -> str:
        text = (f"{self.regions:,} user regions from {self.rows_loaded:,} of "
                f"{self.rows_read:,} {self.unit} ({self.source_format})")
        cols = ", ".join(f"{k}={v!r}" for k, v in self.columns.items())
        if cols:
            text += f" (columns: {cols})"
        if self.dropped:
            text += "; dropped: " + "; ".join(f"{n:,} {why}" for why, n in self.dropped.items())
        changed = {k: v for k, v in self.changed.items() if v}
        if changed:
            text += "; changed: " + "; ".join(f"{n:,} {why}" for why, n in changed.items())
        for note in self.notes:
            text += f"; {note}"
        return text


def _normalise(geoms):
    """Convex hulls of the given geometries (invalid ones made valid first)."""
    geoms = np.asarray(geoms, dtype=object)
    geoms = shapely.force_2d(geoms)
    bad = ~shapely.is_valid(geoms)
    if bad.any():
        geoms = geoms.copy()
        geoms[bad] = shapely.make_valid(geoms[bad])
    return shapely.convex_hull(geoms)


class RegionData:
    """Private user regions (one convex region per user) in lon/lat, owner side.

    `true_count(rect)` is the number of regions meeting the rectangle: positive-area overlap
    for regions with area, any contact for zero-area ones (the infinitesimal-buffer reading
    of spec 004 section 3.2). Mechanisms read the data through `euler_histogram(grid)`.
    """

    kind = "regions"     # which mechanisms apply (MechanismSpec.data_kind)
    raw_points = False   # regions, not points: point-only mechanisms and sessions do not apply

    def __init__(self, geoms, user=None, report: LoadReport | None = None, name: str = "regions"):
        geoms = _normalise(geoms)
        if len(geoms) and (shapely.is_empty(geoms).any() or
                           not np.isin(shapely.get_type_id(geoms), (0, 1, 3)).all()):
            raise DataError("regions must be non-empty polygons (or points/lines for zero-area "
                            "regions)")
        self.geoms = geoms
        self.user = None if user is None else np.asarray(user, dtype=object)
        self.report = report or RegionLoadReport("array", len(geoms), len(geoms),
                                                 regions=len(geoms))
        self.name = name
        self.bodies = ConvexBodies.from_geometries(geoms)
        self._fingerprint = None
        self._hists: dict = {}
        self._counts: dict = {}

    # ------------------------------------------------------------------- basics
    def __len__(self) -> int:
        return len(self.geoms)

    @property
    def n(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        return f"RegionData({self.name!r}, n={self.n:,})"

    @property
    def degenerate(self) -> np.ndarray:
        """Zero-area regions (points or segments)."""
        return self.bodies.degenerate.copy()

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        b = self.bodies.bounds
        return (float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()),
                float(b[:, 3].max())) if len(b) else (0.0, 0.0, 0.0, 0.0)

    @property
    def fingerprint(self) -> str:
        """Content hash used as a cache key (never shown to data consumers)."""
        if self._fingerprint is None:
            h = hashlib.blake2b(digest_size=12)
            h.update(self.bodies.coords.tobytes())
            h.update(self.bodies.count.tobytes())
            h.update(self.bodies.degenerate.tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def coordinates_fingerprint(self) -> str:
        """The key of the dataset's budget account: the geometries alone, as `fingerprint`
        (region fingerprints hold no user ids)."""
        return self.fingerprint

    # --------------------------------------------------------------- true counts
    def true_counts(self, rects, domain: Domain | None = None) -> np.ndarray:
        """Regions meeting each rectangle (clipped to the domain when one is given).
        NON-PRIVATE: for the data owner's comparison only."""
        r = as_rect_array(rects)
        key = (r.tobytes(), domain)
        if key in self._counts:
            return self._counts[key].copy()
        if domain is not None:
            r = r.copy()
            r[:, 0] = np.maximum(r[:, 0], domain.west)
            r[:, 1] = np.maximum(r[:, 1], domain.south)
            r[:, 2] = np.minimum(r[:, 2], domain.east)
            r[:, 3] = np.minimum(r[:, 3], domain.north)
        out = np.zeros(len(r), np.int64)
        for q in range(len(r)):   # one vectorised test over all regions per rectangle
            if r[q, 0] <= r[q, 2] and r[q, 1] <= r[q, 3]:
                out[q] = int(self.bodies.touch_rect(r[q]).sum())
        if len(self._counts) >= MEMO_WORKLOADS:
            self._counts.pop(next(iter(self._counts)), None)
        self._counts[key] = out
        return out.copy()

    def true_count(self, rect: Rect, domain: Domain | None = None) -> int:
        """Regions meeting one rectangle. NON-PRIVATE: for the data owner only."""
        return int(self.true_counts(rect, domain)[0])

    def true_contained_counts(self, rects) -> np.ndarray:
        """Regions lying inside each rectangle (closed), from the raw geometry only: the Euler
        histogram cannot answer this (spec 004 section 3.3). NON-PRIVATE."""
        r = as_rect_array(rects)
        b = self.bodies.bounds
        return np.array([int(((b[:, 0] >= q[0]) & (b[:, 1] >= q[1]) & (b[:, 2] <= q[2]) &
                              (b[:, 3] <= q[3])).sum()) for q in r], dtype=np.int64)

    def diameters_km(self) -> np.ndarray:
        """Each region's diameter in km (local metric projection). NON-PRIVATE."""
        return diameters_km(self.geoms)

    def in_domain(self, domain: Domain) -> np.ndarray:
        """Regions meeting the domain box."""
        return self.bodies.touch_rect(domain.bounds)

    def count_in(self, domain: Domain) -> int:
        """Regions meeting the domain box (what a release counts)."""
        return int(np.count_nonzero(self.in_domain(domain)))

    # ------------------------------------------------------------ Euler histogram
    def euler_histogram(self, grid: EulerGrid, with_stats: bool = False):
        """The exact Euler histogram G ((2n-1) x (2n-1) int64) on a public EulerGrid, after
        the per-region pre-processing (clip to the study square, clip to the bound B, the
        footprint guard). NON-PRIVATE; a fresh copy. With with_stats, also a dict saying how
        many regions each step changed."""
        key = grid.key()
        hit = self._hists.get(key)
        if hit is None:
            cells = grid.geometries_to_cells(self.geoms)
            prepared, _, stats = prepare_bodies(cells, grid.n, grid.bound_cells)
            G, bstats = euler_build(prepared, grid.n, k=grid.k, return_stats=True)
            stats.update(guard_clipped=bstats["guard_clipped"], counted=bstats["touching"])
            hit = (G, stats)
            if len(self._hists) >= 8:
                self._hists.pop(next(iter(self._hists)), None)
            self._hists[key] = hit
        G, stats = hit
        return (G.copy(), dict(stats)) if with_stats else G.copy()

    def euler_answers(self, grid: EulerGrid, rects, snap: str = "outward") -> np.ndarray:
        """Exact Euler answers (what the private stages estimate) on the snapped rectangles."""
        return grid.answer(self.euler_histogram(grid), rects, snap)

    # ------------------------------------------------------------------ display
    def sample(self, k: int, seed: int = 0) -> np.ndarray:
        """Up to k region geometries (lon/lat), for the owner-only map layer."""
        rng = make_rng(seed)
        idx = rng.choice(self.n, size=min(k, self.n), replace=False) if self.n else np.zeros(0, int)
        return self.geoms[np.sort(idx)]

    def to_geojson(self, limit: int | None = None, seed: int = 0) -> dict:
        """Owner-only FeatureCollection of (up to `limit`) regions; no user ids."""
        geoms = self.geoms if limit is None else self.sample(limit, seed)
        feats = [{"type": "Feature", "geometry": json.loads(s), "properties": {}}
                 for s in shapely.to_geojson(geoms)]
        return {"type": "FeatureCollection", "features": feats}

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_points(cls, points: PointData, *, bound_km: float = DEFAULT_BOUND_KM,
                    knn: int = DEFAULT_KNN, kde_max: int = KDE_MAX,
                    name: str | None = None) -> "RegionData":
        """One convex region per user from points with user ids (spec 004 section 10.2)."""
        if points.users is None:
            raise DataError("the points have no user ids; one region per user needs a user id "
                            "per point")
        return _regions_from_pointdata(points, bound_km, knn, kde_max, name or points.name,
                                       points.report)


# ------------------------------------------------------------- points -> regions
def _kde_modes(X, Y, start, count):
    """Index (into X) of each group's point with the highest Gaussian KDE density.

    Groups are contiguous runs [start, start+count). The kernel is scipy's gaussian_kde's:
    the group's covariance (ddof 1) times Scott's factor squared, m^(-1/3) in 2-D; a tiny ridge
    keeps equal or collinear points usable. Vectorised over groups of similar size.
    """
    U = len(start)
    mode = np.zeros(U, np.int64)
    cls = np.ceil(np.log2(np.maximum(count, 1))).astype(int)
    for c in np.unique(cls):
        ids = np.flatnonzero(cls == c)
        P = int(count[ids].max())
        step = max(1, KDE_CHUNK // (P * P))
        for i in range(0, len(ids), step):
            u = ids[i:i + step]
            cnt = count[u][:, None]
            pos = np.arange(P)[None, :]
            valid = pos < cnt
            gi = start[u][:, None] + np.minimum(pos, cnt - 1)
            px, py = X[gi], Y[gi]
            mx = (px * valid).sum(1, keepdims=True) / cnt
            my = (py * valid).sum(1, keepdims=True) / cnt
            cx, cy = (px - mx) * valid, (py - my) * valid
            dof = np.maximum(cnt[:, 0] - 1, 1)
            sxx, syy, sxy = (cx * cx).sum(1) / dof, (cy * cy).sum(1) / dof, (cx * cy).sum(1) / dof
            f2 = cnt[:, 0].astype(float) ** (-1.0 / 3.0)
            ridge = 1e-9 * (sxx + syy) + 1e-6
            a, b, d = sxx * f2 + ridge, sxy * f2, syy * f2 + ridge
            det = a * d - b * b
            ia, ib, idd = (d / det)[:, None], (-b / det)[:, None], (a / det)[:, None]
            dens = np.empty((len(u), P))
            rows = max(1, KDE_CHUNK // max(1, len(u) * P))
            for r0 in range(0, P, rows):   # row blocks keep a large user's (P x P) in check
                dx = px[:, r0:r0 + rows, None] - px[:, None, :]
                dy = py[:, r0:r0 + rows, None] - py[:, None, :]
                q = ia[:, :, None] * dx * dx + 2 * ib[:, :, None] * dx * dy + idd[:, :, None] * dy * dy
                dens[:, r0:r0 + rows] = (np.exp(-0.5 * q) * valid[:, None, :]).sum(2)
            dens[~valid] = -1.0
            mode[u] = gi[np.arange(len(u)), np.argmax(dens, axis=1)]
    return mode


def regions_from_points(lon, lat, user, *, bound_km: float = DEFAULT_BOUND_KM,
                        knn: int = DEFAULT_KNN, kde_max: int = KDE_MAX):
    """One convex region per user from GPS points (spec 004 section 10.2).

    Per user, in that user's own local metric projection (so a region depends on its user's
    points only): the KDE mode (the point of highest density, KDE fitted on at most kde_max
    evenly spaced points), the knn points nearest to it, those within B/2 of it (so the
    diameter is at most B), and their convex hull; one or collinear points give a Point or
    LineString. Returns (geometries, user ids, stats).
    """
    lon = np.asarray(lon, float)
    lat = np.asarray(lat, float)
    ids, codes = np.unique(np.asarray(user).astype(str), return_inverse=True)
    order = np.argsort(codes, kind="stable")
    lon, lat, codes = lon[order], lat[order], codes[order]
    U = len(ids)
    count = np.bincount(codes, minlength=U)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    lon0 = np.add.reduceat(lon, start) / count
    lat0 = np.add.reduceat(lat, start) / count
    mx = M_PER_DEG * np.cos(np.radians(lat0))
    X = (lon - lon0[codes]) * mx[codes]
    Y = (lat - lat0[codes]) * M_PER_DEG
    # KDE candidates: every point, or every s-th point of users with more than kde_max
    rank = np.arange(len(codes)) - start[codes]
    stride = np.maximum(1, -(-count // max(1, kde_max)))
    cand = np.flatnonzero(rank % stride[codes] == 0)
    ccount = np.bincount(codes[cand], minlength=U)
    cstart = np.concatenate([[0], np.cumsum(ccount)[:-1]])
    mode = cand[_kde_modes(X[cand], Y[cand], cstart, ccount)]
    dist = np.hypot(X - X[mode][codes], Y - Y[mode][codes])
    by = np.lexsort((dist, codes))
    near_rank = np.empty(len(codes), np.int64)
    near_rank[by] = np.arange(len(codes)) - start[codes[by]]
    in_knn = near_rank < knn
    in_b = dist <= bound_km * 500.0
    keep = in_knn & in_b
    keep[mode] = True
    pts = shapely.multipoints(np.column_stack([lon[keep], lat[keep]]), indices=codes[keep])
    hulls = shapely.convex_hull(pts)
    stats = {"points": int(len(codes)), "users": U,
             "beyond_knn": int((~in_knn).sum()), "outliers": int((in_knn & ~in_b).sum()),
             "degenerate": int((shapely.get_type_id(hulls) != 3).sum())}
    return hulls, ids.astype(object), stats


def _regions_from_pointdata(pts: PointData, bound_km, knn, kde_max, name, base: LoadReport):
    uid = np.asarray(pts.user).astype(str)
    has = np.char.str_len(np.char.strip(uid)) > 0
    dropped = dict(base.dropped)
    if (~has).any():
        dropped["points without a user id"] = int((~has).sum())
    if not has.any():
        raise DataError("no point has a user id; expected a user id on every point (one region "
                        "is built per user)")
    geoms, ids, st = regions_from_points(pts.x[has], pts.y[has], uid[has], bound_km=bound_km,
                                         knn=knn, kde_max=kde_max)
    report = RegionLoadReport(base.source_format, base.rows_read, int(has.sum()),
                              dict(base.columns), dropped, unit="points", regions=len(geoms))
    report.changed[CHANGED_DEGENERATE] = st["degenerate"]
    report.notes.append(f"regions built per user from the KDE mode, its {knn:,} nearest points "
                        f"and those within B/2 = {bound_km / 2:g} km of it, then the convex hull "
                        f"({st['outliers']:,} outlying points and {st['beyond_knn']:,} beyond the "
                        f"{knn:,} nearest left out)")
    return RegionData(geoms, ids, report, name=name)


def diameters_km(geoms) -> np.ndarray:
    """Each region's diameter in km, measured in its own local metric projection."""
    geoms = np.asarray(geoms, dtype=object)
    if not len(geoms):
        return np.zeros(0)
    c = shapely.centroid(geoms)
    cx, cy = shapely.get_x(c), shapely.get_y(c)
    sx = M_PER_DEG * np.cos(np.radians(cy))
    _, gi = shapely.get_coordinates(geoms, return_index=True)
    local = shapely.transform(geoms, lambda p: np.column_stack([(p[:, 0] - cx[gi]) * sx[gi],
                                                                (p[:, 1] - cy[gi]) * M_PER_DEG]))
    return diameters(local) / 1000.0


def clip_to_bound(geoms, bound_km: float):
    """Clip regions whose diameter exceeds B to the disc of diameter B about their centroid,
    each in its own local metric projection. Returns (geometries, number clipped)."""
    geoms = np.asarray(geoms, dtype=object).copy()
    b = shapely.bounds(geoms)
    midlat = (b[:, 1] + b[:, 3]) / 2
    diag = np.hypot((b[:, 2] - b[:, 0]) * M_PER_DEG * np.cos(np.radians(midlat)),
                    (b[:, 3] - b[:, 1]) * M_PER_DEG)
    cand = np.flatnonzero(diag > bound_km * 1000.0)
    if not len(cand):
        return geoms, 0
    g = geoms[cand]
    c = shapely.centroid(g)
    cx, cy = shapely.get_x(c), shapely.get_y(c)
    sx = M_PER_DEG * np.cos(np.radians(cy))

    def to_local(gs):
        _, gi = shapely.get_coordinates(gs, return_index=True)
        return shapely.transform(gs, lambda p: np.column_stack([(p[:, 0] - cx[gi]) * sx[gi],
                                                                (p[:, 1] - cy[gi]) * M_PER_DEG]))

    local = to_local(g)
    big = diameters(local) > bound_km * 1000.0 * (1 + 1e-12)
    if not big.any():
        return geoms, 0
    disc = shapely.buffer(shapely.points(np.zeros((int(big.sum()), 2))),
                          bound_km * 500.0 * (1 - 1e-9), quad_segs=16)
    clipped = local.copy()
    clipped[big] = shapely.convex_hull(shapely.intersection(local[big], disc))
    _, gi = shapely.get_coordinates(clipped, return_index=True)
    back = shapely.transform(clipped, lambda p: np.column_stack([p[:, 0] / sx[gi] + cx[gi],
                                                                 p[:, 1] / M_PER_DEG + cy[gi]]))
    geoms[cand[big]] = back[big]
    return geoms, int(big.sum())
