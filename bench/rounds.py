"""Rounds mode: what one resume costs at round 1, 100 and 1,000 of the same run.

One ``bench_chat`` run (``bench/app.py``): a step that loops ``step_hook`` and a small
checkpoint, like a chat. The driver answers round after round; around each measured round
``k`` it answers ``--samples`` rounds (k, k+1, ...) one at a time and measures, per resume:

- latency: ``resume_hook`` returned (answer accepted) -> the driver's blocking ``XREAD`` on
  the run's stream returns the next ``step.suspended`` (the next round's hook recorded);
- worker CPU: the worker's own ``time.process_time()`` (reported by ``bench.app``) over the
  window, minus its idle rate (measured first) times the window;
- Redis: ``INFO commandstats`` calls (top level: the driver's XREADs, the observer's reads,
  deadline ticks and heartbeats are not counted; inside scripts: minus the idle rate),
  ``used_cpu`` minus the idle rate, and the bytes the worker read from Redis (counted in
  the worker where redis-py reads its socket, minus the idle rate).

The run has one partition (one run lives in one partition; fewer idle deadline ticks to
subtract). At the end the run's log is read back: every round's hook created and answered
once, the run completed once with the number of rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from typing import Any

import redis.asyncio as aioredis

from runtime.ids import make_token
from runtime.store.redis import keys as redis_keys

from .app import CHAT_WORKFLOW, chat_hook_id
from .common import Env, Row, bench_env, load_average, print_report, verdict
from .harness import Snapshot, command_breakdown

DEFAULT_POINTS = (1, 100, 1000)


class Chat:
    """The driver's side of one chat run: answer a round, wait for the next suspension."""

    def __init__(self, env: Env, run_id: str) -> None:
        self.env = env
        self.run_id = run_id
        self.stream = redis_keys.run_keys(run_id, env.partitions).events
        self.reader = aioredis.Redis.from_url(env.url)
        self.last: Any = "0"
        self.turn = 0  # the next round to answer (0-based)

    async def close(self) -> None:
        await self.reader.aclose()

    async def until(self, *types: bytes) -> None:
        while True:
            reply: Any = await self.reader.xread({self.stream: self.last}, count=64, block=60_000)
            if not reply:
                raise TimeoutError(f"run {self.run_id}: no {types} within 60 s")
            entries = reply[0][1]
            self.last = entries[-1][0]
            if any(fields[b"t"] in types for _id, fields in entries):
                return

    async def answer(self) -> float:
        """Answer the current round; ms from accepted to the next round's suspension (or
        the run's completion)."""
        token = make_token(self.run_id, chat_hook_id(self.turn))
        await self.env.rt.resume_hook(token, f"a{self.turn}")
        accepted = time.perf_counter()
        await self.until(b"step.suspended", b"workflow.completed")
        self.turn += 1
        return (time.perf_counter() - accepted) * 1000


def _rates(a: Snapshot, b: Snapshot) -> dict[str, float]:
    """Idle rates per second: worker CPU, worker bytes read, Redis CPU."""
    wa, wb = a.workers[0], b.workers[0]
    dt = wb["ts"] - wa["ts"]
    return {
        "worker_cpu": (wb["cpu"] - wa["cpu"]) / dt,
        "worker_bytes": (wb["bytes_in"] - wa["bytes_in"]) / dt,
        "redis_cpu": (b.redis_cpu - a.redis_cpu) / (b.wall - a.wall),
        # deadline ticks' and heartbeats' inner commands (their EVALSHAs are told apart)
        "lua_commands": _lua(a, b) / (b.wall - a.wall),
    }


def _lua(a: Snapshot, b: Snapshot) -> int:
    return sum(command_breakdown(a, b)["inside_lua"].values())


def _per_resume(
    a: Snapshot, b: Snapshot, idle: dict[str, float], n: int, latencies: list[float]
) -> dict[str, Any]:
    wa, wb = a.workers[0], b.workers[0]
    dt = wb["ts"] - wa["ts"]
    cpu = (wb["cpu"] - wa["cpu"] - idle["worker_cpu"] * dt) / n
    read = (wb["bytes_in"] - wa["bytes_in"] - idle["worker_bytes"] * dt) / n
    redis_cpu = (b.redis_cpu - a.redis_cpu - idle["redis_cpu"] * (b.wall - a.wall)) / n
    cmds = command_breakdown(a, b)
    top: Counter[str] = Counter(cmds["top_level"])
    top.pop("xread", None)  # the driver waiting for the suspension: the benchmark's own
    return {
        "samples": n,
        "latency_ms_median": round(statistics.median(latencies), 2),
        "latency_ms": [round(x, 2) for x in latencies],
        "worker_cpu_us": round(cpu * 1e6),
        "redis_cpu_us": round(redis_cpu * 1e6),
        "worker_bytes_read": round(read),
        "commands_top_level": round(sum(top.values()) / n, 2),
        "commands_inside_lua": round(
            (_lua(a, b) - idle["lua_commands"] * (b.wall - a.wall)) / n, 1
        ),
        "commands": {k: round(v / n, 2) for k, v in sorted(top.items())},
    }


async def run_rounds(args: argparse.Namespace) -> dict[str, Any]:
    points: list[int] = sorted(set(args.round_points or DEFAULT_POINTS))
    samples: int = args.samples
    total = points[-1] + samples  # one more round after the last window: it completes the run
    cell = argparse.Namespace(**{**vars(args), "workers": 1, "partitions": 1})
    measured: dict[str, Any] = {}
    t0 = time.monotonic()
    async with bench_env(cell) as env:
        pids = env.worker_pids
        a = await env.observer.snapshot(pids)
        await asyncio.sleep(args.idle_window)  # a measuring window: the idle rates
        b = await env.observer.snapshot(pids)
        idle = _rates(a, b)
        run_id = await env.rt.start(CHAT_WORKFLOW, total)
        chat = Chat(env, run_id)
        try:
            await chat.until(b"step.suspended")
            for point in points:
                while chat.turn < point - 1:  # rounds before the window: not measured
                    await chat.answer()
                before = await env.observer.snapshot(pids)
                latencies = [await chat.answer() for _ in range(samples)]
                after = await env.observer.snapshot(pids)
                measured[str(point)] = _per_resume(before, after, idle, samples, latencies)
            while chat.turn < total:
                await chat.answer()
        finally:
            await chat.close()
        events = (await env.run_events([run_id]))[0]
    types = Counter(fields[b"t"].decode() for _id, fields in events)
    problems = [
        f"{run_id}: {dict(types)}"
        for _ in [0]
        if types["workflow.completed"] != 1
        or types["hook.created"] != total
        or types["hook.received"] != total
    ]
    result: dict[str, Any] = {
        "bench": "hitl-rounds",
        "runs": 1,
        "rounds": total,
        "samples": samples,
        "load_avg": load_average(),
        "completed_once": 0 if problems else 1,
        "problems": problems,
        "events_in_log": len(events),
        "idle_rates_subtracted": {k: round(v, 6) for k, v in idle.items()},
        "per_resume": measured,
        "seconds": round(time.monotonic() - t0, 1),
    }
    rows = rounds_rows(result)
    notes = [
        f"load average at the end: {result['load_avg']} (shared machine)",
        f"one run, 1 worker, 1 partition; {samples} resumes measured from each round on",
        "latency: resume_hook returned -> XREAD returned the next step.suspended",
    ]
    if getattr(args, "print", True):
        print_report("parley resume cost by round", rows, notes, result)
    return result


def rounds_rows(result: dict[str, Any]) -> list[Row]:
    rows: list[Row] = [
        ("chat run completed exactly once", str(result["completed_once"]), "1",
         verdict(result["completed_once"] == 1)),
    ]  # fmt: skip
    per = result["per_resume"]
    for point, m in per.items():
        rows.append(
            (
                f"resume at round {point}: ms p50 / worker us / Redis us",
                f"{m['latency_ms_median']} / {m['worker_cpu_us']:,} / {m['redis_cpu_us']:,}",
                "",
                "",
            )
        )
        rows.append(
            (
                f"  round {point}: commands (+ in Lua) / bytes read",
                f"{m['commands_top_level']} (+{m['commands_inside_lua']}) / "
                f"{m['worker_bytes_read']:,}",
                "",
                "",
            )
        )
    if len(per) >= 2:
        first, last = per[min(per, key=int)], per[max(per, key=int)]
        ratio = last["latency_ms_median"] / max(0.001, first["latency_ms_median"])
        rows.append(
            (
                f"resume latency round {max(per, key=int)} / round {min(per, key=int)}",
                f"{ratio:.1f}x",
                "<= 2x",
                verdict(ratio <= 2),
            )
        )
    return rows
