"""first(): the first of several waits, decided by the order the log recorded their ends;
what the store learns of its waits as they are created (their group); and what the
decision leaves of the losing branches (their waits withdrawn, their children cancelled,
nothing they reach afterwards started)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from contextvars import ContextVar
from typing import Any

from ..models import EventType
from . import tracks
from .execution import Execution
from .scopes import Position
from .signals import Abort, Interrupted, Suspend, signal_of
from .tracks import Track

# And every wait started inside each branch the code is in, outermost first, a first()
# nested in it included: what a losing branch leaves to withdraw (not what scores it).
_reaches: ContextVar[tuple[list[str], ...]] = ContextVar("parley_reaches", default=())
# Inside a bare branch of a first() of two or more: the first()'s group, which the branch's
# hook or timer joins in the store with its creation (see ``Writes.join_first``).
_first_group: ContextVar[str | None] = ContextVar("parley_first_group", default=None)
# The branches of first() the running code is inside, outermost first: (the first()'s
# position, the branch's index).
_branches: ContextVar[tuple[tuple[Position, int], ...]] = ContextVar("parley_branches", default=())


def note_wait(wait_id: str) -> None:
    """Every wait calls this with its id: inside a first(), its branch learns the wait."""
    tracks.note(wait_id)
    for reach in _reaches.get():
        reach.append(wait_id)


def note_work(done_at: str | None) -> None:
    """A step calls this as it is reached, with the id of the event that recorded its
    result (None: it runs in this pass): inside a first(), its branch is not finished
    before that."""
    tracks.note_step(done_at)


def note_reach(wait_id: str) -> None:
    """A wait that does not decide when its branch finished (a step's retry backoff) but
    ends with the branch: withdrawn if the branch loses."""
    for reach in _reaches.get():
        reach.append(wait_id)


def join_first(execution: Execution, wait_id: str) -> None:
    """A hook or timer just created by a bare branch of a first() joins its group in the
    same write, before anyone can answer it or it can fire."""
    group = _first_group.get()
    if group is not None:
        execution.writes.join_first(wait_id, group)


async def first_of(
    execution: Execution,
    waits: list[Coroutine[Any, Any, Any]],
    bare_waits: Sequence[bool] = (),
) -> tuple[int, Any]:
    """The first of ``waits`` to finish (by the order the log recorded their answers,
    expiries and timers), and its value; the others are withdrawn durably. Until one
    finishes, the run suspends on all of them. ``bare_waits`` says which waits are a
    hook() or a sleep alone (finished when their hook is answered or expires, or their
    timer fires)."""
    position, _recorded = execution.check_call("first")
    # Its bare waits join a group in the store as they are created: an answer, expiry or
    # timer that finishes one of them refuses the others' answers at once. Race closed: a
    # hook handed out by its on_created takes answers before the run suspends (which
    # writes the group below); two answered then were both accepted, and one never used.
    grouped = sum(bare_waits) > 1
    # Noted in the enclosing branch's track, if any, before its branches run: that branch
    # finished when this first()'s winner did, and sees what the branches do as they do it.
    # Races closed, nested (a receive with a timeout is a first()): noting nothing, the
    # enclosing branch counted as finished in the pass (it lost to any end the log held);
    # a receive made here was not withdrawn with it (its message never read again); one
    # made before was taken for its last call, unused (its message, handled, given back and
    # handled again); noting only when this first() returned, a gathered task still
    # running it when the enclosing first() decided hid its receive from the decision.
    nested = tracks.fork(len(waits))
    branches = nested.branches
    reaches: list[list[str]] = []
    tasks = []
    for i, wait in enumerate(waits):
        reach: list[str] = []
        reaches.append(reach)
        joins = str(position) if grouped and bare_waits[i] else None
        with tracks.creating_branch(branches[i]):
            task = asyncio.ensure_future(_in_branch(wait, branches[i], reach, joins, (position, i)))
        execution.branches.owned.add(task)
        tasks.append(task)
    await asyncio.wait(tasks)
    # A branch that unwound with one of the engine's signals (an outage's Abort, a lost
    # lease, the end of a dry replay, a block, a continuation) ends the execution, as it
    # would have outside first(). Race closed: counted as a finished branch, it lost to
    # another and its signal was dropped; the execution went on as if its write had been
    # applied and suspended cleanly, leaving the log without events the index had (a
    # step's result, run again by the next worker).
    # (a branch's asyncio.TaskGroup raised a group: what it stands for, signals.signal_of)
    outcomes = [None if (exc := task.exception()) is None else signal_of(exc) for task in tasks]
    for exc in outcomes:
        if exc is not None and not isinstance(exc, Exception | Suspend):
            raise exc
    finished, pending = [], {}
    for i, exc in enumerate(outcomes):
        if isinstance(exc, Suspend):
            exc.consumed = True
            pending[i] = exc
        else:
            finished.append(i)
    index = execution.index
    winner = index.firsts.get(position)
    if winner is None:
        if not finished:
            group = [_bare_wait(branches[i]) for i in pending if bare_waits and bare_waits[i]]
            if len(group) > 1:
                # the store withdraws the other hooks when one is answered or expires or a
                # timer fires, before any worker replays this decision (an answer meanwhile
                # is refused, not accepted and then never used)
                execution.writes.first_group(group)
            raise next(iter(pending.values()))  # the run waits on all of them
        # A branch finished with the last of what it did to end (a sequential branch's last
        # wait, a gather's slowest task, a step when its result was recorded); one with
        # nothing that ended, or a step done in this pass, finished in this pass: after
        # every end the log holds. Races closed: scored by its earliest, a branch whose
        # first wait ended early won over one that finished before it; scored by its last
        # wait, a branch that then ran a step won over an answer the log holds from before
        # the step was done (accepted, never used).
        await _catch_up(execution, branches)
        if execution.flush_before_step and await execution.flush():
            # Steps done in this pass are recorded before the decision, and what came in
            # meanwhile decides it, from the log. Race closed: an answer to a branch's hook
            # that came in while another branch ran a step made the store refuse the write
            # that held the decision (STALE), and the step's result with it: the run
            # restarted from its log, and the step ran again.
            raise Abort(
                Interrupted(
                    "events came in while a first() was decided; the run restarts from its log",
                    run_id=execution.run_id,
                )
            )
        winner = min(finished, key=lambda i: _finished_at(execution, branches[i]))
        losing = [i for i in range(len(waits)) if i != winner]
        losing_tracks = [branches[i] for i in losing]
        unused = [tracks.trailing(track) for track in losing_tracks]
        losers = _losers(execution, losing_tracks, unused, [reaches[i] for i in losing])
        # (before the decision is recorded: its closed list joins the index's)
        running = _running_children(execution, [reaches[i] for i in losing])
        decision: dict[str, Any] = {"seq": position, "winner": winner, "closed": losers}
        # The withdrawn receives that give their message back: those nothing of their
        # branch used, waiting for it or the last call of their task (a timed-out
        # receive's). Race closed: a message a losing branch had handed to a step was
        # given back, and the next receive processed it again.
        unused_waits = {wait_id for waits in unused for wait_id in waits}
        receives = [
            wait_id
            for wait_id in losers
            if execution.messages.took(wait_id)
            and (wait_id in execution.receiving or wait_id in unused_waits)
        ]
        if receives:
            decision["receives"] = receives
        execution.record(EventType.FIRST_DECIDED, decision)
        # Durable before a step's side effects run. Race closed: an answer that came in
        # meanwhile makes the store refuse the write that holds the decision (STALE) and
        # the run restart from its log; a step run after the decision had its result in
        # that write, and ran again.
        execution.flush_before_step = True
        for child_id in running:
            execution.writes.cancel_child(child_id)
        for wait_id in losers:
            _withdraw(execution, wait_id)
            execution.waiting.pop(wait_id, None)  # no suspension records it again
        for wait_id in receives:
            execution.messages.give_back(wait_id)
    for exc in pending.values():  # the losers no longer hold the run
        execution.waiting.pop(exc.wait, None)
    nested.winner = winner  # what the enclosing branch did is its winner's now
    return winner, tasks[winner].result()


# How long a decision waits at most for the branches' tasks to replay what the log holds
# of them: longer, a task waits on something outside the run (which its replay does not
# bring back), and the decision is made without what it would have noted.
CATCH_UP_SECONDS = 5.0
# How often, while it waits, the decision looks again at where those tasks are.
CATCH_UP_POLL_SECONDS = 0.001


async def _catch_up(execution: Execution, branches: list[Track]) -> None:
    """Let the tasks started inside the branches that are still running replay what the
    log recorded of them, so that the decision sees what they did. Race closed: a branch's
    gather passed a suspension on while a task it had started was still replaying (a
    receive with a timeout, a first() that takes a few turns of the loop, or bare awaits):
    a message that task had handed to a step in an earlier pass was taken for unused,
    given back, and handled again."""
    recorded = execution.index.calls
    loop = asyncio.get_running_loop()
    give_up = loop.time() + CATCH_UP_SECONDS
    while behind := [task for track in branches for task in tracks.replaying(track, recorded)]:
        left = give_up - loop.time()
        if left <= 0:
            return
        # Checked again at least every CATCH_UP_POLL_SECONDS, not only when one ends: a task
        # that has replayed what the log holds of it may go on (a new step, a wait outside
        # the run). Race closed: the decision waited for such a task to end (the whole
        # 5 s, or a new step's run), and a step its branch started meanwhile ran in a
        # branch that then lost.
        await asyncio.wait(
            behind, timeout=min(left, CATCH_UP_POLL_SECONDS), return_when=asyncio.FIRST_COMPLETED
        )


def _bare_wait(track: Track) -> str:
    wait_id = track.entries[0]  # a bare hook() or sleep(): its wait
    assert isinstance(wait_id, str), wait_id
    return wait_id


async def _in_branch(
    wait: Coroutine[Any, Any, Any],
    track: Track,
    reach: list[str],
    group: str | None,
    branch: tuple[Position, int],
) -> Any:
    tracks.enter_branch(track)
    _reaches.set((*_reaches.get(), reach))
    _first_group.set(group)
    _branches.set((*_branches.get(), branch))
    return await wait


def in_a_losing_branch(execution: Execution) -> bool:
    """Whether the running code is inside a branch of a first() that the log says lost."""
    branches = _branches.get()
    if not branches:  # (every step and new wait asks: most are in no first())
        return False
    firsts = execution.index.firsts
    return any(firsts.get(position, index) != index for position, index in branches)


def withdraws_receive(execution: Execution, wait_id: str) -> bool:
    """Whether the receive ``wait_id`` reached now takes no message: it is in a losing
    branch of a first() and the log does not say it took one (before the decision, in this
    pass or an earlier one). Reached after the decision (a task the branch left running),
    it is withdrawn, in this pass as in every replay, where the decision is known from the
    start. Race closed: such a receive took the next message, which nothing would read, and
    the run's own receive waited for another. Runs recorded before receives recorded their
    messages replay as they ran: there, every receive of a losing branch took one."""
    index = execution.index
    return (
        index.takes
        and bool(_branches.get())
        and wait_id not in index.assigned
        and in_a_losing_branch(execution)
    )


def withdrawn_at_once(execution: Execution, wait_id: str, step_id: str | None = None) -> Suspend:
    """A wait a losing branch of a first() reaches after the decision: a log that holds the
    decision but not the wait (a restart copies a hook, a timer or a child only with its
    end), or a branch that goes on after losing (a gathered task). Created now, nothing
    would read it or withdraw it; it is withdrawn as it is reached instead: neither a wait
    of the run's (a suspension's) nor a loose one."""
    execution.index.closed.add(wait_id)
    return Suspend(wait_id, step_id)


def _finished_at(execution: Execution, track: Track) -> tracks.Stamp:
    """When a finished branch finished, by the log's order (see first_of): when the last
    of what it did ended, a step done in this pass after every end the log holds."""
    index = execution.index

    def end_of(wait_id: str) -> tracks.Stamp | None:
        # an answer, expiry, timer, child's end, or the message a receive took
        return index.completed_at.get(wait_id) or execution.messages.came_at(wait_id, index)

    return tracks.finished_at(track, end_of) or tracks.NOW


def _losers(
    execution: Execution, losing: list[Track], unused: list[list[str]], reaches: list[list[str]]
) -> list[str]:
    """The waits the losing branches leave: each branch's last, those nothing went on from
    (``unused``, each branch's :func:`tracks.trailing`), and any other started inside it
    that is suspended in this pass (gathered in it, or a nested first()'s)."""
    closed = execution.index.closed
    losers: list[str] = []
    for track, trailing in zip(losing, unused, strict=True):
        waits = tracks.waits_of(track)
        for wait_id in waits[-1:] + trailing:
            if wait_id not in losers:
                losers.append(wait_id)
    for reach in reaches:
        for wait_id in reach:
            if wait_id in execution.waiting and wait_id not in closed and wait_id not in losers:
                losers.append(wait_id)
    return losers


def _running_children(execution: Execution, reaches: list[list[str]]) -> list[str]:
    """The children the losing branches started that are still running: cancelled with the
    decision, as nothing will read their results (a child an earlier decision withdrew
    was cancelled then)."""
    index = execution.index
    started = set(index.children.values())
    return [
        wait_id
        for reach in reaches
        for wait_id in reach
        if wait_id in started and wait_id not in index.child_ends and wait_id not in index.closed
    ]


def _withdraw(execution: Execution, wait_id: str) -> None:
    if wait_id in execution.receiving:
        execution.writes.stop_receiving(execution.receiving[wait_id])
    elif wait_id in execution.index.hooks_created:
        execution.writes.close_hook(wait_id, execution.token(wait_id))
    elif wait_id in execution.index.timers:
        execution.writes.cancel_timer(wait_id)
    execution.index.closed.add(wait_id)
