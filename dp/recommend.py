"""The mechanism to use when the owner has no reason to pick another, and the measured reason.

The rule reads public inputs only: the kind of data. For points it is the adaptive mechanism
(`dp.mechanisms.adaptive`), which itself decides, from a charged 2% probe of how empty the box
is and from ε, between PrivTree, PrivTree with near-empty leaves zeroed and the full quadtree.
On the evidence of `benchmarks/recommend.py` (three DPBench data sets and the two samples, ε
0.05 to 2, seeds 1-200) it has lower error than PrivTree in all 21 DPBench settings and is
within 10% of the lowest of the project's mechanisms in 34 of 35 (the 35th, BeijingTaxiS at
ε 0.1, at 1.06 over 1,000 seeds). `benchmarks/peers.py` puts it below DPComp's DAWA (not DP as
implemented) in all six of the peers' cells on their three seeds; over 200 seeds it is 3% above
that number on cabspottingS at ε 0.1 (`benchmarks/README.md` says why).
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
        "leaves zeroed, or the full quadtree; over 200 seeds it is below PrivTree in all 21 "
        "DPBench settings (e.g. 5.4% against 49.8% on BeijingTaxiS at ε 0.1) and within 10% of "
        "the best mechanism here in 34 of 35 (the 35th within 10% over 1,000 seeds); below the "
        "reference DAWA (not DP as implemented) in five of the peers' six settings and 3% above "
        "it in the sixth (cabspottingS at ε 0.1, the probe's 2% of ε); PrivTree itself on "
        "spread-out data; needs no dataset size"),
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
