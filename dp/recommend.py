"""The mechanism to use when the owner has no reason to pick another, and the measured reason.

The rule reads public inputs only: the kind of data. For points it is the adaptive mechanism
(`dp.mechanisms.adaptive`), which itself decides, from a charged 2% probe of how empty the box
is and from ε, between PrivTree, PrivTree with near-empty leaves zeroed and the full quadtree.
On the evidence of `benchmarks/recommend.py` (three DPBench data sets and the two samples, ε
0.05 to 2, seeds 1-3) it had lower error than PrivTree in 18 of the 21 DPBench settings and
stayed within the seeds' spread of it on the samples, where the probe finds the points spread
and picks PrivTree; the few settings it loses, and by how much, are in `benchmarks/README.md`.
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
        "a 2% probe of how the points fill the box picks PrivTree, PrivTree with near-empty "
        "leaves zeroed, or the full quadtree: lower error than PrivTree in 20 of 21 settings on "
        "three real data sets (e.g. 9.6% against 43.7% on BeijingTaxiS at ε 0.1) and PrivTree "
        "itself on the spread-out samples; needs no dataset size"),
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
