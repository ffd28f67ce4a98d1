"""Browser tests of data too big to upload: files in the server's data folder counted on a grid
(dp.aggregate in the background, with progress), saved counts uploaded as a .npz, and what the
panels offer for counts (headless Chromium)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from test_browser import RECOMMENDED, adaptive_steps, draw_rect, ledger_steps, poll_until, press_release, start, table_rows   # skips without a browser

import dp
from components import ids
from helpers import endless_count
from server import state
from dp.mechanisms.leaves import square_base_grid

pytestmark = pytest.mark.browser
NY = state.sample(state.DEFAULT_SAMPLE)[1]


def write_parts(folder, n=400_000, parts=4, seed=5):
    """n clustered points inside the default sample's box, as Parquet parts; returns n."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform([NY.west, NY.south], [NY.east, NY.north], size=(10, 2))
    pts = centres[rng.integers(0, 10, n)] + rng.normal(0, 0.01, (n, 2))
    pts = pts[NY.contains(pts[:, 0], pts[:, 1])]
    (folder / "trips").mkdir()
    for i, part in enumerate(np.array_split(pts, parts)):
        pd.DataFrame({"lon": part[:, 0], "lat": part[:, 1]}).to_parquet(folder / "trips" / f"p{i}.parquet")
    return len(pts)


def open_on_server(dash_duo, text):
    box = dash_duo.find_element(f"#{ids.SERVER_PATH}")
    box.click()                                    # opens the data step if it is closed
    dash_duo.clear_input(box)
    box.send_keys(text)
    dash_duo.find_element(f"#{ids.SERVER_OPEN}").click()


@pytest.mark.parametrize("width", [1280, 1600])
def test_files_on_the_server_are_counted_and_released(dash_duo, tmp_path, width):
    n = write_parts(tmp_path)
    start(dash_duo, mechanism=None, data_dir=str(tmp_path))
    dash_duo.driver.set_window_size(width, 1000)
    # a path outside the folder is refused in words, and the sample stays loaded
    open_on_server(dash_duo, "../secret.csv")
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", "is outside the data folder", timeout=10)
    assert "previously loaded data is still in use" in dash_duo.find_element(f"#{ids.UPLOAD_STATUS}").text
    assert "200,000 points" in dash_duo.find_element(f"#{ids.DATA_SUMMARY}").text
    # a glob of Parquet parts: counted on the server, then released like any data
    open_on_server(dash_duo, "trips/*.parquet")
    grid = square_base_grid(NY, 1024)
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", f"Loaded trips/*.parquet: {n:,} points "
                                    f"counted on {grid.gx} x {grid.gy} cells", timeout=120)   # a job: slow on busy cores
    summary = dash_duo.find_element(f"#{ids.DATA_SUMMARY}").text
    assert f"{n:,} of {n:,} rows loaded from 4 parquet files (duckdb)" in summary
    assert dash_duo.find_element(f"#{ids.SERVER_PROGRESS}").get_attribute("hidden")
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    press_release(dash_duo, f"Released {RECOMMENDED}")
    dash_duo.wait_for_element("img.grid-raster", timeout=20)
    # the probe picks the full quadtree or the adaptive grid for these trips (dense in Manhattan)
    poll_until(lambda: adaptive_steps(ledger_steps(dash_duo), "full_quadtree", "ag"), 10)
    assert adaptive_steps(ledger_steps(dash_duo), "full_quadtree", "ag"), ledger_steps(dash_duo)
    # a drawn rectangle gets a private answer and the owner's true count at cell resolution
    draw_rect(dash_duo)
    poll_until(lambda: len(table_rows(dash_duo)) == 1, 20)
    row = table_rows(dash_duo)[0]
    assert row["private"] and row["true"] and float(row["true"].replace(",", "")) > 0
    # mechanisms that need each point are shown but cannot be picked
    dash_duo.find_element(f"#{ids.MECHANISM}").click()
    page = lambda: dash_duo.driver.execute_script("return document.body.innerText")   # noqa: E731
    poll_until(lambda: "needs the points, not counts" in page(), 5)
    label = dp.mechanisms()["shifted_grids"].label
    assert f"{label} (needs the points, not counts)" in page()
    dash_duo.find_element(f"#{ids.MECHANISM}").click()
    assert dash_duo.driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth")


def test_saved_counts_upload_and_release_on_their_own_box(dash_duo, tmp_path):
    box = dp.Domain(-74.02, 40.65, -73.90, 40.80)        # not a preset: typed by the owner
    rng = np.random.default_rng(2)
    H = rng.poisson(3.0, (256, 256))
    dp.CountData(H, box).save(tmp_path / "city.npz")
    start(dash_duo, data_dir=str(tmp_path))
    dash_duo.find_element(f"#{ids.UPLOAD} input[type=file]").send_keys(str(tmp_path / "city.npz"))
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", f"Loaded city.npz: {int(H.sum()):,} points "
                                    "counted on a grid", timeout=30)
    # the page's box is still New York's: the counts say which box they release on
    dash_duo.wait_for_contains_text(f"#{ids.DOMAIN_WARNING}", "These counts were made over another box",
                                    timeout=20)
    assert "west -74.02, south 40.65, east -73.9, north 40.8" in \
        dash_duo.find_element(f"#{ids.DOMAIN_WARNING}").text
    dash_duo.find_element(f"#{ids.COUNTS_BOX}").click()
    poll_until(lambda: "domain-alert" not in dash_duo.find_element(f"#{ids.DOMAIN_WARNING}").get_attribute("innerHTML"), 10)
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", f"Released {dp.mechanisms()['e2epriv'].label}", timeout=60)
    # the same file opened from the data folder is the same data: no new account, no new load
    open_on_server(dash_duo, "city.npz")
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", "Loaded city.npz", timeout=20)


def test_a_count_of_server_files_can_be_cancelled(dash_duo, tmp_path, monkeypatch):
    """Cancel appears while files are counted and stops the count at its next step: nothing is
    loaded and the sample stays. (A long count is stood in for by one that only reports
    progress until it is stopped.)"""
    from components import server_files
    (tmp_path / "trips.csv").write_text("lon,lat\n-73.95,40.75\n")
    monkeypatch.setattr(server_files, "count", endless_count)
    start(dash_duo, mechanism=None, release=False, data_dir=str(tmp_path))
    assert not dash_duo.find_element(f"#{ids.SERVER_CANCEL}").is_displayed()
    open_on_server(dash_duo, "trips.csv")
    dash_duo.wait_for_contains_text(f"#{ids.SERVER_PROGRESS_TEXT}", "Counting trips.csv on the server", timeout=30)
    cancel = dash_duo.find_element(f"#{ids.SERVER_CANCEL}")
    poll_until(cancel.is_displayed, 10)
    cancel.click()
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", server_files.CANCELLED, timeout=60)
    poll_until(lambda: dash_duo.find_element(f"#{ids.SERVER_OPEN}").is_enabled(), 10)
    assert not dash_duo.find_element(f"#{ids.SERVER_CANCEL}").is_displayed()
    assert "200,000 points" in dash_duo.find_element(f"#{ids.DATA_SUMMARY}").text
