"""Parent and child workflows, for the child-workflow tests (in process and with worker
processes)."""

from __future__ import annotations

from typing import Any

from runtime import child, hook, step, workflow


@step
async def double(n: int) -> int:
    return n * 2


@workflow(name="kid_wf")
async def kid_wf(n: int) -> int:
    return await double(n)


@workflow(name="waiting_kid_wf")
async def waiting_kid_wf() -> Any:
    return await hook("kid_question")


@workflow(name="failing_kid_wf")
async def failing_kid_wf() -> None:
    raise ValueError("the child cannot")


@workflow(name="parent_wf")
async def parent_wf(n: int) -> list[Any]:
    first = await child(kid_wf, n)
    second = await child("kid_wf", first)
    return [first, second]


@workflow(name="parent_of_waiting_wf")
async def parent_of_waiting_wf() -> Any:
    return await child(waiting_kid_wf)


@workflow(name="parent_of_failing_wf")
async def parent_of_failing_wf() -> str:
    from runtime import ChildFailed

    try:
        await child(failing_kid_wf)
    except ChildFailed as exc:
        return f"caught: {exc.error_type}"
    return "not reached"
