"""The command line (`python -m dp`, issue 28): a release, counts and a plan end to end on the
built-in sample, run as a user runs it, and the refusals with their exit codes and words."""
import json
import subprocess
import sys

import numpy as np
import pytest

import dp
from dp import cli
from dp import plan as planning


@pytest.fixture(scope="module")
def sample_csv(tmp_path_factory):
    data, _ = dp.load_sample("small_city_5k")
    path = tmp_path_factory.mktemp("cli") / "points.csv"
    np.savetxt(path, np.column_stack([data.x, data.y]), delimiter=",", header="lon,lat",
               comments="", fmt="%.6f")
    return path


def _run(*args):
    return subprocess.run([sys.executable, "-m", "dp", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_release_without_a_mechanism_uses_the_recommended_one(sample_csv, tmp_path):
    out = tmp_path / "release.geojson"
    assert cli.main(["release", str(sample_csv), "-e", "1", "-d", "London", "-o", str(out),
                     "--quiet"]) == 0
    assert json.loads(out.read_text())["properties"]["provenance"]["mechanism"] == \
        dp.recommend("points").name == "adaptive"


def test_release_end_to_end(sample_csv, tmp_path):
    out, meta = tmp_path / "release.geojson", tmp_path / "release.json"
    r = _run("release", sample_csv, "-m", "privtree", "-e", 1, "-d", "London", "-o", out,
             "--metadata", meta, "-p", "zero_below=5")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["features"] and doc["properties"]["provenance"]["mechanism"] == "privtree"
    assert doc["properties"]["provenance"]["params"]["zero_below"] == 5
    assert json.loads(meta.read_text())["provenance"]["epsilon"] == 1
    # progress and the ledger on stderr, adding up to ε; nothing on stdout
    assert "reading" in r.stderr and "PrivTree leaf counts: ε 0.5" in r.stderr
    assert "total ε 1 of 1" in r.stderr and r.stdout == ""


def test_release_counted_in_h3_cells_and_districts(sample_csv, tmp_path):
    pytest.importorskip("h3", reason="the [geo] extra (h3) is not installed")
    hexes, out = tmp_path / "hex.geojson", tmp_path / "r.geojson"
    assert cli.main(["release", str(sample_csv), "-m", "privtree", "-e", "1", "-d", "London", "-o", str(out),
                     "--h3", "6", "--shapes-output", str(hexes), "-q"]) == 0
    doc = json.loads(hexes.read_text())
    total = sum(f["properties"]["noisy_count"] for f in json.loads(out.read_text())["features"])
    assert sum(f["properties"]["count"] for f in doc["features"]) == pytest.approx(total, abs=0.01 * len(doc["features"]))
    districts = tmp_path / "districts.geojson"
    districts.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "id": "west", "geometry": {"type": "Polygon", "coordinates": [
            [[-0.35, 51.35], [-0.1, 51.35], [-0.1, 51.65], [-0.35, 51.65], [-0.35, 51.35]]]}}]}))
    assert cli.main(["release", str(sample_csv), "-m", "ug", "-e", "1", "-d", "London", "-o", str(out),
                     "--shapes", str(districts), "--shapes-output", str(tmp_path / "d.geojson"), "-q"]) == 0
    assert json.loads((tmp_path / "d.geojson").read_text())["features"][0]["properties"]["id"] == "west"
    # shapes are checked before anything is released or written
    fresh = tmp_path / "not_written.geojson"
    for extra, code in ((["--h3", "6"], cli.EXIT_USAGE),
                        (["--h3", "6", "--shapes", str(districts), "--shapes-output", "x.geojson"], cli.EXIT_USAGE),
                        (["--h3", "16", "--shapes-output", "x.geojson"], cli.EXIT_PARAMS),
                        (["--shapes", str(tmp_path / "none.geojson"), "--shapes-output", "x.geojson"], cli.EXIT_DATA)):
        assert cli.main(["release", str(sample_csv), "-m", "ug", "-e", "1", "-d", "London", "-o", str(fresh),
                         *extra]) == code
        assert not fresh.exists()


def test_a_non_private_mechanism_needs_saying_so(sample_csv, tmp_path, capsys):
    out = tmp_path / "exact.geojson"
    args = ["release", str(sample_csv), "-m", "best_nonpriv", "-e", "1", "-d", "London", "-o", str(out)]
    assert cli.main(args) == cli.EXIT_USAGE and not out.exists()
    assert "NOT differentially private" in capsys.readouterr().err
    assert cli.main(args + ["--allow-non-private", "-q"]) == 0
    assert "NOT differentially private" in capsys.readouterr().err          # said even when quiet
    assert json.loads(out.read_text())["properties"]["differentially_private"] is False


def test_counts_then_release_and_a_box_typed(sample_csv, tmp_path):
    counts, out = tmp_path / "counts.npz", tmp_path / "r.geojson"
    assert cli.main(["aggregate", str(sample_csv), "-d", "London", "--cells", "128", "-o",
                     str(tmp_path / "counts"), "-q"]) == 0                        # .npz added
    assert dp.load_counts(counts).counts.sum() > 0
    assert cli.main(["release", str(counts), "-m", "full_quadtree", "-e", "0.5",
                     "--domain=-0.35,51.35,0.15,51.65", "-p", "base_cells=128", "-o", str(out), "-q"]) == 0
    assert json.loads(out.read_text())["properties"]["provenance"]["mechanism"] == "full_quadtree"


@pytest.mark.slow          # 20 s: the quick suite leaves it to the full one
def test_plan_is_free_and_printed(capsys):
    assert cli.main(["plan", "-d", "London", "-m", "ug", "-m", "privtree", "--target", "50", "-q"]) == 0
    text = capsys.readouterr().out
    assert "±50 people 95% of the time" in text and "ug" in text and "privtree" in text
    assert "on every one of 6 twins" in text and "values" in text and planning.TRUST_VALUES in text
    assert cli.main(["plan", "-d", "London", "-m", "privtree", "--points", "5000", "--no-exact-values", "-q"]) == 0
    text = capsys.readouterr().out
    assert "on every one of 4 twins" in text and "(clustered, uniform, cores, lines)" in text
    assert planning.TRUST in text


def test_mechanisms_and_presets_are_listed(capsys):
    assert cli.main(["mechanisms"]) == 0
    assert "--param zero_below=" in capsys.readouterr().out
    assert cli.main(["mechanisms", "--presets"]) == 0
    assert "London: -0.35,51.35,0.15,51.65" in capsys.readouterr().out


@pytest.mark.parametrize("argv,code,words", [
    (["-e", "-1", "-d", "London"], cli.EXIT_PARAMS, "epsilon: expected a finite number above 0, got -1"),
    (["-e", "1", "-d", "San"], cli.EXIT_USAGE, "matches 2 presets"),
    (["-e", "1", "-d", "Atlantis"], cli.EXIT_USAGE, "no preset has that name"),
    (["-e", "1", "-d", "1,2,3"], cli.EXIT_USAGE, "west,south,east,north"),
    (["-e", "1", "-d", "London", "-p", "zero_below"], cli.EXIT_USAGE, "expected KEY=VALUE"),
    (["-e", "1", "-d", "London", "-p", "zero_below=lots"], cli.EXIT_PARAMS, "expected float"),
])
def test_refusals_say_what_was_wrong(sample_csv, tmp_path, capsys, argv, code, words):
    assert cli.main(["release", str(sample_csv), "-m", "privtree", "-o", str(tmp_path / "o.geojson"),
                     *argv]) == code
    assert words in capsys.readouterr().err


def test_bad_file_and_unwritable_output(tmp_path, sample_csv, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert cli.main(["release", str(bad), "-m", "ug", "-e", "1", "-d", "London", "-o",
                     str(tmp_path / "o.geojson")]) == cli.EXIT_DATA
    assert "refused: no longitude and latitude column" in capsys.readouterr().err
    assert cli.main(["release", str(tmp_path / "missing.csv"), "-m", "ug", "-e", "1", "-d", "London",
                     "-o", str(tmp_path / "o.geojson")]) == cli.EXIT_DATA
    assert cli.main(["release", str(sample_csv), "-m", "ug", "-e", "1", "-d", "London", "-o",
                     str(tmp_path / "no" / "such" / "dir" / "o.geojson")]) == cli.EXIT_OUTPUT
    assert "could not write" in capsys.readouterr().err


def test_points_outside_the_box_are_warned_about(sample_csv, tmp_path, capsys):
    assert cli.main(["release", str(sample_csv), "-m", "ug", "-e", "1", "-d", "Paris", "-o",
                     str(tmp_path / "o.geojson")]) == 0
    assert "only 0% of the points lie inside Paris" in capsys.readouterr().err


def test_help_for_each_command(capsys):
    for cmd in ("release", "aggregate", "plan", "mechanisms"):
        with pytest.raises(SystemExit) as done:
            cli.main([cmd, "--help"])
        assert done.value.code == 0 and "usage: python -m dp " + cmd in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        cli.main([])
    assert done.value.code == cli.EXIT_USAGE
