"""Numbers for people: significant digits without exponents, thousands separated."""
from __future__ import annotations

import math

import numpy as np


def significant(value: float, digits: int = 2, trim: bool = False) -> str:
    """value to `digits` significant digits, never in e-notation: 100 -> '100', 0.0123 ->
    '0.012', 123456 -> '120,000', 1 -> '1.0' ('1' with trim, which drops trailing zeros)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    text = f"{round(value, decimals):,.{max(decimals, 0)}f}"
    return text.rstrip("0").rstrip(".") if trim and "." in text else text


def plural(n: int, noun: str) -> str:
    """The noun for n of them: '1 row', '2 rows' (callers put the number in front)."""
    return noun if n == 1 else noun + "s"


def count_of(n: int, noun: str) -> str:
    """'1 point', '2,000 points'."""
    return f"{n:,} {plural(n, noun)}"


def count_text(value: float) -> str:
    """A count or a median of counts, as people read it: '4', '2.5', '12,345'."""
    return f"{value:,.1f}".removesuffix(".0")


def shown_people(answers):
    """Private answers as the tables show them: whole people, at least 0 (an int for one
    answer, an int array for many); post-processing, the unbiased estimate stays elsewhere."""
    out = np.maximum(np.rint(np.asarray(answers, dtype=np.float64)), 0).astype(np.int64)
    return int(out) if out.ndim == 0 else out
