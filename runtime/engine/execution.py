"""One execution of a run by a worker that holds its lease: replay, and the end of the
execution (suspension or finish); its buffered writes are :mod:`.writer`'s, its ends of
the run :mod:`.endings`'.

Writes are buffered and flushed in one fenced store call at the next durable point (a
hook's creation, a suspension, the end of the run, or before a step with side effects runs
after a recorded step result), so a HITL lifecycle costs a handful of round trips.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Coroutine, Sequence
from contextvars import ContextVar
from typing import Any

from .. import _clock
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
    StepScope,
    Suspend,
)
from .tasks import track_tasks
from .tracks import started_task

# A checkpoint's companion field: the hooks whose answers the step had read when it saved.
READ_SUFFIX = "!read"


current_execution: ContextVar[Execution | None] = ContextVar("parley_execution", default=None)
current_step: ContextVar[StepScope | None] = ContextVar("parley_step", default=None)


def _adopt(task: asyncio.Future[Any]) -> None:
    execution = current_execution.get()
    if execution is not None:
        execution.children.append(task)
        task.add_done_callback(_retrieve_suspension)


def _retrieve_suspension(task: asyncio.Future[Any]) -> None:
    """A task of the workflow that a suspension ended (withdrawn in a losing branch of a
    first(), or left unawaited when the run suspended) did not fail: its Suspend is taken,
    so asyncio does not log "Task exception was never retrieved" for it. (Logged from the
    task's finalizer, that ran inside an unrelated compile() once and CPython 3.11 raised
    SystemError "AST constructor recursion depth mismatch" there.)"""
    # (``_exception`` reads it without marking it retrieved: an error of the code's own
    # stays logged, as asyncio logs it)
    if not task.cancelled() and isinstance(getattr(task, "_exception", None), Suspend):
        task.exception()


def _scope_task(context: contextvars.Context) -> contextvars.Context:
    """A task the workflow creates (not a step's: a step's calls are not the log's) numbers
    its durable calls in a scope of its own, in runs recorded that way (engine/scopes.py)."""
    parent = context.get(current_scope)
    if parent is None:  # not a task of a workflow (the worker's, the store's)
        return context
    execution = context.get(current_execution)
    if execution is None or not execution.index.scoped or context.get(current_step) is not None:
        return context
    context = context.copy()  # (a context given by the creator stays as it was)
    context.run(current_scope.set, parent.child())
    started_task(context)  # inside a first()'s branch: its calls go to a track of its own
    return context


def _waits_last(
    context: contextvars.Context, coro: Coroutine[Any, Any, Any]
) -> Coroutine[Any, Any, Any]:
    """The coroutine of a task the workflow body creates (a branch of ``asyncio.gather``),
    made to end with its suspension only after the loop's next turn."""
    execution = context.get(current_execution)
    if execution is None or context.get(current_step) is not None:
        return coro  # not a task of a workflow (the worker's, the store's, a step's own)
    # (the factory runs in the creating task: a branch the body itself made, or a branch's)
    of_the_body = asyncio.current_task() is execution.body_task
    return _suspending_after_a_turn(execution, coro, of_the_body)


async def _suspending_after_a_turn(
    execution: Execution, coro: Coroutine[Any, Any, Any], of_the_body: bool
) -> Any:
    # A wait without its answer stands for one that takes long (hours), so a branch's end
    # already decided by the log must come first. Race closed: in ``gather(hook(...),
    # step())`` the hook's Suspend ended its task at once, before the step's recorded final
    # failure ended the other, so gather raised the Suspend: the run suspended with its
    # failure in the log, asked the person, and failed only after their answer (or, with
    # an ``except`` around the gather, took the fallback only then); with the step first
    # it failed at once. One turn lets every branch that replays without awaiting
    # anything (a recorded result or failure) end first.
    try:
        return await coro
    except Suspend:
        await asyncio.sleep(0)
        raise
    except (Exception, Blocked):
        # (a failure inside a branch that the branch handles is no concern of the body's)
        if of_the_body and execution.body_suspended:
            execution.failed_after_body = True  # see Execution.run
        raise


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

    # In this pass: the body raised Suspend (its branches still running are being settled),
    # and one of the body's branches failed after that. (Class defaults: a pass that
    # suspends sets and resets them.)
    body_suspended = False
    failed_after_body = False
    body_task: asyncio.Task[Any] | None = None  # the task running the workflow's body

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
        self.children: list[asyncio.Future[Any]] = []
        self.owned: set[asyncio.Future[Any]] = set()  # tasks whose outcome first() takes
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
    def _loose(self) -> list[Suspend]:
        """Suspensions raised in tasks that nothing has carried to the workflow: a durable
        call made while one is loose is a wait the code did not await properly."""
        loose = []
        for task in self.children:
            if task.done() and not task.cancelled() and task not in self.owned:
                exc = task.exception()
                # (a wait a first() withdrew, gathered in its losing branch, is not loose)
                if (
                    isinstance(exc, Suspend)
                    and not exc.consumed
                    and exc.wait not in self.index.closed
                ):
                    loose.append(exc)
        return loose

    async def _settle_children(self) -> None:
        """Wait for every task the workflow started (a step in flight records its result)."""
        while self.children and (pending := [t for t in self.children if not t.done()]):
            await asyncio.wait(pending)

    def _branch_failed_after_body(self, recorded: int) -> bool:
        """Whether a branch of the body failed after the body suspended in this pass, which
        recorded something (the log held ``recorded`` events when it began); the pass's
        flags start again."""
        failed = self.failed_after_body
        self.body_suspended = self.failed_after_body = False
        return failed and self.event_count + self.writes.event_count > recorded

    def suspend_on(self, wait: str, step_id: str | None = None) -> Suspend:
        """The Suspend a wait raises, registered so that the suspension records it."""
        self.waiting.setdefault(wait, step_id)
        return Suspend(wait, step_id)

    def _check_loose(self) -> None:
        """The workflow returned while a wait it started in a task had suspended: what it
        returned cannot be what a replay would see."""
        if not self.children:
            return
        loose = self._loose()
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
        track_tasks(asyncio.get_running_loop(), _adopt, _scope_task, _waits_last)
        self.body_task = asyncio.current_task()
        while True:
            again = False  # the suspension was refused: another pass
            recorded = self.event_count + self.writes.event_count  # the log's size, as known
            self.scope = CallScope()
            self.waiting.clear()
            self.receiving.clear()
            self.messages.clear(self.index)
            self.children.clear()
            self.owned.clear()
            token = current_execution.set(self)
            scope_token = current_scope.set(self.scope)
            try:
                try:
                    result = await self.workflow.fn(*self.index.args, **self.index.kwargs)
                except Suspend:
                    if self.children:  # (a branch still running may fail now)
                        self.body_suspended = True
                    raise
                finally:
                    await self._settle_children()
                try:
                    self._check_loose()
                finally:
                    # The tasks hold this execution through their contexts: let them go
                    # now (a reference cycle would wait for the garbage collector).
                    self.children.clear()
                    self.owned.clear()
            except Suspend as suspend:
                if self.body_suspended and self._branch_failed_after_body(recorded):
                    # A branch of the body failed after the body had suspended (a gathered
                    # step that failed for good after an await, while a gathered wait
                    # suspended at once): what asyncio's gather raises first in real time
                    # is that failure, hours before the wait's answer. Another pass
                    # replays it from the log, where it ends its branch before the wait
                    # does (_suspending_after_a_turn). Only after a pass that recorded
                    # something: a failure that replays as it ran (after an await of its
                    # own) would loop. (Only the body's own branches count: a failure a
                    # step handled inside itself, or one the body had seen before it
                    # suspended, e.g. gather(return_exceptions=True), is no reason to run
                    # a suspended step_hook step's body again.)
                    again = True
                else:
                    arrived = await self._suspend(suspend)
                    if arrived is None:
                        return
                    self.index.add_all(arrived)
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
            finally:
                current_scope.reset(scope_token)
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
