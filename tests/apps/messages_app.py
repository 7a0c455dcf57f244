"""A step that handles a message and remembers it, for the tests of what receives take
(each test clears ``handled`` first)."""

from __future__ import annotations

from runtime import step

handled: list[object] = []


@step
async def handle_message(message: object) -> str:
    handled.append(message)
    return f"handled {message}"
