"""For tests that check what the Redis store wrote: the store's own client and key names
(``RedisStore.client``, ``run_keys``, ``session_key``, ``keys``), reached through a
runtime's public ``store``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from runtime import Runtime
from runtime.store.redis import RedisStore


def raw(rt: Runtime) -> RedisStore:
    store = rt.store
    assert isinstance(store, RedisStore), f"expected the Redis store, got {store!r}"
    return store


async def rewrite_decisions(rt: Runtime, run_id: str, change: Callable[[Any], object]) -> None:
    """Rewrite run ``run_id``'s log in place, ids kept, each ``first.decided``'s data passed
    through ``change`` (to make a log as an earlier version of the code recorded it)."""
    client, key = raw(rt).client, raw(rt).run_keys(run_id).events
    entries: Any = await client.xrange(key)
    await client.delete(key)
    for event_id, fields in entries:
        if fields[b"t"] == b"first.decided":
            data = orjson.loads(fields[b"d"])
            change(data)
            fields[b"d"] = orjson.dumps(data)
        await client.xadd(key, fields, id=event_id)
