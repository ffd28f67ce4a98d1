"""Published releases: the public pages at /r/<id>, kept as files in a folder across restarts.

An owner's Publish writes two files per release, `<id>.pkl` (the release, pickled without its
owner-only `diagnostics`) and `<id>.json` (its public record for the gallery). Each file starts
with a line holding an HMAC-SHA256, under this server's key, of the file's name and the bytes
after that line: a file changed outside the app is refused, and a pickle is never loaded before
its MAC checks out. Files are written whole (a temporary file, then `os.replace`), the record
last, so the gallery never lists a release whose pickle is missing. Ids are checked by shape
before any path is made from them. (In the app, `server.state` registers the reducer that
pickles a release's mechanism spec by its registered name.)
"""
from __future__ import annotations

import copy
import datetime
import hashlib
import hmac
import json
import os
import pickle
import re
import secrets
import threading
import time
from collections import OrderedDict
from pathlib import Path

from .faults import speaking

MAX_TITLE = 120
ID_SHAPE = re.compile(r"[A-Za-z0-9_-]{12}")
CACHE_SIZE = 8                 # unpickled releases each process keeps, least recently used first out,
CACHE_BYTES = 256 * 2**20      # and at most this much of their files (a release takes a few times
                               # its pickle unpickled)
STALE_TEMPORARY = 3600         # seconds after which a temporary file is a killed writer's leftover
MISSING = "this published release is not on this server (it was unpublished, or the address is wrong)"
CHANGED = ("this published release's file was changed outside the app, so the server refuses to "
           "use it")



class _Missing(LookupError):
    """No such published release (never published, unpublished, or not an id)."""


def valid_id(pid) -> bool:
    """True for an id of the shape `publish` makes (12 URL-safe characters): nothing else ever
    becomes part of a path."""
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
    """The published releases of one server: files in `folder` (created; None: not configured,
    every call refused in words), signed with `key`; each process opens the same folder with the
    same key and keeps its own few unpickled copies. Temporary files a killed writer left
    (older than an hour) go when it is opened."""

    def __init__(self, folder=None, key: bytes | None = None):
        self.folder: Path | None = None
        self._key = key
        self._cache: OrderedDict = OrderedDict()     # id -> (file signature, release, its file's bytes)
        self._lock = threading.Lock()
        if folder is None:
            return
        if not isinstance(key, bytes) or len(key) < 16:
            raise ValueError("the key signing published releases must be at least 16 bytes")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        for tmp in self.folder.glob(".*.tmp"):
            try:
                if time.time() - tmp.stat().st_mtime > STALE_TEMPORARY:
                    tmp.unlink()
            except OSError:
                pass

    def _folder_or_fail(self) -> Path:
        if self.folder is None:
            raise LookupError("this server keeps no published releases (not configured)")
        return self.folder

    def _mac(self, name: str, payload: bytes) -> str:
        return hmac.new(self._key, name.encode() + b"\n" + payload, hashlib.sha256).hexdigest()

    def _write(self, name: str, payload: bytes) -> None:
        """Write `<folder>/<name>` whole: a MAC line, then the payload (temporary file, fsync, rename)."""
        folder = self._folder_or_fail()
        tmp = folder / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            with open(tmp, "xb") as fh:
                fh.write(self._mac(name, payload).encode() + b"\n" + payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, folder / name)
        finally:
            if tmp.exists():
                tmp.unlink()

    def _read(self, name: str) -> bytes:
        """The verified payload of `<folder>/<name>`; LookupError if missing or if its MAC fails."""
        try:
            raw = (self._folder_or_fail() / name).read_bytes()
        except FileNotFoundError:
            raise _Missing(MISSING) from None
        mac, sep, payload = raw.partition(b"\n")
        if not sep or not hmac.compare_digest(mac, self._mac(name, payload).encode()):
            raise LookupError(CHANGED)
        return payload

    def publish(self, rel, title: str, spent: float | None = None, budget: float | None = None) -> str:
        """Publish a private release under a new id and return the id. The published copy has no
        `diagnostics` (owner-only, not private); the record holds public settings only, and the
        ε the dataset's account had spent (`spent` of `budget`) when it was published."""
        self._folder_or_fail()
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
        with speaking("folder of published releases"):
            self._write(f"{pid}.pkl", pickle.dumps(public, protocol=pickle.HIGHEST_PROTOCOL))
            self._write(f"{pid}.json", json.dumps(record, ensure_ascii=False).encode())   # the commit point
        return pid

    def record(self, pid) -> dict | None:
        """The public record of a published release; None if there is none (or the id is not
        one); LookupError if its file was changed outside the app."""
        if not valid_id(pid):
            return None
        try:
            return json.loads(self._read(f"{pid}.json"))
        except _Missing:
            return None

    def release(self, pid):
        """The published release (a copy kept per process, re-read when its file changed). Its
        MAC is checked before it is unpickled; LookupError saying why when it cannot be served.
        Its record is the commit point: without it (a publish or an unpublish cut short) there
        is none."""
        if not valid_id(pid):
            raise _Missing(MISSING)
        folder = self._folder_or_fail()
        try:
            st = (folder / f"{pid}.pkl").stat()
            (folder / f"{pid}.json").stat()
        except FileNotFoundError:
            with self._lock:
                self._cache.pop(pid, None)
            raise _Missing(MISSING) from None
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            hit = self._cache.get(pid)
            if hit is not None and hit[0] == signature:
                self._cache.move_to_end(pid)
                return hit[1]
        rel = pickle.loads(self._read(f"{pid}.pkl"))       # only after its MAC checked out
        with self._lock:
            self._cache[pid] = (signature, rel, st.st_size)
            self._cache.move_to_end(pid)
            while len(self._cache) > 1 and (len(self._cache) > CACHE_SIZE
                                            or sum(e[2] for e in self._cache.values()) > CACHE_BYTES):
                self._cache.popitem(last=False)
        return rel

    def gallery(self) -> list[dict]:
        """Every published release's record, newest first; files that fail their MAC are left out."""
        out = []
        for path in self._folder_or_fail().glob("*.json"):
            if not valid_id(path.stem):
                continue
            try:
                out.append(json.loads(self._read(path.name)))
            except (LookupError, ValueError):
                continue
        return sorted(out, key=lambda r: str(r.get("time", "")), reverse=True)

    def unpublish(self, pid) -> bool:
        """Remove a published release (its record first, so the gallery drops it at once); True
        if there was one. Callers check that the browser is the owner's."""
        if not valid_id(pid):
            return False
        folder = self._folder_or_fail()
        removed = False
        with speaking("folder of published releases"):
            for name in (f"{pid}.json", f"{pid}.pkl"):
                try:
                    (folder / name).unlink()
                    removed = True
                except FileNotFoundError:
                    pass
        with self._lock:
            self._cache.pop(pid, None)
        return removed
