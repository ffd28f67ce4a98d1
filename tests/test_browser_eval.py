"""Browser test of the evaluation panel on an upload where most random rectangles hold no points.

The points sit in one corner of the New York box, so most queries are empty and the unbounded
relative error is infinite: the panel must still show finite bounded errors with ρ stated, say
nothing of 'inf' or 'nan', download its table as CSV and its chart as PNG, and fit the window.
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from test_browser import on_screen, plotly_loaded, poll_until, table_rows, upload   # skips without chromium
from test_browser_workspace import ON_GUNICORN
from test_browser_workspace import gunicorn, page   # noqa: F401  (fixtures: the multi-worker server)

import dp
from components import evaluation_panel, ids
from selenium.webdriver.common.action_chains import ActionChains

pytestmark = pytest.mark.browser

RHO = 10
NO_INF_NAN = re.compile(r"\b(inf|infinity|nan)\b|∞", re.I)


def corner_csv(path: Path) -> int:
    """300 points in the south-west cell (of 40 x 40) of the New York box; returns how many."""
    M = np.zeros((40, 40), dtype=int)
    M[0, 0] = 300
    data = dp.evaluate.points_from_matrix(M, dp.PRESETS["New York (Manhattan & Brooklyn)"], seed=5)
    path.write_text("lon,lat\n" + "".join(f"{x:.6f},{y:.6f}\n" for x, y in zip(data.x, data.y)))
    return data.n


def set_input(dash_duo, cid: str, value) -> None:
    """Replace a text or number box's value."""
    box = dash_duo.find_element(f"#{cid}")
    box.clear()
    box.send_keys(str(value))


def plotted_values(dash_duo, graph: str) -> list:
    """Every x and y value drawn in a chart, read from plotly's own figure in the page."""
    return dash_duo.driver.execute_script(
        "var g = document.querySelector(arguments[0] + ' .js-plotly-plot');"
        "return g.data.flatMap(t => Array.from(t.x).concat(Array.from(t.y)));", f"#{graph}")


def rects_overlap(dash_duo, graph: str, a: str, b: str) -> bool:
    """Whether the boxes of two parts of a chart (e.g. its title and its modebar) intersect."""
    return dash_duo.driver.execute_script(
        "var g = document.getElementById(arguments[0]);"
        "var p = g.querySelector(arguments[1]).getBoundingClientRect();"
        "var q = g.querySelector(arguments[2]).getBoundingClientRect();"
        "return p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom;",
        graph, a, b)


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


@ON_GUNICORN
def test_evaluation_on_mostly_empty_queries_is_finite_explained_and_downloadable(page, tmp_path):
    # on the server a user runs (3 workers), as a visitor on a file of its own; both widths below
    dash_duo, _ = page
    path = tmp_path / "corner.csv"
    n = corner_csv(path)
    upload(dash_duo.driver, path)
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", f"{n} points", timeout=20)
    # nothing of the results shows before a run: no empty axes, no empty table, and no chart
    # library fetched for them (plotly.js comes with the first chart)
    assert not dash_duo.find_element(f"#{ids.EVAL_RESULTS}").is_displayed()
    assert not on_screen(dash_duo, ids.EVAL_FIG_EPS) and not plotly_loaded(dash_duo)
    set_input(dash_duo, ids.EVAL_NQ, 10)
    set_input(dash_duo, ids.EVAL_REPS, 1)
    set_input(dash_duo, ids.EVAL_RHO, RHO)
    dash_duo.find_element(f"#{ids.EVAL_RUN}").click()
    dash_duo.wait_for_contains_text(f"#{ids.EVAL_STATUS}", "Done", timeout=120)
    poll_until(lambda: dash_duo.find_elements(f"#{ids.EVAL_FIG_EPS} .js-plotly-plot"), 20)
    assert on_screen(dash_duo, ids.EVAL_FIG_EPS) and plotly_loaded(dash_duo)

    # rho is stated; most of this workload held fewer than rho points
    note = dash_duo.find_element(f"#{ids.EVAL_NOTE}").text
    assert f"ρ = {RHO} points" in note
    share = int(re.search(r"In this run (\d+)% of the queries", note).group(1))
    assert share > 50
    headers = [h.text for h in dash_duo.find_elements(f"#{ids.EVAL_TABLE} th")]
    assert any(f"bounded relative error, ρ = {RHO}" in h for h in headers)
    rows = table_rows(dash_duo, ids.EVAL_TABLE)
    assert len(rows) == 10                                   # the first page of 3 x 3 x 3
    for row in rows:
        assert math.isfinite(number(row["bounded"])) and math.isfinite(number(row["absolute"]))
        assert row["bounded_iqr"] == "one run: no spread"
    values = plotted_values(dash_duo, ids.EVAL_FIG_EPS) + plotted_values(dash_duo, ids.EVAL_FIG_SIZE)
    assert values and all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)
    assert "bounded relative error" in dash_duo.find_element(f"#{ids.EVAL_FIG_EPS} .gtitle").text

    # the absolute error is one click away, and still finite
    dash_duo.find_element(f"#{ids.EVAL_METRIC} input[value=absolute]").click()
    dash_duo.wait_for_contains_text(f"#{ids.EVAL_FIG_EPS} .gtitle", "absolute error", timeout=10)
    assert all(math.isfinite(v) for v in plotted_values(dash_duo, ids.EVAL_FIG_EPS))
    # most errors here are 0: the log axis starts near the metric's floor (it once ran from 1e-13)
    bottom = dash_duo.driver.execute_script(
        "return document.querySelector(arguments[0] + ' .js-plotly-plot')._fullLayout.yaxis.range[0]",
        f"#{ids.EVAL_FIG_EPS}")
    floor = evaluation_panel.METRICS["absolute"]["floor"]
    assert math.log10(floor) - 1 <= bottom <= math.log10(floor) + 0.5, bottom
    panel = dash_duo.driver.execute_script(
        "return document.getElementById(arguments[0]).closest('.card').textContent", ids.EVAL_RESULTS)
    assert not NO_INF_NAN.search(panel), NO_INF_NAN.search(panel)

    # the table as CSV: both metrics, rho in the header, one row per (mechanism, ε, size)
    dash_duo.find_element(f"#{ids.EVAL_CSV_BUTTON}").click()
    csv_path = Path(dash_duo.download_path) / "evaluation_owner_only.csv"
    poll_until(csv_path.exists, 20)
    table = list(csv.DictReader(csv_path.read_text().splitlines()))
    assert len(table) == 27
    bounded = f"median bounded relative error (rho = {RHO})"
    assert bounded in table[0] and "median absolute error (points)" in table[0]
    assert all(math.isfinite(float(r[bounded])) and not r["note"] for r in table)
    assert not NO_INF_NAN.search(csv_path.read_text())

    # the chart as PNG through plotly's toolbar, named after what it shows
    graph = dash_duo.find_element(f"#{ids.EVAL_FIG_EPS}")
    dash_duo.driver.execute_script("arguments[0].scrollIntoView()", graph)
    ActionChains(dash_duo.driver).move_to_element(graph).perform()
    buttons = dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(b => b.dataset.title)",
        f"#{ids.EVAL_FIG_EPS} .modebar-btn")
    assert "Share chart..." not in buttons                    # owner-only charts: no cloud upload
    dash_duo.find_element(f"#{ids.EVAL_FIG_EPS} .modebar-btn[data-title='Download plot as a PNG']").click()
    png = Path(dash_duo.download_path) / "evaluation_absolute_error_vs_epsilon.png"
    poll_until(png.exists, 20)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # at common laptop and desktop widths: no sideways scrolling, toolbar clear of the titles
    for width in (1280, 1600):
        dash_duo.driver.set_window_size(width, 1000)
        poll_until(lambda: dash_duo.driver.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth"), 5)
        assert dash_duo.driver.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth"), width
        for fig in (ids.EVAL_FIG_EPS, ids.EVAL_FIG_SIZE):
            assert dash_duo.find_element(f"#{fig} .modebar").size["width"] > 0
            assert not rects_overlap(dash_duo, fig, ".gtitle", ".modebar"), (width, fig)
            # the title clear of the plot and its axis labels (a y title once ran into it)
            assert not rects_overlap(dash_duo, fig, ".gtitle", ".nsewdrag"), (width, fig)   # the plot area
            assert not rects_overlap(dash_duo, fig, ".gtitle", ".yaxislayer-above"), (width, fig)
