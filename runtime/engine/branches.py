"""The tasks a workflow creates (the branches of an ``asyncio.gather``): the execution
adopts them, numbers their durable calls, and holds back the suspension of a wait in one
of them until every other branch has got as far as it can without an answer.

A wait without its answer stands for one that takes hours, so whatever the other branches
do without one (replay a step's recorded failure, run a step, fail after an await of
their own) comes first, as it would in real time. Race closed: in ``gather(hook(...),
step())`` the hook's Suspend ended its task at once, before the step's final failure
(replayed from the log, or still running) ended the other, so gather raised the Suspend:
the run suspended with the failure in its log, asked the person, and failed only after
their answer (or, with an ``except`` around the gather, took the fallback only then),
while with the step first it failed at once. One turn of the loop was not enough once the
failure came through a gather nested in a branch: each level of gather takes a turn.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Collection, Coroutine, Iterable
from contextvars import ContextVar
from typing import Any

from .replay import ReplayIndex
from .scopes import current_scope
from .signals import SIGNALS, Suspend, current_step
from .tracks import started_task
from .writer import Writer

# How long a held wait waits at most while every other busy branch is blocked on something
# outside the run (an await outside Parley, which belongs in a step; a wait_for or shield
# around a wait, which the held wait's release is what completes): longer, the suspension
# goes on as asyncio would pass it, and what such a branch does comes after the wait's
# answer. Short, as each suspension of those shapes pays it. (A branch that can run,
# replaying what the log holds of it, and a step's run however long it takes are waited
# for: the execution waits for a step before it suspends anyway.) Once the body has ended,
# tasks blocked so that long are cancelled (Branches.settle).
HOLD_SECONDS = 0.05
# And in as many looks in a row at least, each a turn of the loop or more apart. Race
# closed: between a branch's task ending and the gather above it waking its own task (a
# callback or two of the loop), every busy task looks blocked; a process stalled there
# past HOLD_SECONDS (a loaded machine) let a held wait go before a failure four gathers
# deep had come up, and the run suspended with the failure in its log.
BLOCKED_LOOKS = 3
# How often a held wait looks again at the other branches, doubling up to the second: a
# branch can come to depend on the held wait without ending (it awaits the wait's task),
# which nothing announces.
HOLD_POLL_SECONDS = (0.001, 0.05)


class Branches:
    """The tasks created in one pass of an execution (its workflow's, and its steps')."""

    # (not slots: the class holds the defaults, fewer writes per execution on the hot path)
    steps_running = 0  # how many steps' bodies run now: a held wait waits for them
    _change: asyncio.Future[None] | None = None
    watcher: asyncio.Future[Any] | None = None  # the held wait that looks for all (_hold)
    # The other held waits' turns, while there is a watcher: True once it lets them go,
    # False if it was cancelled first (another takes over).
    watching: list[asyncio.Future[bool]]
    # Tasks settle() cancelled: their durable calls are refused (:meth:`refuses`).
    settled: frozenset[asyncio.Future[Any]] | set[asyncio.Future[Any]] = frozenset()

    def __init__(self, index: ReplayIndex, writer: Writer) -> None:
        self.index = index
        self.writer = writer  # the execution's: a held wait waits for its write in flight
        self.children: list[asyncio.Future[Any]] = []
        self.owned: set[asyncio.Future[Any]] = set()  # tasks whose outcome first() takes
        self.holding: set[asyncio.Future[Any]] = set()  # tasks holding back a suspension

    def clear(self) -> None:
        """Let the tasks go: they hold the execution through their contexts (a reference
        cycle would wait for the garbage collector)."""
        if self.children:  # (the others hold only tasks it holds)
            self.children.clear()
            self.owned.clear()
            self.holding.clear()
            self.settled = frozenset()

    async def settle(self) -> None:
        """Wait for every task once the workflow's body has ended (a step in flight records
        its result). Tasks blocked outside the run are cancelled once none of the others
        can run and no step runs for ``HOLD_SECONDS``: the next pass runs them again from
        the top. Hang closed: a branch waiting on an ``asyncio.Event`` or ``Queue`` that
        another fed only after its wait's answer was waited for forever, and the run stayed
        "running" with its worker's slot taken."""
        if not self.children:
            return
        poll, poll_most = HOLD_POLL_SECONDS
        patience = _Patience(self)
        while pending := [task for task in self.children if not task.done()]:
            busy = _busy(pending, self.holding)  # (a held wait lets go once these end)
            if patience.run_out(busy):
                self.settled = {*self.settled, *busy}
                for task in busy:
                    task.cancel()
            await asyncio.wait(pending, timeout=poll)
            poll = min(poll * 2, poll_most)

    def loose(self, closed: Collection[str]) -> list[Suspend]:
        """Suspensions raised in tasks that nothing has carried to the workflow (but for
        waits in ``closed``: a first() withdrew them, gathered in its losing branch)."""
        loose = []
        for task in self.children:
            if task.done() and not task.cancelled() and task not in self.owned:
                exc = task.exception()
                if isinstance(exc, Suspend) and not exc.consumed and exc.wait not in closed:
                    loose.append(exc)
        return loose

    def refuses(self) -> bool:
        """Whether the running task is one :meth:`settle` cancelled: a durable call it
        makes after its CancelledError (a cleanup of the code's own) is refused with
        another, as nothing of it is the run's: the next pass runs the task again from the
        top, not cancelled. Race closed: such a cleanup step ran and was recorded where the
        next pass, its Event set by the answer, called another, and the run was blocked as
        nondeterministic. (Asked only while :attr:`settled` holds a task.)"""
        return asyncio.current_task() in self.settled

    def working(self) -> bool:
        """Whether a step's body runs or a write of the execution is in flight: real work
        that ends by itself, waited for however long it takes. Race closed: a branch
        awaiting the execution's write (a hook's creation, the flush before a step) looked
        blocked outside the run, so under load (a Redis round trip over HOLD_SECONDS) a
        held wait let go before a sibling's failure (the run suspended with the failure in
        its log), and settle() could have cancelled that branch inside the write."""
        return bool(self.steps_running) or self.writer.writing

    def change(self) -> asyncio.Future[None]:
        """Done when a task next starts holding back a wait's suspension."""
        if self._change is None:
            self._change = asyncio.get_running_loop().create_future()
        return self._change

    def changed(self) -> None:
        change, self._change = self._change, None
        if change is not None and not change.done():
            change.set_result(None)


# The branches of the execution running now (set for each pass).
current_branches: ContextVar[Branches | None] = ContextVar("parley_branches", default=None)


def adopt(task: asyncio.Future[Any]) -> None:
    """A task created while an execution runs is the execution's (it settles them all)."""
    branches = current_branches.get()
    if branches is not None:
        branches.children.append(task)
        task.add_done_callback(_retrieve_signal)
        if branches.settled and asyncio.current_task() in branches.settled:
            # Made by a task settle() cancelled (its cleanup gathers or shields a call):
            # refused as its maker is. (Else the call was recorded one task deeper.)
            branches.settled = {*branches.settled, task}


def _retrieve_signal(task: asyncio.Future[Any]) -> None:
    """A task of the workflow that one of the engine's signals ended (a suspension: withdrawn
    in a losing branch of a first(), or left unawaited when the run suspended; an Abort: the
    execution runs again) did not fail: its signal is taken, so asyncio does not log "Task
    exception was never retrieved" (ERROR) for it. (Logged from the task's finalizer, that
    ran inside an unrelated compile() once and CPython 3.11 raised SystemError "AST
    constructor recursion depth mismatch" there.)"""
    # (``_exception`` reads it without marking it retrieved: an error of the code's own
    # stays logged, as asyncio logs it)
    if not task.cancelled() and isinstance(getattr(task, "_exception", None), SIGNALS):
        task.exception()


def scope_task(context: contextvars.Context) -> contextvars.Context:
    """A task the workflow creates (not a step's: a step's calls are not the log's) numbers
    its durable calls in a scope of its own, in runs recorded that way (engine/scopes.py)."""
    parent = context.get(current_scope)
    if parent is None:  # not a task of a workflow (the worker's, the store's)
        return context
    branches = context.get(current_branches)
    if branches is None or not branches.index.scoped or context.get(current_step) is not None:
        return context
    context = context.copy()  # (a context given by the creator stays as it was)
    context.run(current_scope.set, parent.child())
    started_task(context)  # inside a first()'s branch: its calls go to a track of its own
    return context


def holding_waits(
    context: contextvars.Context, coro: Coroutine[Any, Any, Any]
) -> Coroutine[Any, Any, Any]:
    """The coroutine of a task the workflow creates, made to hold a wait's suspension
    back (:func:`_hold`)."""
    branches = context.get(current_branches)
    if branches is None or context.get(current_step) is not None:
        return coro  # not a task of a workflow (the worker's, the store's, a step's own)
    return _holding(branches, coro)


async def _holding(branches: Branches, coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except Suspend:
        await _hold(branches)
        raise


async def _hold(branches: Branches) -> None:
    """Until each other task of the pass has ended, holds a suspension of its own, or can
    only go on once a held one goes (it awaits it, or gathers only held ones).

    That condition is the same for every held wait (none of them is busy to another), so
    one of them, the watcher, looks at the other branches and lets them all go together;
    the rest wait on a future each. (When each held wait looked at every branch and waited
    on all of them itself, the suspension of a gather of N hooks cost N² looks and N²
    callbacks added and removed: 800 hooks took 37 s to suspend, 8 s of it CPU.)"""
    me = asyncio.current_task()
    assert me is not None
    branches.holding.add(me)
    branches.changed()  # (the watcher looks again)
    try:
        while branches.watcher is not None:
            turn = asyncio.get_running_loop().create_future()
            branches.watching.append(turn)
            if await turn:  # the watcher let the held waits go
                return
            # (else the watcher was cancelled before it let them go: another takes over)
        branches.watcher, branches.watching = me, []
        released = False
        try:
            await _watch(branches)
            released = True
        finally:
            branches.watcher = None
            for turn in branches.watching:
                if not turn.done():  # (cancelled with its task)
                    turn.set_result(released)
    finally:
        branches.holding.discard(me)


async def _watch(branches: Branches) -> None:
    """Returns once the busy branches have all ended, or been blocked outside the run for
    as long as :class:`_Patience` allows."""
    poll, poll_most = HOLD_POLL_SECONDS
    patience = _Patience(branches)
    while busy := _busy(branches.children, branches.holding):
        if patience.run_out(busy):
            return
        await asyncio.wait(
            [*busy, branches.change()], timeout=poll, return_when=asyncio.FIRST_COMPLETED
        )
        poll = min(poll * 2, poll_most)


class _Patience:
    """How long the busy tasks have all been blocked outside the run: ``HOLD_SECONDS``,
    and ``BLOCKED_LOOKS`` looks in a row, run it out (then it starts again)."""

    __slots__ = ("branches", "give_up", "looks", "loop")

    def __init__(self, branches: Branches) -> None:
        self.branches = branches
        self.loop = asyncio.get_running_loop()
        self.give_up: float | None = None
        self.looks = 0  # how many looks in a row found every busy task blocked

    def run_out(self, busy: list[asyncio.Future[Any]]) -> bool:
        if self.branches.working() or any(_can_run(task) for task in busy):
            self.give_up, self.looks = None, 0
        elif self.give_up is None:
            self.give_up, self.looks = self.loop.time() + HOLD_SECONDS, 1
        else:
            self.looks += 1
            if self.looks >= BLOCKED_LOOKS and self.loop.time() >= self.give_up:
                self.give_up, self.looks = None, 0
                return True
        return False


def _busy(
    children: Iterable[asyncio.Future[Any]], holding: set[asyncio.Future[Any]]
) -> list[asyncio.Future[Any]]:
    """The tasks that can still go on while the held waits hold."""
    return [
        task
        for task in children
        if not task.done() and task not in holding and not _waits_on(task, holding, set())
    ]


def _can_run(task: asyncio.Future[Any]) -> bool:
    """Whether ``task`` is scheduled to run (not suspended on a future, or on one that is
    done and wakes it): replaying, say."""
    waiter = getattr(task, "_fut_waiter", None)
    return waiter is None or waiter.done()


def _waits_on(task: asyncio.Future[Any], holding: set[asyncio.Future[Any]], seen: set[int]) -> bool:
    """Whether ``task`` awaits something that ends only once a held wait's task does."""
    # (the future a task is suspended on: asyncio's, in the C task and the Python one)
    waiter = getattr(task, "_fut_waiter", None)
    if waiter is None:
        return False
    if _ends_with_holds(waiter, holding, seen):
        return True
    group = _task_group_awaited(task, waiter)
    return group is not None and _all_end_with_holds(getattr(group, "_tasks", ()), holding, seen)


def _task_group_awaited(task: asyncio.Future[Any], waiter: object) -> asyncio.TaskGroup | None:
    """The ``asyncio.TaskGroup`` whose end ``task`` awaits on ``waiter``, if it does: the
    group's ``__aexit__`` waits on a future of its own, which says nothing of the group's
    tasks. (Without it, a group's wait in a gathered branch held the suspension back for
    ``HOLD_SECONDS`` each time.)"""
    awaited = getattr(task, "get_coro", lambda: None)()
    while awaited is not None:
        if getattr(awaited, "cr_code", None) is _TASK_GROUP_EXIT:
            group = awaited.cr_frame.f_locals.get("self")
            # (asyncio's private fields, as _fut_waiter and a gather's _children)
            mine = getattr(group, "_on_completed_fut", None) is waiter
            return group if isinstance(group, asyncio.TaskGroup) and mine else None
        awaited = getattr(awaited, "cr_await", None)
    return None


_TASK_GROUP_EXIT = asyncio.TaskGroup.__aexit__.__code__


def _ends_with_holds(
    future: asyncio.Future[Any], holding: set[asyncio.Future[Any]], seen: set[int]
) -> bool:
    if future in holding:
        return True
    if future.done() or id(future) in seen:
        return False
    seen.add(id(future))
    if isinstance(future, asyncio.Task):
        return _waits_on(future, holding, seen)
    # asyncio.gather's future: pending until its pending tasks end (anything else, as far
    # as can be told, ends by itself)
    gathered: list[asyncio.Future[Any]] | None = getattr(future, "_children", None)
    if gathered is None:
        return False
    return _all_end_with_holds(gathered, holding, seen)


def _all_end_with_holds(
    children: Iterable[asyncio.Future[Any]], holding: set[asyncio.Future[Any]], seen: set[int]
) -> bool:
    """Whether a gather (or a task group) over ``children`` ends only once a held wait's
    task does: some are pending, each of those on a held one, and none has failed (that
    ends it by itself). Race closed: with every child done, the gather still pending for a
    callback's turn of the loop counted as waiting on the held waits; its task was not
    busy, and a held wait let go before a failure gathers deep had come up."""
    pending = False
    for child in children:
        if not child.done():
            if not _ends_with_holds(child, holding, seen):
                return False
            pending = True
        elif not child.cancelled() and child.exception() is not None:
            return False
    return pending
