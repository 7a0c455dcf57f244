"""A workflow that runs a program of waits given as its argument, raced against a hook
"stop", for the model-based test of first() (tests/runtime/test_first_model.py).

A program is a JSON tree:

- ``["recv", handled, timed]``: the next message of topic "v" (``timed``: with a timeout,
  itself a first() of the receive and a timer, of an hour if true, of ``SHORT`` if
  "short": then ``["timeout"]`` when no message came in time); ``handled``: handed at
  once to the step ``handle_message``, else returned as it came;
- ``["hook", name]``: a hook's answer; ``["hook", name, "short"]``: the same with a
  timeout of ``SHORT`` (``["timeout"]`` when it expires);
- ``["sleep"]``: a durable timer of ``SHORT``;
- ``["child", name]``: a child run's result, the answer to its hook ``name`` (a child in a
  losing branch is cancelled, its hook withdrawn);
- ``["seq", [p, ...]]``: one after the other, in this task;
- ``["gather", [p, ...]]``: each in a task of its own, gathered;
- ``["first", [p, ...]]``: a nested first() of them;
- ``["spawn", [p, q]]``: ``p`` in a task started first, then ``q`` in this one, then the
  task's value awaited.

Its value is a tree of the same shape; the messages returned as they came are its leaves
``["raw", message]``. After the race the workflow hands each message the winner returned
to ``handle_message``, then handles every further message until one says "end" (in
fresh runs, with ``continues``: continue_as_new hands the run's unreceived messages on).
It returns which won, how many messages the winner returned, how many came later.
"""

from __future__ import annotations

import asyncio
from typing import Any

from runtime import (
    STEP_HOOK_TIMEOUT,
    child,
    continue_as_new,
    first,
    hook,
    receive,
    sleep,
    workflow,
)
from tests.apps.messages_app import handle_message

END = "end"
# The timeout of the timers that fire while a test plays its schedule (seconds).
SHORT = 0.03
TIMED_OUT = ["timeout"]


async def interpret(program: list[Any]) -> Any:
    kind = program[0]
    if kind == "recv":
        _, handled, timed = program
        if not timed:
            message = await receive("v")
        else:
            timeout = SHORT if timed == "short" else "1h"
            message = await receive("v", timeout=timeout, on_timeout="return")
            if message is STEP_HOOK_TIMEOUT:
                return TIMED_OUT
        return await handle_message(message) if handled else ["raw", message]
    if kind == "hook":
        if len(program) == 2:
            return await hook(program[1])
        answer = await hook(program[1], timeout=SHORT, on_timeout="return")
        return TIMED_OUT if answer is STEP_HOOK_TIMEOUT else answer
    if kind == "sleep":
        await sleep(SHORT)
        return None
    if kind == "child":
        return await child(first_program_child, program[1])
    if kind == "seq":
        return [await interpret(part) for part in program[1]]
    if kind == "gather":
        return list(await asyncio.gather(*(interpret(part) for part in program[1])))
    if kind == "first":
        which, value = await first(*(interpret(part) for part in program[1]))
        return [which, value]
    if kind == "spawn":
        started, then = program[1]
        task = asyncio.ensure_future(interpret(started))
        value = await interpret(then)
        return [await task, value]
    raise ValueError(f"not a program: {program!r}")


def raw_messages(value: Any) -> list[Any]:
    """The messages a program's value holds as they came (``["raw", message]`` leaves)."""
    if isinstance(value, list):
        if len(value) == 2 and value[0] == "raw":
            return [value[1]]
        return [message for part in value for message in raw_messages(part)]
    return []


@workflow(name="first_program_child")
async def first_program_child(name: str) -> Any:
    return await hook(name)


@workflow(name="first_program")
async def first_program(
    program: list[Any], continues: int = 0, state: list[int] | None = None
) -> list[int]:
    """``continues``: when not 0, the run continues as new right after the race, then
    after every ``continues`` messages handled; ``state``: what a continued run was
    handed."""
    if state is None:
        which, value = await first(hook("stop"), interpret(program))
        kept = raw_messages(value) if which == 1 else []
        for message in kept:
            await handle_message(message)
        state = [which, len(kept), 0]
        if continues:
            continue_as_new(program, continues, state)
    which, kept_count, later = state
    while not continues or later < state[2] + continues:
        message = await receive("v")
        if message == END:
            return [which, kept_count, later]
        await handle_message(message)
        later += 1
    continue_as_new(program, continues, [which, kept_count, later])
