"""The worker: a consumer-group member that executes runs, fires deadlines, reclaims the
tasks of dead workers and heartbeats its long executions.

A worker holds an asyncio task only for a run it is *executing*; a suspended run costs
Redis bytes and nothing here. Background loops: tasks, deadlines, reclaim, heartbeat —
four, whatever the number of runs.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import socket
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _redis
from ._backoff import Backoff
from ._batch import Script
from ._execution import Abort, Execution, Interrupted, now_ms
from ._keys import (
    GROUP,
    deadlines_key,
    partition_prefix,
    pending_hooks_key,
    run_keys,
    stats_key,
    tasks_key,
)
from ._replay import parse_stream_entries
from .errors import LeaseLost, WorkflowNotFound
from .metrics import Metrics
from .registry import get_workflow, import_apps, registered_workflows
from .runtime import Runtime

log = logging.getLogger("parley.worker")

_OUTAGE = (RedisConnectionError, RedisTimeoutError, OSError)


class Worker:
    def __init__(
        self,
        runtime: Runtime,
        app: str | ModuleType | Iterable[str | ModuleType] | None = None,
        *,
        concurrency: int = 64,
        name: str | None = None,
        block_seconds: float = 1.0,
        timer_tick: float = 0.05,
        visibility_timeout: float | None = None,
        workflows: Iterable[str] | None = None,
        hand_back_delay: float = 1.0,
    ) -> None:
        import_apps(app)
        # The workflows this worker executes (default: all registered in this process).
        # Tasks of others are handed back to the group — for routing workflows to worker
        # pools, and for rolling deploys where only some workers know a new workflow.
        self.workflows = None if workflows is None else frozenset(workflows)
        self.hand_back_delay = hand_back_delay
        self.handed_back = 0  # tasks given back because this worker does not run them
        self._draining = False
        self.runtime = runtime
        self.concurrency = concurrency
        self.consumer = name or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.block_ms = int(min(block_seconds, _redis.MAX_BLOCK_SECONDS) * 1000)
        self.timer_tick = timer_tick
        visibility = (
            visibility_timeout if visibility_timeout is not None else (runtime.lease_ms / 1000)
        )
        self.visibility_ms = int(visibility * 1000)
        self.metrics = Metrics()
        self._running: dict[str, Execution] = {}
        self._execution_tasks: dict[str, asyncio.Task[Any] | None] = {}
        self._deferred: dict[str, list[str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Tasks delivered beyond `concurrency` (XREADGROUP's COUNT is per stream): run as
        # slots free up, in order.
        self._backlog: collections.deque[tuple[str, str]] = collections.deque()
        self._stopping = asyncio.Event()
        self.ready = asyncio.Event()  # set once connected, announced and consuming
        self._streams: dict[Any, Any] = {tasks_key(p): ">" for p in range(runtime.partitions)}

    def __repr__(self) -> str:
        return f"<Worker {self.consumer} running={len(self._running)}>"

    @property
    def running(self) -> int:
        """Runs executing right now."""
        return len(self._running)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self, *, drain: bool = False) -> None:
        """Work until :meth:`stop`; with ``drain=True``, return as soon as no task is ready
        and no execution is in flight (deterministic tests)."""
        await self.runtime.connect()
        await self.runtime.announce_workflows(registered_workflows())
        if drain:
            await self._drain()
            return
        if self.runtime.is_cluster:
            # A multi-stream XREADGROUP cannot span slots: one reader per partition.
            readers = [
                asyncio.create_task(self._task_loop({stream: ">"}), name=f"parley-tasks-{p}")
                for p, stream in enumerate(self._streams)
            ]
        else:
            readers = [asyncio.create_task(self._task_loop(self._streams), name="parley-tasks")]
        loops = [
            *readers,
            asyncio.create_task(self._timer_loop(), name="parley-deadlines"),
            asyncio.create_task(self._reclaim_loop(), name="parley-reclaim"),
            asyncio.create_task(self._heartbeat_loop(), name="parley-heartbeat"),
        ]
        self.ready.set()
        try:
            await self._stopping.wait()
        finally:
            # redis-py can swallow a cancellation that lands mid-command; the loops also
            # check _stopping, and we cancel again until each one has really ended.
            pending: set[asyncio.Task[None]] = set(loops)
            while pending:
                for loop in pending:
                    loop.cancel()
                _, pending = await asyncio.wait(pending, timeout=0.5)
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

    async def drain(self) -> None:
        await self.run(drain=True)

    # loops -----------------------------------------------------------------------------
    async def _drain(self) -> None:
        self._draining = True
        groups: list[dict[Any, Any]] = (
            [{stream: ">"} for stream in self._streams]
            if self.runtime.is_cluster
            else [self._streams]
        )
        while True:
            await self.fire_due()
            for streams in groups:
                reply = await self.runtime.redis.xreadgroup(
                    GROUP, self.consumer, streams, count=self._per_stream(self.concurrency, streams)
                )
                self._dispatch(reply)
            if not self._tasks and not self._backlog:
                return
            while self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

    @staticmethod
    def _per_stream(free: int, streams: dict[Any, Any]) -> int:
        """XREADGROUP's COUNT applies to each stream: split the free slots among them, so
        one read cannot take far more than this worker runs (and starve the others)."""
        return max(1, -(-free // len(streams)))

    async def _task_loop(self, streams: dict[Any, Any]) -> None:
        backoff = Backoff("task loop")
        while not self._stopping.is_set():
            free = self.concurrency - len(self._tasks)
            if free <= 0 or self._backlog:
                if self._tasks:
                    await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
                else:
                    self._admit_backlog()
                continue
            try:
                reply = await self.runtime.redis.xreadgroup(
                    GROUP,
                    self.consumer,
                    streams,
                    count=self._per_stream(free, streams),
                    block=self.block_ms,
                )
            except _OUTAGE as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()
            self._dispatch(reply)

    async def _timer_loop(self) -> None:
        backoff = Backoff("deadline loop")
        while not self._stopping.is_set():
            try:
                next_due = await self.fire_due()
            except _OUTAGE as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()
            delay = self.timer_tick
            if next_due is not None:
                delay = min(delay, max(0.0, (next_due - now_ms()) / 1000))
            await asyncio.sleep(delay)

    async def fire_due(self, limit: int = 500) -> int | None:
        """Fire every due deadline (one pipelined round trip for all partitions); returns
        the earliest deadline still pending (ms), or None."""
        script = self.runtime.scripts.fire_due
        while True:
            now = now_ms()
            replies = await self._call_per_partition(
                [
                    (
                        script,
                        [deadlines_key(p), tasks_key(p), pending_hooks_key(p), stats_key(p)],
                        [now, limit, partition_prefix(p)],
                    )
                    for p in range(self.runtime.partitions)
                ]
            )
            saturated = any(int(popped) >= limit for popped, _, _ in replies)
            for _, _, lateness in replies:
                for late_ms in lateness:
                    self.observe_deadline_lateness(int(late_ms) / 1000)
            if not saturated:
                dues = [int(float(nxt)) for _, nxt, _ in replies if nxt]
                return min(dues) if dues else None

    async def _reclaim_loop(self) -> None:
        backoff = Backoff("reclaim loop")
        while not self._stopping.is_set():
            await asyncio.sleep(self.visibility_ms / 2000)
            try:
                await self.reclaim()
            except _OUTAGE as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()

    async def reclaim(self) -> int:
        """Take over tasks idle longer than the visibility timeout (their worker died)."""
        reclaimed = 0
        for stream in self._streams:
            start = "0-0"
            while True:
                reply = await self.runtime.redis.xautoclaim(
                    stream, GROUP, self.consumer, self.visibility_ms, start, count=100
                )
                start, messages = reply[0], reply[1]
                live = [(mid, fields) for mid, fields in messages if fields]
                if live:
                    log.warning("reclaimed %d task(s) from %s", len(live), stream)
                    self.metrics.reclaims.inc(len(live))
                    reclaimed += len(live)
                    self._dispatch([[stream.encode(), live]])
                if start in (b"0-0", "0-0"):
                    break
        return reclaimed

    async def _heartbeat_loop(self) -> None:
        backoff = Backoff("heartbeat loop")
        while not self._stopping.is_set():
            await asyncio.sleep(self.runtime.lease_ms / 3000)
            executions = list(self._running.values())
            if not executions:
                continue
            until = now_ms() + self.runtime.lease_ms
            script = self.runtime.scripts.heartbeat
            try:
                replies = await self._call_per_partition(
                    [
                        (script, [ex.keys.run, ex.keys.tasks], [ex.fence, until, self.consumer])
                        for ex in executions
                    ]
                )
            except _OUTAGE as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()
            for execution, alive in zip(executions, replies, strict=True):
                task = self._execution_tasks.get(execution.run_id)
                if (
                    not alive
                    and task is not None
                    and self._running.get(execution.run_id) is execution
                ):
                    # Cancelled or taken over: stop its side effects now, not at its next
                    # write (which the fence would refuse anyway).
                    log.warning(
                        "lease_lost: stopping the execution", extra={"run_id": execution.run_id}
                    )
                    self.metrics.lease_losses.inc()
                    task.cancel()

    async def _call_per_partition(
        self, calls: list[tuple[Script, list[str], list[Any]]]
    ) -> list[Any]:
        """Run scripts on different partitions concurrently: the batcher sends them in one
        pipelined round trip on a single Redis (one call per slot on a cluster)."""
        return list(await asyncio.gather(*(script(keys=k, args=a) for script, k, a in calls)))

    def observe_deadline_lateness(self, seconds: float) -> None:
        self.metrics.deadline_lateness.observe(seconds)

    # executing one run -----------------------------------------------------------------
    def _dispatch(self, reply: Any) -> None:
        for _stream, messages in reply or []:
            for msg_id, fields in messages:
                run_id = fields[b"r"].decode()
                workflow = fields.get(b"w", b"").decode()
                if not self._executes(workflow):
                    if not self._draining:  # (a drain would read it back at once)
                        self._spawn_hand_back(_stream, msg_id, run_id, workflow)
                    continue
                if run_id in self._running:
                    # Executing it already (e.g. an answer enqueued it just as its
                    # suspension committed): run it when this execution ends rather than
                    # leave it pending until the visibility timeout.
                    self._deferred.setdefault(run_id, []).append(msg_id.decode())
                    continue
                self._admit(run_id, msg_id.decode())

    def _admit(self, run_id: str, msg_id: str) -> None:
        if len(self._tasks) < self.concurrency:
            self._spawn(run_id, msg_id)
        else:
            self._backlog.append((run_id, msg_id))

    def _admit_backlog(self) -> None:
        while self._backlog and len(self._tasks) < self.concurrency:
            run_id, msg_id = self._backlog.popleft()
            if run_id in self._running:
                self._deferred.setdefault(run_id, []).append(msg_id)
            else:
                self._spawn(run_id, msg_id)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._admit_backlog()

    def _executes(self, workflow: str) -> bool:
        if not workflow:
            return True  # a task without the name: decided after the claim
        if self.workflows is not None and workflow not in self.workflows:
            return False
        try:
            get_workflow(workflow)
        except WorkflowNotFound:
            return False
        return True

    def _spawn_hand_back(self, stream: Any, msg_id: Any, run_id: str, workflow: str) -> None:
        task = asyncio.create_task(self._hand_back(stream, msg_id, run_id, workflow))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _hand_back(self, stream: Any, msg_id: Any, run_id: str, workflow: str) -> None:
        """Give a task this worker cannot run back to the group without touching the run
        (no lease taken): a new message for any worker, this one acknowledged. After a
        delay, so workers that all lack the workflow do not spin on it."""
        log.error(
            "workflow %r is not executed by this worker; handing the task back",
            workflow,
            extra={"run_id": run_id, "worker": self.consumer},
        )
        await asyncio.sleep(self.hand_back_delay)
        self.handed_back += 1
        # One key (the partition's task stream): atomic, and single-slot on a cluster.
        async with self.runtime.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(stream, {"r": run_id, "w": workflow})
            pipe.xack(stream, GROUP, msg_id)
            pipe.xdel(stream, msg_id)
            await pipe.execute()

    def _spawn(self, run_id: str, msg_id: str, delay: float = 0.0) -> None:
        task = asyncio.create_task(self._execute(run_id, msg_id, delay))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    async def _execute(self, run_id: str, msg_id: str, delay: float = 0.0) -> None:
        rt = self.runtime
        ctx = {"run_id": run_id, "worker": self.consumer}
        if delay:
            await asyncio.sleep(delay)
        keys = run_keys(run_id, rt.partitions)
        try:
            reply = await rt.scripts.claim(
                keys=[keys.run, keys.events, keys.ckpt, keys.tasks],
                args=[self.consumer, now_ms(), rt.lease_ms, msg_id],
            )
            if reply[0] != b"ok":
                return  # finished/suspended (stale task, acked) or busy (left pending)
            fence, wf_name, session, entries, flat_ckpt = reply[1:6]
            try:
                workflow = get_workflow(wf_name.decode())
            except WorkflowNotFound as exc:
                log.error("cannot execute: %s; task left for another worker", exc, extra=ctx)
                return
            execution = Execution(
                rt,
                keys,
                workflow,
                fence.decode(),
                session.decode() or None,
                parse_stream_entries(entries),
                {flat_ckpt[i].decode(): flat_ckpt[i + 1] for i in range(0, len(flat_ckpt), 2)},
            )
            self._running[run_id] = execution
            self._execution_tasks[run_id] = asyncio.current_task()
            try:
                await execution.run()
            finally:
                self._running.pop(run_id, None)
                self._execution_tasks.pop(run_id, None)
                for deferred in self._deferred.pop(run_id, []):
                    self._admit(run_id, deferred)
            self.metrics.executions.labels(execution.outcome).inc()
            if execution.woken_at_ms is not None:
                self.metrics.resume_latency.observe((now_ms() - execution.woken_at_ms) / 1000)
            log.debug("execution ended: %s", execution.outcome, extra=ctx)
        except Abort as abort:
            if isinstance(abort.error, LeaseLost):
                self.metrics.lease_losses.inc()
                log.warning("lease_lost: %s", abort.error, extra=ctx)
            elif isinstance(abort.error, Interrupted):
                log.warning("%s", abort.error, extra=ctx)
                self._spawn(run_id, msg_id, delay=0.05)  # it holds our lease: take it back
            else:
                log.error(
                    "Redis unavailable (%s); the task will be retried", abort.error, extra=ctx
                )
        except _OUTAGE as exc:
            log.error("Redis unavailable (%s); the task will be retried", exc, extra=ctx)
        except Exception:
            log.exception("execution crashed; the task will be retried", extra=ctx)
