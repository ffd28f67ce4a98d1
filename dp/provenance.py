"""Provenance of a release: what made it, when, with which settings, and a script that repeats it.

Every export carries this block so a release can be traced and re-run: the software and its
version, the time of the release, the mechanism with its parameters, ε and its split, the unit
of privacy, the ledger and, when the caller knows it, the dataset account's total spent so far.
Everything here is a public setting or a time; nothing is read from the data.
"""
from __future__ import annotations

import datetime
import json
import pprint
from importlib import metadata as _pkg

DISTRIBUTION = "dp-spatial-dashboard"
LOADERS = {"points": "load_points", "regions": "load_regions"}


def software_version() -> str:
    """The installed version of this package ("unknown" when run from a bare source tree)."""
    try:
        return _pkg.version(DISTRIBUTION)
    except _pkg.PackageNotFoundError:
        return "unknown"


def now() -> str:
    """The current UTC time to the second, ISO 8601: a release's `released_at`."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def provenance(rel, spent: float | None = None, total: float | None = None) -> dict:
    """The provenance block of a release. `spent` / `total`: the ε the dataset's account has
    spent so far (this release included) and its budget, when the caller keeps an account."""
    block = {
        "software": {"name": DISTRIBUTION, "version": software_version()},
        "released_at": getattr(rel, "released_at", None),
        "mechanism": rel.spec.name,
        "params": rel.params,
        "epsilon": rel.epsilon,
        "split": dict(zip(rel.spec.budget_parts, _requested(rel))),
        "unit_of_privacy": rel.spec.unit,
        "privacy_level": rel.privacy_level,
        "differentially_private": rel.private,
        "ledger": rel.ledger.to_list(),
    }
    if spent is not None:
        block["dataset_account"] = {"epsilon_spent_so_far": spent, "epsilon_budget": total}
    block["repeat_script"] = repeat_script(rel).splitlines()
    return block


def export_texts(rel, spent: float | None = None, total: float | None = None) -> tuple[str, str]:
    """(GeoJSON text, metadata JSON text) of a release, built only from its public outputs, each
    with the provenance block: what the app's export and the command line write."""
    from .feature_files import geojson_text, release_features
    block = provenance(rel, spent, total)
    return geojson_text(release_features(rel), block), metadata_text(rel, block)


def metadata_text(rel, block: dict) -> str:
    """The metadata JSON of a release (its public description and ledger) with the provenance
    `block`: the app's metadata download and the command line's --metadata file."""
    return json.dumps({**rel.metadata(), "provenance": block}, indent=2, default=str)


def repeat_script(rel, path: str | None = None, columns: dict | None = None,
                  loader: str | None = None) -> str:
    """A short Python script that makes the same kind of release with the `dp` API on the
    owner's own file: same mechanism, box, ε, split, parameters and bound on points per user.
    It draws fresh noise (no seed is kept), so it spends ε again and its numbers differ.
    `path` and `columns` (role -> column name, as `dp.LoadReport.columns`) are for the owner's
    own copy; public exports leave them out. `loader`: the `dp` function that reads the file
    (default: the one for the mechanism's kind of data; "load_counts" for saved counts;
    "load_sample" / "load_region_sample" with `path` a built-in sample's name)."""
    kind = rel.spec.data_kind
    loader = loader or LOADERS[kind]
    path = path or ("your_data.csv" if kind == "points" else "your_regions.geojson")
    named = "".join(f", {role}={name!r}" for role, name in (columns or {}).items()
                    if role in ("lon", "lat", "user"))
    args = [repr(rel.spec.name), "data", "domain", f"epsilon={rel.epsilon!r}",
            f"split={list(_requested(rel))!r}", f"params={_literal(rel.params)}"]
    if rel.points_per_user is not None:
        args.append(f"max_points_per_user={rel.points_per_user!r}")
    hint = ("one region per user" if kind != "points" else "columns as read" if named else
            "counts saved by dp.aggregate" if loader == "load_counts" else
            "name the columns with lon=..., lat=..." + (", user=..." if rel.points_per_user else "")
            + " if needed")
    when = getattr(rel, "released_at", None) or "unknown time"
    return "\n".join([
        f'"""Repeat this {rel.spec.label} release ({when}, {DISTRIBUTION} {software_version()}).',
        "",
        f"Unit of privacy: {rel.privacy_level}.",
        f"Each run draws fresh noise and spends epsilon = {rel.epsilon:g} of the data's budget again.",
        '"""',
        "import dp",
        "",
        (f"data, _ = dp.{loader}({path!r})   # the built-in sample" if "sample" in loader else
         f"data = dp.{loader}({path!r}{named})   # your own file; {hint}"),
        f"domain = dp.Domain.from_dict({_literal(rel.domain.to_dict())})",
        f"rel = dp.release({', '.join(args)})",
        "with open('release.geojson', 'w') as out:",
        "    out.write(rel.to_json())",
        "print(rel.describe(), '| ledger total:', rel.ledger.total)",
        "",
    ])


def _requested(rel) -> tuple:
    """The split of ε the release was asked for (older stored releases: the one they spent)."""
    return rel.requested_split or rel.split


def _literal(value) -> str:
    """A Python literal for a JSON-like value on one line (dict keys in their own order)."""
    return pprint.pformat(value, width=10_000, sort_dicts=False)
