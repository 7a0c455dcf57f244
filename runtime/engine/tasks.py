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

from .tracks import ReadingTask, forking_track, started_track

_tracking: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def track_tasks(
    loop: asyncio.AbstractEventLoop,
    adopt: Callable[[asyncio.Future[Any]], None],
    prepare: Callable[[contextvars.Context], contextvars.Context],
    wrap: Callable[[contextvars.Context, Coroutine[Any, Any, Any]], Coroutine[Any, Any, Any]],
) -> None:
    """For every task created on ``loop`` from now on: ``prepare(context)`` gives the
    context it runs in (given the one it would have run in, a copy of its creator's
    unless one was given), ``wrap(context, coro)`` the coroutine it runs (not for a task
    of a first()'s branch, whose outcome first() takes as it is), and ``adopt(task)`` is
    called once it exists. Once per loop: a loop's factory is installed once, wrapping
    whatever factory it had."""
    if loop in _tracking:
        return
    previous = loop.get_task_factory()

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Future[Any]:
        given = kwargs.pop("context", None)
        context = prepare(contextvars.copy_context() if given is None else given)
        task: asyncio.Future[Any]
        track = started_track(context)
        branch = forking_track(context)
        if track is None and branch is None:
            coro = wrap(context, coro)
        if previous is not None:
            task = cast(Any, previous)(loop, coro, context=context, **kwargs)
            if track is not None:
                # (not a ReadingTask: who reads its result is not noted, and its creator's
                # later calls count as reading it) Known to a first() that waits for it to
                # replay. Race closed: with another task factory on the loop (an
                # instrumentation library's), a task a branch started was still replaying
                # when the first() decided, and a message it had handed to a step in an
                # earlier pass was given back and handled twice.
                track.task = task
        elif track is not None:
            # a task started inside a first()'s branch: who reads its result is noted
            reading = ReadingTask(coro, loop=loop, context=context, **kwargs)
            reading.track = track
            track.reads_noted = True
            track.task = reading
            task = reading
        else:
            task = asyncio.Task(coro, loop=loop, context=context, **kwargs)
        if branch is not None:
            # A first()'s branch task, known to the first()s that enclose it from now on
            # (tracks.started_task gave its track its numbering). Race closed: nested in a
            # task still replaying, a first()'s branch tasks were none of the tasks an
            # enclosing first() waited for, and it decided while they replayed; a message
            # one had handed to a step in an earlier pass was given back and handled twice.
            branch.task = task
        adopt(task)
        return task

    loop.set_task_factory(cast(Any, factory))
    _tracking.add(loop)
