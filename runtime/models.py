"""What the runtime reports about runs, hooks and events."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class RunStatus(enum.StrEnum):
    PENDING = "pending"  # enqueued: a worker will pick it up (start, answer, timer, retry)
    RUNNING = "running"  # a worker holds its lease and is executing it
    SUSPENDED = "suspended"  # waiting for a hook answer or a deadline; holds no worker
    COMPLETED = "completed"  # the workflow returned; `result` holds its value
    FAILED = "failed"  # the workflow raised; `error` says what
    # cancelled by an operator, by its parent's end, or as a child whose branch of its
    # parent's first() lost; pending hooks and deadlines cleaned
    CANCELLED = "cancelled"
    # Its code no longer matches its log (a NondeterminismError): it waits, untouched, for a
    # worker with matching code and `parley runs retry`. Not finished.
    BLOCKED = "blocked"
    # Its version is served by no worker that saw it: it waits for one (not finished).
    PARKED = "parked"
    # It handed its state to a fresh run (continue_as_new): `result` names it. Finished.
    CONTINUED = "continued"

    @property
    def finished(self) -> bool:
        return self in FINISHED_STATUSES


class HookStatus(enum.StrEnum):
    PENDING = "pending"  # created, waiting for an answer
    RECEIVED = "received"  # an answer was accepted
    EXPIRED = "expired"  # its deadline passed first
    CANCELLED = "cancelled"  # its run was cancelled first
    CLOSED = "closed"  # another wait of a first(...) finished first: withdrawn


FINISHED_STATUSES = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED}
)


class EventType(enum.StrEnum):
    """The types of the entries of a run's event log."""

    WORKFLOW_STARTED = "workflow.started"  # args, kwargs
    WORKFLOW_SUSPENDED = "workflow.suspended"  # wait: a hook or timer id
    WORKFLOW_COMPLETED = "workflow.completed"  # result
    WORKFLOW_FAILED = "workflow.failed"  # error
    WORKFLOW_CANCELLED = "workflow.cancelled"  # reason
    STEP_STARTED = "step.started"  # step_id, name, attempt
    STEP_COMPLETED = "step.completed"  # step_id, result
    STEP_FAILED = "step.failed"  # step_id, attempt, error, final, timer_id, retry_at
    STEP_SUSPENDED = "step.suspended"  # step_id, wait
    HOOK_CREATED = "hook.created"  # hook_id, name, step_id, expires_at, prompt, schema
    HOOK_RECEIVED = "hook.received"  # hook_id, payload, answered_by (when given)
    HOOK_EXPIRED = "hook.expired"  # hook_id
    TIMER_SCHEDULED = "timer.scheduled"  # timer_id, due
    TIMER_FIRED = "timer.fired"  # timer_id
    WORKFLOW_BLOCKED = "workflow.blocked"  # error: the mismatch (position, recorded, now)
    WORKFLOW_RETRIED = "workflow.retried"  # a blocked run was sent back to the workers
    WORKFLOW_CONTINUED = "workflow.continued"  # continued_to: the fresh run (continue_as_new)
    PATCH_MARKED = "patch.marked"  # patch, step_id: this run took the patched path
    VALUE_RECORDED = "value.recorded"  # kind (now, random, uuid4), value
    CHILD_STARTED = "child.started"  # seq, child_run_id, workflow
    CHILD_COMPLETED = "child.completed"  # child_run_id, status, result or error
    MESSAGE_RECEIVED = "message.received"  # topic, payload: the next message of a topic
    # wait, topic, n: a receive took the topic's n-th message (runs of LOG_TAKES on)
    MESSAGE_TAKEN = "message.taken"
    # seq, winner (its index), closed (the other waits), receives (those of them that are
    # receives: they take no message)
    FIRST_DECIDED = "first.decided"
    TAGS_SET = "tags.set"  # seq, tags (the run's tags after the change), changes


# What ``scoped`` in a run's workflow.started says of how its log was recorded (a replay
# follows the code that recorded it). Absent: the calls of all its tasks numbered in one
# sequence, and each receive took the next message of its topic in the order the receives
# were reached. LOG_SCOPED (runs started since 2026-12-02): each task numbers its own calls
# (engine/scopes.py). LOG_TAKES (since later that day, what new runs record): also each
# receive records the message it took (message.taken; engine/messages.py).
LOG_SCOPED = 1
LOG_TAKES = 2
# What new runs record, and the newest a worker of this version replays: a run recorded in
# a newer one (a newer Parley's, during a rolling upgrade) is left for a worker that knows it.
LOG_FORMAT = LOG_TAKES


# Events that wake a suspended run (an answer, an expiry, a timer).
WAKING_EVENTS = frozenset({EventType.HOOK_RECEIVED, EventType.HOOK_EXPIRED, EventType.TIMER_FIRED})


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a run's event log."""

    id: str  # the Redis stream id: "<ms>-<seq>", ordered
    type: str
    data: dict[str, Any]

    @property
    def timestamp_ms(self) -> int:
        return int(self.id.split("-", 1)[0])

    def __repr__(self) -> str:
        return f"<Event {self.id} {self.type}>"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "data": self.data}


@dataclass(frozen=True, slots=True)
class HookInfo:
    token: str
    run_id: str
    hook_id: str
    name: str
    status: HookStatus
    step_id: str | None = None
    expires_at: float | None = None  # unix seconds
    session: str | None = None
    prompt: str | None = None
    schema: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<Hook {self.token} {self.status.value}>"

    def to_json(self) -> dict[str, Any]:
        """The shape the HTTP API and ``parley hooks --json`` print."""
        return {
            "token": self.token,
            "run_id": self.run_id,
            "hook_id": self.hook_id,
            "name": self.name,
            "status": self.status.value,
            "step_id": self.step_id,
            "expires_at": self.expires_at,
            "session": self.session,
            "prompt": self.prompt,
            "schema": self.schema,
        }


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    workflow: str
    status: RunStatus
    result: Any = None
    error: dict[str, Any] | None = None
    session: str | None = None
    created_at: float | None = None
    hooks: list[HookInfo] = field(default_factory=list)
    version: str | None = None  # the version of the worker that first executed it
    restarted_from: str | None = None  # the run this one continues (Runtime.restart)
    restarted_as: str | None = None  # the run that continues this one
    continued_from: str | None = None  # the run whose continue_as_new started this one
    continued_to: str | None = None  # the run this one's continue_as_new started
    parent_run_id: str | None = None  # the run that started this one with child()
    child_run_ids: list[str] = field(default_factory=list)  # the runs it started so
    tags: dict[str, str] = field(default_factory=dict)  # search attributes (runtime.tags)

    def __repr__(self) -> str:
        return f"<Run {self.run_id} {self.status.value}>"

    def to_json(self) -> dict[str, Any]:
        """The shape the HTTP API and ``parley runs --json`` print."""
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status.value,
            "result": self.result,
            "error": self.error,
            "session": self.session,
            "created_at": self.created_at,
            "version": self.version,
            "restarted_from": self.restarted_from,
            "restarted_as": self.restarted_as,
            "continued_from": self.continued_from,
            "continued_to": self.continued_to,
            "parent_run_id": self.parent_run_id,
            "child_run_ids": self.child_run_ids,
            "tags": self.tags,
            "hooks": [h.to_json() for h in self.hooks],
            "pending_hooks": [h.to_json() for h in self.hooks if h.status is HookStatus.PENDING],
        }
