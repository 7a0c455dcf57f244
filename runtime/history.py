"""Cutting a run's history for a restart: the events before a chosen step, made into a log
a new run can replay from (what finished before the cut is kept; what was still going is
left out, to be done again)."""

from __future__ import annotations

from .errors import UsageError
from .models import Event, EventType

# What ends a run, or only says how the last execution went: never copied.
_NOT_COPIED = frozenset(
    {
        EventType.WORKFLOW_COMPLETED,
        EventType.WORKFLOW_FAILED,
        EventType.WORKFLOW_CANCELLED,
        EventType.WORKFLOW_BLOCKED,
        EventType.WORKFLOW_RETRIED,
        EventType.WORKFLOW_CONTINUED,
        EventType.WORKFLOW_SUSPENDED,
        EventType.STEP_SUSPENDED,
    }
)


def restart_point(events: list[Event], from_step: str | None, *, run_id: str) -> int:
    """The index of the first event not kept: the start of ``from_step`` (a step id like
    ``charge-0``, or a step name for its first call), or, by default, of the step that
    failed or was cut short (else the run's end)."""
    starts = {e.data["step_id"]: i for i, e in reversed(list(enumerate(events)))
              if e.type == EventType.STEP_STARTED}  # fmt: skip
    if from_step is not None:
        step_id = from_step if from_step in starts else f"{from_step}-0"
        if step_id not in starts:
            known = ", ".join(sorted(starts, key=starts.__getitem__)) or "none"
            raise UsageError(
                f"the run has no step {from_step!r} (its steps: {known})", run_id=run_id
            )
        return starts[step_id]
    done = {e.data["step_id"] for e in events if e.type == EventType.STEP_COMPLETED}
    unfinished = [i for step_id, i in starts.items() if step_id not in done]
    if unfinished:
        return min(unfinished)
    return len(events)


def history_before(events: list[Event], cut: int) -> list[Event]:
    """The events before ``cut`` that make a consistent log: steps with their results,
    hooks with their answers, timers that fired, children with their ends, recorded values
    and decisions. A hook still pending, a timer not fired, a step not finished (and its
    failed attempts), a child whose end the log had not learnt are left out: the new run
    does them again (a child under its own new id: the old one reports to the old run
    only, so a new run waiting on it would wait for good)."""
    kept = events[:cut]
    answered = {e.data["hook_id"] for e in kept
                if e.type in (EventType.HOOK_RECEIVED, EventType.HOOK_EXPIRED)}  # fmt: skip
    fired = {e.data["timer_id"] for e in kept if e.type == EventType.TIMER_FIRED}
    ended_children = {e.data["child_run_id"] for e in kept
                      if e.type == EventType.CHILD_COMPLETED}  # fmt: skip
    finished = {e.data["step_id"] for e in kept
                if e.type == EventType.STEP_COMPLETED
                or (e.type == EventType.STEP_FAILED and e.data.get("final"))}  # fmt: skip
    out = []
    for event in kept:
        data = event.data
        if event.type in _NOT_COPIED:
            continue
        if event.type == EventType.HOOK_CREATED and data["hook_id"] not in answered:
            continue
        if event.type == EventType.TIMER_SCHEDULED and data["timer_id"] not in fired:
            continue
        if event.type == EventType.CHILD_STARTED and data["child_run_id"] not in ended_children:
            continue
        if event.type in (EventType.STEP_STARTED, EventType.STEP_FAILED) and (
            data["step_id"] not in finished
        ):
            continue
        out.append(event)
    return out
