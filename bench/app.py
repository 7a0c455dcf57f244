"""The workflow the benchmark runs, and the probes it installs in each worker process.

Imported by ``parley worker --app bench.app``. When ``$PARLEY_BENCH_REDIS`` is set (the
benchmark sets it for its workers), importing this module also

- counts every client round trip of the process (per command name; a pipeline is one
  round trip, counted as ``PIPELINE``; an XREADGROUP that returned nothing is also counted
  as ``XREADGROUP:empty`` — idle polling);
- starts one reporter task that writes ``bench:worker:<pid>`` (a plain string key, SET —
  a command the engine never uses, so the benchmark can subtract it) every 200 ms:
  the asyncio task count, the thread count, and the round-trip counters.

The reporter is one asyncio task per process, whatever the number of runs; the task count
it reports includes itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections import Counter
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from runtime import (
    STEP_HOOK_TIMEOUT,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from runtime.store.redis import script_source
from runtime.store.redis._batch import Batcher

WORKFLOW = "bench_hitl"
# orjson.dumps({"state": "x" * 88}) is exactly 100 bytes: the checkpoint the targets name.
CHECKPOINT: dict[str, str] = {"state": "x" * 88}
REPORT_KEY = "bench:worker:"
REPORT_EVERY = 0.2

round_trips: Counter[str] = Counter()
# Bytes this process read from Redis (every connection but the reporter's, which is the
# benchmark's own): replies, counted where redis-py's parsers read the socket.
bytes_in = 0
_BACKGROUND_SHAS = {
    hashlib.sha1(script_source(name).encode()).hexdigest() for name in ("fire_due", "heartbeat")
}


ON_CREATED_KEY = "bench:on_created"
_on_created_client: aioredis.Redis | None = None  # push mode: records when on_created ran


async def _hand_out(token: str) -> None:
    """The ``on_created`` of ``notify=True`` runs: nothing (``--on-created``), or, in push
    mode, record when it ran (HSET bench:on_created token unix-time)."""
    if _on_created_client is not None:
        await _on_created_client.hset(ON_CREATED_KEY, token, repr(time.time()))


@step
async def converse(due_at: float | None, notify: bool, defer: bool) -> Any:
    if await load_step_checkpoint() is None:
        # defer=True: written with the hook's creation (one round trip fewer); the default
        # makes the checkpoint durable on return.
        await save_step_checkpoint(CHECKPOINT, defer=defer)
    # A deadline mode run passes an absolute due time; the timeout is computed when the hook
    # is created (on re-execution the hook already exists and the value is not used).
    timeout = None if due_at is None else max(0.001, due_at - time.time())
    answer = await step_hook(
        "answer",
        timeout=timeout,
        on_timeout="return",
        on_created=_hand_out if notify else None,
    )
    return "timeout" if answer is STEP_HOOK_TIMEOUT else answer


@workflow(name=WORKFLOW)
async def bench_hitl(due_at: float | None = None, notify: bool = False, defer: bool = False) -> Any:
    return await converse(due_at, notify, defer)


CHAT_WORKFLOW = "bench_chat"
CHAT_PAD = "x" * 64  # the chat's small state: a round number, the last answer, some text


def chat_hook_id(turn: int) -> str:
    """The hook of round ``turn`` (0-based) of a ``bench_chat`` run."""
    return f"chat_turns-0.m{turn}.0"


@step
async def chat_turns(rounds: int) -> int:
    """A chat in one step: round after round, ``step_hook`` then a checkpoint of a small
    state (deferred: written with the next round's hook). On each resume the step
    re-executes from the top and continues from the checkpoint's round."""
    state = await load_step_checkpoint()
    turn = 0 if state is None else int(state["round"])
    while turn < rounds:
        answer = await step_hook(f"m{turn}")
        turn += 1
        await save_step_checkpoint({"round": turn, "last": answer, "pad": CHAT_PAD}, defer=True)
    return turn


@workflow(name=CHAT_WORKFLOW)
async def bench_chat(rounds: int) -> int:
    return await chat_turns(rounds)


# probes (worker processes only) ------------------------------------------------------------
def _install_round_trip_counter() -> type[aioredis.Redis]:
    """Count this process's round trips; returns a client class that is not counted."""
    original: Any = aioredis.Redis.execute_command
    original_pipeline: Any = Pipeline.execute
    original_batch: Any = Batcher._pipeline

    async def execute_command(self: aioredis.Redis, *args: Any, **options: Any) -> Any:
        name = str(args[0]).upper()
        round_trips[name] += 1
        result = await original(self, *args, **options)
        if name == "XREADGROUP" and not result:
            round_trips["XREADGROUP:empty"] += 1
        return result

    async def execute(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        if self.command_stack:
            round_trips["PIPELINE:other"] += 1
            round_trips["PIPELINE:commands"] += len(self.command_stack)
        result: list[Any] = await original_pipeline(self, raise_on_error)
        return result

    async def batch(self: Batcher, calls: list[Any]) -> list[Any]:
        # The script batcher writes its batches itself (runtime/store/redis/_batch.py).
        # Deadline ticks and heartbeats are background; a batch with claims, suspensions
        # or completions is lifecycle work; a lone lifecycle call is one EVALSHA.
        shas = {call[0].sha for call in calls}
        if shas <= _BACKGROUND_SHAS:
            round_trips["PIPELINE"] += 1
        else:
            round_trips["EVALSHA" if len(calls) == 1 else "PIPELINE:work"] += 1
        round_trips["PIPELINE:commands"] += len(calls)
        result: list[Any] = await original_batch(self, calls)
        return result

    aioredis.Redis.execute_command = execute_command  # type: ignore[method-assign]
    Pipeline.execute = execute  # type: ignore[method-assign]
    Batcher._pipeline = batch  # type: ignore[method-assign]
    _install_byte_counter()

    class Uncounted(aioredis.Redis):
        pass

    Uncounted.execute_command = original  # type: ignore[method-assign]
    return Uncounted


def _install_byte_counter() -> None:
    """Count the bytes redis-py's parsers read (hiredis reads with ``read``, the pure-Python
    parser with ``readline``/``readexactly``). The reporter's reads are counted too: a
    few bytes (``+OK``) five times a second, subtracted by the benchmark as idle traffic."""
    original_read: Any = asyncio.StreamReader.read
    original_readline: Any = asyncio.StreamReader.readline
    original_readexactly: Any = asyncio.StreamReader.readexactly

    async def read(self: asyncio.StreamReader, n: int = -1) -> bytes:
        global bytes_in
        data: bytes = await original_read(self, n)
        bytes_in += len(data)
        return data

    async def readline(self: asyncio.StreamReader) -> bytes:
        global bytes_in
        data: bytes = await original_readline(self)
        bytes_in += len(data)
        return data

    async def readexactly(self: asyncio.StreamReader, n: int) -> bytes:
        global bytes_in
        data: bytes = await original_readexactly(self, n)
        bytes_in += len(data)
        return data

    asyncio.StreamReader.read = read  # type: ignore[method-assign]
    asyncio.StreamReader.readline = readline  # type: ignore[method-assign]
    asyncio.StreamReader.readexactly = readexactly  # type: ignore[method-assign]


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def _report(url: str, client_class: type[aioredis.Redis]) -> None:
    client = client_class.from_url(url)
    key = f"{REPORT_KEY}{os.getpid()}"
    try:
        while True:
            report = {
                "pid": os.getpid(),
                "ts": time.time(),
                "rss_kb": _rss_kb(),
                "tasks": len(asyncio.all_tasks()),
                "threads": threading.active_count(),
                "round_trips": dict(round_trips),
                "cpu": time.process_time(),  # ns resolution, unlike /proc's 10 ms ticks
                "bytes_in": bytes_in,
            }
            await client.set(key, orjson.dumps(report))
            await asyncio.sleep(REPORT_EVERY)
    finally:
        await client.aclose()


_reporter: asyncio.Task[None] | None = None


def _start_profiler(prefix: str) -> None:
    """Sample this process with pyinstrument; written to ``<prefix>.<pid>.txt`` at exit."""
    import atexit

    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()

    def write() -> None:
        profiler.stop()
        with open(f"{prefix}.{os.getpid()}.txt", "w") as f:
            f.write(profiler.output_text(unicode=False, color=False, show_all=False))
        session = profiler.last_session
        root = session.root_frame() if session is not None else None
        if root is not None:
            from .profile import summarize

            with open(f"{prefix}.{os.getpid()}.summary.txt", "w") as f:
                f.write(summarize(root))

    atexit.register(write)


def _start_call_counter(prefix: str) -> None:
    """Count every Python call of this process with cProfile: exact call counts (per
    lifecycle, once divided), where a sampler gives shares. It slows the process several
    times, so its times are not the process's. Written to ``<prefix>.<pid>.pstats`` at
    exit (``python -m pstats`` reads it)."""
    import atexit
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()

    def write() -> None:
        profiler.disable()
        profiler.dump_stats(f"{prefix}.{os.getpid()}.pstats")

    atexit.register(write)


def _start_probes() -> None:
    """Started at import: ``parley worker`` imports the app inside its running loop."""
    global _reporter, _on_created_client
    if os.environ.get("PARLEY_BENCH_PROFILE"):
        _start_profiler(os.environ["PARLEY_BENCH_PROFILE"])
    if os.environ.get("PARLEY_BENCH_CALLS"):
        _start_call_counter(os.environ["PARLEY_BENCH_CALLS"])
    url = os.environ.get("PARLEY_BENCH_REDIS")
    if not url:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    uncounted = _install_round_trip_counter()
    if os.environ.get("PARLEY_BENCH_RECORD_ON_CREATED"):
        _on_created_client = uncounted.from_url(url)
    _reporter = loop.create_task(_report(url, uncounted), name="bench-report")


_start_probes()
