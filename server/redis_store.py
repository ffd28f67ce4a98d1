"""The shared store in Redis (`RedisStore`), for several hosts: the same quotas, bounds and
seals as the folder store (`server.store`); Redis only keeps the entries, never evicts them."""
from __future__ import annotations

import logging
import os
import pickle
import time

from .store import LOCK_TIMEOUT, SessionQuota, kind, owner, reserved

REDIS_TIMEOUT = 10            # seconds a Redis call waits before the store reports it unreachable
NOT_PERSISTENT = ("this Redis keeps nothing across a restart (no append-only file, no snapshots): "
                  "a restart would lose paid releases while their charges stay. Start it with "
                  "--appendonly yes (or snapshots: --save), or use the folder store")
EVICTS = ("this Redis may drop entries to stay under its memory limit (maxmemory-policy {policy}): it "
          "would drop paid releases while their charges stay. Set maxmemory-policy noeviction (this "
          "store keeps its own byte bound, --store-mb), or no maxmemory")
UNCHECKED = ("this Redis does not let the server read its settings (CONFIG is disabled), so the server "
             "cannot check that it keeps its data across a restart and never evicts it; make sure it "
             "persists (append-only file or snapshots) and uses maxmemory-policy noeviction")


class RedisStore(SessionQuota):
    """The store in Redis: an entry is a hash (pickle, version) with a time to live; each session's
    entries and their sizes are listed in a sorted set by write time, so quotas and the byte
    bound are kept by this code, never by Redis evicting someone's entry."""

    def __init__(self, url: str, max_bytes: int, front_bytes: int, default_timeout: int = 3600,
                 prefix: str = "dpstore:", key: bytes | None = None):
        import redis
        self.r = redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT,
                                      socket_connect_timeout=REDIS_TIMEOUT)
        self.r.ping()
        persists, policy = self.persists(), self.eviction()
        if persists is False:
            raise ValueError(NOT_PERSISTENT)
        if policy not in (None, "noeviction"):
            raise ValueError(EVICTS.format(policy=policy))
        if persists is None:
            logging.getLogger(__name__).warning(UNCHECKED)
        self.p = prefix
        self.default_timeout = int(default_timeout)
        self._setup_quota(max_bytes, front_bytes, key)

    def persists(self) -> bool | None:
        """Whether this Redis keeps its data across a restart (an append-only file or
        snapshots); None when it will not say (hosted Redis may disable CONFIG)."""
        import redis
        try:
            conf = {**self.r.config_get("appendonly"), **self.r.config_get("save")}
        except redis.ResponseError:
            return None
        return conf.get("appendonly") == "yes" or bool(str(conf.get("save", "")).strip())

    def eviction(self) -> str | None:
        """The policy by which this Redis drops entries at its memory limit ("noeviction" when it
        has no limit or never drops), None when it will not say."""
        import redis
        try:
            conf = {**self.r.config_get("maxmemory"), **self.r.config_get("maxmemory-policy")}
        except redis.ResponseError:
            return None
        return "noeviction" if int(conf.get("maxmemory", 0) or 0) == 0 else conf.get("maxmemory-policy")

    def _handle(self, key: str) -> str:
        return key

    def _entry(self, key: str) -> str:
        return f"{self.p}e:{key}"

    def _index(self, who: str) -> str:
        return f"{self.p}own:{who}"

    def _guard(self):
        return self.r.lock(f"{self.p}guard", timeout=LOCK_TIMEOUT, blocking_timeout=LOCK_TIMEOUT)

    def _lock(self, key: str):
        """A lock on one key across threads and processes (a Redis lock with a time limit)."""
        return self.r.lock(f"{self.p}lock:{key}", timeout=LOCK_TIMEOUT, blocking_timeout=LOCK_TIMEOUT)

    def _version(self, key: str):
        return self.r.hget(self._entry(key), "v")

    def _load(self, key: str):
        blob, version = self.r.hmget(self._entry(key), "b", "v")
        pickled = None if blob is None else self._unseal(key, blob)
        return None if pickled is None else (pickle.loads(pickled), len(blob), version)

    def _write(self, key: str, payload: tuple, timeout):
        blob = payload[0]
        version = os.urandom(8).hex().encode()
        ttl = self.default_timeout if timeout is None else int(timeout)
        who = owner(key)
        pipe = self.r.pipeline()
        pipe.hset(self._entry(key), mapping={"b": blob, "v": version, "n": len(blob)})
        if ttl:
            pipe.expire(self._entry(key), ttl)
        pipe.zadd(self._index(who), {key: time.time()})
        pipe.hset(f"{self.p}sizes", key, len(blob))
        pipe.sadd(f"{self.p}owners", who)
        pipe.execute()
        return version

    def _remove(self, key: str):
        self._drop(key)

    def _drop(self, key: str):
        pipe = self.r.pipeline()
        pipe.delete(self._entry(key))
        pipe.zrem(self._index(owner(key)), key)
        pipe.hdel(f"{self.p}sizes", key)
        pipe.execute()

    def _own(self, who: str):
        keys = [k.decode() for k in self.r.zrange(self._index(who), 0, -1)]
        if not keys:
            return []
        sizes = self.r.hmget(f"{self.p}sizes", keys)
        alive = self.r.pipeline()
        for k in keys:
            alive.exists(self._entry(k))
        out = []
        for k, n, live in zip(keys, sizes, alive.execute()):
            if live:
                out.append((k, kind(k), int(n or 0)))
            else:                                  # expired in Redis: forget its size too
                self._drop(k)
        return out

    def _usage(self, visitors: bool = False) -> int:
        if not visitors:
            return sum(int(n) for n in self.r.hvals(f"{self.p}sizes"))
        return sum(int(n) for k, n in self.r.hgetall(f"{self.p}sizes").items()
                   if not reserved(owner(k.decode())))

    def _purge_expired(self):
        for who in self.r.smembers(f"{self.p}owners"):
            if not self._own(who.decode()):
                self.r.srem(f"{self.p}owners", who)

    def clear(self) -> bool:
        for k in self.r.scan_iter(f"{self.p}*"):
            self.r.delete(k)
        return True
