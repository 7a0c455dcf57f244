"""``python -m bench.instructions``: instructions per HITL lifecycle, counted by valgrind.

CPU time on a shared VM moves by ±15 % from one run to the next (other tenants, turbo,
cache), so a change worth 5 % cannot be told from noise in a few runs of
``bench.hitl``. Instructions executed do not move with the machine's load: this mode runs
one worker (and, with ``--redis-too``, the redis-server) under ``valgrind --tool=callgrind``
with counting off, runs a warm-up, switches counting on (``callgrind_control -i on``) for N
lifecycles of the bench workflow (start N, wait until all are suspended, answer all, wait
until all completed and compacted) and off again, and prints the instructions each process
executed per lifecycle. The driver (this process) is not counted.

Counts are of this machine's CPython, redis-server and libraries, not of its speed: two
trees compared on one machine give a figure that does not depend on the hour. The run is
~50 times slower than native (a few seconds of worker CPU for the default N = 500).

What a process does by the clock (its timers, a blocking read that times out, Redis'
``serverCron``) is ~50 times more of a window that lasts ~50 times longer, and the window
also holds the wait for the compaction's delay (15 s): the raw figure counts that idle work
as the lifecycles'. After the window, counting runs again for ``--idle-seconds`` with
nothing to do; ``*_less_idle`` subtracts that rate times the window's length. The raw
figure stays printed: an idle rate measured at rest also holds the read loop's timeouts,
which a busy worker does not have, so the subtraction is an estimate, not a count.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from runtime import Runtime
from runtime.store.redis import _keys as keys
from runtime.testing import RedisServer, free_port

from .app import WORKFLOW
from .common import bounded, token_of, wait_for
from .harness import ROOT

# the processes counted run ~50 times slower: polled less often than elsewhere
_POLL = 0.2
_TOTALS = re.compile(rb"^totals:\s*(\d+)", re.MULTILINE)


def _callgrind(out: Path) -> list[str]:
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
    ]


def _control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def _instructions(out: Path, part: int) -> int:
    """The instructions in dump ``part`` of a callgrind output (``callgrind_control -d``
    numbers a process's dumps from 1)."""
    match = _TOTALS.search(out.with_name(f"{out.name}.{part}").read_bytes())
    return int(match.group(1)) if match else 0


def _count_on(pids: list[int]) -> dict[int, float]:
    """Switch counting on in each process; returns when each began (monotonic)."""
    began = {}
    for pid in pids:
        _control(pid, "-i", "on")
        began[pid] = time.monotonic()
    return began


def _count_off(began: dict[int, float]) -> dict[int, float]:
    """Switch counting off and dump what was counted (a new part per process); returns how
    long each process was counted (one ``callgrind_control`` call takes ~0.1 s, a few per
    cent of a short window)."""
    lasted = {}
    for pid, start in began.items():
        lasted[pid] = time.monotonic() - start
        _control(pid, "-i", "off")
        _control(pid, "-d")
    return lasted


async def _lifecycles(rt: Runtime, n: int, partitions: int, timeout: float) -> None:
    run_ids: list[str] = []

    async def start_one(_: int) -> None:
        run_ids.append(await rt.start(WORKFLOW, None, False, False))

    client: Any = rt.store.client  # type: ignore[attr-defined]
    pending = [keys.key("pending", p) for p in range(partitions)]

    async def pending_hooks() -> int:
        async with client.pipeline(transaction=False) as pipe:
            for key in pending:
                pipe.scard(key)
            return sum(await pipe.execute())

    before = await pending_hooks()
    await bounded(range(n), start_one, 64)

    async def all_suspended() -> bool:
        return await pending_hooks() - before >= n

    await wait_for(all_suspended, timeout, "suspensions", every=_POLL)

    async def answer_one(run_id: str) -> None:
        await rt.resume_hook(token_of(run_id), "ok")

    stats = [keys.key("stats", p) for p in range(partitions)]

    async def completed() -> int:
        async with client.pipeline(transaction=False) as pipe:
            for key in stats:
                pipe.hget(key, "completed")
            return sum(int(c or 0) for c in await pipe.execute())

    done = await completed()
    await bounded(run_ids, answer_one, 64)

    async def all_completed() -> bool:
        return await completed() - done >= n

    await wait_for(all_completed, timeout, "completions", every=_POLL)
    # A run is compacted a few seconds after its end (runtime/store/redis/_compaction.py):
    # counted with its lifecycle, so the window holds every compaction of its runs and
    # none of the warm-up's, whatever the window's length.
    streams = [keys.run_keys(r, partitions).events for r in run_ids]

    async def all_compacted() -> bool:
        return not await client.exists(*streams)

    await wait_for(all_compacted, timeout, "compactions", every=_POLL)


async def measure(
    runs: int,
    warmup: int,
    partitions: int,
    redis_too: bool,
    keep: Path | None = None,
    idle_seconds: float = 10.0,
) -> dict[str, Any]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("bench.instructions needs valgrind (Debian: apt-get install valgrind)")
    workdir = Path(tempfile.mkdtemp(prefix="parley-ir-"))
    redis_out = workdir / "redis.out"
    worker_out = workdir / "worker.out"
    server: RedisServer | subprocess.Popen[bytes]
    if redis_too:
        port = free_port()
        server = subprocess.Popen(
            [*_callgrind(redis_out), "redis-server", "--port", str(port), "--save", "",
             "--appendonly", "no", "--maxclients", "10000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"redis://127.0.0.1:{port}"
    else:
        server = RedisServer()
        url = server.url
    worker: subprocess.Popen[bytes] | None = None
    try:
        rt = await _connect(url, partitions)
        worker = subprocess.Popen(
            [*_callgrind(worker_out), sys.executable, "-m", "runtime.cli", "worker",
             "--app", "bench.app", "--redis", url, "--partitions", str(partitions),
             "--log-level", "WARNING"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k != "PARLEY_BENCH_REDIS"},
        )  # fmt: skip
        assert worker.stdout is not None
        await asyncio.get_running_loop().run_in_executor(None, worker.stdout.readline)
        timeout = 120 + runs
        if warmup:
            await _lifecycles(rt, warmup, partitions, timeout)
        counted = [worker.pid] + ([server.pid] if isinstance(server, subprocess.Popen) else [])
        began = _count_on(counted)
        await _lifecycles(rt, runs, partitions, timeout)
        window = _count_off(began)  # part 1: the lifecycles
        began = _count_on(counted)
        await asyncio.sleep(idle_seconds)
        rest = _count_off(began)  # part 2: at rest
        await rt.close()
    finally:
        for proc in (worker, server if isinstance(server, subprocess.Popen) else None):
            if proc is not None:
                proc.terminate()
                proc.wait(60)
        if isinstance(server, RedisServer):
            server.stop()
    result: dict[str, Any] = {
        "bench": "instructions",
        "runs": runs,
        "window_s": round(window[worker.pid], 1),
    }
    processes = [("worker", worker_out, worker.pid)]
    if isinstance(server, subprocess.Popen):
        processes.append(("redis", redis_out, server.pid))
    for name, out, pid in processes:
        in_window, rate = _instructions(out, 1), _instructions(out, 2) / rest[pid]
        result[f"{name}_instructions_per_lifecycle"] = round(in_window / runs)
        result[f"{name}_instructions_per_s_at_rest"] = round(rate)
        result[f"{name}_instructions_per_lifecycle_less_idle"] = round(
            (in_window - rate * window[pid]) / runs
        )
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for path in workdir.iterdir():
            shutil.move(path, keep / path.name)
        result["callgrind_outputs"] = str(keep)
    shutil.rmtree(workdir, ignore_errors=True)
    return result


async def _connect(url: str, partitions: int) -> Runtime:
    deadline = time.monotonic() + 60
    while True:
        try:
            return await Runtime(url, partitions=partitions).connect()
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--runs", type=int, default=500, help="lifecycles counted")
    parser.add_argument("--warmup", type=int, default=100, help="lifecycles not counted")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument(
        "--redis-too", action="store_true", help="count the redis-server's instructions too"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep callgrind's outputs in DIR (read them with callgrind_annotate)",
    )
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=10.0,
        help="how long the processes are counted at rest after the window",
    )
    args = parser.parse_args(argv)
    if args.idle_seconds < 1:
        # the rate is divided by it, and each callgrind_control call takes ~0.1 s
        parser.error(f"--idle-seconds must be at least 1, got {args.idle_seconds}")
    result = asyncio.run(
        measure(
            args.runs, args.warmup, args.partitions, args.redis_too, args.keep, args.idle_seconds
        )
    )
    for name, value in result.items():
        if "per_lifecycle" in name or name.endswith("at_rest"):
            print(f"{name}: {value:,}")
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
