"""The Euler mechanism: DiffPriv, the immutable EulerRelease and its stages, plan/explain and
the EULER spec; the one module that draws noise and charges the ledger (spec 004 4, 7)."""
from __future__ import annotations

import copy
import importlib
import time

import numpy as np

from ...budget import Ledger
from ...domain import Domain
from ...errors import ParameterError
from ...noise import discrete_laplace_variance
from ...queries import Rect, random_workload
from ..base import USER_REGION, Capabilities, MechanismSpec, Param, Release
from .consistency import split_components, violations
from .grid import MAX_CELLS, NEIGHBOURS, EulerGrid, constraint_counts, make_grid, sensitivity
from .queries import answer_cells, signed_prefix

STAGES = ("diffpriv", "linprog", "round")
STAGE_LABELS = {"exact": "Euler (exact, not private)", "diffpriv": "DiffPriv",
                "linprog": "LinProg", "round": "Round"}


# ----------------------------------------------------------------------- the public plan

def plan(domain: Domain, params: dict | None = None, epsilon: float | None = None) -> dict:
    """Everything public about an Euler release before it runs (no data is read).

    Returns n, d, A, B, k, the sensitivity Δ (and Lemma 2's value), the discrete Laplace scale
    Δ/ε when epsilon is given, the histogram and LP sizes, and notes for the user.
    """
    p = EULER.resolve_params(params)
    g = make_grid(domain, p["cells"], p["cell_km"], p["bound_km"])
    delta = sensitivity(p["bound_km"], g.cell_km, neighbour=p["neighbour"],
                        variant=p["sensitivity"])
    n = g.n
    cc = constraint_counts(n) if p["include_c3"] else {**constraint_counts(n), "C3": 0}
    m = (2 * n - 1) ** 2
    out = {
        "cells_per_side": n, "cell_km": g.cell_km, "side_km": g.side_km,
        "bound_km": p["bound_km"], "k": g.k, "sensitivity": delta,
        "sensitivity_tight": sensitivity(p["bound_km"], g.cell_km, neighbour=p["neighbour"]),
        "sensitivity_lemma2": sensitivity(p["bound_km"], g.cell_km, neighbour=p["neighbour"],
                                          variant="lemma2"),
        "neighbour": p["neighbour"], "components": m,
        "faces": n * n, "edges": 2 * n * (n - 1), "vertices": (n - 1) ** 2,
        "constraints": cc, "lp_variables": 2 * m if p["norm"] == "l1" else m + 1,
        "lp_rows": 2 * m + sum(cc.values()), "square": g.square.to_dict(),
        "notes": [],
    }
    if epsilon is not None:
        out["epsilon"] = float(epsilon)
        out["scale"] = delta / float(epsilon)
    w_m, h_m = domain.size_m()
    if abs(w_m - h_m) > 1e-6 * max(w_m, h_m) or g.side_km * 1000 < min(w_m, h_m) * (1 - 1e-9):
        out["notes"].append(f"the study square ({g.side_km:.3f} km) is centred in the domain "
                            f"({w_m / 1000:.3f} x {h_m / 1000:.3f} km); regions outside it are "
                            "not counted")
    if p["neighbour"] == "replace":
        out["notes"].append("replace-one neighbours: Δ doubled")
    if g.k >= 6:
        out["notes"].append(f"k = {g.k}: Δ grows as (2B/d)^2; a coarser d or a smaller B "
                            "lowers the noise (spec pitfall 19)")
    return out


def explain(domain: Domain, params: dict, epsilon: float) -> str:
    """k, the sensitivity and the noise scale the app shows before release (no data read)."""
    p = plan(domain, params, epsilon)
    text = (f"{p['cells_per_side']}×{p['cells_per_side']} cells of {p['cell_km']:.3g} km; "
            f"k = ⌈B/d⌉ = {p['k']}; sensitivity Δ = {p['sensitivity']:g}; discrete Laplace scale "
            f"Δ/ε = {p['scale']:.3g} on each of {p['components']:,} counts")
    return "; ".join([text] + p["notes"])


def _read_only(a: np.ndarray) -> np.ndarray:
    """`a`, marked read-only: stage values are shared between releases and never change."""
    a.setflags(write=False)
    return a


def _post_processing():
    """LinProg and Round as the package `dp.mechanisms.euler` exports them, looked up when
    they run so that a caller (e.g. a test of the failure path) can substitute the solver."""
    pkg = importlib.import_module(__package__)
    return pkg.linprog_lad, pkg.round_consistent


# ----------------------------------------------------------------- DiffPriv (Alg. 2)
def diffpriv(H, epsilon: float, delta: float, rng, *, ledger: Ledger, truncate: bool = True,
             note: str = "") -> np.ndarray:
    """H + discrete Laplace(Δ/ε) on every component (including zeros), negatives truncated to 0,
    charged to `ledger` in the same call (before the draw).

    H holds integer counts and the noise is integer, so no low bits of a double carry the counts.
    """
    H = np.asarray(H)
    if not np.array_equal(np.rint(H), H):
        raise ParameterError("DiffPriv needs whole-number counts")
    noisy = ledger.noisy_counts(rng, H, epsilon, "noisy Euler histogram (faces, edges, vertices)",
                                sensitivity=delta, note=note)
    return np.maximum(noisy, 0) if truncate else noisy


# -------------------------------------------------------------------------- release
NOISE_CHECK_AREA = 0.04     # rectangle size of the noise check behind `noise_warning`


class EulerRelease(Release):
    """A private Euler histogram with its three public stages.

    `answer(rect)` snaps the rectangle outward (or inward, by the `snap` parameter) and
    returns the selected stage's F - E + V clamped at 0; `answer_raw` keeps the sign. Only
    noisy, public values live here: the exact histogram belongs to the data
    (RegionData.euler_histogram).

    A release never changes once built (it is cached and shared): `with_stage` returns a new
    one. LinProg runs in one HiGHS call (scipy.optimize.linprog), which reports no progress of
    its own; `with_stage(stage, progress=...)` calls `progress(message, fraction)` at the stage
    boundaries, so a caller can show an indeterminate indicator and cache the returned release.
    """

    def __init__(self, spec, domain, epsilon, split, params, ledger, egrid: EulerGrid,
                 noisy, scale: float, delta: float, stage: str = "round", **kw):
        super().__init__(spec, domain, epsilon, split, params, ledger, **kw)
        self.egrid = egrid
        self.noise_scale = float(scale)
        self.sensitivity = delta
        # stage -> read-only doubled-grid values, and stage -> LinProg / Round run info; both
        # fixed once built (`with_stage` gives a new release with more stages)
        self._values = {"diffpriv": _read_only(np.array(noisy, np.float64))}
        self._info: dict = {}
        self._prefixes: dict = {}   # memo: signed prefix arrays of the held stages' values
        self._stage = stage

    # --------------------------------------------------------------- stages
    @property
    def stage(self) -> str:
        return self._stage

    @property
    def stages_computed(self) -> tuple:
        return tuple(s for s in STAGES if s in self._values)

    def _with_computed(self, stage: str, progress=None) -> tuple[dict, dict]:
        """(values, info) holding `stage`: this release's own dicts when it holds the stage,
        else new dicts with LinProg / Round run as needed. Never changes this release."""
        if stage not in STAGES:
            raise ParameterError(f"stage must be one of {list(STAGES)}, got {stage!r}")
        if stage in self._values:
            return self._values, self._info
        linprog_lad, round_consistent = _post_processing()
        values, info = dict(self._values), dict(self._info)
        if "linprog" not in values:      # stage is linprog or round
            H2, info["linprog"] = linprog_lad(values["diffpriv"],
                                              include_c3=self.params.get("include_c3", True),
                                              norm=self.params.get("norm", "l1"), progress=progress)
            values["linprog"] = _read_only(H2)
        if stage == "round":
            t0 = time.perf_counter()
            values["round"] = _read_only(round_consistent(values["linprog"]))
            info["round"] = {"seconds": time.perf_counter() - t0}
        return values, info

    def compute(self, stage: str, progress=None) -> np.ndarray:
        """The stage's doubled-grid values (read-only). LinProg and Round are post-processing
        of DiffPriv's output, so they spend no budget; a stage this release does not hold is
        computed afresh on each call and not kept: `with_stage` returns a release keeping it."""
        values, _ = self._with_computed(stage, progress)
        return values[stage]

    def with_stage(self, stage: str, progress=None) -> "EulerRelease":
        """A new release answering from `stage`, holding every stage this one holds plus those
        computed for it (the arrays are shared). This release is left unchanged: it may be
        cached and shared between requests."""
        values, info = self._with_computed(stage, progress)
        other = copy.copy(self)
        other._values, other._info = dict(values), dict(info)
        other._prefixes = dict(self._prefixes)
        other._stage = stage
        other.params = {**self.params, "stage": stage}
        return other

    def values(self, stage: str | None = None) -> np.ndarray:
        return self.compute(stage or self._stage)

    def stage_info(self, stage: str | None = None) -> dict:
        return dict(self._info.get(stage or self._stage, {}))

    def _prefix(self, stage=None):
        stage = stage or self._stage
        P = self._prefixes.get(stage)
        if P is None:
            P = signed_prefix(self.compute(stage))
            if stage in self._values:    # memo only what derives from this release's own values
                self._prefixes[stage] = P
        return P

    def violations(self, stage: str | None = None) -> dict:
        return violations(self.compute(stage or self._stage))

    def violation_table(self) -> dict:
        """{stage: {C1, C2, C3, total, rows}} for every computed stage."""
        rows = constraint_counts(self.egrid.n)
        out = {}
        for s in self.stages_computed:
            v = self.violations(s)
            out[s] = {**v, "total": sum(v.values()), "rows": rows}
        return out

    # -------------------------------------------------------------- queries
    def snap_cells(self, rects) -> np.ndarray:
        return self.egrid.snap_cells(rects, self.params.get("snap", "outward"))

    def snap(self, rect: Rect) -> Rect | None:
        """The rectangle actually answered: the union of cells it snaps to (None off-grid)."""
        return self.egrid.snap(rect, self.params.get("snap", "outward"))

    def answer_raw_many(self, rects, stage: str | None = None) -> np.ndarray:
        return answer_cells(self._prefix(stage), self.snap_cells(rects)).astype(np.float64)

    def answer_raw(self, rect: Rect, stage: str | None = None) -> float:
        """F - E + V of the stage on the snapped rectangle, before clamping (diagnostics)."""
        return float(self.answer_raw_many(rect, stage)[0])

    def answer_many(self, rects) -> np.ndarray:
        """Private answers on the snapped rectangles, clamped at 0 (spec pitfall 6)."""
        return np.maximum(self.answer_raw_many(rects), 0.0)

    def answer_cells(self, cells, stage: str | None = None) -> np.ndarray:
        """Raw answers for cell ranges [r0, r1, c0, c1] (inclusive)."""
        return answer_cells(self._prefix(stage), cells).astype(np.float64)

    def noise_variance(self, rects) -> np.ndarray:
        """DiffPriv's noise variance before truncation: V(λ)·(2p-1)(2q-1), V the discrete Laplace
        variance (section 4.2 gives 2λ², the continuous value, an upper bound on V). LinProg and
        Round are fitted to those noisy counts, so they report the same variance: the noise they
        were fitted from (on the built-in sample their answers stayed inside its 95% interval,
        tests/test_euler.py)."""
        c = self.snap_cells(rects)
        p = c[:, 1] - c[:, 0] + 1
        q = c[:, 3] - c[:, 2] + 1
        v = discrete_laplace_variance(self.noise_scale)
        return np.where(c[:, 0] >= 0, v * (2 * p - 1) * (2 * q - 1), 0.0)

    def noise_terms(self, rect: Rect):
        """DiffPriv's answer noise is a signed sum of (2p-1)(2q-1) discrete Laplace(λ) draws."""
        r0, r1, c0, c1 = self.snap_cells(rect)[0]
        terms = 0 if r0 < 0 else (2 * (r1 - r0) + 1) * (2 * (c1 - c0) + 1)
        return np.ones(terms), self.noise_scale

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(stages=STAGES, stage=self._stage, snapping=True, edges_layer=True)

    def describe(self) -> str:
        n = self.egrid.n
        return f"{n}×{n} Euler grid (faces, edges and vertices)"

    def warnings(self) -> list[str]:
        return [w for w in (self.sparse_warning, self.noise_warning) if w]

    @property
    def noise_warning(self) -> str | None:
        """Said when the noise of rectangles of 4% of the domain exceeds their typical released
        answer (a public workload; released values only, so it may be shown to anyone)."""
        rects = random_workload(self.domain, 100, area_frac=NOISE_CHECK_AREA, rng=0)
        half = 1.96 * np.sqrt(self.noise_variance(rects))
        typical = float(np.median(np.abs(self.answer_many(rects))))
        if np.median(half) <= typical:
            return None
        return (f"The noise dominates: for rectangles of {100 * NOISE_CHECK_AREA:g}% of the area "
                f"the 95% noise interval is about ±{np.median(half):,.0f} while answers are around "
                f"{typical:,.0f}. Raise ε, use larger cells or a smaller bound B.")

    # ------------------------------------------------------------ sparse data
    @property
    def mean_face(self) -> float:
        return float(self.values()[0::2, 0::2].mean())

    @property
    def sparse_data(self) -> bool:
        """Released average face count below λ (spec pitfall 9): answers are biased upward.

        Computed from the released stage only (post-processing), so it may be exported."""
        return self.mean_face < self.noise_scale

    @property
    def sparse_warning(self) -> str | None:
        if not self.sparse_data:
            return None
        return (f"Sparse data: the released average face count ({self.mean_face:.1f}) is below "
                f"the noise scale λ = {self.noise_scale:g}. Truncating noise at 0 and the LP "
                "push counts up here, so answers overestimate; use larger cells, a smaller "
                "bound B or a larger ε.")

    # ------------------------------------------------------------ structure
    def components(self, stage: str | None = None) -> dict:
        """faces (n, n), vertical edges (n, n-1), horizontal edges (n-1, n), vertices (n-1, n-1)."""
        return split_components(self.values(stage))

    def raster(self):
        return self.values()[0::2, 0::2].copy(), self.egrid.uniform_grid()

    def regions(self):
        n = self.egrid.n
        r, c = np.divmod(np.arange(n * n), n)
        return self.egrid.uniform_grid(), np.column_stack([r, r + 1, c, c + 1]), \
            self.values()[0::2, 0::2].ravel().copy()

    def edges_layer(self, stage: str | None = None):
        """(segments (K, 2, 2) of lon/lat end points, values (K,)) of all interior edges:
        vertical ones first (row-major), then horizontal ones."""
        n = self.egrid.n
        G = self.values(stage)
        r, c = np.divmod(np.arange(n * (n - 1)), n - 1) if n > 1 else (np.zeros(0, int),) * 2
        xv = c + 1                                    # vertical edge at x = c+1, y in [r, r+1]
        seg_v = np.stack([np.column_stack(self.egrid.to_lonlat(xv, r)),
                          np.column_stack(self.egrid.to_lonlat(xv, r + 1))], axis=1)
        rh, ch = np.divmod(np.arange((n - 1) * n), n) if n > 1 else (np.zeros(0, int),) * 2
        yh = rh + 1                                   # horizontal edge at y = r+1, x in [c, c+1]
        seg_h = np.stack([np.column_stack(self.egrid.to_lonlat(ch, yh)),
                          np.column_stack(self.egrid.to_lonlat(ch + 1, yh))], axis=1)
        vals = np.concatenate([G[0::2, 1::2].ravel(), G[1::2, 0::2].ravel()])
        return np.concatenate([seg_v.reshape(-1, 2, 2), seg_h.reshape(-1, 2, 2)]), vals

    def vertices_layer(self, stage: str | None = None):
        """(points (K, 2) lon/lat, values (K,)) of all interior vertices, row-major."""
        n = self.egrid.n
        r, c = np.divmod(np.arange((n - 1) ** 2), max(n - 1, 1))
        pts = np.column_stack(self.egrid.to_lonlat(c + 1, r + 1))
        return pts, self.values(stage)[1::2, 1::2].ravel().copy()

    # ------------------------------------------------------------- export
    def euler_metadata(self) -> dict:
        meta = {**self.egrid.to_dict(), "sensitivity": self.sensitivity,
                "scale": self.noise_scale, "neighbour": self.params.get("neighbour"),
                "stage": self._stage, "stages": list(self.stages_computed),
                "violations": self.violation_table(),
                "mean_face": self.mean_face, "sparse_warning": self.sparse_warning}
        lp = self._info.get("linprog")
        if lp:
            meta["linprog"] = {k: lp[k] for k in ("status", "objective", "rows", "variables",
                                                  "norm", "include_c3")}
        return meta

    def metadata(self) -> dict:
        meta = super().metadata()
        meta["euler"] = self.euler_metadata()
        return meta

    def to_geojson(self) -> dict:
        """Faces (Polygons), interior edges (LineStrings) and vertices (Points) with the
        selected stage's values, plus public metadata. Nothing here reads the raw data."""
        g = self.egrid
        n = g.n
        G = self.values()
        feats = []
        r, c = np.divmod(np.arange(n * n), n)
        (w, s), (e, nn) = g.to_lonlat(c, r), g.to_lonlat(c + 1, r + 1)
        for i, (ww, ss, ee, no, rr, cc) in enumerate(zip(w.tolist(), s.tolist(), e.tolist(),
                                                          nn.tolist(), r.tolist(), c.tolist())):
            feats.append({"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [
                [[ww, ss], [ee, ss], [ee, no], [ww, no], [ww, ss]]]},
                "properties": {"element": "face", "row": rr, "col": cc,
                               "i": 2 * rr, "j": 2 * cc, "count": float(G[2 * rr, 2 * cc])}})
        segs, vals = self.edges_layer()
        nv = n * (n - 1)
        for t, (sg, v) in enumerate(zip(segs.tolist(), vals.tolist())):
            if t < nv:
                rr, cc = divmod(t, n - 1)
                i, j = 2 * rr, 2 * cc + 1
            else:
                rr, cc = divmod(t - nv, n)
                i, j = 2 * rr + 1, 2 * cc
            feats.append({"type": "Feature", "geometry": {"type": "LineString", "coordinates": sg},
                          "properties": {"element": "edge", "i": i, "j": j, "count": v}})
        pts, vals = self.vertices_layer()
        for t, (pt, v) in enumerate(zip(pts.tolist(), vals.tolist())):
            rr, cc = divmod(t, n - 1)
            feats.append({"type": "Feature", "geometry": {"type": "Point", "coordinates": pt},
                          "properties": {"element": "vertex", "i": 2 * rr + 1, "j": 2 * cc + 1,
                                         "count": v}})
        return {"type": "FeatureCollection", "features": feats, "properties": self.metadata()}


# ------------------------------------------------------------------ the mechanism
def release_euler(data, domain, epsilon, split, params, rng):
    """Spec 004 section 7: exact Euler histogram -> DiffPriv (all ε) -> LinProg -> Round."""
    g = make_grid(domain, params["cells"], params["cell_km"], params["bound_km"])
    delta = sensitivity(g.bound_km, g.cell_km, neighbour=params["neighbour"],
                        variant=params["sensitivity"])
    eps = epsilon * split[0]
    scale = delta / eps
    H, prep = data.euler_histogram(g, with_stats=True)
    ledger = Ledger()
    noisy = diffpriv(H, eps, delta, rng, ledger=ledger,
                     note=f"{H.size} components on {g.n}x{g.n} cells, discrete Laplace(Δ/ε) on "
                          f"every one, k = {g.k}, Δ = {delta} ({params['neighbour']}); LinProg "
                          "and Round are post-processing")
    rel = EulerRelease(EULER, domain, epsilon, split, params, ledger, g, noisy, scale, delta,
                       stage=params["stage"], diagnostics={"preprocessing": prep})
    if params["stage"] != "diffpriv":
        try:
            rel = rel.with_stage(params["stage"])
        except RuntimeError as exc:     # post-processing failed after the draw: the spend stands,
            rel = rel.with_stage("diffpriv")      # so release DiffPriv's output rather than nothing
            rel.diagnostics = {**rel.diagnostics, "post_processing_failed": str(exc)}
    return rel


EULER = MechanismSpec(
    name="euler", label="Euler histogram (users' regions)",
    description="Counts the users whose region meets a rectangle without counting a region once "
                "per cell: discrete Laplace noise on every face, edge and vertex count of an "
                "Euler histogram, then a least-absolute-deviation LP and rounding make the "
                "counts consistent (Fanaeepour & Rubinstein). Rectangles snap to whole cells.",
    guarantee="ε-differential privacy for adding or removing one user's region (one region per "
              "user, clipped to the public bound B): the presence of any one user, and so the "
              "number of users, is protected; that number is neither used nor exported. With "
              "neighbour = replace, Δ is doubled and ε-DP also holds for replacing one user's "
              "region. Every count gets integer (discrete Laplace) noise; LinProg and Round are "
              "post-processing.",
    unit=USER_REGION,
    params=(
        Param("cells", int, 20, "Cells per side n",
              "n = A/d: the study square (the largest square centred in the domain) is cut into "
              "n x n cells. Ignored when a cell size d is given.", min=1, max=MAX_CELLS),
        Param("cell_km", float, 0.0, "Cell size d (km)",
              "0: d = A/n. Otherwise the square's side becomes n·d with n = floor(A/d), so A/d "
              "is an integer. Set d to the smallest query worth answering.", min=0.0, max=1e4),
        Param("bound_km", float, 2.0, "Region bound B (km)",
              "Public bound on each region's diameter; larger regions are clipped to a disc of "
              "diameter B. k = ceil(B/d) and Δ = (2k+1)².", min=1e-3, max=1e4),
        Param("neighbour", str, "add/remove", "Neighbouring datasets",
              "add/remove: one user's region added or removed (Δ); replace: one region replaced "
              "by another (2Δ).", choices=NEIGHBOURS),
        Param("sensitivity", str, "tight", "Sensitivity constant",
              "tight: (2k+1)², the paper's experiments; lemma2: 4.5·k(k+1), Lemma 2's bound.",
              choices=("tight", "lemma2")),
        Param("stage", str, "round", "Answer from stage",
              "diffpriv: noisy counts; linprog: consistent LP fit; round: integer and "
              "consistent (covert). Later stages are free post-processing.", choices=STAGES),
        Param("include_c3", bool, True, "Include C3 in the LP",
              "C3 (2x2 Euler counts >= 0) is implied by C1 and H'' >= 0; dropping it gives the "
              "same optimum with a smaller LP."),
        Param("norm", str, "l1", "LP norm", "l1: least absolute deviations (the MLE under "
              "Laplace noise); linf: Program (3), for comparison.", choices=("l1", "linf")),
        Param("snap", str, "outward", "Snap rectangles",
              "outward: every cell the rectangle overlaps (the paper); inward: only cells "
              "inside it, outward when there are none.", choices=("outward", "inward")),
    ),
    data_kind="regions",
    release=release_euler,
    explain=lambda domain, params, epsilon: explain(domain, params, epsilon))

SPECS = (EULER,)
