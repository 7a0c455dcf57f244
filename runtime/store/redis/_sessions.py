"""Chat sessions in Redis: the server's small hash per session, the start lock, and the
session's outbox stream with the shared reads of a gateway process's outbox reader."""

from __future__ import annotations

from typing import Any

from ..._codec import loads
from ..records import OutboxEntry, OutboxRead
from . import _decode, _keys
from ._calls import store_call
from ._part import StorePart

# A gateway's wake-up stream disappears on its own if its process dies without cleaning up.
WAKE_TTL_MS = 24 * 3600 * 1000


class SessionStore(StorePart):
    """The session and outbox part of :class:`~runtime.store.redis.RedisStore`."""

    def session_key(self, name: str, session: str) -> str:
        """A session's key: ``outbox``, ``session_meta`` or ``session_lock``."""
        return _keys.key(name, _keys.partition_of(session, self.partitions), session=session)

    @store_call
    async def create_session(self, session: str, ttl_seconds: int) -> None:
        key = self.session_key("session_meta", session)
        created = await self.now_ms()  # the store's clock, like every stored time
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"created": created})
            pipe.expire(key, ttl_seconds)
            await pipe.execute()

    @store_call
    async def session_exists(self, session: str) -> bool:
        return bool(await self.client.exists(self.session_key("session_meta", session)))

    @store_call
    async def bind_session(self, session: str, run_id: str, ttl_seconds: int) -> None:
        key = self.session_key("session_meta", session)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, "run", run_id)
            pipe.expire(key, ttl_seconds)
            await pipe.execute()

    @store_call
    async def session_run(self, session: str) -> str | None:
        raw = await self.client.hget(self.session_key("session_meta", session), "run")
        return _decode.opt_text(raw)

    @store_call
    async def lock_session(self, session: str, ttl_ms: int) -> bool:
        key = self.session_key("session_lock", session)
        return bool(await self.client.set(key, b"1", nx=True, px=ttl_ms))

    @store_call
    async def unlock_session(self, session: str) -> None:
        await self.client.delete(self.session_key("session_lock", session))

    # outboxes ------------------------------------------------------------------------
    @store_call
    async def read_outbox(
        self, session: str, after: str, count: int, block_ms: int | None
    ) -> list[OutboxEntry]:
        key = self.session_key("outbox", session)
        reply: Any = await self.client.xread({key: after}, count=count, block=block_ms)
        return [
            OutboxEntry(_decode.text(entry_id), loads(fields[b"m"]))
            for _stream, entries in reply or []
            for entry_id, fields in entries
        ]

    @store_call
    async def post(self, session: str, message: bytes, *, retention_seconds: int) -> str:
        partition = _keys.partition_of(session, self.partitions)
        entry_id: Any = await self.scripts.post(
            keys=[self.session_key("outbox", session), _keys.key("waiting", partition)],
            args=[_keys.partition_prefix(partition), session, message, retention_seconds],
        )
        return _decode.text(entry_id)

    def outbox_group(self, session: str) -> str:
        # The outboxes of one partition share its hash tag: one XREAD can read them all,
        # also on Redis Cluster (a single slot).
        return str(_keys.partition_of(session, self.partitions))

    def _wake_key(self, group: str, reader: str) -> str:
        return _keys.key("gateway_wake", int(group), process=reader)

    @store_call
    async def read_outboxes(
        self,
        group: str,
        cursors: dict[str, str],
        reader: str,
        wake_cursor: str,
        count: int,
        block_ms: int,
    ) -> OutboxRead:
        wake_key = self._wake_key(group, reader)
        sessions = {self.session_key("outbox", s): s for s in cursors}
        streams: dict[Any, Any] = {key: cursors[s] for key, s in sessions.items()}
        streams[wake_key] = wake_cursor
        reply: Any = await self.client.xread(streams, count=count, block=block_ms)
        entries: dict[str, list[OutboxEntry]] = {}
        new_wake = None
        for stream, items in reply or []:
            key = _decode.text(stream)
            if key == wake_key:
                new_wake = _decode.text(items[-1][0])
                continue
            entries[sessions[key]] = [
                OutboxEntry(_decode.text(entry_id), loads(fields[b"m"]))
                for entry_id, fields in items
            ]
        return OutboxRead(entries, new_wake)

    @store_call
    async def wake_reader(self, group: str, reader: str) -> None:
        key = self._wake_key(group, reader)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xadd(key, {"w": b"1"}, maxlen=1, approximate=False)
            pipe.pexpire(key, WAKE_TTL_MS)
            await pipe.execute()

    @store_call
    async def drop_reader(self, group: str, reader: str) -> None:
        await self.client.delete(self._wake_key(group, reader))
