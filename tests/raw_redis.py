"""For tests that check what the Redis store wrote: the store's own client and key names
(``RedisStore.client``, ``run_keys``, ``session_key``, ``keys``), reached through a
runtime's public ``store``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from runtime import Runtime
from runtime.models import LOG_SCOPED
from runtime.settings import TASKS_GROUP
from runtime.store.redis import RedisStore, keys


def raw(rt: Runtime) -> RedisStore:
    store = rt.store
    assert isinstance(store, RedisStore), f"expected the Redis store, got {store!r}"
    return store


async def rewrite_log(
    rt: Runtime, run_id: str, change: Callable[[str, dict[str, Any]], dict[str, Any] | None]
) -> None:
    """Rewrite run ``run_id``'s log in place, ids kept: each event's data becomes what
    ``change(type, data)`` returns (None drops the event), to make a log as an earlier
    version of the code recorded it."""
    client, key = raw(rt).client, raw(rt).run_keys(run_id).events
    entries: Any = await client.xrange(key)
    await client.delete(key)
    for event_id, fields in entries:
        data = change(fields[b"t"].decode(), orjson.loads(fields[b"d"]))
        if data is not None:
            fields[b"d"] = orjson.dumps(data)
            await client.xadd(key, fields, id=event_id)


def as_recorded_before_takes(event_type: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """For :func:`rewrite_log`: a run as the code before receives recorded the messages
    they took wrote it (``LOG_SCOPED``, no ``message.taken``)."""
    if event_type == "message.taken":
        return None
    if event_type == "workflow.started":
        data["scoped"] = LOG_SCOPED
    return data


async def as_queued_without_workflows(rt: Runtime) -> None:
    """Every waiting task message written again without its workflow's name, as a release
    before tasks named it queued them (the worker learns the workflow from the claim)."""
    store = raw(rt)
    for partition in range(store.partitions):
        stream = keys.key("tasks", partition)
        entries: Any = await store.client.xrange(stream)
        for message_id, fields in entries:
            await store.client.xdel(stream, message_id)
            await store.client.xadd(stream, {b"r": fields[b"r"]})


async def task_consumers(store: RedisStore) -> set[str]:
    """The consumers listed in the task streams' group, every partition's."""
    names = set()
    for partition in range(store.partitions):
        stream = keys.key("tasks", partition)
        for consumer in await store.client.xinfo_consumers(stream, TASKS_GROUP):
            names.add(consumer["name"].decode())
    return names
