"""`server.release_key.ReleaseKey`: a release's settings read by name, and the same text as the
keys earlier versions wrote (their budget charges name releases by that text)."""
from __future__ import annotations

import json

import pytest

import dp
from server.release_key import ReleaseKey

BOX = dp.Domain(-0.5, 51.3, 0.3, 51.7, name="London")


def test_the_text_is_the_one_earlier_versions_wrote():
    # as 0.9.0's state.release_key wrote it: a JSON list, dict keys sorted
    legacy = json.dumps(["fp1", BOX.to_dict(), "htf", {"b": 2, "a": 1}, [0.2, 0.3, 0.5], 0.5, 7, 3],
                        sort_keys=True, default=str)
    key = ReleaseKey.parse(legacy)
    assert key.text == legacy
    assert (key.fingerprint, key.mechanism, key.epsilon, key.seed, key.points_per_user) == ("fp1", "htf", 0.5, 7, 3)
    assert key.params == {"a": 1, "b": 2} and key.split == [0.2, 0.3, 0.5] and key.box == BOX
    made = ReleaseKey.make("fp1", BOX, "htf", {"b": 2, "a": 1}, (0.2, 0.3, 0.5), 0.5, 7, 3)
    assert made.text == legacy


def test_fresh_randomness_is_a_new_key_each_time_and_has_no_seed():
    one, two = (ReleaseKey.make("fp", BOX, "ug", {}, [0.05, 0.95], 1.0, None) for _ in range(2))
    assert one.seed is None and one.tag.startswith("fresh:") and one.text != two.text
    assert ReleaseKey.parse(one.text) == one


@pytest.mark.parametrize("text,error", [('{"a": 1}', ValueError), ("[1, 2]", TypeError), ("not json", ValueError)])
def test_a_text_that_names_no_release_is_refused(text, error):
    with pytest.raises(error):
        ReleaseKey.parse(text)
