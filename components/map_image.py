"""The map of a release as a PNG, drawn on the server (no tiles, no browser).

`map_png` is the "Map (PNG)" download of the owner's page and the public page: a figure a person
can paste in a report (matplotlib), 1600 px wide, with a title naming the mechanism, ε, the unit
of privacy and the release's date, the private layer north up in the box's own shape, the box's
outline, a colour bar with its units and an attribution line. `layer_png` is the bare layer, the
plan panel's small preview.
"""
from __future__ import annotations

import io
import math
import threading
from collections import OrderedDict

import numpy as np

import dp
from dp.provenance import DISTRIBUTION, software_version

from . import map_panel, render

PNG_WIDTH = 640            # the preview's least width: whole pixels per grid column, up to MAX_PIXELS
REPORT_DPI = 100
REPORT_WIDTH_IN = 16       # 1600 px
UNITS = "private people per km² (whole, ≥ 0)"
ATTRIBUTION = (f"Made with {DISTRIBUTION} {{version}}. Differentially private counts: each is noisy, "
               "see the release's ranges. No base map; box outline in grey.")

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


def density(rel) -> tuple[np.ndarray, render.Legend]:
    """The private layer on the release's base grid (private people per km², as the map paints
    it) and its colour scale."""
    grid, regions, _, _, people = map_panel.structure(rel)
    painted = render.on_grid(grid, regions, people / render.region_km2(grid, regions))
    return painted, render.legend_scale(painted)


def title_lines(rel) -> tuple[str, str]:
    """(title, subtitle) of the report figure: what was released, at what ε, for whom, when."""
    when = (getattr(rel, "released_at", None) or "")[:10] or "date not recorded"
    private = "" if rel.private else " (NOT differentially private)"
    return (f"{rel.spec.label}{private}: {UNITS.split(' (')[0]}",
            f"ε = {rel.epsilon:g} · {rel.privacy_level} · released {when} · "
            f"{rel.domain.name or 'typed box'}")


def map_figure(rel):
    """The report figure (a matplotlib Figure, no pyplot state): title, layer, outline, colour
    bar with units, attribution."""
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    painted, scale = density(rel)
    d, p = rel.domain, dp.Projection(rel.domain)
    aspect = p.my / p.mx                                   # degrees of latitude against longitude
    shape = d.height * aspect / d.width                    # the box's height over its width on the ground
    fig = Figure(figsize=(REPORT_WIDTH_IN, float(np.clip(REPORT_WIDTH_IN * 0.62 * shape + 2.6, 5, 16))),
                 dpi=REPORT_DPI, layout="constrained")
    fig.get_layout_engine().set(rect=(0, 0.03, 1, 0.97))     # the attribution line below it all
    title, subtitle = title_lines(rel)
    fig.suptitle(f"{title}\n{subtitle}", fontsize=15)
    ax = fig.add_subplot()
    cmap = LinearSegmentedColormap.from_list("sequential", render.SEQUENTIAL)
    image = ax.imshow(painted, extent=(d.west, d.east, d.south, d.north), origin="lower", cmap=cmap,
                      vmin=scale.vmin, vmax=scale.vmax, interpolation="nearest", aspect=aspect)
    ax.add_patch(Rectangle((d.west, d.south), d.width, d.height, fill=False, edgecolor="#555555",
                           linewidth=1.5, label="box"))
    ax.set_xlabel("longitude (°)")
    ax.set_ylabel("latitude (°)")
    bar = fig.colorbar(image, ax=ax, shrink=0.8, extend=_extend(scale))
    bar.set_label(UNITS, fontsize=12)
    fig.text(0.01, 0.005, ATTRIBUTION.format(version=software_version()), fontsize=10, color="#444444")
    return fig


def map_png(rel) -> bytes:
    """The report figure (`map_figure`) as PNG bytes, 1600 px wide."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = map_figure(rel)
    out = io.BytesIO()
    FigureCanvasAgg(fig).print_png(out)
    return out.getvalue()


def layer_png(rel) -> bytes:
    """The private layer alone as a small PNG (north up, the box's shape at its middle
    latitude): the plan panel's preview, beside its own words."""
    painted, scale = density(rel)
    d, p = rel.domain, dp.Projection(rel.domain)
    gy, gx = painted.shape
    aspect = d.height * p.my / (d.width * p.mx)                          # height / width on the ground
    width = min(render.MAX_PIXELS, gx * max(1, math.ceil(PNG_WIDTH / gx)), round(render.MAX_PIXELS / aspect))
    width = max(width, PNG_WIDTH // 2)
    height = int(np.clip(round(width * aspect), 64, render.MAX_PIXELS))
    cols = np.minimum((np.arange(width) + 0.5) * gx / width, gx - 1).astype(int)
    rows = gy - 1 - np.minimum((np.arange(height) + 0.5) * gy / height, gy - 1).astype(int)
    return render.png_bytes(render.colourise(painted[rows][:, cols], scale.vmin, scale.vmax,
                                             render.SEQUENTIAL, alpha=255))


def _extend(scale: render.Legend) -> str:
    """The colour bar's arrows: values beyond its ends were drawn in the end colours."""
    return {(True, True): "both", (True, False): "max", (False, True): "min"}.get(
        (scale.capped_top, scale.capped_bottom), "neither")
