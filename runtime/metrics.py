"""Prometheus metrics: per-process instruments of a worker or server, and the store-wide
counters every process can read from the store (``Runtime.stats``)."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .client import Runtime

_LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class StoreCollector(Collector):
    """Exposes ``Runtime.stats()``: refreshed before each scrape, either by the async
    caller (:meth:`Metrics.render`) or, when scraped from the exposition thread of
    ``start_http_server``, on the event loop given to :meth:`refresh_on_scrape`."""

    def __init__(self) -> None:
        self.snapshot: dict[str, int] = {}
        self._source: tuple[asyncio.AbstractEventLoop, Runtime] | None = None

    async def refresh(self, runtime: Runtime) -> None:
        self.snapshot = await runtime.stats()

    def refresh_on_scrape(self, loop: asyncio.AbstractEventLoop, runtime: Runtime) -> None:
        self._source = (loop, runtime)

    def collect(self) -> Iterator[Metric]:
        if self._source is not None:
            loop, runtime = self._source
            future = asyncio.run_coroutine_threadsafe(self.refresh(runtime), loop)
            with contextlib.suppress(Exception):  # an outage: serve the last snapshot
                future.result(timeout=5)
        if not self.snapshot:
            return
        runs = CounterMetricFamily(
            "parley_runs", "Runs by how they ended (store-wide)", labels=["event"]
        )
        for event in ("started", "completed", "failed", "cancelled"):
            runs.add_metric([event], self.snapshot.get(event, 0))
        yield runs
        yield GaugeMetricFamily(
            "parley_runs_suspended",
            "Runs suspended now, waiting for an answer or a deadline (store-wide)",
            value=self.snapshot.get("suspended", 0),
        )
        yield GaugeMetricFamily(
            "parley_runs_blocked",
            "Runs blocked: their code no longer matches their log (store-wide)",
            value=self.snapshot.get("blocked", 0),
        )
        yield GaugeMetricFamily(
            "parley_runs_parked",
            "Runs waiting for a worker that serves their version (store-wide)",
            value=self.snapshot.get("parked", 0),
        )
        yield GaugeMetricFamily(
            "parley_hooks_pending",
            "Hooks waiting for an answer now (store-wide)",
            value=self.snapshot.get("hooks_pending", 0),
        )


class ExecutionCollector(Collector):
    """Executions by outcome and the resume latency: counted in plain ints on the worker's
    hot path and exposed as a counter and a histogram when scraped. prometheus_client's
    instruments take a lock and make a few Python calls per update: 13k instructions per
    HITL lifecycle (two executions, one latency), ~2 % of the engine's (bench.engine).
    Read from the exposition thread too: each figure is copied in one step under the GIL,
    so a scrape may see a latency's count before its sum, never a torn number."""

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        self._bounds = _LATENCY_BUCKETS
        self._latency_counts = [0] * (len(_LATENCY_BUCKETS) + 1)  # the last: above them all
        self._latency_sum = 0.0

    def executed(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def resumed(self, seconds: float) -> None:
        # (a bucket counts the values at most its bound, as Prometheus' `le` does)
        self._latency_counts[bisect.bisect_left(self._bounds, seconds)] += 1
        self._latency_sum += seconds

    def collect(self) -> Iterator[Metric]:
        executions = CounterMetricFamily(
            "parley_executions",
            "Executions of runs by this process, by outcome",
            labels=["outcome"],
        )
        for outcome, count in dict(self.outcomes).items():
            executions.add_metric([outcome], count)
        yield executions
        counts, total, cumulative = list(self._latency_counts), self._latency_sum, 0
        buckets = []
        for bound, count in zip((*map(str, self._bounds), "+Inf"), counts, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        yield HistogramMetricFamily(
            "parley_resume_latency_seconds",
            "From an answer/expiry/timer event to the end of the execution it woke",
            buckets=buckets,
            sum_value=total,
        )


class Metrics:
    """The instruments of one process, on their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.store = StoreCollector()
        self.registry.register(self.store)
        self.executions = ExecutionCollector()
        self.registry.register(self.executions)
        # (the hot path's own calls: one attribute lookup fewer each)
        self.executed = self.executions.executed
        self.resumed = self.executions.resumed
        self.deadline_lateness = Histogram(
            "parley_deadline_lateness_seconds",
            "How late deadlines fired after they were due",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.reclaims = Counter(
            "parley_task_reclaims",
            "Tasks taken over from workers that stopped acknowledging them",
            registry=self.registry,
        )
        self.consumers_swept = Counter(
            "parley_consumers_swept",
            "Consumers of workers that died, deleted from the task groups by this process "
            "(idle, nothing pending)",
            registry=self.registry,
        )
        self.parked = Counter(
            "parley_runs_parked_here",
            "Runs this process parked because it does not serve their version",
            registry=self.registry,
        )
        self.log_format_unknown = Counter(
            "parley_log_format_refusals",
            "Claims of runs this process gave back without executing them: the run's log was "
            "recorded by a newer Parley (upgrade every worker)",
            registry=self.registry,
        )
        self.last_read = Gauge(
            "parley_worker_last_read_timestamp_seconds",
            "When this worker last read its task queues (a read returns at least every few "
            "seconds, tasks or not): a worker that stopped consuming falls behind",
            registry=self.registry,
        )
        self.loop_restarts = Counter(
            "parley_worker_loop_restarts",
            "Background loops of this worker restarted after they crashed or ended",
            ["loop"],
            registry=self.registry,
        )
        self.setting_advice = Gauge(
            "parley_redis_setting_not_recommended",
            "1 for each Redis setting Parley recommends that the server does not have "
            "(checked once when the worker starts; the worker's log says why)",
            ["setting"],
            registry=self.registry,
        )
        self.lease_losses = Counter(
            "parley_lease_losses",
            "Executions abandoned because another worker or a cancel took the run",
            registry=self.registry,
        )

    async def render(self, runtime: Runtime) -> bytes:
        """The exposition text, with store-wide figures fresh from Redis."""
        await self.store.refresh(runtime)
        return generate_latest(self.registry)
