"""Public boxes to declare as a domain: cities, regions and countries (west, south, east, north).

A preset is public knowledge, so declaring one leaks nothing. `presets_containing` helps the
owner find one that holds their points; it reads the data, so its answer is for the owner's
eyes only, and the box they then choose is their declaration.
"""
from __future__ import annotations

import numpy as np

from .domain import Domain


def _boxes(rows) -> dict[str, Domain]:
    """name -> Domain for (name, west, south, east, north) rows."""
    return {name: Domain(*box, name=name) for name, *box in rows}


CITIES = _boxes([
    ("New York (Manhattan & Brooklyn)", -74.05, 40.60, -73.85, 40.90),
    ("London", -0.35, 51.35, 0.15, 51.65),
    ("Paris", 2.22, 48.80, 2.47, 48.92),
    ("San Francisco", -122.52, 37.70, -122.35, 37.82),
    ("Beijing", 116.20, 39.75, 116.55, 40.05),
    ("Melbourne", 144.85, -37.90, 145.05, -37.75),
    ("Berlin", 13.09, 52.34, 13.76, 52.68),
    ("Boston", -71.19, 42.23, -70.99, 42.40),
    ("Chicago", -87.94, 41.64, -87.52, 42.02),
    ("Istanbul", 28.60, 40.80, 29.40, 41.20),
    ("Los Angeles", -118.67, 33.70, -118.15, 34.34),
    ("Madrid", -3.84, 40.31, -3.52, 40.56),
    ("Mexico City", -99.36, 19.18, -98.94, 19.59),
    ("Moscow", 37.32, 55.57, 37.87, 55.92),
    ("Mumbai", 72.77, 18.89, 72.99, 19.27),
    ("Rome", 12.34, 41.80, 12.62, 41.99),
    ("São Paulo", -46.83, -23.80, -46.36, -23.36),
    ("Seattle", -122.44, 47.49, -122.24, 47.74),
    ("Shanghai", 121.20, 30.90, 121.80, 31.50),
    ("Singapore", 103.60, 1.15, 104.10, 1.48),
    ("Sydney", 150.90, -34.10, 151.35, -33.70),
    ("Tokyo (23 wards)", 139.56, 35.52, 139.92, 35.82),
    ("Toronto", -79.64, 43.58, -79.12, 43.86),
    ("Washington DC", -77.12, 38.79, -76.91, 39.00),
])
REGIONS = _boxes([
    ("San Francisco Bay Area", -122.65, 37.20, -121.70, 38.10),
    ("Europe", -25.0, 34.0, 45.0, 72.0),
    ("North America", -170.0, 5.0, -50.0, 75.0),
    ("East Asia", 100.0, 18.0, 150.0, 54.0),
])
COUNTRIES = _boxes([
    ("Contiguous USA", -125.5, 25.0, -65.5, 50.0),
    ("Australia", 112.9, -43.7, 153.7, -10.6),
    ("Brazil", -74.0, -33.8, -34.8, 5.3),
    ("Canada", -141.0, 41.7, -52.6, 83.1),
    ("China", 73.5, 18.1, 134.8, 53.6),
    ("France (metropolitan)", -5.2, 41.3, 9.6, 51.1),
    ("Germany", 5.8, 47.2, 15.1, 55.1),
    ("India", 68.1, 6.7, 97.4, 35.5),
    ("Italy", 6.6, 36.6, 18.6, 47.1),
    ("Japan", 122.9, 24.0, 146.0, 45.6),
    ("Spain (mainland)", -9.4, 35.9, 3.4, 43.8),
    ("United Kingdom", -8.7, 49.8, 1.8, 60.9),
    ("World", -180.0, -90.0, 180.0, 90.0),
])
PRESETS: dict[str, Domain] = {**CITIES, **REGIONS, **COUNTRIES}


def presets_containing(x, y, share: float = 0.9) -> list[tuple[str, float]]:
    """(preset name, share of the points inside) for the presets holding at least `share` of
    them, smallest box first. OWNER ONLY: it reads the points."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size == 0:
        return []
    inside = [(d, float(d.contains(x, y).mean())) for d in PRESETS.values()]
    return [(d.name, s) for d, s in sorted(inside, key=lambda t: t[0].area) if s >= share]
