"""The validation corpus: point data sets of varied structure, as 256 x 256 count matrices.

Every generated data set is made from its own seed in the unit square and binned on the
peers' 256 x 256 grid (row = y from the south), so it runs on `peers.py`'s protocol unchanged;
the three DPBench matrices are read from the shared folder when it is there. Each entry says in
one line what it is and which part it belongs to:

- **fit**: the only data a measured constant of the recommended mechanism may be chosen on;
- **validation**: scored, never used to choose anything;
- **holdout**: new seeds and settings of the generators, added on 2026-11-29 after the
  validation part had been looked at (the plan's twins were judged on it), scored only after a
  constant chosen on the fitting part was fixed (the plan's margin, `plan_forecast.py`);
- **fresh**: again new seeds and settings, added on 2026-11-29 after the holdout part had been
  scored (the plan's fifth twin, of exact values, answers what it showed), and scored only
  after the margins for five twins were chosen on the fitting part;
- **unseen**: again new seeds and settings, added on 2026-11-29 after the fresh part had been
  scored, to judge the default plan, unchanged, a second time on data no choice saw.
- **final**: again new seeds and settings, added on 2026-11-30 after the unseen part had been
  scored and PrivTree's margin for five twins raised by the rule of `dp.plan.MARGIN_VALUES`
  applied to the fitting, fresh and unseen parts together; scored once, after that change.
- **last**: again new seeds and settings, added on 2026-11-30 after the final part had been
  scored (its worst miss, PrivTree on ages, led to the plan's sixth twin, of parallel strips);
  scored once, after that change.

The first two parts were fixed (by kind of structure, each kind in both parts where there are
two of it) before any result was looked at; `benchmarks/README.md` gives the rule.

    python benchmarks/corpus.py        # lists the corpus: name, part, N, share of empty cells
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402 (puts the repository on the path)
import dp  # noqa: E402

SIDE = peers.SIDE


@dataclass(frozen=True)
class Entry:
    """One data set: how to make its 256 x 256 counts, and why it is here."""
    name: str
    part: str                 # "fit", "validation", "holdout", "fresh", "unseen", "final" or "last"
    what: str
    make: Callable[[], np.ndarray]
    seed: int | None = None   # the generator's seed (None: real data read from the shared folder)


UNIT = dp.UniformGrid(dp.Domain(0.0, 0.0, 1.0, 1.0, name="unit square"), SIDE, SIDE)


def binned(x, y) -> np.ndarray:
    """Points in the unit square (outside ones dropped) -> 256 x 256 counts, row = y."""
    return UNIT.histogram(x, y)


def _clusters(rng, n, centres, sd, weights=None):
    """n points from Gaussian clusters at `centres` (k, 2) with spreads `sd` (scalar or k)."""
    k = len(centres)
    w = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, float) / np.sum(weights)
    which = rng.choice(k, size=n, p=w)
    sd = np.broadcast_to(np.asarray(sd, float), (k,))[which]
    return centres[which, 0] + rng.normal(0, 1, n) * sd, centres[which, 1] + rng.normal(0, 1, n) * sd


def dense_cores(seed, n=200_000, k=3, sd=0.02):
    rng = np.random.default_rng(seed)
    return binned(*_clusters(rng, n, rng.uniform(0.2, 0.8, (k, 2)), sd))


def small_clusters(seed, n=200_000, k=300, sd=0.004):
    rng = np.random.default_rng(seed)
    return binned(*_clusters(rng, n, rng.uniform(0.05, 0.95, (k, 2)), sd))


def heavy_tailed_clusters(seed, n=300_000, k=1000):
    """Cluster sizes Pareto(1.1): a few towns hold most points, many villages the rest."""
    rng = np.random.default_rng(seed)
    w = rng.pareto(1.1, k) + 1
    sd = 0.002 * np.sqrt(w / w.min()) ** 0.5
    return binned(*_clusters(rng, n, rng.uniform(0.02, 0.98, (k, 2)), sd, w))


def roads(seed, n=200_000, k=30, jitter=0.001):
    """Points along k random straight segments (roads), a little off the line."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0, 1, (k, 2)), rng.uniform(0, 1, (k, 2))
    which, t = rng.integers(0, k, n), rng.uniform(0, 1, n)
    p = a[which] + t[:, None] * (b[which] - a[which]) + rng.normal(0, jitter, (n, 2))
    return binned(p[:, 0], p[:, 1])


def street_grid(seed, n=200_000, lines=12):
    """A Manhattan street grid: points on evenly spaced horizontal and vertical streets."""
    rng = np.random.default_rng(seed)
    pos = np.linspace(0.1, 0.9, lines)
    along, across = rng.uniform(0.1, 0.9, n), pos[rng.integers(0, lines, n)] + rng.normal(0, 5e-4, n)
    vertical = rng.random(n) < 0.5
    return binned(np.where(vertical, across, along), np.where(vertical, along, across))


def coast(seed, n=150_000):
    """A winding coast: density falls off exponentially inland from a sinusoidal shore."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    shore = 0.3 + 0.1 * np.sin(8 * x) + 0.05 * np.sin(23 * x + 1)
    return binned(x, shore + rng.exponential(0.03, n))


def smooth(seed, n=100_000, k=4, sd=0.25):
    """Smooth spread: a few wide overlapping Gaussians over the whole box."""
    rng = np.random.default_rng(seed)
    return binned(*_clusters(rng, n, rng.uniform(0.3, 0.7, (k, 2)), sd))


def uniform(seed, n=50_000):
    rng = np.random.default_rng(seed)
    return binned(rng.uniform(0, 1, n), rng.uniform(0, 1, n))


def background_and_cores(seed, n=100_000, share=0.7):
    """A uniform background (share of the points) under five tight cores."""
    rng = np.random.default_rng(seed)
    m = int(n * share)
    x, y = _clusters(rng, n - m, rng.uniform(0.2, 0.8, (5, 2)), 0.01)
    return binned(np.r_[rng.uniform(0, 1, m), x], np.r_[rng.uniform(0, 1, m), y])


def categorical(seed, n=500_000, kx=20, ky=20):
    """Census-like: kx x ky distinct values per axis, Zipf-weighted combinations."""
    rng = np.random.default_rng(seed)
    vx, vy = np.sort(rng.uniform(0, 1, kx)), np.sort(rng.uniform(0, 1, ky))
    w = 1.0 / (rng.permutation(kx * ky) + 1.0)
    c = rng.choice(kx * ky, size=n, p=w / w.sum())
    return binned(vx[c % kx], vy[c // kx])


def medical(seed, n=100_000):
    """Medical-record-like: age in whole years (0-99) against a smooth skewed measure."""
    rng = np.random.default_rng(seed)
    age = np.clip(np.round(rng.gamma(6, 7, n)), 0, 99)
    measure = rng.lognormal(np.log(0.3) + 0.004 * age, 0.35, n)
    return binned((age + 0.5) / 100, measure)


def small_area_in_large_box(seed, n=100_000, extent=0.05):
    """All points in a small city (5% of the box's side): a box much larger than the data."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.2, 0.8 - extent, 2)
    x, y = _clusters(rng, n, c + rng.uniform(0, extent, (20, 2)), extent / 8)
    return binned(x, y)


def ring(seed, n=50_000):
    """A ring road: points on an annulus."""
    rng = np.random.default_rng(seed)
    t, r = rng.uniform(0, 2 * np.pi, n), 0.3 + rng.normal(0, 0.01, n)
    return binned(0.5 + r * np.cos(t), 0.5 + r * np.sin(t))


def country(seed, n=1_000_000, towns=3000):
    """A country: Zipf-sized towns scattered inside a blob-shaped border, empty sea around it."""
    rng = np.random.default_rng(seed)
    ang = rng.uniform(0, 2 * np.pi, towns * 4)
    rad = rng.uniform(0, 1, towns * 4) ** 0.5 * (0.35 + 0.08 * np.sin(3 * ang))
    c = np.c_[0.5 + rad * np.cos(ang), 0.5 + rad * np.sin(ang)][:towns]
    w = 1.0 / np.arange(1, towns + 1)
    return binned(*_clusters(rng, n, c, 0.002 + 0.01 * np.sqrt(w / w[0]), w))


def city(seed, n=1_000_000):
    """A large city: a dense centre falling off with distance, plus radial roads."""
    rng = np.random.default_rng(seed)
    m = n // 5
    r = rng.exponential(0.08, n - m)
    t = rng.uniform(0, 2 * np.pi, n - m)
    ang = rng.integers(0, 8, m) * np.pi / 4
    d = rng.uniform(0, 0.45, m)
    return binned(np.r_[0.5 + r * np.cos(t), 0.5 + d * np.cos(ang) + rng.normal(0, 0.002, m)],
                  np.r_[0.5 + r * np.sin(t), 0.5 + d * np.sin(ang) + rng.normal(0, 0.002, m)])


def gradient(seed, n=80_000):
    """Density rising linearly from west to east."""
    rng = np.random.default_rng(seed)
    return binned(np.sqrt(rng.uniform(0, 1, n)), rng.uniform(0, 1, n))


def checkerboard(seed, n=100_000, k=8):
    """Alternate squares of a k x k board dense and empty."""
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(0, 1, 2 * n), rng.uniform(0, 1, 2 * n)
    on = ((x * k).astype(int) + (y * k).astype(int)) % 2 == 0
    return binned(x[on][:n], y[on][:n])


def dpbench(name):
    return lambda: np.load(peers.DATA_DIR / peers.FILES[name])


def _e(name, part, what, fn, seed, **kw):
    return Entry(name, part, what, lambda: fn(seed, **kw), seed)


CORPUS = (
    Entry("checkin", "fit", "DPBench: Gowalla check-ins over the world", dpbench("checkin")),
    Entry("BeijingTaxiS", "fit", "DPBench: Beijing taxi starts", dpbench("BeijingTaxiS")),
    Entry("cabspottingS", "fit", "DPBench: San Francisco taxi starts",
          dpbench("cabspottingS")),
    _e("dense_cores", "fit", "three tight Gaussian cores", dense_cores, 11),
    _e("dense_cores_b", "validation", "five tight cores, wider", dense_cores, 12, k=5, sd=0.04),
    _e("small_clusters", "fit", "300 small clusters", small_clusters, 13),
    _e("small_clusters_b", "validation", "1,000 very small clusters", small_clusters, 14,
       n=100_000, k=1000, sd=0.002),
    _e("heavy_tail", "validation", "Pareto-sized towns, heavy-tailed", heavy_tailed_clusters, 15),
    _e("roads", "fit", "points on 30 straight roads", roads, 16),
    _e("street_grid", "validation", "a Manhattan street grid", street_grid, 17),
    _e("coast", "fit", "a winding coast, density falling inland", coast, 18),
    _e("ring", "validation", "a ring road", ring, 19),
    _e("smooth", "fit", "smooth spread over the whole box", smooth, 20),
    _e("smooth_b", "validation", "smooth spread, narrower", smooth, 21, n=30_000, sd=0.15),
    _e("uniform", "fit", "uniform over the box", uniform, 22),
    _e("gradient", "validation", "density rising west to east", gradient, 23),
    _e("background_cores", "fit", "uniform background under five cores",
       background_and_cores, 24),
    _e("checkerboard", "validation", "alternate squares dense and empty", checkerboard, 25),
    _e("categorical", "fit", "census-like: 20 x 20 distinct values", categorical, 26),
    _e("categorical_b", "validation", "census-like: 6 x 40 distinct values", categorical, 27,
       n=200_000, kx=6, ky=40),
    _e("medical", "validation", "whole-year ages against a smooth measure", medical, 28),
    _e("tiny_clusters", "fit", "1,000 points in five clusters", dense_cores, 29, n=1000, k=5, sd=0.03),
    _e("tiny_spread", "validation", "1,000 points spread smoothly", smooth, 30, n=1000),
    _e("small_in_large_box", "fit", "a small city in a box 20 times its size",
       small_area_in_large_box, 31),
    _e("small_in_large_box_b", "validation", "a small town in a box 50 times its size",
       small_area_in_large_box, 32, n=10_000, extent=0.02),
    _e("city", "fit", "a large city: dense centre and radial roads", city, 33),
    _e("country", "validation", "a country: 3,000 Zipf-sized towns, sea around", country, 34),
    _e("street_grid_h", "holdout", "a street grid of 8 streets each way", street_grid, 41,
       n=100_000, lines=8),
    _e("categorical_h", "holdout", "census-like: 12 x 30 distinct values", categorical, 42,
       n=150_000, kx=12, ky=30),
    _e("medical_h", "holdout", "whole-year ages against a measure, fewer records", medical, 43,
       n=40_000),
    _e("roads_h", "holdout", "points on 60 roads, wider", roads, 44, n=150_000, k=60, jitter=0.003),
    _e("heavy_tail_h", "holdout", "Pareto-sized towns, fewer of them", heavy_tailed_clusters, 45,
       n=200_000, k=300),
    _e("coast_h", "holdout", "a winding coast, fewer people", coast, 46, n=60_000),
    _e("checkerboard_h", "holdout", "a 5 x 5 board, dense and empty squares", checkerboard, 47,
       n=80_000, k=5),
    _e("background_cores_h", "holdout", "a thin background under five cores", background_and_cores,
       48, n=120_000, share=0.3),
    _e("dense_cores_h", "holdout", "two very tight cores", dense_cores, 49, n=100_000, k=2, sd=0.01),
    _e("smooth_h", "holdout", "smooth spread, 5,000 points", smooth, 50, n=5_000, sd=0.2),
    _e("gradient_h", "holdout", "density rising west to east, 300,000 points", gradient, 51,
       n=300_000),
    _e("country_h", "holdout", "a country of 1,000 towns", country, 52, n=300_000, towns=1000),
    _e("street_grid_f", "fresh", "a street grid of 20 streets each way", street_grid, 61,
       n=150_000, lines=20),
    _e("categorical_f", "fresh", "census-like: 8 x 50 distinct values", categorical, 62,
       n=100_000, kx=8, ky=50),
    _e("medical_f", "fresh", "whole-year ages against a measure, many records", medical, 63,
       n=250_000),
    _e("categorical_small_f", "fresh", "census-like: 30 x 30 values, 20,000 records", categorical,
       64, n=20_000, kx=30, ky=30),
    _e("roads_f", "fresh", "points on 15 roads", roads, 65, n=100_000, k=15),
    _e("small_clusters_f", "fresh", "600 small clusters", small_clusters, 66, n=150_000, k=600),
    _e("ring_f", "fresh", "a ring road, more people", ring, 67, n=150_000),
    _e("coast_f", "fresh", "a winding coast", coast, 68, n=200_000),
    _e("uniform_f", "fresh", "uniform over the box, 20,000 points", uniform, 69, n=20_000),
    _e("city_f", "fresh", "a large city, 300,000 points", city, 70, n=300_000),
    _e("small_in_large_box_f", "fresh", "a small city in a box 30 times its size",
       small_area_in_large_box, 71, n=50_000, extent=0.033),
    _e("heavy_tail_f", "fresh", "Pareto-sized towns, many of them", heavy_tailed_clusters, 72,
       n=400_000, k=3000),
    _e("street_grid_u", "unseen", "a street grid of 14 streets each way", street_grid, 81,
       n=80_000, lines=14),
    _e("categorical_u", "unseen", "census-like: 10 x 25 distinct values", categorical, 82,
       n=300_000, kx=10, ky=25),
    _e("medical_u", "unseen", "whole-year ages against a measure", medical, 83, n=120_000),
    _e("roads_u", "unseen", "points on 40 roads", roads, 84, n=120_000, k=40, jitter=0.002),
    _e("small_clusters_u", "unseen", "200 small clusters, fewer people", small_clusters, 85,
       n=80_000, k=200),
    _e("ring_u", "unseen", "a ring road, 30,000 points", ring, 86, n=30_000),
    _e("coast_u", "unseen", "a winding coast, 100,000 points", coast, 87, n=100_000),
    _e("uniform_u", "unseen", "uniform over the box, 100,000 points", uniform, 88, n=100_000),
    _e("city_u", "unseen", "a large city, 600,000 points", city, 89, n=600_000),
    _e("small_in_large_box_u", "unseen", "a small town in a box 25 times its size",
       small_area_in_large_box, 90, n=20_000, extent=0.04),
    _e("dense_cores_u", "unseen", "four tight cores", dense_cores, 91, n=150_000, k=4, sd=0.015),
    _e("gradient_u", "unseen", "density rising west to east, 60,000 points", gradient, 92,
       n=60_000),
    _e("street_grid_z", "final", "a street grid of 10 streets each way", street_grid, 101,
       n=120_000, lines=10),
    _e("street_grid_dense_z", "final", "a street grid of 24 streets each way, 60,000 points",
       street_grid, 102, n=60_000, lines=24),
    _e("medical_z", "final", "whole-year ages against a measure, 200,000 records", medical, 103,
       n=200_000),
    _e("medical_small_z", "final", "whole-year ages against a measure, 15,000 records", medical,
       104, n=15_000),
    _e("categorical_z", "final", "census-like: 15 x 20 distinct values", categorical, 105,
       n=80_000, kx=15, ky=20),
    _e("roads_z", "final", "points on 25 roads", roads, 106, n=90_000, k=25, jitter=0.0015),
    _e("small_clusters_z", "final", "400 small clusters", small_clusters, 107, n=120_000, k=400),
    _e("coast_z", "final", "a winding coast, 250,000 points", coast, 108, n=250_000),
    _e("ring_z", "final", "a ring road, 80,000 points", ring, 109, n=80_000),
    _e("city_z", "final", "a large city, 400,000 points", city, 110, n=400_000),
    _e("heavy_tail_z", "final", "Pareto-sized towns, 800 of them", heavy_tailed_clusters, 111,
       n=150_000, k=800),
    _e("checkerboard_z", "final", "a 6 x 6 board, dense and empty squares", checkerboard, 112,
       n=150_000, k=6),
    _e("street_grid_l", "last", "a street grid of 16 streets each way", street_grid, 121,
       n=90_000, lines=16),
    _e("street_grid_sparse_l", "last", "a street grid of 6 streets each way, 50,000 points",
       street_grid, 122, n=50_000, lines=6),
    _e("medical_l", "last", "whole-year ages against a measure, 30,000 records", medical, 123,
       n=30_000),
    _e("medical_small_l", "last", "whole-year ages against a measure, 8,000 records", medical,
       124, n=8_000),
    _e("categorical_l", "last", "census-like: 25 x 12 distinct values", categorical, 125,
       n=60_000, kx=25, ky=12),
    _e("roads_l", "last", "points on 20 roads", roads, 126, n=70_000, k=20, jitter=0.001),
    _e("small_clusters_l", "last", "250 small clusters", small_clusters, 127, n=100_000, k=250),
    _e("coast_l", "last", "a winding coast, 120,000 points", coast, 128, n=120_000),
    _e("ring_l", "last", "a ring road, 40,000 points", ring, 129, n=40_000),
    _e("city_l", "last", "a large city, 250,000 points", city, 130, n=250_000),
    _e("uniform_l", "last", "uniform over the box, 10,000 points", uniform, 131, n=10_000),
    _e("background_cores_l", "last", "a background under five cores, half the points",
       background_and_cores, 132, n=90_000, share=0.5),
)


PARTS = tuple(dict.fromkeys(e.part for e in CORPUS))    # in the order they were added


def entries(part: str | None = None, names=None) -> list[Entry]:
    """The corpus, or the entries of one part, or the named ones; DPBench entries only when the
    shared matrices are there."""
    have = peers.DATA_DIR.is_dir()
    return [e for e in CORPUS if (part is None or e.part == part)
            and (names is None or e.name in names) and (e.seed is not None or have)]


def main() -> None:
    print("| data | part | N | cells empty | what | seed |\n|---|---|---|---|---|---|")
    for e in entries():
        m = e.make()
        print(f"| {e.name} | {e.part} | {int(m.sum()):,} | {100 * np.mean(m == 0):.0f}% | {e.what} "
              f"| {e.seed if e.seed is not None else 'real'} |")


if __name__ == "__main__":
    main()
