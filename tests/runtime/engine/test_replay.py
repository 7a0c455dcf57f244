"""ReplayIndex: what each event of a run's log tells replay, looked up by primitives."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.engine.replay import Call, ReplayIndex, StepFailure
from runtime.models import LOG_SCOPED, LOG_TAKES, Event, EventType

# The fields these tests cover: an event must change the ones it concerns and no other.
FIELDS = (
    "args",
    "kwargs",
    "completed",
    "failures",
    "started",
    "hooks_created",
    "received",
    "expired",
    "suspended_on",
    "timers",
    "fired",
    "calls",
    "step_waits",
    "patches",
    "completed_at",
    "step_ends",
    "firsts",
    "closed",
    "untaken",
    "messages",
    "assigned",
    "assigned_of",
    "message_at",
    "step_patches",
    "children",
    "child_ends",
    "tags",
    "origin",
    "log_format",
    "trace",
)


def _fields(index: ReplayIndex, names: tuple[str, ...] = FIELDS) -> dict[str, Any]:
    return {name: getattr(index, name) for name in names}


def _only_changed(index: ReplayIndex) -> set[str]:
    """Which of FIELDS differ from a new index's."""
    empty = _fields(ReplayIndex())
    return {name for name, value in _fields(index).items() if value != empty[name]}


def test_the_covered_fields_are_every_field() -> None:
    assert set(FIELDS) == set(ReplayIndex.__slots__)


def test_tags_come_from_the_start_and_each_tags_set() -> None:
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, {"args": [], "tags": {"customer": "acme"}})
    assert index.tags == {"customer": "acme"}
    changed = {"customer": "acme", "stage": "review"}
    index.add(EventType.TAGS_SET, {"seq": 0, "digest": "d1", "tags": changed})
    assert index.tags == changed
    assert index.calls[0] == Call("set_tags", "", "d1")
    assert _only_changed(index) == {"tags", "calls"}


def test_a_new_index_is_empty() -> None:
    index = ReplayIndex()
    assert _only_changed(index) == set()
    assert index.args == [] and index.kwargs == {} and index.completed == {}


def test_workflow_started_sets_args_and_kwargs() -> None:
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, {"args": [1, "two"], "kwargs": {"x": 3}})
    assert index.args == [1, "two"]
    assert index.kwargs == {"x": 3}
    assert _only_changed(index) == {"args", "kwargs"}


def test_workflow_started_says_whether_tasks_number_their_own_calls() -> None:
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, {"args": [], "scoped": 1})
    assert index.scoped is True and index.log_format == 1
    assert _only_changed(index) == {"log_format"}
    index.add(EventType.WORKFLOW_STARTED, {"args": []})  # a run started before 2026-12-02
    assert index.scoped is False


def test_workflow_started_says_whether_receives_record_what_they_took() -> None:
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, {"args": [], "scoped": LOG_TAKES})
    assert index.scoped is True and index.takes is True
    assert _only_changed(index) == {"log_format"}
    index.add(EventType.WORKFLOW_STARTED, {"args": [], "scoped": LOG_SCOPED})
    assert index.scoped is True and index.takes is False


def test_the_origin_is_the_id_of_workflow_started() -> None:
    """What tells this run from an earlier run of the same id (their derived ids differ)."""
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, {"args": []}, "1700000000000-0")
    assert index.origin == "1700000000000-0"
    index.add(EventType.STEP_STARTED, {"step_id": "s-0", "name": "s", "seq": 0}, "1700000000001-0")
    assert index.origin == "1700000000000-0"


def test_workflow_started_without_kwargs_or_args() -> None:
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, {"args": [5]})
    assert index.args == [5] and index.kwargs == {}
    index.add(EventType.WORKFLOW_STARTED, {})
    assert index.args == [] and index.kwargs == {}


def test_workflow_started_copies_its_data() -> None:
    data: dict[str, Any] = {"args": [1], "kwargs": {"a": 1}}
    index = ReplayIndex()
    index.add(EventType.WORKFLOW_STARTED, data)
    data["args"].append(2)
    data["kwargs"]["b"] = 2
    assert index.args == [1] and index.kwargs == {"a": 1}


def test_step_started_records_step_and_attempt() -> None:
    index = ReplayIndex()
    index.add(EventType.STEP_STARTED, {"step_id": "fetch-0", "name": "fetch", "attempt": 2})
    assert index.started == {("fetch-0", 2)}
    assert _only_changed(index) == {"started"}  # a retry is not a new call
    index.add(EventType.STEP_STARTED, {"step_id": "other-0"})  # attempt defaults to 0
    assert index.started == {("fetch-0", 2), ("other-0", 0)}
    assert _only_changed(index) == {"started", "calls"}


def test_step_completed_records_the_result_even_none() -> None:
    index = ReplayIndex()
    index.add(EventType.STEP_COMPLETED, {"step_id": "a-0", "result": {"ok": [1, 2]}})
    index.add(EventType.STEP_COMPLETED, {"step_id": "b-0", "result": None})
    index.add(EventType.STEP_COMPLETED, {"step_id": "c-0"})
    assert index.completed == {"a-0": {"ok": [1, 2]}, "b-0": None, "c-0": None}
    assert "b-0" in index.completed  # a None result is still a completed step
    assert _only_changed(index) == {"completed"}


def test_step_completed_from_the_log_dates_the_step() -> None:
    """A result read from the log says when the step was done (a first()'s branch that ran
    it finished no earlier); one this execution buffers has no id yet."""
    index = ReplayIndex()
    index.add(EventType.STEP_COMPLETED, {"step_id": "a-0", "result": 1}, "1700000000005-2")
    index.add(EventType.STEP_COMPLETED, {"step_id": "b-0", "result": 2})
    assert index.step_ends == {"a-0": "1700000000005-2"}
    assert _only_changed(index) == {"completed", "step_ends"}


def test_a_final_step_failure_from_the_log_dates_the_step() -> None:
    """A step that failed for good was done then; one that will retry was not."""
    index = ReplayIndex()
    failed = {"step_id": "a-0", "attempt": 0, "error": {"type": "E"}, "final": True}
    index.add(EventType.STEP_FAILED, failed, "1700000000005-2")
    retried = {"step_id": "b-0", "attempt": 0, "error": {"type": "E"}, "final": False}
    index.add(EventType.STEP_FAILED, retried, "1700000000006-0")
    assert index.step_ends == {"a-0": "1700000000005-2"}


def test_retryable_step_failure_records_the_failure_and_its_retry_timer() -> None:
    index = ReplayIndex()
    index.add(
        EventType.STEP_FAILED,
        {
            "step_id": "call-0",
            "attempt": 1,
            "error": {"type": "ValueError", "message": "boom"},
            "final": False,
            "timer_id": "retry.call-0.1",
            "retry_at": 123456,
        },
    )
    assert index.failures == {
        "call-0": [
            StepFailure(
                attempt=1,
                error={"type": "ValueError", "message": "boom"},
                final=False,
                timer_id="retry.call-0.1",
            )
        ]
    }
    assert index.timers == {"retry.call-0.1": 123456}
    assert _only_changed(index) == {"failures", "timers"}


def test_final_step_failure_schedules_no_timer() -> None:
    index = ReplayIndex()
    index.add(
        EventType.STEP_FAILED,
        {"step_id": "call-0", "attempt": 3, "error": {"type": "E"}, "final": True},
    )
    [failure] = index.failures["call-0"]
    assert failure.final is True
    assert failure.timer_id is None
    assert failure.attempt == 3
    assert index.timers == {}
    assert _only_changed(index) == {"failures"}


def test_step_failures_accumulate_per_step_in_order() -> None:
    index = ReplayIndex()
    for attempt in range(3):
        index.add(
            EventType.STEP_FAILED,
            {
                "step_id": "s-0",
                "attempt": attempt,
                "error": {"n": attempt},
                "final": attempt == 2,
                "timer_id": None if attempt == 2 else f"t{attempt}",
                "retry_at": 1000 + attempt,
            },
        )
    index.add(EventType.STEP_FAILED, {"step_id": "other-0"})
    assert [f.attempt for f in index.failures["s-0"]] == [0, 1, 2]
    assert [f.final for f in index.failures["s-0"]] == [False, False, True]
    assert index.timers == {"t0": 1000, "t1": 1001}
    # defaults of a failure with nothing but its step id
    assert index.failures["other-0"] == [StepFailure(0, {}, False, None)]


@pytest.mark.parametrize("event_type", [EventType.STEP_SUSPENDED, EventType.WORKFLOW_SUSPENDED])
def test_suspensions_record_the_wait(event_type: EventType) -> None:
    index = ReplayIndex()
    index.add(event_type, {"wait": "t0"})
    index.add(event_type, {"wait": ""})  # no wait: nothing recorded
    index.add(event_type, {})
    assert index.suspended_on == {"t0"}
    assert _only_changed(index) == {"suspended_on"}
    index.add(event_type, {"step_id": "s-0", "wait": "s-0.approve"})
    assert index.suspended_on == {"s-0.approve", "t0"}
    assert index.step_waits == {"s-0": "s-0.approve"}
    assert _only_changed(index) == {"suspended_on", "step_waits"}


def test_hook_created_keeps_its_whole_data() -> None:
    index = ReplayIndex()
    data = {"hook_id": "s-0.approve", "name": "approve", "step_id": "s-0", "prompt": "ok?"}
    index.add(EventType.HOOK_CREATED, data)
    assert index.hooks_created == {"s-0.approve": data}
    assert _only_changed(index) == {"hooks_created"}  # a step's hook: not a body call
    workflow_level = {"hook_id": "h0.approve", "name": "approve", "expires_at": 99}
    index.add(EventType.HOOK_CREATED, workflow_level)
    assert index.hooks_created == {"s-0.approve": data, "h0.approve": workflow_level}
    assert index.calls == {0: Call("hook", "approve")}


def test_hook_received_records_the_payload() -> None:
    index = ReplayIndex()
    index.add(EventType.HOOK_RECEIVED, {"hook_id": "h0", "payload": {"choice": "yes"}})
    index.add(EventType.HOOK_RECEIVED, {"hook_id": "h1", "payload": None})
    assert index.received == {"h0": {"choice": "yes"}, "h1": None}
    assert "h1" in index.received  # a null answer is still an answer
    assert _only_changed(index) == {"received"}


def test_hook_expired_records_the_hook() -> None:
    index = ReplayIndex()
    index.add(EventType.HOOK_EXPIRED, {"hook_id": "h0"})
    assert index.expired == {"h0"}
    assert _only_changed(index) == {"expired"}


def test_timers_scheduled_and_fired() -> None:
    index = ReplayIndex()
    index.add(EventType.TIMER_SCHEDULED, {"timer_id": "t0", "due": "1700000000000"})
    index.add(EventType.TIMER_SCHEDULED, {"timer_id": "t1", "due": 5})
    assert index.timers == {"t0": 1700000000000, "t1": 5}  # due as int, whatever it came as
    assert index.fired == set()
    index.add(EventType.TIMER_FIRED, {"timer_id": "t0"})
    assert index.fired == {"t0"}
    assert _only_changed(index) == {"timers", "fired", "calls"}


def test_durable_calls_are_indexed_by_their_recorded_position() -> None:
    index = ReplayIndex()
    index.add(
        EventType.STEP_STARTED,
        {"step_id": "fetch-0", "name": "fetch", "attempt": 0, "seq": 0, "args": "ab12"},
    )
    index.add(EventType.STEP_STARTED, {"step_id": "fetch-0", "name": "fetch", "attempt": 1})
    index.add(EventType.STEP_STARTED, {"step_id": "x-0", "name": "x", "attempt": 0, "seq": 4})
    index.add(EventType.HOOK_CREATED, {"hook_id": "h1.ok", "name": "ok", "seq": 1})
    index.add(EventType.HOOK_CREATED, {"hook_id": "x-0.h", "name": "h", "step_id": "x-0"})
    index.add(EventType.TIMER_SCHEDULED, {"timer_id": "t0", "due": 5, "seq": 2})
    index.add(EventType.VALUE_RECORDED, {"kind": "now", "value": 1.5, "seq": 3})
    assert index.calls == {
        0: Call("step", "fetch", "ab12"),
        1: Call("hook", "ok"),
        2: Call("sleep", ""),
        3: Call("now", "", value=1.5),
        4: Call("step", "x"),
    }


def test_calls_without_positions_go_in_log_order() -> None:
    """Logs written before positions were recorded."""
    index = ReplayIndex()
    index.add(EventType.STEP_STARTED, {"step_id": "a-0", "name": "a"})
    index.add(EventType.TIMER_SCHEDULED, {"timer_id": "t0", "due": 1})
    index.add(EventType.VALUE_RECORDED, {"kind": "uuid4", "value": "u"})
    assert index.calls == {
        0: Call("step", "a"),
        1: Call("sleep", ""),
        2: Call("uuid4", "", None, "u"),
    }


def test_value_recorded_is_a_call_only() -> None:
    index = ReplayIndex()
    index.add(EventType.VALUE_RECORDED, {"kind": "random", "value": 0.25, "seq": 7})
    assert index.calls == {7: Call("random", "", value=0.25)}
    assert _only_changed(index) == {"calls"}


def test_patch_marked_records_the_patch_and_its_step() -> None:
    index = ReplayIndex()
    index.add(EventType.PATCH_MARKED, {"patch": "new-pricing"})
    index.add(EventType.PATCH_MARKED, {"patch": "retry-twice", "step_id": "s-0"})
    assert index.patches == {("new-pricing", None), ("retry-twice", "s-0")}
    assert _only_changed(index) == {"patches"}


def test_a_step_keeps_its_last_wait() -> None:
    index = ReplayIndex()
    index.add(EventType.STEP_SUSPENDED, {"step_id": "s-0", "wait": "s-0.first"})
    index.add(EventType.STEP_SUSPENDED, {"step_id": "s-0", "wait": "s-0.second"})
    index.add(EventType.WORKFLOW_SUSPENDED, {"wait": "h2.top"})
    assert index.step_waits == {"s-0": "s-0.second"}
    assert index.suspended_on == {"s-0.first", "s-0.second", "h2.top"}


def test_call_descriptions() -> None:
    assert Call("step", "fetch", "ab12").describe() == "step 'fetch' (arguments ab12)"
    assert Call("step", "fetch").describe() == "step 'fetch'"
    assert Call("hook", "approve").describe() == "hook 'approve'"
    assert Call("sleep", "").describe() == "sleep"
    assert Call("now", "", value=3).describe() == "now"


@pytest.mark.parametrize(
    "event_type",
    [
        EventType.WORKFLOW_COMPLETED,
        EventType.WORKFLOW_FAILED,
        EventType.WORKFLOW_CANCELLED,
        "custom.event",
        "",
    ],
)
def test_other_event_types_are_ignored(event_type: str) -> None:
    index = ReplayIndex()
    index.add(event_type, {"step_id": "s", "hook_id": "h", "timer_id": "t", "result": 1})
    assert _only_changed(index) == set()


def test_event_types_given_as_plain_strings_are_handled() -> None:
    """Events read from the store carry their type as ``str``, not ``EventType``."""
    index = ReplayIndex()
    index.add("step.completed", {"step_id": "a-0", "result": 1})
    index.add("hook.expired", {"hook_id": "h"})
    assert index.completed == {"a-0": 1}
    assert index.expired == {"h"}


def test_add_all_applies_events_in_log_order() -> None:
    events = [
        Event("1-0", "workflow.started", {"args": ["first"]}),
        Event("2-0", "step.completed", {"step_id": "s-0", "result": "old"}),
        Event("3-0", "unknown.kind", {"step_id": "s-0", "result": "ignored"}),
        Event("4-0", "step.completed", {"step_id": "s-0", "result": "new"}),
        Event("5-0", "timer.scheduled", {"timer_id": "t0", "due": 10}),
        Event("6-0", "timer.scheduled", {"timer_id": "t0", "due": 20}),
        Event("7-0", "workflow.started", {"args": ["second"], "kwargs": {"k": 1}}),
    ]
    index = ReplayIndex()
    index.add_all(events)
    # the later event wins where two write the same entry
    assert index.completed == {"s-0": "new"}
    assert index.timers == {"t0": 20}
    assert index.args == ["second"] and index.kwargs == {"k": 1}

    reversed_index = ReplayIndex()
    reversed_index.add_all(list(reversed(events)))
    assert reversed_index.completed == {"s-0": "old"}
    assert reversed_index.timers == {"t0": 10}
    assert reversed_index.args == ["first"]


def test_add_all_matches_adding_one_by_one() -> None:
    events = [
        Event("1-0", "workflow.started", {"args": [], "kwargs": {"q": "x"}}),
        Event("2-0", "step.started", {"step_id": "s-0", "attempt": 0}),
        Event(
            "3-0",
            "step.failed",
            {"step_id": "s-0", "attempt": 0, "error": {}, "timer_id": "r", "retry_at": 7},
        ),
        Event("4-0", "timer.fired", {"timer_id": "r"}),
        Event("5-0", "step.started", {"step_id": "s-0", "attempt": 1}),
        Event("6-0", "hook.created", {"hook_id": "s-0.h", "name": "h"}),
        Event("7-0", "step.suspended", {"step_id": "s-0", "wait": "s-0.h"}),
        Event("8-0", "hook.received", {"hook_id": "s-0.h", "payload": 1}),
        Event("9-0", "step.completed", {"step_id": "s-0", "result": 2}),
    ]
    bulk = ReplayIndex()
    bulk.add_all(events)
    single = ReplayIndex()
    for event in events:
        single.add(event.type, event.data, event.id)
    every_field = tuple(ReplayIndex.__slots__)
    assert _fields(bulk, every_field) == _fields(single, every_field)
    assert bulk.started == {("s-0", 0), ("s-0", 1)}
    assert bulk.timers == {"r": 7} and bulk.fired == {"r"}
    assert bulk.suspended_on == {"s-0.h"} and bulk.received == {"s-0.h": 1}
    assert bulk.completed == {"s-0": 2}


def test_first_decided_records_the_winner_and_the_withdrawn_waits() -> None:
    index = ReplayIndex()
    index.add(EventType.FIRST_DECIDED, {"seq": 3, "winner": 1, "closed": ["h0.a", "t0"]})
    assert index.firsts == {3: 1} and index.closed == {"h0.a", "t0"}
    assert _only_changed(index) == {"firsts", "closed"}


def test_a_decision_names_the_withdrawn_receives_that_take_no_message() -> None:
    index = ReplayIndex()
    decision = {"seq": 0, "winner": 1, "closed": ["m0.visitor"], "receives": ["m0.visitor"]}
    index.add(EventType.FIRST_DECIDED, decision)
    assert index.closed == {"m0.visitor"} and index.untaken == {"m0.visitor"}
    assert _only_changed(index) == {"firsts", "closed", "untaken"}


def test_a_recorded_take_names_the_receive_and_its_message() -> None:
    index = ReplayIndex()
    index.add(EventType.MESSAGE_TAKEN, {"wait": "m1_0.0.x", "topic": "x", "n": 2})
    assert index.assigned == {"m1_0.0.x": ("x", 2)} and index.assigned_of == {"x": {2}}
    assert _only_changed(index) == {"assigned", "assigned_of"}


def test_a_withdrawn_receive_gives_back_the_message_it_took() -> None:
    index = ReplayIndex()
    index.add(EventType.MESSAGE_TAKEN, {"wait": "m0.x", "topic": "x", "n": 0})
    decision = {"seq": 1, "winner": 1, "closed": ["m0.x"], "receives": ["m0.x"]}
    index.add(EventType.FIRST_DECIDED, decision)
    assert index.untaken == {"m0.x"} and index.assigned == {} and index.assigned_of == {"x": set()}


def test_the_end_of_a_wait_is_dated_by_its_event_id() -> None:
    index = ReplayIndex()
    index.add_all(
        [
            Event("1700000000005-1", "hook.received", {"hook_id": "h0.a", "payload": 1}),
            Event("1700000000005-0", "hook.expired", {"hook_id": "h1.b"}),
            Event("1700000000009-0", "timer.fired", {"timer_id": "t0"}),
        ]
    )
    assert index.completed_at == {
        "h0.a": (1700000000005, 1),
        "h1.b": (1700000000005, 0),
        "t0": (1700000000009, 0),
    }
    index.add(EventType.HOOK_RECEIVED, {"hook_id": "h2.c", "payload": 2})  # no id: undated
    assert "h2.c" not in index.completed_at


def test_messages_are_kept_by_topic_in_order() -> None:
    index = ReplayIndex()
    index.add(EventType.MESSAGE_RECEIVED, {"topic": "order", "payload": 1}, "7-0")
    index.add(EventType.MESSAGE_RECEIVED, {"topic": "other", "payload": "x"}, "7-1")
    index.add(EventType.MESSAGE_RECEIVED, {"topic": "order", "payload": 2})  # undated
    assert index.messages == {"order": [1, 2], "other": ["x"]}
    # when each came, by topic and in the same order (a receive's message can win a first())
    assert index.message_at == {"order": [(7, 0), None], "other": [(7, 1)]}
    assert _only_changed(index) == {"messages", "message_at"}


def test_a_step_start_records_the_patches_its_code_knew() -> None:
    index = ReplayIndex()
    index.add(EventType.STEP_STARTED, {"step_id": "s-0", "name": "s", "patches": ["p1"]})
    index.add(EventType.STEP_STARTED, {"step_id": "s-0", "name": "s", "attempt": 1})
    assert index.step_patches == {"s-0": frozenset({"p1"})}


def test_children_are_known_by_position_and_their_ends_by_id() -> None:
    index = ReplayIndex()
    index.add(EventType.CHILD_STARTED, {"seq": 2, "child_run_id": "r-c", "workflow": "w"})
    index.add_all([Event("5-0", "child.completed", {"child_run_id": "r-c", "status": "completed"})])
    assert index.children == {2: "r-c"}
    assert index.child_ends == {"r-c": {"child_run_id": "r-c", "status": "completed"}}
    assert index.completed_at == {"r-c": (5, 0)}  # a child's end can win a first()
