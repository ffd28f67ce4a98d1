"""Screenshots of a first session on real data, written with docs/real_session.md.

Drives the dashboard in headless Chromium the way a new owner would: the built-in sample, an
upload of 464,040 real taxi positions whose box is not the current domain, the domain chosen
from the offered presets, the release, a typed query and a short evaluation. Re-run it after
changing the panels so the page stays current:

    python docs/real_session.py [--out docs]

Needs chromium and chromedriver on PATH and the DPBench matrices in ../shared/data/dpbench2d/
(the cabspottingS matrix of San Francisco taxi positions).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import dp  # noqa: E402
from dp.evaluate import points_from_matrix  # noqa: E402
from app import create_app  # noqa: E402
from components import ids  # noqa: E402

MATRIX = ROOT.parent / "shared" / "data" / "dpbench2d" / "cabspottingS_256_256.npy"
BOX = dp.PRESETS["San Francisco Bay Area"]
QUERY = "-122.42, 37.76, -122.38, 37.80"          # downtown San Francisco
SIZE = (1600, 1000)


def write_points(path: Path) -> int:
    """The cabspottingS matrix spread into points over the Bay Area preset, as a CSV."""
    data = points_from_matrix(np.load(MATRIX), BOX, seed=7)
    np.savetxt(path, np.column_stack([data.x, data.y]), delimiter=",", header="lon,lat",
               comments="", fmt="%.6f")
    return data.n


def serve():
    """The app on a free loopback port in a daemon thread (offline: no base-map tiles)."""
    from werkzeug.serving import make_server
    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"})
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


def browser():
    """Headless Chromium at the page size of the screenshots."""
    from selenium import webdriver
    opts = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={SIZE[0]},{SIZE[1]}"):
        opts.add_argument(flag)
    return webdriver.Chrome(options=opts)


class Session:
    """The steps of the session, each waiting for what the page says when it is done."""

    def __init__(self, driver, out: Path):
        self.d, self.out, self.shots = driver, out, []

    def text(self, element_id: str) -> str:
        """The element's text (in a closed step too), '' while the page has not rendered it (or
        is replacing it)."""
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        try:
            return self.d.find_element("id", element_id).get_attribute("textContent")
        except (NoSuchElementException, StaleElementReferenceException):
            return ""

    def wait_text(self, element_id: str, words: str, timeout: float = 120):
        end = time.time() + timeout
        while words not in self.text(element_id):
            if time.time() > end:
                raise TimeoutError(f"#{element_id} never said {words!r}: {self.text(element_id)!r}")
            time.sleep(0.3)

    def open_step_of(self, element_id: str) -> None:
        """Open the side panel's step holding an element, by a click on its title (as a person
        does); nothing when it is open already or the element is not in a step."""
        title = self.d.execute_script(
            "var d = document.getElementById(arguments[0]).closest('details.step');"
            "return d && !d.open ? d.querySelector('summary .step-name') : null;", element_id)
        if title is not None:
            title.click()
            time.sleep(0.3)

    def click(self, element_id: str) -> None:
        self.open_step_of(element_id)
        self.d.find_element("id", element_id).click()

    def shot(self, name: str, element_id: str, title: str, caption: str):
        """Open the step holding an element, scroll it into the side panel's view and save the
        window as <out>/<name>.png."""
        self.open_step_of(element_id)
        self.d.execute_script("document.getElementById(arguments[0]).scrollIntoView({block: 'nearest'});",
                              element_id)
        time.sleep(1.0)
        self.d.save_screenshot(str(self.out / f"{name}.png"))
        self.shots.append((name, title, caption))

    def run(self, url: str, csv: Path, n: int) -> None:
        self.d.get(url)
        self.wait_text(ids.RELEASE_STATUS, "Nothing released")
        self.click(ids.RELEASE_BUTTON)
        self.wait_text(ids.RELEASE_STATUS, "Released")
        self.shot("session_1_sample", ids.RELEASE_STATUS, "The built-in sample", "A first load spends "
                  "nothing; one click on Release: the recommended mechanism (adaptive: its probe finds the "
                  "sample's points spread over most of the box and picks the adaptive grid) released at ε = 1, its "
                  "leaves on the map.")
        self.d.find_element("css selector", f"#{ids.UPLOAD} input[type=file]").send_keys(str(csv))
        self.wait_text(ids.UPLOAD_STATUS, f"{n:,} points")
        self.wait_text(ids.DOMAIN_WARNING, "nothing is released")
        self.shot("session_2_domain", ids.DOMAIN_WARNING, "An upload outside the domain",
                  f"The upload ({n:,} taxi positions) lies "
                  "outside the sample's New York box: nothing is released, every step says so, and "
                  "the Data step offers boxes that hold the points.")
        self.d.find_element("css selector", f"#{ids.DOMAIN_WARNING} button.suggest").click()
        self.click(ids.RELEASE_BUTTON)
        self.wait_text(ids.RELEASE_STATUS, "Released")
        status = self.text(ids.RELEASE_STATUS)
        self.shot("session_3_release", ids.MAP, "The release", "One click on the offered preset, then Release: "
                  f"“{status}”")
        self.open_step_of(ids.QUERY_TYPED)
        self.d.find_element("id", ids.QUERY_TYPED).send_keys(QUERY)
        self.click(ids.QUERY_TYPED_BUTTON)
        self.wait_text(ids.QUERY_TABLE, "R1")
        self.shot("session_4_query", ids.QUERY_TYPED, "A query", "A typed rectangle over downtown San "
                  "Francisco, answered in the drawer under the map: the private answer, the range its "
                  "true count lies in for any data, and (for the owner) the true count.")
        self.open_step_of(ids.EVAL_NQ)
        for element_id, value in ((ids.EVAL_NQ, "50"), (ids.EVAL_REPS, "1")):
            box = self.d.find_element("id", element_id)
            box.clear()
            box.send_keys(value)
        self.click(ids.EVAL_RUN)
        self.wait_text(ids.EVAL_STATUS, "Done", timeout=600)
        self.shot("session_5_evaluation", ids.EVAL_RESULTS, "What it costs", "A short evaluation on the owner's "
                  "data (50 rectangles per size, one repetition): bounded relative error against ε "
                  "and query size. Not charged, never published.")


def page(shots, n: int) -> str:
    """docs/real_session.md: what the session shows, with its screenshots."""
    lines = ["# A first session on real data", "",
             "Generated by `python docs/real_session.py`, which drives the dashboard in headless "
             "Chromium; re-run it after changing the panels. The data: DPBench's cabspottingS "
             f"matrix of San Francisco taxi positions, {n:,} points, spread uniformly inside its "
             f"256×256 cells over the {BOX.name} preset box (so positions are approximate). "
             f"The window is {SIZE[0]}×{SIZE[1]}; base-map tiles are off, as on a machine "
             "without a network.", ""]
    for i, (name, title, caption) in enumerate(shots, 1):
        lines += [f"## {i}. {title}", "", caption, "", f"![{title}]({name}.png)", ""]
    return "\n".join(lines)


def main(argv=None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs")
    args = ap.parse_args(argv)
    if not MATRIX.is_file() or not shutil.which("chromedriver"):
        raise SystemExit(f"needs {MATRIX.name} in the shared data folder and chromedriver on PATH")
    args.out.mkdir(parents=True, exist_ok=True)
    server, url = serve()
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            csv = Path(tmp) / "cabspotting_sf.csv"
            n = write_points(csv)
            session = Session(driver, args.out)
            session.run(url, csv, n)
    finally:
        driver.quit()
        server.shutdown()
    md = args.out / "real_session.md"
    md.write_text(page(session.shots, n))
    print(f"wrote {md} and {len(session.shots)} screenshots")
    return md


if __name__ == "__main__":
    main()
