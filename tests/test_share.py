"""Shareable settings: the link's query string round-trips and bad links say what is wrong."""
import pytest

import dp
from components import share
from components.controls import CUSTOM


def test_settings_round_trip_through_the_query_string():
    sf = dp.PRESETS["San Francisco"]
    q = share.to_query("privtree", 0.5, [0.3, 0.7], {"base_cells": 512, "theta": 2.0}, sf)
    assert q == "?mechanism=privtree&epsilon=0.5&split=0.3%2C0.7&domain=San+Francisco&base_cells=512&theta=2.0"
    s = share.from_query(q)
    assert (s.mechanism, s.epsilon, s.domain, s.preset) == ("privtree", 0.5, sf, "San Francisco")
    assert s.split == pytest.approx((0.3, 0.7)) and s.params["theta"] == 2.0 and s.params["base_cells"] == 512
    assert s.matches("privtree", 0.5, [0.3, 0.7], s.params, sf)
    assert not s.matches("privtree", 1.0, [0.3, 0.7], s.params, sf)
    box = dp.Domain(-122.5, 37.7, -122.3, 37.8, name="custom box")
    t = share.from_query(share.to_query("e2epriv", 1.0, [0.05, 0.15, 0.8], {"grid_sizes": [30, 40]}, box))
    assert (t.domain, t.preset, t.params["grid_sizes"]) == (box, CUSTOM, [30, 40])
    assert share.from_query("") is None and share.from_query("?utm=x") is None


def test_no_link_for_a_box_fitted_to_the_data():
    data, _ = dp.load_sample("small_city_5k")
    with pytest.warns(dp.PrivacyLeakWarning):
        fitted = dp.fit_to_data(data.x, data.y)
    with pytest.raises(dp.ParameterError, match="would publish the data's extreme coordinates"):
        share.to_query("ug", 1.0, [0.05, 0.95], {}, fitted)


@pytest.mark.parametrize("query, words", [
    ("?mechanism=leaky&domain=London", "unknown mechanism 'leaky'"),        # not private: never offered
    ("?mechanism=ug&epsilon=50&domain=London", "type a total ε from 0.01 to 10"),
    ("?mechanism=ug&split=1&domain=London", "should be 2 positive shares"),
    ("?mechanism=ug&domain=Atlantis", "unknown domain 'Atlantis'"),
    ("?mechanism=ug&box=1,2,3", "four sides"),
    ("?mechanism=privtree&domain=London&colour=red", "no parameter(s) ['colour']"),
])
def test_a_broken_link_says_what_is_wrong(query, words):
    with pytest.raises(dp.ParameterError) as exc:
        share.from_query(query)
    assert words in str(exc.value)
