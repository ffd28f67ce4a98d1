"""Plan before spending in a real browser (issue 26, item 2): the owner states a need, sees each
mechanism's ε for it without a read of the data or a charge, uses a row, sees the preview, and
the Release button says what it will spend."""
from __future__ import annotations

import re

import pytest

import dp
from components import ids
from dp import plan as planning
from helpers import spy_on_exact_counts
from test_browser import poll_until, start  # skips without a browser

pytestmark = pytest.mark.browser


def spent(dash_duo) -> str:
    """'Spent ε = x of y' from the account summary (the rest follows the ε typed)."""
    return re.search(r"Spent ε = \S+ of \S+", dash_duo.find_element(f"#{ids.ACCOUNT_SUMMARY}").text).group(0)


def plan_for(dash_duo, people: int, points: int = 5_000) -> None:
    """State ±`people` on the default rectangles, assuming `points` points (fewer than the
    default 100,000: a plan of every mechanism on six twins of them is quicker), run the plan
    step and wait for its table."""
    for box, value in ((ids.PLAN_TARGET, people), (ids.PLAN_POINTS, points)):
        field = dash_duo.find_element(f"#{box}")
        field.clear()
        field.send_keys(str(value))
    dash_duo.find_element(f"#{ids.PLAN_RUN}").click()
    dash_duo.wait_for_contains_text(f"#{ids.PLAN_STATUS}", "Planned: nothing read, nothing charged", timeout=180)


def test_plan_is_free_and_fills_in_the_release(dash_duo, monkeypatch):
    start(dash_duo, release=False)
    before = spent(dash_duo)
    read = spy_on_exact_counts(monkeypatch)

    plan_for(dash_duo, 200)
    assert set(read) == {f"synthetic {s}" for s in planning.WITH_VALUES}    # the twins, never the data
    assert spent(dash_duo) == before
    rows = dash_duo.find_elements(f"#{ids.PLAN_RESULT} tbody tr")
    table = dash_duo.find_element(f"#{ids.PLAN_RESULT}").text
    assert len(rows) >= 3 and "Uniform grid" in table
    assert dp.mechanisms()[dp.recommend("points").name].label in table      # the recommended one too
    assert "safety margin" in table and "planned for exact values too" in table
    assert "My points may sit on exact values" in dash_duo.find_element(f"#{ids.PLAN_EXACT}").text
    use = dash_duo.find_elements(f"#{ids.PLAN_RESULT} tbody button")[0]
    eps = float(use.text.split("=")[1])
    use.click()
    poll_until(lambda: dash_duo.find_element(f"#{ids.PLAN_PREVIEW}").is_displayed(), 30)
    assert dash_duo.find_element(f"#{ids.PLAN_PREVIEW}").get_attribute("src").startswith("data:image/png")
    assert "synthetic city (not your data)" in dash_duo.find_element(f"#{ids.PLAN_PREVIEW}").get_attribute("alt")
    poll_until(lambda: float(dash_duo.find_element(f"#{ids.EPSILON_VALUE}").get_attribute("value")) == eps, 10)
    dash_duo.wait_for_text_to_equal(f"#{ids.RELEASE_BUTTON}", f"Release (spends ε = {eps:g})", timeout=10)
    assert spent(dash_duo) == before                                # still nothing spent
    dash_duo.find_element(f"#{ids.RELEASE_BUTTON}").click()
    dash_duo.wait_for_contains_text(f"#{ids.RELEASE_STATUS}", "Released", timeout=60)
    dash_duo.wait_for_contains_text(f"#{ids.ACCOUNT_SUMMARY}", f"Spent ε = {eps:g}", timeout=20)


def test_a_plan_can_be_cancelled_and_shows_what_it_planned(dash_duo):
    """Cancel appears while the plan runs and stops it after the mechanism being planned; the
    mechanisms planned are shown, nothing charged."""
    start(dash_duo, release=False)
    before = spent(dash_duo)
    assert not dash_duo.find_element(f"#{ids.PLAN_CANCEL}").is_displayed()
    dash_duo.find_element(f"#{ids.PLAN_RUN}").click()
    dash_duo.wait_for_contains_text(f"#{ids.PLAN_PROGRESS_TEXT}", "Planning… 1 of", timeout=120)
    cancel = dash_duo.find_element(f"#{ids.PLAN_CANCEL}")
    assert cancel.is_displayed()
    cancel.click()
    dash_duo.wait_for_contains_text(f"#{ids.PLAN_STATUS}", "Cancelled after", timeout=120)
    done, total = map(int, re.search(r"Cancelled after (\d+) of (\d+) mechanisms",
                                     dash_duo.find_element(f"#{ids.PLAN_STATUS}").text).groups())
    assert 0 < done < total
    assert len(dash_duo.find_elements(f"#{ids.PLAN_RESULT} tbody tr")) == done
    poll_until(lambda: dash_duo.find_element(f"#{ids.PLAN_RUN}").is_enabled(), 10)
    assert not dash_duo.find_element(f"#{ids.PLAN_CANCEL}").is_displayed()
    assert spent(dash_duo) == before
