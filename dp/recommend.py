"""The mechanism to use when the owner has no reason to pick another, and the measured reason.

The rule reads public inputs only: the kind of data. On the evidence of
`benchmarks/recommend.py` neither ε nor a noisy dataset size nor the query size (2-10% of
the area) changes the answer for points: PrivTree had the lowest error in most settings at
every ε, and where another mechanism won (HTF's midpoint tree at ε <= 0.1 on the two sparsest
data sets) it did so because of how empty the box is, which no public input reveals.
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
        "privtree",
        "the lowest error in 28 of 35 benchmark settings (three real city data sets and two "
        "samples, ε 0.05 to 2, against HTF, DAWA and E2EPriv), and it needs no dataset size"),
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
