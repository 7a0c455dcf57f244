"""Running a step inside a workflow execution: record, replay, retry with durable backoff."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from .. import _faults, tracing
from .._codec import dumps, encode_fragment, encode_value
from ..errors import EventLimitExceeded, HookTimeout, InvalidPayload, StepFailed, UsageError
from ..models import EventType
from ..registry import StepOptions
from .execution import Execution, current_execution
from .failures import describe_error, outage
from .firsts import in_a_losing_branch, note_reach, note_work, withdrawn_at_once
from .signals import Abort, ReplayEnded, StepScope, Suspend, current_step

# Failures that re-running cannot fix: retrying would only burn attempts, and re-run the
# body's side effects (an InvalidPayload: a checkpoint or a call's value that is not JSON,
# or too large, is the same at every attempt).
_NOT_RETRIED: tuple[type[BaseException], ...] = (
    HookTimeout,
    UsageError,
    EventLimitExceeded,
    InvalidPayload,
)


async def call_step(
    fn: Callable[..., Awaitable[Any]],
    options: StepOptions,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    execution = current_execution.get()
    if execution is None:
        return await fn(*args, **kwargs)  # plain call outside a workflow
    if current_step.get() is not None:
        raise UsageError(
            f"step {options.name!r} called from inside another step; call steps from the "
            "workflow body",
            run_id=execution.run_id,
        )
    digest = args_digest(args, kwargs)
    position, _recorded = execution.check_call("step", options.name, digest)
    step_id = execution.next_step_id(options.name)
    index = execution.index
    note_work(index.step_ends.get(step_id))
    if step_id in index.completed:
        return index.completed[step_id]
    failures = index.failures.get(step_id, [])
    if failures and failures[-1].final:
        raise _step_failed(execution, step_id, failures[-1].error)
    if in_a_losing_branch(execution):
        # Nothing will read its result: it is not executed again at each resume of the run
        # (a step_hook step's body up to its hook, another attempt of a failing step).
        raise withdrawn_at_once(execution, step_id)
    if execution.dry_run:
        raise ReplayEnded(f"step {step_id!r} has no recorded result (its body is not run)")
    attempt = len(failures)
    if failures and failures[-1].timer_id and failures[-1].timer_id not in index.fired:
        raise _backing_off(execution, failures[-1].timer_id)

    while True:
        while execution.flush_before_step:
            # A recorded result (or a first()'s decision) must be durable before another
            # step's side effects run, or a crash during this step would re-run the
            # previous one too (again if another task recorded one while this flushed).
            await execution.flush()
        if (step_id, attempt) not in index.started:
            started: dict[str, Any] = {"step_id": step_id, "name": options.name}
            if attempt:
                started["attempt"] = attempt
            else:
                execution.steps_begun_here.add(step_id)
                started["seq"] = position
                if digest is not None:
                    started["args"] = digest
                if options.patches:
                    started["patches"] = sorted(options.patches)
            execution.record(EventType.STEP_STARTED, started)
            _faults.crash_point("after_step_start")
        else:
            _faults.crash_point("before_step_reexecute")
        scope = StepScope(step_id, options.name)
        retry = False
        token = current_step.set(scope)
        execution.branches.steps_running += 1  # (a wait held back in a gather waits for it)
        try:
            if tracing.enabled():
                result = await _traced_step(fn, options, args, kwargs, execution, step_id, attempt)
            elif options.timeout is None:
                result = await fn(*args, **kwargs)
            else:
                async with asyncio.timeout(options.timeout):
                    result = await fn(*args, **kwargs)
        except Suspend:
            raise
        except Exception as exc:
            unavailable = outage(exc)
            if unavailable is not None:
                # The store was unreachable (a Runtime call of the step, or an error the
                # step raised from one): not the step's failure. The execution is
                # abandoned like any write's in an outage, and runs again after it.
                raise Abort(unavailable) from exc
            attempt = await _record_failure(execution, options, step_id, attempt, exc)
            retry = True
        finally:
            execution.branches.steps_running -= 1
            current_step.reset(token)
        if retry:  # (not a `continue` in the try: mypyc cannot compile one, bench.compiled)
            continue
        check_step_waits(execution, scope)
        encoded = encode_value(
            result,
            what=f"result of step {step_id!r}",
            limit=execution.limits.max_payload_bytes,
            run_id=execution.run_id,
        )
        value = execution.decode(encoded)
        execution.record_encoded(
            EventType.STEP_COMPLETED,
            encode_fragment("result", encoded, step_id=step_id),
            {"step_id": step_id, "result": value},
        )
        execution.undated_steps.append(step_id)
        execution.drop_checkpoint(step_id)
        execution.flush_before_step = True
        _faults.crash_point("after_step_completed")
        return value


async def _traced_step(
    fn: Callable[..., Awaitable[Any]],
    options: StepOptions,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    execution: Execution,
    step_id: str,
    attempt: int,
) -> Any:
    """The step's body as a ``parley.step`` span (runtime.tracing), with the run's id: a
    step's spans are found by the run as its execution's are."""
    attributes = {
        "parley.run_id": execution.run_id,
        "parley.step_id": step_id,
        "parley.attempt": attempt,
    }
    with tracing.span("parley.step", attributes=attributes):
        async with asyncio.timeout(options.timeout):
            return await fn(*args, **kwargs)


async def _record_failure(
    execution: Execution, options: StepOptions, step_id: str, attempt: int, exc: Exception
) -> int:
    """Record a failed attempt. Returns the next attempt number when it retries at once;
    raises Suspend (durable backoff) or StepFailed (out of attempts)."""
    error = describe_error(exc, execution.run_id)
    retryable = not isinstance(exc, _NOT_RETRIED)
    if not retryable or attempt >= options.retries:
        execution.record(
            EventType.STEP_FAILED,
            {"step_id": step_id, "attempt": attempt, "error": error, "final": True},
        )
        execution.undated_steps.append(step_id)
        execution.drop_checkpoint(step_id)
        execution.flush_before_step = True
        raise _step_failed(execution, step_id, error) from exc
    if in_a_losing_branch(execution):
        # A first() decided against its branch while it ran (a gathered task the branch
        # left behind): nothing reads its result, so it is not attempted again. Race
        # closed: its retry timer, made after the decision, was a wait nothing awaited,
        # and the run failed as one that left a wait behind.
        raise withdrawn_at_once(execution, step_id)
    delay = options.retry_delay * options.backoff**attempt
    if delay <= 0:
        execution.record(
            EventType.STEP_FAILED,
            {"step_id": step_id, "attempt": attempt, "error": error, "final": False},
        )
        execution.flush_before_step = True
        return attempt + 1
    timer_id = f"r.{step_id}.{attempt}"
    due = execution.now_ms() + int(delay * 1000)
    execution.record(
        EventType.STEP_FAILED,
        {
            "step_id": step_id,
            "attempt": attempt,
            "error": error,
            "final": False,
            "timer_id": timer_id,
            "retry_at": due,
        },
    )
    execution.writes.schedule_timer(timer_id, due)
    raise _backing_off(execution, timer_id)


def _backing_off(execution: Execution, timer_id: str) -> Suspend:
    """The suspension of a step waiting for its next attempt. Inside a first(), its timer
    ends with the branch: cancelled if the branch loses (it does not score the branch: the
    step's success, not the timer, finishes it)."""
    note_reach(timer_id)
    return execution.suspend_on(timer_id)


def _step_failed(execution: Execution, step_id: str, error: dict[str, Any]) -> StepFailed:
    return StepFailed(
        f"step {step_id!r} failed: {error.get('type')}: {error.get('message')}",
        run_id=execution.run_id,
        step_id=step_id,
        error_type=error.get("type"),
    )


def args_digest(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """A short digest of a step call's arguments, to tell two calls of one step apart on
    replay; None when they are not JSON (then only the step's name is checked)."""
    try:
        encoded = dumps([list(args), kwargs])
    except TypeError:
        return None
    return hashlib.sha1(encoded).hexdigest()[:16]


def check_step_waits(
    execution: Execution, scope: StepScope, hook_id: str | None = None, name: str = ""
) -> None:
    """A step that suspended on a hook must ask for that hook again when it re-executes
    (before it asks anything new, or returns) unless its checkpoint says it read the
    answer already: otherwise the code changed under the suspended run (the hook was
    renamed or removed), and going on would ask the person again."""
    wait = execution.index.step_waits.get(scope.step_id)
    if wait is None or wait == hook_id or wait in scope.consumed:
        return
    if wait in execution.checkpoint_reads.get(scope.step_id, ()):
        return
    recorded = execution.index.hooks_created.get(wait, {}).get("name", wait)
    now = "no step_hook (the step returned)" if hook_id is None else f"step_hook {name!r}"
    execution.block(f"step {scope.step_id}", f"step_hook {recorded!r}", now)
