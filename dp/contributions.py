"""People, not points: bound each user's contribution so a release protects one whole user.

A user with many points is protected many times less than ε says if every point counts as one
neighbour. Keeping at most k points per user and running a mechanism at ε/k makes the release
ε-DP for adding or removing one user (group privacy: an ε/k-DP mechanism is ε-DP for groups of
k points). The points kept are chosen uniformly at random by a public rule that reads only the
user ids, never the coordinates, so moving or replacing a user's points leaves the distribution
of which of them are kept unchanged.
"""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from .errors import ParameterError
from .noise import make_rng
from .points import LoadReport, PointData

# k = 5: noise grows in proportion to k, and a few places per person keep most spatial signal
DEFAULT_POINTS_PER_USER = 5

USER_LEVEL_GUARANTEE = (
    "User-level ε-DP: each person keeps at most {k} of their points (chosen at random by a "
    "public rule) and every step runs at ε/{k} per point, so adding or removing one person, "
    "with all of their points, changes output probabilities by at most a factor of e^ε "
    "(group privacy). Points beyond {k} per person are left out.")

NO_USER_ID = "points without a user id"


def check_points_per_user(k) -> int:
    """k as an int >= 1 (a whole number of any numeric type), else ParameterError."""
    if (isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Real)
            or not float(k).is_integer() or k < 1):
        raise ParameterError(f"max_points_per_user must be a whole number >= 1 (the most points "
                             f"kept per user), got {k!r}")
    return int(k)


def rank_in_group(codes: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Each element's position (0, 1, ...) among the elements with its code, ordered by
    `tiebreak`: the k kept per user are those ranked below k."""
    order = np.lexsort((tiebreak, codes))
    grouped = codes[order]
    rank = np.empty(codes.size, np.int64)
    rank[order] = np.arange(codes.size) - np.searchsorted(grouped, grouped)
    return rank


def bound_contributions(data: PointData, k: int, rng=None) -> PointData:
    """At most k points per user, chosen uniformly at random among that user's points.

    `rng`: None draws fresh OS entropy (`make_rng`), or a Generator / seed. Points with a
    missing user id (None, NaN or blank) are dropped: pooled as one "user", a person joining the
    pool could change all k points kept from it, so its people would be protected only at 2ε.
    Data without user ids come back unchanged. The returned report counts the points left out:
    owner-only, never released.
    """
    k = check_points_per_user(k)
    if data.users is None:
        return data
    keep = rank_in_group(data.users.codes, make_rng(rng).permutation(data.n)) < k   # random within a user
    known = ~data.users.missing()
    beyond = int(np.count_nonzero(known & ~keep))
    keep &= known
    report = _bounded_report(data.report, k, int(keep.sum()), beyond, int(np.count_nonzero(~known)))
    return PointData(data.x[keep], data.y[keep], data.users.take(keep), report, data.name,
                     copy=False)


def _bounded_report(base: LoadReport, k: int, kept: int, beyond: int, unknown: int) -> LoadReport:
    """The input's LoadReport plus the points the bound left out (owner-only)."""
    dropped = dict(base.dropped)
    dropped[f"points beyond {k} per user (user-level bound)"] = beyond
    if unknown:
        dropped[NO_USER_ID] = dropped.get(NO_USER_ID, 0) + unknown
    return dataclasses.replace(
        base, rows_loaded=kept, dropped=dropped,
        notes=base.notes + [f"user-level: at most {k} points per user kept, chosen uniformly at "
                            "random (owner-only information, never released)"])
