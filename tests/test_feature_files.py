"""Files a GIS opens as they are (issue 44): the command line writes the type its file name asks
for, every feature carries the mechanism and ε, the whole provenance sits in the format's own
metadata (or a CSV's sidecar), and each file opens in GDAL (`ogrinfo`, Debian's gdal-bin) and in
geopandas; a name it cannot write is refused before anything is released."""
import json
import shutil
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

import dp
from dp import cli
from dp.errors import MissingExtra
from dp.feature_files import FORMATS, file_format, sidecar
from test_cli import sample_csv  # noqa: F401 (the built-in sample as a points CSV, a fixture)

EXTENSIONS = sorted({".geojson", ".parquet", ".gpkg", ".fgb", ".csv"})


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One PrivTree release of the built-in sample (ε 1) and its H3 counts, written in every
    file type, with the GeoJSON features they all hold."""
    from dp import shapes
    from dp.feature_files import release_features, write_features
    from dp.provenance import provenance
    folder = tmp_path_factory.mktemp("files")
    data, domain = dp.load_sample("small_city_5k")
    rel = dp.release("privtree", data, domain, 1.0)
    ids, cells = shapes.h3_cells(domain, 7)
    counts = shapes.shape_counts(rel, cells, ids)
    for ext in EXTENSIONS:
        write_features(release_features(rel), folder / f"cells{ext}", provenance(rel))
        write_features(counts.to_geojson(), folder / f"hexagons{ext}", counts.provenance)
    return folder


def by_place(frame) -> np.ndarray:
    """Each feature's bounds and noisy count, in one order (a FlatGeobuf's spatial index
    reorders its features)."""
    rows = np.column_stack([frame.geometry.bounds.to_numpy(), frame["noisy_count"].astype(float).to_numpy()])
    return rows[np.lexsort(np.round(rows, 7).T[::-1])]


def gdal_drivers() -> str:
    return subprocess.run(["ogrinfo", "--formats"], capture_output=True, text=True, timeout=60).stdout


def provenance_of(path):
    """The provenance block where each format keeps it."""
    kind = file_format(path)
    if kind == "GeoJSON":
        return json.loads(path.read_text())["properties"]["provenance"]
    if kind == "GeoParquet":
        return json.loads(pq.read_schema(path).metadata[b"provenance"])
    if kind == "CSV":
        return json.loads(sidecar(path).read_text())
    pyogrio = pytest.importorskip("pyogrio")
    info = pyogrio.read_info(path)
    return json.loads((info["layer_metadata"] or {})["provenance"])


@pytest.mark.parametrize("ext", EXTENSIONS)
def test_each_format_opens_in_geopandas_with_the_stamp_and_the_provenance(written, ext):
    gpd = pytest.importorskip("geopandas", reason="the [geo] extra (geopandas) is not installed")
    reference = gpd.read_file(written / "cells.geojson")
    for name in ("cells", "hexagons"):
        path = written / f"{name}{ext}"
        frame = (gpd.read_parquet(path) if ext == ".parquet" else gpd.read_file(path))
        assert len(frame) > 100 and frame.geometry.notna().all()
        assert set(frame["mechanism"]) == {"privtree"} and set(frame["epsilon"].astype(float)) == {1.0}
        assert set(frame["unit_of_privacy"]) == {"add/remove one point"}
        block = provenance_of(path)
        assert block["mechanism"] == "privtree" and block["epsilon"] == 1.0
        assert sum(e["epsilon"] for e in block["ledger"]) == pytest.approx(1.0)
    cells = gpd.read_parquet(written / "cells.parquet") if ext == ".parquet" else gpd.read_file(written / f"cells{ext}")
    assert len(cells) == len(reference) and np.allclose(by_place(cells), by_place(reference), rtol=0, atol=1e-9)
    hexes = gpd.read_parquet(written / "hexagons.parquet") if ext == ".parquet" else gpd.read_file(written / f"hexagons{ext}")
    assert set(hexes["level"].astype(float)) == {0.95}       # the level of each range, per feature


@pytest.mark.skipif(shutil.which("ogrinfo") is None,
                    reason="GDAL's ogrinfo is not installed (Debian: apt-get install gdal-bin)")
@pytest.mark.parametrize("ext", EXTENSIONS)
def test_each_format_opens_in_gdal_with_every_feature(written, ext):
    # Debian's GDAL (the one QGIS uses there): the feature count as written, the stamp among
    # the fields, no warning (a GeoPackage version it does not know would warn)
    path = written / f"cells{ext}"
    if ext == ".parquet" and "Parquet" not in gdal_drivers():
        pytest.skip("this GDAL was built without Arrow, so it has no (Geo)Parquet driver "
                    "(Debian 12's has none); geopandas reads the file in the test above")
    out = subprocess.run(["ogrinfo", "-so", "-al", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    count = int(out.stdout.split("Feature Count: ")[1].split()[0])
    assert count == len(json.loads((written / "cells.geojson").read_text())["features"])
    assert "mechanism:" in out.stdout and "epsilon:" in out.stdout
    assert "Warning" not in out.stderr, out.stderr
    if ext == ".gpkg":
        assert '"mechanism": "privtree"' in out.stdout           # the dataset's metadata


def test_the_command_line_writes_the_type_the_name_asks_for(sample_csv, tmp_path):  # noqa: F811
    gpd = pytest.importorskip("geopandas", reason="the [geo] extra (geopandas) is not installed")
    points = sample_csv
    out, hexes = tmp_path / "release.gpkg", tmp_path / "hexagons.parquet"
    assert cli.main(["release", str(points), "-e", "1", "-d", "London", "-o", str(out), "--h3", "7",
                     "--shapes-output", str(hexes), "-q"]) == 0
    assert out.read_bytes()[:16] == b"SQLite format 3\x00" and hexes.read_bytes()[:4] == b"PAR1"
    frame = gpd.read_file(out)
    assert set(frame["mechanism"]) == {dp.recommend("points").name} and len(frame) > 100
    assert provenance_of(out)["epsilon"] == 1.0 == provenance_of(hexes)["epsilon"]


def test_a_csv_is_a_plain_table_with_its_provenance_beside_it(written):
    pd = pytest.importorskip("pandas")
    table = pd.read_csv(written / "cells.csv")                   # no comment lines to skip
    assert list(table.columns[-5:]) == ["mechanism", "epsilon", "unit_of_privacy", "software_version", "WKT"]
    assert table["WKT"].str.startswith("POLYGON").all()
    assert sidecar(written / "cells.csv").name == "cells.provenance.json"


def test_a_file_type_it_cannot_write_is_refused_before_releasing(tmp_path, capsys):
    # the old command line wrote GeoJSON text into any name, .shp and .parquet alike
    for case in (["-o", tmp_path / "release.shp"], ["-o", tmp_path / "release"],
                 ["-o", tmp_path / "ok.geojson", "--h3", "7", "--shapes-output", tmp_path / "counts.xlsx"]):
        assert cli.main(["release", "missing.csv", "-e", "1", "-d", "London", *map(str, case)]) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert "cannot tell which file type" in err and ".gpkg" in err and "missing.csv" not in err
        assert not list(tmp_path.iterdir())
    assert set(FORMATS.values()) == {"GeoJSON", "GeoParquet", "GeoPackage", "FlatGeobuf", "CSV"}


def test_a_missing_extra_is_said_before_anything_is_read(tmp_path, capsys, monkeypatch):
    # GeoPackage needs the [geo] extra: without it the command stops at once, not after a release
    import dp.geo
    real = dp.geo.require

    def without_pyogrio(module, what):
        if module == "pyogrio":
            raise MissingExtra(f"{what} needs the pyogrio package; {dp.geo.GEO_EXTRA}")
        return real(module, what)
    monkeypatch.setattr(dp.geo, "require", without_pyogrio)
    assert cli.main(["release", "missing.csv", "-e", "1", "-d", "London", "-o", str(tmp_path / "r.gpkg")]) == cli.EXIT_MISSING
    err = capsys.readouterr().err
    assert "writing GeoPackage needs the pyogrio package" in err and "missing.csv" not in err


def test_a_closed_pipe_ends_the_listing_quietly():
    # `python -m dp mechanisms --presets | head -1` printed a BrokenPipeError traceback
    r = subprocess.run(f"{sys.executable} -m dp mechanisms --presets | head -1", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.count("\n") == 1 and r.stderr == ""


def test_the_console_command_is_the_command_line():
    from importlib.metadata import entry_points
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts.get("dp-spatial") == "dp.cli:entry"
    r = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['dp-spatial', '--version']; "
                        "from dp.cli import entry; entry()"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("dp-spatial ")
