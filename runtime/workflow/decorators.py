"""The ``@workflow`` and ``@step`` decorators."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, overload

from .._codec import Duration, parse_duration
from ..engine.steps import call_step
from ..errors import UsageError
from ..ids import check_name
from ..registry import StepOptions, WorkflowDef, register_workflow

P = ParamSpec("P")
R = TypeVar("R")


_PATCHED_CALL = re.compile(r"""\bpatched\(\s*["']([A-Za-z0-9_\-]{1,64})["']\s*\)""")


def _patches_in(func: Callable[..., Any]) -> frozenset[str]:
    """The patch ids a step's source asks about (a literal id: ``patched("new-pricing")``)."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):  # no source (built at run time): no patch is known
        return frozenset()
    return frozenset(_PATCHED_CALL.findall(source))


def _require_async(fn: Callable[..., Any], what: str) -> None:
    if not inspect.iscoroutinefunction(fn):
        raise UsageError(f"@{what} expects an async function, got {fn!r}")


@overload
def workflow(fn: Callable[P, Awaitable[R]], /) -> Callable[P, Awaitable[R]]: ...
@overload
def workflow(
    *, name: str | None = None
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]: ...
def workflow(fn: Any = None, /, *, name: str | None = None) -> Any:
    """Register an async function as a durable workflow (bare or ``@workflow(name=...)``).

    The body must be deterministic: it is replayed from the top on every resume, with
    step results, hook answers and timers taken from the event log.
    """

    def register(func: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        _require_async(func, "workflow")
        register_workflow(WorkflowDef(check_name(name or func.__name__, "workflow"), func))
        return func

    return register(fn) if fn is not None else register


@overload
def step(fn: Callable[P, Awaitable[R]], /) -> Callable[P, Awaitable[R]]: ...
@overload
def step(
    *,
    name: str | None = None,
    retries: int = 0,
    retry_delay: Duration = 1.0,
    backoff: float = 2.0,
    timeout: Duration | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]: ...
def step(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    retries: int = 0,
    retry_delay: Duration = 1.0,
    backoff: float = 2.0,
    timeout: Duration | None = None,
) -> Any:
    """Make an async function a durable step (bare or with options).

    Inside a workflow run its result is recorded; on replay the recorded result is
    returned without running it. A failure is retried ``retries`` times, waiting
    ``retry_delay * backoff**n`` through a durable deadline (no worker is held). Outside a
    workflow the function simply runs.
    """
    if retries < 0:
        raise UsageError(f"retries must be >= 0, got {retries}")
    options_delay = parse_duration(retry_delay, what="retry_delay")
    options_timeout = None if timeout is None else parse_duration(timeout, what="timeout")

    def wrap(func: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        _require_async(func, "step")
        options = StepOptions(
            name=check_name(name or func.__name__, "step"),
            retries=retries,
            retry_delay=options_delay,
            backoff=backoff,
            timeout=options_timeout,
            patches=_patches_in(func),
        )

        @functools.wraps(func)
        async def run_step(*args: Any, **kwargs: Any) -> Any:
            return await call_step(func, options, args, kwargs)

        run_step.__parley_step__ = options  # type: ignore[attr-defined]
        return run_step

    return wrap(fn) if fn is not None else wrap
