"""Round trips per HITL lifecycle, counted client-side on a real Redis: a regression that
adds a round trip fails here."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from runtime import (
    Runtime,
    Worker,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from tests.raw_redis import raw


class CountingRedis:
    """Counts each command sent (a pipeline counts its commands and one round trip)."""

    def __init__(self, rt: Runtime) -> None:
        self.commands: Counter[str] = Counter()
        self.round_trips = 0
        client = raw(rt).client
        original = client.execute_command

        async def execute_command(*args: Any, **options: Any) -> Any:
            self.commands[str(args[0]).upper()] += 1
            self.round_trips += 1
            return await original(*args, **options)

        client.execute_command = execute_command  # type: ignore[method-assign]


async def _hand_out(token: str) -> None:
    handed_out.append(token)


handed_out: list[str] = []


@step
async def bench_step(with_on_created: bool) -> Any:
    if await load_step_checkpoint() is None:
        await save_step_checkpoint({"state": "x" * 100}, defer=True)
    return await step_hook("answer", on_created=_hand_out if with_on_created else None)


@workflow(name="lifecycle")
async def lifecycle(with_on_created: bool) -> Any:
    return await bench_step(with_on_created)


@pytest.mark.parametrize("on_created", [False, True])
async def test_hitl_lifecycle_round_trips(redis_url: str, on_created: bool) -> None:
    async with Runtime(redis_url, partitions=4) as rt:
        worker = Worker(rt)
        counter = CountingRedis(rt)
        run_id = await rt.start(lifecycle, on_created)
        [task] = await rt.store.read_tasks("c", tuple(range(rt.partitions)), 10, None)
        await worker.tasks.execute(task)  # claim+load, persist+suspend+ack
        [pending] = await rt.list_hooks(run_id=run_id)
        before_answer = counter.round_trips
        await rt.resume_hook(pending.token, "yes")
        [task] = await rt.store.read_tasks("c", tuple(range(rt.partitions)), 10, None)
        await worker.tasks.execute(task)  # claim+load, finish+ack
        engine_commands = counter.commands.copy()
        engine_round_trips = counter.round_trips
        assert await rt.wait(run_id, timeout=5) == "yes"

    # start, claim+load, [persist hook, on_created,] suspend+ack, answer, claim+load,
    # finish+ack: one script each (the deferred checkpoint rides with the hook). The two
    # XREADGROUPs are batched across runs by a real worker; list_hooks and wait are this
    # test's own reads.
    assert engine_commands["EVALSHA"] == (7 if on_created else 6), engine_commands
    assert set(engine_commands) == {"EVALSHA", "XREADGROUP"}, engine_commands
    assert engine_round_trips - before_answer == 4  # answer, XREADGROUP, claim, finish


@step
async def durable_save() -> Any:
    await save_step_checkpoint({"state": 1})
    return "saved"


@workflow(name="durable_save_wf")
async def durable_save_wf() -> Any:
    return await durable_save()


async def test_default_checkpoint_save_is_its_own_durable_write(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=4) as rt:
        counter = CountingRedis(rt)
        run_id = await rt.start(durable_save_wf)
        await Worker(rt).drain()
        engine_commands = counter.commands.copy()
        assert await rt.wait(run_id, timeout=5) == "saved"
    # start, claim, checkpoint (durable on return), finish
    assert engine_commands["EVALSHA"] == 4, engine_commands
