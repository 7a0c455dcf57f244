"""``python -m bench.engine``: the least CPU a Python worker spends per HITL lifecycle in
the engine alone, without the transport: how much of a worker's figure is Parley's own
Python (issue 14, item 1).

``bench.floor`` measures the other side, a worker's five script calls without the engine.
This bench records one real lifecycle of the bench workflow against a private
redis-server (a worker's consumer in this process executes the start and the resume; the
replies of every script those executions call are kept), then replays that lifecycle
``--runs`` times with no Redis at all: each script call returns its recorded reply at
once, in the recorded order (a call out of that order stops the bench: the engine did
other work than the recording). Everything else is the worker's real code: the
consumer's ``execute`` (claim, replay cache, metrics), the claim's decoding, the replay
index, the workflow and its step, the checkpoint and hook records, the writes' encoding
into an APPLY request, and each reply's decoding.

Left out: packing the calls into RESP and the round trips (``bench.floor``: ~45 µs per
lifecycle), reading the task streams, the asyncio task per execution and the event
loop's turns, and the compaction of the finished run (``bench.hitl`` prints it apart,
~15-25 µs per run). So a worker's figure in ``bench.hitl`` is about this floor plus those.

Printed, median of ``--repeats``: CPU µs per lifecycle of this process
(``time.process_time``), and with ``--instructions`` the instructions per lifecycle
counted by valgrind (the same loop in a child process under callgrind, counting switched on
for the measured lifecycles only): the figure to compare trees by, as in
``bench.instructions``, whatever the hour. With ``--opcodes`` also the bytecodes per
lifecycle, by file and by function (``bench.opcodes``): where in the engine's Python those
instructions go, exact, and in seconds rather than valgrind's minute.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from runtime import Runtime
from runtime._loop import run
from runtime.cli.worker import YOUNG_COLLECTION_EVERY
from runtime.store import Task
from runtime.store.redis import RedisStore
from runtime.store.redis._batch import Arg, Packed
from runtime.testing import RedisServer
from runtime.worker import Worker
from runtime.worker.consumer import TaskConsumer

from .app import WORKFLOW
from .common import token_of
from .harness import ROOT
from .instructions import _callgrind, _control, _instructions
from .opcodes import count_opcodes, summary

PARTITIONS = 16
OPCODE_TOP = 25  # files and functions printed by --opcodes


class Recording:
    """One lifecycle as the engine lived it: the two tasks it executed and the replies of
    the script calls of each, in order; the APPLY requests it sent, to check a replay by."""

    def __init__(self, start: Task, resume: Task) -> None:
        self.tasks = (start, resume)
        self.calls: list[tuple[str, Any]] = []  # (script name, its reply)
        self.applied: list[dict[str, Any]] = []  # each APPLY's request, decoded


def _shape(request: dict[str, Any]) -> list[Any]:
    """What an APPLY asked for, less what differs from one lifecycle to the next (the
    clock): its fields and the kinds of its writes."""
    return [
        sorted(request),
        [op[0] for op in request.get("writes", [])],
        [op[0] for op in request.get("suspension", [])],
        request.get("finish", {}).get("status"),
    ]


class _Replayed:
    """A script that answers from a recording instead of Redis."""

    def __init__(self, name: str, floor: Floor) -> None:
        self.name = name
        self.floor = floor

    async def __call__(self, *, keys: Sequence[str], args: Sequence[Arg | Packed]) -> Any:
        return self.floor.answer(self.name, args)


class _Recorded:
    """A script that calls Redis and keeps its reply."""

    def __init__(self, name: str, script: Any, recording: Recording) -> None:
        self.name = name
        self.script = script
        self.recording = recording

    async def __call__(self, *, keys: Sequence[str], args: Sequence[Arg | Packed]) -> Any:
        reply = await self.script(keys=keys, args=args)
        self.recording.calls.append((self.name, reply))
        if self.name == "apply":
            self.recording.applied.append(orjson.loads(args[0]))  # type: ignore[arg-type]
        return reply


class _NoRedis:
    """Stands where the store's client was: the floor makes no Redis call, and one that
    was not recorded would measure a round trip, not the engine."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the engine floor used the Redis client ({name}) outside the recording")


class Floor:
    """Replays a :class:`Recording` through a worker's consumer, with no Redis."""

    def __init__(self, store: RedisStore, consumer: TaskConsumer, recording: Recording) -> None:
        self.store = store
        self.consumer = consumer
        self.recording = recording
        self._due: deque[tuple[str, Any]] = deque()
        self.requests: list[Any] = []
        scripts = store.scripts
        for name in {name for name, _ in recording.calls}:
            setattr(scripts, name, _Replayed(name, self))
        store._client = _NoRedis()  # type: ignore[assignment]
        # the finished run is not compacted here (bench.hitl counts the compaction apart)
        store._compact_later = lambda run_id: None  # type: ignore[method-assign]

    def answer(self, name: str, args: Sequence[Arg | Packed]) -> Any:
        if not self._due:
            raise RuntimeError(f"a {name} call beyond the recorded lifecycle")
        expected, reply = self._due.popleft()
        if name != expected:
            raise RuntimeError(f"the engine called {name} where the recording has {expected}")
        if name == "apply" and not self.requests:
            self.requests.append(_shape(orjson.loads(args[0])))  # type: ignore[arg-type]
        return reply

    async def lifecycles(self, n: int) -> None:
        consumer, clock = self.consumer, self.store._time
        start, resume = self.recording.tasks
        hits = consumer.replay_cache.hits
        for _ in range(n):
            self._due.extend(self.recording.calls)
            clock._base_mono = time.monotonic()  # Redis' clock stays fresh: no TIME read
            await consumer.execute(start)
            await consumer.execute(resume)
            if self._due:
                raise RuntimeError(f"the lifecycle ended before {len(self._due)} recorded calls")
        if consumer.replay_cache.hits - hits != n:
            raise RuntimeError("a resume did not find its run's replay in the worker's cache")

    def check(self) -> None:
        """The first APPLY of the replays asked what the recording's did."""
        recorded = [_shape(request) for request in self.recording.applied[:1]]
        if self.requests[:1] != recorded:
            raise RuntimeError(
                f"the replayed APPLY {self.requests[:1]} is not the recorded {recorded}"
            )


async def record(url: str) -> tuple[Runtime, TaskConsumer, Recording]:
    """One real lifecycle; returns the runtime, the consumer that executed it and what it
    recorded. The runtime stays open (its store is the floor's)."""
    rt = await Runtime(url, partitions=PARTITIONS).connect()
    store = rt.store
    if not isinstance(store, RedisStore):
        raise SystemExit(f"bench.engine records on Redis, not {type(store).__name__}")
    consumer = Worker(rt, "bench.app", concurrency=1).tasks
    partitions = tuple(range(PARTITIONS))
    run_id = await rt.start(WORKFLOW, None, False, False)
    (start,) = await store.read_tasks(consumer.name, partitions, 1, 1000)
    recording = Recording(start, start)  # (the resume's task is read below)
    scripts = store.scripts
    originals = {name: getattr(scripts, name) for name in ("claim", "apply", "release")}
    for name, script in originals.items():
        setattr(scripts, name, _Recorded(name, script, recording))
    await consumer.execute(start)
    await rt.resume_hook(token_of(run_id), "ok")
    (resume,) = await store.read_tasks(consumer.name, partitions, 1, 1000)
    await consumer.execute(resume)
    for name, script in originals.items():
        setattr(scripts, name, script)
    result = await rt.wait(run_id, timeout=10)
    if result != "ok":
        raise SystemExit(f"the recorded run returned {result!r}, not the answer 'ok'")
    recording.tasks = (start, resume)
    return rt, consumer, recording


async def recorded_floor() -> Floor:
    """The floor of one lifecycle recorded on a private redis-server, stopped once the
    lifecycle is recorded: nothing the floor does talks to Redis. (Its runtime stays open:
    its client is the floor's stub.)"""
    server = RedisServer()
    try:
        rt, consumer, recording = await record(server.url)
    finally:
        server.stop()
    return Floor(rt.store, consumer, recording)  # type: ignore[arg-type]


async def measure(
    runs: int, warmup: int, repeats: int, *, opcodes: int = 0, ready: Any = None
) -> dict[str, Any]:
    """CPU µs per lifecycle, median of ``repeats`` windows of ``runs``; with ``opcodes``,
    the bytecodes per lifecycle over that many more (bench.opcodes). ``ready`` (the child
    under callgrind): called before and after one counted window instead."""
    floor = await recorded_floor()
    recording = floor.recording
    # the collector as a worker process sets it (runtime/cli/worker.py)
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    await floor.lifecycles(warmup)
    floor.check()
    result: dict[str, Any] = {
        "bench": "engine",
        "runs": runs,
        "calls_per_lifecycle": [name for name, _ in recording.calls],
    }
    if ready is not None:
        ready("ready")
        await floor.lifecycles(runs)
        ready("done")
        return result
    samples = []
    for _ in range(repeats):
        began = time.process_time()
        await floor.lifecycles(runs)
        samples.append((time.process_time() - began) / runs * 1e6)
    result["cpu_us_per_lifecycle"] = round(statistics.median(samples), 1)
    result["cpu_us_samples"] = [round(s, 1) for s in samples]
    if opcodes:
        sites = await count_opcodes(lambda: floor.lifecycles(opcodes))
        result["opcodes_per_lifecycle"] = summary(sites, opcodes, OPCODE_TOP)
    return result


def _child(runs: int, warmup: int) -> None:
    """Under callgrind: tell the parent when to switch counting on and off."""

    def ready(word: str) -> None:
        print(word, flush=True)
        sys.stdin.readline()

    run(measure(runs, warmup, 1, ready=ready))


def instructions(runs: int, warmup: int) -> int:
    """Instructions per lifecycle of the floor's loop, counted by callgrind in a child."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="parley-engine-") as workdir:
        out = Path(workdir) / "engine.out"
        child = subprocess.Popen(
            [*_callgrind(out), sys.executable, "-m", "bench.engine", "--child",
             "--runs", str(runs), "--warmup", str(warmup)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert child.stdin is not None and child.stdout is not None
        try:
            for word, switch in (("ready", "on"), ("done", "off")):
                line = child.stdout.readline().strip()
                if line != word:
                    raise SystemExit(f"bench.engine's child said {line!r}, expected {word!r}")
                _control(child.pid, "-i", switch)
                if switch == "off":
                    _control(child.pid, "-d")
                child.stdin.write("\n")
                child.stdin.flush()
            child.wait(120)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        return round(_instructions(out, 1) / runs)


def _print_opcodes(counted: dict[str, Any]) -> None:
    print(f"engine bytecodes per lifecycle: {counted['opcodes']:,}"
          f" ({counted['runtime_opcodes']:,} in runtime/)")  # fmt: skip
    for heading in ("files", "functions"):
        print(f"  by {heading[:-1]}:")
        for where, n in counted[heading].items():
            print(f"    {n:8,.1f}  {where}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__)
    parser.add_argument("--runs", type=int, default=20_000, help="lifecycles per window")
    parser.add_argument("--warmup", type=int, default=2_000, help="lifecycles not measured")
    parser.add_argument("--repeats", type=int, default=3, help="windows; the median is printed")
    parser.add_argument(
        "--instructions",
        type=int,
        metavar="N",
        default=0,
        help="also count instructions per lifecycle over N lifecycles with valgrind",
    )
    parser.add_argument(
        "--opcodes",
        type=int,
        metavar="N",
        default=0,
        help="also count the bytecodes per lifecycle over N lifecycles, by file and function",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("runs", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("instructions", "opcodes"):
        if getattr(args, name) < 0:
            parser.error(f"--{name} must be 0 (off) or more, got {getattr(args, name)}")
    if args.child:
        _child(args.runs, args.warmup)
        return
    result = run(measure(args.runs, args.warmup, args.repeats, opcodes=args.opcodes))
    if args.instructions:
        result["instructions_per_lifecycle"] = instructions(args.instructions, 200)
    print(f"engine CPU µs per lifecycle: {result['cpu_us_per_lifecycle']} "
          f"(samples {result['cpu_us_samples']}, {args.runs:,} lifecycles each)")  # fmt: skip
    if "instructions_per_lifecycle" in result:
        print(f"engine instructions per lifecycle: {result['instructions_per_lifecycle']:,}")
    if "opcodes_per_lifecycle" in result:
        _print_opcodes(result["opcodes_per_lifecycle"])
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
