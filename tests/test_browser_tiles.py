"""Issue 41, item 7: a tile server on the same host as the dashboard (another port, as a local
tile server is) never receives the owner's cookies. Cookies ignore the port, so before tiles were
fetched as anonymous cross-origin images, every tile request carried `dp_session` and `dp_owner`.
Checked in Chromium against `python app.py` (gunicorn, 3 workers) as the owner."""
from __future__ import annotations

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from test_browser import poll_until        # skips without a browser
from test_browser_workspace import Gunicorn

from components import ids
from helpers import free_port
from server import sessions

pytestmark = pytest.mark.browser
TOKEN = "owner-token-of-the-tile-cookie-test"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


class TileServer(ThreadingHTTPServer):
    """A tile server on 127.0.0.1 that answers every tile with a 1-pixel PNG (CORS allowed, as
    OpenStreetMap's and tileserver-gl's are) and keeps each request's Cookie header."""

    def __init__(self):
        self.cookies: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.cookies.append(self.headers.get("Cookie"))
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                self.wfile.write(PNG)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_a_same_host_tile_server_never_sees_the_owners_cookies(dash_duo, tmp_path, monkeypatch):
    tiles = TileServer()
    monkeypatch.setenv("DP_OWNER_TOKEN", TOKEN)
    server = Gunicorn(tmp_path, "--tiles-url", f"http://127.0.0.1:{tiles.server_port}/{{z}}/{{x}}/{{y}}.png")
    try:
        server.wait_listening()
        driver = dash_duo.driver
        driver.get(f"{server.url}/owner?token={TOKEN}")
        for width in (1280, 1600):                 # a new page (and new tiles) at each width
            driver.set_window_size(width, 1000)
            asked = len(tiles.cookies)
            driver.get(server.url)
            dash_duo.wait_for_element(f"#{ids.MAP}", timeout=30)
            names = {c["name"] for c in driver.get_cookies()}
            assert {sessions.COOKIE, sessions.OWNER_COOKIE} <= names    # the owner's cookies are set
            poll_until(lambda: len(tiles.cookies) >= asked + 4, 30)   # the base map asked for tiles
            # and they drew: the map is not marked offline
            poll_until(lambda: driver.execute_script(
                f"return !document.getElementById('{ids.MAP}').classList.contains('tiles-offline') && "
                "document.querySelectorAll('.leaflet-tile-loaded').length > 0"), 20)
        assert all(c is None for c in tiles.cookies), tiles.cookies[:3]
    finally:
        tiles.shutdown()
        out = server.stop()
    assert "Traceback" not in out, out[-3000:]
