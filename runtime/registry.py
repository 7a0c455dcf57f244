"""The registry of workflows by name, and what the decorators record about workflows and
steps (the decorators themselves are in :mod:`runtime.workflow`)."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import UsageError, WorkflowNotFound


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
    # the patch ids the step's code asks about (``patched("...")`` in its source): a step
    # records them when it starts, so a later execution knows which code began it
    patches: frozenset[str] = frozenset()


_workflows: dict[str, WorkflowDef] = {}


def register_workflow(definition: WorkflowDef) -> None:
    existing = _workflows.get(definition.name)
    # The same function registered again (a module re-imported) is fine; another one is not.
    if existing is not None and _where(existing.fn) != _where(definition.fn):
        raise UsageError(f"workflow {definition.name!r} is already registered by {existing.fn!r}")
    _workflows[definition.name] = definition
    definition.fn.__parley_workflow__ = definition.name  # type: ignore[attr-defined]


def _where(fn: Callable[..., Any]) -> tuple[str, str]:
    return fn.__module__, fn.__qualname__


def registered_workflows() -> list[str]:
    return sorted(_workflows)


def find_workflow(name: str) -> WorkflowDef | None:
    """The workflow registered as ``name``, if any: the worker's lookup on each task."""
    return _workflows.get(name)


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


def import_apps(app: str | ModuleType | Iterable[str | ModuleType] | None) -> None:
    """Import the module(s) whose ``@workflow`` definitions this process executes."""
    if app is None:
        return
    apps = [app] if isinstance(app, str | ModuleType) else list(app)
    for item in apps:
        if isinstance(item, str):
            importlib.import_module(item)
