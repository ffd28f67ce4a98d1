"""The mechanism to use when the owner has no reason to pick another, and the measured reason.

The rule reads public inputs only: the kind of data. For points it is the adaptive mechanism
(`dp.mechanisms.adaptive`), which itself decides, from a charged 2% probe of how concentrated
the points are and how much of the map they reach, between the full quadtree and the adaptive
grid (AG). Its two shares are fixed in words ("most points", "two thirds of the map empty")
rather than tuned, and it was judged on the validation part of a corpus of 27 data sets it was
never fitted on (`benchmarks/corpus.py`, `benchmarks/recommend.py --corpus`, benchmarks/README.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ParameterError


@dataclass(frozen=True)
class Recommendation:
    """A registered mechanism's name and one line saying why it is recommended."""
    name: str
    reason: str


RECOMMENDED = {
    "points": Recommendation(
        "adaptive",
        "it first spends 2% of ε to see whether the points crowd into a few places or spread "
        "over the map, then uses the method that suits what it saw; tried on data it was never "
        "tuned on, its typical error was 1.4 times that of whichever method did best on each "
        "data set (the best one changes from one data set to the next and cannot be known "
        "beforehand)"),
    "regions": Recommendation(
        "euler", "the only mechanism here for region data (one region per user)"),
}


def recommend(kind: str) -> Recommendation:
    """The recommended mechanism for 'points' or 'regions' data."""
    try:
        return RECOMMENDED[kind]
    except KeyError:
        raise ParameterError(f"no recommendation for data of kind {kind!r}; expected one of "
                             f"{', '.join(RECOMMENDED)}") from None
