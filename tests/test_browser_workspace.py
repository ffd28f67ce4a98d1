"""One source of truth on the server a user actually runs: each test drives headless Chromium
against `python app.py` (gunicorn, 3 workers, started here) and against Flask's dev server.

What the page shows, what its controls say and what was charged must agree: one click charges
once (the ledger and the account file both), a page load or a link spends nothing, a reload
restores the same dataset (an upload included), release and controls, the region sample is
known to every worker, and a fresh start serves every script on the first visit.
"""
from __future__ import annotations

import concurrent.futures
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.keys import Keys

from test_browser import poll_until, press_release, raster_src, table_rows   # skips without a browser
from test_browser_plan import plan_for
from test_browser_session import sf_csv, upload

import dp
from app import create_app
from components import ids
from helpers import account_bodies, account_charges, free_port, set_account_body, wait_until

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[1]
OFFLINE_TILES = "http://127.0.0.1:9/{z}/{x}/{y}.png"
SERVERS = [("gunicorn", 1280), ("dev", 1600)]    # both servers, both widths, in two runs
# issue 44's page faults: both widths on the server a user runs (the dev server has the rest)
BOTH_WIDTHS = pytest.mark.parametrize("page", [("gunicorn", 1280), ("gunicorn", 1600)], indirect=True,
                                      ids=["gunicorn-1280px", "gunicorn-1600px"])
ON_GUNICORN = pytest.mark.parametrize("page", [("gunicorn", 1280)], indirect=True, ids=["gunicorn"])
REGIONS = "Regions: City home ranges, 3k users"


def http_get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None, ""


class Gunicorn:
    """`python app.py` with 3 gunicorn workers on a free port, a store, accounts and published
    releases of its own (`extra` may name other folders: the last one given counts)."""

    def __init__(self, folder: Path, *extra: str):
        self.port, self.folder = free_port(), folder
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "app.py", "--port", str(self.port), "--workers", "3",
             "--store-dir", str(folder / "store"), "--accounts-dir", str(folder / "accounts"),
             "--published-dir", str(folder / "published"), "--tiles-url", OFFLINE_TILES, *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_listening(self):
        wait_until(lambda: http_get(self.url + "/_dash-layout")[0] is not None
                   or self.proc.poll() is not None, timeout=90)
        assert self.proc.poll() is None, self.proc.stdout.read()

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        return out


OWNER_TOKEN = "owner-token-of-the-workspace-tests"


@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory):
    server = Gunicorn(tmp_path_factory.mktemp("gunicorn"), "--owner-token", OWNER_TOKEN)
    server.wait_listening()
    yield server
    out = server.stop()
    assert "Traceback" not in out, out[-3000:]


@pytest.fixture(params=SERVERS, ids=lambda p: f"{p[0]}-{p[1]}px")
def page(request, dash_duo, tmp_path):
    """(dash_duo, accounts folder) with the browser on a fresh session of one kind of server,
    in a window of one of the two widths the page is checked at."""
    server_kind, width = request.param
    if server_kind == "gunicorn":
        server = request.getfixturevalue("gunicorn")
        dash_duo.server_url = server.url
        accounts = server.folder / "accounts"
    else:
        accounts = tmp_path / "accounts"
        dash_duo.start_server(create_app({"tiles_url": OFFLINE_TILES, "accounts_dir": str(accounts)}))
    dash_duo.driver.set_window_size(width, 1000)
    dash_duo.wait_for_element(f"#{ids.UPLOAD} input[type=file]", timeout=30)
    return dash_duo, accounts


def laptop_or_desktop_height(dash_duo) -> None:
    """The window's height as the page is checked at: 1280 x 800 (a laptop) or 1600 x 1000."""
    width = dash_duo.driver.get_window_size()["width"]
    dash_duo.driver.set_window_size(width, 800 if width < 1600 else 1000)


def charges(accounts: Path) -> list:
    """Every charge in every budget account of the server."""
    return account_charges(accounts)


def status(dash_duo) -> str:
    return dash_duo.find_element(f"#{ids.RELEASE_STATUS}").text


def value(dash_duo, element_id: str) -> str:
    return dash_duo.driver.execute_script(
        f"var e = document.querySelector('#{element_id} input, input#{element_id}');"
        " return e ? e.value : null;")


def choose(dash_duo, dropdown_id: str, label: str) -> None:
    """Pick a dropdown's option by typing its label into the search box (a click on an option
    can land on the search box at narrow widths)."""
    dash_duo.find_element(f"#{dropdown_id}").click()
    search = dash_duo.find_element(f"#{dropdown_id} input, .dash-dropdown-search")
    search.send_keys(label)
    poll_until(lambda: dash_duo.find_elements(".dash-dropdown-option"), 5)
    dash_duo.find_element(".dash-dropdown-search").send_keys(Keys.ENTER)
    poll_until(lambda: label in picked(dash_duo, dropdown_id), 5)     # presets read "City: London"


def picked(dash_duo, dropdown_id: str) -> str:
    return dash_duo.find_element(f"#{dropdown_id}").text.split("\n")[0]


def severe_errors(dash_duo) -> list[str]:
    """Console errors other than the offline base map's tiles."""
    return [e["message"] for e in dash_duo.get_logs() or []
            if e.get("level") == "SEVERE" and "127.0.0.1:9" not in e["message"]]


def test_one_click_charges_once_and_a_page_load_nothing(page):
    dash_duo, accounts = page
    before = len(charges(accounts))
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    time.sleep(2)                                             # callbacks settle: still nothing spent
    assert len(charges(accounts)) == before
    for n in (1, 2):
        press_release(dash_duo)       # the second finds "Released" already there: wait for its charge
        poll_until(lambda: len(charges(accounts)) >= before + n, 60)
        time.sleep(3)                                         # a second firing would charge by now
        assert len(charges(accounts)) == before + n, status(dash_duo)
        poll_until(lambda: len(table_rows(dash_duo, ids.ACCOUNT_TABLE)) == n, 10)
        assert len(table_rows(dash_duo, ids.ACCOUNT_TABLE)) == n   # the page's ledger agrees
    assert not severe_errors(dash_duo)


def test_upload_release_reload_restores_data_release_and_controls(page, tmp_path):
    dash_duo, accounts = page
    n = sf_csv(tmp_path / "sf.csv")
    upload(dash_duo, tmp_path / "sf.csv")
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", f"Loaded sf.csv: {n:,} points", timeout=60)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "No release of this data yet", timeout=30)
    dash_duo.find_element(f"#{ids.DOMAIN_WARNING} .suggest").click()          # Use San Francisco
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=30)
    assert "error" not in dash_duo.find_element(f"#{ids.RELEASE_STATUS} > div").get_attribute("class")
    choose(dash_duo, ids.MECHANISM, "Uniform grid (Heuristic UG)")
    mechanism = "Uniform grid (Heuristic UG)"
    eps = dash_duo.find_element(f"#{ids.EPSILON_VALUE}")
    eps.clear()
    eps.send_keys("0.5\n")
    poll_until(lambda: value(dash_duo, ids.EPSILON_VALUE) == "0.5", 10)
    press_release(dash_duo)
    assert "at ε = 0.5" in status(dash_duo)
    dash_duo.find_element(f"#{ids.QUERY_TYPED}").send_keys("-122.45, 37.75, -122.40, 37.79\n")
    poll_until(lambda: len(table_rows(dash_duo)) == 1, 20)
    asked = table_rows(dash_duo)
    assert len(asked) == 1
    spent = len(charges(accounts))
    poll_until(lambda: raster_src(dash_duo), 30)
    shown = raster_src(dash_duo)
    assert shown
    dash_duo.driver.refresh()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Showing your release of this data", timeout=60)
    text = status(dash_duo)
    assert "San Francisco" in text and "ε = 0.5" in text and mechanism in text
    assert f"{n:,} points" in dash_duo.find_element(f"#{ids.DATA_SUMMARY}").text   # the upload, not the sample
    assert picked(dash_duo, ids.MECHANISM).startswith(mechanism)               # controls = the map
    assert value(dash_duo, ids.EPSILON_VALUE) == "0.5"
    assert picked(dash_duo, ids.DOMAIN_PRESET).endswith("San Francisco")
    poll_until(lambda: raster_src(dash_duo) == shown, 30)
    assert raster_src(dash_duo) == shown                                       # the same map, not a new draw
    poll_until(lambda: table_rows(dash_duo) == asked, 20)
    assert table_rows(dash_duo) == asked                                       # the same query, same answer
    time.sleep(2)
    assert len(charges(accounts)) == spent                                     # a reload spends nothing
    # the same file again loads again (and says so), finding the same release
    dash_duo.driver.execute_script(f"document.getElementById('{ids.UPLOAD_STATUS}').innerText = ''")
    upload(dash_duo, tmp_path / "sf.csv")
    dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", f"Loaded sf.csv: {n:,} points", timeout=60)
    assert not severe_errors(dash_duo)


def sides(dash_duo) -> list:
    """The four box inputs (west, south, east, north): their values and whether they are enabled."""
    return dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('.box-inputs input'))"
        ".map(function (e) { return [e.value, !e.disabled]; });")


@BOTH_WIDTHS
def test_the_box_inputs_show_the_box_in_use(page):
    # issue 44: numbers typed for a custom box stayed in the (disabled) inputs after a preset was
    # picked, reading as the box in use. Now they show the listed box, start a custom box from it,
    # and a custom box's own numbers are kept while it is the choice
    dash_duo, _ = page
    london, paris = dp.PRESETS["London"], dp.PRESETS["Paris"]

    def shown(box, enabled):
        return [[f"{v:g}", enabled] for v in box.bounds]
    choose(dash_duo, ids.DOMAIN_PRESET, "London")
    poll_until(lambda: sides(dash_duo) == shown(london, False), 20)
    assert sides(dash_duo) == shown(london, False)
    choose(dash_duo, ids.DOMAIN_PRESET, "Custom box")
    poll_until(lambda: sides(dash_duo) == shown(london, True), 20)
    assert sides(dash_duo) == shown(london, True)             # a custom box starts from London's
    west = dash_duo.find_element(".box-inputs input")
    west.clear()
    west.send_keys("-0.3", Keys.TAB)
    poll_until(lambda: sides(dash_duo)[0] == ["-0.3", True], 20)
    choose(dash_duo, ids.DOMAIN_PRESET, "Paris")
    poll_until(lambda: sides(dash_duo) == shown(paris, False), 20)
    assert sides(dash_duo) == shown(paris, False)             # not the -0.3 typed for the custom box
    assert not severe_errors(dash_duo)


@BOTH_WIDTHS
def test_a_drawn_rectangle_survives_a_reload(page):
    # issue 44: drawn rectangles vanished on reload (typed ones stayed). Kept in the workspace
    # (across workers), it comes back after the typed one as a kept rectangle, R2, same answer
    from test_browser import draw_rect, wait_rows
    from test_browser_queries import map_labels
    dash_duo, accounts = page
    press_release(dash_duo)
    spent = len(charges(accounts))
    draw_rect(dash_duo)
    dash_duo.find_element(f"#{ids.QUERY_TYPED}").send_keys("-73.98, 40.70, -73.93, 40.76\n")
    wait_rows(dash_duo, 2)
    poll_until(lambda: sorted(map_labels(dash_duo)) == ["Q1", "R1"], 20)   # labelled once kept
    drawn = {r["id"]: r for r in table_rows(dash_duo)}["Q1"]
    dash_duo.driver.refresh()
    wait_rows(dash_duo, 2)

    def settled_labels():
        """The map's labels once they stay the same for a second: after a reload the layers
        render more than once, and a run read two empty tooltips of a render under way."""
        first = sorted(map_labels(dash_duo))
        time.sleep(1)
        return first if first == sorted(map_labels(dash_duo)) else None
    poll_until(lambda: settled_labels() == ["R1", "R2"], 30)
    rows = {r["id"]: r for r in table_rows(dash_duo)}
    assert sorted(map_labels(dash_duo)) == sorted(rows) == ["R1", "R2"]
    assert rows["R2"]["range"] == drawn["range"] and rows["R2"]["private"] == drawn["private"]
    assert len(charges(accounts)) == spent and not severe_errors(dash_duo)


@BOTH_WIDTHS
def test_the_calmer_page_at_both_widths(page):
    # issue 44's page faults, on the multi-worker server at 1280 x 800 and 1600 x 1000: the
    # recommendation in plain words; the map keeps 60% of the height with a full
    # answers drawer; a box wider than the map is fitted clear of the toolbars
    from test_browser_layout import map_in_view
    from test_browser_session import fit_a_wide_box
    dash_duo, _ = page
    laptop_or_desktop_height(dash_duo)
    line = dash_duo.find_element(f"#{ids.MECH_RECOMMENDATION}").get_attribute("textContent")
    reason = dp.recommend("points").reason              # after the mechanism's name, the why
    assert reason in line and not any(w in reason for w in ("quadtree", "probe", "DPBench"))
    press_release(dash_duo)
    readout = lambda: dash_duo.find_element(f"#{ids.MAP_HOVER}").text   # noqa: E731
    poll_until(lambda: "No release" not in readout(), 20)    # it said so beside a released map
    assert "No release" not in readout(), readout()
    dash_duo.find_element(f"#{ids.QUERY_TYPED}").send_keys("-73.98, 40.70, -73.93, 40.76\n")
    dash_duo.find_element(f"#{ids.RANDOM_BUTTON}").click()
    poll_until(lambda: len(table_rows(dash_duo)) == 6, 30)
    map_in_view(dash_duo, 0.5)                 # no page scroll; the map's share of the height
    r, right_of_toolbars = fit_a_wide_box(dash_duo)
    assert r["dashed"][0][0] >= right_of_toolbars, (r, right_of_toolbars)
    assert not severe_errors(dash_duo)


def test_a_link_fills_the_controls_and_spends_nothing(page):
    dash_duo, accounts = page
    before = len(charges(accounts))
    base = dash_duo.server_url.rstrip("/")
    link = "?" + urllib.parse.urlencode({"mechanism": "ug", "epsilon": 0.25,
                                         "domain": "New York (Manhattan & Brooklyn)"})
    dash_duo.wait_for_page(f"{base}/{link}", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "The link's settings are filled in", timeout=60)
    poll_until(lambda: value(dash_duo, ids.EPSILON_VALUE) == "0.25", 10)
    assert value(dash_duo, ids.EPSILON_VALUE) == "0.25"
    assert picked(dash_duo, ids.MECHANISM) == "Uniform grid (Heuristic UG)"
    time.sleep(3)
    assert len(charges(accounts)) == before                 # opening a link spends nothing
    press_release(dash_duo)
    assert "ε = 0.25" in status(dash_duo)
    assert len(charges(accounts)) == before + 1


def test_region_sample_stage_toggles_never_expire(page):
    dash_duo, _ = page
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    choose(dash_duo, ids.SAMPLE_PICK, REGIONS)
    dash_duo.wait_for_contains_text(f"#{ids.DATA_SUMMARY}", "regions", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=30)
    press_release(dash_duo)
    # the stage buttons are in the page from the start, hidden until the release's panel opens
    until(lambda: dash_duo.find_element(f"#{ids.EULER_BOX}").is_displayed(), 30)
    stages = dash_duo.find_elements(f"#{ids.EULER_STAGE} input")
    for i in range(20):
        stages[i % len(stages)].click()
        time.sleep(0.3)
        stages = dash_duo.find_elements(f"#{ids.EULER_STAGE} input")
    poll_until(lambda: "Loading" not in dash_duo.find_element(f"#{ids.EULER_STATUS}").text, 10)
    page_text = dash_duo.find_element("body").text
    assert "no longer on the server" not in page_text and "expired" not in page_text
    assert "Released" in status(dash_duo)
    assert not severe_errors(dash_duo)


def test_new_data_clears_old_rectangles_and_messages(page):
    dash_duo, _ = page
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    press_release(dash_duo)
    box = dash_duo.find_element(f"#{ids.QUERY_TYPED}")
    box.send_keys("-74.0, 40.7, -73.95, 40.75\n")
    poll_until(lambda: len(table_rows(dash_duo)) == 1, 20)
    assert len(table_rows(dash_duo)) == 1
    choose(dash_duo, ids.SAMPLE_PICK, REGIONS)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=30)
    poll_until(lambda: not table_rows(dash_duo), 10)
    assert not table_rows(dash_duo)                          # the old data's rectangles are gone
    assert "Released" not in status(dash_duo)
    assert "No release" in dash_duo.find_element(f"#{ids.MAP_HOVER}").text
    poll_until(lambda: fitted(dash_duo), 10)                 # the map moved to the new data's box
    assert fitted(dash_duo)


def fitted(dash_duo) -> bool:
    """Whether the map shows the whole domain outline, filling much of its width or height."""
    return dash_duo.driver.execute_script(f"""
        var m = document.getElementById('{ids.MAP}').getBoundingClientRect();
        var p = Array.from(document.querySelectorAll('#{ids.MAP} path')).filter(
            function (x) {{ return x.getAttribute('stroke-dasharray') === '6 4'; }})[0];
        if (!p) {{ return false; }}
        var r = p.getBoundingClientRect();
        return r.left >= m.left - 2 && r.right <= m.right + 2 && r.top >= m.top - 2
            && r.bottom <= m.bottom + 2 && (r.width > 0.4 * m.width || r.height > 0.4 * m.height);""")


@pytest.mark.parametrize("start", range(3))
def test_a_fresh_start_serves_the_page_and_every_script_on_the_first_visit(dash_duo, tmp_path, start):
    """Right after `python app.py` starts, the first visit loads (the map and the upload box),
    and 30 concurrent fetches of the page's scripts all succeed."""
    server = Gunicorn(tmp_path)
    try:
        wait_until(lambda: http_get(server.url + "/")[0] == 200 or server.proc.poll() is not None, 90)
        index = http_get(server.url + "/")[1]
        scripts = [server.url + s for s in re.findall(r'src="(/_dash-component-suites/[^"]+)"', index)]
        assert any("dash_leaflet" in s for s in scripts)
        with concurrent.futures.ThreadPoolExecutor(24) as pool:
            codes = list(pool.map(lambda u: http_get(u)[0], (scripts * 3)[:30]))
        assert codes == [200] * len(codes)
        dash_duo.server_url = server.url
        dash_duo.wait_for_element(f"#{ids.MAP} .leaflet-container, #{ids.MAP}.leaflet-container", timeout=30)
        dash_duo.wait_for_element(f"#{ids.UPLOAD} input[type=file]", timeout=10)
        assert not severe_errors(dash_duo)
    finally:
        out = server.stop()
    assert "not a registered library" not in out


def test_a_damaged_account_speaks_on_the_page_and_recovers_when_restored(page):
    """A failure no panel answers for shows in the page's alert (never an HTTP 500 alone), the
    alert can be dismissed, and a restored account works again with its charges."""
    dash_duo, accounts = page
    press_release(dash_duo)
    name, good = list(account_bodies(accounts).items())[-1]
    set_account_body(accounts, name, good[: len(good) // 2])
    try:
        dash_duo.driver.refresh()
        dash_duo.wait_for_contains_text(f"#{ids.SERVER_ALERT_TEXT}", "damaged", timeout=60)
        assert dash_duo.find_element(f"#{ids.SERVER_ALERT}").is_displayed()
        press_release(dash_duo, expect="Not released")
        assert "not reset" in status(dash_duo)
        dash_duo.find_element(f"#{ids.SERVER_ALERT_CLOSE}").click()
        poll_until(lambda: not dash_duo.find_element(f"#{ids.SERVER_ALERT}").is_displayed(), 10)
        assert not dash_duo.find_element(f"#{ids.SERVER_ALERT}").is_displayed()
    finally:
        set_account_body(accounts, name, good)      # the operator restores it from a backup
    press_release(dash_duo)
    assert len(json.loads(account_bodies(accounts)[name])["charges"]) == len(json.loads(good)["charges"]) + 1


@ON_GUNICORN      # across workers: the dev server has one (test_browser_plan plans on it)
def test_a_plan_runs_free_across_workers_and_its_release_charges_once(page):
    """The plan's job runs in the worker that got the click; its progress and result are read
    by whichever worker answers each poll (the shared store). Planning spends nothing; Use fills
    in the release, and one click on it charges once what the button said. As the owner: a
    visitor's plan runs in the background lane at the lowest priority, which a busy machine (the
    rest of the suite beside it) held past three minutes; test_browser_plan plans as a visitor."""
    dash_duo, accounts = page
    dash_duo.driver.get(f"{dash_duo.server_url}/owner?token={OWNER_TOKEN}")
    dash_duo.wait_for_contains_text(f"#{ids.ROLE_NOTE}", "You are the data owner", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Nothing released", timeout=60)
    before = len(charges(accounts))
    plan_for(dash_duo, 200)
    assert len(charges(accounts)) == before
    use = dash_duo.find_elements(f"#{ids.PLAN_RESULT} tbody button")[0]
    eps = use.text.split("= ")[1]
    use.click()
    poll_until(lambda: dash_duo.find_element(f"#{ids.PLAN_PREVIEW}").is_displayed(), 30)
    assert dash_duo.find_element(f"#{ids.PLAN_PREVIEW}").is_displayed()     # before the release
    dash_duo.wait_for_text_to_equal(f"#{ids.RELEASE_BUTTON}", f"Release (spends ε = {eps})", timeout=20)
    press_release(dash_duo)                                   # step opens (the plan step closes)
    time.sleep(3)                                             # a second firing would charge by now
    assert len(charges(accounts)) == before + 1
    assert not severe_errors(dash_duo)
