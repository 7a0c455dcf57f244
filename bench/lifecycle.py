"""The HITL lifecycle benchmark (main and scale modes).

Phases, each measured between server-side snapshots (see :mod:`bench.harness`):

1. idle window: workers up, no runs — background polling rate, idle RSS and task count;
2. start: N runs started (bounded concurrency, in batches) until all N are suspended on
   their ``step_hook`` (checkpoint of 100 bytes saved) — start rate, memory per run;
3. probe: with the N runs still suspended, ``probe`` more runs are started, then answered
   one by one at a light paced rate; latency = answer accepted (``resume_hook`` returned)
   → the driver reads ``workflow.completed`` from the run's stream (blocking XREAD);
4. resume: the N runs are answered (bounded concurrency) until all completed — resume
   rate; per-run latency under load from the Redis stream ids (ms resolution).

Then every run's event log is read back and checked: exactly one ``hook.created``, one
``hook.received`` and one ``workflow.completed`` with the answer as result.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis

from runtime.store.redis import keys as redis_keys
from runtime.store.redis._compaction import COMPACT_BATCH_SECONDS, COMPACT_DELAY_SECONDS

from .app import WORKFLOW
from .common import Env, bounded, token_of, wait_for
from .harness import Snapshot

ANSWER = "ok"


@dataclass
class Options:
    runs: int = 2000
    batch: int = 0  # 0: one batch
    concurrency: int = 256  # driver calls in flight (starts, answers)
    probe: int = 100
    probe_rate: float = 200.0  # answers per second during the light-load probe
    idle_window: float = 2.0
    warmup: int = 200  # full lifecycles before measuring (connection pools, script cache)
    on_created: bool = False
    defer: bool = False  # save_step_checkpoint(defer=True)


@dataclass
class Phase:
    before: Snapshot
    after: Snapshot
    driver_before: Counter[str]
    driver_after: Counter[str]


async def snap(env: Env) -> tuple[Snapshot, Counter[str]]:
    return await env.observer.snapshot(env.worker_pids), Counter(env.driver_round_trips)


async def run_lifecycles(env: Env, opts: Options) -> dict[str, Any]:
    rt = env.rt
    n = opts.runs
    if opts.warmup:
        await _warm_up(env, opts)
    idle0, _ = await snap(env)
    await asyncio.sleep(opts.idle_window)  # a measurement window, not a wait for a condition
    s0, d0 = await snap(env)

    # phase: start ------------------------------------------------------------------------
    run_ids: list[str] = []

    async def start_one(_: int) -> None:
        run_ids.append(await rt.start(WORKFLOW, None, opts.on_created, opts.defer))

    batch = opts.batch or n
    t_start = time.time()
    for first in range(0, n, batch):
        await bounded(range(first, min(n, first + batch)), start_one, opts.concurrency)
        target = len(run_ids)

        async def all_suspended(target: int = target) -> bool:
            return await env.suspended() >= target

        await wait_for(all_suspended, 60 + batch / 100, "suspensions")
    s1, d1 = await snap(env)
    settled = await _settled_reports(env, idle0.workers)
    key_bytes = await _key_bytes(env, run_ids[:: max(1, n // 50)])

    # phase: light-load probe -------------------------------------------------------------
    probe = await _probe(env, opts, n) if opts.probe else {}

    # phase: resume -----------------------------------------------------------------------
    s2, d2 = await snap(env)

    async def answer_one(run_id: str) -> None:
        await rt.resume_hook(token_of(run_id), ANSWER)

    t_answer = time.time()
    for first in range(0, n, batch):
        await bounded(run_ids[first : first + batch], answer_one, opts.concurrency)
    await wait_for(lambda: _all_done(env), 60 + n / 100, "completions")
    s3, d3 = await snap(env)
    # A finished run is compacted a few seconds after its end (runtime/store/redis/
    # _compaction.py): its bytes are read once the runs' logs have made way for archives.
    sample = run_ids[:: max(1, n // 50)]
    # Not polled before the runs are due: each poll's EXISTS of every run costs Redis CPU
    # that this window charges to compaction (~4 us per run for 13 polls of 2,100 runs).
    await asyncio.sleep(COMPACT_DELAY_SECONDS + COMPACT_BATCH_SECONDS)
    await wait_for(lambda: env.all_compacted(run_ids), 60, "compactions", every=0.5)
    s4, d4 = await snap(env)
    finished_bytes = await _key_bytes(env, sample, ("run", "events", "ckpt", "hooks"))
    finished_bytes["archive_share"] = await _segment_share(env, run_ids, sample)
    config = await redis_settings(env)

    check = await verify(env, run_ids)
    return {
        "runs": n,
        "t_start": t_start,
        "t_answer": t_answer,
        "idle": (idle0, s0),
        "start": Phase(s0, s1, d0, d1),
        "settled_workers": settled,
        "resume": Phase(s2, s3, d2, d3),
        # the compactions of every run of the start, probe and resume phases: a run's work
        # too, done after its end (the window is mostly idle: see bench/summary.py)
        "compaction": Phase(s3, s4, d3, d4),
        "probe": probe,
        "check": check,
        "key_bytes": key_bytes,
        # every run of the start, probe and resume phases has finished by s3
        "finished": {
            "runs": n + opts.probe,
            "dataset_delta": s4.used_memory_dataset - s0.used_memory_dataset,
            "used_memory_delta": s4.used_memory - s0.used_memory,
            "key_bytes": finished_bytes,
        },
        "redis_config": config,
    }


REDIS_SETTINGS = (
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "maxmemory-policy",
)
REDIS_DEFAULTS = {
    "stream-node-max-bytes": "4096",
    "stream-node-max-entries": "100",
    "hash-max-listpack-entries": "512",
    "hash-max-listpack-value": "64",
    "maxmemory-policy": "noeviction",
}


async def redis_settings(env: Env) -> dict[str, str]:
    """The memory-relevant settings in effect (CONFIG GET; read after the last snapshot, so
    these commands are not in any measured window)."""
    out: dict[str, str] = {}
    for name in REDIS_SETTINGS:
        reply: Any = await env.observer.client.config_get(name)
        for key, value in reply.items():
            out[_text(key)] = _text(value)
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _key_bytes(
    env: Env, sample: list[str], names: tuple[str, ...] = ("run", "events", "ckpt", "hooks")
) -> dict[str, float]:
    """Average MEMORY USAGE of each key of a run (a sample of runs)."""
    out: dict[str, float] = {}
    for name in names:
        keys = [getattr(redis_keys.run_keys(r, env.partitions), name) for r in sample]
        sizes = await env.observer.pipeline([("MEMORY", "USAGE", k, "SAMPLES", 0) for k in keys])
        out[name] = round(sum(int(x or 0) for x in sizes) / max(1, len(sizes)))
    return out


async def _segment_share(env: Env, run_ids: list[str], sample: list[str]) -> float:
    """A finished run's share of its archive: MEMORY USAGE of the segments the sample's runs
    are in (runtime/store/redis/_archive.py) ÷ the runs (of ``run_ids``) that name them."""
    segment_of: dict[str, str] = {}  # run id -> the key of the segment its hash names
    for first in range(0, len(run_ids), 1000):
        chunk = [redis_keys.run_keys(r, env.partitions) for r in run_ids[first : first + 1000]]
        replies = await env.observer.pipeline([("HGET", keys.run, "archive") for keys in chunk])
        for keys, segment_id in zip(chunk, replies, strict=True):
            if segment_id is not None:
                segment_of[keys.run_id] = redis_keys.key(
                    "segment", keys.partition, segment_id=_text(segment_id)
                )
    segments = sorted({segment_of[r] for r in sample if r in segment_of})
    if not segments:
        return 0.0
    sizes = await env.observer.pipeline([("MEMORY", "USAGE", k, "SAMPLES", 0) for k in segments])
    runs = Counter(segment_of.values())
    return round(sum(int(x or 0) for x in sizes) / sum(runs[k] for k in segments), 1)


async def _warm_up(env: Env, opts: Options) -> None:
    ids: list[str] = []

    async def start_one(_: int) -> None:
        ids.append(await env.rt.start(WORKFLOW, None, opts.on_created, opts.defer))

    async def answer_one(run_id: str) -> None:
        await env.rt.resume_hook(token_of(run_id), ANSWER)

    await bounded(range(opts.warmup), start_one, opts.concurrency)
    await wait_for(lambda: _at_least(env.suspended(), len(ids)), 120, "warm-up suspensions")
    await bounded(ids, answer_one, opts.concurrency)
    await wait_for(lambda: _all_done(env), 120, "warm-up completions")


async def _settled_reports(env: Env, idle: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workers' reports once the executions that suspended have ended.

    A run counts as suspended when its hook enters the pending set, which happens inside
    the suspension script; the execution's task then still acknowledges and unwinds. Read
    at that instant, the task count includes those last moments, so a worker that holds
    no task per suspended run would look as if it did. The reading that answers "does a
    suspended run hold a task?" is taken once the task streams are empty and the count is
    back to the idle one, or after 5 s: a count still above idle then is reported as is.
    """
    await wait_for(lambda: _equals(env.queued(), 0), 30, "suspended tasks acknowledged")
    deadline = time.monotonic() + 5
    while True:
        reports: list[dict[str, Any]] = await env.observer.worker_reports(
            env.worker_pids, fresh_after=time.time()
        )
        settled = all(r["tasks"] <= i["tasks"] for r, i in zip(reports, idle, strict=True))
        if settled or time.monotonic() > deadline:
            return reports


async def _equals(value: Any, target: int) -> bool:
    return bool(await value == target)


async def _at_least(value: Any, target: int) -> bool:
    return bool(await value >= target)


async def _all_done(env: Env) -> bool:
    return await env.queued() == 0 and await env.suspended() == 0


async def verify(env: Env, run_ids: list[str]) -> dict[str, Any]:
    """Read every run's log: each completed exactly once with the answer; stream-id times."""
    problems: list[str] = []
    suspended_ms: list[int] = []
    received_ms: list[int] = []
    completed_ms: list[int] = []
    for run_id, entries in zip(run_ids, await env.run_events(run_ids), strict=True):
        types = Counter(fields[b"t"].decode() for _id, fields in entries)
        stamps = {fields[b"t"].decode(): _ms(entry_id) for entry_id, fields in entries}
        if types["workflow.completed"] != 1 or types["hook.created"] != 1:
            problems.append(f"{run_id}: {dict(types)}")
            continue
        if types["hook.received"] != 1 or types["step.suspended"] != 1:
            problems.append(f"{run_id}: {dict(types)}")
            continue
        done = next(f for _i, f in entries if f[b"t"] == b"workflow.completed")
        if orjson.loads(done[b"d"]).get("result") != ANSWER:
            problems.append(f"{run_id}: result {done[b'd']!r}")
        suspended_ms.append(stamps["step.suspended"])
        received_ms.append(stamps["hook.received"])
        completed_ms.append(stamps["workflow.completed"])
    return {
        "completed_once": len(run_ids) - len(problems),
        "problems": problems[:10],
        "suspended_ms": suspended_ms,
        "received_ms": received_ms,
        "completed_ms": completed_ms,
    }


def _ms(entry_id: bytes) -> int:
    return int(entry_id.split(b"-", 1)[0])


async def _probe(env: Env, opts: Options, already: int) -> dict[str, Any]:
    """Light load: answer ``opts.probe`` suspended runs at a paced rate; per answer, time
    from resume_hook's return (accepted) to the driver reading workflow.completed."""
    rt = env.rt
    ids = [await rt.start(WORKFLOW, None, opts.on_created, opts.defer) for _ in range(opts.probe)]
    total = already + len(ids)
    await wait_for(lambda: _at_least(env.suspended(), total), 60, "probe suspensions")
    keys = [redis_keys.run_keys(r, env.partitions).events for r in ids]
    lasts = await env.observer.pipeline([("XREVRANGE", k, "+", "-", "COUNT", 1) for k in keys])
    accepted: list[float] = []
    sent: list[float] = []
    reader = aioredis.Redis.from_url(env.url, max_connections=64)
    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.05
    try:

        async def one(i: int) -> None:
            await asyncio.sleep(max(0.0, t0 + i / opts.probe_rate - loop.time()))
            last: Any = lasts[i][0][0]
            t_send = time.perf_counter()
            await rt.resume_hook(token_of(ids[i]), ANSWER)
            t_acc = time.perf_counter()
            while True:
                reply: Any = await reader.xread({keys[i]: last}, count=16, block=10_000)
                if not reply:
                    raise TimeoutError(f"probe run {ids[i]} did not complete")
                entries = reply[0][1]
                last = entries[-1][0]
                if any(f[b"t"] == b"workflow.completed" for _i, f in entries):
                    break
            t_done = time.perf_counter()
            accepted.append((t_done - t_acc) * 1000)
            sent.append((t_done - t_send) * 1000)

        await asyncio.gather(*(one(i) for i in range(len(ids))))
    finally:
        await reader.aclose()
    return {"accepted_ms": accepted, "sent_ms": sent, "rate": opts.probe_rate}


def settings_text(config: dict[str, str]) -> str:
    """``stream-node-max-bytes=4096, at Redis defaults`` or the settings that differ."""
    changed = {k: v for k, v in config.items() if REDIS_DEFAULTS.get(k) != v}
    head = f"stream-node-max-bytes={config.get('stream-node-max-bytes', '?')}"
    if not changed:
        return f"{head}, all at Redis 7.0 defaults"
    return head + ", NOT default: " + ", ".join(f"{k}={v}" for k, v in changed.items())
