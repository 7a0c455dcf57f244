"""Durable waits and step checkpoints as workflow code calls them: ``hook``,
``step_hook``, ``sleep``, the checkpoint calls, ``current_run`` and ``emit``. Each checks
where it is called from, then hands over to the engine (:mod:`runtime.engine.waits`),
which consults the replay index first, so replay never repeats a wait that already ended
and records only what is new."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from .._codec import (
    Deadline,
    Duration,
    check_deadline,
    check_portable,
    encode_value,
    parse_duration,
)
from ..engine import firsts, waits
from ..engine.execution import Execution, current_execution
from ..engine.hooks import OnCreated
from ..engine.signals import ContinueAsNew, StepScope, current_step
from ..engine.waits import STEP_HOOK_TIMEOUT, OnTimeout
from ..errors import MessageTimeout, UsageError
from ..ids import check_name
from ..models import LOG_FORMAT
from ..registry import get_workflow

__all__ = [
    "STEP_HOOK_TIMEOUT",
    "RunContext",
    "child",
    "current_run",
    "delete_step_checkpoint",
    "emit",
    "first",
    "hook",
    "load_step_checkpoint",
    "receive",
    "save_step_checkpoint",
    "sleep",
    "sleep_until",
    "step_hook",
]


def _execution(what: str) -> Execution:
    execution = current_execution.get()
    if execution is None:
        raise UsageError(f"{what} can only be used while a workflow runs on a worker")
    return execution


def _timeout(timeout: Deadline | None) -> float | datetime | None:
    return None if timeout is None else check_deadline(timeout, what="timeout")


def _check_on_timeout(on_timeout: str) -> None:
    if on_timeout not in ("raise", "return"):
        raise UsageError(f"on_timeout must be 'raise' or 'return', got {on_timeout!r}")


async def hook(
    name: str,
    timeout: Deadline | None = None,
    on_created: OnCreated | None = None,
    schema: dict[str, Any] | None = None,
    on_timeout: OnTimeout = "raise",
    *,
    prompt: str | None = None,
) -> Any:
    """Suspend the *workflow* until ``resume_hook(token, payload)`` delivers a payload.

    Call it from the workflow body (inside a step use :func:`step_hook`). ``timeout`` is a
    duration ("24h", seconds, a timedelta) or an aware datetime: "answer by Friday 17:00
    in the reviewer's time zone" is ``datetime(..., 17, tzinfo=ZoneInfo(...))``.
    """
    execution = _execution("hook()")
    if current_step.get() is not None:
        raise UsageError(
            "hook() is for the workflow body; inside a step use step_hook()",
            run_id=execution.run_id,
        )
    check_name(name, "hook")
    _check_on_timeout(on_timeout)
    hook_id = execution.next_workflow_hook_id(name)
    return await waits.wait_for_hook(
        execution, name, hook_id, None, _timeout(timeout), on_created, schema, on_timeout, prompt
    )


async def step_hook(
    name: str,
    timeout: Deadline | None = None,
    on_created: OnCreated | None = None,
    schema: dict[str, Any] | None = None,
    on_timeout: OnTimeout = "raise",
    *,
    prompt: str | None = None,
) -> Any:
    """Suspend from *inside a step* until an answer arrives; the step then re-executes
    from the top and this call returns the payload (or ``STEP_HOOK_TIMEOUT``).

    Everything before this call runs again on resume: gate it on
    :func:`load_step_checkpoint`. ``on_created(token)`` runs once per hook when no crash
    intervenes, at least once across crashes; the hook does not expire before it returned
    once (asked again after a crash, the hook gets a fresh ``timeout``).
    """
    execution = _execution("step_hook()")
    scope = current_step.get()
    if scope is None:
        raise UsageError(
            "step_hook() must be called inside a @step; in the workflow body use hook()",
            run_id=execution.run_id,
        )
    check_name(name, "hook")
    _check_on_timeout(on_timeout)
    n = scope.hook_counters.get(name, 0)
    scope.hook_counters[name] = n + 1
    hook_id = f"{scope.step_id}.{name}.{n}"
    return await waits.wait_for_hook(
        execution,
        name,
        hook_id,
        scope,
        _timeout(timeout),
        on_created,
        schema,
        on_timeout,
        prompt,
    )


async def first(*candidates: Coroutine[Any, Any, Any]) -> tuple[int, Any]:
    """Wait for the first of several durable waits; returns ``(which, value)``.

    ``candidates`` are calls of ``hook(...)``, ``sleep(...)`` or ``sleep_until(...)`` (not yet
    awaited), e.g. ``which, answer = await first(hook("approve"), sleep("24h"))``. The run
    suspends until one of them finishes; the others are then withdrawn durably (a
    withdrawn hook is ``closed``: a late answer gets ``HookClosed``; a withdrawn timer is
    removed). When several finished by the time the run resumes, the one the log recorded
    first wins, on every replay. The winner's error (``HookTimeout``) is raised.
    """
    execution = _execution("first()")
    if current_step.get() is not None:
        raise UsageError("first() is for the workflow body", run_id=execution.run_id)
    if len(candidates) < 2 or not all(inspect.iscoroutine(w) for w in candidates):
        for wait in candidates:
            if inspect.iscoroutine(wait):
                wait.close()  # never awaited: no "was never awaited" warning
        raise UsageError(
            "first() takes two or more calls of hook(), sleep() or sleep_until(), not awaited "
            f"yet; got {[type(w).__name__ for w in candidates]}",
            run_id=execution.run_id,
        )
    # Only a branch that is a bare hook(), sleep() or sleep_until() finishes exactly when its
    # wait does (a hook answered or expired, a timer fired): those waits are grouped in the
    # store, and the first to finish withdraws the others' hooks at once.
    bare_waits = [getattr(w, "cr_code", None) in _BARE_WAITS for w in candidates]
    return await firsts.first_of(execution, list(candidates), bare_waits)


async def child(workflow: str | Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Run ``workflow`` as a child of this run and return its result: the child starts
    once (also across crashes and replays), this run waits for it without holding a
    worker, and a child that fails or is cancelled raises ``ChildFailed`` here. Cancelling
    this run cancels its children. The runs are linked (``parent_run_id`` /
    ``child_run_ids``)."""
    execution = _execution("child()")
    if current_step.get() is not None:
        raise UsageError("child() is for the workflow body", run_id=execution.run_id)
    name = get_workflow(workflow).name if callable(workflow) else check_name(workflow, "workflow")
    started = encode_value(
        {"args": list(args), "kwargs": kwargs, "scoped": LOG_FORMAT}
        if kwargs
        else {"args": list(args), "scoped": LOG_FORMAT},
        what="child workflow input",
        limit=execution.limits.max_payload_bytes,
        run_id=execution.run_id,
    )
    return await waits.child(execution, name, started)


def continue_as_new(*args: Any, **kwargs: Any) -> NoReturn:
    """End this run and continue as a fresh one of the same workflow, called with
    ``args``/``kwargs``, with an empty log: for conversations and loops that never end.

    The run ends as ``continued`` (its ``continued_to`` names the new run, whose
    ``continued_from`` names it); the new run keeps its session (which follows it: the
    widget and ``last_run`` see the new run) and its tags; its pending hooks are closed.
    Hand over what the new run needs in its arguments. ``Runtime.wait`` follows the
    chain to the last run's result. Only in the workflow body, and not in a child run.
    Call it, do not await it: it does not return (it unwinds the body)."""
    execution = _execution("continue_as_new()")
    if current_step.get() is not None:
        raise UsageError("continue_as_new() is for the workflow body", run_id=execution.run_id)
    if execution.parent is not None:
        raise UsageError(
            "continue_as_new() is not for a child run (its parent waits for its result)",
            run_id=execution.run_id,
        )
    max_depth = execution.limits.max_depth
    for n, arg in enumerate(args):
        check_portable(arg, what=f"argument {n} of continue_as_new", max_depth=max_depth)
    for keyword, value in kwargs.items():
        check_portable(value, what=f"argument {keyword!r} of continue_as_new", max_depth=max_depth)
    raise ContinueAsNew(args, kwargs)


async def receive(
    topic: str, timeout: Deadline | None = None, on_timeout: OnTimeout = "raise"
) -> Any:
    """The next message sent to this run with ``topic`` (``Runtime.send``); the run
    suspends until one comes. A message sent before the receive waits for it; each is
    received once, in the order sent. With ``timeout`` (a duration or an aware datetime),
    no message by then raises ``MessageTimeout`` (or returns ``STEP_HOOK_TIMEOUT`` with
    ``on_timeout="return"``)."""
    execution = _execution("receive()")
    if current_step.get() is not None:
        raise UsageError("receive() is for the workflow body", run_id=execution.run_id)
    check_name(topic, "topic")
    _check_on_timeout(on_timeout)
    if timeout is None:
        return await _receive(execution, topic)
    deadline = check_deadline(timeout, what="timeout")
    timer = sleep_until(deadline) if isinstance(deadline, datetime) else sleep(deadline)
    which, value = await firsts.first_of(execution, [_receive(execution, topic), timer])
    if which == 0:
        return value
    if on_timeout == "return":
        return STEP_HOOK_TIMEOUT
    raise MessageTimeout(f"no message {topic!r} came before the timeout", run_id=execution.run_id)


async def _receive(execution: Execution, topic: str) -> Any:
    return waits.receive(execution, topic)


async def sleep(duration: Duration) -> None:
    """Durable timer at workflow level: the run suspends and a deadline wakes it."""
    execution = _execution("sleep()")
    if current_step.get() is not None:
        raise UsageError(
            "sleep() is durable at workflow level only; inside a step use asyncio.sleep",
            run_id=execution.run_id,
        )
    waits.sleep(execution, parse_duration(duration, what="sleep duration"))


async def sleep_until(when: datetime) -> None:
    """Durable timer at workflow level until the instant ``when`` (an aware datetime)."""
    execution = _execution("sleep_until()")
    if current_step.get() is not None:
        raise UsageError("sleep_until() is durable at workflow level only", run_id=execution.run_id)
    if not isinstance(when, datetime):
        raise UsageError(f"sleep_until() takes a datetime, got {type(when).__name__}")
    until = check_deadline(when, what="sleep_until")
    waits.sleep(execution, until)


def _step_scope(what: str) -> tuple[Execution, StepScope]:
    execution = _execution(what)
    scope = current_step.get()
    if scope is None:
        raise UsageError(f"{what} must be called inside a @step", run_id=execution.run_id)
    return execution, scope


async def save_step_checkpoint(state: Any, *, defer: bool = False) -> None:
    """Save the current step's state (JSON); it is deleted when the step completes.

    By default the checkpoint is durable when this returns (one round trip): a crash
    after it never re-runs what it records. With ``defer=True`` it is written together
    with the step's next durable write — the ``hook.created`` of the following
    ``step_hook``, or the step's end — saving that round trip; use it when nothing slow
    or side-effecting runs between the save and the ``step_hook``.
    """
    execution, scope = _step_scope("save_step_checkpoint()")
    await waits.save_checkpoint(execution, scope, state, defer=defer)


async def load_step_checkpoint() -> Any:
    """The state saved by this step before it suspended, or None on its first run."""
    execution, scope = _step_scope("load_step_checkpoint()")
    return waits.load_checkpoint(execution, scope.step_id)


async def delete_step_checkpoint() -> None:
    execution, scope = _step_scope("delete_step_checkpoint()")
    waits.delete_checkpoint(execution, scope.step_id)


@dataclass(frozen=True, slots=True)
class RunContext:
    """Where the calling code runs: its run, its workflow, its chat session, its step."""

    run_id: str
    workflow: str
    session: str | None
    step_id: str | None

    def __repr__(self) -> str:
        return f"<RunContext {self.run_id} step={self.step_id}>"


def current_run() -> RunContext:
    """The run (and step) the calling workflow or step code belongs to."""
    execution = _execution("current_run()")
    scope = current_step.get()
    return RunContext(
        run_id=execution.run_id,
        workflow=execution.workflow.name,
        session=execution.session,
        step_id=None if scope is None else scope.step_id,
    )


async def emit(message: dict[str, Any]) -> str | None:
    """Send a message (agent text, a status) to the run's chat session, if it has one.

    Not recorded in the run's log: on re-execution it is sent again unless the step gates
    it on its checkpoint. Returns the outbox entry id, or None without a session. With the
    store unreachable the execution is abandoned (not failed) and runs again after the
    outage, as for every other write of a run.
    """
    return await waits.post(_execution("emit()"), message)


_BARE_WAITS = frozenset({hook.__code__, sleep.__code__, sleep_until.__code__})
