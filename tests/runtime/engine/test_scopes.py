"""CallScope: a task's numbering of its durable calls, and the names of the tasks it makes."""

from __future__ import annotations

import pytest

from runtime.engine.scopes import CallScope, position_of


def test_the_workflow_bodys_task_numbers_as_runs_always_did() -> None:
    root = CallScope()
    assert [root.next_position(), root.next_position()] == [0, 1]
    assert [root.step_id("s"), root.step_id("s"), root.step_id("t")] == ["s-0", "s-1", "t-0"]
    assert [root.hook_id("a"), root.hook_id("b")] == ["h0.a", "h1.b"]
    assert root.timer_id() == "t0"


def test_a_task_is_named_by_its_creators_calls_and_the_tasks_made_since() -> None:
    root = CallScope()
    first, second = root.child(), root.child()  # both before any call
    root.next_position()
    root.next_position()
    third = root.child()  # after two calls: the count of tasks made starts again
    assert [first.prefix, second.prefix, third.prefix] == ["0_0.", "0_1.", "2_0."]
    assert [third.next_position(), third.next_position()] == ["2_0.0", "2_0.1"]
    assert third.step_id("s") == "2_0.s-0"
    assert third.hook_id("approve") == "2_0.h0.approve"
    assert third.timer_id() == "2_0.t0"
    assert third.child().prefix == "2_0.2_0."


@pytest.mark.parametrize(
    ("recorded", "went_past"),
    [
        ([0, 1], False),  # the task's next call is its third
        ([0, 1, 2], True),
        (["0_0.5"], False),  # a task made before its second call
        (["2_0.0"], True),  # a task made from now on
        (["9_0.3"], True),  # a task made later still
    ],
)
def test_the_root_went_past_its_next_call(recorded: list[int | str], went_past: bool) -> None:
    root = CallScope()
    root.next_position()
    root.next_position()
    assert root.went_past(recorded) is went_past


@pytest.mark.parametrize(
    ("recorded", "went_past"),
    [
        ([0, 1, 2, 3], False),  # the workflow body's calls are not this task's
        (["1_0.0"], False),
        (["1_0.1"], True),
        (["1_0.0_0.0"], False),  # a task it made before its second call
        (["1_0.1_0.0"], True),
        (["1_1.7"], False),  # its sibling's
    ],
)
def test_a_task_went_past_its_next_call(recorded: list[int | str], went_past: bool) -> None:
    root = CallScope()
    root.next_position()
    task = root.child()
    task.next_position()
    assert task.went_past(recorded) is went_past


def test_tasks_made_since_the_last_call_are_behind_not_past() -> None:
    """patched() right after a gather: the gather's tasks were made before this point."""
    root = CallScope()
    root.next_position()
    root.child(), root.child()  # (the gather's)
    assert not root.went_past([0, "1_0.0", "1_1.0", "1_1.1"])
    assert root.went_past(["1_2.0"])  # a task made after this point


def test_a_recorded_position_is_read_back_as_it_was_written() -> None:
    assert position_of(3) == 3 and position_of(3.0) == 3  # the workflow body's: a number
    assert position_of("2_0.1") == "2_0.1"
