"""Knowing the tasks a workflow creates: a task factory on the event loop hands every new
task to a callback (the execution running in that task's context adopts it)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, cast

_tracking: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def track_tasks(
    loop: asyncio.AbstractEventLoop, adopt: Callable[[asyncio.Future[Any]], None]
) -> None:
    """Call ``adopt(task)`` for every task created on ``loop`` from now on (once per loop:
    a loop's factory is installed once, wrapping whatever factory it had)."""
    if loop in _tracking:
        return
    previous = loop.get_task_factory()

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Future[Any]:
        task: asyncio.Future[Any] = (
            asyncio.Task(coro, loop=loop, **kwargs)
            if previous is None
            else previous(loop, coro, **kwargs)
        )
        adopt(task)
        return task

    loop.set_task_factory(cast(Any, factory))
    _tracking.add(loop)
