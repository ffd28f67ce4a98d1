"""Opening files on the server: only inside the configured data folder, refused in words that
name only what the owner typed; counts offered only the mechanisms that take them."""
import os

import numpy as np
import pytest

import dp
from app import create_app
from components import controls, server_files


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "data" / "trips").mkdir(parents=True)
    for name in ("trips/a.parquet", "trips/b.parquet", "points.csv", "notes.md", "c.npz", "d.npz"):
        (tmp_path / "data" / name).write_text("x")
    (tmp_path / "secret.csv").write_text("lon,lat\n0,0\n")
    os.symlink(tmp_path / "secret.csv", tmp_path / "data" / "link.csv")
    return tmp_path / "data"


def test_paths_and_globs_inside_the_folder_are_found(folder):
    assert [os.path.basename(f) for f in server_files.resolve(folder, "trips/*.parquet")] == ["a.parquet", "b.parquet"]
    assert server_files.resolve(folder, " points.csv ") == [str(folder.resolve() / "points.csv")]
    assert server_files.resolve(folder, "c.npz") == [str(folder.resolve() / "c.npz")]


def test_a_second_expansion_cannot_lead_out_of_the_folder(folder, tmp_path):
    # a folder named "*" holding x.csv beside a symlink to a folder outside: the literal match
    # must not be expanded again by the engines into the outside folder
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.csv").write_text("lon,lat\n0,0\n")
    (folder / "*").mkdir()
    (folder / "*" / "x.csv").write_text("lon,lat\n0,0\n")
    os.symlink(tmp_path / "outside", folder / "linkdir")
    with pytest.raises(dp.DataError, match="holds \\*, \\? or \\[: rename it"):
        server_files.resolve(folder, "[*]/x.csv")


@pytest.mark.parametrize("text,message", [
    ("", "type a file name or a glob"),
    ("../secret.csv", "'../secret.csv' is outside the data folder"),
    ("/etc/passwd", "'/etc/passwd' is outside the data folder"),
    ("link.csv", "no file in the data folder matches 'link.csv'"),          # a symlink out of it
    ("missing.csv", "no file in the data folder matches 'missing.csv'"),
    ("*.md", "names .md files; expected CSV or Parquet files, or one .npz"),
    ("*.npz", "names .npz files; expected CSV or Parquet files, or one .npz"),
])
def test_anything_else_is_refused_without_naming_the_folder(folder, text, message):
    with pytest.raises(dp.DataError, match=message.replace(".", "\\.").replace("*", "\\*")) as exc:
        server_files.resolve(folder, text)
    assert str(folder) not in str(exc.value)


def test_counts_are_offered_only_the_mechanisms_that_take_them():
    opts = {o["value"]: o for o in controls.mechanism_options("points", counts=True)}
    assert opts["shifted_grids"]["disabled"] and "(needs the points, not counts)" in opts["shifted_grids"]["label"]
    assert not opts["privtree"]["disabled"] and "shifted_grids" not in controls.usable(list(opts.values()))
    assert not any(o["disabled"] for o in controls.mechanism_options("points"))


def test_the_data_folder_must_exist(tmp_path):
    with pytest.raises(ValueError, match="does not exist or is not a folder"):
        create_app({"data_dir": str(tmp_path / "nowhere")})


def test_a_count_job_reports_progress_in_thousandths(tmp_path):
    box = dp.Domain(0, 0, 1, 1)
    np.savetxt(tmp_path / "p.csv", np.random.default_rng(1).uniform(0, 1, (5000, 2)), delimiter=",",
               header="lon,lat", comments="")
    seen = []
    counts = server_files.count([str(tmp_path / "p.csv")], tmp_path, box, 64,
                                lambda d, t: seen.append((d, t)))
    assert counts.n == 5000 and counts.counts.shape == (64, 64) and seen[-1] == (1000, 1000)
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(dp.DataError) as exc:
        server_files.count([str(tmp_path / "bad.parquet")], tmp_path, box, 64, lambda d, t: None)
    assert "bad.parquet could not be read" in str(exc.value) and str(tmp_path) not in str(exc.value)
