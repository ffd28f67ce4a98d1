"""Published releases: the public pages at /r/<id>, kept in the server's database beside the
budget accounts (SQLite in the accounts folder, or PostgreSQL, so every host sharing it serves
every published page).

An owner's Publish inserts one row in one transaction: the release pickled without its
owner-only `diagnostics`, its public record for the gallery, and two HMAC-SHA256 under this
server's key, one of the id with the record and one of the id with the pickle. A row changed
or copied outside the app is refused, and a pickle is never loaded before its MAC checks out.
Ids are checked by shape before any query. Releases published by earlier versions as files (a
folder of `<id>.json` and `<id>.pkl`, each signed on its first line) are moved into the
database when the server starts (`import_folder`). (In the app, `server.state` registers the
reducer that pickles a release's mechanism spec by its registered name.)
"""
from __future__ import annotations

import copy
import datetime
import hashlib
import hmac
import json
import logging
import pickle
import re
import secrets
import threading
import time
from collections import OrderedDict
from pathlib import Path

import sqlalchemy as sa

from .database import published as table
from .database import unpublished

log = logging.getLogger(__name__)

MAX_TITLE = 120
ID_SHAPE = re.compile(r"[A-Za-z0-9_-]{12}")
CACHE_SIZE = 8                 # unpickled releases each process keeps, least recently used first out,
CACHE_BYTES = 256 * 2**20      # and at most this much of their pickles (a release takes a few times
                               # its pickle unpickled)
MISSING = "this published release is not on this server (it was unpublished, or the address is wrong)"
CHANGED = ("this published release was changed outside the app (its record in the database does "
           "not carry this server's signature), so the server refuses to use it")


class _Missing(LookupError):
    """No such published release (never published, unpublished, or not an id)."""


def valid_id(pid) -> bool:
    """True for an id of the shape `publish` makes (12 URL-safe characters): nothing else is
    ever looked up."""
    return isinstance(pid, str) and ID_SHAPE.fullmatch(pid) is not None


def default_title(rel) -> str:
    """The title of a release published without one: its mechanism, box and ε."""
    d = rel.domain
    box = d.name if d.name and d.name != "custom" else \
        f"the box {d.west:g}, {d.south:g}, {d.east:g}, {d.north:g}"
    return f"{rel.spec.label} over {box}, ε = {rel.epsilon:g}"


def clean_title(title, rel) -> str:
    """The title as shown: stripped, at most MAX_TITLE characters, never empty."""
    text = " ".join(str(title or "").split())[:MAX_TITLE].strip()
    return text or default_title(rel)[:MAX_TITLE]


class PublishedReleases:
    """The published releases of one server, in the database of its budget `accounts` (an
    `AccountStore`: its transactions), signed with `key`; each process keeps its own few
    unpickled copies, checked against the row's signature on every use."""

    def __init__(self, accounts, key: bytes):
        if not isinstance(key, bytes) or len(key) < 16:
            raise ValueError("the key signing published releases must be at least 16 bytes")
        self._accounts, self._key = accounts, key
        self._cache: OrderedDict = OrderedDict()     # id -> (pickle's MAC, release, pickle's bytes)
        self._lock = threading.Lock()

    def _mac(self, part: str, pid: str, payload: bytes) -> str:
        return hmac.new(self._key, f"{part}\n{pid}\n".encode() + payload, hashlib.sha256).hexdigest()

    def _signed(self, part: str, pid: str, payload: bytes, mac) -> bool:
        """Whether `mac` (any text a row holds) is this server's for the payload: compared as
        bytes, so text no signature could be is refused, never an error."""
        return hmac.compare_digest(str(mac).encode("utf-8", "surrogatepass"),
                                   self._mac(part, pid, payload).encode())

    def publish(self, rel, title: str, spent: float | None = None, budget: float | None = None) -> str:
        """Publish a private release under a new id and return the id. The published copy has no
        `diagnostics` (owner-only, not private); the record holds public settings only, and the
        ε the dataset's account had spent (`spent` of `budget`) when it was published."""
        if not rel.private:
            raise ValueError("only a private release can be published: this one has a fixed seed or a "
                             "box fitted to the data")
        public = copy.copy(rel)
        public.diagnostics = {}
        pid = secrets.token_urlsafe(9)
        record = {"id": pid, "title": clean_title(title, rel), "mechanism": rel.spec.label,
                  "epsilon": float(rel.epsilon), "privacy_level": rel.privacy_level,
                  "unit": rel.spec.unit, "guarantee": rel.spec.guarantee, "describe": rel.describe(),
                  "domain": rel.domain.to_dict(),
                  "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
                  "epsilon_spent_so_far": spent, "epsilon_budget": budget}
        self._insert(pid, json.dumps(record, ensure_ascii=False),
                     pickle.dumps(public, protocol=pickle.HIGHEST_PROTOCOL))
        return pid

    def _insert(self, pid: str, record: str, payload: bytes) -> None:
        """One row, signed. An id already there (an import run twice, or by two hosts at once)
        is left as it was, and an id once unpublished is never brought back."""
        row = {"id": pid, "record": record, "record_mac": self._mac("record", pid, record.encode()),
               "payload": payload, "payload_mac": self._mac("release", pid, payload), "written": time.time()}
        with self._accounts.transaction() as conn:
            if conn.execute(sa.select(unpublished.c.id).where(unpublished.c.id == pid)).first() is None:
                conn.execute(sa.text("INSERT INTO published (id, record, record_mac, payload, payload_mac, "
                                     "written) VALUES (:id, :record, :record_mac, :payload, :payload_mac, "
                                     ":written) ON CONFLICT DO NOTHING")
                             .bindparams(sa.bindparam("payload", type_=sa.LargeBinary)), row)

    def record(self, pid) -> dict | None:
        """The public record of a published release; None if there is none (or the id is not
        one); LookupError if its row was changed outside the app."""
        if not valid_id(pid):
            return None
        with self._accounts.reading() as conn:
            row = conn.execute(sa.select(table.c.record, table.c.record_mac).where(table.c.id == pid)).first()
        if row is None:
            return None
        if not self._signed("record", pid, row.record.encode(), row.record_mac):
            raise LookupError(CHANGED)
        return json.loads(row.record)

    def release(self, pid):
        """The published release (a copy kept per process while its row's signature is
        unchanged). Its MAC is checked before it is unpickled; LookupError saying why when it
        cannot be served."""
        if not valid_id(pid):
            raise _Missing(MISSING)
        row = None
        with self._accounts.reading() as conn:
            mac = conn.execute(sa.select(table.c.payload_mac).where(table.c.id == pid)).scalar()
            if mac is not None:
                with self._lock:
                    hit = self._cache.get(pid)
                    if hit is not None and hit[0] == mac:
                        self._cache.move_to_end(pid)
                        return hit[1]
                row = conn.execute(sa.select(table.c.payload, table.c.payload_mac)
                                   .where(table.c.id == pid)).first()
        if row is None:
            with self._lock:
                self._cache.pop(pid, None)
            raise _Missing(MISSING)
        payload = bytes(row.payload)
        if not self._signed("release", pid, payload, row.payload_mac):
            raise LookupError(CHANGED)
        rel = pickle.loads(payload)                      # only after its MAC checked out
        with self._lock:
            self._cache[pid] = (row.payload_mac, rel, len(payload))
            self._cache.move_to_end(pid)
            while len(self._cache) > 1 and (len(self._cache) > CACHE_SIZE
                                            or sum(e[2] for e in self._cache.values()) > CACHE_BYTES):
                self._cache.popitem(last=False)
        return rel

    def gallery(self) -> list[dict]:
        """Every published release's record, newest first; rows that fail their MAC are left out."""
        with self._accounts.reading() as conn:
            rows = conn.execute(sa.select(table.c.id, table.c.record, table.c.record_mac)).all()
        out = [json.loads(r.record) for r in rows if self._signed("record", r.id, r.record.encode(), r.record_mac)]
        return sorted(out, key=lambda r: str(r.get("time", "")), reverse=True)

    def unpublish(self, pid) -> bool:
        """Remove a published release, and remember its id so no old file brings it back; True
        if there was one. Callers check that the browser is the owner's."""
        if not valid_id(pid):
            return False
        with self._accounts.transaction() as conn:
            removed = conn.execute(table.delete().where(table.c.id == pid)).rowcount > 0
            if removed:
                conn.execute(sa.text("INSERT INTO unpublished (id, written) VALUES (:id, :written) "
                                     "ON CONFLICT DO NOTHING"), {"id": pid, "written": time.time()})
        with self._lock:
            self._cache.pop(pid, None)
        return removed

    def import_folder(self, folder) -> int:
        """Move the releases an earlier version published as files in `folder` into the
        database: each pair of files whose signatures (the same key's) check out becomes a row,
        then the files go (a folder that cannot be written keeps them, said in the log: the
        rows are there, and an id unpublished since is never brought back); files that fail
        their signature stay, unused. The number moved."""
        folder = Path(folder) if folder else None
        if folder is None or not folder.is_dir():
            return 0
        moved = 0
        for path in sorted(folder.glob("*.json")):
            pid = path.stem
            files = (path, folder / f"{pid}.pkl")
            try:
                record, payload = (self._old_file(f) for f in files)
            except (OSError, LookupError):
                continue
            if not valid_id(pid):
                continue
            self._insert(pid, record.decode(), payload)
            moved += 1
            for f in files:
                try:
                    f.unlink(missing_ok=True)
                except OSError as exc:
                    log.warning("published release %s is in the database, but its old file %s could "
                                "not be removed (%s)", pid, f, exc.strerror or exc)
        return moved

    def _old_file(self, path: Path) -> bytes:
        """The payload of a file written by an earlier version (a line holding the HMAC of its
        name and payload, then the payload); LookupError when it does not check out."""
        mac, sep, payload = path.read_bytes().partition(b"\n")
        good = hmac.new(self._key, path.name.encode() + b"\n" + payload, hashlib.sha256).hexdigest()
        if not sep or not hmac.compare_digest(mac, good.encode()):
            raise LookupError(CHANGED)
        return payload
