"""The store's typed requests and results: the records :class:`~runtime.store.base.Store`
takes and returns (a task, a claim, an applied write, an answer's outcome, ...)."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from ..models import Event, RunStatus

# The records a worker makes on every execution (Task, KnownLog, Claim, Finish, Applied)
# are named tuples: as immutable as a frozen dataclass, to mypy and at run time, but made
# in one call, where a frozen dataclass's __init__ sets each field through
# object.__setattr__ (by callgrind, one lifecycle's records: 114k instructions as frozen
# dataclasses, 59k as named tuples, of a worker's ~1.6 M). Unlike dataclasses they
# compare equal to any tuple of the same values: none is compared with another here. The
# other records are made once per client call: dataclasses.
_NO_CHECKPOINTS: Mapping[str, bytes] = MappingProxyType({})


class Task(NamedTuple):
    """ "Execute run X": a message of a partition's task queue, delivered to one worker."""

    run_id: str
    workflow: str  # "" when the message does not say (decided after the claim)
    message_id: str
    partition: int


class ClaimStatus(enum.StrEnum):
    OK = "ok"  # the lease is ours: execute
    SKIPPED = "skipped"  # nothing to do (finished, suspended, gone): the task was acked
    BUSY = "busy"  # another worker holds a live lease: the task stays pending
    PARKED = "parked"  # the run's version is not served here: parked (and the task acked)


class KnownLog(NamedTuple):
    """What a worker still holds of a run's log from its last execution of it: the events
    up to ``last_id``, ``event_count`` of them, of history ``generation`` (anything that
    rewrites a log instead of appending to it changes the generation)."""

    last_id: str
    event_count: int
    generation: str


class Claim(NamedTuple):
    """The lease on a run for one execution, with everything replay needs.

    ``events`` is the whole log, or, when ``tail`` is set, only the events after the
    :class:`KnownLog` the claim was given (the store proved that log still current)."""

    status: ClaimStatus
    fence: str = ""
    workflow: str = ""
    session: str | None = None
    events: Sequence[Event] = ()
    checkpoints: Mapping[str, bytes] = _NO_CHECKPOINTS
    parent: str | None = None  # the run that started this one with child()
    # The store's clock when the lease was taken (ms): the execution's clock starts there,
    # so a machine whose clock is off cannot skew a deadline (0: no store clock, a replay).
    now_ms: int = 0
    # This process's monotonic clock when ``now_ms`` was read, so the execution carries the
    # store's clock forward from that instant (0.0: from whenever it starts).
    now_mono: float = 0.0
    tail: bool = False
    event_count: int = 0  # events in the whole log
    generation: str = ""  # of the log's history (see KnownLog)
    data_bytes: int = 0  # of ``events``' data, as JSON (bounds what a worker remembers)
    first: bool = False  # this claim was the run's first: it recorded the worker's version


class Finish(NamedTuple):
    """The end of a run: COMPLETED with its encoded result, or FAILED with its error;
    ``notify``: the child.completed data for the parent's log (a run child() started)."""

    status: RunStatus
    value: bytes
    notify: bytes | None = None


class ApplyOutcome(enum.StrEnum):
    OK = "ok"  # written (and suspended or finished, when asked)
    REFUSED = "refused"  # written, but the suspension was refused: events arrived
    LOST = "lost"  # the fence moved (another worker or a cancel): nothing written
    LIMIT = "limit"  # the run would exceed its event limit: nothing written
    # a first() was decided without an answer or expiry that came in meanwhile (it closes
    # that hook): nothing written
    STALE = "stale"


class Applied(NamedTuple):
    outcome: ApplyOutcome
    last_id: str | None = None  # the id of the last event appended, if any
    arrived: Sequence[Event] = ()  # others' events since ``after``
    arrived_bytes: int = 0  # of their data, as JSON


class ResumeOutcome(enum.StrEnum):
    RECORDED = "recorded"
    DUPLICATE = "duplicate"  # the same answer was accepted before
    NEEDS_VALIDATION = "needs_validation"  # validate against ``schema``, then call again
    NO_RUN = "no_run"
    NO_HOOK = "no_hook"
    CONFLICT = "conflict"  # a different answer was accepted before
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    CLOSED = "closed"  # another wait of its first(...) finished first
    FINISHED = "finished"  # the run ended (``run_status`` says how)
    LIMIT = "limit"  # the run reached its event limit


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer to deliver: ``payload`` canonical JSON, ``digest`` its hash (to tell a
    duplicate from a conflict), ``event`` the ``hook.received`` data and ``announcement``
    the message every page of the run's session gets."""

    run_id: str
    hook_id: str
    token: str
    payload: bytes
    digest: str
    event: bytes
    announcement: bytes
    validated: bool = False


@dataclass(frozen=True, slots=True)
class Resumed:
    outcome: ResumeOutcome
    schema: dict[str, Any] | None = None
    run_status: str | None = None


class SendOutcome(enum.StrEnum):
    DELIVERED = "delivered"  # the run was waiting for it: it is in its log
    BUFFERED = "buffered"  # it waits in the run's inbox for a receive
    NO_RUN = "no_run"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class Sent:
    outcome: SendOutcome
    run_status: str | None = None


class RetryOutcome(enum.StrEnum):
    RETRIED = "retried"
    NO_RUN = "no_run"
    NOT_BLOCKED = "not_blocked"


@dataclass(frozen=True, slots=True)
class Retried:
    outcome: RetryOutcome
    run_status: str | None = None


class CancelOutcome(enum.StrEnum):
    CANCELLED = "cancelled"
    NO_RUN = "no_run"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class Cancelled:
    outcome: CancelOutcome
    run_status: str | None = None


@dataclass(frozen=True, slots=True)
class DueReport:
    """What one pass over the deadlines did."""

    lateness_ms: list[int]  # of each deadline fired
    next_due_ms: int | None  # the earliest deadline still pending
    saturated: bool  # more were due than the limit: call again at once
    now_ms: int  # Redis' clock at this pass: what next_due_ms is compared with
    # Per partition passed over that has one: its earliest deadline still pending (ms).
    next_due: dict[int, int] = field(default_factory=dict)
    # Per partition passed over: the id of its last deadline notice, read with its deadlines in one
    # step: where a wait for notices (``Store.deadline_notices``) starts, so that a
    # deadline scheduled after the pass is never missed.
    marks: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notice:
    """A deadline that became its partition's earliest (``Store.deadline_notices``)."""

    mark: str  # the notice's id: where the next wait starts
    due_ms: int  # on the store's clock


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """A run's status, output and last event id, read at one instant."""

    status: RunStatus | None  # None: no such run
    output: bytes
    last_event_id: str


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    id: str
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class OutboxRead:
    entries: dict[str, list[OutboxEntry]]  # session id -> new entries
    wake_cursor: str | None  # the new wake cursor, when a wake-up was read
