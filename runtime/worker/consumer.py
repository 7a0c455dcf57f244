"""The worker's consumer: reads tasks, admits at most ``concurrency`` executions, queues
the rest, hands back the tasks of workflows it does not run, and executes runs."""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .. import tracing
from ..engine.execution import Execution
from ..engine.replay_cache import CachedReplay, ReplayCache
from ..engine.signals import Abort, Interrupted
from ..errors import LeaseLost, LogFormatUnknown, StoreUnavailable
from ..metrics import Metrics
from ..models import WAKING_EVENTS, EventType
from ..registry import find_workflow, get_workflow
from ..settings import Limits
from ..store import Claim, ClaimStatus, Store, Task
from .backoff import Backoff

_SUSPENSIONS = frozenset({EventType.STEP_SUSPENDED, EventType.WORKFLOW_SUSPENDED})

log = logging.getLogger("parley.worker")


class TaskConsumer:
    """One consumer of the task queues.

    A task becomes an asyncio task that claims the run and executes it; at most
    ``concurrency`` run at once, the rest wait in a backlog in arrival order. A task for a
    run this worker is executing already is deferred until that execution ends (e.g. an
    answer enqueued it just as its suspension committed), rather than left pending until
    the visibility timeout; a run's deferred tasks start one after the other. A run is
    this worker's from the moment a task of it is started, not only once its claim
    returned: one run never has two claims or executions under way here at once.
    """

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        *,
        name: str,
        concurrency: int,
        block_ms: int,
        lease_ms: int,
        limits: Limits,
        retention_seconds: int,
        executes: Callable[[str], bool],
        hand_back_delay: float,
        version: str,
        serves: frozenset[str],
        on_recovered: Callable[[], Awaitable[None]] | None = None,
        replay_cache: ReplayCache | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.name = name
        self.concurrency = concurrency
        self.block_ms = block_ms
        self.lease_ms = lease_ms
        self.limits = limits
        self.retention_seconds = retention_seconds
        self.executes = executes
        self.hand_back_delay = hand_back_delay
        # After an outage or a reset of the store: restore what this worker keeps there.
        self.on_recovered = on_recovered
        self.version = version  # recorded by the runs this worker executes first
        self.serves = sorted(serves)  # the versions of the runs it executes
        # The replay indexes of runs executed here recently: resuming one reads only the
        # events after the last one this worker saw (engine/replay_cache.py).
        self.replay_cache = replay_cache if replay_cache is not None else ReplayCache()
        self.handed_back = 0  # tasks given back because this worker does not run them
        self.draining = False  # a drain reads a handed-back task again at once: skip those
        # The worker stops: no task it read is started any more (it gives them back).
        self.stopping = False
        self._running: dict[str, Execution] = {}
        self._execution_tasks: dict[str, asyncio.Task[Any] | None] = {}
        self._deferred: dict[str, list[Task]] = {}
        # Runs with a task started here (claiming, executing, or about to take the run
        # back): how many such tasks, so that one started from inside another keeps it.
        self._started: collections.Counter[str] = collections.Counter()
        self.tasks: set[asyncio.Task[None]] = set()
        # Tasks delivered beyond `concurrency` (one read may deliver up to `count` per
        # partition): run as slots free up, in order.
        self._backlog: collections.deque[Task] = collections.deque()

    @property
    def running(self) -> int:
        return len(self._running)

    def executions(self) -> list[Execution]:
        return list(self._running.values())

    def stop_execution(self, execution: Execution) -> bool:
        """Cancel ``execution`` if it is still the one running its run here."""
        task = self._execution_tasks.get(execution.run_id)
        if task is None or self._running.get(execution.run_id) is not execution:
            return False
        task.cancel()
        return True

    @property
    def idle(self) -> bool:
        return not self.tasks and not self._backlog

    # reading ---------------------------------------------------------------------------
    def per_partition(self, free: int, partitions: tuple[int, ...]) -> int:
        """A read's count applies to each partition: split the free slots among them, so
        one read cannot take far more than this worker runs (and starve the others)."""
        return max(1, -(-free // len(partitions)))

    async def read_loop(self, partitions: tuple[int, ...], stopping: asyncio.Event) -> None:
        backoff = Backoff("task loop")
        while not stopping.is_set():
            free = self.concurrency - len(self.tasks)
            if free <= 0 or self._backlog:
                if self.tasks:
                    await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
                else:
                    self._admit_backlog()
                continue
            try:
                tasks = await self.store.read_tasks(
                    self.name, partitions, self.per_partition(free, partitions), self.block_ms
                )
            except StoreUnavailable as exc:
                await backoff.wait(exc)
                continue
            self.metrics.last_read.set(time.time())
            if backoff.reset() and self.on_recovered is not None:
                try:
                    await self.on_recovered()
                except StoreUnavailable as exc:
                    log.error("could not restore this worker's state in the store: %s", exc)
            self.dispatch(tasks)

    async def read_once(self, partitions: tuple[int, ...]) -> None:
        """One non-blocking read (a drain)."""
        tasks = await self.store.read_tasks(
            self.name, partitions, self.per_partition(self.concurrency, partitions), None
        )
        self.dispatch(tasks)

    # admission -------------------------------------------------------------------------
    def dispatch(self, tasks: list[Task]) -> None:
        for task in tasks:
            if task.workflow and not self.executes(task.workflow):
                if not self.draining:
                    self._spawn_hand_back(task)
                continue
            if task.run_id in self._started:
                self._deferred.setdefault(task.run_id, []).append(task)
                continue
            self._admit(task)

    def _admit(self, task: Task) -> None:
        if self.stopping:
            return  # (still this consumer's: given back when the worker has stopped)
        if len(self.tasks) < self.concurrency:
            self._spawn(task)
        else:
            self._backlog.append(task)

    def forget_unstarted(self) -> None:
        """The tasks read and not started are given back: no longer this consumer's to
        start (a worker drained after its stop would claim them by their old messages)."""
        self._backlog.clear()
        self._deferred.clear()

    def _admit_backlog(self) -> None:
        while self._backlog and len(self.tasks) < self.concurrency and not self.stopping:
            task = self._backlog.popleft()
            if task.run_id in self._started:
                self._deferred.setdefault(task.run_id, []).append(task)
            else:
                self._spawn(task)

    def _task_done(self, run_id: str, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._started[run_id] -= 1
        if self._started[run_id] <= 0:
            del self._started[run_id]
            # The run's next task (before the backlog: it came first), and only one: two
            # started together both claimed the run and executed it at once.
            deferred = self._deferred.pop(run_id, [])
            if deferred[1:]:
                self._deferred[run_id] = deferred[1:]
            if deferred:
                self._admit(deferred[0])
        self._admit_backlog()

    def _spawn(self, task: Task, delay: float = 0.0) -> None:
        # Race closed: two executions of one run in this worker at once. A worker may take
        # its own run's lease back (lua/claim.lua), so two tasks of a run started here
        # together both won their claims and executed the run (a model turn streamed
        # twice), and the first's end took the second off the heartbeats, reclaimed again:
        # tasks deferred behind an execution admitted all at once, or a task dispatched
        # while the run's claim was under way (not yet _running: a reclaim of a killed
        # worker's tasks, two of one run; a claim slower than the visibility timeout).
        self._started[task.run_id] += 1
        handle = asyncio.create_task(self.execute(task, delay))
        self.tasks.add(handle)
        handle.add_done_callback(functools.partial(self._task_done, task.run_id))

    def _spawn_hand_back(self, task: Task) -> None:
        handle = asyncio.create_task(self._hand_back(task))
        self.tasks.add(handle)
        handle.add_done_callback(self.tasks.discard)

    async def _hand_back(self, task: Task) -> None:
        """Give a task this worker cannot run back to the group without touching the run
        (no lease taken). After a delay, so workers that all lack the workflow do not spin
        on it."""
        log.error(
            "workflow %r is not executed by this worker; handing the task back",
            task.workflow,
            extra={"run_id": task.run_id, "worker": self.name},
        )
        await asyncio.sleep(self.hand_back_delay)
        self.handed_back += 1
        await self.store.hand_back(task)

    # executing one run -----------------------------------------------------------------
    async def _traced(self, execution: Execution, claim: Claim) -> None:
        """The execution as a ``parley.execution`` span in the run's trace (the context its
        start stored), linked to the answers that woke it, with the hook waits that ended
        since the run last suspended (runtime.tracing)."""
        events = claim.events
        parent = events[0].data.get("trace") if events else None
        last_suspension = max(
            (i for i, e in enumerate(events) if e.type in _SUSPENSIONS), default=len(events)
        )
        woke = [e for e in events[last_suspension + 1 :] if e.type in WAKING_EVENTS]
        links = [e.data["trace"] for e in woke if isinstance(e.data.get("trace"), str)]
        attributes = {"parley.run_id": execution.run_id, "parley.workflow": claim.workflow}
        with (
            tracing.executing(),
            tracing.span("parley.execution", parent=parent, links=links, attributes=attributes),
        ):
            # The hook waits that ended since the run last suspended or was blocked: their
            # spans are recorded once the execution went on (its span ends without an
            # error). One abandoned (an outage, a lost lease, an answer interrupting it) or
            # crashed is run again from the same suspension, and that execution records
            # them (recorded by both, each wait was two spans).
            tracing.took(execution.run_id, events)
            try:
                await execution.run()
            except Abort as abort:  # runs again (an outage, a lease lost, an interruption)
                tracing.abandoned(abort.error)
                raise
            except StoreUnavailable:  # (the span records it, saying it runs again)
                tracing.annotate({"parley.outcome": "abandoned"})
                raise
            tracing.annotate({"parley.outcome": execution.outcome})

    def _cached(self, task: Task) -> CachedReplay | None:
        """The index this worker kept of the task's run, if its workflow's code is still the
        one that built it. Not with tracing on: the execution's span reads the whole log."""
        if tracing.enabled():
            return None
        return self.replay_cache.take(task.run_id, find_workflow(task.workflow))

    async def execute(self, task: Task, delay: float = 0.0) -> None:
        run_id = task.run_id
        ctx = {"run_id": run_id, "worker": self.name}
        if delay:
            await asyncio.sleep(delay)
        try:
            cached = self._cached(task)
            claim = await self.store.claim(
                task,
                self.name,
                self.lease_ms,
                self.version,
                self.serves,
                None if cached is None else cached.known,
            )
            if claim.status is ClaimStatus.PARKED:
                log.warning("run parked: its version is not served here", extra=ctx)
                self.metrics.parked.inc()
                return
            if claim.status is not ClaimStatus.OK:
                return  # finished/suspended (stale task, acked) or busy (left pending)
            if not self.executes(claim.workflow):
                # A task that did not name its workflow (queued by a release before tasks
                # did): the claim named one this worker does not run. Given back like a
                # task read with its name, lease and (on a first claim) version too: kept,
                # the version would make the workers that run it park it.
                await self.store.release(run_id, claim.fence, first=claim.first)
                if not self.draining:
                    self._spawn_hand_back(task._replace(workflow=claim.workflow))
                return
            workflow = get_workflow(claim.workflow)
            try:
                execution = Execution(
                    self.store,
                    run_id,
                    workflow,
                    claim,
                    limits=self.limits,
                    retention_seconds=self.retention_seconds,
                    cached=cached,
                )
            except LogFormatUnknown as exc:
                # Upgrade every worker: until then the run waits (its task goes to another
                # worker), rather than being replayed wrongly. Its lease and, if this was
                # its first claim, its version are given back: recorded as this worker's,
                # the version would make the workers that can run it park it.
                log.error("cannot execute: %s; task left for another worker", exc, extra=ctx)
                self.metrics.log_format_unknown.inc()
                await self.store.release(run_id, claim.fence, first=claim.first)
                return
            if cached is not None:
                if claim.tail:
                    self.replay_cache.hits += 1
                else:
                    self.replay_cache.misses += 1
            self._running[run_id] = execution
            self._execution_tasks[run_id] = asyncio.current_task()
            try:
                if tracing.enabled():
                    await self._traced(execution, claim)
                else:
                    await execution.run()
            finally:
                self._running.pop(run_id, None)
                self._execution_tasks.pop(run_id, None)
            entry = execution.remembered()
            if entry is not None:
                self.replay_cache.keep(run_id, entry)
            self.metrics.executed(execution.outcome)
            if execution.woken_at_ms is not None:
                waited_ms = execution.now_ms() - execution.woken_at_ms
                self.metrics.resumed(waited_ms / 1000)
            log.debug("execution ended: %s", execution.outcome, extra=ctx)
        except Abort as abort:
            if isinstance(abort.error, LeaseLost):
                self.metrics.lease_losses.inc()
                log.warning("lease_lost: %s", abort.error, extra=ctx)
            elif isinstance(abort.error, Interrupted):
                log.warning("%s", abort.error, extra=ctx)
                self._spawn(task, delay=0.05)  # it holds our lease: take it back
            else:
                log.error(
                    "store unavailable (%s); the task will be retried", abort.error, extra=ctx
                )
        except StoreUnavailable as exc:
            log.error("store unavailable (%s); the task will be retried", exc, extra=ctx)
        except Exception:
            log.exception("execution crashed; the task will be retried", extra=ctx)
