"""One outbox tailer per server process: the pushed side of every open websocket.

A socket holding a store connection in its own blocking read would cap a process at the
pool's size of open sessions. Here each *group* of sessions that the store reads together
(``Store.outbox_group``: on Redis, a partition, whose outboxes share one hash slot) gets
one reader task: one blocking read over the outboxes of the group's subscribed sessions,
fanned out in-process to one bounded queue per socket. Connections used: one per busy
group, not one per socket.

A subscription starts at the id of the last entry its socket delivered (the socket
replays the history itself first) and receives every later entry exactly once, in order.

Picking up a new subscription while the reader is blocked: the read also waits on this
process's wake-up for the group (``Store.wake_reader``), which ends the blocking read at
once, and the next read includes the new outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

from runtime import Runtime
from runtime.store import OutboxEntry

from ._tasks import cancel_and_wait

log = logging.getLogger("parley.server.tailer")

CLOSE_GOING_AWAY = 1001  # the server is shutting down
CLOSE_UNAVAILABLE = 1011  # the message store is unreachable
CLOSE_TOO_SLOW = 4408  # the page fell more than queue_size messages behind

READ_COUNT = 100  # entries per outbox per read

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

    def __init__(self, session: str, group: str, after: str, limit: int) -> None:
        self.session = session
        self.group = group
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


class _Group:
    """The subscriptions of one group of sessions (outboxes the store reads together) and
    the task that reads their outboxes."""

    def __init__(self, tailer: OutboxTailer, group: str) -> None:
        self.tailer = tailer
        self.group = group
        # "0-0": a wake-up sent before our first read still counts (at most one spurious
        # wake-up; the wake stream holds one entry).
        self.wake_cursor = "0-0"
        self.subs: dict[str, set[Subscription]] = {}  # session id -> its subscriptions
        self.task: asyncio.Task[None] | None = None
        # ``reading``: a read built from a snapshot of ``subs`` is in flight; ``woken``: a
        # wake-up has been sent for it. Set together with the snapshot, with no await in
        # between, so a subscription added after the snapshot always sees reading=True.
        self.reading = False
        self.woken = False

    def add(self, sub: Subscription) -> bool:
        """Register ``sub``; True when the in-flight read must be woken to include it."""
        self.subs.setdefault(sub.session, set()).add(sub)
        if self.task is None:
            self.task = asyncio.create_task(self._run(), name=f"parley-tail-{self.group}")
            return False
        if self.reading and not self.woken:
            # One wake-up per blocked read: a burst of connects costs one extra read.
            self.woken = True
            return True
        return False

    def remove(self, sub: Subscription) -> None:
        # No wake-up: the in-flight read may still return entries of this outbox; they are
        # dropped, and the reader ends (releasing its connection) within one block.
        subs = self.subs.get(sub.session)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self.subs[sub.session]

    async def _run(self) -> None:
        store = self.tailer.runtime.store
        try:
            while self.subs:
                # Each outbox is read from the oldest cursor of its subscriptions.
                cursors = {
                    session: min(subs, key=lambda s: s.cursor_id).cursor
                    for session, subs in self.subs.items()
                }
                self.reading, self.woken = True, False
                try:
                    read = await store.read_outboxes(
                        self.group,
                        cursors,
                        self.tailer.process_id,
                        self.wake_cursor,
                        READ_COUNT,
                        self.tailer.block_ms,
                    )
                finally:
                    self.reading = False
                if read.wake_cursor is not None:
                    self.wake_cursor = read.wake_cursor
                self._dispatch(read.entries, cursors)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the store is unreachable: every page reconnects
            log.warning("outbox tailer %s stopped: %s", self.group, exc)
            self.end_all(CLOSE_UNAVAILABLE, "the message store is unavailable")
        finally:
            # No await between the loop's last `while self.subs` and here: a subscriber
            # either saw this task running (and the loop saw its outbox) or sees None and
            # starts a new one.
            self.task = None

    def _dispatch(self, read: dict[str, list[OutboxEntry]], cursors: dict[str, str]) -> None:
        for session, entries in read.items():
            subs = self.subs.get(session)
            if not subs or not entries:
                continue
            # A subscription added during the read with a cursor *older* than the one
            # this read used would get a gap: it waits for the next read (it was woken).
            read_from = parse_id(cursors.get(session, "0-0"))
            targets = [s for s in subs if s.cursor_id >= read_from]
            for entry in entries:
                parsed = parse_id(entry.id)
                for sub in targets:
                    if sub.ended is None and not sub.offer(entry.id, parsed, entry.message):
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
    """Shared outbox reads of one server process (one reader task per busy group)."""

    def __init__(self, runtime: Runtime, *, block_ms: int, queue_size: int) -> None:
        if queue_size < 1:
            raise ValueError(f"queue_size must be >= 1, got {queue_size}")
        self.runtime = runtime
        self.block_ms = block_ms
        self.queue_size = queue_size
        # Wake-ups are per process: another gateway process's subscriptions never wake
        # this process's readers (no herd of useless reads with N gateways).
        self.process_id = secrets.token_hex(8)
        self._groups: dict[str, _Group] = {}

    def readers(self) -> int:
        """Reader tasks running now (each holds at most one store connection)."""
        return sum(1 for g in self._groups.values() if g.task is not None)

    def _group(self, session: str) -> _Group:
        name = self.runtime.store.outbox_group(session)
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = _Group(self, name)
        return group

    async def subscribe(self, session: str, after: str) -> Subscription:
        """Entries of ``session``'s outbox after the id ``after``, from now on."""
        group = self._group(session)
        sub = Subscription(session, group.group, after, self.queue_size)
        if group.add(sub):
            try:
                await self.runtime.store.wake_reader(group.group, self.process_id)
            except BaseException:
                group.remove(sub)
                raise
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._group(sub.session).remove(sub)

    async def close(self) -> None:
        """Stop every reader and end every subscription (server shutdown)."""
        groups = list(self._groups.values())
        # Ending the subscriptions first also ends each reader's loop after its current
        # read, should redis-py swallow the cancellation (see server._tasks).
        for group in groups:
            group.end_all(CLOSE_GOING_AWAY, "the server is shutting down")
        await cancel_and_wait([g.task for g in groups if g.task is not None])
        with contextlib.suppress(Exception):
            for group in groups:
                await self.runtime.store.drop_reader(group.group, self.process_id)
