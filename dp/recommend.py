"""The mechanism to use when the owner has no reason to pick another, and the measured reason.

The rule reads public inputs only: the kind of data. For points it is the adaptive mechanism
(`dp.mechanisms.adaptive`), which itself decides, from a charged 2% probe of how empty the box
is and from ε, between PrivTree, PrivTree with near-empty leaves zeroed and the full quadtree.
On the evidence of `benchmarks/recommend.py` (three DPBench data sets and the two samples, ε
0.05 to 2, seeds 1-3) it had lower error than PrivTree in 20 of the 21 DPBench settings (the
21st a tie), and `benchmarks/peers.py` puts it below DPComp's DAWA (not DP as implemented) in
all six of the peers' cells; the settings where it is more than 10% above the best of the
project's mechanisms, and why, are in `benchmarks/README.md`.
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
        "leaves zeroed, or the full quadtree: below the reference DAWA (which is not DP as "
        "implemented) in all six of the peers' settings (e.g. 5.2% against 19.5% on "
        "BeijingTaxiS at ε 0.1), below PrivTree in 20 of 21, and PrivTree itself on spread-out "
        "data; needs no dataset size"),
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
