"""The mechanics of durable waits and step checkpoints inside an execution: what is
replayed from the index, what is recorded, and when the run suspends. The public calls
(``hook``, ``step_hook``, ``sleep``, the checkpoint calls) are in :mod:`runtime.workflow`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Final, Literal

from .. import _faults, tracing
from .._codec import due_ms, dumps, encode_value, loads
from ..errors import ChildFailed, HookTimeout, StoreUnavailable
from ..models import EventType
from .execution import READ_SUFFIX, Execution
from .firsts import (
    in_a_losing_branch,
    join_first,
    note_wait,
    withdrawn_at_once,
    withdraws_receive,
)
from .hooks import OnCreated, ask, ask_again, create_hook
from .scopes import Position
from .signals import Abort, ReplayEnded, StepScope
from .steps import check_step_waits

OnTimeout = Literal["raise", "return"]


class _StepHookTimeout:
    """The value ``hook``/``step_hook`` return when their deadline passed and
    ``on_timeout="return"``. Compare with ``is``."""

    _instance: ClassVar[_StepHookTimeout | None] = None

    def __new__(cls) -> _StepHookTimeout:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "STEP_HOOK_TIMEOUT"

    def __bool__(self) -> bool:
        return False


STEP_HOOK_TIMEOUT: Final = _StepHookTimeout()


async def wait_for_hook(
    execution: Execution,
    name: str,
    hook_id: str,
    scope: StepScope | None,
    timeout: float | datetime | None,
    on_created: OnCreated | None,
    schema: dict[str, Any] | None,
    on_timeout: OnTimeout,
    prompt: str | None,
) -> Any:
    """The hook's answer if the log has one (or the timeout outcome); else create the hook
    (once), hand out its token (``on_created``, at least once) and suspend. ``scope`` is
    the step calling ``step_hook``; None for a workflow's ``hook``."""
    index = execution.index
    note_wait(hook_id)
    step_id = None if scope is None else scope.step_id
    seq: Position | None = None
    if scope is None:
        seq, _recorded = execution.check_call("hook", name)
    if hook_id in index.received or hook_id in index.expired:
        return _ended(execution, scope, name, hook_id, on_timeout)
    token = execution.token(hook_id)
    if hook_id in index.closed:  # withdrawn by a first(): nothing to ask, nothing to wait for
        raise execution.suspend_on(hook_id, step_id)
    if hook_id not in index.hooks_created:
        if in_a_losing_branch(execution):
            raise withdrawn_at_once(execution, hook_id, step_id)
        if scope is not None:
            check_step_waits(execution, scope, hook_id, name)
        if execution.dry_run:
            raise ReplayEnded(f"hook {hook_id!r} is not in the recorded history")
        expires_at_ms = None if timeout is None else due_ms(timeout, execution.now_ms())
        create_hook(execution, name, hook_id, step_id, seq, expires_at_ms, schema, prompt, token)
        join_first(execution, hook_id)
        if on_created is None:
            # Nobody learns the token before the suspension: record the hook in the same
            # write as the suspension (one round trip fewer).
            raise execution.suspend_on(hook_id, step_id)
        if expires_at_ms is not None:
            # Nobody has been asked yet: the hook must not expire before on_created
            # returned, also if this worker dies first (the re-execution asks).
            execution.writes.asking(hook_id, expires_at_ms)
        # on_created hands the token out, and its answer may come back at once: the hook
        # must be durable before that.
        await execution.flush()
        _faults.crash_point("after_hook_created")
    elif (
        on_created is not None
        and hook_id not in index.suspended_on
        and hook_id not in execution.notified
    ):
        await ask_again(execution, hook_id, timeout)
        if hook_id in index.received or hook_id in index.expired:
            # It ended before it was asked again (its answer came back with that write):
            # return it, no suspension on it (nothing would wake the run).
            return _ended(execution, scope, name, hook_id, on_timeout)
    if hook_id not in index.suspended_on and hook_id not in execution.notified:
        # No suspension recorded yet: on_created may not have run (first time, or the
        # previous worker died before suspending) — at-least-once across crashes.
        await ask(execution, hook_id, token, on_created)
    raise execution.suspend_on(hook_id, step_id)


def _ended(
    execution: Execution, scope: StepScope | None, name: str, hook_id: str, on_timeout: OnTimeout
) -> Any:
    """What ``hook``/``step_hook`` return for a hook whose answer or expiry is in the log."""
    if scope is not None:
        scope.consumed.add(hook_id)
    index = execution.index
    if hook_id in index.received:
        return index.received[hook_id]
    if on_timeout == "return":
        return STEP_HOOK_TIMEOUT
    raise HookTimeout(
        f"hook {name!r} got no answer before its deadline",
        run_id=execution.run_id,
        hook_id=hook_id,
    )


def sleep(execution: Execution, until: float | datetime) -> None:
    """Return when the timer fired; else schedule it (once) and suspend. ``until``: seconds
    from now, or an instant."""
    seq, _recorded = execution.check_call("sleep")
    timer_id = execution.next_timer_id()
    note_wait(timer_id)
    if timer_id in execution.index.fired:
        return
    if timer_id not in execution.index.timers:
        if in_a_losing_branch(execution):
            raise withdrawn_at_once(execution, timer_id)
        due = due_ms(until, execution.now_ms())
        execution.record(EventType.TIMER_SCHEDULED, {"timer_id": timer_id, "due": due, "seq": seq})
        execution.writes.schedule_timer(timer_id, due)
        join_first(execution, timer_id)
    raise execution.suspend_on(timer_id)


async def save_checkpoint(
    execution: Execution, scope: StepScope, state: Any, *, defer: bool
) -> None:
    step_id = scope.step_id
    data = encode_value(
        state,
        what="step checkpoint",
        limit=execution.limits.max_checkpoint_bytes,
        run_id=execution.run_id,
    )
    execution.checkpoints[step_id] = data
    execution.writes.save_checkpoint(step_id, data)
    # The answers the step has read by now, saved with its state: a re-execution that
    # resumes from this checkpoint need not ask for them again (see check_step_waits).
    # Only the step's latest recorded wait is ever checked, and a later suspension is on a
    # hook not read yet: older reads are dropped, so a step that loops step_hook (a chat)
    # saves and loads a bounded list, not one that grows with every round.
    latest = execution.index.step_waits.get(step_id)
    earlier = execution.checkpoint_reads.get(step_id, set())
    reads = scope.consumed | ({latest} & earlier if latest is not None else set())
    if reads:
        execution.checkpoint_reads[step_id] = reads
        execution.writes.save_checkpoint(step_id + READ_SUFFIX, dumps(sorted(reads)))
    if not defer:
        await execution.flush()
        _faults.crash_point("after_checkpoint_save")


def load_checkpoint(execution: Execution, step_id: str) -> Any:
    data = execution.checkpoints.get(step_id)
    return None if data is None else execution.decode(data)


def delete_checkpoint(execution: Execution, step_id: str) -> None:
    execution.drop_checkpoint(step_id)


async def post(execution: Execution, message: dict[str, Any]) -> str | None:
    """A message to the run's chat session now (not recorded in the log)."""
    if not execution.session:
        return None
    data = encode_value(
        {"run_id": execution.run_id, **message},
        what="message",
        limit=execution.limits.max_payload_bytes,
        run_id=execution.run_id,
    )
    try:
        return await execution.store.post(
            execution.session, data, retention_seconds=execution.retention_seconds
        )
    except StoreUnavailable as exc:
        # Like every write of an execution in an outage: unwind past user code (an
        # ``except Exception`` cannot take it for the step's failure) and run again later.
        raise Abort(exc) from exc


def receive(execution: Execution, topic: str) -> Any:
    """The next message of ``topic`` from the log; else the run suspends until one comes
    (one buffered before is taken at the suspension)."""
    position, _recorded = execution.check_call("receive", topic)
    wait_id = f"m{position}.{topic}"
    note_wait(wait_id)
    if wait_id in execution.index.untaken:
        # Withdrawn by a first() (its timeout came first): it takes no message. Race
        # closed: counted as one that took a message, it kept the next message sent, which
        # no later receive of the topic then got.
        raise execution.suspend_on(wait_id)
    if withdraws_receive(execution, wait_id):
        # Reached in a losing branch after its first() was decided: nothing would read the
        # message it took, which the run's next receive of the topic would not get.
        raise withdrawn_at_once(execution, wait_id)
    index = execution.index
    n = execution.messages.take(topic, wait_id, index)
    received = index.messages.get(topic, [])
    if n < len(received):
        if index.takes and wait_id not in index.assigned and not execution.dry_run:
            execution.record(EventType.MESSAGE_TAKEN, {"wait": wait_id, "topic": topic, "n": n})
        return received[n]
    if execution.dry_run:
        raise ReplayEnded(f"the run waits for a message {topic!r}")
    execution.receiving[wait_id] = topic
    raise execution.suspend_on(wait_id)


async def child(execution: Execution, workflow: str, started: bytes) -> Any:
    """Start a child run (once: its id comes from this run and the call's position), wait
    for it without holding a worker, and return its result (or raise ChildFailed)."""
    position, _recorded = execution.check_call("child", workflow)
    child_id = execution.index.children.get(position)
    if child_id is None:
        if execution.dry_run:
            raise ReplayEnded(f"the child {workflow!r} is not in the recorded history")
        child_id = execution.store.child_run_id(execution.run_id, execution.index.origin, position)
        if in_a_losing_branch(execution):
            raise withdrawn_at_once(execution, child_id)
        execution.record(
            EventType.CHILD_STARTED,
            {"seq": position, "child_run_id": child_id, "workflow": workflow},
        )
        trace = tracing.child_traceparent(execution.index.trace)
        if trace is not None:
            # The child's executions are children of this execution's span, in the
            # parent's trace (with tracing off here, of the parent's stored context). Not
            # counted against the input's limit (a traceparent is a fixed 55 characters):
            # an input that fits untraced must not fail traced.
            started = dumps({**loads(started), "trace": trace})
        execution.writes.start_child(child_id, workflow, started)
        # Durable before this run goes on: the child runs at once, on any worker.
        await execution.flush()
        _faults.crash_point("after_child_started")
    note_wait(child_id)
    end = execution.index.child_ends.get(child_id)
    if end is None:
        raise execution.suspend_on(child_id)
    if end["status"] == "completed":
        return end.get("result")
    error = end.get("error") or {}
    raise ChildFailed(
        f"child run {child_id} {end['status']}: {error.get('type')}: {error.get('message')}"
        if error
        else f"child run {child_id} {end['status']}",
        run_id=execution.run_id,
        child_run_id=child_id,
        error_type=error.get("type"),
    )
