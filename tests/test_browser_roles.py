"""The owner and a visitor in two real Chromium instances against `python app.py` (gunicorn,
3 workers): the visitor cannot open the server's files and no response it gets holds their
content, their name, a row count or N; fresh visitor cookies cannot spend or raise the server
data's budget; a made-up account name is refused; a tampered account file is refused in words;
a published release shows its map, answers drawn rectangles and offers its downloads to the
visitor, survives a restart, and is gone once the owner unpublishes it."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from selenium import webdriver

from test_browser import draw_rect, poll_until        # skips without a browser
from test_browser_workspace import Gunicorn

import dp
from components import ids, public_page
from conftest import pytest_setup_options
from helpers import account_bodies, set_account_body

pytestmark = pytest.mark.browser
TOKEN = "owner-token-of-the-two-browser-test"
SECRET_LINE = "db_password=correct-horse-battery"
N = 4321                       # the server file's points: a number no response may hold


@pytest.fixture()
def data_dir(tmp_path):
    """The server's data folder: a CSV of N points inside the default sample's box, and a text
    file that is not data (its first line is a secret)."""
    folder = tmp_path / "data"
    folder.mkdir()
    box = dp.load_sample("city_200k")[1]
    rng = np.random.default_rng(11)
    lon = rng.uniform(box.west + 0.3 * (box.east - box.west), box.east - 0.3 * (box.east - box.west), N)
    lat = rng.uniform(box.south + 0.3 * (box.north - box.south), box.north - 0.3 * (box.north - box.south), N)
    (folder / "trips_private.csv").write_text("lon,lat\n" + "\n".join(f"{x:.6f},{y:.6f}" for x, y in zip(lon, lat)))
    (folder / "notes.txt").write_text(SECRET_LINE + "\nmore\n")
    return folder


def start(tmp_path, data_dir, monkeypatch) -> Gunicorn:
    monkeypatch.setenv("DP_OWNER_TOKEN", TOKEN)
    server = Gunicorn(tmp_path, "--data-dir", str(data_dir), "--published-dir", str(tmp_path / "published"))
    server.wait_listening()
    return server


def visitor_driver(width: int) -> webdriver.Chrome:
    """A second, separate Chromium (its own cookies) that logs every response it receives."""
    options = pytest_setup_options()
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options)
    driver.set_window_size(width, 1000)
    return driver


def bodies(driver) -> list[str]:
    """The bodies of the responses the browser received since the last call."""
    out = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.loadingFinished":
            try:
                out.append(driver.execute_cdp_cmd("Network.getResponseBody",
                                                  {"requestId": msg["params"]["requestId"]})["body"])
            except Exception:        # a response without a body (a redirect, a preflight)
                pass
    return out


def leaks(texts: list[str]) -> list[str]:
    """What in these responses comes from the server's files: content, name, N."""
    found = [w for w in (SECRET_LINE, "db_password", "trips_private", "notes.txt", str(N), f"{N:,}")
             if any(w in t for t in texts)]
    return found


FORGE = """
const [output, outputs, inputs, state, done] = arguments;
const body = {output, outputs, inputs, state, changedPropIds: [inputs[0].id + '.' + inputs[0].property]};
const nulled = {...body, inputs: inputs.map(i => ({...i, value: null})),
                state: state.map(i => ({...i, value: null}))};
const post = (query, b) => fetch('/_dash-update-component' + query, {
  method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(b)});
let handles = '';
const step = r => r.text().then(t => {       // a background callback's job: polled to its end
  let j = null;
  try { j = JSON.parse(t); } catch (e) {}
  if (j && j.cacheKey) handles = '?cacheKey=' + encodeURIComponent(j.cacheKey) + '&job=' + encodeURIComponent(j.job);
  if (r.status === 200 && handles && !(j && 'response' in j))
    return new Promise(ok => setTimeout(ok, 200)).then(() => post(handles, nulled)).then(step);
  done([r.status, t]);
});
post('', body).then(step).catch(e => done([0, String(e)]));
"""


def forge(driver, output: str, inputs: list, state: list):
    """POST a callback request from inside the page (its cookies), as a visitor could; a
    background callback's job is polled to its end. Returns (HTTP status, the last body)."""
    outs = [{"id": p.rsplit(".", 1)[0], "property": p.rsplit(".", 1)[1].split("@")[0]}
            for p in output.strip(".").split("...")]
    return driver.execute_async_script(FORGE, output, outs if output.startswith("..") else outs[0],
                                       inputs, state)


def dependency(driver, first: str, trigger: str) -> dict:
    deps = driver.execute_async_script(
        "const done = arguments[0]; fetch('/_dash-dependencies').then(r => r.json()).then(done);")
    return next(d for d in deps if d["output"].strip(".").split("...")[0].split("@")[0] == first
                and any(f"{i['id']}.{i['property']}" == trigger for i in d["inputs"]))


def call(driver, first: str, values: dict):
    """Call the callback with first output `first` as its trigger (the first of `values`) changed."""
    dep = dependency(driver, first, next(iter(values)))
    fill = lambda items: [{"id": i["id"], "property": i["property"],
                           "value": values.get(f"{i['id']}.{i['property']}")} for i in items]
    return forge(driver, dep["output"], fill(dep["inputs"]), fill(dep["state"]))


def server_account(accounts: Path) -> dict:
    bodies = [b for name, b in account_bodies(accounts).items() if name.startswith("server-")]
    assert len(bodies) == 1, bodies
    return json.loads(bodies[0])


def test_owner_and_visitor_on_the_multi_worker_server(dash_duo, tmp_path, data_dir, monkeypatch):
    server = start(tmp_path, data_dir, monkeypatch)
    accounts = tmp_path / "accounts"
    visitor = visitor_driver(1600)
    try:
        # the owner, at 1280 px: the owner link, a file of the data folder counted and released
        owner = dash_duo.driver
        owner.set_window_size(1280, 1000)
        dash_duo.server_url = server.url
        owner.get(f"{server.url}/owner?token={TOKEN}")
        dash_duo.wait_for_contains_text(f"#{ids.ROLE_NOTE}", "You are the data owner", timeout=30)
        box = dash_duo.find_element(f"#{ids.SERVER_PATH}")
        box.send_keys("trips_private.csv")
        dash_duo.find_element(f"#{ids.SERVER_OPEN}").click()
        dash_duo.wait_for_contains_text(f"#{ids.UPLOAD_STATUS}", f"{N:,} points counted", timeout=60)
        dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
        dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Released", timeout=60)
        before = server_account(accounts)
        assert len(before["charges"]) == 1
        key = before["charges"][0]["ref"]
        fingerprint = json.loads(key)[0]
        dash_duo.find_element(f"#{ids.PUBLISH_BUTTON}").click()
        dash_duo.wait_for_contains_text(f"#{ids.PUBLISH_STATUS}", "Published at /r/", timeout=30)
        pid = dash_duo.find_element(f"#{ids.PUBLISH_STATUS} a").text.split("/r/")[1]

        # the visitor, at 1600 px: no server files, nothing of them in any response
        visitor.get(server.url + "/")
        poll_until(lambda: visitor.find_elements("id", ids.ROLE_NOTE), 30)
        assert "You are a visitor" in visitor.find_element("id", ids.ROLE_NOTE).text
        assert not visitor.find_elements("id", ids.SERVER_PATH)
        assert visitor.find_elements("id", ids.SERVER_OWNERS_ONLY)
        assert not visitor.find_elements("id", ids.PUBLISH_BUTTON)
        seen = bodies(visitor)
        assert seen and leaks(seen) == []
        domain = {"domain": {"west": -0.2, "south": 51.4, "east": 0.0, "north": 51.6, "name": "x", "leaky": False}}
        for text in ("notes.txt", "trips_private.csv", "*"):          # forged presses of Open
            status, body = call(visitor, f"{ids.DATASET}.data", {
                f"{ids.SERVER_OPEN}.n_clicks": 1, f"{ids.SERVER_PATH}.value": text,
                f"{ids.SERVER_CELLS}.value": 64, f"{ids.DOMAIN}.data": domain})
            assert status == 200 and "only the data owner" in body, body
            assert SECRET_LINE not in body and "points counted" not in body and str(N) not in body

        # three fresh visitor cookies: neither raising nor reading the server data's account
        info = {"fingerprint": fingerprint, "name": "x", "n": 1, "summary": "", "origin": "server",
                "kind": "points", "users": False, "counts": True, "box": [0, 0, 1, 1], "per_user": None,
                "dropped": {}, "warnings": []}
        for _ in range(3):
            visitor.delete_all_cookies()
            visitor.get(server.url + "/")
            poll_until(lambda: visitor.find_elements("id", ids.ROLE_NOTE), 30)
            status, body = call(visitor, f"{ids.ACCOUNT_TICK}.data", {
                f"{ids.ACCOUNT_CONFIRM}.submit_n_clicks": 1, f"{ids.ACCOUNT_RAISE_VALUE}.value": 1000,
                f"{ids.DATASET}.data": info})
            assert "raised" not in body
            status, body = call(visitor, f"{ids.EXPORT_DOWNLOAD}.data", {
                f"{ids.EXPORT_BUTTON}.n_clicks": 1, f"{ids.RELEASE}.data": {"key": key}})
            assert status == 200 and "FeatureCollection" not in body and "no longer on the server" in body
            # a made-up account name in the dataset summary is refused at the boundary
            status, body = call(visitor, f"{ids.ACCOUNT_TICK}.data", {
                f"{ids.ACCOUNT_CONFIRM}.submit_n_clicks": 1, f"{ids.ACCOUNT_RAISE_VALUE}.value": 1000,
                f"{ids.DATASET}.data": {**info, "account": "made-up"}})
            assert status == 400 and "summary of the dataset loaded" in body
        assert server_account(accounts) == before                   # not spent, not raised
        bodies(visitor)               # drained: the forged answers (checked above) echo the typed names

        # the published page, for the visitor: map, legend, a drawn rectangle answered, downloads
        visitor.delete_all_cookies()
        bodies(visitor)
        visitor.get(f"{server.url}/r/{pid}")
        poll_until(lambda: visitor.find_elements("css selector", ".leaflet-overlay-pane img.grid-raster"), 30)
        assert visitor.find_element("css selector", ".map-legend").text
        assert "no one person can be singled out" in visitor.find_element("tag name", "body").text
        assert not visitor.find_elements("id", public_page.UNPUBLISH)
        assert all(visitor.find_elements("id", b) for b in (public_page.GEOJSON_BUTTON,
                                                             public_page.CSV_BUTTON, public_page.PNG_BUTTON))
        draw_rect(_Duo(visitor))
        rows = lambda: visitor.find_elements("css selector", f"#{public_page.ANSWERS} td[data-dash-column='count']")
        poll_until(rows, 15)
        assert rows() and rows()[0].text
        seen = bodies(visitor)
        assert seen and leaks(seen) == [], leaks(seen)

        # a tampered account is refused in words, and not reset
        name, good = next((n, b) for n, b in account_bodies(accounts).items() if n.startswith("server-"))
        changed = json.dumps({**json.loads(good), "charges": []})
        set_account_body(accounts, name, changed)
        dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
        dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "signature", timeout=30)
        assert account_bodies(accounts)[name] == changed
        set_account_body(accounts, name, good)

        # a restart keeps the published page; the owner unpublishes it
        server.stop()
        server = Gunicorn(tmp_path, "--data-dir", str(data_dir), "--published-dir", str(tmp_path / "published"))
        server.wait_listening()
        visitor.get(f"{server.url}/r/{pid}")
        poll_until(lambda: visitor.find_elements("css selector", ".leaflet-overlay-pane img.grid-raster"), 30)
        owner.get(f"{server.url}/owner?token={TOKEN}")
        owner.get(f"{server.url}/r/{pid}")
        dash_duo.wait_for_element(f"#{public_page.UNPUBLISH} button", timeout=30).click()
        owner.switch_to.alert.accept()
        dash_duo.wait_for_contains_text(f"#{public_page.BODY}", "No longer published", timeout=15)
        visitor.get(f"{server.url}/r/{pid}")
        # the page is empty until Dash renders it: wait for the body before reading it
        poll_until(lambda: "Not published" in " ".join(e.text for e in visitor.find_elements("id", public_page.BODY)), 30)
        assert "Not published" in visitor.find_element("id", public_page.BODY).text
    finally:
        visitor.quit()
        out = server.stop()
    assert "Traceback" not in out, out[-3000:]


class _Duo:
    """Just enough of dash_duo for `draw_rect` on another driver."""

    def __init__(self, driver):
        self.driver = driver

    def find_element(self, selector):
        return self.driver.find_element("css selector", selector)
