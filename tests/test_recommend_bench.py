"""`benchmarks/recommend.py` and `benchmarks/corpus.py`: the ratio band, a small run of the table in
parallel, the corpus and its two leave-one-out tables."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import corpus  # noqa: E402
import numpy as np  # noqa: E402
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


def test_seed_ranges():
    assert recommend.seed_list(["1-3", "7"]) == [1, 2, 3, 7]


def test_the_corpus_is_varied_split_and_reproducible():
    entries = corpus.entries()
    generated = [e for e in entries if e.seed is not None]
    assert len(generated) >= 20 and len({e.seed for e in generated}) == len(generated)
    assert {e.part for e in generated} == {"fit", "validation", "holdout", "fresh", "unseen", "final", "last"}
    assert all(e.what and e.name for e in entries)
    sizes = []
    for e in generated:
        m = e.make()
        assert m.shape == (256, 256) and (m >= 0).all() and np.array_equal(m, np.round(m))
        sizes.append(m.sum())
    assert min(sizes) < 2_000 and max(sizes) > 900_000             # tiny N and large N
    a, b = corpus.entries(names=["ring"])[0].make(), corpus.entries(names=["ring"])[0].make()
    np.testing.assert_array_equal(a, b)                              # its seed makes it again


def test_a_corpus_run_prints_both_leave_one_out_tables(capsys):
    recommend.main(["--corpus", "validation", "--data", "ring", "tiny_spread", "smooth_b",
                    "--eps", "1", "--seeds", "1", "--mechanisms", "adaptive",
                    "full quadtree + inference", "ag", "privtree", "--jobs", "2"])
    out = capsys.readouterr().out
    assert out.count("| ring | 50,000 | 1 |") == 1 and "| smooth_b |" in out
    assert "Leave one data set out: the single mechanism best on the other data sets" in out
    # the rule's shares are refitted on the fitting part only, which this run did not measure
    assert "The adaptive rule's shares" in out and "| ring | validation |" not in out
