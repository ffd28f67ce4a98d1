"""Shared test configuration: Chrome flags for headless runs on a machine without a network,
and the fixtures several test modules use (an offline app, the 5k-point sample)."""
import pytest
from selenium.webdriver.chrome.options import Options

import dp
from app import create_app


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
