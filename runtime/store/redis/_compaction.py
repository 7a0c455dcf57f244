"""Compacting ended runs: their log and hooks become one archive (``._archive``), swapped
in by ``lua/compact.lua``, fenced; readers take a run's log and hooks from whichever of
the two forms it has (:meth:`CompactionStore.read_log`).

A run is compacted :data:`COMPACT_DELAY_SECONDS` (up to :data:`COMPACT_BATCH_SECONDS`
more) after it ended, not at once: whoever follows a run by blocking on its event stream
(``Runtime.wait``, a console, a benchmark's probe) issues its read moments after it last
saw the run running; once the stream is gone, such a read would block for its whole
timeout instead of returning the run's last event. The delay also lets one round trip
read, and one script call per partition swap, every run that ended meanwhile: the process
that ended a run holds only its id until then, and the blob is built then, off the path of
the executions (an ending script that returned the log cost Redis more, in Lua tables,
than a plain XRANGE later, and its worker the blob at once). The read costs a lifecycle two
commands; sparing them was measured twice and dropped (bench/README.md, 2026-12-01 day):
an archive built from the log the ending worker held cost the worker more CPU than the
read, and a read script cost Redis 10 % more instructions per lifecycle.
A process that stops first compacts what it holds (:meth:`close`), and one that dies leaves
its runs as they were: bigger, but read the same way."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import Any

from redis.exceptions import RedisError

from ...errors import ParleyError
from ...models import FINISHED_STATUSES, Event
from . import _archive, _decode, _keys
from ._part import StorePart

log = logging.getLogger("parley.store")

# How long after its end a run is compacted (see above); a waiter that read the run
# running this long ago and has not blocked on its stream yet is the one left waiting.
COMPACT_DELAY_SECONDS = 5.0
# How long after the first is due a compaction waits for more (see _compact_when_due).
COMPACT_BATCH_SECONDS = 1.0


def archive_key(keys: _keys.RunKeys) -> str:
    return _keys.key("archive", keys.partition, run_id=keys.run_id)


_ENDED = {status.value.encode() for status in FINISHED_STATUSES}

# a run to compact: its keys and its ARGV for lua/compact.lua
_Swap = tuple[_keys.RunKeys, list[Any]]

# runs read (and then swapped) per round trip; their replies arrive under one timeout
_READ_CHUNK = 100
# blobs built per turn of the event loop
_PACKS_PER_TURN = 16


def swap_args(entries: Sequence[Any], hooks: Mapping[bytes, bytes]) -> list[Any]:
    """lua/compact.lua's ARGV for one run: the log's last id, its length, the hooks'
    count (its fence) and the blob, from the log and hooks read (:meth:`_read_logs`)."""
    return [entries[-1][0], len(entries), len(hooks), _archive.pack(entries, hooks)]


def _chunks(run_ids: Sequence[str]) -> list[Sequence[str]]:
    return [run_ids[i : i + _READ_CHUNK] for i in range(0, len(run_ids), _READ_CHUNK)]


class CompactionStore(StorePart):
    """The compaction part of :class:`~runtime.store.redis.RedisStore`."""

    compact_delay: float = COMPACT_DELAY_SECONDS
    # runs to compact: (when, run id), in the order they ended
    _due: deque[tuple[float, str]] | None = None
    _compactor: asyncio.Task[None] | None = None

    def _compact_later(self, run_id: str) -> None:
        """Compact run ``run_id``, just ended, after :attr:`compact_delay`."""
        loop = asyncio.get_running_loop()
        if self._due is None:
            self._due = deque()
        self._due.append((loop.time() + self.compact_delay, run_id))
        if self._compactor is None or self._compactor.done():
            # In a context of its own: the task must not hold (nor be adopted by, see
            # runtime/engine/tasks.py) the execution whose end made it start.
            self._compactor = contextvars.Context().run(loop.create_task, self._compact_when_due())

    async def _compact_when_due(self) -> None:
        due = self._due
        while due:
            # Once the first is due, the runs that end within the next moment are taken with
            # it: under a trickle of ends (a run every few ms) each would otherwise cost a
            # wake-up, a read and a swap of its own, beside the executions.
            wait = due[0][0] + COMPACT_BATCH_SECONDS - asyncio.get_running_loop().time()
            if wait > 0:
                await asyncio.sleep(wait)
            now = asyncio.get_running_loop().time()
            batch = []
            while due and due[0][0] <= now:
                batch.append(due.popleft()[1])
            await self._compact_best_effort(batch)

    async def _compact_best_effort(self, run_ids: Sequence[str]) -> int:
        """:meth:`compact`, for runs whose compaction nobody waits for, chunk by chunk: the
        runs have ended whatever happens here, and one left uncompacted is read the same way
        (``parley runs compact`` finds it later). Nothing it raises may end the compactor:
        the runs that end after it would never be compacted."""
        compacted = 0
        for chunk in _chunks(run_ids):
            try:
                compacted += await self._compact_chunk(chunk)
            except Exception as exc:
                log.warning(
                    "%d ended runs were not compacted (%s): they stay readable",
                    len(chunk),
                    exc,
                    exc_info=not isinstance(exc, ParleyError | RedisError | OSError),
                )
        return compacted

    async def _swap(self, batch: Sequence[_Swap]) -> int:
        """One script call per partition; returns how many runs were swapped."""
        by_partition: dict[int, tuple[list[str], list[Any]]] = defaultdict(lambda: ([], []))
        for keys, args in batch:
            names, argv = by_partition[keys.partition]
            names += [keys.run, keys.events, keys.hooks, keys.ckpt, archive_key(keys)]
            argv += args
        done = await asyncio.gather(
            *(self.scripts.compact(keys=k, args=a) for k, a in by_partition.values())
        )
        return sum(int(n) for n in done)

    async def flush_compactions(self) -> int:
        """Compact now every run this process holds for later; returns how many were."""
        if self._compactor is not None:
            self._compactor.cancel()
            self._compactor = None
        run_ids = [run_id for _, run_id in self._due or ()]
        if self._due is not None:
            self._due.clear()
        return await self._compact_best_effort(run_ids) if run_ids else 0

    async def compact(self, run_ids: Sequence[str], *, later: bool = False) -> int:
        """Compact these ended runs, now (or ``later``: after the delay), reading their logs
        and hooks first, one round trip per :data:`_READ_CHUNK` runs; runs not ended,
        already compacted, or changed meanwhile are left as they are. Returns how many were
        compacted now."""
        if later:
            for run_id in run_ids:
                self._compact_later(run_id)
            return 0
        return sum([await self._compact_chunk(chunk) for chunk in _chunks(run_ids)])

    async def _compact_chunk(self, run_ids: Sequence[str]) -> int:
        """Read, pack and swap these runs (at most :data:`_READ_CHUNK`): one round trip to
        read, one to swap."""
        runs = [self._run(run_id) for run_id in run_ids]
        # not one atomic read: the swap's fence finds out if a run changed in between
        batch: list[_Swap] = []
        for keys, (entries, hooks) in zip(runs, await self._read_logs(runs), strict=True):
            if entries:  # none: compacted already, or never logged
                batch.append((keys, swap_args(entries, hooks)))
                if len(batch) % _PACKS_PER_TURN == 0:
                    # long logs take long to pack: executions and heartbeats go on
                    await asyncio.sleep(0)
        return await self._swap(batch) if batch else 0

    async def _read_logs(self, runs: Sequence[_keys.RunKeys]) -> list[tuple[Any, Any]]:
        """Each run's XRANGE reply as Redis sends it and its hooks hash (a dict, as RESP3's
        map arrives)."""
        if not self.is_cluster:
            commands: list[tuple[str, ...]] = []
            for keys in runs:
                commands += [("XRANGE", keys.events, "-", "+"), ("HGETALL", keys.hooks)]
            raw: list[Any] = await self.scripts.batcher.commands(commands)
            for reply in raw:
                if isinstance(reply, Exception):
                    raise reply
            # a hash is a map in RESP3, a flat array in RESP2
            return [
                (entries, h if isinstance(h, dict) else dict(zip(h[::2], h[1::2], strict=True)))
                for entries, h in zip(raw[::2], raw[1::2], strict=True)
            ]
        # Redis Cluster: its pipeline sends each node its own part; redis-py's stream
        # entries are made into Redis' form again
        async with self.client.pipeline(transaction=False) as pipe:
            for keys in runs:
                pipe.xrange(keys.events)
                pipe.hgetall(keys.hooks)
            parsed = await pipe.execute()
        return [
            ([(i, [b"t", f[b"t"], b"d", f[b"d"]]) for i, f in stream], hash_)
            for stream, hash_ in zip(parsed[::2], parsed[1::2], strict=True)
        ]

    async def compact_ended(self) -> int:
        """Compact every ended run that still has its stream (its process stopped within
        the delay): a scan of the store, O(keys), for operators (``parley runs compact``)."""
        pattern = _keys.partition_prefix(0).replace("{p:0}", "{p:*}") + _keys.TEMPLATES[
            "events"
        ].format(run_id="*")
        run_ids = []
        async for key in self.client.scan_iter(match=pattern, count=1000):
            run_ids.append(key.decode().rsplit(":run:", 1)[1].removesuffix(":events"))
        compacted = 0
        for i in range(0, len(run_ids), 500):
            chunk = run_ids[i : i + 500]
            async with self.client.pipeline(transaction=False) as pipe:
                for run_id in chunk:
                    pipe.hget(self._run(run_id).run, "status")
                statuses = await pipe.execute()
            ended = [r for r, s in zip(chunk, statuses, strict=True) if s in _ENDED]
            compacted += await self.compact(ended)
        return compacted

    async def read_log(
        self, run_id: str, *, with_events: bool = True
    ) -> tuple[bool, list[Event], dict[bytes, bytes]]:
        """Whether run ``run_id``'s hash exists, its log (unless ``with_events`` is false)
        and its hooks hash, from the stream and the hash or from its archive."""
        keys = self._run(run_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.exists(keys.run)
            if with_events:
                pipe.xrange(keys.events)
            pipe.hgetall(keys.hooks)
            pipe.get(archive_key(keys))
            replies = await pipe.execute()
        exists, blob = bool(replies[0]), replies[-1]
        if blob is not None:
            events, hooks = _archive.unpack(blob)
            return exists, events if with_events else [], hooks
        events = _decode.events(replies[1]) if with_events else []
        return exists, events, replies[-2]
