"""PassMessages: which message of its topic each receive of a pass takes."""

from __future__ import annotations

from runtime.engine.messages import PassMessages
from runtime.engine.replay import ReplayIndex
from runtime.models import LOG_SCOPED, LOG_TAKES, EventType


def _index(log_format: int, *takes: tuple[str, int]) -> ReplayIndex:
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, {"args": [], "scoped": log_format})
    for wait, n in takes:
        index.add(EventType.MESSAGE_TAKEN, {"wait": wait, "topic": "x", "n": n})
    return index


def _pass(index: ReplayIndex) -> PassMessages:
    messages = PassMessages()
    messages.clear(index)
    return messages


def test_receives_take_a_topics_messages_in_the_order_they_are_reached() -> None:
    for log_format in (LOG_SCOPED, LOG_TAKES):
        index = _index(log_format)
        messages = _pass(index)
        assert [messages.take("x", w, index) for w in ("a", "b", "c")] == [0, 1, 2]
        assert messages.take("y", "d", index) == 0
        assert messages.took("b") and not messages.took("e")


def test_a_recorded_take_is_taken_again_and_skipped_by_the_others() -> None:
    index = _index(LOG_TAKES, ("b", 0), ("d", 2))
    messages = _pass(index)
    # a is reached first: the first message is b's, so it takes the second
    assert [messages.take("x", w, index) for w in ("a", "b", "c", "d")] == [1, 0, 3, 2]


def test_a_message_given_back_goes_to_the_next_receive() -> None:
    index = _index(LOG_TAKES, ("b", 1))
    messages = _pass(index)
    assert messages.take("x", "a", index) == 0
    assert messages.take("x", "b", index) == 1
    messages.give_back("a")  # (not the last number taken: b's came after it)
    assert not messages.took("a")
    assert messages.take("x", "c", index) == 0
    assert messages.take("x", "d", index) == 2


def test_a_run_recorded_before_takes_gives_back_as_it_ran() -> None:
    """There the count of the topic goes one back, whatever was given back."""
    index = _index(LOG_SCOPED)
    messages = _pass(index)
    assert [messages.take("x", w, index) for w in ("a", "b")] == [0, 1]
    messages.give_back("a")
    assert messages.take("x", "c", index) == 1


def test_a_number_given_back_is_taken_once() -> None:
    """(A review found it taken twice: found by the search, and again among those given
    back.)"""
    index = _index(LOG_TAKES, ("r", 0))
    messages = _pass(index)
    assert messages.take("x", "r", index) == 0
    index.assigned.pop("r")  # as the decision that withdraws r does
    index.assigned_of["x"].discard(0)
    messages.give_back("r")
    assert [messages.take("x", w, index) for w in ("a", "b")] == [0, 1]


def test_a_message_given_back_is_unread_for_the_receives_that_suspended() -> None:
    index = _index(LOG_TAKES)
    index.add(EventType.MESSAGE_RECEIVED, {"topic": "x", "payload": "a"})
    messages = _pass(index)
    assert messages.take("x", "r", index) == 0  # took "a"
    assert messages.take("x", "s", index) == 1  # suspends: nothing more came
    assert not messages.unread("x", ["s"], index)
    messages.give_back("r")
    assert messages.unread("x", ["s"], index)  # s could take "a" now: the pass runs again


def test_a_run_recorded_before_takes_counts_its_unread_messages_as_it_did() -> None:
    index = _index(LOG_SCOPED)
    index.add(EventType.MESSAGE_RECEIVED, {"topic": "x", "payload": "a"})
    messages = _pass(index)
    assert [messages.take("x", w, index) for w in ("r", "s")] == [0, 1]
    assert not messages.unread("x", ["s"], index)
    messages.give_back("r")
    assert messages.unread("x", ["s"], index)


def test_a_message_that_came_after_a_receive_suspended_is_unread() -> None:
    """(A later write of the pass brought it back.)"""
    for log_format in (LOG_SCOPED, LOG_TAKES):
        index = _index(log_format)
        messages = _pass(index)
        assert messages.take("x", "s", index) == 0
        assert not messages.unread("x", ["s"], index)
        index.add(EventType.MESSAGE_RECEIVED, {"topic": "x", "payload": "a"})
        assert messages.unread("x", ["s"], index)
