"""The ``parley`` command: ``parley worker``, ``parley demo`` (and, with the server
package, ``parley server``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence

from . import _ops, logs
from .runtime import Runtime
from .worker import Worker

Command = Callable[[argparse.Namespace], int]
_commands: dict[str, Command] = {}


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis",
        default=os.environ.get("REDIS_URL"),
        help="Redis URL (redis://host:port/db, or memory:// for the embedded store); "
        "default: $REDIS_URL, else memory://",
    )
    parser.add_argument(
        "--partitions", type=int, default=int(os.environ.get("PARLEY_PARTITIONS", "16"))
    )
    parser.add_argument("--log-level", default=os.environ.get("PARLEY_LOG_LEVEL", "INFO"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parley", description="Parley durable workflows")
    sub = parser.add_subparsers(dest="command", required=True)

    worker = sub.add_parser("worker", help="run a worker process")
    _add_common(worker)
    worker.add_argument(
        "--app", action="append", required=True, help="module defining the workflows (repeatable)"
    )
    worker.add_argument("--concurrency", type=int, default=64)
    worker.add_argument(
        "--workflow",
        action="append",
        help="execute only this workflow (repeatable; default: every one the apps register)",
    )
    worker.add_argument(
        "--lease", type=float, default=30.0, help="lease / visibility timeout, seconds"
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        default=int(os.environ.get("PARLEY_METRICS_PORT", "0")),
        help="serve Prometheus metrics on this port (0: off)",
    )

    demo = sub.add_parser("demo", help="serve the chat-agent demo (server + worker in one process)")
    _add_common(demo)
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8000)

    server = sub.add_parser("server", help="serve the HTTP/websocket API and the widget")
    _add_common(server)
    server.add_argument("--app", action="append", default=[], help="module defining the workflows")
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=8000)
    _ops.add_commands(sub, _add_common)
    return parser


async def _run_worker(args: argparse.Namespace) -> None:
    runtime = Runtime(args.redis, partitions=args.partitions, lease_seconds=args.lease)
    worker = Worker(runtime, app=args.app, concurrency=args.concurrency, workflows=args.workflow)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, worker.stop)
    logging.getLogger("parley.worker").info(
        "worker %s started on %s (%d partitions)", worker.consumer, runtime.url, runtime.partitions
    )

    async def announce_ready() -> None:
        await worker.ready.wait()
        # Readiness line for supervisors and tests (stdout, flushed).
        print(f"parley worker ready {worker.consumer}", flush=True)

    async with runtime:
        side_tasks = [asyncio.create_task(announce_ready())]
        if args.metrics_port:
            _serve_metrics(worker, args.metrics_port)
        await worker.run()
        for task in side_tasks:
            task.cancel()


def _serve_metrics(worker: Worker, port: int) -> None:
    """Prometheus exposition on a port (one thread for the HTTP server; store-wide
    figures are read from Redis on the worker's loop at each scrape)."""
    from prometheus_client import start_http_server

    worker.metrics.store.refresh_on_scrape(asyncio.get_running_loop(), worker.runtime)
    start_http_server(port, addr="0.0.0.0", registry=worker.metrics.registry)


def _worker_command(args: argparse.Namespace) -> int:
    asyncio.run(_run_worker(args))
    return 0


def _server_command(args: argparse.Namespace) -> int:
    try:
        from server.cli import serve  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:  # pragma: no cover - the server package ships with parley
        print(f"parley server is unavailable: {exc}", file=sys.stderr)
        return 2
    code: int = serve(args, demo=args.command == "demo")
    return code


def _ops_command(args: argparse.Namespace) -> int:
    return asyncio.run(_ops.run(args))


_commands.update(
    {
        "worker": _worker_command,
        "server": _server_command,
        "demo": _server_command,
        "runs": _ops_command,
        "hooks": _ops_command,
    }
)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level)
    return _commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
