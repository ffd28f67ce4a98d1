"""`benchmarks/recommend.py`: the ratio band it prints and a small run of its table, in parallel."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import recommend  # noqa: E402


def test_ratio_band_by_hand():
    # a = [1, 3]: mean 2, variance 2; b = [2, 2]: mean 2, variance 0. r = 1 and
    # 2 SE = 2 · r · sqrt(2 / 2 / 2²) = 1
    assert recommend.ratio_band([1, 3], [2, 2]) == pytest.approx((1.0, 1.0))
    r, band = recommend.ratio_band([4.0], [2.0])
    assert r == 2.0 and band != band                    # one seed: no band (NaN)


def test_a_small_run_prints_its_rows_and_the_seeds_in_two_processes(capsys):
    recommend.main(["--data", "small_city_5k", "--eps", "0.5", "1", "--seeds", "1", "2", "3",
                    "--mechanisms", "adaptive", "privtree", "--jobs", "2"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| small_city_5k |")]
    assert [row.split(" | ")[2] for row in rows] == ["0.5", "1"]
    assert all(row.count(" ± ") == 1 for row in rows)
    assert "settings (seeds 1-3)" in out and "city_200k" not in out
