"""The store boundary: what the engine, the client, the worker and the server need from
the place runs live, as one protocol with typed requests and results.

:class:`~runtime.store.redis.RedisStore` implements it on Redis (one server, a cluster, or
the embedded ``memory://``); a new backend implements this protocol and passes the
contract suite in ``tests/runtime/store/test_contract.py``.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from ..models import Event, HookInfo, RunInfo, RunStatus
from .writes import Writes

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
    tail: bool = False
    event_count: int = 0  # events in the whole log
    generation: str = ""  # of the log's history (see KnownLog)
    data_bytes: int = 0  # of ``events``' data, as JSON (bounds what a worker remembers)


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


class Store(Protocol):
    """Where runs live. Every method that changes more than one record is atomic."""

    url: str
    partitions: int

    # lifecycle ---------------------------------------------------------------------
    async def open(self) -> None:
        """Connect and prepare (idempotent)."""

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise :class:`~runtime.errors.StoreUnavailable` unless the store answers."""

    async def settings_advice(self) -> list[tuple[str, str, str, str]]:
        """``(setting, its value, the value recommended, why)`` for each setting of the
        store's server that Parley recommends and that is not in effect ([] if unknown)."""

    # runs --------------------------------------------------------------------------
    def new_run_id(self, session: str | None, idempotency_key: str | None = None) -> str:
        """A fresh run id (the same one for the same ``idempotency_key``); a session's runs
        get ids that live next to its messages."""

    def new_run_id_beside(self, run_id: str) -> str:
        """A fresh run id that lives next to ``run_id`` (for a run that continues it)."""

    async def restart(
        self,
        old_run_id: str,
        run_id: str,
        workflow: str,
        session: str | None,
        events: Sequence[tuple[str, bytes]],
        tags: Mapping[str, str] | None = None,
    ) -> bool:
        """Create ``run_id`` continuing ``old_run_id``: its log starts with ``events``,
        the runs are linked (``restarted_from`` / ``restarted_as``) and the new run gets
        ``tags`` (indexed); False when a run of that id exists."""

    def child_run_id(self, parent_run_id: str, origin: str, position: int) -> str:
        """The id of the child a run starts at ``position``: the same on every replay, next
        to the parent (so the child's end reaches the parent's log in one step). ``origin``
        (the id of the run's workflow.started) tells this run from an earlier one of the
        same id, whose children's ids must not be taken again."""

    def continued_run_id(self, run_id: str, origin: str) -> str:
        """The id of the run that continues ``run_id`` (continue_as_new): the same on every
        replay, next to it (and so next to its session's messages); ``origin`` as for
        :meth:`child_run_id`."""

    def fits_session(self, run_id: str, session: str) -> bool:
        """Whether a run of this id can be bound to ``session``."""

    async def start(
        self,
        run_id: str,
        workflow: str,
        session: str | None,
        input: bytes,
        tags: Mapping[str, str] | None = None,
    ) -> bool:
        """Create the run with its ``workflow.started`` event and enqueue it; False when a
        run of that id exists (nothing changed). ``tags`` (validated by
        :func:`runtime.tags.check_tags`) are recorded with the run and indexed in the same
        atomic step: :meth:`list_runs` and :meth:`pending_hooks` find the run by any of
        them from then on. An untagged start costs nothing more."""

    async def announce_workflows(self, names: Sequence[str]) -> None: ...

    async def workflow_announced(self, name: str) -> bool: ...

    async def resume(self, answer: Answer, *, max_events: int, retention_seconds: int) -> Resumed:
        """Record the answer; the session's echo of it keeps the session's messages
        ``retention_seconds`` (see :meth:`post`)."""

    async def cancel(
        self, run_id: str, *, event: bytes, message: bytes, retention_seconds: int
    ) -> Cancelled: ...

    async def send(self, run_id: str, topic: str, event: bytes) -> Sent:
        """A message to a run: into its log when it waits for ``topic``, else buffered."""

    async def retry(self, run_id: str, *, event: bytes) -> Retried:
        """Send a blocked run back to the workers."""

    async def run_snapshot(self, run_id: str) -> RunSnapshot: ...

    async def wait_for_events(self, run_id: str, after: str, block_ms: int) -> None:
        """Return when the run's log has an event after ``after``, or after ``block_ms``."""

    # executions (the worker's side) -----------------------------------------------------
    def task_sources(self) -> list[tuple[int, ...]]:
        """Groups of partitions one task reader may read together."""

    async def read_tasks(
        self, consumer: str, partitions: tuple[int, ...], count: int, block_ms: int | None
    ) -> list[Task]: ...

    async def reclaim(self, consumer: str, idle_ms: int) -> list[Task]:
        """Take over the tasks other consumers left unacknowledged for ``idle_ms``."""

    async def hand_back(self, task: Task) -> None:
        """Give a task back to every consumer (a new message), acknowledging this one."""

    async def claim(
        self,
        task: Task,
        consumer: str,
        lease_ms: int,
        version: str,
        serves: Sequence[str],
        known: KnownLog | None = None,
    ) -> Claim:
        """Take the run's lease. A run first claimed records ``version``; a run of a
        version not in ``serves`` is parked instead (PARKED) until :meth:`unpark`. Given
        ``known`` and a log that still extends it, only the events after it are read."""

    async def unpark(self, versions: Sequence[str]) -> int:
        """Send the runs parked for ``versions`` back to the workers; how many."""

    async def apply(
        self,
        run_id: str,
        fence: str,
        after: str,
        writes: Writes,
        *,
        suspension: Writes | None = None,
        finish: Finish | None = None,
        max_events: int,
        retention_seconds: int,
        known_count: int | None = None,
    ) -> Applied:
        """Apply ``writes`` (then ``suspension``, unless an event arrived after ``after``:
        REFUSED; or ``finish``) in one atomic step, if ``fence`` still holds the lease.
        ``known_count``: how many events the log holds up to ``after``, when the caller
        knows it exactly; the log is then not read when no event arrived."""

    async def heartbeat(
        self, leases: Sequence[tuple[str, str]], lease_ms: int, consumer: str
    ) -> list[bool]:
        """Extend the leases ``(run_id, fence)`` to ``lease_ms`` from now on the store's
        clock; False for each one that was lost."""

    async def now_ms(self) -> int:
        """The store's clock (ms): the one clock of leases, deadlines and timestamps for
        every process of a deployment."""

    async def fire_due(
        self, limit: int, *, now_ms: int | None = None, partitions: Collection[int] | None = None
    ) -> DueReport:
        """Fire the deadlines due by Redis' own clock, read in the pass (``now_ms``: a
        simulated instant, for tests), at most ``limit`` per partition, in ``partitions``
        (default: all)."""

    async def deadline_notices(self, marks: Mapping[int, str], block_ms: int) -> dict[int, Notice]:
        """Wait up to ``block_ms`` for a deadline scheduled after ``marks`` (partition ->
        notice id, from a :class:`DueReport`) that became the earliest of its partition;
        for each partition of ``marks`` (one group of :meth:`task_sources`) that has one,
        the latest notice: its id and its due ms. Nothing when none came."""

    # inspection --------------------------------------------------------------------
    async def get_run(self, run_id: str) -> RunInfo | None: ...

    async def events(self, run_id: str) -> list[Event] | None: ...

    async def run_hooks(self, run_id: str) -> list[HookInfo] | None: ...

    async def pending_hooks(self, tag: tuple[str, str] | None = None) -> list[HookInfo]:
        """Every pending hook (from the pending-hook index, not a scan); with ``tag``
        (``(key, value)``), only those of runs that have that tag."""

    async def list_runs(
        self,
        status: RunStatus | None,
        limit: int | None,
        version: str | None = None,
        tag: tuple[str, str] | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first, filtered by ``status`` and ``version``, at most ``limit``.
        Without ``tag`` a scan of the store (an operator's tool); with ``tag``
        (``(key, value)``) a read of the tag index whose cost depends on ``limit`` and the
        number of partitions, not on the number of runs. A run is in the index from its
        start (or the ``set_tags`` that gave it the tag) until a ``set_tags`` takes it
        away or its keys expire after it ended (the retention)."""

    async def stats(self) -> dict[str, int]: ...

    async def compact_ended(self) -> int:
        """Compact every ended run not compacted yet (the process that ended it stopped
        within seconds of its end), by a scan of the store (an operator's tool); returns
        how many were compacted."""

    # chat sessions -----------------------------------------------------------------
    async def create_session(self, session: str, ttl_seconds: int) -> None: ...

    async def session_exists(self, session: str) -> bool: ...

    async def bind_session(self, session: str, run_id: str, ttl_seconds: int) -> None: ...

    async def session_run(self, session: str) -> str | None: ...

    async def lock_session(self, session: str, ttl_ms: int) -> bool:
        """Take the session's start lock; False when another holder has it."""

    async def unlock_session(self, session: str) -> None: ...

    async def read_outbox(
        self, session: str, after: str, count: int, block_ms: int | None
    ) -> list[OutboxEntry]: ...

    async def post(self, session: str, message: bytes, *, retention_seconds: int) -> str:
        """Append a message to the session's outbox, trimmed to ``OUTBOX_MAXLEN`` messages;
        the outbox expires ``retention_seconds`` after it unless one of the session's
        prompts is pending."""

    def outbox_group(self, session: str) -> str:
        """Sessions of one group can be read together by one :meth:`read_outboxes`."""

    async def read_outboxes(
        self,
        group: str,
        cursors: dict[str, str],
        reader: str,
        wake_cursor: str,
        count: int,
        block_ms: int,
    ) -> OutboxRead:
        """New entries of the sessions' outboxes after their cursors, blocking until one
        arrives or ``reader`` is woken (:meth:`wake_reader`)."""

    async def wake_reader(self, group: str, reader: str) -> None: ...

    async def drop_reader(self, group: str, reader: str) -> None: ...
