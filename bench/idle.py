"""Idle mode: what idle workers cost Redis, and how late a deadline fires meanwhile.

For each partition count P (``--idle-partitions``, 16 64) one private redis-server; workers
are added (``--idle-workers``, 1 4 8: one, then three more, then four more; joining never
waits for a lease to expire) and for each count K:

- idle window (``--idle-window`` s, no runs): commands the workers sent, counted in each
  worker by ``bench.app`` (every command, a pipeline's each), per worker and in total, per
  second; commands Redis executed (``INFO commandstats``, inside scripts too, minus the
  benchmark's own reads and the workers' reporter); workers' and Redis's CPU in cores;
- deadlines: N runs (``--runs``, 200) whose ``step_hook`` timeouts fall evenly over
  ``--spread`` s, starting once every hook exists; lateness = ``hook.expired`` stream id
  (ms) - the hook's ``expires_at`` (as in deadline mode), p50/p99/max.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter
from typing import Any

from runtime import Runtime

from .app import WORKFLOW
from .common import Env, Row, bounded, load_average, pcts, print_report, verdict, wait_for
from .deadline import _lateness
from .harness import (
    Observer,
    Snapshot,
    command_breakdown,
    proc_cpu_seconds,
    start_redis,
    start_workers,
)

OWN = {"PIPELINE", "PIPELINE:work", "PIPELINE:commands", "XREADGROUP:empty"}


def _sent(report: dict[str, Any]) -> int:
    """Commands a worker sent: each top-level call, and each command of its pipelines."""
    trips: dict[str, int] = report["round_trips"]
    return sum(v for k, v in trips.items() if k not in OWN) + trips.get("PIPELINE:commands", 0)


def _idle_figures(
    a: Snapshot, b: Snapshot, cpus: tuple[dict[str, float], dict[str, float]]
) -> dict[str, Any]:
    per_worker = []
    for wa, wb in zip(a.workers, b.workers, strict=True):
        per_worker.append((_sent(wb) - _sent(wa)) / (wb["ts"] - wa["ts"]))
    dt = b.wall - a.wall
    cmds = command_breakdown(a, b)
    executed = sum(sum(cmds[part].values()) for part in ("top_level", "inside_lua", "background"))
    c0, c1 = cpus
    workers_cpu = sum(c1[k] - c0[k] for k in c1 if k.startswith("worker")) / dt
    return {
        "commands_per_s": round(sum(per_worker), 1),
        "commands_per_s_per_worker": [round(x, 1) for x in per_worker],
        "redis_executed_per_s": round(executed / dt, 1),
        "workers_cores": round(workers_cpu, 3),
        "redis_cores": round((b.redis_cpu - a.redis_cpu) / dt, 3),
    }


async def _deadlines(env: Env, n: int, spread: float) -> dict[str, Any]:
    lead = 0.5 + n / 200  # every hook exists before the first is due
    due0 = time.time() + lead
    ids: list[str] = []

    async def start_one(i: int) -> None:
        ids.append(await env.rt.start(WORKFLOW, due0 + spread * i / n))

    await bounded(range(n), start_one, 64)
    await wait_for(lambda: _is(env.suspended(), n), lead + 60, "hooks created")
    ready = time.time() < due0
    await wait_for(lambda: _is(env.suspended(), 0), lead + spread + 60, "hooks expired")
    await wait_for(lambda: _is(env.queued(), 0), 60, "runs completed")
    late, _done, problems = _lateness(ids, await env.run_events(ids))
    # The next cell's idle window must not count these runs' compaction (a few seconds
    # after their end).
    await wait_for(lambda: env.all_compacted(ids), 60, "compactions", every=0.5)
    return {
        "runs": n,
        "expired_once": n - len(problems),
        "problems": problems[:5],
        "hooks_ready_before_first_due": ready,
        "lateness_ms": pcts(late),
        "early": sum(1 for x in late if x < 0),
    }


async def _is(value: Any, target: int) -> bool:
    return bool(await value == target)


async def _cell(env: Env, args: argparse.Namespace, n: int) -> dict[str, Any]:
    pids = env.worker_pids
    c0 = {label: proc_cpu_seconds(pid) for label, pid in env.observer.pids.items()}
    a = await env.observer.snapshot(pids)
    await asyncio.sleep(args.idle_window)  # the measuring window
    b = await env.observer.snapshot(pids)
    c1 = {label: proc_cpu_seconds(pid) for label, pid in env.observer.pids.items()}
    figures = _idle_figures(a, b, (c0, c1))
    figures["deadlines"] = await _deadlines(env, n, args.spread) if n else {}
    return figures


async def run_idle(args: argparse.Namespace, n: int) -> dict[str, Any]:
    counts: list[int] = sorted(set(args.idle_workers))
    cells: dict[str, Any] = {}
    t0 = time.monotonic()
    for partitions in args.idle_partitions:
        server = start_redis(args.redis_arg)
        procs: list[Any] = []
        try:
            rt = await Runtime(
                server.url, partitions=partitions, lease_seconds=args.lease
            ).connect()
            observer = Observer(server.url, {"redis": server.pid})
            try:
                for k in counts:
                    procs += start_workers(
                        server.url, k - len(procs), partitions=partitions,
                        concurrency=args.worker_concurrency, lease=args.lease,
                    )  # fmt: skip
                    observer.pids = {
                        "redis": server.pid,
                        **{f"worker{i}": w.pid for i, w in enumerate(procs)},
                    }
                    env = Env(server.url, True, rt, observer, procs, Counter(), partitions)
                    cells[f"{k}x{partitions}"] = {
                        "workers": k,
                        "partitions": partitions,
                        **await _cell(env, args, n),
                    }
            finally:
                await observer.close()
                await rt.close()
        finally:
            for w in procs:
                w.stop()
            server.stop()
    result = {
        "bench": "hitl-idle",
        "load_avg": load_average(),
        "cpus": os.cpu_count(),
        "idle_window_s": args.idle_window,
        "cells": cells,
        "completed_once": sum(c["deadlines"].get("expired_once", 0) for c in cells.values()),
        "runs": n * len(cells),
        "problems": [p for c in cells.values() for p in c["deadlines"].get("problems", [])],
        "seconds": round(time.monotonic() - t0, 1),
    }
    if getattr(args, "print", True):
        notes = [
            f"load average at the end: {result['load_avg']} (shared machine)",
            f"idle window {args.idle_window:g} s per cell; {n} timeouts over {args.spread:g} s",
            "commands/s: sent by the workers (counted in each); Redis: executed, scripts' too",
        ]
        print_report("parley idle cost", idle_rows(result), notes, result)
    return result


def idle_rows(result: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for name, c in result["cells"].items():
        d = c["deadlines"]
        late = d.get("lateness_ms", {})
        per = max(c["commands_per_s_per_worker"] or [0])
        rows.append(
            (
                f"idle {name} (workers x partitions): cmds/s total, max/worker",
                f"{c['commands_per_s']:,.0f}, {per:,.0f}",
                "<= 5 / worker",
                verdict(per <= 5),
            )
        )
        rows.append(
            (
                f"  {name}: Redis executed/s, cores workers/Redis",
                f"{c['redis_executed_per_s']:,.0f}, {c['workers_cores']}/{c['redis_cores']}",
                "",
                "",
            )
        )
        if late:
            ok = late["p99"] <= 50 and d["expired_once"] == d["runs"] and d["early"] == 0
            rows.append(
                (
                    f"  {name}: deadline lateness p50/p99 ms ({d['expired_once']}/{d['runs']})",
                    f"{late['p50']}/{late['p99']}",
                    "p99 <= 50",
                    verdict(ok),
                )
            )
    return rows
