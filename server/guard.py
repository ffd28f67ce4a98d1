"""What every request and response of the server goes through, whoever sends it.

- Responses carry headers that keep the pages out of other sites' frames (a framed dashboard
  could be clicked through by a page the owner visits) and stop content sniffing.
- A state-changing request whose `Origin` (or `Sec-Fetch-Site`) says it came from another
  site's page is refused: a page elsewhere cannot spend or publish with the owner's cookies.
- A callback request without a session cookie this server issued is refused before it runs:
  a script without cookies cannot create budget accounts or workspaces by the thousand.
"""
from __future__ import annotations

from urllib.parse import urlsplit

import flask

from . import sessions

HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'; object-src 'none'; base-uri 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
OTHER_SITE = ("Refused: this request came from a page of another site. Open the dashboard at "
              "its own address and use it there.")
NO_SESSION = ("Refused: this browser has no session with this server (its cookie is missing or "
              "was not issued here). Reload the page with cookies allowed for this site.")


def install(server, callback_paths) -> None:
    """Check every request and mark every response of the Flask `server`; `callback_paths`: the
    Dash callback endpoints, which need a session cookie."""
    paths = frozenset(callback_paths)

    @server.before_request
    def check_request():
        if flask.request.method in SAFE_METHODS:
            return None
        if from_other_site(flask.request):
            return _refuse(OTHER_SITE)
        if flask.request.path in paths and not sessions.has_session():
            return _refuse(NO_SESSION)
        return None

    @server.after_request
    def add_headers(response):
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def from_other_site(request) -> bool:
    """True when the browser says the request was made by a page of another origin: its
    `Sec-Fetch-Site` is cross-site, or its `Origin` names another host or is opaque ("null").
    A request with neither (a script, an old browser) is not a cross-site page's."""
    if request.headers.get("Sec-Fetch-Site") == "cross-site":
        return True
    origin = request.headers.get("Origin")
    if origin is None:
        return False
    return origin == "null" or urlsplit(origin).netloc.lower() != request.host.lower()


def _refuse(text: str):
    return flask.Response(text, status=403, content_type="text/plain; charset=utf-8")
