"""Browser test of the guided demo (headless Chromium): every step in order, the two releases
it makes through the mechanism panel and their charge on the account, Back, End, and no
sideways scrolling at common widths while the tour is open.
"""
from __future__ import annotations

import pytest

from test_browser import E2E_STEPS, ledger_steps, on_screen, poll_until, start   # skips without a browser
from test_browser_session import no_horizontal_overflow

from components import ids, tour_panel

pytestmark = pytest.mark.browser


def text(dash_duo, id_: str) -> str:
    """The visible text of the element with this id."""
    return dash_duo.find_element(f"#{id_}").text


def outlines_exactly(dash_duo, targets) -> bool:
    """True when the outlined cards are exactly those holding the given elements."""
    return dash_duo.driver.execute_script(
        "var want = new Set(arguments[0].map(id => document.getElementById(id).closest('.card')));"
        "var got = Array.from(document.querySelectorAll('.tour-focus'));"
        "return got.length === want.size && got.every(c => want.has(c));", list(targets))


def chart_points(dash_duo) -> int:
    """How many dots the tour's margin chart draws."""
    return len(dash_duo.find_elements(f"#{ids.TOUR_CHART} .scatterlayer .trace .points path"))


def epsilon_box(dash_duo) -> str:
    """What the mechanism panel's ε box holds."""
    return dash_duo.find_element(f"#{ids.EPSILON_VALUE}").get_attribute("value")


def go_to(dash_duo, button: str, step: int):
    """Press a tour button and wait for the step's title and counter."""
    dash_duo.find_element(f"#{button}").click()
    dash_duo.wait_for_text_to_equal(f"#{ids.TOUR_TITLE}", tour_panel.STEPS[step].title, timeout=10)
    assert text(dash_duo, ids.TOUR_COUNTER) == f"Step {step + 1} of {len(tour_panel.STEPS)}"
    targets = tour_panel.STEPS[step].targets
    poll_until(lambda: outlines_exactly(dash_duo, targets), 5)
    assert outlines_exactly(dash_duo, targets)        # the panels the step is about, and no other


def test_guided_demo_walks_through_every_step(dash_duo):
    start(dash_duo)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 1 of 10", timeout=10)
    assert not dash_duo.find_element(f"#{ids.TOUR_CARD}").is_displayed()

    # 1: the data, with the data panel outlined; nothing to go back to
    go_to(dash_duo, ids.TOUR_OPEN, 0)
    assert dash_duo.find_element(f"#{ids.TOUR_CARD}").is_displayed()
    assert "200,000 points" in text(dash_duo, ids.TOUR_BODY)
    assert "true counts" in text(dash_duo, ids.TOUR_BODY)
    assert not on_screen(dash_duo, ids.TOUR_CHART)
    assert dash_duo.find_element(f"#{ids.TOUR_BACK}").get_attribute("disabled")

    # 2: what is published; it warns that Next releases and spends ε
    go_to(dash_duo, ids.TOUR_NEXT, 1)
    assert "dashed box is the public domain" in text(dash_duo, ids.TOUR_BODY)
    notice = dash_duo.find_element(f"#{ids.TOUR_BODY} .tour-notice").text
    assert "at ε = 1: a new release, which spends ε = 1 from this dataset's privacy budget" in notice
    assert "Spent ε = 1 of 10" in text(dash_duo, ids.ACCOUNT_SUMMARY)     # warned, not yet spent

    # 3: Next typed ε = 1 and pressed Release: a real release, charged to the account
    go_to(dash_duo, ids.TOUR_NEXT, 2)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2 of 10", timeout=30)
    assert epsilon_box(dash_duo) == "1"
    assert "at ε = 1," in text(dash_duo, ids.RELEASE_STATUS)
    dash_duo.wait_for_contains_text(f"#{ids.TOUR_BODY}", "95 times in 100", timeout=20)
    assert "2.7 times more likely" in text(dash_duo, ids.TOUR_BODY)
    poll_until(lambda: chart_points(dash_duo) == 1, 10)
    assert chart_points(dash_duo) == 1
    assert "spends ε = 0.1" in dash_duo.find_element(f"#{ids.TOUR_BODY} .tour-notice").text

    # 4: the same at ε = 0.1: the ε box, the status line, the ledger and the chart follow
    go_to(dash_duo, ids.TOUR_NEXT, 3)
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "at ε = 0.1,", timeout=30)
    assert epsilon_box(dash_duo) == "0.1"
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", "Spent ε = 2.1 of 10", timeout=20)
    dash_duo.wait_for_contains_text(f"#{ids.LEDGER_TOTAL}", "This release: ε = 0.1 of 0.1", timeout=10)
    assert ledger_steps(dash_duo) == E2E_STEPS
    dash_duo.wait_for_contains_text(f"#{ids.TOUR_BODY}", "times wider", timeout=20)
    poll_until(lambda: chart_points(dash_duo) == 2, 10)
    assert chart_points(dash_duo) == 2

    # 5: what an attacker learns, for the ε on the map
    go_to(dash_duo, ids.TOUR_NEXT, 4)
    body = text(dash_duo, ids.TOUR_BODY)
    assert "At ε = 0.1, any conclusion about one person becomes at most about 1.1 times" in body
    assert "at most 52% sure" in body and "one point" in body
    assert not on_screen(dash_duo, ids.TOUR_CHART)

    # 6: the budget, with the account's own total; the last step
    go_to(dash_duo, ids.TOUR_NEXT, 5)
    assert "ε = 2.1 of the total 10 is spent" in text(dash_duo, ids.TOUR_BODY)
    assert dash_duo.find_element(f"#{ids.TOUR_NEXT}").get_attribute("disabled")

    # Back shows the previous step again and spends nothing
    go_to(dash_duo, ids.TOUR_BACK, 4)
    go_to(dash_duo, ids.TOUR_BACK, 3)
    assert "Spent ε = 2.1 of 10" in text(dash_duo, ids.ACCOUNT_SUMMARY)
    assert epsilon_box(dash_duo) == "0.1"

    # with the tour open, no sideways scrolling at laptop and desktop widths
    for width in (1280, 1600):
        dash_duo.driver.set_window_size(width, 1000)
        poll_until(lambda: no_horizontal_overflow(dash_duo), 5)
        assert no_horizontal_overflow(dash_duo), width

    # End closes the card and takes the outline away
    dash_duo.find_element(f"#{ids.TOUR_END}").click()
    poll_until(lambda: not dash_duo.find_element(f"#{ids.TOUR_CARD}").is_displayed(), 10)
    assert not dash_duo.find_element(f"#{ids.TOUR_CARD}").is_displayed()
    assert outlines_exactly(dash_duo, [])
