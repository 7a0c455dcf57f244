"""Compacting ended runs: their log and hooks become one archive (``._archive``), swapped
in by ``lua/compact.lua``, fenced; readers take a run's log and hooks from whichever of
the two forms it has (:meth:`CompactionStore.read_log`).

A run is compacted :data:`COMPACT_DELAY_SECONDS` (up to :data:`COMPACT_BATCH_SECONDS`
more) after it ended, not at once: whoever follows a run by blocking on its event stream
(``Runtime.wait``, a console, a benchmark's probe) issues its read moments after it last
saw the run running; once the stream is gone, such a read would block for its whole
timeout instead of returning the run's last event. The delay also lets one script call
per partition swap every run that ended meanwhile.

The process that ended a run has its log and hooks already (``._held``: gathered from the
run's claims and APPLYs, the hooks returned by the APPLY that ended it): it packs the blob
then and keeps that (a few hundred bytes) until the swap, so nothing is read back. A run it
does not hold (a log too long to hold, a write whose outcome was unknown, a run ended by a
cancel) is read when due, one round trip per :data:`_READ_CHUNK` runs, and so is a held run
whose swap was refused (its log grew after its end). Counted with the bench lifecycle, the
read cost 2.2 Redis commands per run (XRANGE and HGETALL) against 0.2 for the swaps.
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

# The blobs of held runs (._held) kept until their swap, at most (a bench run's: ~0.25 KB;
# ~6 s of ends at 3,000 runs/s: ~5 MB); past it, an ended run is read when due.
_PACKED_BYTES = 32 * 1024 * 1024
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
    # the swap ARGV of due runs whose log this process held when they ended (._held), and
    # the bytes of their blobs
    _packed: dict[str, list[Any]] | None = None
    _packed_bytes = 0
    _compactor: asyncio.Task[None] | None = None

    def _compact_later(
        self, run_id: str, held: tuple[Sequence[Any], Mapping[bytes, bytes]] | None = None
    ) -> None:
        """Compact run ``run_id``, just ended, after :attr:`compact_delay`; from ``held``
        (its log and hooks as this process holds them) or else from a read of them then.
        The blob is made now: a few hundred bytes kept until then, not the log."""
        loop = asyncio.get_running_loop()
        if self._due is None:
            self._due = deque()
        if held is not None and held[0]:
            self._keep_packed(run_id, held)
        self._due.append((loop.time() + self.compact_delay, run_id))
        if self._compactor is None or self._compactor.done():
            # In a context of its own: the task must not hold (nor be adopted by, see
            # runtime/engine/tasks.py) the execution whose end made it start.
            self._compactor = contextvars.Context().run(loop.create_task, self._compact_when_due())

    def _keep_packed(self, run_id: str, held: tuple[Sequence[Any], Mapping[bytes, bytes]]) -> None:
        """Pack the archive of a run that ended here, from what it held, for its swap when
        due; past :data:`_PACKED_BYTES` of blobs kept, or if it cannot be packed, the run is
        read when due instead. Nothing raised here reaches the write that ended the run."""
        try:
            args = swap_args(*held)
        except Exception:
            log.warning("run %s: its archive was not made from its log; read later", run_id,
                        exc_info=True)  # fmt: skip
            return
        if self._packed_bytes + len(args[3]) > _PACKED_BYTES:
            return
        if self._packed is None:
            self._packed = {}
        self._packed[run_id] = args
        self._packed_bytes += len(args[3])

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

    async def _swap(self, batch: Sequence[_Swap]) -> list[bool]:
        """One script call per partition; returns whether each run was swapped."""
        by_partition: dict[int, tuple[list[str], list[Any], list[int]]] = defaultdict(
            lambda: ([], [], [])
        )
        for i, (keys, args) in enumerate(batch):
            names, argv, places = by_partition[keys.partition]
            names += [keys.run, keys.events, keys.hooks, keys.ckpt, archive_key(keys)]
            argv += args
            places.append(i)
        replies = await asyncio.gather(
            *(self.scripts.compact(keys=k, args=a) for k, a, _ in by_partition.values())
        )
        swapped = [False] * len(batch)
        for (_, _, places), flags in zip(by_partition.values(), replies, strict=True):
            for i, flag in zip(places, flags, strict=True):
                swapped[i] = bool(flag)
        return swapped

    async def flush_compactions(self) -> int:
        """Compact now every run this process holds for later; returns how many were."""
        if self._compactor is not None:
            self._compactor.cancel()
            self._compactor = None
        run_ids = [run_id for _, run_id in self._due or ()]
        if self._due is not None:
            self._due.clear()
        # and the held ones the cancelled compactor had taken from `_due` but not swapped
        due = set(run_ids)
        run_ids += [run_id for run_id in self._packed or () if run_id not in due]
        return await self._compact_best_effort(run_ids) if run_ids else 0

    def _held_swaps(self, run_ids: Sequence[str]) -> tuple[list[_Swap], list[str]]:
        """The runs whose swap was made when they ended (``_packed``), and the others."""
        packed = self._packed or {}
        held: list[_Swap] = []
        unheld: list[str] = []
        for run_id in run_ids:
            args = packed.pop(run_id, None)
            if args is None:
                unheld.append(run_id)
            else:
                self._packed_bytes -= len(args[3])
                held.append((self._run(run_id), args))
        return held, unheld

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
        """Swap these runs (at most :data:`_READ_CHUNK`) in one round trip: those whose
        log this process held as they were packed when they ended, the others read and
        packed first (one round trip more). A held run the swap refuses (its log grew
        after its end, say) is read and swapped again."""
        held, unheld = self._held_swaps(run_ids)
        batch = held + await self._read_and_pack(unheld)
        swapped = await self._swap(batch) if batch else []
        refused = [not done for done in swapped[: len(held)]]  # the held come first
        again = [keys.run_id for (keys, _), no in zip(held, refused, strict=True) if no]
        if again:
            retried = await self._read_and_pack(again)
            swapped += await self._swap(retried) if retried else []
        return sum(swapped)

    async def _read_and_pack(self, run_ids: Sequence[str]) -> list[_Swap]:
        """The swaps of these runs from their logs and hooks, read in one round trip."""
        if not run_ids:
            return []
        runs = [self._run(run_id) for run_id in run_ids]
        # not one atomic read: the swap's fence finds out if a run changed in between
        batch: list[_Swap] = []
        for keys, (entries, hooks) in zip(runs, await self._read_logs(runs), strict=True):
            if entries:  # none: compacted already, or never logged
                batch.append((keys, swap_args(entries, hooks)))
                if len(batch) % _PACKS_PER_TURN == 0:
                    # long logs take long to pack: executions and heartbeats go on
                    await asyncio.sleep(0)
        return batch

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
