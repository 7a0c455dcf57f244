"""engine/tracks.py: when a first()'s branch finished and which of its waits ended it, from
the tree of what its tasks did."""

from __future__ import annotations

import contextvars

from runtime.engine import tracks
from runtime.engine.tracks import NOW, Fork, Read, StepMark, Track

ENDS = {"h": (10, 0), "x": (20, 0), "y": (30, 0)}


def _track(*entries: tracks.Entry, noted: tuple[int, ...] = ()) -> Track:
    """A track of ``entries``, made at the times ``noted`` (default: 0, 1, 2...)."""
    track = Track()
    track.entries.extend(entries)
    track.noted.extend(noted or range(len(entries)))
    return track


def _finished_at(entry: tracks.Entry) -> tracks.Stamp | None:
    return tracks.finished_at(entry, ENDS.get)


def test_a_branch_finished_with_the_last_of_what_it_did() -> None:
    assert _finished_at(_track("h", "x")) == (20, 0)
    assert _finished_at(_track("x", "h")) == (20, 0)  # its order does not matter
    assert _finished_at(_track(_track("y"), _track("h"))) == (30, 0)  # a gather's slowest
    assert _finished_at(_track()) is None  # nothing ended: finished in the pass


def test_a_step_counts_from_when_its_result_was_recorded() -> None:
    assert _finished_at(_track(StepMark((5, 0)), "h")) == (10, 0)
    assert _finished_at(_track("h", StepMark((15, 0)))) == (15, 0)
    assert _finished_at(_track(_track("h"), _track(StepMark((5, 0))))) == (10, 0)
    assert _finished_at(_track("h", StepMark(None))) == NOW  # done in this pass


def test_a_nested_first_counts_by_its_winner() -> None:
    nested = Fork(2)
    nested.branches[0].entries.append("y")
    nested.branches[1].entries.append("h")
    assert _finished_at(_track(nested)) is None  # undecided
    nested.winner = 1
    assert _finished_at(_track(nested)) == (10, 0)
    assert tracks.waits_of(_track("x", nested)) == ["x", "h"]


def test_the_trailing_waits_are_those_nothing_went_on_from() -> None:
    assert tracks.trailing(_track("x", "h")) == ["h"]
    assert tracks.trailing(_track("x", StepMark(None))) == []
    # a gather, whatever its order: each task's last
    gathered = _track("y", _track("x", noted=(5,)), _track("h", noted=(6,)))
    assert tracks.trailing(gathered) == ["x", "h"]
    # tasks started last that ended with steps had what came before: nothing trails
    assert tracks.trailing(_track("x", _track(StepMark(None)), _track(StepMark(None)))) == []


def test_a_tasks_last_wait_trails_unless_a_task_it_runs_in_went_on_after_it() -> None:
    # a task started, then its creator's own hook, then the task's receive: nobody read it
    assert tracks.trailing(_track(_track("x", noted=(2,)), "h", noted=(0, 1))) == ["h", "x"]
    # the creator's call came after the receive (it could have awaited the task): used
    assert tracks.trailing(_track(_track("x", noted=(2,)), "h", noted=(0, 3))) == ["h"]
    # the same through a nested first(): its winner's branch, or every branch undecided
    nested = Fork(2)
    nested.branches = [_track("x", noted=(5,)), _track("h", noted=(6,))]
    assert tracks.trailing(_track(nested, noted=(0,))) == ["x", "h"]
    nested.winner = 0
    assert tracks.trailing(_track(nested, noted=(0,))) == ["x"]
    went_on = _track(nested, "y", noted=(0, 7))  # the branch waited again after
    assert tracks.trailing(went_on) == ["y"]


def test_a_task_started_in_a_branch_gets_a_track_its_creators_holds() -> None:
    branch = Track()

    def in_branch() -> None:
        tracks.enter_branch(branch)
        tracks.note("h")
        child = contextvars.copy_context()
        tracks.started_task(child)
        child.run(tracks.note, "x")
        nested_branch = Track()
        with tracks.creating_branch(nested_branch):  # a first()'s branch task: its own track
            nested = contextvars.copy_context()
            tracks.started_task(nested)
        assert nested.get(tracks.current_track) is branch  # (it enters its own as it runs)
        assert tracks.forking_track(nested) is nested_branch  # (the factory gives it its task)

    contextvars.copy_context().run(in_branch)
    [wait, task] = branch.entries
    assert wait == "h" and isinstance(task, Track) and task.entries == ["x"]


def test_steps_done_in_the_pass_are_one_mark() -> None:
    track = Track()

    def in_branch() -> None:
        tracks.enter_branch(track)
        for _ in range(3):
            tracks.note_step(None)
        tracks.note_step("1700000000005-1")

    contextvars.copy_context().run(in_branch)
    [now, dated] = track.entries
    assert isinstance(now, StepMark) and now.at is None
    assert isinstance(dated, StepMark) and dated.at == (1700000000005, 1)


def test_outside_a_branch_nothing_is_noted() -> None:
    def outside() -> None:
        tracks.note("h")
        tracks.note_step(None)
        assert tracks.current_track.get() is None

    contextvars.copy_context().run(outside)


def test_a_task_whose_result_is_read_counts_by_its_readers() -> None:
    """With reads noted, a task's last wait went on only where a reader of its result made
    a call after the read; its creator's unrelated calls do not count."""
    listening = _track("x", noted=(5,))
    listening.reads_noted = True
    # the creator waits again after the receive, without reading it: nothing went on
    assert tracks.trailing(_track(listening, "h", noted=(0, 6))) == ["h", "x"]
    # a sibling reads it, then runs a step: it went on
    reader = _track(Read(listening), StepMark(None), noted=(7, 8))
    assert tracks.trailing(_track(listening, reader, noted=(0, 1))) == []
    # a reader that made no call after reading (a gather still waiting): it did not
    idle_reader = _track(_track("h", noted=(4,)), Read(listening), noted=(1, 7))
    assert sorted(tracks.trailing(_track(listening, idle_reader, noted=(0, 2)))) == ["h", "x"]
    # a read is not a call, nor a wait
    assert tracks.finished_at(Read(listening), ENDS.get) is None
    assert tracks.waits_of(_track(Read(listening))) == []


def test_a_chain_of_tasks_reading_each_other_is_walked_once_per_read() -> None:
    """A receive's task, read by the next task, read by the next... each read noted twice
    (an await of a pending task notes the waiter's wakeup and the await): each (task, read)
    is decided once, not once per path (~2^n)."""
    chain = 40
    source = _track("x", noted=(1,))
    source.reads_noted = True
    tasks_ = [source]
    for n in range(chain):
        reader = _track(Read(tasks_[-1]), Read(tasks_[-1]), noted=(10 + 2 * n, 11 + 2 * n))
        reader.reads_noted = True
        tasks_.append(reader)
    branch = _track(*tasks_, noted=tuple(range(-len(tasks_), 0)))
    walk = tracks._Walk()
    walk.visit(branch, -1)
    [(wait_id, holder, noted, later)] = walk.candidates
    assert wait_id == "x" and not walk.went_on(holder, noted, later)  # nobody went on
    assert len(walk.decided) <= chain + 1


def test_reading_a_tasks_result_after_a_wait_is_not_a_call_after_it() -> None:
    started = _track("h", noted=(1,))
    started.reads_noted = True
    # the task received (x), then awaited a task it had started before: x trails (and so
    # does the started task's h: its reader did nothing after reading it)
    read_last = _track(started, "x", Read(started), noted=(0, 2, 3))
    assert tracks.trailing(read_last) == ["x", "h"]
    # a step after the read still uses it
    used = _track(started, "x", Read(started), StepMark(None), noted=(0, 2, 3, 4))
    assert tracks.trailing(used) == []
