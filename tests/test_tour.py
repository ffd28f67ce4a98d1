"""Unit tests for the guided demo's pure helpers: the steps and their texts, ε in everyday terms,
the buttons' moves, and the noise margin the chart shows (from the releases alone)."""
from __future__ import annotations

import json
import math

import plotly
import pytest

import dp
from app import create_app, dashboard
from components import ids, tour_panel
from components.tour_panel import STEPS, Facts

SAMPLE_INFO = {"name": "Clustered city, 200k points", "n": 200_000, "origin": "sample:city_200k",
               "kind": "points", "users": False}
TITLES = ["The data", "What is published", "What privacy costs: a release at ε = 1",
          "What privacy costs: a release at ε = 0.1", "What an attacker can learn", "The budget"]


@pytest.fixture(scope="module")
def layout_json():
    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"})
    with app.server.test_request_context("/"):        # a page load: a new visitor's workspace
        return app, json.dumps(dashboard(), cls=plotly.utils.PlotlyJSONEncoder)


def test_steps_come_in_order_with_text_for_every_step():
    assert [s.title for s in STEPS] == TITLES
    facts = Facts(info=SAMPLE_INFO, released=1.0, margins={1.0: (250.0, 48_000.0)})
    for step in STEPS:
        paragraphs = step.body(facts)
        assert paragraphs and all(isinstance(p, str) and p for p in paragraphs), step.title
    # only the two cost steps release, first at ε = 1 then at ε = 0.1, and they show the chart
    assert [s.release_at for s in STEPS] == [None, None, 1.0, 0.1, None, None]
    assert [s.chart for s in STEPS] == [False, False, True, True, False, False]


def test_every_step_points_at_elements_on_the_page(layout_json):
    _, page = layout_json
    for step in STEPS:
        for target in step.targets:
            assert f'"id": "{target}"' in page, (step.title, target)
    assert f'"id": "{ids.TOUR_OPEN}"' in page and f'"id": "{ids.TOUR_CARD}"' in page


def test_the_tour_writes_the_existing_controls(layout_json):
    app, _ = layout_json
    outputs = " ".join(app.callback_map)
    assert f"{ids.EPSILON_VALUE}.value@" in outputs            # allow_duplicate outputs
    assert f"{ids.RELEASE_BUTTON}.n_clicks@" in outputs
    assert ids.TOUR_MARGINS in outputs and ids.TOUR_BODY in outputs


@pytest.mark.parametrize("eps, times", [(0.01, "1.01"), (0.05, "1.05"), (0.1, "1.1"), (0.5, "1.6"),
                                        (1, "2.7"), (2, "7.4"), (3, "20"), (10, "22,026")])
def test_epsilon_in_everyday_terms(eps, times):
    assert tour_panel.times_likelier(eps) == times
    assert tour_panel.likelihood_sentence(eps) == (
        f"At ε = {eps:g}, any conclusion about one person becomes at most about {times} times "
        "more likely because that person is in the data.")


def test_an_attackers_coin_toss_moves_by_at_most_e_to_the_epsilon():
    assert tour_panel.belief_after(1.0) == pytest.approx(math.e / (1 + math.e))     # 73%
    assert round(100 * tour_panel.belief_after(0.1)) == 52
    assert tour_panel.belief_after(0.0) == pytest.approx(0.5)
    assert tour_panel.belief_after(1.0, before=0.1) == pytest.approx(math.e / (9 + math.e))
    text = " ".join(tour_panel.attacker_text(Facts(info=SAMPLE_INFO, released=0.1)))
    assert "at most about 1.1 times" in text and "at most 52% sure" in text
    assert "2.7 times and 73%" in text and "one point" in text
    users = " ".join(tour_panel.attacker_text(Facts(info={**SAMPLE_INFO, "users": True}, released=1.0)))
    assert "one user with all their points that are kept" in users and "For comparison" not in users
    regions = tour_panel.attacker_text(Facts(info={**SAMPLE_INFO, "kind": "regions"}, released=1.0))
    assert "one user with their region" in regions[-1]


def test_data_text_says_what_the_data_is_and_that_true_counts_are_private():
    sample = " ".join(tour_panel.data_text(Facts(info=SAMPLE_INFO)))
    assert "“Clustered city, 200k points”: 200,000 points" in sample and "no real person" in sample
    assert "only the owner of the data" in sample
    upload = " ".join(tour_panel.data_text(Facts(info={**SAMPLE_INFO, "origin": "upload", "n": 12})))
    assert "the file you uploaded: 12 points" in upload
    assert "No data is loaded" in tour_panel.data_text(Facts())[0]


def test_each_release_is_announced_with_its_cost_the_step_before():
    facts = Facts(info=SAMPLE_INFO, spent=1.0, total=10.0, cost=0.1)
    notices = [tour_panel.spend_notice(i, facts) for i in range(len(STEPS))]
    assert [n is not None for n in notices] == [False, True, True, False, False, False]
    assert notices[1].startswith("Next publishes the map again at ε = 1: a new release, which spends ε = 0.1")
    assert "at ε = 0.1" in notices[2] and "(9 of 10 left now)" in notices[2]


def test_cost_steps_quote_the_releases_own_margins():
    facts = Facts(margins={1.0: (250.0, 50_000.0), 0.1: (1_000.0, 49_000.0)})
    at_1 = " ".join(tour_panel.cost_text_at_1(facts))
    assert "published count of 50,000" in at_1 and "±250 people (about 0.5% of it)" in at_1
    at_01 = " ".join(tour_panel.cost_text_at_01(facts))
    assert "±1,000 people" in at_01 and "4.0 times wider" in at_01
    assert "no release at ε = 0.1 yet" in tour_panel.cost_text_at_01(Facts())[0]


def test_buttons_move_between_steps():
    last = len(STEPS) - 1
    assert tour_panel.move(ids.TOUR_OPEN, None) == 0 and tour_panel.move(ids.TOUR_OPEN, 3) == 0
    assert tour_panel.move(ids.TOUR_NEXT, 0) == 1 and tour_panel.move(ids.TOUR_NEXT, last) == last
    assert tour_panel.move(ids.TOUR_BACK, 2) == 1 and tour_panel.move(ids.TOUR_BACK, 0) == 0
    assert tour_panel.move(ids.TOUR_END, 2) is None and tour_panel.move(ids.TOUR_NEXT, None) is None


def test_margin_comes_from_the_release_on_a_public_middle_box():
    data, domain = dp.load_sample("small_city_5k")
    box = tour_panel.middle_box(domain)
    assert box.area == pytest.approx(0.04 * domain.width * domain.height)
    assert (box.west + box.east) / 2 == pytest.approx((domain.west + domain.east) / 2)
    rel = dp.release("ug", data, domain, epsilon=1.0, seed=3)
    margin, answer = tour_panel.margin_of(rel)
    lo, hi = rel.interval(box)
    assert margin == pytest.approx((hi - lo) / 2) and answer == rel.answer(box)
    # less ε, more noise on the same box
    assert tour_panel.margin_of(dp.release("ug", data, domain, epsilon=0.1, seed=3))[0] > margin


def test_margins_store_keeps_one_point_per_epsilon_of_one_series():
    a, b = ["fp", "ug", [0, 0, 1, 1]], ["fp", "privtree", [0, 0, 1, 1]]
    store = tour_panel.add_margin(None, a, 1.0, 10.0, 100.0)
    store = tour_panel.add_margin(store, a, 0.1, 50.0, 90.0)
    assert store["points"] == [[0.1, 50.0, 90.0], [1.0, 10.0, 100.0]]
    store = tour_panel.add_margin(store, a, 1.0, 12.0, 98.0)            # a new release at ε = 1
    assert store["points"] == [[0.1, 50.0, 90.0], [1.0, 12.0, 98.0]]
    assert tour_panel.add_margin(store, b, 1.0, 30.0, 99.0)["points"] == [[1.0, 30.0, 99.0]]
    assert tour_panel.add_margin(store, a, 0.5, math.nan, 95.0)["points"] == store["points"]
    fig = tour_panel.margin_figure(store["points"])
    assert list(fig.data[0].x) == [0.1, 1.0] and list(fig.data[0].text) == ["±50", "±12"]
