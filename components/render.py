"""Grid rendering for the maps: one PNG image overlay per layer, cell areas, the domain outline.

A 256x256 grid is 65,536 cells; as GeoJSON polygons that is megabytes of SVG and a frozen tab.
As one PNG (a few kB, drawn by the browser as a single <img>) any grid size stays smooth. Rows
are resampled from equal-latitude cells to Web Mercator pixel rows so cells line up with the
base map even for continent-sized boxes.
"""
from __future__ import annotations

import base64
import math
import struct
import zlib
from dataclasses import dataclass

import dash_leaflet as dl
import numpy as np

import dp
from dp.mechanisms.leaves import paint

SEQUENTIAL = ["#fff7ec", "#fee8c8", "#fdd49e", "#fdbb84", "#fc8d59", "#ef6548", "#d7301f", "#990000"]
# Okabe & Ito's colour-blind safe palette for lines and bars (tests/test_colours.py checks it)
CATEGORICAL = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
DIVERGING = ["#2166ac", "#67a9cf", "#d1e5f0", "#f7f7f7", "#fddbc7", "#ef8a62", "#b2182b"]
MAX_PIXELS = 1024
LEGEND_PX = 240          # width of the map legend's colour bar
CHAR_PX = 7.5            # width of one legend label character, with room to spare


def _hex_to_rgb(colours):
    return np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in colours], dtype=np.float64)


def colourise(values: np.ndarray, vmin: float, vmax: float, colours, alpha: int = 200) -> np.ndarray:
    """RGBA uint8 image from values, linear between vmin and vmax (saturating outside)."""
    anchors = _hex_to_rgb(colours)
    t = np.clip((values - vmin) / (vmax - vmin if vmax > vmin else 1.0), 0, 1)
    pos = t * (len(anchors) - 1)
    lo = np.floor(pos).astype(int).clip(0, len(anchors) - 2)
    frac = (pos - lo)[..., None]
    rgb = anchors[lo] * (1 - frac) + anchors[lo + 1] * frac
    a = np.full(values.shape + (1,), alpha, dtype=np.float64)
    a[~np.isfinite(values)] = 0
    return np.concatenate([rgb, a], axis=-1).round().astype(np.uint8)


def _mercator_y(lat):
    return np.log(np.tan(np.pi / 4 + np.radians(np.clip(lat, -85, 85)) / 2))


def mercator_rows(south: float, north: float, n_rows: int, n_pixels: int) -> np.ndarray:
    """Grid row (0 = south) shown by each image pixel row (0 = top) in Web Mercator."""
    ys = np.linspace(_mercator_y(north), _mercator_y(south), n_pixels + 1)
    mid = (ys[:-1] + ys[1:]) / 2
    lat = np.degrees(2 * np.arctan(np.exp(mid)) - np.pi / 2)
    return np.clip(((lat - south) / (north - south) * n_rows).astype(int), 0, n_rows - 1)


def grid_image(values: np.ndarray, bounds, vmin, vmax, colours) -> str:
    """PNG data URL of a (rows, cols) grid (row 0 = south) for an ImageOverlay on `bounds`."""
    rows, cols = values.shape
    west, south, east, north = bounds
    px_w = min(MAX_PIXELS, max(cols, math.ceil(256 / cols) * cols))
    px_h = min(MAX_PIXELS, max(rows * 2, 256))
    col_idx = np.minimum((np.arange(px_w) + 0.5) * cols / px_w, cols - 1).astype(int)
    row_idx = mercator_rows(south, north, rows, px_h)
    img = colourise(values[row_idx][:, col_idx], vmin, vmax, colours)
    return "data:image/png;base64," + base64.b64encode(png_bytes(img)).decode()


def png_bytes(rgba: np.ndarray) -> bytes:
    """Minimal PNG encoder (RGBA, 8 bit) so the app needs no imaging library."""
    h, w, _ = rgba.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rgba.reshape(h, w * 4)], axis=1).tobytes()

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def colour_range(values: np.ndarray, diverging: bool = False) -> tuple[float, float]:
    """Display range: 0 to the 99th percentile (counts), or symmetric around 0 (errors)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (0.0, 1.0)
    if diverging:
        m = float(np.percentile(np.abs(finite), 99)) or 1.0
        return (-m, m)
    return (0.0, float(np.percentile(finite, 99)) or 1.0)


def nice_step(span: float, n: int = 5) -> float:
    """The smallest step of 1, 2 or 5 × 10^k that cuts `span` into at most n intervals: round,
    readable ticks."""
    power = 10.0 ** math.floor(math.log10(span / n))
    return next(f * power for f in (1, 2, 5, 10) if span / (f * power) <= n * (1 + 1e-9))


def _decimals(step: float) -> int:
    """Decimals that write every multiple of a nice step exactly (0.05 -> 2, 20 -> 0)."""
    return max(0, -math.floor(math.log10(step) + 1e-9))


def _multiples(lo: float, hi: float, step: float) -> list[float]:
    """The multiples of `step` in [lo, hi], rounded to the step's decimals (no float dust)."""
    d = _decimals(step)
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    return [round(k * step, d) + 0.0 for k in range(first, last + 1)]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values (multiples of a nice step, at most n + 1 of them) inside [lo, hi]."""
    return _multiples(lo, hi, nice_step(hi - lo, n)) if hi > lo else [float(lo)]


def tick_label(value: float, step: float) -> str:
    """A tick (a multiple of `step`) as people write it: '0', '0.05', '2,000', '−0.1'. Written
    with the step's decimals less trailing zeros, distinct ticks never share a label."""
    text = f"{value:,.{_decimals(step)}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "0") else text.replace("-", "−")


def chart_title(text: str) -> dict:
    """A chart title at the top left, below the row of plotly's toolbar (top right) so the two
    never overlap; the chart's top margin must leave it 70 px."""
    return {"text": text, "x": 0, "xanchor": "left", "yref": "container", "y": 1, "yanchor": "top",
            "pad": {"t": 36}, "font": {"size": 14}}


def log_ticks(values, most: int = 7) -> tuple[list[float], list[str]]:
    """(tick values, labels) for a log axis over `values` (> 0): 1, 2 and 5 × 10^k from the
    last one at or below the smallest value to the first one at or above the largest (so an
    axis ranged on the first and last tick holds every value), thinned to powers of 10, then
    every other decade, until at most `most` remain; each labelled once as people write it
    ('0.05', '2', '1,000'). Plotly's own log ticks label minor ones '2 3 … 9' or '5, 2' twice."""
    v = [float(x) for x in values if x is not None and x > 0 and math.isfinite(x)]
    if not v:
        return [], []
    lo, hi = min(v), max(v)
    k0, k1 = math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1
    for mantissas, every in (((1, 2, 5), 1), ((1,), 1), ((1,), 2), ((1,), 3), ((1,), 5), ((1,), 10)):
        ticks = [m * 10.0 ** k for k in range(k0, k1 + every) if (k - k0) % every == 0 for m in mantissas]
        first = max(t for t in ticks if t <= lo * (1 + 1e-9))
        last = min(t for t in ticks if t >= hi * (1 - 1e-9))
        chosen = [t for t in ticks if first <= t <= last]
        if len(chosen) <= most:
            break
    return chosen, [f"{t:,.{max(0, -math.floor(math.log10(t) + 1e-9))}f}" for t in chosen]


@dataclass(frozen=True)
class Legend:
    """A colour bar's range and its labelled ticks: positions in [0, 1] along the bar; the end
    labels say '≥' / '≤' when values beyond the range were drawn in the end colour."""

    vmin: float
    vmax: float
    ticks: tuple            # ((position, label), ...), first at 0 and last at 1
    capped_top: bool
    capped_bottom: bool


def labels_fit(labels: list[str], width_px: float = LEGEND_PX) -> bool:
    """Whether tick labels placed as the legend places them (evenly spaced; the first starting at
    the bar's left end, the last ending at its right end, the others centred on their ticks)
    stay a character apart: "800" beside a right-aligned "≥ 1,000" did not."""
    n = len(labels) - 1
    if n == 0:
        return len(labels[0]) * CHAR_PX <= width_px
    spans = []
    for i, text in enumerate(labels):
        w, at = len(text) * CHAR_PX, width_px * i / n
        spans.append((at, at + w) if i == 0 else (at - w, at) if i == n else (at - w / 2, at + w / 2))
    return all(b[0] - a[1] >= CHAR_PX for a, b in zip(spans, spans[1:]))


def legend_scale(values: np.ndarray, diverging: bool = False, width_px: float = LEGEND_PX) -> Legend:
    """The colour range (`colour_range`) widened to round ticks, with labels that fit the bar.

    Both ends become multiples of a nice step, so both carry a tick; fewer ticks are used while
    the labels would not fit side by side in `width_px` (`labels_fit`).
    """
    lo, hi = colour_range(values, diverging)
    finite = values[np.isfinite(values)]
    for n in (5, 4, 3, 2, 1):
        step = nice_step(hi - lo, n)
        vmin, vmax = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
        at = _multiples(vmin, vmax, step)
        dust = 1e-9 * step            # painting leaves float dust such as -9e-14: not "≤ 0"
        top, bottom = bool(np.any(finite > vmax + dust)), bool(np.any(finite < vmin - dust))
        labels = [tick_label(v, step) for v in at]
        labels[-1] = ("≥ " if top else "") + labels[-1]
        labels[0] = ("≤ " if bottom else "") + labels[0]
        if labels_fit(labels, width_px):
            break
    vmin, vmax = at[0], at[-1]
    ticks = tuple(((v - vmin) / (vmax - vmin), t) for v, t in zip(at, labels))
    return Legend(vmin, vmax, ticks, top, bottom)


def cell_km2(grid: dp.UniformGrid) -> float:
    """Area of one base cell in km² (equirectangular at the domain's mid latitude)."""
    p = dp.Projection(grid.domain)
    return grid.domain.width / grid.gx * p.mx * grid.domain.height / grid.gy * p.my / 1e6


def region_km2(grid: dp.UniformGrid, regions: np.ndarray) -> np.ndarray:
    """Area in km² of each region [r0, r1) x [c0, c1) of base cells: counts per km² compare
    across regions and releases of different sizes."""
    return (regions[:, 1] - regions[:, 0]) * (regions[:, 3] - regions[:, 2]) * cell_km2(grid)


def is_row_major(grid: dp.UniformGrid, regions: np.ndarray) -> bool:
    """Whether the regions are the grid's cells one by one in row-major order (row 0 = south),
    the order a cell layer's image and hover readout read them in. A full quadtree releases
    every cell too, but in its tree's order."""
    if len(regions) != grid.n_cells:
        return False
    j, k = np.divmod(np.arange(grid.n_cells), grid.gx)
    return bool(np.array_equal(regions, np.column_stack([j, j + 1, k, k + 1])))


def in_row_major(grid: dp.UniformGrid, regions: np.ndarray, *values):
    """(regions, *values) reordered to row-major when the regions are every cell of the grid,
    one each, in another order; else as given."""
    if len(regions) != grid.n_cells or is_row_major(grid, regions):
        return (regions, *values)
    if not ((regions[:, 1] - regions[:, 0] == 1) & (regions[:, 3] - regions[:, 2] == 1)).all():
        return (regions, *values)
    order = np.argsort(regions[:, 0] * grid.gx + regions[:, 2], kind="stable")
    return (regions[order], *(None if v is None else np.asarray(v)[order] for v in values))


def on_grid(grid: dp.UniformGrid, regions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-region values painted on the base grid (rows, cols) for an image; a release of every
    cell in row-major order is reshaped as it is (exact, and fast for 1024² grids)."""
    if is_row_major(grid, regions):
        return np.asarray(values).reshape(grid.shape)
    return paint(grid.shape, regions, values)


def domain_outline(d: dp.Domain):
    """The public domain box as a dashed outline."""
    return dl.Rectangle(bounds=[[d.south, d.west], [d.north, d.east]], interactive=False,
                        pathOptions={"color": "#333", "weight": 2, "fill": False, "dashArray": "6 4"})
