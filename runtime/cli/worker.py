"""``parley worker``: a worker process."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from typing import Any

from .. import _loop, tracing
from ..client import Runtime
from ..errors import ParleyError, UsageError
from ..ids import check_name
from ..settings import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LEASE_SECONDS,
    METRICS_PORT_EXPECTED,
    Settings,
    metrics_port,
)
from ..worker import Worker
from ..worker.leases import sweep_idle_ms
from .ops import _positive_int, add_allow_memory, embedded_store_refused, import_app_options

# Container allocations between two young collections in a worker process (CPython's
# default: 700; CPython 3.11 counts allocations less deallocations, and at this threshold
# a whole bench run made no collection). bench.instructions, per HITL lifecycle: 1.62 M
# instructions at the default, 1.51-1.54 M at 20,000 to 100,000. The cost is memory:
# cyclic garbage lives up to that many allocations longer (a few MB at most).
YOUNG_COLLECTION_EVERY = 50_000
# Where the metrics are served: every interface, for a scraper on another host.
METRICS_ADDRESS = "0.0.0.0"


def add_command(sub: Any, add_common: Any) -> None:
    parser = sub.add_parser("worker", help="run a worker process")
    add_common(parser)
    parser.add_argument(
        "--app", action="append", required=True, help="module defining the workflows (repeatable)"
    )
    parser.add_argument("--concurrency", type=_positive_int, default=DEFAULT_CONCURRENCY)
    parser.add_argument(
        "--workflow",
        action="append",
        help="execute only this workflow (repeatable; default: every one the apps register)",
    )
    parser.add_argument(
        "--lease", type=float, default=DEFAULT_LEASE_SECONDS, help="lease / visibility timeout, s"
    )
    parser.add_argument(
        "--version",
        default=None,
        help="this deployment's version, recorded by the runs this worker starts executing "
        "(default: $PARLEY_VERSION, else none)",
    )
    parser.add_argument(
        "--serve-version",
        action="append",
        help="execute runs of this version (repeatable; default: this worker's --version); "
        "runs of other versions are parked until a worker that serves them starts",
    )
    parser.add_argument(
        "--metrics-port",
        type=_metrics_port,
        default=None,
        help="serve Prometheus metrics on this port (0: off; default: $PARLEY_METRICS_PORT)",
    )
    add_allow_memory(parser)
    parser.set_defaults(handler=_worker_command)


def _metrics_port(text: str) -> int:
    try:
        return metrics_port(text, "--metrics-port")
    except ValueError:
        # argparse names the option before: "argument --metrics-port: expected a port ..."
        raise argparse.ArgumentTypeError(
            f"expected {METRICS_PORT_EXPECTED}, got {text!r}"
        ) from None


def _worker_command(args: argparse.Namespace) -> int:
    if embedded_store_refused(args, "worker"):
        return 2
    settings: Settings = args.settings  # read (and checked) by main()
    if args.version is None:
        args.version = settings.version
    # Where the port was given, for the error if it is taken.
    args.metrics_option = f"--metrics-port {args.metrics_port}"
    if args.metrics_port is None:
        args.metrics_port = settings.metrics_port
        args.metrics_option = f"PARLEY_METRICS_PORT={args.metrics_port}"
    try:  # checked before anything starts: a typo in the environment, said plainly
        sweep_idle_ms(settings.consumer_sweep_idle)
    except UsageError as exc:
        print(f"parley worker: {exc}", file=sys.stderr)
        return 2
    return _loop.run(_run_worker(args))


async def _run_worker(args: argparse.Namespace) -> int:
    settings: Settings = args.settings
    try:
        # What is wrong before the worker starts (tracing asked for without the otel
        # extra, the store's URL, its partitions, the version, Redis down) is said in a
        # line; once it runs, it rides out outages.
        tracing.configure(settings)
        runtime = Runtime(args.redis, partitions=args.partitions, lease_seconds=args.lease)
        if args.version:
            check_name(args.version, "version")
        # Inside the running loop, as the worker imports them: an app may start its own
        # tasks when imported (bench/app.py's reporter did not start when they were
        # imported before the loop, and every bench run failed).
        import_app_options(args.app)
        worker = Worker(
            runtime,
            app=args.app,
            concurrency=args.concurrency,
            workflows=args.workflow,
            version=args.version,
            serve_versions=args.serve_version,
            consumer_sweep_idle=settings.consumer_sweep_idle,
        )
        await runtime.connect()
    except ParleyError as exc:
        print(f"parley worker: {exc}", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, worker.stop)

    async def announce_ready() -> None:
        await worker.ready.wait()
        # Readiness line for supervisors and tests (stdout, flushed).
        print(f"parley worker ready {worker.consumer}", flush=True)

    async with runtime:
        if args.metrics_port:
            try:  # before the worker says it started: a port taken is a startup error
                _serve_metrics(worker, args.metrics_port)
            except OSError as exc:
                print(
                    f"parley worker: {args.metrics_option}: expected a port free to serve "
                    f"metrics on, got {METRICS_ADDRESS}:{args.metrics_port}: {exc}",
                    file=sys.stderr,
                )
                return 2
        logging.getLogger("parley.worker").info(
            "worker %s (version %r, serving %s) started on %s (%d partitions, %s loop)",
            worker.consumer,
            worker.version,
            sorted(worker.serve_versions),
            runtime.url,
            runtime.partitions,
            _loop.describe(loop),
        )
        # What the process holds once started (modules, the registry, the connection)
        # lives as long as it: out of the collector's way, so each collection scans only
        # the executions' objects.
        gc.freeze()
        # An execution allocates hundreds of container objects (dicts, lists, futures, events)
        # and frees nearly all of them by reference count within milliseconds; at CPython's
        # default (a young collection every 700 allocations) the collector mostly walks
        # objects about to die and promotes live ones it must walk again later.
        gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
        side_tasks = [asyncio.create_task(announce_ready())]
        await worker.run()
        for task in side_tasks:
            task.cancel()
    return 0


def _serve_metrics(worker: Worker, port: int) -> None:
    """Prometheus exposition on a port (one thread for the HTTP server; store-wide
    figures are read from the store on the worker's loop at each scrape)."""
    from prometheus_client import start_http_server

    worker.metrics.store.refresh_on_scrape(asyncio.get_running_loop(), worker.runtime)
    start_http_server(port, addr=METRICS_ADDRESS, registry=worker.metrics.registry)
