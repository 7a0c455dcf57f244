"""The Redis store: Parley's runs in Redis Streams, hashes and sorted sets, every change
that touches more than one key one Lua script (``lua/``).

This package is the only code of Parley that imports ``redis``. :class:`RedisStore`
serves one Redis server, a Redis Cluster (``redis+cluster://``) and the embedded
``memory://`` store (fakeredis in this process) with the same code.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from ..._clock import now_ms
from ...errors import StoreUnavailable
from ...ids import new_run_id
from ...models import RunStatus
from ...settings import TASKS_GROUP
from ..base import (
    Answer,
    Applied,
    ApplyOutcome,
    Cancelled,
    CancelOutcome,
    Claim,
    ClaimStatus,
    DueReport,
    Finish,
    Resumed,
    ResumeOutcome,
    Retried,
    RetryOutcome,
    RunSnapshot,
    SendOutcome,
    Sent,
    Task,
)
from ..writes import HookSpec, Op, Writes
from . import _decode, _keys, _records, _scripts
from ._batch import Batcher, Script
from ._calls import store_call
from ._connect import connect, is_cluster_url
from ._inspect import InspectionStore
from ._sessions import SessionStore

__all__ = ["SCRIPT_NAMES", "RedisStore", "keys", "script_source"]

# The key names (for operators, benchmarks and tests that look at the raw data).
keys = _keys
SCRIPT_NAMES = _scripts.NAMES


def script_source(name: str) -> str:
    """The text of the Lua script ``name`` as it is sent to Redis."""
    return _scripts.source(name)


class Scripts:
    """The scripts of ``lua/``, called by EVALSHA through one auto-pipelining batcher."""

    def __init__(self, client: aioredis.Redis, *, pipelined: bool) -> None:
        batcher = Batcher(client, pipelined=pipelined)
        self.batcher = batcher
        for name in _scripts.NAMES:
            setattr(self, name, Script(batcher, _scripts.source(name)))

    claim: Script
    apply: Script
    retry: Script
    unpark: Script
    restart: Script
    send: Script
    resume: Script
    fire_due: Script
    cancel: Script
    heartbeat: Script
    start: Script
    wait_state: Script


class RedisStore(SessionStore, InspectionStore):
    """:class:`runtime.store.Store` on Redis. ``client`` and ``keys`` are public for
    operators and tests that look at the raw data."""

    keys = _keys

    def __init__(self, url: str, partitions: int) -> None:
        self.url = url
        self.partitions = partitions
        # On a cluster, commands on keys of different partitions cannot share a pipeline
        # round trip or a multi-stream read: they go per partition instead.
        self.is_cluster = is_cluster_url(url)
        self._client: aioredis.Redis | None = None
        self._scripts: Scripts | None = None

    def __repr__(self) -> str:
        return f"<RedisStore {self.url} partitions={self.partitions}>"

    @property
    def client(self) -> aioredis.Redis:
        if self._client is None:
            raise StoreUnavailable("the store is not open: use `async with Runtime(...)`")
        return self._client

    @property
    def scripts(self) -> Scripts:
        if self._scripts is None:
            raise StoreUnavailable("the store is not open: use `async with Runtime(...)`")
        return self._scripts

    # lifecycle ---------------------------------------------------------------------
    @store_call
    async def open(self) -> None:
        if self._client is not None:
            return
        self._client = connect(self.url)
        self._scripts = Scripts(self._client, pipelined=not self.is_cluster)
        await self._ensure_groups()

    async def _ensure_groups(self) -> None:
        """Each partition's task stream and consumer group (idempotent). Group id 0: tasks
        added before the group existed are still delivered."""
        for partition in range(self.partitions):
            try:
                await self.client.xgroup_create(
                    _keys.key("tasks", partition), TASKS_GROUP, id="0", mkstream=True
                )
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
            self._scripts = None

    @store_call
    async def ping(self) -> None:
        await self.client.ping()

    def run_keys(self, run_id: str) -> _keys.RunKeys:
        """The Redis keys of run ``run_id``."""
        return _keys.run_keys(run_id, self.partitions)

    _run = run_keys

    # runs --------------------------------------------------------------------------
    def new_run_id(self, session: str | None, idempotency_key: str | None = None) -> str:
        # An idempotency key names one run: its id is derived from the key (start is then
        # create-if-absent on that id, atomic in the START script).
        for n in itertools.count():
            if idempotency_key is None:
                run_id = new_run_id()
            else:
                seed = f"{idempotency_key}\x00{n}".encode()
                run_id = "r-" + hashlib.sha256(seed).hexdigest()[:24]
            # A session's runs live in the session's partition, so prompts reach its
            # outbox in the same single-slot script that records the hook.
            if session is None or self.fits_session(run_id, session):
                return run_id
        raise AssertionError("unreachable")

    def new_run_id_beside(self, run_id: str) -> str:
        partition = _keys.partition_of(run_id, self.partitions)
        while True:
            candidate = new_run_id()
            if _keys.partition_of(candidate, self.partitions) == partition:
                return candidate

    async def restart(
        self,
        old_run_id: str,
        run_id: str,
        workflow: str,
        session: str | None,
        events: Sequence[tuple[str, bytes]],
        tags: Mapping[str, str] | None = None,
    ) -> bool:
        keys = self._run(run_id)
        copied = orjson.dumps([[kind, data.decode()] for kind, data in events])
        args: list[Any] = [run_id, workflow, session or "", now_ms(), old_run_id, copied]
        if tags:
            args.append(orjson.dumps(tags, option=orjson.OPT_SORT_KEYS))
        created = await self.scripts.restart(keys=[*keys.all, self._run(old_run_id).run], args=args)
        return bool(created)

    def child_run_id(self, parent_run_id: str, position: int) -> str:
        partition = _keys.partition_of(parent_run_id, self.partitions)
        for n in itertools.count():
            seed = f"{parent_run_id}\x00child\x00{position}\x00{n}".encode()
            candidate = "r-" + hashlib.sha256(seed).hexdigest()[:24]
            if _keys.partition_of(candidate, self.partitions) == partition:
                return candidate
        raise AssertionError("unreachable")

    def fits_session(self, run_id: str, session: str) -> bool:
        return _keys.partition_of(run_id, self.partitions) == _keys.partition_of(
            session, self.partitions
        )

    async def start(
        self,
        run_id: str,
        workflow: str,
        session: str | None,
        input: bytes,
        tags: Mapping[str, str] | None = None,
    ) -> bool:
        keys = self._run(run_id)
        args: list[Any] = [run_id, workflow, session or "", now_ms(), input]
        if tags:  # only a tagged run pays for the index (lua/tags.lua)
            args.append(orjson.dumps(tags, option=orjson.OPT_SORT_KEYS))
        created = await self.scripts.start(keys=keys.all, args=args)
        return bool(created)

    @store_call
    async def announce_workflows(self, names: Sequence[str]) -> None:
        if names:
            await self.client.sadd(_keys.WORKFLOWS_KEY, *names)

    @store_call
    async def workflow_announced(self, name: str) -> bool:
        return bool(await self.client.sismember(_keys.WORKFLOWS_KEY, name))

    async def resume(self, answer: Answer, *, max_events: int) -> Resumed:
        keys = self._run(answer.run_id)
        reply = await self.scripts.resume(
            keys=keys.all,
            args=[
                answer.run_id,
                answer.hook_id,
                answer.token,
                answer.digest,
                "1" if answer.validated else "0",
                max_events,
                keys.prefix,
                answer.event,
                answer.announcement,
            ],
        )
        outcome = ResumeOutcome(reply[0].decode())
        if outcome is ResumeOutcome.NEEDS_VALIDATION:
            return Resumed(outcome, schema=_records.schema_of(reply[1]))
        if outcome is ResumeOutcome.FINISHED:
            return Resumed(outcome, run_status=reply[1].decode())
        return Resumed(outcome)

    async def cancel(
        self, run_id: str, *, event: bytes, message: bytes, retention_seconds: int
    ) -> Cancelled:
        keys = self._run(run_id)
        reply = await self.scripts.cancel(
            keys=keys.all,
            args=[run_id, now_ms(), retention_seconds, keys.prefix, event, message],
        )
        outcome = CancelOutcome(reply[0].decode())
        status = reply[1].decode() if outcome is CancelOutcome.FINISHED else None
        return Cancelled(outcome, status)

    async def send(self, run_id: str, topic: str, event: bytes) -> Sent:
        keys = self._run(run_id)
        inbox = _keys.key("inbox", keys.partition, run_id=run_id)
        reply = await self.scripts.send(keys=[*keys.all, inbox], args=[run_id, topic, event])
        outcome = SendOutcome(reply[0].decode())
        status = reply[1].decode() if outcome is SendOutcome.FINISHED else None
        return Sent(outcome, status)

    async def retry(self, run_id: str, *, event: bytes) -> Retried:
        reply = await self.scripts.retry(keys=self._run(run_id).all, args=[run_id, event])
        outcome = RetryOutcome(reply[0].decode())
        status = reply[1].decode() if outcome is RetryOutcome.NOT_BLOCKED else None
        return Retried(outcome, status)

    async def run_snapshot(self, run_id: str) -> RunSnapshot:
        status, out, last_id = await self.scripts.wait_state(keys=self._run(run_id).all, args=[])
        return RunSnapshot(
            RunStatus(status.decode()) if status else None, out, _decode.text(last_id)
        )

    @store_call
    async def wait_for_events(self, run_id: str, after: str, block_ms: int) -> None:
        await self.client.xread({self._run(run_id).events: after}, count=1, block=block_ms)

    # executions --------------------------------------------------------------------
    def task_sources(self) -> list[tuple[int, ...]]:
        if self.is_cluster:  # a multi-stream XREADGROUP cannot span slots
            return [(p,) for p in range(self.partitions)]
        return [tuple(range(self.partitions))]

    @store_call
    async def read_tasks(
        self, consumer: str, partitions: tuple[int, ...], count: int, block_ms: int | None
    ) -> list[Task]:
        streams: dict[Any, Any] = {_keys.key("tasks", p): ">" for p in partitions}
        reply = await self.client.xreadgroup(
            TASKS_GROUP, consumer, streams, count=count, block=block_ms
        )
        return self._tasks(reply)

    def _tasks(self, reply: Any) -> list[Task]:
        tasks = []
        for stream, messages in reply or []:
            partition = int(_decode.text(stream).split("{p:", 1)[1].split("}", 1)[0])
            for msg_id, fields in messages:
                if not fields:  # deleted while pending
                    continue
                tasks.append(
                    Task(
                        run_id=fields[b"r"].decode(),
                        workflow=fields.get(b"w", b"").decode(),
                        message_id=_decode.text(msg_id),
                        partition=partition,
                    )
                )
        return tasks

    @store_call
    async def reclaim(self, consumer: str, idle_ms: int) -> list[Task]:
        tasks: list[Task] = []
        for partition in range(self.partitions):
            stream = _keys.key("tasks", partition)
            start: Any = "0-0"
            while True:
                start, messages, *_ = await self.client.xautoclaim(
                    stream, TASKS_GROUP, consumer, idle_ms, start, count=100
                )
                tasks += self._tasks([(stream, messages)])
                if _decode.text(start) == "0-0":
                    break
        return tasks

    async def unpark(self, versions: Sequence[str]) -> int:
        sent = await asyncio.gather(
            *(
                self.scripts.unpark(
                    keys=[
                        _keys.key("parked", p, version=version),
                        _keys.key("tasks", p),
                        _keys.key("stats", p),
                    ],
                    args=[_keys.partition_prefix(p)],
                )
                for p in range(self.partitions)
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
        self, task: Task, consumer: str, lease_ms: int, version: str, serves: Sequence[str]
    ) -> Claim:
        keys = self._run(task.run_id)
        reply = await self.scripts.claim(
            keys=keys.all,
            args=[
                consumer,
                now_ms(),
                lease_ms,
                task.message_id,
                version,
                keys.prefix,
                task.run_id,
                *serves,
            ],
        )
        if reply[0] == b"skipped":
            return Claim(ClaimStatus.SKIPPED)
        if reply[0] == b"busy":
            return Claim(ClaimStatus.BUSY)
        if reply[0] == b"parked":
            return Claim(ClaimStatus.PARKED)
        fence, workflow, session, entries, checkpoints, parent = reply[1:7]
        return Claim(
            ClaimStatus.OK,
            fence=fence.decode(),
            workflow=workflow.decode(),
            session=session.decode() or None,
            events=_decode.events(entries),
            checkpoints=_decode.flat_hash(checkpoints),
            parent=parent.decode() or None,
        )

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
    ) -> Applied:
        keys = self._run(run_id)
        request: dict[str, Any] = {
            "fence": fence,
            "now": str(now_ms()),
            "max_events": max_events,
            "run_id": run_id,
            "prefix": keys.prefix,
            "after": after,
            "retention": retention_seconds,
            "writes": _ops(writes.ops),
        }
        if suspension is not None:
            request["suspension"] = _ops(suspension.ops)
        if finish is not None:
            request["finish"] = {"status": finish.status.value, "value": finish.value.decode()}
            if finish.notify is not None:
                request["finish"]["notify"] = finish.notify.decode()
        reply = await self.scripts.apply(keys=keys.all, args=[orjson.dumps(request)])
        kind = reply[0]
        if kind == b"lost":
            return Applied(ApplyOutcome.LOST)
        if kind == b"limit":
            return Applied(ApplyOutcome.LIMIT)
        return Applied(
            ApplyOutcome.REFUSED if kind == b"refused" else ApplyOutcome.OK,
            last_id=reply[1].decode() or None,
            arrived=_decode.events(reply[2]),
        )

    async def heartbeat(
        self, leases: Sequence[tuple[str, str]], until_ms: int, consumer: str
    ) -> list[bool]:
        replies = await asyncio.gather(
            *(
                self.scripts.heartbeat(keys=self._run(run_id).all, args=[fence, until_ms, consumer])
                for run_id, fence in leases
            )
        )
        return [bool(alive) for alive in replies]

    async def fire_due(self, now_ms: int, limit: int) -> DueReport:
        # One call per partition, concurrently: the batcher sends them in one pipelined
        # round trip on a single Redis (one call per slot on a cluster).
        replies = await asyncio.gather(
            *(
                self.scripts.fire_due(
                    keys=_keys.partition_keys(p), args=[now_ms, limit, _keys.partition_prefix(p)]
                )
                for p in range(self.partitions)
            )
        )
        dues = [int(float(nxt)) for _, nxt, _ in replies if nxt]
        return DueReport(
            lateness_ms=[int(late) for _, _, lateness in replies for late in lateness],
            next_due_ms=min(dues) if dues else None,
            saturated=any(int(popped) >= limit for popped, _, _ in replies),
        )


def _ops(ops: list[Op]) -> list[Op]:
    """The writes as the APPLY script reads them (see ``lua/apply.lua``): every op is in
    that form already but a hook's, whose record is encoded here."""
    return [op if op[0] != "hook" else _hook_op(op[1]) for op in ops]


def _hook_op(hook: HookSpec) -> list[str]:
    record = _records.encode_pending(hook.meta, validated=hook.validated)
    op = ["hook", hook.hook_id, record, hook.token]
    if hook.expires_at_ms is not None:
        op.append(str(hook.expires_at_ms))
    return op
