"""One outbox tailer per server process: the pushed side of every open websocket.

A socket used to hold a pooled Redis connection in its own blocking ``XREAD``, so the
pool (256 connections) capped a process at ~256 open sessions. Here each partition that
has open sockets gets one reader task: one ``XREAD BLOCK`` over the outboxes of the
partition's subscribed sessions (they share the partition's hash tag ``{p:N}``, so the
command touches a single slot, also on Redis Cluster), fanned out in-process to one
bounded queue per socket. Connections used: one per busy partition, not one per socket.

A subscription starts at the id of the last entry its socket delivered (the socket
replays the history itself first) and receives every later entry exactly once, in order.

Picking up a new subscription while the reader is blocked: the reader's ``XREAD`` also
reads a small per-process, per-partition *wake* stream; ``subscribe`` appends to it, which
ends the blocking read at once, and the next read includes the new outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

import orjson

from runtime import Runtime
from runtime._keys import gateway_wake_key

from ._tasks import cancel_and_wait

log = logging.getLogger("parley.server.tailer")

CLOSE_GOING_AWAY = 1001  # the server is shutting down
CLOSE_UNAVAILABLE = 1011  # the message store is unreachable
CLOSE_TOO_SLOW = 4408  # the page fell more than queue_size messages behind

READ_COUNT = 100  # entries per outbox per XREAD
WAKE_TTL_MS = 24 * 3600 * 1000  # a crashed process's wake keys disappear on their own

Entry = tuple[str, dict[str, Any]]
StreamId = tuple[int, int]


def parse_id(entry_id: str) -> StreamId:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class SubscriptionEnded(Exception):
    """The tailer will deliver nothing more; close the socket with ``code``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class Subscription:
    """The entries of one session's outbox after ``cursor``, for one socket."""

    def __init__(self, session: str, key: str, after: str, limit: int) -> None:
        self.session = session
        self.key = key
        self.cursor = after  # id of the last entry handed to this subscription
        self.cursor_id = parse_id(after)
        self.limit = limit
        self.ended: SubscriptionEnded | None = None
        # Unbounded at the asyncio level so the end marker always fits; ``offer``
        # enforces ``limit`` for entries.
        self._queue: asyncio.Queue[Entry | None] = asyncio.Queue()

    async def get(self) -> Entry:
        """The next entry; raises :class:`SubscriptionEnded` once the tailer dropped it."""
        item = await self._queue.get() if self.ended is None else None
        if item is None:
            assert self.ended is not None
            raise self.ended
        return item

    def offer(self, entry_id: str, parsed: StreamId, message: dict[str, Any]) -> bool:
        """Queue one entry (skipping one already handed over); False when full."""
        if parsed <= self.cursor_id:
            return True
        if self._queue.qsize() >= self.limit:
            return False
        self._queue.put_nowait((entry_id, message))
        self.cursor, self.cursor_id = entry_id, parsed
        return True

    def end(self, code: int, reason: str) -> None:
        if self.ended is not None:
            return
        self.ended = SubscriptionEnded(code, reason)
        while not self._queue.empty():  # the page reconnects with its last id and replays
            self._queue.get_nowait()
        self._queue.put_nowait(None)  # wakes a socket waiting in get()


class _Partition:
    """The subscriptions of one partition and the task that reads their outboxes."""

    def __init__(self, tailer: OutboxTailer, outbox: str) -> None:
        self.tailer = tailer
        self.wake_key = gateway_wake_key(outbox, tailer.process_id)
        self._wake_key_b = self.wake_key.encode()
        # "0-0": an entry appended before our first read still counts as a wake (at most
        # one spurious wake-up; the stream holds one entry).
        self.wake_after = "0-0"
        self.subs: dict[str, set[Subscription]] = {}
        self.task: asyncio.Task[None] | None = None
        # ``reading``: an XREAD built from a snapshot of ``subs`` is in flight; ``woken``:
        # a wake has been sent for it. Set together with the snapshot, with no await in
        # between, so a subscription added after the snapshot always sees reading=True.
        self.reading = False
        self.woken = False

    def add(self, sub: Subscription) -> bool:
        """Register ``sub``; True when the in-flight read must be woken to include it."""
        self.subs.setdefault(sub.key, set()).add(sub)
        if self.task is None:
            self.task = asyncio.create_task(self._run(), name=f"parley-tail-{self.wake_key}")
            return False
        if self.reading and not self.woken:
            # One wake per blocked read: a burst of connects costs one extra XREAD.
            self.woken = True
            return True
        return False

    def remove(self, sub: Subscription) -> None:
        # No wake: the in-flight read may still return entries of this outbox; they are
        # dropped, and the reader ends (releasing its connection) within one block.
        subs = self.subs.get(sub.key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self.subs[sub.key]

    async def _run(self) -> None:
        redis = self.tailer.runtime.redis
        try:
            while self.subs:
                # Each outbox is read from the oldest cursor of its subscriptions.
                cursors = {
                    key: min(subs, key=lambda s: s.cursor_id).cursor
                    for key, subs in self.subs.items()
                }
                streams: dict[Any, Any] = {**cursors, self.wake_key: self.wake_after}
                self.reading, self.woken = True, False
                try:
                    reply: Any = await redis.xread(
                        streams,
                        count=READ_COUNT,
                        block=self.tailer.block_ms,
                    )
                finally:
                    self.reading = False
                self._dispatch(reply or [], cursors)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the store is unreachable: every page reconnects
            log.warning("outbox tailer %s stopped: %s", self.wake_key, exc)
            self.end_all(CLOSE_UNAVAILABLE, "the message store is unavailable")
        finally:
            # No await between the loop's last `while self.subs` and here: a subscriber
            # either saw this task running (and the loop saw its outbox) or sees None and
            # starts a new one.
            self.task = None

    def _dispatch(self, reply: list[Any], cursors: dict[str, str]) -> None:
        for stream, entries in reply:
            if stream == self._wake_key_b:
                self.wake_after = entries[-1][0].decode()
                continue
            key = stream.decode()
            subs = self.subs.get(key)
            if not subs or not entries:
                continue
            # A subscription added during the read with a cursor *older* than the one
            # this read used would get a gap: it waits for the next read (it was woken).
            read_from = parse_id(cursors.get(key, "0-0"))
            targets = [s for s in subs if s.cursor_id >= read_from]
            for raw_id, fields in entries:
                entry_id = raw_id.decode()
                parsed = parse_id(entry_id)
                message = orjson.loads(fields[b"m"])  # the runtime's outbox encoding
                for sub in targets:
                    if sub.ended is None and not sub.offer(entry_id, parsed, message):
                        # Only this socket falls behind; the others keep their pace.
                        log.info("session %s: socket too slow, disconnected", sub.session)
                        self.remove(sub)
                        sub.end(
                            CLOSE_TOO_SLOW,
                            f"more than {sub.limit} messages behind; reconnect with the last id",
                        )

    def end_all(self, code: int, reason: str) -> None:
        for subs in list(self.subs.values()):
            for sub in list(subs):
                sub.end(code, reason)
        self.subs.clear()


class OutboxTailer:
    """Shared outbox reads of one server process (one reader task per busy partition)."""

    def __init__(self, runtime: Runtime, *, block_ms: int, queue_size: int) -> None:
        if queue_size < 1:
            raise ValueError(f"queue_size must be >= 1, got {queue_size}")
        self.runtime = runtime
        self.block_ms = block_ms
        self.queue_size = queue_size
        # Wake keys are per process: another gateway process's subscriptions never wake
        # this process's readers (no herd of useless reads with N gateways).
        self.process_id = secrets.token_hex(8)
        self._partitions: dict[str, _Partition] = {}

    def readers(self) -> int:
        """Reader tasks running now (each holds at most one Redis connection)."""
        return sum(1 for p in self._partitions.values() if p.task is not None)

    def _partition(self, key: str) -> _Partition:
        prefix = key[: key.index("}:") + 2]  # "parley:{p:N}:", the outbox's hash tag
        part = self._partitions.get(prefix)
        if part is None:
            part = self._partitions[prefix] = _Partition(self, key)
        return part

    async def subscribe(self, session: str, after: str) -> Subscription:
        """Entries of ``session``'s outbox after the id ``after``, from now on."""
        key = self.runtime.outbox_key(session)
        part = self._partition(key)
        sub = Subscription(session, key, after, self.queue_size)
        if part.add(sub):
            try:
                await self._wake(part)
            except BaseException:
                part.remove(sub)
                raise
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._partition(sub.key).remove(sub)

    async def _wake(self, part: _Partition) -> None:
        async with self.runtime.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(part.wake_key, {"w": b"1"}, maxlen=1, approximate=False)
            pipe.pexpire(part.wake_key, WAKE_TTL_MS)
            await pipe.execute()

    async def close(self) -> None:
        """Stop every reader and end every subscription (server shutdown)."""
        parts = list(self._partitions.values())
        # Ending the subscriptions first also ends each reader's loop after its current
        # read, should redis-py swallow the cancellation (see server._tasks).
        for part in parts:
            part.end_all(CLOSE_GOING_AWAY, "the server is shutting down")
        await cancel_and_wait([p.task for p in parts if p.task is not None])
        with contextlib.suppress(Exception):
            keys = [p.wake_key for p in parts]
            for key in keys:  # one key per command: they live in different slots
                await self.runtime.redis.delete(key)
