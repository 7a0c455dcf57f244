"""The durable calls of a workflow's tasks are numbered by task (engine/scopes.py): a replay
matches them with the log however the tasks interleave, which differs from the first pass
as soon as a recorded result returns at once. Each of these blocked its run as
nondeterministic (or asked again) when positions followed the tasks' scheduling."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import orjson

from runtime import (
    RunStatus,
    Runtime,
    Worker,
    first,
    hook,
    patched,
    set_tags,
    step,
    workflow,
)
from tests.raw_redis import raw

bodies: Counter[str] = Counter()


async def answer(rt: Runtime, run_id: str, name: str, payload: object) -> None:
    [pending] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == name]
    await rt.resume_hook(pending.token, payload)


async def answer_in_turn(worker: Worker, run_id: str, *answers: tuple[str, object]) -> None:
    """Each answer, then the run's resume, one after the other."""
    for name, payload in answers:
        await answer(worker.runtime, run_id, name, payload)
        await worker.drain()


@step
async def fetch(name: str) -> str:
    bodies[name] += 1
    await asyncio.sleep(0.01)  # it takes time: the other branch goes on meanwhile
    return name


async def _two_steps() -> list[str]:
    return [await fetch("a1"), await fetch("a2")]


async def _step_then_hook() -> Any:
    await fetch("b1")
    return await hook("review")


@workflow(name="two_steps_beside_a_step_and_a_hook_wf")
async def two_steps_beside_a_step_and_a_hook_wf() -> list[Any]:
    return list(await asyncio.gather(_two_steps(), _step_then_hook()))


async def test_a_branch_of_two_steps_beside_a_step_and_a_hook_resumes(
    rt: Runtime, worker: Worker
) -> None:
    bodies.clear()
    run_id = await rt.start(two_steps_beside_a_step_and_a_hook_wf)
    await worker.drain()
    await answer_in_turn(worker, run_id, ("review", "ok"))
    assert await rt.wait(run_id, timeout=5) == [["a1", "a2"], "ok"]
    assert bodies == {"a1": 1, "a2": 1, "b1": 1}  # each step ran once


async def _two_hooks(first_name: str, second_name: str) -> Any:
    await hook(first_name)
    return await hook(second_name)


@workflow(name="two_hooks_first_wf")
async def two_hooks_first_wf() -> int:
    which, _ = await first(_two_hooks("x1", "y"), hook("b"))
    return which


async def test_a_sequential_branch_listed_first_resumes_when_its_first_hook_is_answered(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(two_hooks_first_wf)
    await worker.drain()
    await answer_in_turn(worker, run_id, ("x1", 1))
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    assert sorted(h.name for h in await rt.list_hooks(run_id=run_id)) == ["b", "y"]
    await answer_in_turn(worker, run_id, ("y", 2))
    assert await rt.wait(run_id, timeout=5) == 0


@workflow(name="two_hooks_gathered_wf")
async def two_hooks_gathered_wf() -> list[Any]:
    return list(await asyncio.gather(_two_hooks("x1", "y"), hook("b")))


async def test_gathered_waits_resume_in_any_order_of_answers(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(two_hooks_gathered_wf)
    await worker.drain()
    tokens = {h.name: h.token for h in await rt.list_hooks(run_id=run_id)}
    await answer_in_turn(worker, run_id, ("x1", 1), ("y", 2), ("b", 3))
    assert await rt.wait(run_id, timeout=5) == [2, 3]
    # b kept the token it was asked with: its hook was not created again under another id
    assert {h.name: h.token for h in (await rt.get_run(run_id)).hooks}["b"] == tokens["b"]


@step
async def fan_out() -> int:
    # a step's own tasks: the step's inside, not the log's; on replay it does not run
    return sum(await asyncio.gather(*(asyncio.sleep(0, n) for n in range(3))))


@workflow(name="tasks_after_a_step_with_tasks_wf")
async def tasks_after_a_step_with_tasks_wf() -> list[Any]:
    total = await fan_out()
    return [total, *await asyncio.gather(hook("a"), hook("b"))]


async def test_a_steps_own_tasks_do_not_move_the_numbering_of_the_tasks_after_it(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(tasks_after_a_step_with_tasks_wf)
    await worker.drain()
    await answer_in_turn(worker, run_id, ("a", 1), ("b", 2))
    assert await rt.wait(run_id, timeout=5) == [3, 1, 2]


@workflow(name="gathered_hooks_wf")
async def gathered_hooks_wf() -> list[Any]:
    return list(await asyncio.gather(hook("a"), hook("b")))


async def test_a_run_started_before_per_task_numbering_replays_as_it_was_recorded(
    rt: Runtime, worker: Worker
) -> None:
    """Its workflow.started has no ``scoped``: its tasks' calls were numbered in one
    sequence, and are looked up so (numbered by task, its hooks would not be found)."""
    run_id = await rt.start(gathered_hooks_wf)
    await _as_started_before_per_task_numbering(rt, run_id)
    await worker.drain()
    assert sorted(h.hook_id for h in await rt.list_hooks(run_id=run_id)) == ["h0.a", "h1.b"]
    await answer_in_turn(worker, run_id, ("a", 1))
    await answer_in_turn(Worker(rt), run_id, ("b", 2))  # one that did not keep its index
    assert await rt.wait(run_id, timeout=5) == [1, 2]


async def test_a_new_run_numbers_its_tasks_calls_by_task(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(gathered_hooks_wf)
    await worker.drain()
    hooks = sorted(h.hook_id for h in await rt.list_hooks(run_id=run_id))
    assert hooks == ["0_0.h0.a", "0_1.h0.b"]  # the first and second task made at position 0


async def _as_started_before_per_task_numbering(rt: Runtime, run_id: str) -> None:
    client, key = raw(rt).client, raw(rt).run_keys(run_id).events
    [(event_id, fields)] = await client.xrange(key)
    data = orjson.loads(fields[b"d"])
    del data["scoped"]
    await client.delete(key)
    await client.xadd(key, {b"t": fields[b"t"], b"d": orjson.dumps(data)}, id=event_id)


@workflow(name="answered_on_both_sides_wf")
async def answered_on_both_sides_wf() -> list[Any]:
    which, value = await first(_two_hooks("x1", "y"), hook("b"))
    return [which, value, await hook("after")]


async def test_answers_to_both_branches_of_a_first_before_it_is_decided_do_not_block_it(
    rt: Runtime, worker: Worker
) -> None:
    """x1 (the sequential branch's first hook) and b are both answered before any worker
    replays the run: the pass that decides goes past x1 to ask y while b's branch has
    finished; b wins, and the replays after it find every call where the log has it."""
    run_id = await rt.start(answered_on_both_sides_wf)
    await worker.drain()
    await answer(rt, run_id, "x1", 1)
    await answer(rt, run_id, "b", 2)
    await worker.drain()
    assert [h.name for h in await rt.list_hooks(run_id=run_id)] == ["after"]
    await answer_in_turn(worker, run_id, ("after", 3))
    assert await rt.wait(run_id, timeout=5) == [1, 2, 3]


@workflow(name="tags_after_a_gather_wf")
async def tags_after_a_gather_wf() -> list[Any]:
    both = list(await asyncio.gather(hook("a"), hook("b")))
    await set_tags({"stage": "after"})
    return [*both, await hook("c")]


async def test_setting_tags_keeps_the_numbering_by_task(rt: Runtime, worker: Worker) -> None:
    """(A review found set_tags' event turning the numbering by task off for the whole
    log: the next replay found the gather's hooks nowhere.)"""
    run_id = await rt.start(tags_after_a_gather_wf)
    await worker.drain()
    await answer_in_turn(worker, run_id, ("a", 1), ("b", 2))
    await answer_in_turn(Worker(rt), run_id, ("c", 3))
    assert await rt.wait(run_id, timeout=5) == [1, 2, 3]


@workflow(name="patched_after_a_gather_wf")
async def patched_after_a_gather_wf() -> str:
    await asyncio.gather(fetch("p1"), fetch("p2"))
    return "new" if patched("after-the-gather") else "old"


async def test_a_new_run_takes_a_patch_right_after_a_gather(rt: Runtime, worker: Worker) -> None:
    """The gather's tasks were made before the patch's point, so the run had not gone past
    it: new code for a new run."""
    run_id = await rt.start(patched_after_a_gather_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "new"
    marks = [e.data for e in await rt.events(run_id) if e.type == "patch.marked"]
    assert marks == [{"patch": "after-the-gather"}]
