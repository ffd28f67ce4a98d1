"""What every request and response goes through (`server.guard`): the pages cannot be framed, a
page of another site cannot change anything with the owner's cookies, a request without a
session cookie creates nothing, and the public pages refuse malformed callbacks in words."""
from __future__ import annotations

import pytest

from app import create_app
from components import ids
from server import services, state
from tests.helpers import account_bodies, dash_call

UPDATE = "/_dash-update-component"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png",
                       "accounts_dir": str(tmp_path_factory.mktemp("accounts"))})


def _accounts() -> set:
    return set(account_bodies(services.current().accounts.folder))


def _raise(client, **headers):
    """The "Raise total" confirmation of the default sample's account, as the page sends it."""
    info = state.use_sample("any", state.DEFAULT_SAMPLE)
    client.environ_base.update({f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()})
    return dash_call(client, f"{ids.ACCOUNT_TICK}.data",
                     {f"{ids.ACCOUNT_CONFIRM}.submit_n_clicks": 1, f"{ids.ACCOUNT_RAISE_VALUE}.value": 12,
                      f"{ids.DATASET}.data": info})


@pytest.mark.parametrize("path", ["/", "/r/", "/_dash-layout", "/owner?token=wrong"])
def test_no_page_can_be_framed_by_another_site(app, path):
    answer = app.server.test_client().get(path)
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]
    assert answer.headers["X-Content-Type-Options"] == "nosniff"


def test_a_request_without_a_session_cookie_creates_nothing(app):
    before = _accounts()
    answer = _raise(app.server.test_client(use_cookies=False))
    assert answer.status_code == 403
    assert "no session with this server" in answer.get_data(as_text=True)
    assert _accounts() == before
    # the same request from a browser that loaded the page raises its own account
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    assert _raise(client).status_code == 200
    assert len(_accounts() - before) == 1


@pytest.mark.parametrize("headers", [{"Origin": "https://elsewhere.example"}, {"Origin": "null"},
                                     {"Sec-Fetch-Site": "cross-site"}])
def test_a_page_of_another_site_cannot_change_anything(app, headers):
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    before = _accounts()
    answer = _raise(client, **headers)
    assert answer.status_code == 403 and "another site" in answer.get_data(as_text=True)
    assert _accounts() == before


def test_the_page_s_own_origin_is_let_through(app):
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    assert _raise(client, Origin="http://localhost", **{"Sec-Fetch-Site": "same-origin"}).status_code == 200


@pytest.mark.parametrize("body", [b"[1, 2]", b"{\"output\": \"nowhere.children\"}", b"not json"])
def test_a_public_page_s_visitor_is_refused_a_malformed_callback_in_words(app, body):
    client = app.server.test_client()            # a visitor who only ever opened the public pages
    assert client.get("/r/").status_code == 200
    answer = client.post(UPDATE, data=body, content_type="application/json")
    assert answer.status_code == 400
    assert "Refused callback request: " in answer.get_data(as_text=True)
