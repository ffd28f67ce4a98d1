"""Shared test configuration: Chrome flags for headless runs on a machine without a network."""
from selenium.webdriver.chrome.options import Options


def pytest_setup_options():
    """Extra flags for dash_duo's Chromium: no background network calls, fixed window size."""
    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=1400,1000"):
        options.add_argument(flag)
    return options
