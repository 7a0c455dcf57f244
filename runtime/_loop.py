"""The event loop ``parley`` processes run on: uvloop where it is installed (a dependency
on the platforms it supports), asyncio's own otherwise or when ``PARLEY_EVENT_LOOP=asyncio``.
uvloop runs the same coroutines; it spends less CPU per callback and per socket operation,
which is most of what a worker does between Redis round trips (see bench/README.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .settings import Settings

T = TypeVar("T")


def loop_factory(choice: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's default loop."""
    if (choice or Settings.from_env().event_loop) == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def describe(loop: asyncio.AbstractEventLoop) -> str:
    """ "uvloop" or "asyncio": the loop a process actually runs on."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop chosen above."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
