"""The folder backend of the shared store (`server.store`): flask-caching's FileSystemCache, one
sub-folder per session, shared by every worker through the file system. A dataset's large
arrays are written beside its pickle and memory-mapped (one copy in the page cache for every
worker); writes go to a temporary file renamed into place, so a killed writer leaves no half
entry (`remove_temporaries` clears what it left)."""
from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import pickle
import struct
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from flask_caching.backends.filesystemcache import FileSystemCache

from .store import RESERVED, SessionQuota, kind, owner, reserved

LOCK_STRIPES = 64        # per-key locks (jobs, interactive sessions, workspaces: each held briefly) share these files
OUT_OF_BAND_BYTES = 1 << 20   # a dataset's arrays this large are stored apart and memory-mapped
ALIGN = 64
HEAD = "IIQ"                  # a stored file starts with: expiry, buffer count, pickle length
HEADER = struct.calcsize(HEAD)
STALE_TEMPORARY = 600         # seconds after which a half-written file (its writer died) is removed


class FileStore(SessionQuota, FileSystemCache):
    """The embedded store: a folder of pickles, one sub-folder per session, shared by every worker
    through the file system; changes are serialised by a lock file across processes."""

    def __init__(self, cache_dir, max_bytes: int, front_bytes: int, default_timeout: int = 3600,
                 key: bytes | None = None):
        FileSystemCache.__init__(self, str(cache_dir), threshold=0, default_timeout=default_timeout)
        self._setup_quota(max_bytes, front_bytes, key)
        self._root = Path(cache_dir)
        (self._root / "locks").mkdir(exist_ok=True)

    def _folder(self, who: str) -> Path:
        """A session's sub-folder, named by a hash of its id (\"\" for shared entries)."""
        name = hashlib.sha256(f"session:{who}".encode()).hexdigest()[:32]
        return self._root / "data" / (RESERVED + name if reserved(who) else name)

    def _get_filename(self, key: str) -> str:
        return str(self._folder(owner(key)) / f"{kind(key)}-{hashlib.sha256(key.encode()).hexdigest()}")

    def _handle(self, key: str) -> str:
        return self._get_filename(key)

    @contextmanager
    def _flock(self, name: str):
        with open(self._root / "locks" / name, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _guard(self):
        return self._flock("store.lock")

    def _lock(self, key: str):
        """A lock on one key across threads and processes (flock on one of LOCK_STRIPES files)."""
        stripe = int(hashlib.sha256(key.encode()).hexdigest(), 16) % LOCK_STRIPES
        return self._flock(f"key-{stripe}.lock")

    def _read_header(self, fh) -> int | None:
        expires = struct.unpack("I", fh.read(4))[0]
        return None if expires != 0 and expires < time.time() else expires

    def _version(self, key: str):
        try:
            with open(self._get_filename(key), "rb") as fh:
                if self._read_header(fh) is None:
                    return None
                st = os.fstat(fh.fileno())
                return st.st_ino, st.st_mtime_ns, st.st_size
        except (FileNotFoundError, struct.error):
            return None

    def _dumps(self, key: str, value) -> tuple:
        """A dataset's large arrays go out of band, after the pickle in the same file, so a
        worker reads them memory-mapped (shared page cache, no copy) instead of unpickling them."""
        buffers = []

        def out_of_band(buf: pickle.PickleBuffer) -> bool:
            try:
                raw = buf.raw()
            except BufferError:            # not contiguous: in the pickle
                return True
            if raw.nbytes < OUT_OF_BAND_BYTES or kind(key) != "dataset":
                return True
            buffers.append(raw)
            return False
        blob = self._seal(key, pickle.dumps(value, protocol=5, buffer_callback=out_of_band))
        size = HEADER + 8 * len(buffers) + len(blob) + sum(ALIGN + b.nbytes for b in buffers)
        return (blob, buffers), size      # as much as the file takes, at most

    def _load(self, key: str):
        """(value, bytes it holds, version); out-of-band arrays are read-only views of a memory
        map of the file (it stays valid even if the entry is replaced or dropped) and count in
        full: a front cache holding the view keeps the file's pages, and a deleted file's disk."""
        try:
            with open(self._get_filename(key), "rb") as fh:
                expires, n_buffers, n_pickle = struct.unpack(HEAD, fh.read(HEADER))
                if expires != 0 and expires < time.time():
                    return None
                st = os.fstat(fh.fileno())
                sizes = struct.unpack(f"{n_buffers}Q", fh.read(8 * n_buffers))
                blob = self._unseal(key, fh.read(n_pickle))
                if blob is None:
                    return None
                buffers = []
                if n_buffers:
                    view, at = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)), fh.tell()
                    for size in sizes:
                        at += -at % ALIGN
                        buffers.append(view[at:at + size])
                        at += size
                return (pickle.loads(blob, buffers=buffers), len(blob) + sum(sizes),
                        (st.st_ino, st.st_mtime_ns, st.st_size))
        except (FileNotFoundError, struct.error):
            return None

    def _write(self, key: str, payload: tuple, timeout):
        """Written whole to a temporary file, then renamed: a reader never sees half an entry.
        Layout: expiry, buffer count, pickle length, buffer lengths, pickle, aligned buffers."""
        blob, buffers = payload
        path = Path(self._get_filename(key))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=self._fs_transaction_suffix, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(struct.pack(HEAD, self._normalize_timeout(timeout), len(buffers), len(blob)))
                fh.write(struct.pack(f"{len(buffers)}Q", *(b.nbytes for b in buffers)))
                fh.write(blob)
                for b in buffers:
                    fh.write(bytes(-fh.tell() % ALIGN))
                    fh.write(b)
            os.replace(tmp, path)
        except BaseException:           # a full disk, or stopped: no half-written file stays
            Path(tmp).unlink(missing_ok=True)
            raise
        st = path.stat()
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _remove(self, key: str):
        self._drop(self._get_filename(key))

    def _drop(self, handle: str):
        try:
            os.remove(handle)
        except FileNotFoundError:
            pass

    def _files(self, folder: Path):
        try:
            return [e for e in os.scandir(folder)
                    if e.is_file() and not e.name.endswith(self._fs_transaction_suffix)]
        except FileNotFoundError:
            return []

    def _own(self, who: str):
        out = []
        for e in self._files(self._folder(who)):
            try:
                st = e.stat()
            except FileNotFoundError:
                continue
            out.append((st.st_mtime_ns, e.path, e.name.split("-", 1)[0], st.st_size))
        return [(path, k, size) for _, path, k, size in sorted(out)]

    def _usage(self, visitors: bool = False) -> int:
        total = 0
        for folder in self._folders():
            if visitors and folder.name.startswith(RESERVED):
                continue
            for e in self._files(folder):
                try:
                    total += e.stat().st_size
                except FileNotFoundError:
                    pass
        return total

    def _folders(self):
        data = self._root / "data"
        return [Path(e.path) for e in os.scandir(data) if e.is_dir()] if data.is_dir() else []

    def _purge_expired(self):
        self.remove_temporaries(STALE_TEMPORARY)
        for folder in self._folders():
            for e in self._files(folder):
                try:
                    with open(e.path, "rb") as fh:
                        if self._read_header(fh) is None:
                            os.remove(e.path)
                except (FileNotFoundError, struct.error):
                    pass

    def remove_temporaries(self, older_than: float = 0) -> None:
        """Remove half-written files older than this many seconds (their writer was killed
        mid-write; 0, at a server's start when nothing is being written: all of them)."""
        cutoff = time.time() - older_than
        for folder in self._folders():
            for e in os.scandir(folder):
                try:
                    if e.name.endswith(self._fs_transaction_suffix) and e.stat().st_mtime <= cutoff:
                        os.remove(e.path)
                except FileNotFoundError:
                    pass

    def clear(self) -> bool:
        with self._guard():
            for folder in self._folders():
                for e in self._files(folder):
                    self._drop(e.path)
        return True
