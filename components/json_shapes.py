"""Shapes of JSON values, the vocabulary `components.inputs` declares what each control and store
takes in: a number in a range, bounded text, one of some values, a list, a fixed row, a record
of keys, text holding JSON of a shape, a predicate. Each shape says whether a value fits it
(`fits`), within depth and size limits, so no value of any size or nesting costs more than a
small multiple of its length to judge.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field

MAX_DEPTH = 20          # nesting levels of any value
MAX_ITEMS = 100_000     # items of a list, keys of an object
MAX_CHARS = 100_000     # characters of a string (an upload's contents excepted)
ANY = "any JSON"        # the shape of any value within the depth and size limits


def _kind(v) -> str:
    """A value's JSON kind: "number" for ints and floats alike, never for a bool."""
    return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__


def fits(value, shape, depth: int = 0) -> bool:
    """Whether a JSON value has this shape (None: null; ANY: any scalar, list or object),
    nested at most MAX_DEPTH levels."""
    if depth > MAX_DEPTH:
        return False
    if shape is None:
        return value is None
    if shape is ANY:
        if isinstance(value, (list, dict)):
            items = value.values() if isinstance(value, dict) else value
            return len(value) <= MAX_ITEMS and all(fits(v, ANY, depth + 1) for v in items)
        return SCALAR.fits(value, depth)
    return shape.fits(value, depth)


@dataclass(frozen=True)
class Num:
    """A finite number (never a bool) from lo to hi; `whole`: a JSON integer (a browser sends
    every whole number as one)."""
    lo: float = -math.inf
    hi: float = math.inf
    whole: bool = False

    def fits(self, value, depth: int) -> bool:
        return _kind(value) == "number" and abs(value) <= sys.float_info.max \
            and self.lo <= value <= self.hi and (not self.whole or isinstance(value, int))


@dataclass(frozen=True)
class Text:
    max_chars: float = MAX_CHARS

    def fits(self, value, depth: int) -> bool:
        return isinstance(value, str) and len(value) <= self.max_chars


@dataclass(frozen=True)
class OneOf:
    """Equal to one of `values` and of the same JSON kind (true is not 1)."""
    values: tuple

    def fits(self, value, depth: int) -> bool:
        return any(_kind(value) == _kind(v) and value == v for v in self.values)


@dataclass(frozen=True)
class Either:
    shapes: tuple

    def fits(self, value, depth: int) -> bool:
        return any(fits(value, s, depth) for s in self.shapes)


@dataclass(frozen=True)
class ListOf:
    item: object
    max_items: int = MAX_ITEMS
    min_items: int = 0

    def fits(self, value, depth: int) -> bool:
        return isinstance(value, list) and self.min_items <= len(value) <= self.max_items \
            and all(fits(v, self.item, depth + 1) for v in value)


@dataclass(frozen=True)
class Row:
    """A list of fixed length, one shape per position."""
    items: tuple

    def fits(self, value, depth: int) -> bool:
        return isinstance(value, list) and len(value) == len(self.items) \
            and all(fits(v, s, depth + 1) for v, s in zip(value, self.items))


@dataclass(frozen=True)
class Record:
    """An object with the `required` keys and maybe the `optional` ones, each of its shape;
    other keys hold any JSON, unless the record is `closed` (then they are refused)."""
    required: dict
    optional: dict = field(default_factory=dict)
    closed: bool = False

    def fits(self, value, depth: int) -> bool:
        shapes = {**self.optional, **self.required}
        return isinstance(value, dict) and len(value) <= MAX_ITEMS and self.required.keys() <= value.keys() \
            and (not self.closed or value.keys() <= shapes.keys()) \
            and all(fits(v, shapes.get(k, ANY), depth + 1) for k, v in value.items())


@dataclass(frozen=True)
class MapOf:
    """An object of text keys, each value of one shape."""
    value: object

    def fits(self, value, depth: int) -> bool:
        return isinstance(value, dict) and len(value) <= MAX_ITEMS \
            and all(fits(v, self.value, depth + 1) for v in value.values())


@dataclass(frozen=True)
class Json:
    """Text holding JSON of this shape (a release key)."""
    shape: object

    def fits(self, value, depth: int) -> bool:
        try:
            return isinstance(value, str) and len(value) <= MAX_CHARS \
                and fits(json.loads(value), self.shape, depth + 1)
        except (ValueError, RecursionError):
            return False


@dataclass(frozen=True)
class Check:
    """A value the predicate accepts."""
    predicate: object

    def fits(self, value, depth: int) -> bool:
        return self.predicate(value)


NUMBER, TEXT, BOOL = Num(), Text(), OneOf((True, False))
SCALAR = Either((None, BOOL, NUMBER, TEXT))
