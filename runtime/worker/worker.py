"""The worker: a consumer-group member that executes runs, fires deadlines, reclaims the
tasks of dead workers and heartbeats its long executions.

A worker holds an asyncio task only for a run it is *executing*; a suspended run costs
store bytes and nothing here. Background loops: task readers, deadlines, reclaim, the
sweep of dead workers' consumers, heartbeat, announcements — a fixed few, whatever the
number of runs, each supervised (restarted if it crashes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
from collections.abc import Iterable
from types import ModuleType

from .._codec import Duration
from ..client import Runtime
from ..engine.replay_cache import DEFAULT_REPLAY_CACHE_SIZE, ReplayCache
from ..errors import StoreUnavailable, UsageError
from ..metrics import Metrics
from ..registry import find_workflow, import_apps, registered_workflows
from ..settings import (
    ANNOUNCE_SECONDS,
    CONSUMER_SWEEP_SECONDS,
    DEADLINE_SCAN_SECONDS,
    DEFAULT_CONCURRENCY,
    DEFAULT_CONSUMER_SWEEP_IDLE,
    HAND_BACK_DELAY_SECONDS,
    MAX_BLOCK_SECONDS,
    TASK_BLOCK_SECONDS,
)
from .backoff import Backoff
from .consumer import TaskConsumer
from .deadlines import DeadlineLoop
from .leases import LeaseKeeper, sweep_idle_ms
from .supervisor import Loop, supervise

log = logging.getLogger("parley.worker")


class Worker:
    """Executes the runs of the workflows it knows, from the store of ``runtime``.

    ``app`` names the module(s) defining the workflows; ``workflows`` restricts it to some
    of them (tasks of the others are handed back to the group: worker pools, rolling
    deploys). ``version`` is recorded by the runs it executes first; it executes only runs
    of the versions in ``serve_versions`` (default: its own) and parks the others until a
    worker that serves them starts. ``concurrency`` bounds the executions at once.
    ``timer_tick`` is the longest between two passes over the deadlines (a safety net: a
    deadline is fired when it is due, without waiting for one).
    ``visibility_timeout`` (default: the lease) is how long a task may stay unacknowledged
    before another worker takes it over. ``replay_cache`` is how many recently executed
    runs it remembers the replay of (0: none), so their resumes read only new events.
    About every ``consumer_sweep_interval`` seconds it deletes the consumers of the task
    groups idle longer than ``consumer_sweep_idle`` with nothing pending: those of workers
    that died (a stopping worker's own leaves with it).
    """

    def __init__(
        self,
        runtime: Runtime,
        app: str | ModuleType | Iterable[str | ModuleType] | None = None,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        name: str | None = None,
        block_seconds: float = TASK_BLOCK_SECONDS,
        timer_tick: float = DEADLINE_SCAN_SECONDS,
        visibility_timeout: float | None = None,
        workflows: Iterable[str] | None = None,
        hand_back_delay: float = HAND_BACK_DELAY_SECONDS,
        version: str = "",
        serve_versions: Iterable[str] | None = None,
        replay_cache: int = DEFAULT_REPLAY_CACHE_SIZE,
        consumer_sweep_idle: Duration = DEFAULT_CONSUMER_SWEEP_IDLE,
        consumer_sweep_interval: float = CONSUMER_SWEEP_SECONDS,
    ) -> None:
        if concurrency < 1:
            raise UsageError(f"concurrency must be at least 1, got {concurrency!r}")
        sweep_idle = sweep_idle_ms(consumer_sweep_idle)  # before anything: a bad setting
        import_apps(app)
        self.runtime = runtime
        # The workflows this worker executes (default: all registered in this process).
        self.workflows = None if workflows is None else frozenset(workflows)
        self.version = version
        self.serve_versions = frozenset([version] if serve_versions is None else serve_versions)
        self.consumer = name or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.metrics = Metrics()
        self._stopping = asyncio.Event()
        self.ready = asyncio.Event()  # set once connected, announced and consuming
        self._advised = False  # the Redis settings were checked (once per process)
        visibility = (
            visibility_timeout if visibility_timeout is not None else (runtime.lease_ms / 1000)
        )
        store = runtime.store
        self.tasks = TaskConsumer(
            store,
            self.metrics,
            name=self.consumer,
            concurrency=concurrency,
            block_ms=int(min(block_seconds, MAX_BLOCK_SECONDS) * 1000),
            lease_ms=runtime.lease_ms,
            limits=runtime.limits,
            retention_seconds=runtime.retention_seconds,
            executes=self._executes,
            hand_back_delay=hand_back_delay,
            version=version,
            serves=self.serve_versions,
            on_recovered=self._restore,
            replay_cache=ReplayCache(replay_cache),
        )
        self.deadlines = DeadlineLoop(store, self.metrics, scan=timer_tick)
        self.leases = LeaseKeeper(
            store,
            self.tasks,
            self.metrics,
            lease_ms=runtime.lease_ms,
            visibility_ms=int(visibility * 1000),
            dispatch=self.tasks.dispatch,
            serves=self.serve_versions,
            sweep_idle_ms=sweep_idle,
            sweep_seconds=consumer_sweep_interval,
        )

    def __repr__(self) -> str:
        return f"<Worker {self.consumer} running={self.running}>"

    @property
    def running(self) -> int:
        """Runs executing right now."""
        return self.tasks.running

    @property
    def handed_back(self) -> int:
        """Tasks given back because this worker does not run their workflow."""
        return self.tasks.handed_back

    def _executes(self, workflow: str) -> bool:
        if self.workflows is not None and workflow not in self.workflows:
            return False
        return find_workflow(workflow) is not None

    def stop(self) -> None:
        self._stopping.set()

    async def _restore(self) -> None:
        """What this worker keeps in the store, written again (after an outage: Redis may
        have come back empty): its workflows, so that a server that does not import them
        accepts their starts, and the runs parked for the versions it serves."""
        await self.runtime.announce_workflows(registered_workflows())
        await self.leases.unpark()

    async def _start_when_reachable(self) -> bool:
        """Connect and announce, riding out a store that is down or restarting when the
        worker starts (as a process, or inside a server); False if stopped meanwhile."""
        backoff = Backoff("worker start")
        while not self._stopping.is_set():
            try:
                await self.runtime.connect()
                await self._restore()
            except StoreUnavailable as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()
            await self._advise()
            return True
        return False

    async def _advise(self) -> None:
        """Tell the operator, once per process, of each Redis setting Parley recommends
        that is not in effect: a warning and ``parley_redis_setting_not_recommended``."""
        if self._advised:
            return
        self._advised = True
        for setting, value, wanted, why in await self.runtime.store.settings_advice():
            log.warning(
                "Redis setting %s is %r; Parley recommends %r: %s", setting, value, wanted, why
            )
            self.metrics.setting_advice.labels(setting).set(1)

    async def _announce_loop(self, stopping: asyncio.Event) -> None:
        # Also on a schedule: the announcement can be lost without this worker seeing an
        # outage (a failover between two reads, a FLUSHALL, eviction).
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=ANNOUNCE_SECONDS)
            if stopping.is_set():
                return
            # unreachable: the task loop restores it when the store is back
            with contextlib.suppress(StoreUnavailable):
                await self.runtime.announce_workflows(registered_workflows())

    async def fire_due(self, limit: int = 500) -> int | None:
        """Fire every due deadline now; returns the earliest one still pending (ms)."""
        return await self.deadlines.fire_due(limit)

    async def reclaim(self) -> int:
        """Take over tasks idle longer than the visibility timeout (their worker died)."""
        return await self.leases.reclaim()

    async def sweep_consumers(self) -> int:
        """Delete the consumers of dead workers from the task groups now (the sweep loop
        does it about every ``consumer_sweep_interval``); returns how many."""
        return await self.leases.sweep()

    async def run(self, *, drain: bool = False) -> None:
        """Work until :meth:`stop`; with ``drain=True``, return as soon as no task is ready
        and no execution is in flight (deterministic tests)."""
        self.tasks.stopping = False  # (drained after a stop: a stopped run() stays stopped)
        if drain:  # a test's deterministic pass: an outage is the test's failure
            await self.runtime.connect()
            await self._restore()
            await self._drain()
            return
        if not await self._start_when_reachable():
            return  # stopped before the store could be reached
        stopping = self._stopping
        named: list[tuple[str, Loop]] = [
            ("task loop", functools.partial(self.tasks.read_loop, partitions))
            for partitions in self.runtime.store.task_sources()
        ]
        named += [
            ("deadline loop", self.deadlines.run),
            ("reclaim loop", self.leases.reclaim_loop),
            ("consumer sweep loop", self.leases.sweep_loop),
            ("heartbeat loop", self.leases.heartbeat_loop),
            ("announce loop", self._announce_loop),
        ]
        loops = [
            asyncio.create_task(
                supervise(name, loop, stopping, self.metrics),
                name="parley-" + name.replace(" ", "-"),
            )
            for name, loop in named
        ]
        self.ready.set()
        try:
            await stopping.wait()
        finally:
            # redis-py can swallow a cancellation that lands mid-command; the loops also
            # check the stop event, and we cancel again until each one has really ended.
            pending: set[asyncio.Task[None]] = set(loops)
            while pending:
                for loop in pending:
                    loop.cancel()
                _, pending = await asyncio.wait(pending, timeout=0.5)
            # Every execution in flight ends (one an answer interrupted runs again at once:
            # it holds the run's lease), then what this worker read and did not start goes
            # back to the group. Races closed: a read the stop cancelled had its tasks
            # delivered, and those in the backlog or behind an execution of their run were
            # never started; each waited in this consumer's pending list for the visibility
            # timeout, and so did its run, whose later answers queue no task of their own.
            self.tasks.stopping = True
            while self.tasks.tasks:
                await asyncio.gather(*self.tasks.tasks, return_exceptions=True)
            await self._give_back()

    async def _give_back(self) -> None:
        try:
            given = await self.runtime.store.give_back(self.consumer)
        except StoreUnavailable as exc:
            log.warning(
                "could not give back the tasks this worker read and did not run (%s): other"
                " workers reclaim them after the visibility timeout",
                exc,
            )
            return
        self.tasks.forget_unstarted()
        if given:
            log.info("gave back %d task(s) this worker read and did not run", given)

    async def drain(self) -> None:
        await self.run(drain=True)

    async def _drain(self) -> None:
        self.tasks.draining = True
        sources = self.runtime.store.task_sources()
        while True:
            await self.fire_due()
            for partitions in sources:
                await self.tasks.read_once(partitions)
            if self.tasks.idle:
                return
            while self.tasks.tasks:
                await asyncio.gather(*self.tasks.tasks, return_exceptions=True)
