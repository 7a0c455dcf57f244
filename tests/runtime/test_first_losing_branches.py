"""What a first() leaves of its losing branches: the waits they started (gathered, or a
nested first()'s), the children they started, and waits they reach after the decision (a
gathered task that goes on, a restart's replay) end with it; and what scores a branch is
unchanged by a first() nested in it. Each case was found by review."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from runtime import (
    RunStatus,
    Runtime,
    Worker,
    child,
    first,
    hook,
    receive,
    sleep,
    step,
    step_hook,
    workflow,
)
from tests.apps import children_app  # noqa: F401  (registers the workflows)
from tests.apps.messages_app import handle_message, handled
from tests.raw_redis import as_recorded_before_takes, rewrite_log


async def answer(rt: Runtime, name: str, value: Any, run_id: str | None = None) -> None:
    [pending] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == name]
    await rt.resume_hook(pending.token, value)


async def _two(first_name: str, second_name: str) -> Any:
    await hook(first_name)
    return await hook(second_name)


async def _nested() -> Any:
    return await first(hook("y"), _two("x1", "x2"))


@workflow(name="nested_first_scores_wf")
async def nested_first_scores_wf() -> int:
    which, _ = await first(hook("b"), _nested())
    return which


@workflow(name="sequential_branch_scores_wf")
async def sequential_branch_scores_wf() -> int:
    which, _ = await first(hook("b"), _two("x1", "y"))
    return which


@pytest.mark.parametrize("wf", [nested_first_scores_wf, sequential_branch_scores_wf])
async def test_a_branch_is_scored_by_the_wait_that_finished_it(
    rt: Runtime, worker: Worker, wf: Any
) -> None:
    """x1 is answered, then b, then y: the other branch finished with y, after b, so b's
    branch wins. Nested: x1 is a wait of the nested first()'s losing branch, which scored
    the outer branch when every wait of a branch was scored. Sequential (x1 then y):
    scored by its earliest wait, x1, the branch that finished later won."""
    run_id = await rt.start(wf)
    await worker.drain()
    await answer(rt, "x1", 1)
    await worker.drain()
    await answer(rt, "b", 2)
    await answer(rt, "y", 3)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 0


async def _rounds() -> None:
    while True:
        await first(hook("msg"), sleep(30))


@workflow(name="rounds_in_a_losing_branch_wf")
async def rounds_in_a_losing_branch_wf() -> int:
    which, _ = await first(sleep(0.5), _rounds())
    return which


async def test_waits_an_earlier_decision_withdrew_are_not_withdrawn_again(
    rt: Runtime, worker: Worker
) -> None:
    """A losing branch that ran rounds of first(): the outer decision closes the round in
    flight, not again every wait the rounds' own decisions closed (a list, and writes, that
    grew with the rounds)."""
    run_id = await rt.start(rounds_in_a_losing_branch_wf)
    await worker.drain()
    for _ in range(3):
        await answer(rt, "msg", "hi")
        await worker.drain()
    await asyncio.sleep(0.6)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 0
    decided = [e.data for e in await rt.events(run_id) if e.type == "first.decided"]
    closed_before = {w for d in decided[:-1] for w in d["closed"]}
    assert decided[-1]["closed"] and not closed_before & set(decided[-1]["closed"])


async def _receive_then_ask() -> Any:
    await receive("x")
    return await hook("h")


@workflow(name="received_then_lost_wf")
async def received_then_lost_wf() -> int:
    which, _ = await first(sleep(0.4), _receive_then_ask())
    return which


async def test_a_receive_that_got_its_message_is_not_closed(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(received_then_lost_wf)
    await worker.drain()
    await rt.send(run_id, "x", "m")
    await worker.drain()
    await asyncio.sleep(0.5)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 0
    [decided] = [e.data for e in await rt.events(run_id) if e.type == "first.decided"]
    assert decided["closed"] == ["1_1.h0.h"]  # the second branch's hook alone


async def _ask_and_listen() -> Any:
    return await asyncio.gather(hook("h"), receive("x"))


@workflow(name="gathered_receive_lost_wf")
async def gathered_receive_lost_wf() -> list[Any]:
    which, _ = await first(sleep(0.1), _ask_and_listen())
    return [which, await hook("next")]


async def test_a_gathered_receive_of_a_losing_branch_takes_no_message(
    rt: Runtime, worker: Worker
) -> None:
    """The receive gathered in the losing branch is withdrawn for good: the run's next
    suspension does not register it again, and a message sent later stays in the inbox."""
    run_id = await rt.start(gathered_receive_lost_wf)
    await worker.drain()
    await asyncio.sleep(0.2)
    await worker.drain()
    before = await rt.events(run_id)
    await rt.send(run_id, "x", "stray")
    await worker.drain()
    assert "message.received" not in [e.type for e in (await rt.events(run_id))[len(before) :]]
    await answer(rt, "next", "ok")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "ok"]


@step
async def slow_step() -> int:
    await asyncio.sleep(0.2)
    return 1


async def _at_once() -> str:
    return "now"


async def _step_then_ask() -> Any:
    await slow_step()
    return await hook("late")


async def _step_then_delegate() -> Any:
    await slow_step()
    return await child("waiting_kid_wf")


async def _gathered_with_a_late_hook() -> Any:
    return await asyncio.gather(hook("h"), _step_then_ask())


async def _gathered_with_a_late_child() -> Any:
    return await asyncio.gather(hook("h"), _step_then_delegate())


@workflow(name="late_hook_in_a_losing_branch_wf")
async def late_hook_in_a_losing_branch_wf() -> Any:
    return list(await first(_at_once(), _gathered_with_a_late_hook()))


@workflow(name="late_child_in_a_losing_branch_wf")
async def late_child_in_a_losing_branch_wf() -> Any:
    return list(await first(_at_once(), _gathered_with_a_late_child()))


async def test_waits_a_losing_branch_reaches_after_the_decision_are_not_started(
    rt: Runtime, worker: Worker
) -> None:
    """A losing branch's gathered task goes on after the decision (its step still ran) and
    reaches a hook or a child: neither is created, and the run completes. Before, the
    hook stayed pending, the child ran, and either failed the run as a loose wait."""
    for wf in (late_hook_in_a_losing_branch_wf, late_child_in_a_losing_branch_wf):
        run_id = await rt.start(wf)
        await worker.drain()
        info = await rt.get_run(run_id)
        assert info.status is RunStatus.COMPLETED, info.error
        assert await rt.wait(run_id, timeout=5) == [0, "now"]
        assert info.child_run_ids == [] and await rt.list_hooks(run_id=run_id) == []


@step
async def after_the_race() -> str:
    return "after"


@workflow(name="answer_beats_timer_then_step_wf")
async def answer_beats_timer_then_step_wf() -> list[Any]:
    which, _ = await first(hook("a"), sleep(0.3))
    return [which, await after_the_race(), await hook("next")]


async def _delegates_twice() -> Any:
    return await asyncio.gather(child("waiting_kid_wf"), child("waiting_kid_wf"))


@workflow(name="gathered_children_then_step_wf")
async def gathered_children_then_step_wf() -> list[Any]:
    which, _ = await first(_delegates_twice(), sleep(0.2))
    return [which, await after_the_race(), await hook("next")]


async def test_a_restart_after_a_first_starts_nothing_of_a_losing_branch(
    rt: Runtime, worker: Worker
) -> None:
    """A run restarted from a step after a first(): the copied log holds the decision but
    not the losing branch's timer, nor its gathered children (a restart copies them only
    with their end). The replay schedules no timer and starts no child, and the new run
    completes. Before, the timer was scheduled again, and the children were started again
    and failed the new run as loose waits."""
    run_id = await rt.start(answer_beats_timer_then_step_wf)
    await worker.drain()
    await answer(rt, "a", 1)
    await worker.drain()
    again = await rt.restart(run_id, from_step="after_the_race")
    await worker.drain()
    assert "timer.scheduled" not in [e.type for e in await rt.events(again)]

    parent = await rt.start(gathered_children_then_step_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.drain()
    await answer(rt, "next", "first run", parent)
    await worker.drain()
    assert await rt.wait(parent, timeout=5) == [1, "after", "first run"]
    again = await rt.restart(parent, from_step="after_the_race")
    await worker.drain()
    assert (await rt.get_run(again)).child_run_ids == []
    await answer(rt, "next", "done", again)
    await worker.drain()
    assert await rt.wait(again, timeout=5) == [1, "after", "done"]


@workflow(name="race_then_step_wf")
async def race_then_step_wf() -> list[Any]:
    which, _ = await first(child("waiting_kid_wf"), sleep(0.2))
    return [which, await after_the_race(), await hook("next")]


async def test_a_restart_after_a_first_does_not_start_its_losing_child_again(
    rt: Runtime, worker: Worker
) -> None:
    """A run restarted from a step after a first() whose child lost: the new run's log holds
    the decision but not the child (a restart copies a child only with its end), and the
    replayed losing branch does not start a child nobody would read or cancel. Found by
    review: it started one, which asked in the chat and ran until the new run ended."""
    parent = await rt.start(race_then_step_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.drain()
    [kid] = (await rt.get_run(parent)).child_run_ids
    assert (await rt.get_run(kid)).status is RunStatus.CANCELLED
    again = await rt.restart(parent, from_step="after_the_race")
    await worker.drain()
    assert (await rt.get_run(again)).child_run_ids == []
    [question] = await rt.list_hooks(run_id=again)
    assert question.name == "next"
    await rt.resume_hook(question.token, "done")
    await worker.drain()
    assert await rt.wait(again, timeout=5) == [1, "after", "done"]


step_bodies: Counter[str] = Counter()


@step
async def _ask_in_a_step() -> Any:
    step_bodies["ask"] += 1  # e.g. an agent's model call before it asks
    return await step_hook("detail")


@workflow(name="losing_step_hook_wf")
async def losing_step_hook_wf() -> int:
    which, _ = await first(_ask_in_a_step(), hook("shortcut"))
    await hook("later1")
    await hook("later2")
    return which


async def test_a_losing_branchs_step_does_not_run_its_body_again_on_each_resume(
    rt: Runtime, worker: Worker
) -> None:
    """The step asked, the other branch won: nothing reads the step's result any more, so
    the parent's later resumes do not execute it again (its body ran once to ask, and once
    in the pass that decided)."""
    step_bodies.clear()
    run_id = await rt.start(losing_step_hook_wf)
    await worker.drain()
    await answer(rt, "shortcut", "go")
    await worker.drain()
    assert step_bodies["ask"] == 2
    for name in ("later1", "later2"):
        await answer(rt, name, "ok")
        await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 1
    assert step_bodies["ask"] == 2


@step(retries=5, retry_delay=0.3, backoff=1.0)
async def _flaky() -> str:
    step_bodies["flaky"] += 1
    raise RuntimeError("the service is down")


@workflow(name="losing_retries_wf")
async def losing_retries_wf() -> int:
    which, _ = await first(_flaky(), hook("shortcut"))
    await hook("later")
    return which


async def test_a_losing_branchs_step_stops_retrying_with_the_decision(
    rt: Runtime, worker: Worker
) -> None:
    """The step failed and backs off; the other branch wins: its retry timer is cancelled
    with the decision, and it is not attempted again."""
    step_bodies.clear()
    run_id = await rt.start(losing_retries_wf)
    await worker.drain()
    assert step_bodies["flaky"] == 1  # failed, backing off
    await answer(rt, "shortcut", "go")
    await worker.drain()
    assert await worker.fire_due() is None  # the retry timer went with the decision
    await asyncio.sleep(1.0)  # past several backoffs
    await worker.drain()
    assert step_bodies["flaky"] == 1
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    assert [h.name for h in await rt.list_hooks(run_id=run_id)] == ["later"]
    await answer(rt, "later", "ok")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 1
    assert step_bodies["flaky"] == 1


runtime_of_the_test: list[Runtime] = []


@step
async def _answers_the_other_branch() -> str:
    # a person answers the other branch's hook while this step still works: after the
    # worker read the run's log, before the first() is decided and written
    rt = runtime_of_the_test[0]
    for other in await rt.list_hooks():
        if other.name == "stop":
            assert await rt.resume_hook(other.token, "stop now") is True
    return "done"


async def _go_then(work: Any) -> str:
    await hook("go")
    return str(await work())


@workflow(name="answered_while_deciding_wf")
async def answered_while_deciding_wf() -> list[Any]:
    return list(await first(_go_then(_answers_the_other_branch), hook("stop")))


async def test_an_answer_that_came_while_a_first_was_decided_is_the_one_used(
    rt: Runtime, worker: Worker
) -> None:
    """The answer was accepted before the decision was written, so it is in the log first:
    it wins (the execution that decided without it starts again from the log), not
    accepted and then never used."""
    runtime_of_the_test[:] = [rt]
    run_id = await rt.start(answered_while_deciding_wf)
    await worker.drain()
    await answer(rt, "go", 1)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, "stop now"]


@step
async def _work() -> str:
    return "done"


@workflow(name="work_after_an_answer_wf")
async def work_after_an_answer_wf() -> list[Any]:
    return list(await first(_go_then(_work), hook("stop")))


async def test_a_branch_that_works_after_its_answer_finishes_when_the_work_is_done(
    rt: Runtime, worker: Worker
) -> None:
    """go, then stop are answered before any worker replays the run: go's branch still had
    its step to run, so stop, in the log before that step was done, finished first."""
    run_id = await rt.start(work_after_an_answer_wf)
    await worker.drain()
    await answer(rt, "go", 1)
    await answer(rt, "stop", "stop now")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, "stop now"]


@step
async def _quick() -> str:
    await asyncio.sleep(0.05)
    return "quick"


@step(retries=2, retry_delay=30)
async def _fails_late() -> str:
    step_bodies["fails_late"] += 1
    await asyncio.sleep(0.3)  # still running when the first() is decided
    raise RuntimeError("the service is down")


async def _ask_beside_a_failing_step() -> Any:
    return await asyncio.gather(hook("x"), _fails_late())


@workflow(name="fails_after_the_decision_wf")
async def fails_after_the_decision_wf() -> int:
    which, _ = await first(_quick(), _ask_beside_a_failing_step())
    return which


async def test_a_step_that_fails_after_its_branch_lost_is_not_retried(
    rt: Runtime, worker: Worker
) -> None:
    """(A review found the run failed: the retry timer made after the decision was a wait
    nothing awaited.)"""
    step_bodies.clear()
    run_id = await rt.start(fails_after_the_decision_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 0
    assert step_bodies["fails_late"] == 1
    assert await worker.fire_due() is None  # no retry timer was made


async def _step_then_listen() -> Any:
    await slow_step()
    return await receive("x")


async def _gathered_with_a_late_receive() -> Any:
    return await asyncio.gather(hook("h"), _step_then_listen())


@workflow(name="late_receive_in_a_losing_branch_wf")
async def late_receive_in_a_losing_branch_wf() -> Any:
    which, _ = await first(_at_once(), _gathered_with_a_late_receive())
    await hook("next")
    return [which, await receive("x")]


async def test_a_receive_a_losing_branch_reaches_after_the_decision_takes_no_message(
    rt: Runtime, worker: Worker
) -> None:
    """A losing branch's gathered task goes on after the decision (its step still ran) and
    reaches a receive: it is withdrawn as it is reached, and the message sent later goes
    to the run's own receive. Before, the dead branch's receive took it and the run's
    receive waited for a second message."""
    run_id = await rt.start(late_receive_in_a_losing_branch_wf)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.send(run_id, "x", "m")
    await worker.drain()
    await answer(rt, "next", "ok")
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, info.error
    assert await rt.wait(run_id, timeout=5) == [0, "m"]


async def _listen_and_ask() -> Any:
    return await asyncio.gather(receive("x"), hook("h"))


@workflow(name="receive_kept_by_a_losing_branch_wf")
async def receive_kept_by_a_losing_branch_wf() -> Any:
    # the timer fires, then a message comes before any worker replays the run: the receive
    # is withdrawn, and the message waits in the log for the next receive
    await first(receive("x"), sleep(0.2))
    which, _ = await first(_at_once(), _listen_and_ask())  # its receive takes it at once
    result = await handle_message(await receive("x"))
    await hook("next")
    return [which, result]


async def _decided_then_replayed(rt: Runtime, worker: Worker, *, as_before: bool) -> Any:
    run_id = await rt.start(receive_kept_by_a_losing_branch_wf)
    await worker.drain()
    await asyncio.sleep(0.3)
    await worker.fire_due()
    await rt.send(run_id, "x", "first")
    await rt.send(run_id, "x", "second")
    await worker.drain()
    taken = [e.data["n"] for e in await rt.events(run_id) if e.type == "message.taken"]
    # the first first()'s receive and the losing branch's (each given back), the run's own
    assert taken == [0, 0, 0]
    if as_before:
        await rewrite_log(rt, run_id, as_recorded_before_takes)
    await answer(rt, "next", "ok")
    await Worker(rt).drain()  # a worker that replays the whole log
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.COMPLETED, info.error
    return await rt.wait(run_id, timeout=5)


async def test_a_message_a_losing_gather_took_before_the_decision_is_given_back(
    rt: Runtime, worker: Worker
) -> None:
    """A losing branch's gathered receive took the first message before the decision, and
    the gather never returned: nothing used the message, so the run's own receive takes
    it, and a step handles it; every replay gives each receive the same one (the log says
    which each took), or the step's arguments would differ from the log's and block the
    run. (Before the branch's calls were kept per task, the message stayed taken because
    the receive came before the hook in the gather, and was given back the other way
    round.)"""
    assert await _decided_then_replayed(rt, worker, as_before=False) == [0, "handled first"]


async def test_a_run_recorded_before_late_receives_were_withdrawn_replays_as_it_ran(
    rt: Runtime, worker: Worker
) -> None:
    """A run the code before this change recorded (no record of what each receive took):
    every receive of its losing branches takes a message, as when it ran, and the
    decision's record of the one given back gives it back."""
    assert await _decided_then_replayed(rt, worker, as_before=True) == [0, "handled first"]


async def _pause_then_handle() -> Any:
    await asyncio.sleep(0.05)  # (not durable: as long in every pass)
    return await handle_message(await receive("x"))


async def _ask_and_handle() -> Any:
    return await asyncio.gather(hook("h"), _pause_then_handle())


@workflow(name="handled_before_the_decision_wf")
async def handled_before_the_decision_wf() -> Any:
    which, _ = await first(hook("stop"), _ask_and_handle())
    await asyncio.sleep(0.2)  # (not durable: the losing branch's task is done by then)
    return [which, await handle_message(await receive("x"))]


async def test_a_message_a_losing_branch_handled_in_an_earlier_pass_is_not_handed_out_again(
    rt: Runtime, worker: Worker
) -> None:
    """A branch's task took a message and handled it, then the branch lost: in the deciding
    pass the task reaches its receive after the decision, and takes that message again
    (the log says it did), so the run's own receive waits for the next. (A review found
    the message handled twice by a version that withdrew every receive reached after the
    decision.)"""
    handled.clear()
    run_id = await rt.start(handled_before_the_decision_wf)
    await rt.send(run_id, "x", "a")
    await worker.drain()
    assert handled == ["a"]
    await answer(rt, "stop", 1)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await rt.send(run_id, "x", "b")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "handled b"]
    assert handled == ["a", "b"]
