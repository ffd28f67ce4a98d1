"""The one interface every mechanism follows: a MechanismSpec and a Release."""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..budget import Ledger
from ..constraints import ListOf, Num, OneOf, check
from ..contributions import USER_LEVEL_GUARANTEE
from ..provenance import now
from ..domain import Domain, UniformGrid
from ..errors import ParameterError
from ..noise import discrete_laplace_variance
from ..queries import Rect, as_rect_array, grid_answers, overlap_vectors
from ..rect_features import RectFeatures
from ..summed_area import summed_area
from .half_width import kept_half_width


@dataclass(frozen=True)
class Param:
    """One user-facing mechanism parameter; the app builds its control from this."""

    name: str
    kind: type            # int, float, str, bool or list (a list of ints)
    default: Any
    label: str
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None

    def __post_init__(self):
        if self.choices is not None:          # plain values: numpy's would compare as numbers
            plain = tuple(getattr(c, "item", lambda c=c: c)() for c in self.choices)
            object.__setattr__(self, "choices", plain)

    def coerce(self, value):
        """Validate and convert a user value; raises ParameterError saying what is expected."""
        if value is None:
            return self.default
        convert = {list: self._as_list, bool: self._as_bool}.get(self.kind, self._as_scalar)
        try:
            v = convert(value)
        except ParameterError:   # already says what was expected (it is also a ValueError)
            raise
        except (TypeError, ValueError):
            raise ParameterError(f"{self.label}: expected {self.kind.__name__}, got {value!r}") from None
        if self.kind is not list:
            self._check_allowed(v)
        return v

    def _range(self) -> Num:
        """The numbers this parameter allows (`min`, `max`; whole for ints and lists)."""
        return Num(-math.inf if self.min is None else self.min, math.inf if self.max is None else self.max,
                   whole=self.kind in (int, list))

    def _as_list(self, value) -> list:
        """A list of ints, from a list or from text like "30, 40; 50": sorted, without repeats."""
        if isinstance(value, str):
            value = [v for v in value.replace(";", ",").split(",") if v.strip()]
        out = [int(float(v)) for v in value]
        if not out:
            raise ValueError
        check(self.label, out, ListOf(self._range(), max_items=math.inf))
        return sorted(set(out))

    @staticmethod
    def _as_bool(value) -> bool:
        """True/False from a bool, 0/1, or the text "true", "false", "1", "0"."""
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
            return value.strip().lower() in ("true", "1")
        if not isinstance(value, (bool, np.bool_)) and value not in (0, 1):
            raise ValueError
        return bool(value)

    def _as_scalar(self, value):
        """An int (whole values only), a finite float or a str."""
        v = self.kind(value)
        if self.kind is float and not np.isfinite(v):
            raise ValueError
        if self.kind is int and float(value) != int(float(value)):
            raise ValueError
        return v

    def _check_allowed(self, v) -> None:
        """Refuse a value outside the choices or the range, saying what is allowed."""
        if self.choices is not None:
            check(self.label, v, OneOf(self.choices))
        if self.kind in (int, float):
            check(self.label, v, self._range())


ADD_REMOVE_POINT = "add/remove one point"
REPLACE_POINT = "replace one point (the dataset size is public)"
MOVE_POINT = "move one point by at most δ"
USER_REGION = "add/remove one user's region"
NOT_PRIVATE = "none (not private)"
UNITS = (ADD_REMOVE_POINT, REPLACE_POINT, MOVE_POINT, USER_REGION, NOT_PRIVATE)
# units whose ε is the standard add/remove ε (of a point, or of a user's region)
STANDARD_UNITS = (ADD_REMOVE_POINT, USER_REGION, NOT_PRIVATE)
# point units and what each becomes for points with user ids (at most k points per user)
USER_LEVEL_UNITS = {
    ADD_REMOVE_POINT: "add/remove one user",
    REPLACE_POINT: "replace one user's points by as many others (the dataset size is public)",
    MOVE_POINT: "move each of one user's points by at most δ",
}


@dataclass(frozen=True)
class MechanismSpec:
    """Metadata of a mechanism: what the app shows and how the budget is split."""

    name: str
    label: str
    description: str
    guarantee: str
    params: tuple = ()
    budget_parts: tuple = ("counts",)
    default_split: tuple = (1.0,)
    data_kind: str = "points"
    # the neighbouring relation the guarantee is stated for: one of UNITS
    unit: str = "add/remove one point"
    private: bool = True   # False for experimental references that are NOT differentially private
    release: Callable | None = field(default=None, repr=False, compare=False)
    # optional (domain, params, epsilon) -> text shown next to the ε control before release
    explain: Callable | None = field(default=None, repr=False, compare=False)
    # True when the release takes a public workload of rectangles (`dp.release(..., workload=)`)
    workload_aware: bool = False
    # optional (domain, params, epsilon) -> the release's ε for adding or removing one point,
    # when its own ε is for another relation (shifted grids' δ-move); budget accounts charge it
    add_remove_epsilon: Callable | None = field(default=None, repr=False, compare=False)
    # True when the release reads each point's coordinates, so counts on a grid (dp.CountData,
    # from dp.aggregate) cannot feed it; False when it only reads histograms
    needs_points: bool = False
    # optional (domain, params) -> (columns, rows) of the finest histogram a release reads with
    # these public parameters, checked against counts before anything is charged or drawn;
    # grids sized from the data (a noisy N̂) are capped at the counts' resolution instead
    finest_grid: Callable | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"{self.name}: unit of privacy must be one of {UNITS}, got {self.unit!r}")

    @property
    def comparable(self) -> bool:
        """Whether this ε means what the standard add/remove ε means (follows from the unit):
        a δ-move or replace-one ε is not comparable with it at equal ε."""
        return self.unit in STANDARD_UNITS

    def resolve_params(self, params: dict | None) -> dict:
        params = dict(params or {})
        unknown = set(params) - {p.name for p in self.params}
        if unknown:
            raise ParameterError(f"{self.label} has no parameter(s) {sorted(unknown)}; "
                                 f"known: {[p.name for p in self.params]}")
        return {p.name: p.coerce(params.get(p.name)) for p in self.params}

    def resolve_split(self, split) -> tuple:
        """Fractions of epsilon per budget part, validated to be positive and sum to 1."""
        if split is None:
            return tuple(self.default_split)
        if isinstance(split, dict):
            missing = set(self.budget_parts) - set(split)
            if missing:
                raise ParameterError(f"split is missing parts {sorted(missing)}")
            split = [split[p] for p in self.budget_parts]
        try:
            split = tuple(float(s) for s in split)
        except (TypeError, ValueError):
            raise ParameterError(f"split must be {len(self.budget_parts)} numbers (fractions of "
                                 f"epsilon for {list(self.budget_parts)}), got {split!r}") from None
        if len(split) != len(self.budget_parts):
            raise ParameterError(f"{self.label} splits epsilon into {len(self.budget_parts)} parts "
                                 f"{list(self.budget_parts)}, got {len(split)} fractions")
        if any(not s > 0 for s in split) or not np.isclose(sum(split), 1.0, atol=1e-9):
            raise ParameterError(f"split fractions must be positive and sum to 1, got {split}")
        return split


@dataclass(frozen=True)
class Capabilities:
    """Optional features of a release, declared as data: the panels read these and never probe
    a release's type. A release offering one implements the method named beside it."""

    depths: int = 0          # > 0: a tree whose growth can be shown, `partition_at(depth)` for 0..depths
    grids: int = 0           # > 1: a series of grids, each drawable alone, `grid_regions(i)`
    stages: tuple = ()       # consistency stages, `with_stage(name)` returns the release at one
    stage: str | None = None  # the stage this release answers at (one of `stages`)
    snapping: bool = False   # answers are for the query snapped to the release's grid, `snap(rect)`
    budget_layer: bool = False  # per-region ε spent on the root-to-leaf path (`eps_path`)
    edges_layer: bool = False   # Euler edges and vertices can be drawn, `edges_layer()`


class Release(abc.ABC):
    """A mechanism's public output plus its ledger: every release answers rectangles, gives the
    noise's variance and interval, draws its regions, exports GeoJSON and describes itself in a
    line; optional features are declared in `capabilities`."""

    points_per_user: int | None = None   # k of a user-level release (set by restate_per_user)
    bounds_hold = False    # whether `bounds` may be given: set by __init__ (False for releases
    #                        pickled before it existed), cleared where its premise fails
    # per-leaf budgets some subclasses export next to their counts: privacy costs, so user-level
    BUDGET_ARRAYS = ("eps_path", "eps_final")

    clamps_into_box = False     # points outside the box were moved onto its edge (ranges'
    #                             lower ends then leave the edge regions out)
    requested_split = None      # the split asked for, set by dp.release (HTF may spend less)
    # why a mechanism that picks its method picked it, in words read off charged outputs only
    # (the adaptive mechanism's probe): private, so shown with the release (unlike diagnostics)
    choice = None

    def __init__(self, spec: MechanismSpec, domain: Domain, epsilon: float, split: tuple,
                 params: dict, ledger: Ledger, diagnostics: dict | None = None, noisy_size=None):
        self.spec = spec
        self.domain = domain
        self.epsilon = epsilon
        self.split = split
        self.params = params
        self.ledger = ledger
        self.diagnostics = diagnostics or {}   # NON-PRIVATE owner-only values; never exported
        self.noisy_size = noisy_size            # a released noisy dataset size (never the exact N)
        self.bounds_hold = True
        self.released_at = now()                # UTC, to the second: for the export's provenance

    @property
    def mechanism(self) -> str:
        return self.spec.name

    @property
    def private(self) -> bool:
        return self.spec.private and self.ledger.private and not self.domain.leaky

    @property
    def privacy_level(self) -> str:
        """Whom the guarantee protects: one user (at most k points), one point, or the unit."""
        if self.spec.unit not in USER_LEVEL_UNITS:
            return self.spec.unit
        if self.points_per_user is None:
            return f"event-level: {self.spec.unit}"
        return (f"user-level: {USER_LEVEL_UNITS[self.spec.unit]}, at most {self.points_per_user} "
                "points per user")

    def restate_per_user(self, k: int, epsilon: float) -> None:
        """Group privacy: a release run at epsilon/k on at most k points per user is epsilon-DP
        per user; restate ε, ledger and per-leaf budgets so. Noise, intervals, variances stay."""
        self.points_per_user = k
        self.epsilon = epsilon
        self.ledger.restate_per_group(k)
        for name in self.BUDGET_ARRAYS:
            if getattr(self, name, None) is not None:
                setattr(self, name, getattr(self, name) * k)

    @property
    def reproducible_demo(self) -> bool:
        """True when a fixed seed made the noise reproducible (and so removable): NOT private."""
        return self.ledger.fixed_seed

    # ------------------------------------------------------------ what every release answers
    @property
    def capabilities(self) -> Capabilities:
        """Optional features (none by default)."""
        return Capabilities()

    def answer(self, rect: Rect) -> float:
        return float(self.answer_many(rect)[0])

    @abc.abstractmethod
    def answer_many(self, rects) -> np.ndarray:
        """Private answer per rectangle (post-processing of the released values only)."""

    @abc.abstractmethod
    def noise_variance(self, rects) -> np.ndarray:
        """Variance of each answer due to the noise (not the even-spread error inside cells);
        NaN where the released values were fitted jointly and no closed form exists."""

    def noise_terms(self, rect: Rect):
        """(weights, discrete Laplace scales) with the answer's noise = Σ w_i Z_i, for an exact
        interval when there are few terms; None to use the normal approximation."""
        return None

    def interval(self, rect: Rect, level: float = 0.95, n_sim: int = 20000, seed: int = 0):
        """Answer ± the `level` quantile of its noise (the noise only: see `noise_variance`);
        (nan, nan) when the variance is unknown."""
        est = self.answer(rect)
        var = float(self.noise_variance(rect)[0])
        if not math.isfinite(var):
            return math.nan, math.nan
        if var == 0:
            return est, est
        cache = self.__dict__.setdefault("_half_widths", {})
        half = kept_half_width(cache, var, self.noise_terms(rect), level, n_sim, seed)
        return est - half, est + half

    def region_noise_scales(self):
        """The discrete Laplace scale of each region of `regions()` when every released count is
        its region's exact count plus one independent draw (0 for an exact count; a threshold may
        have hidden the draw, see `zero_threshold`); None when counts were fitted jointly. What
        `dp.partition_bounds` needs."""
        return None

    def node_draws(self):
        """Every node's own noisy count before a joint fit (`dp.partition_bounds.NodeDraws`),
        for ranges of releases whose released counts were fitted jointly; None otherwise."""
        return None

    def zero_threshold(self):
        """Per region, the largest noisy count a released 0 can hide (a threshold on the noisy
        counts zeroed it); None when a released count is always the noisy one."""
        return None

    def bounds(self, rects, level: float = 0.95):
        """(lower, upper) per rectangle holding its true count with probability >= level for any
        data (`dp.partition_bounds`); NaN where the release has no such interval."""
        from ..partition_bounds import partition_bounds
        return partition_bounds(self, rects, level)

    def warnings(self) -> list[str]:
        """Public warnings about this release's accuracy (computed from released values only)."""
        return []

    @abc.abstractmethod
    def describe(self) -> str:
        """The released structure in a phrase for the status line, e.g. "20×20 grid"."""

    def metadata(self) -> dict:
        """Public description of the release: mechanism, parameters, split, domain, ledger."""
        meta = {
            "mechanism": self.spec.name,
            "label": self.spec.label,
            "guarantee": self.spec.guarantee,
            "differentially_private": self.private,
            "unit_of_privacy": self.spec.unit,
            "privacy_level": self.privacy_level,
            "epsilon": self.epsilon,
            "split": dict(zip(self.spec.budget_parts, self.split)),
            "params": self.params,
            "domain": self.domain.to_dict(),
            "ledger": [{k: v for k, v in e.items()} for e in self.ledger.to_list()],
        }
        if self.points_per_user is not None:
            meta["user_level"] = self._user_level_metadata()
        if self.reproducible_demo:
            meta["reproducible_demo"] = ("NOT private: a fixed seed made this noise reproducible, "
                                         "so it can be removed")
        if self.noisy_size is not None:
            meta["noisy_dataset_size"] = int(self.noisy_size)
        return meta

    def _user_level_metadata(self) -> dict:
        """The bound and what it means; public parameters only (no count read from the data)."""
        k = self.points_per_user
        return {"max_points_per_user": k, "epsilon_per_point": self.epsilon / k,
                "guarantee": USER_LEVEL_GUARANTEE.format(k=k),
                "note": "ε, the ledger and per-leaf budgets are per user; noise scales, "
                        "sensitivities and the mechanism's own details are per point, at ε/k"}

    @abc.abstractmethod
    def raster(self) -> tuple[np.ndarray, UniformGrid]:
        """Released values on a uniform grid (row 0 = south), for maps; the grid is public."""

    @abc.abstractmethod
    def regions(self) -> tuple[UniformGrid, np.ndarray, np.ndarray]:
        """(base grid, (L, 4) cell ranges [r0, r1, c0, c1), noisy count per range): the released
        structure in one shape for every mechanism (grid cells or tree leaves)."""

    def features(self) -> RectFeatures | None:
        """The release's rectangles as columns (`dp.rect_features`), the fast way to export
        them; None where its features are not rectangles (then `to_geojson` gives them)."""
        return None

    def to_geojson(self) -> dict:
        """The release as GeoJSON: released values and public metadata only."""
        return self.features().to_dict()

    def to_geodataframe(self):
        """The release's regions and public properties as a GeoDataFrame (WGS84; `[geo]` extra)."""
        from ..feature_files import release_features
        from ..geo import geodataframe
        return geodataframe(release_features(self))

    def to_parquet(self, target) -> None:
        """The release as GeoParquet (to a path or a binary file): the regions with their noisy
        counts and whole people, as in `to_json`, and the provenance in the file's metadata."""
        from ..feature_files import release_features, write_features
        from ..provenance import provenance
        write_features(release_features(self), target, provenance(self), kind="GeoParquet")

    def to_json(self) -> str:
        """The GeoJSON as text, each cell's unbiased "noisy_count" joined by "people", whole and
        non-negative with the same total (`dp.whole_counts`)."""
        from ..feature_files import geojson_text, release_features
        return geojson_text(release_features(self), None)


class GridRelease(Release):
    """A noisy count per cell of a uniform grid, answered with the uniformity assumption."""

    def __init__(self, spec, domain, epsilon, split, params, ledger, grid: UniformGrid,
                 counts: np.ndarray, noise_scale: float | None, **kw):
        super().__init__(spec, domain, epsilon, split, params, ledger, **kw)
        self.grid = grid
        self.counts = np.asarray(counts, dtype=np.float64)   # raw noisy counts, never clipped (P11)
        self.noise_scale = noise_scale    # discrete Laplace scale per cell, None if exact

    def answer_many(self, rects) -> np.ndarray:
        """Spec 000 A2: sum of alpha_i * H'_i for each rectangle (clipped to the domain), from
        the counts' summed-area table, made once per release."""
        if getattr(self, "_sat", None) is None:      # releases pickled before it have none
            self._sat = summed_area(self.counts)
        return grid_answers(self.grid, self.counts, rects, self._sat)

    def noise_variance(self, rects) -> np.ndarray:
        """Variance of the answer due to noise: var(Z) * sum alpha_i^2 (separable)."""
        if not self.noise_scale:
            return np.zeros(len(as_rect_array(rects)))
        ay, ax = overlap_vectors(self.grid, rects)
        return discrete_laplace_variance(self.noise_scale) * (ay ** 2).sum(1) * (ax ** 2).sum(1)

    def noise_terms(self, rect: Rect):
        """The noise in one answer is Σ alpha_i Z_i over the cells the rectangle overlaps."""
        if not self.noise_scale:
            return None
        ay, ax = overlap_vectors(self.grid, rect)
        return np.outer(ay[0][ay[0] > 0], ax[0][ax[0] > 0]).ravel(), self.noise_scale

    def describe(self) -> str:
        return f"{self.grid.gx}×{self.grid.gy} grid"

    def region_noise_scales(self):
        return np.full(self.grid.n_cells, float(self.noise_scale or 0.0))

    def raster(self):
        return self.counts, self.grid

    def regions(self):
        j, k = np.divmod(np.arange(self.grid.n_cells), self.grid.gx)
        return self.grid, np.column_stack([j, j + 1, k, k + 1]), self.counts.ravel()

    def cell_bounds(self) -> np.ndarray:
        """(gy, gx, 4) array of [west, south, east, north] per cell."""
        ex, ey = self.grid.edges_x, self.grid.edges_y
        W, S = np.meshgrid(ex[:-1], ey[:-1])
        E, N = np.meshgrid(ex[1:], ey[1:])
        return np.stack([W, S, E, N], axis=-1)

    def features(self) -> RectFeatures:
        """Cells with their noisy counts plus public metadata. Nothing here reads the raw data."""
        row, col = np.divmod(np.arange(self.grid.n_cells), self.grid.gx)
        meta = self.metadata()
        meta["grid"] = {"cols": self.grid.gx, "rows": self.grid.gy}
        return RectFeatures(self.cell_bounds().reshape(-1, 4),
                            {"row": row, "col": col, "noisy_count": self.counts.ravel().astype(np.int64)}, meta)
