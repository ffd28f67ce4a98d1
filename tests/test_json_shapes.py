"""The shapes the request boundary judges values by (`components.json_shapes`): each shape takes
what it declares and nothing else, JSON kinds are kept apart (true is not 1), and no value nested
deeper than MAX_DEPTH fits any shape."""
from __future__ import annotations

import json
import math

import pytest

from components.json_shapes import (ANY, BOOL, MAX_DEPTH, NUMBER, Check, Either, Json, ListOf, MapOf,
                                    Num, OneOf, Record, Row, Text, fits)

CASES = [          # (shape, values that fit, values that do not)
    (Num(0, 10, whole=True), [0, 10, 3], [-1, 11, 2.5, True, "3", None, math.nan]),
    (NUMBER, [-1e300, 0.5, 7], [math.inf, -math.inf, math.nan, False, "1"]),
    (Text(3), ["", "abc"], ["abcd", 1, None]),
    (OneOf((1, "a")), [1, 1.0, "a"], [True, "1", 2]),
    (BOOL, [True, False], [1, 0, "true"]),
    (Either((None, Num(lo=1))), [None, 1, 5.5], [0, "x"]),
    (ListOf(Text(), max_items=2, min_items=1), [["a"], ["a", "b"]], [[], ["a", "b", "c"], [1], "a"]),
    (Row((NUMBER, Text())), [[1, "a"]], [[1], [1, "a", 2], ["a", 1]]),
    (Record({"a": NUMBER}, {"b": BOOL}), [{"a": 1}, {"a": 1, "b": True}, {"a": 1, "c": [1]}],
     [{}, {"a": "1"}, {"a": 1, "b": 1}, [1]]),
    (Record({"a": NUMBER}, closed=True), [{"a": 1}], [{"a": 1, "c": 1}]),
    (MapOf(NUMBER), [{}, {"x": 1, "y": 2}], [{"x": "1"}, [1]]),
    (Json(Row((NUMBER,))), ["[1]"], ["[1, 2]", "[", 1, "[\"1\"]"]),
    (Check(lambda v: v == "yes"), ["yes"], ["no", None]),
    (None, [None], [0, "", False]),
    (ANY, [None, 1, "a", [1, {"a": [True]}], {"k": None}], [math.nan, [math.inf], {"k": math.nan}]),
]


@pytest.mark.parametrize("shape, good, bad", CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_each_shape_takes_what_it_declares_and_nothing_else(shape, good, bad):
    assert [v for v in good if not fits(v, shape)] == []
    assert [v for v in bad if fits(v, shape)] == []


def test_no_value_nested_beyond_the_depth_limit_fits():
    deep = json.loads("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2))
    shallow = json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert fits(shallow, ANY) and not fits(deep, ANY)
    nested = ListOf(ANY)
    assert not fits(deep, nested) and not fits(json.dumps(deep), Json(ANY))
