"""The app's pages (components/pages.py): one Dash app whose routing callback renders the
dashboard at /, the published releases at /r/ and /r/<id>, and a page for any other address."""
import json

import dash
import pytest

import dp
from app import create_app
from components import ids, public_page
from helpers import page_layout, page_request
from server import services


def make_app(tiles: str):
    return create_app({"tiles_url": f"http://127.0.0.1:9/{tiles}/{{z}}/{{x}}/{{y}}.png"})


@pytest.fixture(scope="module")
def app():
    return make_app("first")


def visitor(app):
    client = app.server.test_client()
    assert client.get("/").status_code == 200          # the page's address gives the cookie
    return client


def test_the_page_container_has_the_ids_the_emulator_and_tests_post():
    container = json.dumps(dash.page_container.to_plotly_json(), default=lambda c: c.to_plotly_json())
    assert all(f'"{i}"' in container for i in (ids.PAGES_LOCATION, ids.PAGES_CONTENT, ids.PAGES_STORE))


@pytest.mark.parametrize("path, says, lacks", [
    ("/", "Private location statistics", "Nothing is published"),
    ("/r/", "Nothing is published on this server yet", ids.RELEASE_BUTTON),
    ("/r/Not-Publishd", "Not published", ids.RELEASE_BUTTON),
    ("/r/not an id", "Not published", ids.RELEASE_BUTTON),
    ("/somewhere/else", "No page at this address", ids.RELEASE_BUTTON),
])
def test_each_address_renders_its_page(app, path, says, lacks):
    text = json.dumps(page_layout(visitor(app), path))
    assert says in text and lacks not in text


def test_a_published_release_has_its_page(app):
    data, domain = dp.load_sample("small_city_5k")
    rel = dp.release("ug", data, domain, 1.0)
    with app.server.test_request_context("/"):
        pid = services.current().published.publish(rel, "A title for the page")
    text = json.dumps(page_layout(visitor(app), f"/r/{pid}"))
    assert "A title for the page" in text and f'"{public_page.PID}"' in text
    assert "A title for the page" in json.dumps(page_layout(visitor(app), "/r/"))      # in the gallery


def test_each_app_renders_its_pages_with_its_own_settings(app):
    """Dash keeps one registry of pages per process: the app made last must not lend its
    settings to an app made before it."""
    later = make_app("second")
    assert "/first/" in json.dumps(page_layout(visitor(app), "/"))
    assert "/second/" in json.dumps(page_layout(visitor(later), "/"))


@pytest.mark.parametrize("pathname", [None, "", "r/", 5, ["/"], "/" + "x" * 3000])
def test_an_address_no_browser_sends_is_refused_in_words(app, pathname):
    body = page_request()
    body["inputs"][0]["value"] = pathname
    answer = visitor(app).post("/_dash-update-component", json=body)
    assert answer.status_code == 400
    assert "an address on this server, starting with /" in answer.get_data(as_text=True)
