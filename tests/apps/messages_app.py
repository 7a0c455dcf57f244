"""A step that handles a message and remembers it, for the tests of what receives take
(each test clears ``handled`` first), and workflows that race a branch against a hook
and then handle a message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runtime import first, hook, receive, step, workflow

handled: list[object] = []


@step
async def handle_message(message: object) -> str:
    handled.append(message)
    return f"handled {message}"


def against_stop(name: str, branch: Callable[[], Awaitable[Any]]) -> Any:
    """A workflow ``name`` that races ``branch()`` against a hook "stop", then handles the
    next message of topic "v": ``[which won, "handled <message>"]``."""

    @workflow(name=name)
    async def raced_against_stop() -> list[Any]:
        which, _ = await first(hook("stop"), branch())
        return [which, await handle_message(await receive("v"))]

    return raced_against_stop
