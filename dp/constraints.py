"""The one vocabulary of what a value may be, for the library's parameters and the app's request
boundary alike: a number in a range, bounded text, one of some values, a list, a fixed row, a
record of keys, text holding JSON of a shape, a predicate. Each shape says whether a value fits
it (`fits`), within depth and size limits, so no value of any size or nesting costs more than a
small multiple of its length to judge, and says in words what it takes (`describe`). `check`
refuses a value in the one message form, "<what>: expected <description>, got <value>"; the
request boundary (`components.inputs`) names the control and never echoes a value.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field

from .errors import ParameterError

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


def _number(v: float) -> str:
    """A bound as people read it: whole numbers in full (2,147,483,647), others shortest."""
    return f"{int(v):,}" if float(v).is_integer() and abs(v) < 1e15 else f"{v:g}"


def describe(shape) -> str:
    """What a shape takes, in words (None: nothing; ANY: any JSON value)."""
    if shape is None:
        return "nothing"
    if shape is ANY:
        return ANY
    return shape.describe()


def refusal(what: str, shape, value) -> ParameterError:
    """The one message form: "<what>: expected <what the shape takes>, got <value>"."""
    return ParameterError(f"{what}: expected {describe(shape)}, got {value!r}")


def check(what: str, value, shape):
    """`value` if it fits `shape`, else `refusal`."""
    if not fits(value, shape):
        raise refusal(what, shape, value)
    return value


def positive_finite(what: str, value) -> float:
    """`value` (a number, or text holding one) as a positive finite float, else ParameterError
    in the one message form."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = None
    if v is None or not fits(v, POSITIVE):
        raise refusal(what, POSITIVE, value)
    return v


@dataclass(frozen=True)
class Num:
    """A finite number (never a bool) from lo to hi (above lo when `above`); `whole`: a JSON
    integer (a browser sends every whole number as one)."""
    lo: float = -math.inf
    hi: float = math.inf
    whole: bool = False
    above: bool = False

    def fits(self, value, depth: int = 0) -> bool:
        return _kind(value) == "number" and abs(value) <= sys.float_info.max \
            and (self.lo < value if self.above else self.lo <= value) and value <= self.hi \
            and (not self.whole or isinstance(value, int))

    def describe(self) -> str:
        low = "" if self.lo == -math.inf else f" above {_number(self.lo)}" if self.above else f" from {_number(self.lo)}"
        high = "" if self.hi == math.inf else f" to {_number(self.hi)}" if low else f" up to {_number(self.hi)}"
        return f"a {'finite ' if not (low and high) else ''}number{low}{high}" + (", whole" if self.whole else "")


@dataclass(frozen=True)
class Text:
    max_chars: float = MAX_CHARS

    def fits(self, value, depth: int = 0) -> bool:
        return isinstance(value, str) and len(value) <= self.max_chars

    def describe(self) -> str:
        return "text" if self.max_chars == math.inf else f"text of at most {self.max_chars:,} characters"


@dataclass(frozen=True)
class OneOf:
    """Equal to one of `values` and of the same JSON kind (true is not 1)."""
    values: tuple

    def fits(self, value, depth: int = 0) -> bool:
        return any(_kind(value) == _kind(v) and value == v for v in self.values)

    def describe(self) -> str:
        if self.values in ((True, False), (False, True)):
            return "true or false"
        return "one of " + ", ".join(str(v) for v in self.values)


@dataclass(frozen=True)
class Either:
    shapes: tuple

    def fits(self, value, depth: int = 0) -> bool:
        return any(fits(value, s, depth) for s in self.shapes)

    def describe(self) -> str:
        words = [describe(s) for s in self.shapes if s is not None]
        return ", or ".join(words) + (", or nothing" if None in self.shapes else "")


@dataclass(frozen=True)
class ListOf:
    item: object
    max_items: int = MAX_ITEMS
    min_items: int = 0

    def fits(self, value, depth: int = 0) -> bool:
        return isinstance(value, list) and self.min_items <= len(value) <= self.max_items \
            and all(fits(v, self.item, depth + 1) for v in value)

    def describe(self) -> str:
        return f"a list, each item {describe(self.item)}"


@dataclass(frozen=True)
class Row:
    """A list of fixed length, one shape per position."""
    items: tuple

    def fits(self, value, depth: int = 0) -> bool:
        return isinstance(value, list) and len(value) == len(self.items) \
            and all(fits(v, s, depth + 1) for v, s in zip(value, self.items))

    def describe(self) -> str:
        return f"a list of {len(self.items)}: " + "; ".join(describe(s) for s in self.items)


@dataclass(frozen=True)
class Record:
    """An object with the `required` keys and maybe the `optional` ones, each of its shape;
    other keys hold any JSON, unless the record is `closed` (then they are refused)."""
    required: dict
    optional: dict = field(default_factory=dict)
    closed: bool = False

    def describe(self) -> str:
        return "an object with " + (", ".join(self.required) if self.required else "any keys")

    def fits(self, value, depth: int = 0) -> bool:
        shapes = {**self.optional, **self.required}
        return isinstance(value, dict) and len(value) <= MAX_ITEMS and self.required.keys() <= value.keys() \
            and (not self.closed or value.keys() <= shapes.keys()) \
            and all(fits(v, shapes.get(k, ANY), depth + 1) for k, v in value.items())


@dataclass(frozen=True)
class MapOf:
    """An object of text keys, each value of one shape."""
    value: object

    def fits(self, value, depth: int = 0) -> bool:
        return isinstance(value, dict) and len(value) <= MAX_ITEMS \
            and all(fits(v, self.value, depth + 1) for v in value.values())

    def describe(self) -> str:
        return f"an object, each value {describe(self.value)}"


@dataclass(frozen=True)
class Json:
    """Text holding JSON of this shape (a release key)."""
    shape: object

    def describe(self) -> str:
        return f"text holding JSON: {describe(self.shape)}"

    def fits(self, value, depth: int = 0) -> bool:
        try:
            return isinstance(value, str) and len(value) <= MAX_CHARS \
                and fits(json.loads(value), self.shape, depth + 1)
        except (ValueError, RecursionError):
            return False


@dataclass(frozen=True)
class Check:
    """A value the predicate accepts, described by `words`."""
    predicate: object
    words: str = "a value this accepts"

    def fits(self, value, depth: int = 0) -> bool:
        return self.predicate(value)

    def describe(self) -> str:
        return self.words


NUMBER, TEXT, BOOL = Num(), Text(), OneOf((True, False))
SCALAR = Either((None, BOOL, NUMBER, TEXT))
POSITIVE = Num(0, above=True)              # ε, budgets, scales: positive and finite
