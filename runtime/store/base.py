"""The store boundary: what the engine, the client, the worker and the server need from
the place runs live, as one protocol (its typed requests and results are in :mod:`.records`).

:class:`~runtime.store.redis.RedisStore` implements it on Redis (one server, a cluster, or
the embedded ``memory://``); a new backend implements this protocol and passes the
contract suite in ``tests/runtime/store/test_contract.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from ..models import Event, HookInfo, RunInfo, RunStatus
from .records import (
    Answer,
    Applied,
    Cancelled,
    Claim,
    DueReport,
    Finish,
    KnownLog,
    Notice,
    OutboxEntry,
    OutboxRead,
    Resumed,
    Retried,
    RunSnapshot,
    Sent,
    Task,
)
from .writes import Writes


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

    def child_run_id(self, parent_run_id: str, origin: str, position: int | str) -> str:
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
        *,
        message: bytes | None = None,
        retention_seconds: int = 0,
    ) -> bool:
        """Create the run with its ``workflow.started`` event and enqueue it; False when a
        run of that id exists (nothing changed). ``tags`` (validated by
        :func:`runtime.tags.check_tags`) are recorded with the run and indexed in the same
        atomic step: :meth:`list_runs` and :meth:`pending_hooks` find the run by any of
        them from then on. An untagged start costs nothing more. ``message`` (a JSON
        object; the run has a ``session`` it fits, see :meth:`fits_session`) is posted to
        the session in the same step, as :meth:`post` with ``retention_seconds`` posts it:
        only when the run is created."""

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

    async def give_back(self, consumer: str) -> int:
        """Give back every task ``consumer`` read and has not acknowledged (it stops): each
        a new message for any consumer. Returns how many."""

    async def sweep_consumers(self, consumer: str, idle_ms: int) -> int:
        """Forget the consumers (workers that died) that hold no unacknowledged task and
        have been idle longer than ``idle_ms``, never ``consumer`` itself; the check and
        the removal are atomic, so a task delivered meanwhile is never lost. Returns how
        many were removed."""

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

    async def release(self, run_id: str, fence: str, *, first: bool) -> bool:
        """Give back the lease ``fence`` holds, for an execution that will not run: the run
        is pending again, and bound to no version if its claim was its ``first``. False if
        the lease had moved on (nothing changed)."""

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
