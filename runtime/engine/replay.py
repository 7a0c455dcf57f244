"""The in-memory index of one run's event log, built once per execution.

Primitives consult this index (dict lookups) instead of scanning Redis, so replaying a run
with n events costs O(n) once, not O(n) per primitive call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..models import LOG_SCOPED, LOG_TAKES, Event, EventType
from .scopes import Position, position_of


@dataclass(slots=True)
class StepFailure:
    attempt: int
    error: dict[str, Any]
    final: bool
    timer_id: str | None


class Call(NamedTuple):
    """A durable call of the workflow body as the log recorded it: its kind (step, hook,
    sleep, now, random, uuid4), its name and, for a step, a digest of its arguments. (A
    tuple, not a frozen dataclass: one is made for each call the index reads, and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, ~3x slower.)"""

    kind: str
    name: str
    digest: str | None = None
    value: Any = None

    def describe(self) -> str:
        text = f"{self.kind} {self.name!r}" if self.name else self.kind
        return f"{text} (arguments {self.digest})" if self.digest else text


@dataclass(slots=True, init=False)
class ReplayIndex:
    """What a run's log says so far, by what a primitive looks up: step results and
    failures, hooks created/answered/expired, timers scheduled/fired, recorded
    suspensions. Built once per execution; the execution's own writes are added as they
    are buffered, so replay sees them at once."""

    args: list[Any]
    kwargs: dict[str, Any]
    tags: dict[str, str]  # the run's tags, as of this point
    completed: dict[str, Any]  # step id -> result
    failures: dict[str, list[StepFailure]]
    started: set[tuple[str, int]]  # (step id, attempt)
    hooks_created: dict[str, dict[str, Any]]
    received: dict[str, Any]  # hook id -> payload
    expired: set[str]
    suspended_on: set[str]  # waits whose suspension is recorded
    timers: dict[str, int]  # timer id -> due ms
    fired: set[str]
    # The workflow body's durable calls by position (see Execution.check_call).
    calls: dict[Position, Call]
    step_waits: dict[str, str]  # step id -> its last wait
    patches: set[tuple[str, str | None]]  # (patch, step id)
    # the patch ids the code that began each step knew (step.started)
    step_patches: dict[str, frozenset[str]]
    # When each answer, expiry or timer came (its event id: their order decides a first()).
    completed_at: dict[str, tuple[int, int]]
    # When each step's result was recorded (its event id): a first()'s branch that ran it
    # finished no earlier (engine/tracks.py)
    step_ends: dict[str, str]
    firsts: dict[Position, int]  # first() position -> winner
    closed: set[str]  # waits a first() withdrew
    # receives a first() withdrew that take no message (decisions since 2026-12-02; before,
    # a withdrawn receive kept the next message of its topic, and replays of those logs
    # must still see what their runs saw)
    untaken: set[str]
    messages: dict[str, list[Any]]  # topic -> payloads
    # The messages receives took, as the log recorded it (message.taken; runs of
    # LOG_TAKES): receive -> (topic, message number), and topic -> the numbers so taken
    assigned: dict[str, tuple[str, int]]
    assigned_of: dict[str, set[int]]
    # topic -> when each of its messages came (event id), None where undated: a receive's
    # message can win a first() over a timeout that came later
    message_at: dict[str, list[tuple[int, int] | None]]
    children: dict[Position, str]  # child() position -> run id
    child_ends: dict[str, dict[str, Any]]  # run id -> end
    # The id of the run's workflow.started: this incarnation of the run id (an id is free
    # again once its run expired), which the ids of its children and successor derive from.
    origin: str
    # How the log was recorded, as its workflow.started says (models.LOG_FORMAT; 0 for
    # runs started before 2026-12-02)
    log_format: int
    # The run's trace context, its workflow.started's W3C traceparent (None: untraced),
    # which its child and its successor carry on, also from a worker that does not trace.
    trace: str | None

    def __init__(self) -> None:
        # Written out, not generated: one index is made per execution that is not a cached
        # resume, and the generated __init__ tests each of its 29 arguments against its
        # default (~500 of the engine's ~7,800 bytecodes per lifecycle; bench.engine's
        # instructions per lifecycle 762k -> 754k). tests/runtime/engine/test_replay.py
        # reads every slot of a new index: a field left out here fails it.
        self.args = []
        self.kwargs = {}
        self.tags = {}
        self.completed = {}
        self.failures = {}
        self.started = set()
        self.hooks_created = {}
        self.received = {}
        self.expired = set()
        self.suspended_on = set()
        self.timers = {}
        self.fired = set()
        self.calls = {}
        self.step_waits = {}
        self.patches = set()
        self.step_patches = {}
        self.completed_at = {}
        self.step_ends = {}
        self.firsts = {}
        self.closed = set()
        self.untaken = set()
        self.messages = {}
        self.assigned = {}
        self.assigned_of = {}
        self.message_at = {}
        self.children = {}
        self.child_ends = {}
        self.origin = ""
        self.log_format = 0
        self.trace = None

    @property
    def scoped(self) -> bool:
        """Whether each task of the workflow numbers its own durable calls
        (engine/scopes.py); else they were numbered in one sequence across its tasks, and
        are replayed that way."""
        return self.log_format >= LOG_SCOPED

    @property
    def takes(self) -> bool:
        """Whether its receives record the messages they took; else each takes the next of
        its topic in the order they are reached, as such a run recorded."""
        return self.log_format >= LOG_TAKES

    def add(
        self, event_type: EventType | str, data: dict[str, Any], event_id: str | None = None
    ) -> None:
        if event_type == EventType.WORKFLOW_STARTED and event_id is not None:
            self.origin = event_id
        handler = _HANDLERS.get(event_type)
        if handler is not None:
            handler(self, data)
        wait = _COMPLETES.get(event_type)
        if wait == _STEP:
            # (read as a stamp only by a first() that needs it)
            if event_id is not None and (
                event_type == EventType.STEP_COMPLETED or data.get("final", False)
            ):
                self.step_ends[data[_STEP]] = event_id
        elif wait is not None:
            at = None if event_id is None else stamp(event_id)
            if wait == _TOPIC:  # a message: which receive it ends, each pass decides
                self.message_at.setdefault(data["topic"], []).append(at)
            elif at is not None:
                self.completed_at.setdefault(data[wait], at)

    def add_all(self, events: Sequence[Event]) -> None:
        for event in events:
            self.add(event.type, event.data, event.id)


def stamp(event_id: str) -> tuple[int, int]:
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


def _call(index: ReplayIndex, data: dict[str, Any], call: Call) -> None:
    # Logs written before positions were recorded: calls in log order.
    seq = data.get("seq")
    index.calls[len(index.calls) if seq is None else position_of(seq)] = call


def _started(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.args = list(data.get("args", []))
    index.kwargs = dict(data.get("kwargs", {}))
    index.tags = dict(data.get("tags", {}))
    index.log_format = int(data.get("scoped", 0))
    if "trace" in data:  # (a test, not a get: 4 bytecodes for an untraced run, not 6)
        index.trace = data["trace"]


def _step_started(index: ReplayIndex, data: dict[str, Any]) -> None:
    attempt = int(data.get("attempt", 0))
    index.started.add((data["step_id"], attempt))
    if attempt == 0:
        _call(index, data, Call("step", data.get("name", ""), data.get("args")))
        if data.get("patches"):
            index.step_patches[data["step_id"]] = frozenset(data["patches"])


def _step_completed(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.completed[data["step_id"]] = data.get("result")


def _step_failed(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.failures.setdefault(data["step_id"], []).append(
        StepFailure(
            attempt=int(data.get("attempt", 0)),
            error=dict(data.get("error", {})),
            final=bool(data.get("final", False)),
            timer_id=data.get("timer_id"),
        )
    )
    timer_id = data.get("timer_id")
    if timer_id:
        index.timers[timer_id] = int(data.get("retry_at", 0))


def _suspended(index: ReplayIndex, data: dict[str, Any]) -> None:
    wait = data.get("wait")
    if wait:
        index.suspended_on.add(wait)
        step_id = data.get("step_id")
        if step_id:
            index.step_waits[step_id] = wait


def _hook_created(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.hooks_created[data["hook_id"]] = data
    if not data.get("step_id"):
        _call(index, data, Call("hook", data.get("name", "")))


def _hook_received(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.received[data["hook_id"]] = data.get("payload")


def _hook_expired(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.expired.add(data["hook_id"])


def _timer_scheduled(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.timers[data["timer_id"]] = int(data["due"])
    _call(index, data, Call("sleep", ""))


def _value_recorded(index: ReplayIndex, data: dict[str, Any]) -> None:
    _call(index, data, Call(data["kind"], "", value=data.get("value")))


def _child_started(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.children[position_of(data["seq"])] = data["child_run_id"]


def _child_completed(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.child_ends.setdefault(data["child_run_id"], data)


def _message_received(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.messages.setdefault(data["topic"], []).append(data.get("payload"))


def _message_taken(index: ReplayIndex, data: dict[str, Any]) -> None:
    topic, n = data["topic"], int(data["n"])
    index.assigned[data["wait"]] = (topic, n)
    index.assigned_of.setdefault(topic, set()).add(n)


def _first_decided(index: ReplayIndex, data: dict[str, Any]) -> None:
    position = position_of(data["seq"])
    index.firsts[position] = int(data["winner"])
    index.closed.update(data.get("closed", []))
    for wait in data.get("receives", ()):
        index.untaken.add(wait)
        # a withdrawn receive gives back the message it took: the next receive takes it
        given_back = index.assigned.pop(wait, None)
        if given_back is not None:
            index.assigned_of[given_back[0]].discard(given_back[1])


def _patch_marked(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.patches.add((data["patch"], data.get("step_id")))


def _tags_set(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.tags = dict(data.get("tags", {}))
    _call(index, data, Call("set_tags", "", data.get("digest")))


def _timer_fired(index: ReplayIndex, data: dict[str, Any]) -> None:
    index.fired.add(data["timer_id"])


_HANDLERS: dict[str, Callable[[ReplayIndex, dict[str, Any]], None]] = {
    EventType.WORKFLOW_STARTED: _started,
    EventType.STEP_STARTED: _step_started,
    EventType.STEP_COMPLETED: _step_completed,
    EventType.STEP_FAILED: _step_failed,
    EventType.STEP_SUSPENDED: _suspended,
    EventType.WORKFLOW_SUSPENDED: _suspended,
    EventType.HOOK_CREATED: _hook_created,
    EventType.HOOK_RECEIVED: _hook_received,
    EventType.HOOK_EXPIRED: _hook_expired,
    EventType.TIMER_SCHEDULED: _timer_scheduled,
    EventType.TIMER_FIRED: _timer_fired,
    EventType.VALUE_RECORDED: _value_recorded,
    EventType.PATCH_MARKED: _patch_marked,
    EventType.FIRST_DECIDED: _first_decided,
    EventType.MESSAGE_RECEIVED: _message_received,
    EventType.MESSAGE_TAKEN: _message_taken,
    EventType.CHILD_STARTED: _child_started,
    EventType.CHILD_COMPLETED: _child_completed,
    EventType.TAGS_SET: _tags_set,
}

_TOPIC = "topic"
_STEP = "step_id"

# Events that end a wait, and the field naming it (a message names its topic: the receive
# it ends is the one that takes it, ReplayIndex.message_at).
_COMPLETES: dict[str, str] = {
    EventType.HOOK_RECEIVED: "hook_id",
    EventType.HOOK_EXPIRED: "hook_id",
    EventType.TIMER_FIRED: "timer_id",
    EventType.CHILD_COMPLETED: "child_run_id",
    EventType.MESSAGE_RECEIVED: _TOPIC,
    # not waits: when a step's result, or its final failure, was recorded
    EventType.STEP_COMPLETED: _STEP,
    EventType.STEP_FAILED: _STEP,
}
