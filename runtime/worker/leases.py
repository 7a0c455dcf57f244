"""The worker's leases: heartbeats for its long executions, the reclaim of tasks whose
worker died, and the sweep of the consumers such workers leave in the task groups."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from .._codec import Duration, parse_duration
from ..errors import StoreUnavailable, UsageError
from ..metrics import Metrics
from ..store import Store, Task
from .backoff import Backoff
from .consumer import TaskConsumer

log = logging.getLogger("parley.worker")


def sweep_idle_ms(value: Duration) -> int:
    """The consumer sweep's threshold in ms, checked: a duration of at least 1 ms."""
    what = "consumer_sweep_idle (PARLEY_CONSUMER_SWEEP_IDLE)"
    idle_ms = int(parse_duration(value, what=what) * 1000)
    if idle_ms < 1:
        raise UsageError(f"{what} must be at least 1ms, like '1d' or '12h'; got {value!r}")
    return idle_ms


class LeaseKeeper:
    """Keeps this worker's leases alive and takes over the tasks of dead workers.

    A heartbeat every lease/3 extends the lease of each running execution and resets its
    task's idle time; an execution whose lease was lost (cancelled, or taken over) is
    stopped at once. Every visibility/2, tasks idle longer than the visibility timeout are
    reclaimed and dispatched here. About every ``sweep_seconds`` (jittered), the consumers
    idle longer than ``sweep_idle_ms`` with nothing pending are deleted from the groups.
    """

    def __init__(
        self,
        store: Store,
        consumer: TaskConsumer,
        metrics: Metrics,
        *,
        lease_ms: int,
        visibility_ms: int,
        dispatch: Callable[[list[Task]], None],
        serves: frozenset[str],
        sweep_idle_ms: int,
        sweep_seconds: float,
    ) -> None:
        self.store = store
        self.consumer = consumer
        self.metrics = metrics
        self.lease_ms = lease_ms
        self.visibility_ms = visibility_ms
        self.dispatch = dispatch
        self.serves = sorted(serves)
        self.sweep_idle_ms = sweep_idle_ms
        self.sweep_seconds = sweep_seconds

    async def reclaim(self) -> int:
        """Take over tasks idle longer than the visibility timeout (their worker died)."""
        tasks = await self.store.reclaim(self.consumer.name, self.visibility_ms)
        if tasks:
            log.warning("reclaimed %d task(s)", len(tasks))
            self.metrics.reclaims.inc(len(tasks))
            self.dispatch(tasks)
        return len(tasks)

    async def unpark(self) -> int:
        """Send back to the workers the runs parked for the versions this worker serves
        (at start, and with every reclaim: a run another worker parks after this one
        started waits one reclaim interval at most)."""
        sent = await self.store.unpark(self.serves)
        if sent:
            log.info("unparked %d run(s) of version(s) %s", sent, self.serves)
        return sent

    async def reclaim_loop(self, stopping: asyncio.Event) -> None:
        backoff = Backoff("reclaim loop")
        while not stopping.is_set():
            await asyncio.sleep(self.visibility_ms / 2000)
            try:
                await self.reclaim()
                await self.unpark()
            except StoreUnavailable as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()

    async def sweep(self) -> int:
        """Delete the consumers that workers which died left in the task groups."""
        swept = await self.store.sweep_consumers(self.consumer.name, self.sweep_idle_ms)
        if swept:
            log.info("swept %d consumer(s) of dead workers from the task groups", swept)
            self.metrics.consumers_swept.inc(swept)
        return swept

    async def sweep_loop(self, stopping: asyncio.Event) -> None:
        # The first sweep at a random point of the first interval: a worker restarted more
        # often than that still sweeps sometimes, and workers started together (a deploy)
        # do not sweep together; then about once an interval.
        wait = random.uniform(0, self.sweep_seconds)
        backoff = Backoff("consumer sweep loop")
        while not stopping.is_set():
            await asyncio.sleep(wait)
            wait = self.sweep_seconds * random.uniform(0.5, 1.5)
            try:
                await self.sweep()
            except StoreUnavailable as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()

    async def heartbeat_loop(self, stopping: asyncio.Event) -> None:
        backoff = Backoff("heartbeat loop")
        while not stopping.is_set():
            await asyncio.sleep(self.lease_ms / 3000)
            executions = self.consumer.executions()
            if not executions:
                continue
            try:
                alive = await self.store.heartbeat(
                    [(ex.run_id, ex.fence) for ex in executions],
                    self.lease_ms,
                    self.consumer.name,
                )
            except StoreUnavailable as exc:
                await backoff.wait(exc)
                continue
            backoff.reset()
            for execution, kept in zip(executions, alive, strict=True):
                if not kept and self.consumer.stop_execution(execution):
                    # Cancelled or taken over: stop its side effects now, not at its next
                    # write (which the fence would refuse anyway).
                    log.warning(
                        "lease_lost: stopping the execution", extra={"run_id": execution.run_id}
                    )
                    self.metrics.lease_losses.inc()
