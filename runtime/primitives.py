"""Durable waits and step checkpoints: ``hook``, ``step_hook``, ``sleep`` and the
checkpoint calls. Each consults the execution's replay index first, so replay never
repeats a wait that already ended, and records only what is new."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import jsonschema

from . import _faults
from ._codec import Duration, dumps, encode_value, parse_duration
from ._execution import Execution, Suspend, current_execution, current_step, now_ms
from ._keys import NAME_RE
from .errors import HookTimeout, UsageError

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = [
    "STEP_HOOK_TIMEOUT",
    "RunContext",
    "current_run",
    "delete_step_checkpoint",
    "emit",
    "hook",
    "load_step_checkpoint",
    "save_step_checkpoint",
    "sleep",
    "step_hook",
]


class _StepHookTimeout:
    """The value ``hook``/``step_hook`` return when their deadline passed and
    ``on_timeout="return"``. Compare with ``is``."""

    _instance: _StepHookTimeout | None = None

    def __new__(cls) -> _StepHookTimeout:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "STEP_HOOK_TIMEOUT"

    def __bool__(self) -> bool:
        return False


STEP_HOOK_TIMEOUT: Final = _StepHookTimeout()

OnCreated = Callable[[str], Awaitable[None] | None]
OnTimeout = Literal["raise", "return"]


def _execution(what: str) -> Execution:
    execution = current_execution.get()
    if execution is None:
        raise UsageError(f"{what} can only be used while a workflow runs on a worker")
    return execution


async def hook(
    name: str,
    timeout: Duration | None = None,
    on_created: OnCreated | None = None,
    schema: dict[str, Any] | None = None,
    on_timeout: OnTimeout = "raise",
    *,
    prompt: str | None = None,
) -> Any:
    """Suspend the *workflow* until ``resume_hook(token, payload)`` delivers a payload.

    Call it from the workflow body (inside a step use :func:`step_hook`).
    """
    execution = _execution("hook()")
    if current_step.get() is not None:
        raise UsageError(
            "hook() is for the workflow body; inside a step use step_hook()",
            run_id=execution.run_id,
        )
    _check_hook_name(name)
    hook_id = execution.next_workflow_hook_id(name)
    return await _wait_for_hook(
        execution, name, hook_id, None, timeout, on_created, schema, on_timeout, prompt
    )


async def step_hook(
    name: str,
    timeout: Duration | None = None,
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
    intervenes, at least once across crashes.
    """
    execution = _execution("step_hook()")
    scope = current_step.get()
    if scope is None:
        raise UsageError(
            "step_hook() must be called inside a @step; in the workflow body use hook()",
            run_id=execution.run_id,
        )
    _check_hook_name(name)
    n = scope.hook_counters.get(name, 0)
    scope.hook_counters[name] = n + 1
    hook_id = f"{scope.step_id}.{name}.{n}"
    return await _wait_for_hook(
        execution, name, hook_id, scope.step_id, timeout, on_created, schema, on_timeout, prompt
    )


def _check_hook_name(name: str) -> None:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(f"hook name must match {NAME_RE.pattern}, got {name!r}")


async def _wait_for_hook(
    execution: Execution,
    name: str,
    hook_id: str,
    step_id: str | None,
    timeout: Duration | None,
    on_created: OnCreated | None,
    schema: dict[str, Any] | None,
    on_timeout: OnTimeout,
    prompt: str | None,
) -> Any:
    if on_timeout not in ("raise", "return"):
        raise UsageError(f"on_timeout must be 'raise' or 'return', got {on_timeout!r}")
    index = execution.index
    if hook_id in index.received:
        return index.received[hook_id]
    if hook_id in index.expired:
        if on_timeout == "return":
            return STEP_HOOK_TIMEOUT
        raise HookTimeout(
            f"hook {name!r} got no answer before its deadline",
            run_id=execution.run_id,
            hook_id=hook_id,
        )
    token = execution.token(hook_id)
    if hook_id not in index.hooks_created:
        _create_hook(execution, name, hook_id, step_id, timeout, schema, prompt, token)
        if on_created is None:
            # Nobody learns the token before the suspension: record the hook in the same
            # script as the suspension (one round trip fewer).
            raise Suspend(hook_id, step_id)
        # on_created hands the token out, and its answer may come back at once: the hook
        # must be durable before that.
        await execution.flush()
        _faults.crash_point("after_hook_created")
    if hook_id not in index.suspended_on and hook_id not in execution.notified:
        # No suspension recorded yet: on_created may not have run (first time, or the
        # previous worker died before suspending) — at-least-once across crashes.
        if on_created is not None:
            outcome = on_created(token)
            if inspect.isawaitable(outcome):
                await outcome
        # Only once it returned: if it raised, a retried step calls it again.
        execution.notified.add(hook_id)
        _faults.crash_point("after_on_created")
    raise Suspend(hook_id, step_id)


def _create_hook(
    execution: Execution,
    name: str,
    hook_id: str,
    step_id: str | None,
    timeout: Duration | None,
    schema: dict[str, Any] | None,
    prompt: str | None,
    token: str,
) -> None:
    if schema is not None:
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise UsageError(
                f"schema of hook {name!r} is not a valid JSON Schema: {exc.message}",
                run_id=execution.run_id,
                hook_id=hook_id,
            ) from None
    expires_ms = None
    if timeout is not None:
        expires_ms = now_ms() + int(parse_duration(timeout, what="timeout") * 1000)
    if prompt is None and schema is not None:
        prompt = schema.get("description") or schema.get("title")
    # Absent rather than null: a suspended run's bytes are the cost that matters.
    meta: dict[str, Any] = {"name": name}
    for field, value in (
        ("step_id", step_id),
        ("expires_at", expires_ms),
        ("prompt", prompt),
        ("schema", schema),
    ):
        if value is not None:
            meta[field] = value
    data = {"hook_id": hook_id, **meta}
    execution.record("hook.created", data)
    flag = "PS" if schema is not None else "P-"
    execution.op("H", hook_id, flag.encode() + dumps(meta), token)
    if expires_ms is not None:
        execution.op("Z", expires_ms, f"{execution.run_id}|h|{hook_id}")
    if execution.session:
        execution.op(
            "P",  # a prompt: keeps the session's outbox from expiring while it is pending
            dumps(
                {
                    "type": "prompt",
                    "run_id": execution.run_id,
                    "token": token,
                    "hook": name,
                    "prompt": prompt,
                    "schema": schema,
                    "expires_at": expires_ms,
                }
            ),
        )


async def sleep(duration: Duration) -> None:
    """Durable timer at workflow level: the run suspends and a deadline wakes it."""
    execution = _execution("sleep()")
    if current_step.get() is not None:
        raise UsageError(
            "sleep() is durable at workflow level only; inside a step use asyncio.sleep",
            run_id=execution.run_id,
        )
    seconds = parse_duration(duration, what="sleep duration")
    timer_id = execution.next_timer_id()
    if timer_id in execution.index.fired:
        return
    if timer_id not in execution.index.timers:
        due = now_ms() + int(seconds * 1000)
        execution.record("timer.scheduled", {"timer_id": timer_id, "due": due})
        member = f"{execution.run_id}|t|{timer_id}"
        execution.op("Z", due, member)
        execution.op("F", "dl", member)
    raise Suspend(timer_id)


def _step_scope(what: str) -> tuple[Execution, str]:
    execution = _execution(what)
    scope = current_step.get()
    if scope is None:
        raise UsageError(f"{what} must be called inside a @step", run_id=execution.run_id)
    return execution, scope.step_id


async def save_step_checkpoint(state: Any, *, defer: bool = False) -> None:
    """Save the current step's state (JSON); it is deleted when the step completes.

    By default the checkpoint is durable when this returns (one round trip): a crash
    after it never re-runs what it records. With ``defer=True`` it is written together
    with the step's next durable write — the ``hook.created`` of the following
    ``step_hook``, or the step's end — saving that round trip; use it when nothing slow
    or side-effecting runs between the save and the ``step_hook``.
    """
    execution, step_id = _step_scope("save_step_checkpoint()")
    data = encode_value(
        state,
        what="step checkpoint",
        limit=execution.runtime.limits.max_checkpoint_bytes,
        run_id=execution.run_id,
    )
    execution.checkpoints[step_id] = data
    execution.op("C", step_id, data)
    if not defer:
        await execution.flush()
        _faults.crash_point("after_checkpoint_save")


async def load_step_checkpoint() -> Any:
    """The state saved by this step before it suspended, or None on its first run."""
    execution, step_id = _step_scope("load_step_checkpoint()")
    data = execution.checkpoints.get(step_id)
    return None if data is None else execution.runtime.decode(data)


async def delete_step_checkpoint() -> None:
    execution, step_id = _step_scope("delete_step_checkpoint()")
    if execution.checkpoints.pop(step_id, None) is not None:
        execution.op("D", step_id)


@dataclass(frozen=True, slots=True)
class RunContext:
    """Where the calling code runs: its run, its workflow, its chat session, its step."""

    run_id: str
    workflow: str
    session: str | None
    step_id: str | None
    runtime: Runtime

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
        runtime=execution.runtime,
    )


async def emit(message: dict[str, Any]) -> str | None:
    """Send a message (agent text, a status) to the run's chat session, if it has one.

    Not recorded in the run's log: on re-execution it is sent again unless the step gates
    it on its checkpoint. Returns the outbox entry id, or None without a session.
    """
    execution = _execution("emit()")
    if not execution.session:
        return None
    return await execution.runtime.post_to_session(
        execution.session, {"run_id": execution.run_id, **message}
    )
