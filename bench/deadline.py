"""Deadline mode: N step_hook timeouts (``on_timeout="return"``) all due within one second.

Runs are started with an absolute due time ``T + i/N`` (T is far enough ahead that every
hook exists before the first is due); nobody answers. Lateness of a deadline =
``hook.expired`` stream id (ms, Redis clock) - the hook's ``expires_at`` (ms, the worker's
clock; same machine). Also measured: the server-side cost of one deadline tick
(``FIRE_DUE`` script, µs) with no deadline pending versus with the N not-yet-due ones.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import orjson

from .app import WORKFLOW
from .common import Env, Row, bench_env, bounded, load_average, pcts, print_report, verdict
from .common import wait_for as wait_until
from .harness import Snapshot, partitions_per_pass


def _tick_cost(before: Snapshot, after: Snapshot, per_pass: int) -> dict[str, float]:
    """Server µs per FIRE_DUE call in a window where it is the only script that runs
    (each call runs one ZRANGE per partition it covers, ``per_pass``; its EVALSHA µs
    include its inner commands). An idle deadline loop sleeps until the next deadline is
    due: a window may hold no call at all (-1 µs)."""
    zrange = after.commands.get("zrange", 0) - before.commands.get("zrange", 0)
    calls = zrange // per_pass
    evalsha = after.commands.get("evalsha", 0) - before.commands.get("evalsha", 0)
    usec = after.usec.get("evalsha", 0) - before.usec.get("evalsha", 0)
    return {
        "calls": calls,
        "usec_per_call": round(usec / calls, 2) if calls and calls == evalsha else -1.0,
        "calls_per_s": round(calls / (after.wall - before.wall), 1),
    }


async def _started(env: Env, n: int, due0: float, concurrency: int) -> list[str]:
    ids: list[str] = []

    async def start_one(i: int) -> None:
        ids.append(await env.rt.start(WORKFLOW, due0 + i / n))

    await bounded(range(n), start_one, concurrency)
    return ids


async def run_deadline(args: argparse.Namespace, n: int) -> dict[str, Any]:
    lead = 3.0 + n / 800  # generous: every hook must exist before the first is due
    async with bench_env(args) as env:
        pids = env.worker_pids
        idle0 = await env.observer.snapshot(pids)
        await asyncio.sleep(1.0)  # measuring window: ticks with no deadline pending
        idle1 = await env.observer.snapshot(pids)
        due0 = time.time() + lead
        ids = await _started(env, n, due0, args.concurrency)
        await wait_until(lambda: _equals(env.suspended(), n), lead + 60, "hooks created")
        ready_at = time.time()
        pend0 = await env.observer.snapshot(pids)
        await asyncio.sleep(max(0.2, min(2.0, due0 - time.time() - 0.3)))  # measuring window
        pend1 = await env.observer.snapshot(pids)
        await wait_until(lambda: _equals(env.suspended(), 0), 120, "every hook expired")
        await wait_until(lambda: _equals(env.queued(), 0), 120, "every run completed")
        events = await env.run_events(ids)
        own = env.own_redis
    late, to_done, problems = _lateness(ids, events)
    lateness = pcts(late)
    early = sum(1 for x in late if x < 0)
    per_pass = partitions_per_pass(args)
    idle_cost = _tick_cost(idle0, idle1, per_pass)
    pending_cost = _tick_cost(pend0, pend1, per_pass)
    result: dict[str, Any] = {
        "bench": "hitl-deadline",
        "runs": n,
        "workers": args.workers,
        "load_avg": load_average(),
        "private_redis": own,
        "all_hooks_created_before_first_due": ready_at < due0,
        "expired_once": n - len(problems),
        "problems": problems[:10],
        "lateness_ms": lateness,
        "early": early,
        "expiry_to_completed_ms": pcts(to_done),
        "tick_cost_no_deadlines": idle_cost,
        "tick_cost_n_not_due": pending_cost,
    }
    ok_late = lateness["p99"] <= 200 if late else None
    # judged only when both windows held enough passes to average: a loop that sleeps
    # until the first deadline is due sends one every few seconds (1-2 a window: noise)
    grows = (
        pending_cost["usec_per_call"] > 2 * max(1.0, idle_cost["usec_per_call"]) + 5
        if idle_cost["calls"] >= 5 and pending_cost["calls"] >= 5
        else None
    )
    done = result["expiry_to_completed_ms"]
    rows: list[Row] = [
        ("hooks expired exactly once", f"{n - len(problems)}/{n}", "all", verdict(not problems)),
        ("all hooks existed before the first was due", str(ready_at < due0), "True", ""),
        ("lateness p50/p99/max ms", _p(lateness, "max"), "p99 <= 200", verdict(ok_late)),
        ("fired early", str(early), "0", verdict(early == 0)),
        ("expiry -> run completed p50/p99/max ms", _p(done, "max"), "", ""),
        (
            "deadline tick, 0 pending (us/call, calls/s)",
            f"{idle_cost['usec_per_call']}, {idle_cost['calls_per_s']}",
            "",
            "",
        ),
        (
            f"deadline tick, {n} not due (us/call)",
            f"{pending_cost['usec_per_call']}",
            "not growing",
            verdict(None if grows is None else not grows),
        ),
    ]
    notes = [
        f"load average at the end: {result['load_avg']} (shared machine)",
        "lateness = hook.expired stream id (ms) - expires_at (ms); 1 ms resolution",
    ]
    print_report("parley deadline benchmark", rows, notes, result)
    return result


async def _equals(value: Any, target: int) -> bool:
    return bool(await value == target)


def _lateness(
    ids: list[str], events: list[list[Any]]
) -> tuple[list[float], list[float], list[str]]:
    late: list[float] = []
    to_done: list[float] = []
    problems: list[str] = []
    for run_id, entries in zip(ids, events, strict=True):
        created = [orjson.loads(f[b"d"]) for _i, f in entries if f[b"t"] == b"hook.created"]
        expired = [_ms(i) for i, f in entries if f[b"t"] == b"hook.expired"]
        done = [(i, f) for i, f in entries if f[b"t"] == b"workflow.completed"]
        if len(created) != 1 or len(expired) != 1 or len(done) != 1:
            problems.append(f"{run_id}: {[f[b't'].decode() for _i, f in entries]}")
            continue
        if orjson.loads(done[0][1][b"d"]).get("result") != "timeout":
            problems.append(f"{run_id}: result {done[0][1][b'd']!r}")
        late.append(expired[0] - int(created[0]["expires_at"]))
        to_done.append(_ms(done[0][0]) - expired[0])
    return late, to_done, problems


def _p(p: dict[str, float], last: str) -> str:
    return f"{p['p50']}/{p['p99']}/{p[last]}"


def _ms(entry_id: bytes) -> int:
    return int(entry_id.split(b"-", 1)[0])
