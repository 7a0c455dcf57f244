"""A first() nested in a branch of another first() counts for that branch: the branch
finished when the nested first()'s winner did, holds its waits, and ran its steps; while
the nested first() waits, the branch's last call is that first()'s, not a receive before. A
``receive(topic, timeout=...)`` is such a first() (of the receive and a timer). Each case
comes with controls without a nested first(), which held before. Found by two reviews:
the branch holding the nested first() had nothing noted of it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from runtime import (
    RunStatus,
    Runtime,
    Worker,
    first,
    hook,
    receive,
    sleep,
    step,
    step_hook,
    workflow,
)
from runtime.engine.firsts import CATCH_UP_SECONDS
from tests.apps.messages_app import against_stop, handle_message, handled
from tests.helpers import answer, cached_or_full, message_then_stop, stop_then_message


async def _stop_then_a_message(rt: Runtime, worker: Worker, wf: Any) -> str:
    """Start ``wf``; answer stop, then send "a", before a worker replays the run."""
    handled.clear()
    run_id = await stop_then_message(rt, worker, wf)
    return run_id


@workflow(name="nested_plain_receive_loses_wf")
async def plain_receive_loses_wf() -> list[Any]:
    which, _ = await first(hook("stop"), receive("v"))
    return [which, await handle_message(await receive("v"))]


@workflow(name="nested_timed_receive_loses_wf")
async def timed_receive_loses_wf() -> list[Any]:
    which, _ = await first(hook("stop"), receive("v", timeout="1h"))
    return [which, await handle_message(await receive("v"))]


@pytest.mark.parametrize("wf", [plain_receive_loses_wf, timed_receive_loses_wf])
async def test_a_message_that_came_after_the_winner_goes_to_the_next_receive(
    rt: Runtime, worker: Worker, wf: Any
) -> None:
    """stop is answered, then a message comes, before a worker replays the run: stop wins,
    and the message the losing receive took goes to the run's next receive. (With a
    timeout, the losing receive kept it: the run waited for ever with it unread.)"""
    run_id = await _stop_then_a_message(rt, worker, wf)
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, (info.status, info.error)
    assert await rt.wait(run_id, timeout=5) == [0, "handled a"]
    assert handled == ["a"]


@workflow(name="nested_plain_receive_wins_wf")
async def plain_receive_wins_wf() -> int:
    which, _ = await first(hook("stop"), receive("v"))
    return which


@workflow(name="nested_timed_receive_wins_wf")
async def timed_receive_wins_wf() -> int:
    which, _ = await first(hook("stop"), receive("v", timeout="1h"))
    return which


async def _either_of_two() -> Any:
    return await first(hook("y"), hook("z"))


@workflow(name="nested_hooks_win_wf")
async def nested_hooks_win_wf() -> int:
    which, _ = await first(hook("stop"), _either_of_two())
    return which


async def _send_v(rt: Runtime, run_id: str) -> None:
    await rt.send(run_id, "v", "a")


async def _answer_y(rt: Runtime, run_id: str) -> None:
    await answer(rt, "y", 1)


@pytest.mark.parametrize(
    ("wf", "end_the_branch"),
    [
        (plain_receive_wins_wf, _send_v),
        (timed_receive_wins_wf, _send_v),
        (nested_hooks_win_wf, _answer_y),
    ],
)
async def test_the_branch_whose_wait_ended_first_wins(
    rt: Runtime, worker: Worker, wf: Any, end_the_branch: Any
) -> None:
    """The second branch's wait ends (a message, or the nested first()'s hook answered),
    then stop is answered, before a worker replays the run: the second branch finished
    first and wins, by the order the log recorded the ends. (Nested, it counted as
    finished in the pass, after every end: stop won.)"""
    run_id = await rt.start(wf)
    await worker.drain()
    await end_the_branch(rt, run_id)
    await answer(rt, "stop", 1)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 1


async def _take_and_handle() -> Any:
    return await handle_message(await receive("v"))


async def _take_and_handle_with_a_deadline() -> Any:
    message = await receive("v")
    return await first(handle_message(message), sleep(30))  # a step with a deadline


@workflow(name="nested_handled_then_lost_wf")
async def handled_then_lost_wf() -> list[Any]:
    which, _ = await first(hook("stop"), _take_and_handle())
    return [which, await handle_message(await receive("v"))]


@workflow(name="nested_handled_with_a_deadline_then_lost_wf")
async def handled_with_a_deadline_then_lost_wf() -> list[Any]:
    which, _ = await first(hook("stop"), _take_and_handle_with_a_deadline())
    return [which, await handle_message(await receive("v"))]


@pytest.mark.parametrize("wf", [handled_then_lost_wf, handled_with_a_deadline_then_lost_wf])
async def test_a_message_a_losing_branch_handed_to_a_step_is_not_handled_again(
    rt: Runtime, worker: Worker, wf: Any
) -> None:
    """stop is answered, then "a" comes: the second branch takes "a", hands it to a step
    (in a first() with a deadline, in the second workflow), and loses to stop. "a" was
    used, so the run's next receive takes "b". (Nested, the step went unseen: "a" was
    given back and handled twice.)"""
    run_id = await _stop_then_a_message(rt, worker, wf)
    info = await rt.get_run(run_id)
    assert (info.status, handled) == (RunStatus.SUSPENDED, ["a"]), info.result
    await rt.send(run_id, "v", "b")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]
    assert handled == ["a", "b"]


# A branch that took a message and went on to wait in a nested first(): the message was
# read, so it stays taken when the branch loses. (The branch's box still ended with that
# receive while the nested first() waited, noting nothing: the decision took it for the
# branch's last call, unused, and gave its message back to be handled again.)


async def _plain_then_hook() -> Any:
    await receive("v")
    return await hook("h")


async def _timed_then_hook() -> Any:
    await receive("v", timeout="1h")
    return await hook("h")


async def _timed_then_timed() -> Any:
    await receive("v", timeout="1h")
    return await receive("w", timeout="1h")


async def _plain_then_a_first() -> Any:
    await receive("v")
    return await first(hook("h"), sleep(3600))


async def _collect_until_stopped() -> Any:
    collected = []
    while True:
        collected.append(await receive("v", timeout="1h"))


@pytest.mark.parametrize(
    "wf",
    [
        against_stop("nested_plain_then_hook_wf", _plain_then_hook),
        against_stop("nested_timed_then_hook_wf", _timed_then_hook),
        against_stop("nested_timed_then_timed_wf", _timed_then_timed),
        against_stop("nested_plain_then_a_first_wf", _plain_then_a_first),
        against_stop("nested_collect_until_stopped_wf", _collect_until_stopped),
    ],
    ids=["hook", "timed-hook", "timed-timed", "plain-first", "collect-loop"],
)
async def test_a_message_a_branch_read_before_waiting_again_stays_taken(
    rt: Runtime, worker: Worker, wf: Any
) -> None:
    """The second branch receives "a" and waits again (a hook, a receive with a timeout, a
    first(), or the next round of a loop that collects messages); stop wins: the run's own
    receive waits for "b"."""
    handled.clear()
    run_id = await message_then_stop(rt, worker, wf)
    info = await rt.get_run(run_id)
    assert (info.status, handled) == (RunStatus.SUSPENDED, []), info.result
    await rt.send(run_id, "v", "b")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]


acted_on: list[Any] = []


@step
async def act_then_confirm(message: Any) -> Any:
    acted_on.append(message)  # e.g. an agent acts on the message, then asks
    return await step_hook("confirm")


async def _take_and_confirm() -> Any:
    return await act_then_confirm(await receive("v"))


async def _take_and_confirm_with_a_deadline() -> Any:
    message = await receive("v")
    return await first(act_then_confirm(message), sleep(3600))


async def _timed_take_and_confirm_with_a_deadline() -> Any:
    message = await receive("v", timeout="1h")
    return await first(act_then_confirm(message), sleep(3600))


@pytest.mark.parametrize(
    "wf",
    [
        against_stop("nested_confirm_wf", _take_and_confirm),
        against_stop("nested_confirm_with_a_deadline_wf", _take_and_confirm_with_a_deadline),
        against_stop(
            "nested_timed_confirm_with_a_deadline_wf", _timed_take_and_confirm_with_a_deadline
        ),
    ],
    ids=["step", "step-with-deadline", "timed-step-with-deadline"],
)
async def test_a_message_a_step_still_waiting_in_a_nested_first_had_stays_taken(
    rt: Runtime, worker: Worker, wf: Any
) -> None:
    """The second branch hands "a" to a step that acts on it and asks (step_hook), in a
    first() with a deadline or not; stop wins while the step waits: "a" was used, and the
    run's own receive waits for "b"."""
    acted_on.clear()
    handled.clear()
    run_id = await message_then_stop(rt, worker, wf)
    assert set(acted_on) == {"a"}
    info = await rt.get_run(run_id)
    assert (info.status, handled) == (RunStatus.SUSPENDED, []), info.result
    await rt.send(run_id, "v", "b")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]


# A first() nested in a task a branch gathered, whose branch handed a message to a step in
# an earlier pass: when the enclosing first() decides, that task may still be replaying
# the nested first() (a receive with a timeout takes a few turns of the loop). (The
# enclosing first() waited only for tasks it could see, and a nested first()'s branches
# were none of them: it decided while they replayed, took the receive for unused and gave
# "a" back, to be handled twice. Found by tests/runtime/test_first_model.py, seed 63.)


async def _hooks_one_after_the_other() -> Any:
    await hook("h1")
    return await hook("h2")


async def _take_and_handle_in_time() -> Any:
    return await handle_message(await receive("v", timeout="1h"))


async def _gathered_with_a_nested_take() -> Any:
    return await asyncio.gather(
        _hooks_one_after_the_other(), first(hook("h3"), _take_and_handle_in_time())
    )


@workflow(name="nested_in_a_gathered_task_wf")
async def nested_in_a_gathered_task_wf() -> list[Any]:
    which, _ = await first(hook("stop"), _gathered_with_a_nested_take())
    return [which, await handle_message(await receive("v"))]


@pytest.mark.parametrize("full", [True, False], ids=["full-replay", "replay-cache"])
async def test_a_message_handled_in_a_first_nested_in_a_gathered_task_stays_taken(
    rt: Runtime, worker: Worker, full: bool
) -> None:
    """Message "a" comes and the gathered task's nested first() hands it to a step; then h1
    and stop are answered: stop wins, and the run's next receive takes "b", not "a" again."""
    handled.clear()
    replaying = cached_or_full(rt, worker, full)
    run_id = await rt.start(nested_in_a_gathered_task_wf)
    await replaying.drain()
    await rt.send(run_id, "v", "a")
    await replaying.drain()
    assert handled == ["a"]
    await answer(rt, "h1", 1)
    await answer(rt, "stop", 1)
    await replaying.drain()
    await rt.send(run_id, "v", "b")
    await replaying.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]
    assert handled == ["a", "b"]


# The same first() nested in a gathered task, whose branch, once it has replayed what the
# log holds of it, waits on something outside the run until the race is decided. (The
# decision waited for the task to end rather than to catch up: the whole 5 s.)
opened: dict[str, asyncio.Event] = {}  # the test's event, made in its own loop


async def _take_handle_then_wait_outside() -> Any:
    await handle_message(await receive("v", timeout="1h"))
    await hook("h4")
    await opened["gate"].wait()  # set once the race is decided


async def _gathered_with_a_nested_task_that_goes_on() -> Any:
    return await asyncio.gather(
        _hooks_one_after_the_other(), first(hook("h3"), _take_handle_then_wait_outside())
    )


@workflow(name="nested_goes_on_after_replaying_wf")
async def nested_goes_on_after_replaying_wf() -> int:
    which, _ = await first(hook("stop"), _gathered_with_a_nested_task_that_goes_on())
    opened["gate"].set()
    return which


async def test_a_nested_branch_that_goes_on_after_replaying_does_not_hold_the_decision(
    rt: Runtime, worker: Worker
) -> None:
    handled.clear()
    opened["gate"] = asyncio.Event()
    run_id = await rt.start(nested_goes_on_after_replaying_wf)
    await worker.drain()
    await rt.send(run_id, "v", "a")
    await worker.drain()
    for name in ("h1", "h4", "stop"):
        await answer(rt, name, 1)
    began = time.monotonic()
    await worker.drain()
    assert time.monotonic() - began < CATCH_UP_SECONDS / 2  # not the catch-up's limit
    assert await rt.wait(run_id, timeout=5) == 0
    assert handled == ["a"]
