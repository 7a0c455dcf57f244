"""The ``@workflow`` and ``@step`` decorators and the registry of workflows by name."""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ParamSpec, TypeVar, overload

from ._codec import Duration, parse_duration
from ._keys import NAME_RE
from .errors import UsageError, WorkflowNotFound

P = ParamSpec("P")
R = TypeVar("R")
AsyncFn = Callable[P, Awaitable[R]]


@dataclass(frozen=True, slots=True)
class WorkflowDef:
    name: str
    fn: Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class StepOptions:
    name: str
    retries: int
    retry_delay: float
    backoff: float
    timeout: float | None


_workflows: dict[str, WorkflowDef] = {}


def _check_name(name: str, what: str) -> str:
    if not NAME_RE.match(name):
        raise UsageError(f"{what} name must match {NAME_RE.pattern}, got {name!r}")
    return name


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
        wf_name = _check_name(name or func.__name__, "workflow")
        existing = _workflows.get(wf_name)
        if existing is not None and existing.fn.__qualname__ != func.__qualname__:
            raise UsageError(f"workflow {wf_name!r} is already registered by {existing.fn!r}")
        _workflows[wf_name] = WorkflowDef(wf_name, func)
        func.__parley_workflow__ = wf_name  # type: ignore[attr-defined]
        return func

    return register(fn) if fn is not None else register


def registered_workflows() -> list[str]:
    return sorted(_workflows)


def get_workflow(name_or_fn: str | Callable[..., Any]) -> WorkflowDef:
    if callable(name_or_fn):
        name = getattr(name_or_fn, "__parley_workflow__", None)
        if name is None:
            raise WorkflowNotFound(f"{name_or_fn!r} is not decorated with @workflow")
    else:
        name = name_or_fn
    try:
        return _workflows[name]
    except KeyError:
        known = ", ".join(sorted(_workflows)) or "none"
        raise WorkflowNotFound(
            f"no workflow registered as {name!r} (registered: {known})"
        ) from None


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
            name=_check_name(name or func.__name__, "step"),
            retries=retries,
            retry_delay=options_delay,
            backoff=backoff,
            timeout=options_timeout,
        )

        @functools.wraps(func)
        async def run_step(*args: Any, **kwargs: Any) -> Any:
            from ._steps import call_step

            return await call_step(func, options, args, kwargs)

        run_step.__parley_step__ = options  # type: ignore[attr-defined]
        return run_step

    return wrap(fn) if fn is not None else wrap


def import_apps(app: str | ModuleType | Iterable[str | ModuleType] | None) -> None:
    """Import the module(s) whose ``@workflow`` definitions this worker executes."""
    if app is None:
        return
    apps = [app] if isinstance(app, str | ModuleType) else list(app)
    for item in apps:
        if isinstance(item, str):
            importlib.import_module(item)
