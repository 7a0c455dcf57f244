"""The control-flow signals that unwind a workflow to the worker, and the scope of the
step being executed."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..errors import NondeterminismError, ParleyError


class Suspend(BaseException):
    """Unwinds the workflow to the worker: the run waits for ``wait`` (hook or timer id).

    A BaseException so that user code's ``except Exception`` (or an agent framework's
    tool-error middleware) cannot swallow a suspension.
    """

    def __init__(self, wait: str, step_id: str | None = None) -> None:
        super().__init__(wait)
        self.wait = wait
        self.step_id = step_id
        self.consumed = False  # taken into account by runtime.first (not a loose wait)


class Interrupted(ParleyError):
    code = "interrupted"


class Abort(BaseException):
    """Unwinds the workflow to the worker without writing anything more (lease lost, the
    store unreachable, a write interrupted)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class Blocked(BaseException):
    """Unwinds the workflow to the worker: its code does not match the run's log. The run
    is blocked (not failed) until a worker with matching code retries it."""

    def __init__(self, error: NondeterminismError) -> None:
        super().__init__(str(error))
        self.error = error


class ReplayEnded(BaseException):
    """A dry replay (``parley replay``) reached the end of the recorded history."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


@dataclass(slots=True)
class StepScope:
    step_id: str
    name: str
    hook_counters: dict[str, int] = field(default_factory=dict)
    consumed: set[str] = field(default_factory=set)  # hooks whose answer it read this time


# The step the running task is executing (its body runs in the workflow's task).
current_step: ContextVar[StepScope | None] = ContextVar("parley_step", default=None)


class ContinueAsNew(BaseException):
    """Raised by ``continue_as_new``: unwinds the workflow body (past its ``except
    Exception``); the execution ends the run as continued and starts its successor with
    ``args`` and ``kwargs``."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__("continue_as_new")
        self.args_ = args
        self.kwargs = kwargs


# The engine's signals that end the execution whatever else a group holds, worst first.
_ENDING_SIGNALS: tuple[type[BaseException], ...] = (Abort, Blocked, ReplayEnded, ContinueAsNew)
# All of the engine's signals: what ends a task of the workflow without being its failure.
SIGNALS: tuple[type[BaseException], ...] = (Suspend, *_ENDING_SIGNALS)


def signal_of(exc: BaseException) -> BaseException:
    """What ``exc`` stands for when it is an exception group out of workflow code (an
    ``asyncio.TaskGroup``'s, whose tasks raised the engine's signals): an ending signal among
    its leaves, worst first; else its failures (as in real time: the task group cancels a
    wait once a task fails, a failure beside a wait comes after the wait held back, see
    engine/branches); else, all of it suspensions, the first. Anything else is itself.
    Hang closed: a group is not a Suspend to ``except Suspend``, nor an Exception, so it
    went past the execution, which died without a word and left its run "running"."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    for kind in _ENDING_SIGNALS:
        found = exc.subgroup(kind)
        if found is not None:
            return _first_leaf(found)
    suspensions, rest = exc.split(Suspend)
    if rest is not None or suspensions is None:
        return rest if rest is not None else exc
    return _first_leaf(suspensions)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf
