"""Live objects: mutable, session-owned objects (an interactive session) kept in the shared
store under their session's key, so any worker process can continue them under a lock."""
from __future__ import annotations

import secrets
from contextlib import contextmanager

from . import services, state

LIVE_PER_SESSION = 3         # interactive sessions one browser keeps; its oldest dropped first
def check_live_room(sid: str):
    """Refuse (LookupError) a new live object when the store is full of other sessions' entries:
    nobody's session is pushed out by another's. A session's own oldest go first."""
    if not services.current().store.room_for(sid):
        raise LookupError(state.FULL)


def put_live(sid: str, obj) -> str:
    """Keep a mutable, session-owned object (an interactive session) and return its token.

    Live objects are store entries of their session, so any worker process can continue them
    (see `live`). A session keeps at most LIVE_PER_SESSION; beyond that its own least recently
    used one is dropped, never another session's; a full store refuses (LookupError).
    """
    token = secrets.token_hex(16)
    services.current().store.trim(sid, "live", LIVE_PER_SESSION - 1)
    if not services.current().store.set(f"live:{sid}:{token}", obj):
        raise LookupError(state.FULL)
    return token


@contextmanager
def live(sid: str, token: str):
    """This session's live object, held under its lock across processes while the caller
    changes it, then written back to the store (even after an error: whatever it spent stays
    spent). LookupError if there is no such object for this session."""
    key = f"live:{sid}:{token}"
    with services.current().store.lock(key):
        obj = services.current().store.get(key)
        if obj is None:
            raise LookupError("the session expired on the server; start a new one")
        try:
            yield obj
        finally:
            if not services.current().store.set(key, obj):          # never left behind in an older state
                services.current().store.delete(key)
