"""The worker's side of the Redis store: task queues (read, reclaim, hand back), the
lease of an execution (claim, heartbeat), its fenced writes (apply) and the deadlines."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import orjson
from redis.exceptions import ResponseError

from ...errors import StoreReset
from ...models import FINISHED_STATUSES
from ...settings import TASKS_GROUP
from ..records import (
    Applied,
    ApplyOutcome,
    Claim,
    ClaimStatus,
    DueReport,
    Finish,
    KnownLog,
    Notice,
    Task,
)
from ..writes import HookSpec, Op, Writes
from . import _decode, _keys, _records
from ._batch import Packed
from ._calls import store_call
from ._compaction import CompactionStore

log = logging.getLogger("parley.store")

# Tasks a stopping worker gives back per stream and script call (a worker holds at most
# its backlog and executions' worth: one call, most often).
GIVE_BACK_PAGE = 500
# Consumers one sweep deletes per stream and script call, and the calls of one sweep per
# group of streams: what a backlog of dead consumers (from before the sweep) costs Redis
# at once is bounded; the next sweep takes the rest.
SWEEP_PAGE = 100
SWEEP_CALLS = 10


class ExecutionStore(CompactionStore):
    """The executions part of :class:`~runtime.store.redis.RedisStore`."""

    async def _repair_groups(self, exc: ResponseError) -> StoreReset:
        """A task stream without its consumer group: Redis lost its state. Re-create the
        groups (tasks added since are delivered: group id 0) and tell the caller."""
        # Redis says NOGROUP; the embedded store (fakeredis) that the stream is missing
        if "NOGROUP" not in str(exc) and "requires the key to exist" not in str(exc):
            raise exc
        log.warning("the task groups are gone (Redis restarted empty?): recreated")
        await self._ensure_groups()
        return StoreReset(f"the store lost its state and the task groups were recreated: {exc}")

    def task_sources(self) -> list[tuple[int, ...]]:
        if self.is_cluster:  # a multi-stream XREADGROUP cannot span slots
            return [(p,) for p in range(self.partitions)]
        return [tuple(range(self.partitions))]

    @store_call
    async def read_tasks(
        self, consumer: str, partitions: tuple[int, ...], count: int, block_ms: int | None
    ) -> list[Task]:
        streams = _task_streams(partitions)
        if self.is_cluster:
            # one node per call (task_sources gives one partition), through redis-py's
            # cluster client; its parsed entries are made into Redis' form again
            try:
                parsed: Any = await self.client.xreadgroup(
                    TASKS_GROUP, consumer, dict.fromkeys(streams, ">"), count=count, block=block_ms
                )
            except ResponseError as exc:
                raise await self._repair_groups(exc) from exc
            return self._tasks(
                (stream, [(i, _flat(f)) for i, f in messages]) for stream, messages in parsed or ()
            )
        # As Redis sent it, in the batcher's round trip (not through redis-py's command
        # path and its reply callbacks, which make each entry a dict: ~3 % of a busy
        # worker's instructions). RESP3 sends a map, RESP2 pairs, nil when nothing came.
        block = () if block_ms is None else ("BLOCK", block_ms)
        (reply,) = await self.scripts.batcher.commands(
            [
                (
                    "XREADGROUP", "GROUP", TASKS_GROUP, consumer, "COUNT", count, *block,
                    "STREAMS", *streams, *[">"] * len(streams),
                )
            ]
        )  # fmt: skip
        if isinstance(reply, ResponseError):
            raise await self._repair_groups(reply) from reply
        if isinstance(reply, Exception):
            raise reply
        return self._tasks(reply.items() if isinstance(reply, dict) else reply or ())

    def _tasks(self, streams: Iterable[tuple[Any, Iterable[tuple[Any, Any]]]]) -> list[Task]:
        """The tasks of task stream entries in Redis' own form: (stream, [(id, [field,
        value, ...]), ...]) pairs, an entry deleted while pending with no fields."""
        tasks = []
        for stream, messages in streams:
            partition = _keys.partition_of_key(_decode.text(stream))
            for msg_id, flat in messages:
                if not flat:  # deleted while pending
                    continue
                if len(flat) == 4 and flat[0] == b"r" and flat[2] == b"w":
                    run_id, workflow = flat[1], flat[3]  # as lib.lua's enqueue writes it
                else:
                    fields = _decode.as_dict(flat)
                    run_id, workflow = fields[b"r"], fields.get(b"w", b"")
                tasks.append(Task(run_id.decode(), workflow.decode(), msg_id.decode(), partition))
        return tasks

    @store_call
    async def reclaim(self, consumer: str, idle_ms: int) -> list[Task]:
        # One script per group of partitions (all of a single Redis): an idle worker's check
        # is one command whatever the number of partitions; streams with more to take over
        # than a page are asked again from where their page ended.
        tasks: list[Task] = []
        for group in self.task_sources():
            starts = {_keys.key("tasks", p): "0-0" for p in group}
            while starts:
                try:
                    replies = await self.scripts.reclaim(
                        keys=list(starts), args=[consumer, idle_ms, 100, *starts.values()]
                    )
                except ResponseError as exc:
                    raise await self._repair_groups(exc) from exc
                for stream, (start, messages) in zip(list(starts), replies, strict=True):
                    tasks += self._tasks([(stream, messages)])
                    if _decode.text(start) == "0-0":
                        del starts[stream]
                    else:
                        starts[stream] = _decode.text(start)
        return tasks

    @store_call
    async def give_back(self, consumer: str) -> int:
        given = 0
        for group in self.task_sources():
            streams = [_keys.key("tasks", p) for p in group]
            more = 1
            while more:
                try:
                    count, more = await self.scripts.give_back(
                        keys=streams, args=[consumer, GIVE_BACK_PAGE]
                    )
                except ResponseError as exc:
                    raise await self._repair_groups(exc) from exc
                given += int(count)
        return given

    @store_call
    async def sweep_consumers(self, consumer: str, idle_ms: int) -> int:
        async def sweep(streams: list[str]) -> int:
            swept = 0
            for _ in range(SWEEP_CALLS):
                try:
                    count, more = await self.scripts.sweep(
                        keys=streams, args=[consumer, idle_ms, SWEEP_PAGE]
                    )
                except ResponseError as exc:
                    raise await self._repair_groups(exc) from exc
                swept += int(count)
                if not more:
                    break
            return swept

        groups = self.task_sources()
        swept = await asyncio.gather(*(sweep([_keys.key("tasks", p) for p in g]) for g in groups))
        return sum(swept)

    async def unpark(self, versions: Sequence[str]) -> int:
        sent = await asyncio.gather(
            *(
                self.scripts.unpark(
                    keys=[
                        key
                        for p in group
                        for key in (
                            _keys.key("parked", p, version=version),
                            _keys.key("tasks", p),
                            _keys.key("stats", p),
                        )
                    ],
                    args=[_keys.partition_prefix(p) for p in group],
                )
                for group in self.task_sources()
                for version in versions
            )
        )
        return sum(int(n) for n in sent)

    @store_call
    async def hand_back(self, task: Task) -> None:
        stream = _keys.key("tasks", task.partition)
        # One key (the partition's task stream): atomic, and single-slot on a cluster.
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.xadd(stream, {"r": task.run_id, "w": task.workflow})
            pipe.xack(stream, TASKS_GROUP, task.message_id)
            pipe.xdel(stream, task.message_id)
            await pipe.execute()

    async def claim(
        self,
        task: Task,
        consumer: str,
        lease_ms: int,
        version: str,
        serves: Sequence[str],
        known: KnownLog | None = None,
    ) -> Claim:
        keys = self._run(task.run_id)
        now = self.fresh_ms() or await self.now_ms()
        read_at = time.monotonic()
        reply = await self.scripts.claim(
            keys=keys.declared,
            args=[
                now,
                task.message_id,
                *(
                    ("", 0, "")
                    if known is None
                    else (known.last_id, known.event_count, known.generation)
                ),
                _claim_constants(consumer, lease_ms, version, tuple(serves)),
            ],
        )
        if reply[0] == b"skipped":
            return Claim(ClaimStatus.SKIPPED)
        if reply[0] == b"busy":
            return Claim(ClaimStatus.BUSY)
        if reply[0] == b"parked":
            return Claim(ClaimStatus.PARKED)
        fence, workflow, session, entries, checkpoints, parent, mode, count, gen, first = reply[
            1:11
        ]
        events, size = _decode.script_events(entries)
        return Claim(
            ClaimStatus.OK,
            fence=fence.decode(),
            workflow=workflow.decode(),
            session=session.decode() or None,
            events=events,
            data_bytes=size,
            checkpoints=_decode.flat_hash(checkpoints),
            parent=parent.decode() or None,
            now_ms=now,
            now_mono=read_at,
            tail=mode == b"tail",
            event_count=int(count),
            generation=gen.decode(),
            first=first == b"1",
        )

    async def release(self, run_id: str, fence: str, *, first: bool) -> bool:
        keys = self._run(run_id)
        reply = await self.scripts.release(keys=keys.declared, args=[fence, "1" if first else "0"])
        return bool(reply)

    async def apply(
        self,
        run_id: str,
        fence: str,
        after: str,
        writes: Writes,
        *,
        suspension: Writes | None = None,
        finish: Finish | None = None,
        max_events: int,
        retention_seconds: int,
        known_count: int | None = None,
    ) -> Applied:
        keys = self._run(run_id)
        # Numbers the script only passes on to Redis go as strings: a Lua number given to
        # redis.call is formatted with snprintf("%.17g") on every call.
        request: dict[str, Any] = {
            "fence": fence,
            "now": str(self.fresh_ms() or await self.now_ms()),
            "max_events": max_events,
            "after": after,
            "retention": str(retention_seconds),
            "writes": _ops(writes.ops),
        }
        if known_count is not None:
            request["known"] = str(known_count)
        if suspension is not None:
            request["suspension"] = _ops(suspension.ops)
        if finish is not None:
            # (the status itself: a str enum, JSON as its value without the enum's property)
            request["finish"] = {"status": finish.status, "value": finish.value.decode()}
            if finish.notify is not None:
                request["finish"]["notify"] = finish.notify.decode()
        reply = await self.scripts.apply(keys=keys.declared, args=[orjson.dumps(request)])
        kind = reply[0]
        if kind == b"lost":
            return Applied(ApplyOutcome.LOST)
        if kind == b"limit":
            return Applied(ApplyOutcome.LIMIT)
        if kind == b"stale":
            return Applied(ApplyOutcome.STALE)
        if finish is not None and finish.status in FINISHED_STATUSES:  # the run ended
            self._compact_later(run_id)
        # its children the script ended: with it, or because they lost a first()
        for child in reply[3]:
            self._compact_later(_decode.text(child))
        arrived, size = _decode.script_events(reply[2]) if reply[2] else ([], 0)
        return Applied(
            ApplyOutcome.REFUSED if kind == b"refused" else ApplyOutcome.OK,
            last_id=reply[1].decode() or None,
            arrived=arrived,
            arrived_bytes=size,
        )

    async def heartbeat(
        self, leases: Sequence[tuple[str, str]], lease_ms: int, consumer: str
    ) -> list[bool]:
        until_ms = await self.now_ms() + lease_ms
        replies = await asyncio.gather(
            *(
                self.scripts.heartbeat(
                    keys=self._run(run_id).declared, args=[fence, until_ms, consumer]
                )
                for run_id, fence in leases
            )
        )
        return [bool(alive) for alive in replies]

    async def fire_due(
        self, limit: int, *, now_ms: int | None = None, partitions: Collection[int] | None = None
    ) -> DueReport:
        # One call per group of partitions: every partition of a single Redis in one
        # script, one per partition on a cluster (a script's keys share a slot), those
        # concurrently (one pipelined round trip per node).
        groups = self.task_sources()
        if partitions is not None:
            wanted = set(partitions)
            groups = [g for g in (tuple(p for p in group if p in wanted) for group in groups) if g]
        if not groups:
            return DueReport([], None, False, await self.now_ms())
        replies = await asyncio.gather(
            *(
                self.scripts.fire_due(
                    keys=[key for p in group for key in _keys.partition_keys(p)],
                    args=[
                        "" if now_ms is None else now_ms,
                        limit,
                        *(_keys.partition_prefix(p) for p in group),
                    ],
                )
                for group in groups
            )
        )
        each = [
            (p, reply)
            for group, (_, per_group) in zip(groups, replies, strict=True)
            for p, reply in zip(group, per_group, strict=True)
        ]
        next_due = {p: int(float(nxt)) for p, (_, nxt, _, _) in each if nxt}
        return DueReport(
            lateness_ms=[int(late) for _, (_, _, lateness, _) in each for late in lateness],
            next_due_ms=min(next_due.values()) if next_due else None,
            saturated=any(int(popped) >= limit for _, (popped, _, _, _) in each),
            # Redis' clock at the pass (the first group's on a cluster: NTP keeps the
            # nodes together)
            now_ms=int(replies[0][0]),
            next_due=next_due,
            marks={p: _decode.text(mark) for p, (_, _, _, mark) in each},
        )

    @store_call
    async def deadline_notices(self, marks: Mapping[int, str], block_ms: int) -> dict[int, Notice]:
        streams: dict[Any, Any] = {_keys.key("deadline_wake", p): mark for p, mark in marks.items()}
        reply: Any = await self.client.xread(streams, block=block_ms)
        notices: dict[int, Notice] = {}
        for stream, entries in reply or []:
            if entries:  # one entry is kept: the latest notice (lua/lib.lua)
                msg_id, fields = entries[-1]
                notices[_keys.partition_of_key(_decode.text(stream))] = Notice(
                    _decode.text(msg_id), int(fields[b"due"])
                )
        return notices


@functools.lru_cache(maxsize=64)
def _task_streams(partitions: tuple[int, ...]) -> tuple[str, ...]:
    """The task streams of a group of partitions (a worker reads the same group each time)."""
    return tuple(_keys.key("tasks", p) for p in partitions)


def _flat(fields: Mapping[bytes, bytes] | None) -> list[bytes]:
    """A stream entry's fields as Redis sends them (redis-py's parsed dict made flat)."""
    return [item for pair in (fields or {}).items() for item in pair]


@functools.lru_cache(maxsize=64)
def _claim_constants(consumer: str, lease_ms: int, version: str, serves: tuple[str, ...]) -> Packed:
    """What a worker sends unchanged on every claim (lua/claim.lua's last arguments),
    encoded once per worker."""
    return Packed((consumer, lease_ms, version, *serves))


def _ops(ops: list[Op]) -> list[Op]:
    """The writes as the APPLY script reads them (see ``lua/apply.lua``): every op is in
    that form already but a hook's, whose record is encoded here (the list itself when it
    has none: most writes)."""
    for op in ops:
        if op[0] == "hook":
            return [op if op[0] != "hook" else _hook_op(op[1]) for op in ops]
    return ops


def _hook_op(hook: HookSpec) -> list[str]:
    record = _records.encode_pending(hook.meta, validated=hook.validated)
    op = ["hook", hook.hook_id, record, hook.token]
    if hook.expires_at_ms is not None:
        op.append(str(hook.expires_at_ms))
    return op
