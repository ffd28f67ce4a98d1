"""dp: differentially private spatial histograms for point data.

    import dp
    data, domain = dp.load_sample("small_city_5k")         # or dp.load_points("file.csv")
    rel = dp.release("e2epriv", data, domain, epsilon=1.0, seed=1)
    rect = dp.Rect(-0.2, 51.45, -0.05, 51.55)
    rel.answer(rect), data.true_count(rect, domain)          # private vs true (owner only)

Too many points for memory: count them where they live, then release from the counts:

    counts = dp.aggregate("trips/*.parquet", domain)          # DuckDB, out of core
    rel = dp.release("privtree", counts, domain, epsilon=1.0)

`dp` never imports dash or flask; the dashboard is one client of this API.
"""
from . import evaluate, metrics, noise
from .accountant import Accountant, Charge
from .aggregate import aggregate
from .budget import Ledger, LedgerEntry
from .contributions import DEFAULT_POINTS_PER_USER, USER_LEVEL_GUARANTEE, bound_contributions
from .counts import CountData, load_counts
from .domain import Domain, Projection, UniformGrid, fit_to_data
from .presets import PRESETS, presets_containing
from .errors import BudgetError, DataError, ParameterError, PrivacyLeakWarning
from .io import load_points
from .mechanisms import GridRelease, LeafRelease, MechanismSpec, Param, Release, mechanisms, release
from .points import LoadReport, PointData
from .queries import Rect, random_workload
from .recommend import Recommendation, recommend
from .io.region_files import load_regions
from .regions import RegionData
from .samples import SAMPLES, load_sample
from .samples import load_region_sample
from .provenance import software_version

__version__ = software_version()          # from the installed package: pyproject.toml


def __getattr__(name: str):
    """`dp.interactive` (location sessions), imported on first use: most callers never need it.
    (`dp.aggregate` cannot be lazy: an `import dp.aggregate` anywhere before the first
    `dp.aggregate(...)` would bind the name to the module, not the function.)"""
    if name == "interactive":
        import importlib
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module 'dp' has no attribute {name!r}")

__all__ = [
    "BudgetError", "DataError", "Domain", "GridRelease", "Ledger", "LedgerEntry", "LoadReport",
    "LeafRelease", "MechanismSpec", "PRESETS", "presets_containing", "Param", "ParameterError", "PointData", "PrivacyLeakWarning",
    "Projection", "Rect", "Release", "SAMPLES", "UniformGrid", "evaluate", "fit_to_data",
    "load_points", "load_sample", "mechanisms", "metrics", "noise", "random_workload", "release",
    "RegionData", "load_regions", "load_region_sample",
    "DEFAULT_POINTS_PER_USER", "USER_LEVEL_GUARANTEE", "bound_contributions",
    "interactive", "Accountant", "Charge", "Recommendation", "recommend",
    "CountData", "aggregate", "load_counts", "__version__",
]
