"""The page a person reads, at 1280×800 and 1600×1000 (issue 26, items 5 and 7): every control
has a name a screen reader reads (Chromium's computed accessible name), no table hides a column,
the ledger's notes have room, the Release button works from the keyboard."""
from __future__ import annotations

import pytest
from selenium.webdriver.common.keys import Keys

from components import ids
from test_browser import poll_until, start, table_rows, wait_rows  # skips without a browser
from test_browser_session import no_horizontal_overflow

pytestmark = pytest.mark.browser

CONTROLS = ("input:not([type=hidden]), select, textarea, button, [role=slider], [role=combobox], "
            "[role=radio], [role=checkbox], [role=switch]")


def unnamed_controls(dash_duo) -> list[str]:
    """The displayed controls with an empty accessible name, described by tag, id and class."""
    out = []
    for el in dash_duo.find_elements(CONTROLS):
        if el.is_displayed() and not (el.accessible_name or "").strip():
            out.append(f"<{el.tag_name} id={el.get_attribute('id')!r} class={el.get_attribute('class')!r} "
                       f"type={el.get_attribute('type')!r}>")
    return out


def fits(dash_duo, selector: str) -> bool:
    """The element shows all its content across (no horizontal scrolling inside it)."""
    return dash_duo.driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e.scrollWidth <= e.clientWidth + 1;",
        selector)


@pytest.mark.parametrize("size", [(1280, 800), (1600, 1000)])
def test_controls_are_named_and_tables_fit(dash_duo, size):
    start(dash_duo, release=False)
    dash_duo.driver.set_window_size(*size)
    # the Release button from the keyboard: focus it, press Enter
    button = dash_duo.find_element(f"#{ids.RELEASE_BUTTON}")
    dash_duo.driver.execute_script("arguments[0].focus()", button)
    button.send_keys(Keys.ENTER)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Released", timeout=60)
    dash_duo.find_element(f"#{ids.QUERY_TYPED}").send_keys("-74.0, 40.70, -73.93, 40.78" + Keys.ENTER)
    wait_rows(dash_duo, 1)
    poll_until(lambda: table_rows(dash_duo, ids.LEDGER_TABLE), 20)

    unnamed = unnamed_controls(dash_duo)
    assert unnamed == [], "\n".join(unnamed)
    assert fits(dash_duo, f"#{ids.QUERY_TABLE} .dash-spreadsheet-container"), "the query table scrolls"
    note = dash_duo.find_element(f"#{ids.LEDGER_TABLE} th[data-dash-column=note]")
    assert note.size["width"] >= 100
    assert no_horizontal_overflow(dash_duo)
