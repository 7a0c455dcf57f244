"""Compacting ended runs: the logs and hooks of the runs of a partition that ended together
become one segment (``._archive``), swapped in by ``lua/compact.lua``, fenced; readers take
a run's log and hooks from whichever form it has (:meth:`CompactionStore.read_log`).

A run is compacted :data:`COMPACT_DELAY_SECONDS` (up to :data:`COMPACT_BATCH_SECONDS`
more) after it ended, not at once: whoever follows a run by blocking on its event stream
(``Runtime.wait``, a console, a benchmark's probe) issues its read moments after it last
saw the run running; once the stream is gone, such a read would block for its whole
timeout instead of returning the run's last event. The delay also lets the runs of a
partition that ended meanwhile go together: their logs are read with one XREAD of all their
streams and their hooks with one script call (``lua/read_hooks.lua``), and they are
swapped in segments of up to ~64 KB of documents, one script call each: a few commands for
the k runs of a partition that ended together (0.15 a run in ``bench.hitl``'s burst of
2,000 over 16 partitions), and one zlib stream for all of a segment's runs (zlib's setup
costs as much as a bench run's whole document). The process that ended a run holds only
its id until then, and the blob is built then, off the path of the executions.
Three other reads were measured and dropped (bench/README.md): an ending script that
returned the log (Lua tables cost Redis more than a plain read), an archive built from the
log the ending worker held (more worker CPU than the read), and a script reading the logs
too (Lua converted every entry twice: +10 % of Redis' instructions per lifecycle); until
2026-12-01 the read was an XRANGE and an HGETALL per run, two commands a lifecycle.
A process that stops first compacts what it holds (:meth:`close`), and one that dies leaves
its runs as they were: bigger, but read the same way."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from redis.exceptions import RedisError

from ...errors import ParleyError
from ...models import FINISHED_STATUSES, Event
from . import _archive, _decode, _keys
from ._part import StorePart

log = logging.getLogger("parley.store")

# How long after its end a run is compacted (see above); a waiter that read the run
# running this long ago and has not blocked on its stream yet is the one left waiting.
COMPACT_DELAY_SECONDS = 5.0
# How long after the first is due a compaction waits for more (see _compact_when_due): the
# runs of a partition taken together share a segment, and a finished bench run keeps 688
# bytes of Redis alone in one, 401 with 5 others, 345 with 79 (python -m bench.segments).
# At 100 ends a second over 16 partitions, 10 s make segments of ~60 runs (1 s: ~6); the
# price is ~10 s more of the runs' uncompacted form (~1.3 KB more each), and, should this
# process die, that many more runs left uncompacted (read the same; `parley runs compact`).
COMPACT_BATCH_SECONDS = 10.0


def archive_key(keys: _keys.RunKeys) -> str:
    """The key of run ``keys``'s own archive, as compaction wrote it before segments."""
    return _keys.key("archive", keys.partition, run_id=keys.run_id)


def segment_key(partition: int, segment_id: str) -> str:
    return _keys.key("segment", partition, segment_id=segment_id)


_ENDED = {status.value.encode() for status in FINISHED_STATUSES}

# runs per unit: one partition's, read with one XREAD and one lua/read_hooks.lua call
_UNIT_RUNS = 100
# runs per round: its units are read at once (the XREADs in one round trip, the hooks
# scripts in one batch), their replies under one timeout and in the worker's memory
# together, then swapped at once. A run's log may be long (a chat of 1,000 rounds: a few
# hundred KB), so this bounds a round's replies, not its commands (the units do that).
_ROUND_RUNS = 100
# documents built per turn of the event loop
_PACKS_PER_TURN = 16


class RunRead(NamedTuple):
    """An ended run as the compactor read it."""

    run: _keys.RunKeys
    entries: Sequence[Any]  # its log, as XRANGE sends it: ``[id, [b"t", type, b"d", data]]``
    hooks: Mapping[bytes, bytes]  # its hooks hash


class Segment(NamedTuple):
    """One lua/compact.lua call: a segment and, per run it holds, the fence of its read
    (its log's last id and length, its hooks' count)."""

    segment_id: str
    blob: bytes
    runs: list[tuple[_keys.RunKeys, bytes, int, int]]


def pack_segment(reads: Sequence[RunRead], documents: Sequence[bytes] | None = None) -> Segment:
    """The segment of these runs of one partition (their documents, if built already)."""
    if documents is None:
        documents = [_archive.document(read.entries, read.hooks) for read in reads]
    return Segment(
        # random: a segment whose swap was refused may have left its blob nowhere, and
        # its runs go into another one
        secrets.token_hex(8),
        _archive.segment([read.run.run_id for read in reads], documents),
        [(read.run, read.entries[-1][0], len(read.entries), len(read.hooks)) for read in reads],
    )


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
        """:meth:`compact`, for runs whose compaction nobody waits for, round by round: the
        runs have ended whatever happens here, and one left uncompacted is read the same way
        (``parley runs compact`` finds it later). Nothing it raises may end the compactor:
        the runs that end after it would never be compacted."""
        compacted = 0
        for units in self._rounds(run_ids):
            try:
                compacted += await self._compact_round(units)
            except Exception as exc:
                log.warning(
                    "a round of %d ended runs was not compacted, or not all of it (%s): they"
                    " stay readable",
                    sum(map(len, units)),
                    exc,
                    exc_info=not isinstance(exc, ParleyError | RedisError | OSError),
                )
        return compacted

    def _rounds(self, run_ids: Sequence[str]) -> list[list[list[_keys.RunKeys]]]:
        """These runs' keys by partition, in units of at most :data:`_UNIT_RUNS`, the units
        in rounds of at most :data:`_ROUND_RUNS` runs. A unit's read and swap cost three
        commands whatever the number of its runs, so the runs of a partition go together."""
        by_partition: dict[int, list[_keys.RunKeys]] = defaultdict(list)
        for run_id in run_ids:
            keys = self._run(run_id)
            by_partition[keys.partition].append(keys)
        rounds: list[list[list[_keys.RunKeys]]] = []
        in_round = _ROUND_RUNS  # none open yet
        for runs in by_partition.values():
            for i in range(0, len(runs), _UNIT_RUNS):
                unit = runs[i : i + _UNIT_RUNS]
                if in_round + len(unit) > _ROUND_RUNS:
                    rounds.append([])  # a unit bigger than a round has one of its own
                    in_round = 0
                rounds[-1].append(unit)
                in_round += len(unit)
        return rounds

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
        and hooks first, :data:`_ROUND_RUNS` at a time; runs not ended, already
        compacted, or changed meanwhile are left as they are. Returns how many were
        compacted now."""
        if later:
            for run_id in run_ids:
                self._compact_later(run_id)
            return 0
        return sum([await self._compact_round(units) for units in self._rounds(run_ids)])

    async def _compact_round(self, units: Sequence[Sequence[_keys.RunKeys]]) -> int:
        """Read, pack and swap these units of runs: their reads sent at once, then one script
        call per segment, sent together."""
        # not one atomic read: the swap's fence finds out if a run changed in between
        segments: list[Segment] = []
        packed = 0
        for unit, logs in zip(units, await self._read_units(units), strict=True):
            reads = [
                RunRead(run, entries, hooks)
                for run, (entries, hooks) in zip(unit, logs, strict=True)
                if entries  # none: compacted already, or never logged
            ]
            documents = []
            for read in reads:
                documents.append(_archive.document(read.entries, read.hooks))
                packed += 1
                if packed % _PACKS_PER_TURN == 0:
                    # long logs take long to pack: executions and heartbeats go on
                    await asyncio.sleep(0)
            for span in _archive.group(documents):
                part = slice(span.start, span.stop)
                segments.append(pack_segment(reads[part], documents[part]))
        swapped = await asyncio.gather(*map(self._swap, segments), return_exceptions=True)
        for outcome in swapped:
            if isinstance(outcome, BaseException):
                # every swap has settled: the segments swapped stay so (and are read so)
                raise outcome
        return sum(n for n in swapped if isinstance(n, int))

    async def _swap(self, segment: Segment) -> int:
        """One script call for a segment; returns how many of its runs it swapped in."""
        argv: list[Any] = [segment.segment_id, segment.blob]
        for run, last_id, length, hooks in segment.runs:
            argv += [run.run_id, last_id, length, hooks]
        key = segment_key(segment.runs[0][0].partition, segment.segment_id)
        return int(await self.scripts.compact(keys=[key], args=argv))

    async def _read_units(
        self, units: Sequence[Sequence[_keys.RunKeys]]
    ) -> list[list[tuple[Any, dict[Any, Any]]]]:
        """Per unit, each run's log as XRANGE sends it (``[id, [b"t", type, b"d", data]]``
        each) and its hooks hash as a dict. The logs and the hooks are read at once (the
        batcher sends the scripts together), and every read is awaited whatever happens to
        the others."""
        replies = await asyncio.gather(
            self._read_streams(units),
            *(self.scripts.read_hooks(keys=[run.hooks for run in unit], args=[]) for unit in units),
            return_exceptions=True,
        )
        for reply in replies:
            if isinstance(reply, BaseException):
                raise reply
        logs, *hooks = replies
        return [
            [(log, _decode.as_dict(h)) for log, h in zip(unit_logs, unit_hooks, strict=True)]
            for unit_logs, unit_hooks in zip(logs, hooks, strict=True)
        ]

    async def _read_streams(self, units: Sequence[Sequence[_keys.RunKeys]]) -> list[list[Any]]:
        if not self.is_cluster:
            # One XREAD per unit, of every stream from its start: one command however many
            # runs. A stream with no entries is left out of its reply; RESP3 sends a map,
            # RESP2 pairs (or nil for none).
            units_streams = [[run.events for run in unit] for unit in units]
            replies = await self.scripts.batcher.commands(
                [("XREAD", "STREAMS", *streams, *["0"] * len(streams)) for streams in units_streams]
            )
            logs = []
            for streams, reply in zip(units_streams, replies, strict=True):
                if isinstance(reply, Exception):
                    raise reply
                by_stream = dict(reply.items() if isinstance(reply, dict) else reply or ())
                logs.append([by_stream.get(stream.encode(), []) for stream in streams])
            return logs
        # Redis Cluster: an XRANGE per run, pipelined (redis-py sends each node its part);
        # its stream entries are made into Redis' form again
        async with self.client.pipeline(transaction=False) as pipe:
            for unit in units:
                for run in unit:
                    pipe.xrange(run.events)
            parsed = iter(await pipe.execute())
        return [
            [[(i, [b"t", f[b"t"], b"d", f[b"d"]]) for i, f in next(parsed)] for _ in unit]
            for unit in units
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
            # Last. Race closed: the run compacted between two of these reads (a pipeline is
            # not atomic), its stream and hooks read gone and its segment read not named
            # yet: an ended run read with no log and no hooks. Named here, its segment holds
            # all of it; not named, the stream and hooks were read before the swap.
            pipe.hget(keys.run, "archive")
            replies = await pipe.execute()
        exists, legacy, segment_id = bool(replies[0]), replies[-2], replies[-1]
        archived = await self.unarchive(keys, segment_id, legacy)
        if archived is not None:
            events, hooks = archived
            return exists, events if with_events else [], hooks
        events = _decode.events(replies[1]) if with_events else []
        return exists, events, replies[-3]

    async def unarchive(
        self, keys: _keys.RunKeys, segment_id: bytes | None, legacy: bytes | None
    ) -> tuple[list[Event], dict[bytes, bytes]] | None:
        """A run's log and hooks from the segment its hash names (``segment_id``, its field
        ``archive``) or from its own archive (``legacy``, format 1); None if it has neither
        (not compacted)."""
        if segment_id is None:
            return None if legacy is None else _archive.unpack(legacy, keys.run_id)
        key = segment_key(keys.partition, segment_id.decode())
        blob: Any = await self.client.get(key)  # bytes: the store's client does not decode
        archived = None if blob is None else _archive.unpack(blob, keys.run_id)
        if archived is None:
            # A segment expires with the last of its runs (lua/compact.lua): a run read in
            # its very last moment, or a key deleted or evicted by hand, leaves this. The run
            # reads as having no log.
            log.warning("run %s names its archive %s, which does not hold it", keys.run_id, key)
        return archived
