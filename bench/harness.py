"""Processes and server-side measurements for the benchmark: a private redis-server, real
worker processes, and snapshots of Redis command counts, memory and CPU."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis

from runtime.store.redis import SCRIPT_NAMES, script_source
from runtime.testing import RedisServer, WorkerProcess

from .app import REPORT_KEY

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _lua_commands() -> frozenset[str]:
    """Commands the engine's Lua scripts call (counted by INFO commandstats, but not
    top-level commands: they run inside one EVALSHA)."""
    text = "\n".join(script_source(name) for name in SCRIPT_NAMES)
    return frozenset(m.lower() for m in re.findall(r"redis\.call\('([A-Za-z]+)'", text))


LUA_COMMANDS = _lua_commands()
SETUP_COMMANDS = frozenset({"hello", "ping", "auth", "select"})


def _split_args(args: list[str]) -> list[str]:
    """``--name=value`` -> ``--name value`` (redis-server's form)."""
    out: list[str] = []
    for arg in args:
        out += arg.split("=", 1)
    return out


def start_redis(extra: list[str] | None = None) -> RedisServer:
    """A private redis-server (no persistence), so command counts and memory deltas are
    the benchmark's alone; ``extra`` as ``--name=value``."""
    return RedisServer("--maxclients", "10000", *_split_args(extra or []))


def start_workers(
    redis_url: str, count: int, *, partitions: int, concurrency: int, lease: float
) -> list[WorkerProcess]:
    env = {**os.environ, "PARLEY_BENCH_REDIS": redis_url}
    workers = [
        WorkerProcess(
            redis_url,
            "bench.app",
            partitions=partitions,
            concurrency=concurrency,
            lease=lease,
            env=env,
            log_level="WARNING",
            cwd=ROOT,
            wait=False,
        )
        for _ in range(count)
    ]  # started together, then awaited: they become ready in parallel
    try:
        for w in workers:
            w.wait_ready()
    except BaseException:
        for w in workers:
            w.stop()
        raise
    return workers


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc; 0 if it is gone)."""
    return sum(proc_cpu_split(pid))


def proc_cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process, apart (from /proc; 0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine spent busy (from /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def proc_rss_kb(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_KB
    except OSError:
        return 0


@dataclass
class Snapshot:
    """Server-wide and per-process counters at one moment."""

    wall: float
    commands: dict[str, int]  # INFO commandstats calls, by lower-case command name
    usec: dict[str, int]  # INFO commandstats usec, by command
    used_memory: int
    used_memory_dataset: int  # used_memory minus overhead (client buffers, etc.)
    redis_cpu: float
    redis_cpu_system: float
    cpu: dict[str, float]  # process label -> CPU seconds
    cpu_system: dict[str, float]  # process label -> of those, in the kernel
    machine_busy: float  # CPU seconds the whole machine was busy
    observer: dict[str, int]  # the observer's own commands so far, by command
    workers: list[dict[str, Any]] = field(default_factory=list)  # the reporters' last reports


class Observer:
    """The benchmark's own connection for measuring: counts what it sends, so its commands
    can be subtracted from the server-wide command counts."""

    def __init__(self, url: str, pids: dict[str, int]) -> None:
        self.client = aioredis.Redis.from_url(url)
        self.sent: dict[str, int] = {}
        self.pids = pids  # label -> pid, for CPU time and RSS

    def _count(self, name: str, n: int = 1) -> None:
        self.sent[name] = self.sent.get(name, 0) + n

    async def close(self) -> None:
        await self.client.aclose()

    async def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        async with self.client.pipeline(transaction=False) as pipe:
            for cmd in commands:
                pipe.execute_command(*cmd)
                self._count(str(cmd[0]).lower())
            return list(await pipe.execute())

    async def sum_of(self, command: str, keys: list[str]) -> int:
        return sum(int(v) for v in await self.pipeline([(command, k) for k in keys]))

    async def worker_reports(self, pids: list[int], fresh_after: float = 0.0) -> list[Any]:
        """The workers' latest reports, waiting (bounded) for ones newer than ``fresh_after``."""
        deadline = time.monotonic() + 5
        while True:
            raw = await self.pipeline([("GET", f"{REPORT_KEY}{pid}") for pid in pids])
            reports = [orjson.loads(r) if r else None for r in raw]
            if all(r is not None and r["ts"] > fresh_after for r in reports):
                return reports
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker reports missing or stale: {reports}")
            await _sleep(0.05)

    async def snapshot(self, worker_pids: list[int]) -> Snapshot:
        wall = time.time()
        # Everything this observer sent before reading commandstats is in it; nothing after.
        observed = dict(self.sent)
        stats: Any = await self.client.info("commandstats")
        self._count("info", 3)
        memory: Any = await self.client.info("memory")
        cpu: Any = await self.client.info("cpu")
        commands: dict[str, int] = {}
        usec: dict[str, int] = {}
        for key, value in stats.items():
            name = key.removeprefix("cmdstat_").lower()
            commands[name] = int(value["calls"])
            usec[name] = int(value["usec"])
        reports = await self.worker_reports(worker_pids, fresh_after=wall)
        splits = {label: proc_cpu_split(pid) for label, pid in self.pids.items()}
        return Snapshot(
            wall=wall,
            commands=commands,
            usec=usec,
            used_memory=int(memory["used_memory"]),
            used_memory_dataset=int(memory["used_memory_dataset"]),
            redis_cpu=float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
            redis_cpu_system=float(cpu["used_cpu_sys"]),
            cpu={label: sum(split) for label, split in splits.items()},
            cpu_system={label: system for label, (_, system) in splits.items()},
            machine_busy=machine_busy_seconds(),
            observer=observed,
            workers=reports,
        )


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def command_breakdown(before: Snapshot, after: Snapshot, per_pass: int = 1) -> dict[str, Any]:
    """Server-side commands between two snapshots, split into the lifecycle's top-level
    commands, commands run inside Lua scripts, background loops (deadline ticks,
    heartbeats, reclaim) and the benchmark's own (observer, reporters)."""
    calls = delta(after.commands, before.commands)
    own = delta(after.observer, before.observer)
    for name, n in own.items():
        calls[name] = calls.get(name, 0) - n
    reporter = calls.pop("set", 0)
    # FIRE_DUE calls one ZRANGE per partition it covers (``per_pass``: all of them on one
    # Redis, in the pass every few seconds; a pass at a due time covers only the partitions
    # due, so with deadlines firing this undercounts) and is the only script that calls
    # ZRANGE; HEARTBEAT is the only one that calls XCLAIM.
    fire_due = calls.get("zrange", 0) // per_pass
    heartbeats = calls.get("xclaim", 0)
    reclaim = calls.pop("xautoclaim", 0)  # inside the RECLAIM script: one per partition
    top: dict[str, int] = {}
    lua: dict[str, int] = {}
    setup: dict[str, int] = {}
    for name, n in calls.items():
        if n <= 0:
            continue
        if name in SETUP_COMMANDS or name.startswith(("script|", "client|")):
            setup[name] = n  # a new connection's handshake, health checks, script loading
        else:
            (lua if name in LUA_COMMANDS else top)[name] = n
    top["evalsha"] = top.get("evalsha", 0) - fire_due - heartbeats
    return {
        "top_level": {k: v for k, v in top.items() if v},
        "inside_lua": lua,
        "background": {
            "fire_due_scripts": fire_due,
            "heartbeat_scripts": heartbeats,
            "xautoclaim": reclaim,
        },
        "connection_setup": setup,
        "bench_reporter_set": reporter,
    }


def partitions_per_pass(args: Any) -> int:
    """Partitions one deadline pass (one FIRE_DUE call) covers: all on a single Redis, one
    on a cluster (a script's keys share a slot)."""
    return 1 if (args.redis or "").startswith("redis+cluster") else int(args.partitions)
