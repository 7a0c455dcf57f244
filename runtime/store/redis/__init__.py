"""The Redis store: Parley's runs in Redis Streams, hashes and sorted sets, every change
that touches more than one key one Lua script (``lua/``).

This package is the only code of Parley that imports ``redis``. :class:`RedisStore`
serves one Redis server, a Redis Cluster (``redis+cluster://``) and the embedded
``memory://`` store (fakeredis in this process) with the same code.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from ...errors import ParleyError, StoreUnavailable, UsageError
from ...ids import new_run_id
from ...models import HookStatus, RunStatus
from ...settings import TASKS_GROUP
from ..records import (
    Answer,
    Cancelled,
    CancelOutcome,
    Resumed,
    ResumeOutcome,
    Retried,
    RetryOutcome,
    RunSnapshot,
    SendOutcome,
    Sent,
)
from . import _decode, _keys, _records, _scripts
from ._advice import AdviceStore
from ._batch import Batcher, Script
from ._calls import store_call
from ._compaction import archive_key
from ._connect import connect, durability_of, is_cluster_url
from ._durability import ReplicatedBatcher
from ._executions import ExecutionStore
from ._inspect import InspectionStore
from ._sessions import SessionStore
from ._time import RedisTime

__all__ = ["SCRIPT_NAMES", "RedisStore", "keys", "script_source"]

# The key names (for operators, benchmarks and tests that look at the raw data).
keys = _keys
SCRIPT_NAMES = _scripts.NAMES


def script_source(name: str) -> str:
    """The text of the Lua script ``name`` as it is sent to Redis."""
    return _scripts.source(name)


class Scripts:
    """The scripts of ``lua/``, called by EVALSHA through one auto-pipelining batcher."""

    def __init__(self, batcher: Batcher) -> None:
        self.batcher = batcher
        for name in _scripts.NAMES:
            setattr(self, name, Script(batcher, _scripts.source(name)))

    claim: Script
    release: Script
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
    post: Script
    compact: Script
    read_hooks: Script
    reclaim: Script
    give_back: Script
    sweep: Script


class RedisStore(ExecutionStore, SessionStore, InspectionStore, AdviceStore):
    """:class:`runtime.store.Store` on Redis. ``client`` and ``keys`` are public for
    operators and tests that look at the raw data."""

    keys = _keys

    def __init__(self, url: str, partitions: int) -> None:
        self.url = url
        self.partitions = partitions
        # On a cluster, commands on keys of different partitions cannot share a pipeline
        # round trip or a multi-stream read: they go per partition instead.
        self.is_cluster = is_cluster_url(url)
        # ``?wait=N``: writes acknowledged once N replicas have them (``_durability``).
        self.durability = durability_of(url)
        self._client: aioredis.Redis | None = None
        self._scripts: Scripts | None = None
        self._time = RedisTime(self._read_time)
        self.fresh_ms = self._time.fresh_ms

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
        if self.durability is not None:
            self._scripts = Scripts(ReplicatedBatcher(self._client, self.durability))
        else:
            self._scripts = Scripts(Batcher(self._client, pipelined=not self.is_cluster))
        await self._ensure_groups()
        # Read Redis' clock now, so that the first calls do not wait for it.
        await self._time.now_ms()

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
            # the runs that ended here and wait for their compaction: now or never
            with contextlib.suppress(ParleyError, RedisError, OSError):
                await self.flush_compactions()
            await self._client.aclose()
            self._client = None
            self._scripts = None

    @store_call
    async def ping(self) -> None:
        await self.client.ping()

    async def now_ms(self) -> int:
        # the carried-forward reading without a coroutine more
        now = self._time.fresh_ms()
        return now if now is not None else await self._synced_now_ms()

    @store_call
    async def _synced_now_ms(self) -> int:
        return await self._time.now_ms()

    async def _read_time(self) -> tuple[int, int]:
        reply: Any = await self.client.time()
        if isinstance(reply, dict):  # a cluster answers per node; NTP keeps them together
            reply = next(iter(reply.values()))
        return int(reply[0]), int(reply[1])

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
        args: list[Any] = [run_id, workflow, session or "", await self.now_ms(), old_run_id, copied]
        if tags:
            args.append(orjson.dumps(tags, option=orjson.OPT_SORT_KEYS))
        created = await self.scripts.restart(
            keys=[*keys.declared, self._run(old_run_id).run], args=args
        )
        return bool(created)

    def child_run_id(self, parent_run_id: str, origin: str, position: int | str) -> str:
        return self._derived_id(parent_run_id, origin, f"child\x00{position}")

    def continued_run_id(self, run_id: str, origin: str) -> str:
        return self._derived_id(run_id, origin, "continued")

    def _derived_id(self, run_id: str, origin: str, what: str) -> str:
        """A run id derived from ``run_id`` and its ``origin`` (the same every time: a
        retried write creates the run once), in its partition. Race closed: a run id used
        again after its run expired derived the ids of the earlier run's children and
        successor, which may still live (a successor is a new run, kept for the
        retention after its own end): creating them failed, and the run ended continued
        into the earlier conversation, or waited on a stranger's child."""
        partition = _keys.partition_of(run_id, self.partitions)
        for n in itertools.count():
            seed = f"{run_id}\x00{origin}\x00{what}\x00{n}".encode()
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
        *,
        message: bytes | None = None,
        retention_seconds: int = 0,
    ) -> bool:
        keys = self._run(run_id)
        args: list[Any] = [run_id, workflow, session or "", await self.now_ms(), input]
        # only a tagged run pays for the index (lua/tags.lua)
        args.append(orjson.dumps(tags, option=orjson.OPT_SORT_KEYS) if tags else "")
        if message is not None:
            if session is None or not self.fits_session(run_id, session):
                raise UsageError(
                    "a start's message goes to the session of its run, which must fit it"
                    f" (fits_session); got session {session!r}",
                    run_id=run_id,
                )
            if retention_seconds < 1:  # (EXPIRE 0 would delete the outbox at once)
                raise UsageError(
                    f"a start's message needs the session's retention, got {retention_seconds}",
                    run_id=run_id,
                )
            args += [message, retention_seconds]
        created = await self.scripts.start(keys=keys.declared, args=args)
        return bool(created)

    @store_call
    async def announce_workflows(self, names: Sequence[str]) -> None:
        if names:
            await self.client.sadd(_keys.WORKFLOWS_KEY, *names)

    @store_call
    async def workflow_announced(self, name: str) -> bool:
        return bool(await self.client.sismember(_keys.WORKFLOWS_KEY, name))

    async def resume(self, answer: Answer, *, max_events: int, retention_seconds: int) -> Resumed:
        keys = self._run(answer.run_id)
        reply = await self.scripts.resume(
            keys=keys.declared,
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
                retention_seconds,
            ],
        )
        if reply[0] == b"archived":
            return await self._resume_archived(answer, reply[1].decode(), reply[2] or None)
        outcome = ResumeOutcome(reply[0].decode())
        if outcome is ResumeOutcome.NEEDS_VALIDATION:
            return Resumed(outcome, schema=_records.schema_of(reply[1]))
        if outcome is ResumeOutcome.FINISHED:
            return Resumed(outcome, run_status=reply[1].decode())
        return Resumed(outcome)

    async def _resume_archived(
        self, answer: Answer, status: str, segment_id: bytes | None
    ) -> Resumed:
        """An answer to a hook of an ended, compacted run (in segment ``segment_id``, or in
        its own archive if None): the outcome lua/resume.lua gives for the same hook in the
        hash, from the archive. (An ended run changes no more, so reading it after the
        script is reading it at the script's instant.)"""
        keys = self._run(answer.run_id)
        legacy: Any = None if segment_id else await self.client.get(archive_key(keys))
        archived = await self.unarchive(keys, segment_id, legacy)
        hooks = archived[1] if archived is not None else {}
        record = hooks.get(answer.hook_id.encode())
        if record is None:
            return Resumed(ResumeOutcome.NO_HOOK)
        state = record[:1].decode()
        letters = _records.STATE_LETTERS
        if state == letters[HookStatus.RECEIVED]:
            digest = hooks.get((answer.hook_id + _records.DIGEST_SUFFIX).encode())
            same = digest is not None and digest.decode() == answer.digest
            return Resumed(ResumeOutcome.DUPLICATE if same else ResumeOutcome.CONFLICT)
        if state == letters[HookStatus.EXPIRED]:
            return Resumed(ResumeOutcome.EXPIRED)
        if state == letters[HookStatus.CLOSED]:
            return Resumed(ResumeOutcome.CLOSED)
        if status != RunStatus.CANCELLED.value or state != letters[HookStatus.CANCELLED]:
            return Resumed(ResumeOutcome.FINISHED, run_status=status)
        return Resumed(ResumeOutcome.CANCELLED)

    async def cancel(
        self, run_id: str, *, event: bytes, message: bytes, retention_seconds: int
    ) -> Cancelled:
        keys = self._run(run_id)
        reply = await self.scripts.cancel(
            keys=keys.declared,
            args=[run_id, await self.now_ms(), retention_seconds, keys.prefix, event, message],
        )
        outcome = CancelOutcome(reply[0].decode())
        status = reply[1].decode() if outcome is CancelOutcome.FINISHED else None
        if outcome is CancelOutcome.CANCELLED:
            await self.compact([_decode.text(ended) for ended in reply[1]], later=True)
        return Cancelled(outcome, status)

    async def send(self, run_id: str, topic: str, event: bytes) -> Sent:
        keys = self._run(run_id)
        inbox = _keys.key("inbox", keys.partition, run_id=run_id)
        reply = await self.scripts.send(keys=[*keys.declared, inbox], args=[run_id, topic, event])
        outcome = SendOutcome(reply[0].decode())
        status = reply[1].decode() if outcome is SendOutcome.FINISHED else None
        return Sent(outcome, status)

    async def retry(self, run_id: str, *, event: bytes) -> Retried:
        reply = await self.scripts.retry(keys=self._run(run_id).declared, args=[run_id, event])
        outcome = RetryOutcome(reply[0].decode())
        status = reply[1].decode() if outcome is RetryOutcome.NOT_BLOCKED else None
        return Retried(outcome, status)

    async def run_snapshot(self, run_id: str) -> RunSnapshot:
        status, out, last_id = await self.scripts.wait_state(
            keys=self._run(run_id).declared, args=[]
        )
        return RunSnapshot(
            RunStatus(status.decode()) if status else None, out, _decode.text(last_id)
        )

    @store_call
    async def wait_for_events(self, run_id: str, after: str, block_ms: int) -> None:
        await self.client.xread({self._run(run_id).events: after}, count=1, block=block_ms)
