"""People, not points: bound each user's contribution so a release protects one whole user.

A user with many points is protected many times less than ε says if every point counts as one
neighbour. Keeping at most k points per user and running a mechanism at ε/k makes the release
ε-DP for adding or removing one user (group privacy: an ε/k-DP mechanism is ε-DP for groups of
k points). The points kept are chosen uniformly at random by a public rule that reads only the
user ids, never the coordinates, so moving or replacing a user's points leaves the distribution
of which of them are kept unchanged.

Who is a user: one canonical id (`canonical_user_ids`, the rule written out there) for every
engine that bounds contributions — points in memory (`dp.load_points`, `PointData`), and files
counted by DuckDB or Dask (`dp.aggregate`) — so one person is one user everywhere: an id that
two engines split in two would contribute 2k points to counts charged for k.
"""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from .errors import ParameterError
from .noise import make_rng
from .points import MISSING_IDS, LoadReport, PointData
# k = 5: noise grows in proportion to k, and a few places per person keep most spatial signal
DEFAULT_POINTS_PER_USER = 5

USER_LEVEL_GUARANTEE = (
    "User-level ε-DP: each person keeps at most {k} of their points (chosen at random by a "
    "public rule) and every step runs at ε/{k} per point, so adding or removing one person, "
    "with all of their points, changes output probabilities by at most a factor of e^ε "
    "(group privacy). Points beyond {k} per person are left out.")

NO_USER_ID = "points without a user id"

# What str.strip() removes: every character Python calls whitespace (Unicode's White_Space
# ones, e.g. tab, no-break space U+00A0, em space U+2003, ideographic space U+3000, and the
# separators U+001C-U+001F), 29 in all (written out: scanning every code point took 58 ms of
# `import dp`; a test checks the list). Zero-width characters (U+200B) are not whitespace.
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
              "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def canonical_user_ids(ids):
    """The canonical user id of each value of an id column, as an Arrow string array ('' where
    there is none). THE rule for who is one user, in every engine:

    - numbers: whole ones (below 2^63 in size) as integers, so 8, 8.0, 8.00 (a decimal) and
      the text "8" are one user, and so are 123456789012 and 123456789012.0 (ints with a
      missing value become floats in pandas); others as Arrow writes them (8.5 -> "8.5");
    - text is kept as written except for whitespace stripped from both ends, with str.strip()
      semantics (`WHITESPACE`: tabs, no-break and other Unicode spaces): "8", " 8", "8\t",
      "8\u00a0" and "\u20038" are one user. Inside an id nothing changes: no Unicode
      normalisation (ids are opaque keys from the system that issued them; NFKC would merge
      ids such as "①" and "1" that it keeps apart), and case is kept ("Ab" and "ab" are two
      users: ids are case-sensitive in most systems, and merging two people is as wrong as
      splitting one). Leading zeros are kept in text ("08" is not "8"); a number has none;
    - missing: null, NaN, and text that is empty after stripping or spells "no id" in any
      case (`dp.points.MISSING_IDS`: na, n/a, nan, null, none) becomes ''.

    `ids`: an Arrow array or chunked array of any type Arrow casts to text, or anything
    pa.array takes (a pandas Series: NaN and None are missing). Vectorised with
    pyarrow.compute and done once per distinct value. In memory `dp.points.user_keys` applies
    the same rule to the ids `dp.load_points` reads (the same users; a Parquet column of
    floats is written as Arrow writes it there, "1.23456789012e+11", which splits no user);
    tests/test_hardening.py checks that they agree and that all three engines count the same
    users. (pyarrow is imported here, not at `import dp`; no annotations name it, as DuckDB
    reads them when this is a user-defined function.)"""
    import pyarrow as pa
    import pyarrow.compute as pc
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    elif not isinstance(ids, pa.Array):
        ids = pa.array(ids, from_pandas=True)
    if ids.type != pa.string():
        ids = _as_text(ids)
    distinct = pc.unique(ids)
    index = pc.index_in(ids, value_set=distinct)       # a null finds the null among them
    stripped = pc.utf8_trim(distinct, characters=WHITESPACE)
    missing = pc.or_kleene(pc.is_null(stripped),
                           pc.is_in(pc.utf8_lower(stripped), value_set=pa.array(MISSING_IDS)))
    return pc.if_else(missing, "", stripped).take(index)


def _as_text(ids):
    """Ids of any type as text: whole numbers below 2^63 in size as integers (Arrow alone writes
    123456789012.0 as "1.23456789012e+11" and a decimal 8.00 as "8.00"); a decimal's
    other values without trailing zeros, as a float's (8.50 -> "8.5")."""
    import pyarrow as pa
    import pyarrow.compute as pc
    if pa.types.is_floating(ids.type):
        whole = pc.and_(pc.is_finite(ids), pc.and_(pc.equal(pc.floor(ids), ids),
                                                    pc.less(pc.abs(ids), 2.0 ** 63)))
        integers = pc.if_else(whole, ids, 0).cast(pa.int64()).cast(pa.string())
        return pc.if_else(whole, integers, ids.cast(pa.string()))
    text = ids.cast(pa.string())
    if pa.types.is_decimal(ids.type):      # no trailing zeros: 8.50 as 8.5, 8.00 as 8
        text = pc.replace_substring_regex(text, r"^(-?[0-9]+\.[0-9]*?)0+$", r"\1")
        text = pc.replace_substring_regex(text, r"\.$", "")
    return text


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
