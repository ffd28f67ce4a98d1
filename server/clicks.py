"""Each spending click's request id, kept in the server's database beside the charges.

A click that may spend carries a request id made by the page. `claim` records (session, id)
before the action runs, so the same id again (a callback fired twice, another worker, or a
retry after the workspace holding the result expired or was dropped) is known and never runs
twice; `settle` marks it answered. Ids are kept KEEP_SECONDS; visitors' ids beyond
MAX_VISITOR_ROWS are dropped oldest first, so a flood of visitors' clicks cannot fill the
database (an owner's are bounded by time alone).
"""
from __future__ import annotations

import random
import time

import sqlalchemy as sa

from .database import requests as table
from .store import RESERVED

KEEP_SECONDS = 30 * 24 * 3600     # a click is retried within seconds; a month is ample
MAX_VISITOR_ROWS = 1_000_000      # visitors' ids kept at most (about 150 MB of database)
PRUNE_EVERY = 1000                # about one claim in this many trims visitors' ids to the bound


def claim(accounts, sid: str, rid: str) -> bool:
    """Record this click's id for this session: True the first time, False when it was seen."""
    now = time.time()
    with accounts.transaction() as conn:
        conn.execute(sa.delete(table).where(table.c.written < now - KEEP_SECONDS))
        if random.random() < 1 / PRUNE_EVERY:
            _bound_visitors(conn)
        added = conn.execute(sa.text("INSERT INTO requests (session, rid, done, written) "
                                     "VALUES (:s, :r, :d, :w) ON CONFLICT DO NOTHING"),
                             {"s": sid, "r": rid, "d": False, "w": now}).rowcount
    return added == 1


def settle(accounts, sid: str, rid: str) -> None:
    """Mark the click answered (its result, if the workspace kept it, is there)."""
    with accounts.transaction() as conn:
        conn.execute(sa.update(table).where(table.c.session == sid, table.c.rid == rid).values(done=True))


def settled(accounts, sid: str, rid: str) -> bool:
    """True when the click's first run has ended (whether or not its result was kept)."""
    with accounts.transaction() as conn:
        return bool(conn.execute(sa.select(table.c.done).where(table.c.session == sid,
                                                                table.c.rid == rid)).scalar())


def _bound_visitors(conn) -> None:
    """Drop visitors' oldest ids beyond MAX_VISITOR_ROWS."""
    visitor = ~table.c.session.startswith(RESERVED)
    cutoff = conn.execute(sa.select(table.c.written).where(visitor).order_by(table.c.written.desc())
                          .offset(MAX_VISITOR_ROWS).limit(1)).scalar()
    if cutoff is not None:
        conn.execute(sa.delete(table).where(visitor, table.c.written <= cutoff))
