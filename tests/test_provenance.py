"""Provenance of exports (issue 26, item 6): the block every export carries, and a repeat script
that, run on the owner's own file, makes a release of the same kind with the same settings."""
import datetime
import io
import json
from importlib import metadata

import numpy as np
import pytest

import dp
from components import export_panel, public_page
from dp.provenance import provenance, repeat_script


def run_script(script: str, folder, monkeypatch) -> dp.Release:
    """Run a repeat script in `folder` (where its data file is) and return the release it made;
    it must also have written release.geojson there."""
    monkeypatch.chdir(folder)
    scope = {}
    exec(compile(script, "repeat.py", "exec"), scope)
    assert json.loads((folder / "release.geojson").read_text())["type"] == "FeatureCollection"
    return scope["rel"]


def same_settings(a: dp.Release, b: dp.Release):
    assert (b.spec.name, b.epsilon, b.split, b.params) == (a.spec.name, a.epsilon, a.split, a.params)
    assert b.domain.to_dict() == a.domain.to_dict() and b.privacy_level == a.privacy_level
    assert b.ledger.total == pytest.approx(a.epsilon) and b.private


def write_csv(path, x, y, users=None, names=("lon", "lat", "user")):
    cols = [x, y] + ([users] if users is not None else [])
    rows = "\n".join(",".join(map(str, r)) for r in zip(*cols))
    path.write_text(",".join(names[:len(cols)]) + "\n" + rows + "\n")


@pytest.mark.parametrize("mech", ["privtree", "htf", "shifted_grids", "dawa"])
def test_repeat_script_remakes_a_point_release(small, tmp_path, monkeypatch, mech):
    data, domain = small
    rel = dp.release(mech, data, domain, epsilon=0.7)
    write_csv(tmp_path / "your_data.csv", data.x, data.y)
    again = run_script(repeat_script(rel), tmp_path, monkeypatch)
    same_settings(rel, again)


def test_repeat_script_keeps_user_level_bound_and_owner_columns(small, tmp_path, monkeypatch):
    data, domain = small
    users = np.random.default_rng(3).integers(0, 400, len(data.x))
    owned = dp.PointData(data.x, data.y, user=users)
    rel = dp.release("ug", owned, domain, epsilon=2.0, max_points_per_user=3)
    write_csv(tmp_path / "trips.csv", data.x, data.y, users, names=("lng", "latitude", "rider"))
    script = repeat_script(rel, "trips.csv", {"lon": "lng", "lat": "latitude", "user": "rider"})
    assert "max_points_per_user=3" in script and "user='rider'" in script
    again = run_script(script, tmp_path, monkeypatch)
    same_settings(rel, again)
    assert again.points_per_user == 3


def test_repeat_script_for_regions_and_saved_counts(small, tmp_path, monkeypatch):
    regions, rdomain = dp.load_region_sample(next(iter(dp.samples.REGION_SAMPLES)))
    rel = dp.release("euler", regions, rdomain, epsilon=1.0)
    (tmp_path / "your_regions.geojson").write_text(json.dumps(regions.to_geojson()))
    script = repeat_script(rel)
    assert "dp.load_regions(" in script
    same_settings(rel, run_script(script, tmp_path, monkeypatch))

    data, domain = small
    saved = dp.CountData(data.histogram(dp.UniformGrid(domain, 256, 256)), domain)
    saved.save(tmp_path / "counts.npz")
    crel = dp.release("privtree", saved, domain, epsilon=1.0, params={"base_cells": 256})
    cscript = export_panel.owner_script(crel, dp.load_counts(tmp_path / "counts.npz", name="counts"))
    assert "dp.load_counts('counts.npz')" in cscript
    same_settings(crel, run_script(cscript, tmp_path, monkeypatch))


def test_provenance_block_names_software_time_settings_and_account(small):
    data, domain = small
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    rel = dp.release("privtree", data, domain, epsilon=0.5)
    block = provenance(rel, spent=1.5, total=10.0)
    assert block["software"] == {"name": "dp-spatial-dashboard",
                                 "version": metadata.version("dp-spatial-dashboard")}
    when = datetime.datetime.fromisoformat(block["released_at"])
    assert before <= when <= datetime.datetime.now(datetime.timezone.utc)
    assert (block["mechanism"], block["epsilon"], block["params"]) == ("privtree", 0.5, rel.params)
    assert block["unit_of_privacy"] == rel.spec.unit and block["differentially_private"]
    assert sum(e["epsilon"] for e in block["ledger"]) == pytest.approx(0.5)
    assert block["dataset_account"] == {"epsilon_spent_so_far": 1.5, "epsilon_budget": 10.0}
    assert block["repeat_script"] == repeat_script(rel).splitlines()
    assert "dataset_account" not in provenance(rel)


def test_provenance_reads_nothing_from_the_data(small):
    """Two datasets, same settings: the blocks differ at most in the time of the release."""
    data, domain = small
    other = dp.PointData(data.x[: len(data.x) // 3], data.y[: len(data.y) // 3])
    a, b = (provenance(dp.release("privtree", d, domain, epsilon=1.0)) for d in (data, other))
    for block in (a, b):
        block.pop("released_at")
        block["repeat_script"] = block["repeat_script"][1:]       # its first line names the time
    assert a == b


def test_exports_carry_the_block(small):
    data, domain = small
    rel = dp.release("privtree", data, domain, epsilon=1.0)
    account = dp.Accountant(total=5.0)
    account.charge("earlier release", epsilon=2.0)
    geo, meta = (json.loads(t) for t in export_panel.export_files(rel, account))
    assert geo["properties"]["provenance"] == meta["provenance"]
    assert meta["provenance"]["dataset_account"] == {"epsilon_spent_so_far": 2.0, "epsilon_budget": 5.0}
    assert meta["provenance"]["released_at"] == rel.released_at


def test_csv_exports_are_plain_tables_stamped_on_every_row(small):
    # the public cells CSV: no comment lines (a plain pandas.read_csv parses it), each row with
    # the release's mechanism, ε and unit of privacy, and the cell as WKT a GIS reads
    pd = pytest.importorskip("pandas")
    shapely = pytest.importorskip("shapely")
    data, domain = small
    rel = dp.release("privtree", data, domain, epsilon=1.0)
    block = provenance(rel, 2.0, 5.0)
    text = public_page.cells_csv(rel, block)
    assert not text.startswith("#")
    table = pd.read_csv(io.StringIO(text))
    assert len(table) == len(rel.regions()[1])
    assert set(table["mechanism"]) == {"privtree"} and set(table["epsilon"]) == {1.0}
    assert set(table["unit_of_privacy"]) == {rel.spec.unit}
    bounds = shapely.bounds(shapely.from_wkt(table["WKT"].to_numpy()))
    assert np.allclose(bounds, table[["west", "south", "east", "north"]].to_numpy())


def test_repeat_script_for_a_built_in_sample(small, tmp_path, monkeypatch):
    data, domain = small
    rel = dp.release("privtree", data, domain, epsilon=1.0)
    script = export_panel.owner_script(rel, data, "small_city_5k")
    assert "data, _ = dp.load_sample('small_city_5k')" in script
    same_settings(rel, run_script(script, tmp_path, monkeypatch))
