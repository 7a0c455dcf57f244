"""A resume costs the same at round 1,000 as at round 10: the worker keeps the replay
index of the runs it suspended and its claim reads only the events after the last one it
saw (runtime/engine/replay_cache.py, lua/claim.lua). Counted, never timed: the commands
Redis executes for a resume (scripts' own commands included, by INFO commandstats) and
the bytes it sends (INFO stats), on a private redis-server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from runtime import (
    Runtime,
    Worker,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from runtime.ids import make_token
from runtime.testing import RedisServer

# counts_commands: the suite's event count check (tests/runtime/conftest.py) adds commands
pytestmark = [pytest.mark.redis, pytest.mark.counts_commands]

PARTITIONS = 2


@step
async def chat_turn(n: int) -> Any:
    return await step_hook("answer")


@workflow(name="resume_cost_chat")
async def resume_cost_chat(rounds: int) -> int:
    total = 0
    for n in range(rounds):
        total += len(await chat_turn(n))
    return total


@step
async def chat_in_one_step(rounds: int) -> int:
    """A chat in one step, like bench_chat: step_hook after step_hook, a small checkpoint
    after each; every resume re-executes the step from its checkpoint."""
    state = await load_step_checkpoint()
    turn = 0 if state is None else int(state["round"])
    while turn < rounds:
        await step_hook(f"m{turn}")
        turn += 1
        await save_step_checkpoint({"round": turn, "pad": "x" * 64}, defer=True)
    return turn


@workflow(name="resume_cost_step_chat")
async def resume_cost_step_chat(rounds: int) -> int:
    return await chat_in_one_step(rounds)


def _token(run_id: str, workflow_name: str, n: int) -> str:
    if workflow_name == "resume_cost_step_chat":
        return make_token(run_id, f"chat_in_one_step-0.m{n}.0")
    return make_token(run_id, f"chat_turn-{n}.answer.0")


@pytest.fixture
def server() -> Iterator[RedisServer]:
    started = RedisServer("--appendonly", "no")
    yield started
    started.stop()


def _stats(client: redis.Redis) -> tuple[dict[str, int], int]:
    """Calls per command since the last reset, and the bytes Redis has sent to clients.
    Left out: INFO and CONFIG (this measure's own) and TIME, which the store reads every
    RESYNC_SECONDS of the wall clock (runtime/store/redis/_time.py), whatever the round:
    on a loaded machine a resume now and then straddles a resync and counted one more."""
    commands = client.info("commandstats")
    calls = {
        name.removeprefix("cmdstat_"): int(stat["calls"])
        for name, stat in commands.items()
        if name not in ("cmdstat_info", "cmdstat_config", "cmdstat_time")
    }
    return calls, int(client.info("stats")["total_net_output_bytes"])


async def _resume(
    rt: Runtime, worker: Worker, client: redis.Redis, run_id: str, workflow_name: str, n: int
) -> tuple[dict[str, int], int]:
    """Answer round ``n`` and let the worker resume the run (to its next suspension):
    the commands and the bytes Redis sent meanwhile."""
    client.config_resetstat()
    _, before = _stats(client)
    await rt.resume_hook(_token(run_id, workflow_name, n), "yes")
    await worker.drain()
    calls, after = _stats(client)
    return calls, after - before


async def _rounds(
    server: RedisServer,
    replay_cache: int,
    sampled: tuple[int, ...],
    chat: Any = resume_cost_chat,
) -> Any:
    client = redis.Redis(port=server.port)
    samples = {}
    try:
        async with Runtime(server.url, partitions=PARTITIONS) as rt:
            worker = Worker(rt, replay_cache=replay_cache)
            run_id = await rt.start(chat, max(sampled) + 2)
            name = chat.__parley_workflow__
            await worker.drain()
            for n in range(max(sampled) + 1):
                if n in sampled:
                    samples[n] = await _resume(rt, worker, client, run_id, name, n)
                else:
                    await rt.resume_hook(_token(run_id, name, n), "yes")
                    await worker.drain()
            return samples, worker.tasks.replay_cache
    finally:
        client.close()


@pytest.mark.parametrize("chat", [resume_cost_chat, resume_cost_step_chat])
async def test_a_resume_at_round_1000_costs_what_it_costs_at_round_10(
    server: RedisServer, chat: Any
) -> None:
    """A step per round (each completes), or one step that loops step_hook (its checkpoint
    and the answers it has read are saved and loaded at every round)."""
    samples, cache = await _rounds(server, replay_cache=16, sampled=(10, 100, 1000), chat=chat)
    for n, (calls, sent) in samples.items():
        print(f"round {n}:", sent, "bytes", calls)
    (calls_10, bytes_10), (calls_100, bytes_100), (calls_1000, bytes_1000) = (
        samples[10],
        samples[100],
        samples[1000],
    )
    # the same commands, scripts' own included (an XRANGE of the whole log would not be)
    assert calls_1000 == calls_100
    # the same bytes but for ids and counters that have grown a few digits
    assert abs(bytes_1000 - bytes_100) < 64, (bytes_100, bytes_1000)
    # a log of at most SHRINK_MAX_EVENTS events is also stored at its used size when the
    # run suspends (COPY + RENAME, lib.lua's shrink_events): a small log costs those two
    # commands more, and nothing else
    assert {**calls_10, "copy": 0, "rename": 0} == {**calls_1000, "copy": 0, "rename": 0}
    assert calls_10.get("copy") == calls_10.get("rename") == 1
    assert abs(bytes_1000 - bytes_10) < 256, (bytes_10, bytes_1000)
    assert cache.misses == 0 and cache.hits >= 1000


async def test_without_the_cache_the_claim_reads_the_whole_log(server: RedisServer) -> None:
    """The measure above sees a claim that reads the whole log (it would fail with one)."""
    samples, _ = await _rounds(server, replay_cache=0, sampled=(10, 200))
    (_, bytes_10), (_, bytes_200) = samples[10], samples[200]
    assert bytes_200 > bytes_10 + 190 * 4 * 20, (bytes_10, bytes_200)
