"""Shared test configuration: Chrome flags for headless runs on a machine without a network,
and the fixtures several test modules use (an offline app, the 5k-point sample, dash_duo serving
on a free port so that test processes running side by side (pytest -n) never share one)."""
import ast
import threading
import weakref

import pytest
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

import dp
from app import create_app
from helpers import free_port


def _parse_one_at_a_time():
    """CPython 3.11 counts the depth of the AST it builds in one counter per interpreter, not per
    thread (python/cpython#106905): two threads parsing at once can raise "SystemError: AST
    constructor recursion depth mismatch". The tests run apps in threads beside the test's own
    (werkzeug builds its URL rules with `ast.parse` while an app is made, `inspect` parses
    signatures while a test server's thread serves a request; a full run failed so once), so
    here `ast.parse` runs one call at a time."""
    lock, parse = threading.RLock(), ast.parse

    def parse_alone(*args, **kwargs):
        with lock:
            return parse(*args, **kwargs)
    ast.parse = parse_alone


_parse_one_at_a_time()


def _keep_every_services_opened() -> list:
    """Every `server.services` object this test process opens (each app made opens one), held
    weakly, so that `_no_job_outlives_its_test` can stop their job threads."""
    from server import services
    opened, open_services = [], services.open_services

    def open_and_keep(*args, **kwargs):
        made = open_services(*args, **kwargs)
        opened.append(weakref.ref(made))
        return made
    services.open_services = open_and_keep
    return opened


_OPENED = _keep_every_services_opened()


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test():
    """After each test, its apps' evaluation and plan jobs are stopped and waited for: a job
    left running makes releases and reads counts in the next test of the same process, which
    then sees draws, charges or reads it never made (a run split over three processes failed
    so, in the draw audits and the plan's read spy)."""
    yield
    for ref in _OPENED:
        made = ref()
        if made is not None:
            made.jobs.stop_all()


class StepElement(WebElement):
    """A page element the tests touch the way a user does: when it sits in a closed step of the
    side panel, the step's title is clicked first (opening it closes the open one). Selenium's
    ActionChains (drags, `dash_duo.clear_input`) bypass this: click the element first."""
    def open_step(self):
        name = self.parent.execute_script(
            "var d = arguments[0].closest('details.step');"
            "if (!d || d.open || arguments[0].closest('summary')) { return null; }"
            "var name = d.querySelector('summary .step-name');"
            "name.scrollIntoView({block: 'nearest'}); return name;", self)
        if name is not None:
            WebElement.click(name)

    def click(self):
        self.open_step()
        super().click()

    def send_keys(self, *value):
        self.open_step()
        super().send_keys(*value)

    def clear(self):
        self.open_step()
        super().clear()

    @property
    def text(self):
        self.open_step()
        return super().text


WebDriver._web_element_cls = StepElement


@pytest.fixture
def dash_duo(dash_duo):
    """dash's dash_duo, each app it starts served on a port free right now: dash itself numbers
    ports from a fixed one in each process, so two test processes would start on the same port
    (the second one's server fails to bind, and its browser could open the first one's page)."""
    start_server = dash_duo.start_server

    def start_on_a_free_port(app, navigate=True, **kwargs):
        kwargs.setdefault("port", free_port())
        return start_server(app, navigate=navigate, **kwargs)
    dash_duo.start_server = start_on_a_free_port
    return dash_duo


@pytest.fixture(scope="module")
def app():
    """The dashboard with base-map tiles pointed at a closed port (offline)."""
    return create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"})


@pytest.fixture(scope="module")
def small():
    """The built-in 5,000-point London sample and its box."""
    return dp.load_sample("small_city_5k")


def pytest_setup_options():
    """Extra flags for dash_duo's Chromium: no background network calls, fixed window size."""
    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=1400,1000"):
        options.add_argument(flag)
    return options


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL server for this test process (the README's test command installs
    Debian's postgresql); tests on it skip, saying so, where it is not installed. Its folder is
    made in /tmp itself: pytest's own temporary folders are closed to the `postgres` user."""
    import shutil
    import tempfile
    from helpers import Postgres, postgres_binaries
    if postgres_binaries() is None:
        pytest.skip("PostgreSQL's server programs are not installed (Debian's package postgresql)")
    folder = tempfile.mkdtemp(prefix="dp-pg-")
    server = Postgres(folder)
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)
