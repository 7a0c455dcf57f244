"""For tests that check what the Redis store wrote: the store's own client and key names
(``RedisStore.client``, ``run_keys``, ``session_key``, ``keys``), reached through a
runtime's public ``store``."""

from __future__ import annotations

from runtime import Runtime
from runtime.store.redis import RedisStore


def raw(rt: Runtime) -> RedisStore:
    store = rt.store
    assert isinstance(store, RedisStore), f"expected the Redis store, got {store!r}"
    return store
