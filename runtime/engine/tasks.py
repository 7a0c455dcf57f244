"""Knowing the tasks a workflow creates: a task factory on the event loop gives every new
task the context it runs in (a workflow's task gets its own numbering of durable calls,
engine/scopes.py) and hands it to a callback (the execution running in the creator's
context adopts it)."""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, cast

_tracking: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def track_tasks(
    loop: asyncio.AbstractEventLoop,
    adopt: Callable[[asyncio.Future[Any]], None],
    prepare: Callable[[contextvars.Context], contextvars.Context],
) -> None:
    """For every task created on ``loop`` from now on: ``prepare(context)`` gives the
    context it runs in (given the one it would have run in, a copy of its creator's
    unless one was given), and ``adopt(task)`` is called once it exists. Once per loop: a
    loop's factory is installed once, wrapping whatever factory it had."""
    if loop in _tracking:
        return
    previous = loop.get_task_factory()

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Future[Any]:
        given = kwargs.pop("context", None)
        context = prepare(contextvars.copy_context() if given is None else given)
        task: asyncio.Future[Any] = (
            asyncio.Task(coro, loop=loop, context=context, **kwargs)
            if previous is None
            else cast(Any, previous)(loop, coro, context=context, **kwargs)
        )
        adopt(task)
        return task

    loop.set_task_factory(cast(Any, factory))
    _tracking.add(loop)
