"""One execution of a run by a worker that holds its lease: replay, and the end of the
execution (suspension or finish); its buffered writes are :mod:`.writer`'s, its ends of
the run :mod:`.endings`'.

Writes are buffered and flushed in one fenced store call at the next durable point (a
hook's creation, a suspension, the end of the run, or before a step with side effects runs
after a recorded step result), so a HITL lifecycle costs a handful of round trips.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from .. import _clock, tracing
from .._codec import dumps, loads
from ..errors import (
    EventLimitExceeded,
    LogFormatUnknown,
    NondeterminismError,
    UsageError,
)
from ..ids import make_token
from ..models import LOG_FORMAT, WAKING_EVENTS, Event, EventType
from ..registry import WorkflowDef
from ..settings import Limits
from ..store import Claim, KnownLog, Store, Writes
from .branches import Branches, adopt, current_branches, holding_waits, scope_task
from .endings import Endings
from .failures import outage
from .messages import PassMessages
from .replay import Call, ReplayIndex
from .replay_cache import CachedReplay
from .scopes import CallScope, Position, current_scope
from .signals import (
    Abort,
    Blocked,
    ContinueAsNew,
    ReplayEnded,
    Suspend,
    signal_of,
)
from .tasks import track_tasks

current_execution: ContextVar[Execution | None] = ContextVar("parley_execution", default=None)

# A checkpoint's companion field: the hooks whose answers the step had read when it saved.
READ_SUFFIX = "!read"


def _check_log_format(run_id: str, log_format: object) -> None:
    if type(log_format) is not int or log_format > LOG_FORMAT:
        raise LogFormatUnknown(
            f"the run's log was recorded in format {log_format!r} (by a newer Parley); this"
            f" worker replays formats up to {LOG_FORMAT}",
            run_id=run_id,
            log_format=log_format,
            newest=LOG_FORMAT,
        )


class Execution(Endings):
    """One run of a workflow's code by the worker that holds the run's lease.

    Built from a :class:`~runtime.store.Claim` (the fence, the log, the checkpoints), it
    replays the workflow from the top: primitives answer from the :class:`ReplayIndex` and
    buffer what is new in :attr:`writes`, which reach the store in one fenced call at each
    durable point. It ends suspended (waiting for a hook or a timer), completed or failed;
    a lost lease, an unreachable store or an interrupted write unwind it with
    :class:`Abort` and nothing more is written.
    """

    def __init__(
        self,
        store: Store,
        run_id: str,
        workflow: WorkflowDef,
        claim: Claim,
        *,
        limits: Limits,
        retention_seconds: int,
        dry_run: bool = False,
        cached: CachedReplay | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.workflow = workflow
        self.fence = claim.fence
        self.session = claim.session
        self.parent = claim.parent  # the run that started this one with child(), if any
        self.limits = limits
        self.retention_seconds = retention_seconds
        # The store's clock, carried forward by this process's monotonic clock: deadlines
        # and now() agree with the workers on other machines whatever this one's wall
        # clock says. Carried from the instant it was read, not from now: race closed, a
        # claim whose reply came late (a Redis stall, an fsync, a slow link) left the
        # execution's clock behind Redis' by that delay, and every deadline it set (a
        # hook's timeout, a sleep, a retry's backoff) came that much early.
        self._clock_origin_ms = claim.now_ms or _clock.now_ms()  # (0: a replay, no store)
        self._clock_origin_mono = claim.now_mono or time.monotonic()
        events = claim.events
        if claim.tail and cached is not None:
            # The claim proved the log still extends what this worker's last execution of
            # the run left in ``cached``: only the events after it are new.
            self.index, known_last = cached.index, cached.known.last_id
            self.data_bytes = cached.data_bytes + claim.data_bytes
        else:
            self.index, known_last = ReplayIndex(), "0-0"
            self.data_bytes = claim.data_bytes
        if events and events[0].type == EventType.WORKFLOW_STARTED:
            # before the log is read: a newer form may have changed its events' shapes
            # (a tail's index was built here, of a log this worker knew)
            _check_log_format(run_id, events[0].data.get("scoped", 0))
        self.index.add_all(events)
        self.last_id = events[-1].id if events else known_last
        # How many events the log holds up to last_id, and its history generation: what
        # the next claim is told this worker knows (see replay_cache).
        self.event_count = claim.event_count
        self.generation = claim.generation
        # The answer/expiry/timer that woke this execution, for the resume-latency metric.
        self.woken_at_ms = (
            events[-1].timestamp_ms if events and events[-1].type in WAKING_EVENTS else None
        )
        self.outcome = "running"  # then: suspended | completed | failed
        self.checkpoints: dict[str, bytes] = {}
        self.checkpoint_reads: dict[str, set[str]] = {}
        for field, value in claim.checkpoints.items():
            if field.endswith(READ_SUFFIX):
                self.checkpoint_reads[field[: -len(READ_SUFFIX)]] = set(loads(value))
            else:
                self.checkpoints[field] = value
        # Steps whose first attempt began in this execution: the others the index knows
        # began in an earlier one (for ``patched`` inside a step), without a copy of the
        # index's steps per execution (O(rounds) at every resume).
        self.steps_begun_here: set[str] = set()
        # A dry replay (``parley replay``) stops where the recorded history ends.
        self.dry_run = dry_run
        self.scope: CallScope  # the workflow body's task's, anew each pass (run)
        # Waits that raised Suspend in this pass (wait id -> its step id): all of them are
        # recorded when the run suspends (parallel waits suspend together).
        self.waiting: dict[str, str | None] = {}
        self.receiving: dict[str, str] = {}  # receive waits of this pass -> their topic
        self.messages = PassMessages()  # which message each receive of this pass takes
        self.branches = Branches(self.index, self)  # the tasks the workflow and its steps create
        self.notified: set[str] = set()  # hooks whose on_created ran in this execution
        self.writes = Writes()
        self.undated_steps = []
        self.refused = False  # the last suspension was refused: events had arrived
        self.flush_before_step = False

    def __repr__(self) -> str:
        return f"<Execution {self.run_id} fence={self.fence}>"

    # ids -----------------------------------------------------------------------------
    def calling_scope(self) -> CallScope:
        """The scope of the task making a durable call now."""
        return current_scope.get() or self.scope

    def next_step_id(self, name: str) -> str:
        return self.calling_scope().step_id(name)

    def next_workflow_hook_id(self, name: str) -> str:
        return self.calling_scope().hook_id(name)

    def next_timer_id(self) -> str:
        return self.calling_scope().timer_id()

    def token(self, hook_id: str) -> str:
        return make_token(self.run_id, hook_id)

    # tasks of the workflow ------------------------------------------------------------
    def suspend_on(self, wait: str, step_id: str | None = None) -> Suspend:
        """The Suspend a wait raises, registered so that the suspension records it."""
        self.waiting.setdefault(wait, step_id)
        return Suspend(wait, step_id)

    def _check_loose(self) -> None:
        """The workflow returned while a wait it started in a task had suspended: what it
        returned cannot be what a replay would see."""
        if not self.branches.children:
            return
        loose = self.branches.loose(self.index.closed)
        if not loose:
            return
        raise UsageError(
            f"the wait {loose[0].wait!r} was started in a task whose outcome the workflow did "
            "not await (asyncio.wait, as_completed, gather(return_exceptions=True), a gather "
            "that raised another branch's failure first, a task left behind): Parley cannot "
            "replay that. Await waits directly, use "
            "asyncio.gather for all of them, or runtime.first(...) for the first one",
            run_id=self.run_id,
        )

    # replay checks -------------------------------------------------------------------
    def check_call(
        self, kind: str, name: str = "", digest: str | None = None
    ) -> tuple[Position, Call | None]:
        """Take the next position of the running task's durable calls. Returns it with the
        call the log recorded there (it must be this one, else the run is blocked), or with
        None when the log has nothing there (new work)."""
        if self.branches.settled and self.branches.refuses():
            raise asyncio.CancelledError(f"the run's pass has ended: {kind} {name!r} refused")
        position = self.calling_scope().next_position()
        recorded = self.index.calls.get(position)
        if recorded is None:
            if self.dry_run:
                raise ReplayEnded(f"the recorded history ends at position {position}")
            return position, None
        if (
            recorded.kind != kind
            or recorded.name != name
            or (digest is not None and recorded.digest is not None and recorded.digest != digest)
        ):
            self.block(position, recorded.describe(), Call(kind, name, digest).describe())
        return position, recorded

    def begun_before(self, step_id: str) -> bool:
        """Whether ``step_id`` began in an earlier execution (its first attempt, which is
        always the first recorded, is in the index and was not recorded here)."""
        return (step_id, 0) in self.index.started and step_id not in self.steps_begun_here

    def went_past(self) -> bool:
        """Whether the log recorded calls at or after the running task's next call (the run
        went past this point of its code)."""
        return self.calling_scope().went_past(self.index.calls)

    def block(self, position: Position, recorded: str, now: str) -> None:
        raise Blocked(
            NondeterminismError(
                f"at position {position} the log recorded {recorded}, the code now calls {now}",
                run_id=self.run_id,
                position=position,
                recorded=recorded,
                now=now,
            )
        )

    @staticmethod
    def decode(data: bytes) -> Any:
        return loads(data)

    def drop_checkpoint(self, step_id: str) -> None:
        """Forget a step's checkpoint (and what it had read), here and in the store."""
        if self.checkpoints.pop(step_id, None) is not None:
            self.writes.delete_checkpoint(step_id)
        if self.checkpoint_reads.pop(step_id, None) is not None:
            self.writes.delete_checkpoint(step_id + READ_SUFFIX)

    def now_ms(self) -> int:
        """The store's clock now (ms), as read when the lease was taken."""
        return self._clock_origin_ms + int((time.monotonic() - self._clock_origin_mono) * 1000)

    # the execution loop ----------------------------------------------------------------
    async def run(self) -> None:
        """Run the workflow until it suspends or finishes; replays in place if an answer
        (or expiry, or timer) arrived while this execution was still running."""
        # The tasks a workflow creates (gather of steps and waits) are its execution's: it
        # waits for them before it suspends or ends, so a step still running in one branch
        # records its result, and nothing of the run goes on after it.
        track_tasks(asyncio.get_running_loop(), adopt, scope_task, holding_waits)
        while True:
            again = False  # the suspension was refused: another pass
            self.scope = CallScope()
            self.waiting.clear()
            self.receiving.clear()
            self.messages.clear(self.index)
            self.branches.clear()
            token = current_execution.set(self)
            branches_token = current_branches.set(self.branches)
            scope_token = current_scope.set(self.scope)
            try:
                try:
                    result = await self.workflow.fn(*self.index.args, **self.index.kwargs)
                except BaseExceptionGroup as group:  # an asyncio.TaskGroup's (signal_of)
                    signal = signal_of(group)
                    if signal is group:
                        raise
                    raise signal from None
                finally:
                    await self.branches.settle()
                try:
                    self._check_loose()
                finally:
                    self.branches.clear()
            except Suspend as suspend:
                arrived = await self._suspend(suspend)
                if arrived is None:
                    return
                self.index.add_all(arrived)
                if tracing.enabled():  # the hook waits it takes now are its spans to record
                    tracing.took(self.run_id, await self.store.events(self.run_id) or ())
                again = True
            except (Abort, ReplayEnded):
                raise
            except ContinueAsNew as signal:
                if self.dry_run:
                    raise ReplayEnded("the run continues as new") from None
                await self._finish_continued(signal)
                return
            except Blocked as blocked:
                if self.dry_run:
                    raise
                await self._block(blocked.error)
                return
            except Exception as exc:
                unavailable = outage(exc)
                if unavailable is not None:  # an emit() in the body: not the run's failure
                    raise Abort(unavailable) from exc
                await self.finish_failed(exc)
                return
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit):
                raise  # (the worker stopping: the run is executed again elsewhere)
            except BaseException as exc:
                # A BaseException of the code's own (not Exception, not the engine's) is
                # the run's failure. Hang closed: it went past the worker, which takes
                # Exception, and the run stayed "running" without a word, executed again
                # at each redelivery of its task.
                await self.finish_failed(exc)
                return
            finally:
                current_scope.reset(scope_token)
                current_branches.reset(branches_token)
                current_execution.reset(token)
            if again:  # (not a `continue` in the try: mypyc cannot compile one)
                continue
            await self._finish_completed(result)
            return

    async def _suspend(self, suspend: Suspend) -> Sequence[Event] | None:
        """Record the suspension; None when it was recorded, else the events that arrived
        (the suspension was refused: the run continues at once)."""
        if self.dry_run:
            raise ReplayEnded(f"the run waits on {suspend.wait!r}")
        waits = self.waiting or {suspend.wait: suspend.step_id}
        if self._ended_meanwhile(waits):
            # Race closed: a wait of this pass ended by an event that a later write of the
            # same pass brought back (the flush before a step of a parallel branch), not this
            # suspension's: nothing new would arrive with the suspension, so it would be
            # recorded on a wait that had ended, and nothing would wake the run again. The
            # pass runs again at once instead (the ended wait does not suspend again).
            return []
        suspension = Writes()
        for wait, topic in self.receiving.items():
            if wait in self.waiting:
                suspension.receive(topic)
        recorded = [wait for wait in waits if wait not in self.index.suspended_on]
        for wait in recorded:
            step_id = waits[wait]
            if step_id is not None:
                data = {"step_id": step_id, "wait": wait}
                suspension.event(EventType.STEP_SUSPENDED, dumps(data))
                self.index.add(EventType.STEP_SUSPENDED, data)
            else:
                suspension.event(EventType.WORKFLOW_SUSPENDED, dumps({"wait": wait}))
                self.index.add(EventType.WORKFLOW_SUSPENDED, {"wait": wait})
        try:
            arrived = await self._apply(suspension=suspension)
        except EventLimitExceeded as exc:
            await self.finish_failed(exc)
            return None
        if not self.refused:
            self.outcome = "suspended"
            return None
        # The suspension was refused (and not recorded): forget it so the next suspension
        # on these waits records them.
        self.index.suspended_on.difference_update(recorded)
        return arrived

    def _ended_meanwhile(self, waits: dict[str, str | None]) -> bool:
        """Whether a wait of this pass has ended since it suspended: an answer, expiry,
        timer or child end in the index, or a message of a topic a receive waits on (a
        suspension of an earlier execution left the topic delivered straight to the log,
        lua/send.lua)."""
        if any(wait in self.index.completed_at for wait in waits):
            return True
        suspended: dict[str, list[str]] = {}  # topic -> its receives suspended in this pass
        for wait, topic in self.receiving.items():
            if wait in waits:
                suspended.setdefault(topic, []).append(wait)
        return any(
            self.messages.unread(topic, receives, self.index)
            for topic, receives in suspended.items()
        )

    def remembered(self) -> CachedReplay | None:
        """What the worker may keep of this execution for the run's next claim: only after
        a clean suspension, when the index holds exactly the log up to :attr:`last_id`."""
        if self.outcome != "suspended" or self.dry_run or self.unconfirmed_writes:
            return None
        known = KnownLog(self.last_id, self.event_count, self.generation)
        return CachedReplay(self.index, known, self.workflow, self.data_bytes)
