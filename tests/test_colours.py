"""Colours a colour-blind reader can tell apart (issue 26, item 7).

Each colour is simulated as seen with protanopia, deuteranopia and tritanopia (the severity-1
matrices of Machado, Oliveira & Fernandes, "A physiologically-based model for simulation of
color vision deficiency", IEEE TVCG 2009, on linear sRGB) and compared in CIELAB (ΔE*76)."""
import itertools

import numpy as np
import pytest

from components import render

MACHADO = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
    "typical": np.eye(3).tolist(),
}
DARK2 = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
MIN_DELTA_E = 12.0       # clearly distinct side by side (a just-noticeable difference is about 2.3)


def linear_rgb(hex_colour: str) -> np.ndarray:
    c = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def cielab(rgb: np.ndarray) -> np.ndarray:
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ np.clip(rgb, 0, 1)
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > 216 / 24389, np.cbrt(t), (24389 / 27 * t + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen(colours, vision: str) -> list:
    return [cielab(np.array(MACHADO[vision]) @ linear_rgb(c)) for c in colours]


def closest_pair(colours, vision: str) -> float:
    return min(float(np.linalg.norm(a - b)) for a, b in itertools.combinations(seen(colours, vision), 2))


@pytest.mark.parametrize("vision", sorted(MACHADO))
def test_chart_palette_stays_distinct_for_colour_blind_readers(vision):
    assert closest_pair(render.CATEGORICAL, vision) >= MIN_DELTA_E


def test_the_check_catches_a_palette_that_is_not_safe():
    """ColorBrewer's Dark2 (the charts' old palette): its green and pink merge under deuteranopia."""
    assert closest_pair(DARK2, "deuteranopia") < MIN_DELTA_E
    assert closest_pair(DARK2, "typical") >= MIN_DELTA_E


@pytest.mark.parametrize("vision", sorted(MACHADO))
def test_map_scales_read_by_lightness_alone(vision):
    """The sequential scale darkens at every step and the diverging one is lightest in the
    middle, for every kind of colour vision: a count is read from lightness, not hue."""
    light = [lab[0] for lab in seen(render.SEQUENTIAL, vision)]
    assert all(a > b + 2 for a, b in zip(light, light[1:]))
    div = [lab[0] for lab in seen(render.DIVERGING, vision)]
    mid = len(div) // 2
    assert all(a < b for a, b in zip(div[:mid], div[1:mid + 1]))
    assert all(a > b for a, b in zip(div[mid:], div[mid + 1:]))
