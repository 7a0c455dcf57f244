"""What a first() learns of what its branches did: each task of a branch notes its waits,
its steps, the tasks it starts and the first()s it nests in a :class:`Track`, so the
first() can tell when a branch finished (by the log's order) and which receives of a
losing branch took a message nothing went on to use.

A track is a tree, not one list per branch: a branch that gathers tasks finished when the
last of them did, and a receive whose task did nothing after it is unused, whatever order
the tasks reached their calls in. (One list per branch, in the order calls were reached,
made both depend on a gather's argument order: a step gathered before a wait made its
branch finish "now", after every end the log held; a message a gathered receive took
stayed taken when the receive came first and was given back when it came last.)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
from collections.abc import Callable, Collection, Generator, Iterator
from contextvars import ContextVar
from typing import Any, TypeAlias

from .replay import stamp
from .scopes import CallScope, Position, current_scope

# When an end came, by the log's order (an event id's two numbers).
Stamp = tuple[int, int]


class StepMark:
    """A step the task reached: done when the log recorded its result (``at``), or in this
    pass (None: after every end the log holds)."""

    __slots__ = ("at",)

    def __init__(self, at: Stamp | None) -> None:
        self.at = at


class Track:
    """The calls of one task of a first()'s branch, in the order it made them, each with
    when it was made (``noted``: one count across every track, so calls of different tasks
    compare)."""

    __slots__ = ("entries", "noted", "reads_noted", "scope", "task")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.noted: list[int] = []
        # Its task is a ReadingTask: what it returned went on only where a Read says so
        # (else, conservatively, wherever its creator made a call after it).
        self.reads_noted = False
        # A task started inside a branch: its numbering of durable calls, and the task
        # (set by the task factory; None when another factory made it)
        self.scope: CallScope | None = None
        self.task: asyncio.Future[Any] | None = None

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        self.noted.append(next(_calls))


class Fork:
    """A first() a track nested: its branches' tracks, and its winner once decided."""

    __slots__ = ("branches", "winner")

    def __init__(self, branches: int) -> None:
        self.branches = [Track() for _ in range(branches)]
        self.winner: int | None = None


class Read:
    """The track's task read what a task it did not run inside returned (awaited it, or
    took its result): that task's value went on in this one."""

    __slots__ = ("track",)

    def __init__(self, track: Track) -> None:
        self.track = track


# a wait's id, a step, a task the track's task started, a first() it nested, or a task's
# result it read
Entry: TypeAlias = str | StepMark | Track | Fork | Read

_calls = itertools.count()  # the order calls were noted in, in every track

# The track of the task running now, inside a branch of a first() (None elsewhere).
current_track: ContextVar[Track | None] = ContextVar("parley_track", default=None)
# While first() creates a branch's task, that branch's track: the task gets it, not a track
# of a task its creator started.
_forking: ContextVar[Track | None] = ContextVar("parley_forking", default=None)
# In a task started inside a branch: the track started for it (None in a branch's own
# task), which reading its result notes.
_started: ContextVar[Track | None] = ContextVar("parley_started_track", default=None)


def note(entry: Entry) -> None:
    track = current_track.get()
    if track is not None:
        track.add(entry)


def note_step(done_at: str | None) -> None:
    """A step reached, whose result the log recorded as event ``done_at`` (None: it runs
    in this pass)."""
    track = current_track.get()
    if track is None:
        return
    at = None if done_at is None else stamp(done_at)
    entries = track.entries
    # (a loop of steps in a branch: one mark for a run of steps done in this pass, noted
    # as of the last)
    if at is None and entries and _runs_now(entries[-1]):
        track.noted[-1] = next(_calls)
    else:
        track.add(StepMark(at))


def _runs_now(entry: Entry) -> bool:
    return isinstance(entry, StepMark) and entry.at is None


def started_task(context: contextvars.Context) -> None:
    """A task started inside a branch (``context`` is its own, a copy of its creator's):
    it notes its calls in a track of its own, which its creator's track holds. A first()'s
    branch task notes them in its branch's track instead (:func:`creating_branch`)."""
    branch = context.get(_forking)
    if branch is not None:
        # A first()'s branch task: its branch's track, which knows its numbering from now
        # on, before the task first runs. Race closed: a first() nested in a task still
        # replaying had created its branches' tasks, which had not run yet; an enclosing
        # first() that decided then saw nothing of them behind, and a message one had
        # taken in an earlier pass was neither kept nor given back (lost).
        branch.scope = context.get(current_scope)
        context.run(_started.set, None)
        return
    parent = context.get(current_track)
    if parent is None:
        return
    track = Track()
    track.scope = context.get(current_scope)
    parent.add(track)
    context.run(current_track.set, track)
    context.run(_started.set, track)


def started_track(context: contextvars.Context) -> Track | None:
    """The track :func:`started_task` gave the task that runs in ``context``, if any."""
    return context.get(_started)


class ReadingTask(asyncio.Task[Any]):
    """A task started inside a branch: whoever awaits it or takes its result notes the
    read in their own track (what it returned went on there)."""

    track: Track

    def __await__(self) -> Generator[Any, None, Any]:
        value = yield from super().__await__()
        note(Read(self.track))
        return value

    __iter__ = __await__

    def result(self) -> Any:
        value = super().result()
        note(Read(self.track))
        return value


def replaying(entry: Entry, recorded: Collection[Position]) -> list[asyncio.Future[Any]]:
    """The tasks started inside ``entry`` that are still running and have calls the log
    recorded ahead of them (a replay has not brought them back to where the run was)."""
    if isinstance(entry, Fork):
        return [task for track in entry.branches for task in replaying(track, recorded)]
    if not isinstance(entry, Track):
        return []
    found = [task for e in entry.entries for task in replaying(e, recorded)]
    task, scope = entry.task, entry.scope
    if task is not None and scope is not None and not task.done() and scope.went_past(recorded):
        found.append(task)
    return found


def fork(branches: int) -> Fork:
    """A first() of ``branches`` waits starts: noted in the running track, if any."""
    nested = Fork(branches)
    note(nested)
    return nested


@contextlib.contextmanager
def creating_branch(track: Track) -> Iterator[None]:
    """While a first() creates the task of the branch ``track`` is of (which then enters
    it, :func:`enter_branch`)."""
    token = _forking.set(track)
    try:
        yield
    finally:
        _forking.reset(token)


def forking_track(context: contextvars.Context) -> Track | None:
    """The track of the first()'s branch whose task runs in ``context``, while it is made."""
    return context.get(_forking)


def enter_branch(track: Track) -> None:
    """In a branch's task: its calls go to its branch's track."""
    current_track.set(track)
    _forking.set(None)


def finished_at(entry: Entry, end_of: Callable[[str], Stamp | None]) -> Stamp | None:
    """When what ``entry`` stands for finished, by the log's order (None: nothing in it
    ended; a finished branch then finished in this pass). ``end_of`` gives a wait's end
    (None: not ended)."""
    if isinstance(entry, str):
        return end_of(entry)
    if isinstance(entry, StepMark):
        return entry.at if entry.at is not None else NOW
    if isinstance(entry, Read):
        return None
    if isinstance(entry, Fork):
        return None if entry.winner is None else finished_at(entry.branches[entry.winner], end_of)
    ends = [at for at in (finished_at(e, end_of) for e in entry.entries) if at is not None]
    return max(ends, default=None)


NOW = (1 << 62, 0)  # after every event id: done in this pass


def waits_of(entry: Entry) -> list[str]:
    """Every wait in ``entry``, in the order its tasks noted them (a Fork: its winner's,
    or every branch's while it is undecided)."""
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, StepMark | Read):
        return []
    if isinstance(entry, Fork):
        return [wait for track in _counted(entry) for wait in waits_of(track)]
    return [wait for e in entry.entries for wait in waits_of(e)]


def _counted(nested: Fork) -> list[Track]:
    """What a nested first() did, for its enclosing branch: its winner's, or, undecided,
    every branch's (a decision withdrew the losers')."""
    if nested.winner is None:
        return nested.branches
    return [nested.branches[nested.winner]]


def trailing(track: Track) -> list[str]:
    """The waits in ``track`` that nothing went on from: a receive among them took a
    message nothing used. Such a wait is the last call of its task; no first() that holds
    it returned into a task that made a call after it; and no task that read its task's
    result (awaited it, or took it: a gather does) after it went on either. (Races closed:
    a receive in a task its creator awaited only after waiting on a hook of its own kept a
    message nothing read; receives whose message was passed on to tasks it started, steps
    gathered on it, or a task that awaited the receive's task and handled the message, were
    given back and the message handled twice.)"""
    walk = _Walk()
    walk.visit(track, -1)
    return [
        wait_id
        for wait_id, holder, noted, later in walk.candidates
        if not walk.went_on(holder, noted, later)
    ]


def _last_call(track: Track) -> int | None:
    """Where ``track``'s task made its last call: reads of other tasks' results after it
    are not calls. (Race closed: a task that received, then awaited a task it had started
    before, ended on the read; its receive, not its last entry, was taken for used, and a
    losing branch kept a message nothing had used.)"""
    for at in range(len(track.entries) - 1, -1, -1):
        if not isinstance(track.entries[at], Read):
            return at
    return None


class _Walk:
    """One pass over a branch's tree for :func:`trailing`: the candidate waits (each
    task's last, with when it was noted and when the tasks it runs inside last called),
    and who read each task's result, when."""

    def __init__(self) -> None:
        self.candidates: list[tuple[str, Track, int, int]] = []
        self.reads: dict[int, list[tuple[Track, int, int]]] = {}
        self.last_calls: dict[int, int] = {}
        # (track, since) -> went on. Races closed: every path through the reads walked
        # again (an await of a pending task notes two reads: the waiter's wakeup takes
        # the result, then the await itself), ~2^n for a chain of n tasks awaiting each
        # other.
        self.decided: dict[tuple[int, int], bool] = {}

    def visit(self, track: Track, later: int) -> None:
        """``later``: when the tasks ``track`` runs inside last made a call (-1: none)."""
        last = _last_call(track)
        if last is not None:
            wait_id = track.entries[last]
            if isinstance(wait_id, str):
                self.candidates.append((wait_id, track, track.noted[last], later))
        # (a task it started was noted before its calls)
        inner = max(later, self.last_call(track))
        for entry, noted in zip(track.entries, track.noted, strict=True):
            if isinstance(entry, Track):
                # a task's value reaches its creator when the creator reads it (a Read),
                # not when it makes some later call
                self.visit(entry, -1 if entry.reads_noted else inner)
            elif isinstance(entry, Fork):
                for branch in _counted(entry):
                    self.visit(branch, inner)
            elif isinstance(entry, Read):
                self.reads.setdefault(id(entry.track), []).append((track, noted, later))

    def last_call(self, track: Track) -> int:
        """When ``track``'s task last made a call (a read of another's result is not one)."""
        key = id(track)
        if key not in self.last_calls:
            at = _last_call(track)  # (noted grows along a track: its last call is its latest)
            self.last_calls[key] = -1 if at is None else track.noted[at]
        return self.last_calls[key]

    def went_on(self, track: Track, since: int, later: int) -> bool:
        """Whether what ``track``'s task had at ``since`` went on: it, or a task it runs
        inside (``later``), made a call after, or a task that read its result after went
        on (from its first read after ``since``: an earlier read has more after it)."""
        if later > since or self.last_call(track) > since:
            return True
        key = (id(track), since)
        if key in self.decided:
            return self.decided[key]
        self.decided[key] = True  # (tasks cannot read each other's results in a cycle)
        first_reads: dict[int, tuple[Track, int, int]] = {}
        for reader, noted, reader_later in self.reads.get(id(track), ()):
            earliest = first_reads.get(id(reader))
            if noted > since and (earliest is None or noted < earliest[1]):
                first_reads[id(reader)] = (reader, noted, reader_later)
        went = any(self.went_on(*read) for read in first_reads.values())
        self.decided[key] = went
        return went
