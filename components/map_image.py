"""The map of a release as a PNG file: its private layer, north up, with a colour bar and the
bar's end labels, drawn on the server (no tiles, no browser), for the owner's and the public
page's "Map (PNG)" downloads."""
from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np

import dp

from . import map_panel, render

PNG_WIDTH = 640            # the map PNG's least width: whole pixels per grid column, up to MAX_PIXELS
FONT = {                   # 3×5 pixel digits and signs for the PNG legend's end labels
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ",": "000000000010100", ".": "000000000000010",
    "−": "000000111000000", "-": "000000111000000", "≥": "100010100000111", "≤": "001010001000111",
    " ": "000000000000000",
}


KEEP = 8                   # PNGs kept per process (a few hundred kB each)
_KEPT: "OrderedDict[str, bytes]" = OrderedDict()
_LOCK = threading.Lock()


def map_png_of(key: str, rel) -> bytes:
    """`map_png(rel)` for the release stored under `key`, kept for the last KEEP keys in this
    process: a stored release never changes under its key, so a second click on "Map (PNG)"
    gets the same bytes without drawing them again."""
    with _LOCK:
        if key in _KEPT:
            _KEPT.move_to_end(key)
            return _KEPT[key]
    png = map_png(rel)
    with _LOCK:
        _KEPT[key] = png
        while len(_KEPT) > KEEP:
            _KEPT.popitem(last=False)
    return png


def map_png(rel) -> bytes:
    """The private layer as a PNG (north up, the box's shape at its middle latitude), with a
    colour bar and its end labels under it: private people per km² (whole, >= 0), as on the map."""
    grid, regions, _, _, people = map_panel.structure(rel)
    painted = render.on_grid(grid, regions, people / render.region_km2(grid, regions))
    scale = render.legend_scale(painted)
    d, p = rel.domain, dp.Projection(rel.domain)
    gy, gx = painted.shape
    aspect = d.height * p.my / (d.width * p.mx)                          # height / width on the ground
    width = min(render.MAX_PIXELS, gx * max(1, math.ceil(PNG_WIDTH / gx)), round(render.MAX_PIXELS / aspect))
    width = max(width, PNG_WIDTH // 2)
    height = int(np.clip(round(width * aspect), 64, render.MAX_PIXELS))
    cols = np.minimum((np.arange(width) + 0.5) * gx / width, gx - 1).astype(int)
    rows = gy - 1 - np.minimum((np.arange(height) + 0.5) * gy / height, gy - 1).astype(int)
    image = render.colourise(painted[rows][:, cols], scale.vmin, scale.vmax, render.SEQUENTIAL, alpha=255)
    return render.png_bytes(np.concatenate([image, legend_strip(width, scale)], axis=0))


def legend_strip(width: int, scale: render.Legend, height: int = 50, pad: int = 12, size: int = 3) -> np.ndarray:
    """A white RGBA strip with the colour bar and its two end labels (the legend's first and
    last ticks) in a small pixel font."""
    strip = np.full((height, width, 4), 255, dtype=np.uint8)
    bar_w = max(1, min(width - 2 * pad, 320))
    bar = render.colourise(np.linspace(scale.vmin, scale.vmax, bar_w), scale.vmin, scale.vmax,
                           render.SEQUENTIAL, alpha=255)
    strip[8:20, pad:pad + bar_w] = bar[None]
    first, last = scale.ticks[0][1], scale.ticks[-1][1]
    stamp(strip, first, pad, 26, size)
    stamp(strip, last, max(pad, pad + bar_w - text_width(last, size)), 26, size)
    return strip


def text_width(text: str, size: int = 2) -> int:
    """Pixels `stamp` takes to write `text`."""
    return len(text) * 4 * size - size


def stamp(image: np.ndarray, text: str, x: int, y: int, size: int = 2) -> None:
    """Draw `text` in dark grey at (x, y) with the 3×5 FONT, `size` pixels per font pixel."""
    for ch in text:
        glyph = FONT.get(ch, FONT[" "])
        for i, bit in enumerate(glyph):
            if bit == "1":
                r, c = divmod(i, 3)
                image[y + r * size:y + (r + 1) * size, x + c * size:x + (c + 1) * size, :3] = 40
        x += 4 * size
        if x >= image.shape[1]:
            return
