"""The one vocabulary of what a value may be (`dp.constraints`), for the library's parameters
and the request boundary: each shape takes what it declares and nothing else, JSON kinds are
kept apart (true is not 1), no value nested deeper than MAX_DEPTH fits any shape, each says in
words what it takes, and a refusal has one form wherever it is made."""
from __future__ import annotations

import json
import math

import pytest

import dp
from dp.constraints import (ANY, BOOL, MAX_DEPTH, NUMBER, POSITIVE, Check, Either, Json, ListOf, MapOf,
                            Num, OneOf, Record, Row, Text, check, describe, fits, positive_finite)

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


WORDS = [
    (Num(0, 100), "a number from 0 to 100"),
    (Num(1, 2 ** 31 - 1, whole=True), "a number from 1 to 2,147,483,647, whole"),
    (Num(lo=1e-6), "a finite number from 1e-06"),
    (POSITIVE, "a finite number above 0"),
    (NUMBER, "a finite number"),
    (Either((None, Num(hi=5))), "a finite number up to 5, or nothing"),
    (OneOf(("share", "paper")), "one of share, paper"),
    (BOOL, "true or false"),
    (ListOf(Num(1, 9, whole=True)), "a list, each item a number from 1 to 9, whole"),
    (Row((NUMBER, Text(10))), "a list of 2: a finite number; text of at most 10 characters"),
    (Record({"a": NUMBER}), "an object with a"),
    (Check(bool, "something true"), "something true"),
    (None, "nothing"),
]


@pytest.mark.parametrize("shape, words", WORDS, ids=[w for _, w in WORDS])
def test_each_shape_says_what_it_takes(shape, words):
    assert describe(shape) == words


def test_one_message_form_in_the_library_and_its_parameters():
    """`check`, `positive_finite` and every mechanism parameter refuse in one form: what, what
    it takes, what was given."""
    with pytest.raises(dp.ParameterError, match=r"^size: expected a number from 0 to 100, got 101$"):
        check("size", 101, Num(0, 100))
    assert check("size", 100, Num(0, 100)) == 100
    for bad in (0, -1, math.inf, math.nan, "x", None):
        with pytest.raises(dp.ParameterError, match=r"^ε: expected a finite number above 0, got "):
            positive_finite("ε", bad)
    assert positive_finite("ε", "0.5") == 0.5
    data, box = dp.load_sample("small_city_5k")
    with pytest.raises(dp.ParameterError, match=r"^epsilon: expected a finite number above 0, got -1$"):
        dp.release("ug", data, box, -1)
    with pytest.raises(dp.ParameterError, match=r"^Budget mode: expected one of share, paper, got 'nope'$"):
        dp.release("htf", data, box, 1.0, params={"budget_mode": "nope"})
    with pytest.raises(dp.ParameterError, match=r"^Cells per side: expected a number from 1 to 1,024, whole, got 0$"):
        dp.release("identity", data, box, 1.0, params={"grid_size": 0})
    with pytest.raises(dp.ParameterError, match=r"^total budget ε: expected a finite number above 0"):
        dp.Accountant(total=0)


def test_parameters_keep_what_they_allowed_before():
    """Choices and a range are both checked; choices written as numpy values compare as the
    numbers and text they are; a list parameter is not bounded in length by the JSON limits."""
    import numpy as np
    from dp.mechanisms.base import Param
    both = Param("g", int, 8, "Grid", "", min=8, max=16, choices=(8, 16, 64))
    assert both.coerce(16) == 16
    with pytest.raises(dp.ParameterError, match="from 8 to 16"):
        both.coerce(64)
    assert Param("g", int, 8, "Grid", "", choices=tuple(np.array([8, 16]))).coerce("16") == 16
    assert Param("m", str, "a", "Mode", "", choices=tuple(np.array(["a", "b"]))).coerce("b") == "b"
    many = Param("sizes", list, [1], "Sizes", "", min=1, max=10 ** 6)
    assert len(many.coerce(list(range(1, 200_001)))) == 200_000
