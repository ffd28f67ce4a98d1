"""Smoke test of the production server: `python app.py` starts gunicorn with two workers that
serve the page and a callback, on a free loopback port, with a store folder of the test's own."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from components import ids
from helpers import free_port, wait_until

ROOT = Path(__file__).resolve().parents[1]


def get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None, ""


@pytest.mark.slow          # worker processes: the quick suite leaves it to the full one
def test_app_py_serves_the_page_and_callbacks_from_gunicorn_workers(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port), "--workers", "2",
         "--store-dir", str(tmp_path / "store"), "--accounts-dir", str(tmp_path / "accounts"),
         "--published-dir", str(tmp_path / "published"), "--tiles-url", "http://127.0.0.1:9/{z}/{x}/{y}.png"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: get(base + "/")[0] == 200 or proc.poll() is not None, timeout=60)
        status, page = get(base + "/")
        assert status == 200 and "Private location statistics" in page
        with urllib.request.urlopen(base + "/", timeout=10) as r:      # no page may frame it
            assert r.headers["X-Frame-Options"] == "DENY"
            assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
        body = {"output": f"{ids.QUERY_RANDOM_NOUN}.children",
                "outputs": {"id": ids.QUERY_RANDOM_NOUN, "property": "children"},
                "inputs": [{"id": ids.RANDOM_N, "property": "value", "value": 3}],
                "changedPropIds": [f"{ids.RANDOM_N}.value"], "state": []}
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        browser.open(base + "/", timeout=10).read()       # the page gives this browser its session cookie
        for _ in range(4):                   # several requests: more than one worker answers
            req = urllib.request.Request(base + "/_dash-update-component", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            with browser.open(req, timeout=10) as r:
                answer = json.loads(r.read())
            assert answer["response"][ids.QUERY_RANDOM_NOUN]["children"] == " random rectangles of "
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)      # busy: workers wait for pools still starting
    assert "Using worker: ReadWholeWorker" in out and out.count("Booting worker") == 2   # server/front.py
    assert (tmp_path / "accounts" / "session.key").exists()   # one signing key for every worker
