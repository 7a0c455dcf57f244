"""``python -m bench.hitl``: the HITL lifecycle benchmark. See bench/README.md.

Modes: ``main`` (default, N=2000), ``scale`` (N=100,000 suspended at once, in batches),
``deadline`` (10,000 hook timeouts due within one second), ``push`` (websocket prompt
push through the server), ``rounds`` (resume cost at rounds 1 / 100 / 1,000 of one run),
``idle`` (idle commands/s and deadline lateness for 1 / 4 / 8 workers at 16 / 64
partitions), ``ceiling`` (this machine's Redis ceiling) and ``report`` (all of them, one
table). Prints a table and one JSON line per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from .common import bench_env, print_report
from .lifecycle import Options, run_lifecycles
from .summary import summarize

MODES = ("main", "scale", "deadline", "push", "rounds", "idle", "ceiling", "report")
DEFAULT_RUNS = {
    "main": 2000, "scale": 100_000, "deadline": 10_000, "push": 1000,
    "rounds": 0, "idle": 200, "ceiling": 0, "report": 2000,
}  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.hitl", description=__doc__)
    p.add_argument("--mode", choices=MODES, default="main")
    p.add_argument("--runs", type=int, help=f"N (default per mode: {DEFAULT_RUNS})")
    p.add_argument("--workers", type=int, default=2, help="worker processes (K)")
    p.add_argument("--redis", help="Redis URL; default: start a private redis-server")
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--worker-concurrency", type=int, default=64)
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--concurrency", type=int, default=256, help="driver calls in flight")
    p.add_argument("--batch", type=int, help="runs per start/answer batch (scale: 10000)")
    p.add_argument("--probe", type=int, default=100, help="light-load latency probe runs")
    p.add_argument("--probe-rate", type=float, default=200.0, help="probe answers per second")
    p.add_argument("--idle-window", type=float, default=2.0, help="seconds of idle measuring")
    p.add_argument("--warmup", type=int, default=200, help="unmeasured lifecycles first")
    p.add_argument(
        "--defer-checkpoint", action="store_true", help="save_step_checkpoint(defer=True)"
    )
    p.add_argument(
        "--redis-arg",
        action="append",
        default=[],
        help="extra redis-server argument, e.g. --redis-arg=--stream-node-max-bytes=512",
    )
    p.add_argument("--on-created", action="store_true", help="step_hook with an on_created")
    p.add_argument("--server-port", type=int, default=0, help="push mode: server port")
    p.add_argument(
        "--ceiling-scripts",
        type=int,
        default=100_000,
        help="scripts of the Redis ceiling measured after main/scale (0: skip)",
    )
    p.add_argument(
        "--round-points", type=int, nargs="+", help="rounds mode: rounds to measure (1 100 1000)"
    )
    p.add_argument("--samples", type=int, default=5, help="rounds mode: resumes per point")
    p.add_argument(
        "--idle-workers", type=int, nargs="+", default=[1, 4, 8], help="idle mode: workers"
    )
    p.add_argument(
        "--idle-partitions", type=int, nargs="+", default=[16, 64], help="idle mode: partitions"
    )
    p.add_argument(
        "--spread", type=float, default=2.0, help="idle mode: seconds the timeouts spread over"
    )
    p.add_argument("--quick", action="store_true", help="report: smaller runs, shorter windows")
    return p.parse_args(argv)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    runs = args.runs or DEFAULT_RUNS[args.mode]
    if args.mode == "report":
        from .report import run_report

        return await run_report(args)
    if args.mode == "rounds":
        from .rounds import run_rounds

        return await run_rounds(args)
    if args.mode == "idle":
        from .idle import run_idle

        return await run_idle(args, runs)
    if args.mode == "ceiling":
        from .ceiling import run_ceiling

        return await run_ceiling(args)
    if args.mode == "deadline":
        from .deadline import run_deadline

        return await run_deadline(args, runs)
    if args.mode == "push":
        from .push import run_push

        return await run_push(args, runs)
    batch = args.batch or (10_000 if args.mode == "scale" else 0)
    opts = Options(
        runs=runs,
        batch=batch,
        concurrency=args.concurrency,
        probe=args.probe,
        probe_rate=args.probe_rate,
        idle_window=args.idle_window,
        on_created=args.on_created,
        warmup=args.warmup,
        defer=args.defer_checkpoint,
    )
    async with bench_env(args) as env:
        raw = await run_lifecycles(env, opts)
        own = env.own_redis
        if args.ceiling_scripts:  # after the measured phases, on the same redis-server
            from .ceiling import measure_ceiling

            raw["ceiling"] = await measure_ceiling(env.url, args.ceiling_scripts)
    result, rows, notes = summarize(raw, args, own)
    if getattr(args, "print", True):
        print_report(f"parley HITL lifecycle benchmark ({args.mode})", rows, notes, result)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(main_async(args))
    return 0 if not result.get("problems") else 1


if __name__ == "__main__":
    sys.exit(main())
