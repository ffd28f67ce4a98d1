"""Infrastructure failures in words: the store's disk, Redis, the database and the budget accounts.

A failing disk, a read-only folder, a damaged account, Redis or the database going away raise
`Unavailable` (a LookupError, which every panel already shows as a message) saying what failed
and that nothing was charged, instead of an OSError reaching the user as a bare HTTP 500.
Messages name no file or path.
"""
from __future__ import annotations

import errno
from contextlib import contextmanager

from redis.exceptions import LockError, RedisError
from sqlalchemy.exc import DBAPIError, TimeoutError as PoolTimeout

NOTHING_CHARGED = "nothing was charged; try again once it is fixed"


class Unavailable(LookupError):
    """A part of the server's infrastructure failed; the message says which, in plain words."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, RedisError):
        return "is not answering (Redis is down or unreachable)"
    if isinstance(exc, PoolTimeout):
        return "is busy (every connection to the database was in use for too long)"
    if isinstance(exc, DBAPIError):
        said = str(exc.orig).lower()
        return ("is not answering (the database is down or unreachable)" if exc.connection_invalidated
                or "connect" in said or "closed" in said
                else "is full (no space left on its disk)" if "full" in said
                else "cannot be written (it is read-only or not permitted)" if "readonly" in said
                or "read-only" in said or "permission" in said
                else "is busy (another process held it too long)" if "locked" in said
                else f"failed ({type(exc.orig).__name__})")
    if getattr(exc, "errno", None) == errno.ENOSPC or getattr(exc, "errno", None) == errno.EDQUOT:
        return "is full (no space left on its disk)"
    if getattr(exc, "errno", None) in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "cannot be written (its folder is read-only or not permitted)"
    return f"failed ({getattr(exc, 'strerror', None) or type(exc).__name__})"


@contextmanager
def speaking(what: str):
    """Turn an OSError, Redis or database error inside the block into `Unavailable("<what> …")`."""
    try:
        yield
    except LockError:             # a lock not acquired in time: the caller says so itself
        raise
    except (OSError, RedisError, DBAPIError, PoolTimeout) as exc:
        raise Unavailable(f"the server's {what} {_why(exc)}: {NOTHING_CHARGED}") from exc
