"""Concurrency inside a workflow: asyncio.gather of steps, hooks and step_hooks; first()
of hooks and sleeps, which withdraws the losers; waits Parley cannot replay are refused."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from runtime import (
    HookClosed,
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
from runtime.errors import StoreUnavailable
from runtime.store import ApplyOutcome
from runtime.store.redis._executions import ExecutionStore
from tests.raw_redis import raw
from tests.runtime.conftest import EventCountCheck


async def answer(rt: Runtime, run_id: str, name: str, payload: object) -> None:
    [pending] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == name]
    await rt.resume_hook(pending.token, payload)


@step
async def slow(n: int) -> int:
    await asyncio.sleep(0.3)
    return n


@workflow(name="parallel_steps_wf")
async def parallel_steps_wf() -> list[int]:
    return list(await asyncio.gather(slow(1), slow(2), slow(3)))


async def test_parallel_steps_run_at_the_same_time(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(parallel_steps_wf)
    began = time.monotonic()
    await worker.drain()
    took = time.monotonic() - began
    assert await rt.wait(run_id, timeout=5) == [1, 2, 3]
    print(f"three 0.3 s steps in {took:.2f} s")
    events = await rt.events(run_id)
    started = [e for e in events if e.type == "step.started"]
    completed = [e for e in events if e.type == "step.completed"]
    # all three began before any of them finished: they overlapped
    assert len(started) == len(completed) == 3
    assert max(events.index(e) for e in started) < min(events.index(e) for e in completed)


@step
async def ask(name: str) -> Any:
    return await step_hook(name)


@workflow(name="parallel_asks_wf")
async def parallel_asks_wf() -> list[Any]:
    return list(await asyncio.gather(ask("legal"), ask("finance"), hook("boss")))


@pytest.mark.parametrize("order", [("legal", "finance", "boss"), ("boss", "finance", "legal")])
async def test_parallel_waits_suspend_together_and_complete_once(
    rt: Runtime, worker: Worker, order: tuple[str, str, str]
) -> None:
    run_id = await rt.start(parallel_asks_wf)
    await worker.drain()
    events = await rt.events(run_id)
    waits = sorted(e.data["wait"] for e in events if e.type.endswith(".suspended"))
    # one suspension each; each gathered task numbers its own calls (engine/scopes.py)
    assert waits == ["0_0.ask-0.legal.0", "0_1.ask-0.finance.0", "0_2.h0.boss"]
    for i, name in enumerate(order):
        await answer(rt, run_id, name, name.upper())
        await worker.drain()
        status = (await rt.get_run(run_id)).status
        assert status is (RunStatus.COMPLETED if i == 2 else RunStatus.SUSPENDED)
    assert await rt.wait(run_id, timeout=5) == ["LEGAL", "FINANCE", "BOSS"]
    types = [e.type for e in await rt.events(run_id)]
    assert types.count("workflow.completed") == 1 and types.count("hook.created") == 3


@workflow(name="first_wf")
async def first_wf() -> list[Any]:
    which, value = await first(hook("approve"), hook("reject"), sleep("1s"))
    return [which, value]


@pytest.mark.parametrize("winner", ["approve", "reject", "timer"])
async def test_first_returns_the_wait_that_finished_and_closes_the_others(
    rt: Runtime, worker: Worker, winner: str
) -> None:
    run_id = await rt.start(first_wf)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    hooks = {h.name: h for h in await rt.list_hooks(run_id=run_id)}
    if winner == "timer":
        await asyncio.sleep(1.05)
    else:
        await rt.resume_hook(hooks[winner].token, f"{winner}!")
    await worker.drain()
    expected = {"approve": [0, "approve!"], "reject": [1, "reject!"], "timer": [2, None]}
    assert await rt.wait(run_id, timeout=5) == expected[winner]
    after = {h.name: h.status.value for h in await rt.list_hooks(None, run_id=run_id)}
    for name in ("approve", "reject"):
        assert after[name] == ("received" if name == winner else "closed")
    # a late answer to a withdrawn hook is refused, and changes nothing
    late = "reject" if winner != "reject" else "approve"
    before = await rt.events(run_id)
    with pytest.raises(HookClosed):
        await rt.resume_hook(hooks[late].token, "too late")
    assert await rt.events(run_id) == before
    assert (await rt.stats())["hooks_pending"] == 0
    decided = [e.data for e in before if e.type == "first.decided"]
    assert len(decided) == 1 and decided[0]["winner"] == expected[winner][0]


@workflow(name="first_of_two_timers_wf")
async def first_of_two_timers_wf() -> list[Any]:
    return list(await first(sleep("80ms"), sleep("50ms")))


async def test_when_two_finished_the_first_recorded_wins_on_every_replay(
    rt: Runtime, worker: Worker
) -> None:
    # A hook and another wait cannot both finish (the first to finish withdraws the other
    # hooks: the tests below); two timers can, and the one recorded first wins.
    run_id = await rt.start(first_of_two_timers_wf)
    await worker.drain()
    await asyncio.sleep(0.15)
    await raw(rt).fire_due(limit=10)  # both fire in one pass, the one due first first
    fired = [e.data["timer_id"] for e in await rt.events(run_id) if e.type == "timer.fired"]
    assert fired == ["1_1.t0", "1_0.t0"]  # the second branch's timer, then the first's
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, None]


# The runtime of the test running, for the steps and on_created callbacks that fire
# deadlines from inside a run.
current_runtime: list[Runtime] = []


@step
async def before_the_timer() -> int:
    return 1  # recorded: the next step's start flushes the timer to the store


@step
async def timer_fires_meanwhile() -> int:
    await asyncio.sleep(0.1)  # the 20 ms timer of the other branch is due
    await raw(current_runtime[0]).fire_due(limit=10)  # and fires, the run still running
    return 2


@step
async def after_the_timer() -> int:
    return 3  # its start flushes, and timer.fired comes back with that write


async def _steps_meanwhile() -> int:
    await asyncio.sleep(0.05)  # the other branch suspends first, in every pass
    await before_the_timer()
    await timer_fires_meanwhile()
    return await after_the_timer()


@workflow(name="first_ends_in_a_later_flush_wf")
async def first_ends_in_a_later_flush_wf() -> Any:
    return await asyncio.gather(first(hook("a"), sleep("20ms")), _steps_meanwhile())


@workflow(name="sleep_ends_in_a_later_flush_wf")
async def sleep_ends_in_a_later_flush_wf() -> Any:
    return await asyncio.gather(sleep("20ms"), _steps_meanwhile())


@pytest.mark.parametrize(
    ("wf", "expected"),
    [(first_ends_in_a_later_flush_wf, [[1, None], 3]), (sleep_ends_in_a_later_flush_wf, [None, 3])],
)
async def test_a_wait_that_ended_in_a_later_write_of_the_pass_does_not_suspend_the_run(
    rt: Runtime, worker: Worker, wf: Any, expected: Any
) -> None:
    """A branch's wait suspends, and its timer fires while a parallel branch still runs
    steps: timer.fired comes back with the flush before the next step, not with the
    suspension. The run goes on at once. Found by review: the suspension was recorded on
    the ended wait, and the run stayed suspended for good (with first(), its hook withdrawn
    too, so not even an answer could wake it)."""
    current_runtime[:] = [rt]
    run_id = await rt.start(wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == expected


sent_to: list[str] = []  # the run the step below sends to


@step
async def before_the_message() -> int:
    return 1  # recorded: the next step's start flushes


@step
async def message_sent_meanwhile() -> int:
    # The receive's first suspension left the topic delivered straight to the log.
    await current_runtime[0].send(sent_to[0], "t", "hi")
    return 2


@step
async def after_the_message() -> int:
    return 3  # its start flushes, and message.received comes back with that write


async def _go_then_steps() -> int:
    await hook("go")
    await before_the_message()
    await message_sent_meanwhile()
    return await after_the_message()


@workflow(name="receive_ends_in_a_later_flush_wf")
async def receive_ends_in_a_later_flush_wf() -> Any:
    return await asyncio.gather(receive("t"), _go_then_steps())


async def test_a_message_that_came_in_a_later_write_of_the_pass_does_not_suspend_the_run(
    rt: Runtime, worker: Worker
) -> None:
    """The same with a receive: its first suspension set the topic to go straight to the
    log; woken by another wait, the run suspends the receive again while the other branch
    runs steps, one of which sends the message: it comes back with the next step's flush,
    and the run goes on at once, instead of waiting for good with the message in its log."""
    current_runtime[:] = [rt]
    run_id = await rt.start(receive_ends_in_a_later_flush_wf)
    sent_to[:] = [run_id]
    await worker.drain()
    await answer(rt, run_id, "go", "ok")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == ["hi", 3]


@workflow(name="raced_wf")
async def raced_wf() -> Any:
    done, _ = await asyncio.wait(
        {asyncio.ensure_future(hook("a")), asyncio.ensure_future(hook("b"))},
        return_when=asyncio.FIRST_COMPLETED,
    )
    return [t.exception() is not None for t in done]


async def test_a_wait_parley_cannot_replay_is_refused_not_misread(
    rt: Runtime, worker: Worker
) -> None:
    run_id = await rt.start(raced_wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    # never "completed" with internal objects, never stuck: a clear UsageError
    assert info.status is RunStatus.FAILED and info.error is not None
    assert info.error["type"] == "UsageError" and "runtime.first" in info.error["message"]


@workflow(name="wait_for_around_a_hook_wf")
async def wait_for_around_a_hook_wf(clock: str) -> Any:
    try:
        if clock == "wait_for":
            return await asyncio.wait_for(hook("approve"), 0.05)
        async with asyncio.timeout(0.05):
            return await hook("approve")
    except TimeoutError:
        return "timed out"


@pytest.mark.parametrize("clock", ["wait_for", "timeout"])
async def test_an_asyncio_timeout_around_a_wait_is_not_durable(
    rt: Runtime, worker: Worker, clock: str
) -> None:
    """What the README says of it: the timeout counts only while the execution runs; the
    run suspends at once and the wait waits for its answer, however long (give the wait
    its own ``timeout=``, which is durable)."""
    run_id = await rt.start(wait_for_around_a_hook_wf, clock)
    await worker.drain()
    await asyncio.sleep(0.2)
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.SUSPENDED
    await answer(rt, run_id, "approve", "yes")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "yes"


@workflow(name="first_misuse_wf")
async def first_misuse_wf() -> Any:
    return await first(hook("only"))


async def test_first_needs_waits(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(first_misuse_wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED and info.error is not None
    assert "two or more calls" in info.error["message"]


# Both hooks are created and their on_created called in one turn of the loop: two flushes of
# one execution in flight at once. The first hook's on_created answers it at once.
FIRST_ASKED: dict[str, Any] = {}


async def _answer_at_once(token: str) -> None:
    rt: Runtime = FIRST_ASKED["rt"]
    await rt.resume_hook(token, "yes")


async def _ask_later(token: str) -> None:
    FIRST_ASKED["later"] = token


@workflow(name="first_of_two_asked_wf")
async def first_of_two_asked_wf() -> tuple[int, Any]:
    return await first(
        hook("approve", on_created=_answer_at_once), hook("reject", on_created=_ask_later)
    )


async def test_an_answer_given_while_two_hooks_are_being_asked_wakes_the_run(
    rt: Runtime, worker: Worker, exact_event_counts: EventCountCheck
) -> None:
    """Race closed: two writes of one execution sent at once (each hook recorded before its
    on_created), the second reading back the first's own event as if another had written
    it; the execution then over-counted its log, took the answer's arrival for nothing new,
    and suspended on a hook already answered: stranded."""
    FIRST_ASKED["rt"] = rt
    run_id = await rt.start(first_of_two_asked_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "yes"]
    types = [e.type for e in await rt.events(run_id)]
    assert types.count("hook.created") == 2 and types.count("hook.received") == 1
    # every APPLY of the execution sent a count, checked (tests/runtime/conftest.py)
    assert exact_event_counts.checked >= 3


recorded_runs: list[str] = []


@step
async def recorded_step() -> int:
    recorded_runs.append("recorded_step")
    return 41


async def _at_once() -> str:
    return "at once"


async def _asked(token: str) -> None:
    return None


@workflow(name="first_outage_wf")
async def first_outage_wf() -> Any:
    value = await recorded_step()
    which, _ = await first(_at_once(), hook("approve", on_created=_asked))
    return [value, which, await hook("next")]


async def test_an_outage_in_a_losing_branch_of_first_ends_the_execution(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write of a branch of first() that loses (a hook handed out by on_created, made
    durable first) fails in an outage: the execution ends and its task is retried, as
    outside first(). Before, the branch's Abort was dropped as a finished branch: the run
    suspended on the next hook with a log that lacked the step's result, which the worker's
    cached index held (a worker without it ran the step again, after first.decided)."""
    recorded_runs.clear()
    original = ExecutionStore.apply
    outage = {"writes_to_fail": 1}

    async def hook_write_fails_once(
        self: ExecutionStore, run_id: str, fence: str, after: str, writes: Any, **kwargs: Any
    ) -> Any:
        if outage["writes_to_fail"] and any(op[0] == "hook" for op in writes.ops):
            outage["writes_to_fail"] -= 1
            raise StoreUnavailable("an outage, injected")
        return await original(self, run_id, fence, after, writes, **kwargs)

    monkeypatch.setattr(ExecutionStore, "apply", hook_write_fails_once)
    worker = Worker(rt, timer_tick=0.01, visibility_timeout=0)
    run_id = await rt.start(first_outage_wf)
    await worker.drain()
    assert outage["writes_to_fail"] == 0
    assert [h.name for h in await rt.list_hooks(None, run_id=run_id)] == []  # aborted
    assert (await rt.get_run(run_id)).status is not RunStatus.SUSPENDED
    await worker.reclaim()  # the task left pending is taken again
    await worker.drain()
    assert [h.name for h in await rt.list_hooks(run_id=run_id)] == ["next"]
    types = [e.type for e in await rt.events(run_id)]
    assert types.count("step.completed") == 1
    assert types.index("step.completed") < types.index("first.decided")
    await answer(rt, run_id, "next", "yes")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [41, 0, "yes"]
    assert recorded_runs == ["recorded_step"] * 2  # its first result was never durable


async def test_a_second_answer_to_a_first_is_refused_before_any_worker_decides(
    rt: Runtime, worker: Worker
) -> None:
    """Two hooks of one first(): the first answered withdraws the other in the same step,
    so a second answer before any worker ran is refused (HookClosed) and changes nothing.
    Before, both were accepted, the run used the first, and the second stayed "received",
    acknowledged and never used."""
    run_id = await rt.start(first_wf)
    await worker.drain()
    hooks = {h.name: h for h in await rt.list_hooks(run_id=run_id)}
    assert await rt.resume_hook(hooks["reject"].token, "no")
    before = await rt.events(run_id)
    with pytest.raises(HookClosed):
        await rt.resume_hook(hooks["approve"].token, "yes")
    assert await rt.events(run_id) == before
    assert [h.name for h in await rt.list_hooks(run_id=run_id)] == []
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, "no"]
    after = {h.name: h.status.value for h in await rt.list_hooks(None, run_id=run_id)}
    assert after == {"approve": "closed", "reject": "received"}


@workflow(name="first_of_expiring_wf")
async def first_of_expiring_wf() -> list[Any]:
    which, value = await first(hook("soon", timeout="50ms", on_timeout="return"), hook("later"))
    return [which, repr(value)]


async def test_an_expiry_in_a_first_withdraws_the_other_hooks(rt: Runtime, worker: Worker) -> None:
    """The same when the first to finish is a hook's expiry: the other hook no longer
    takes an answer, whether or not a worker has run since."""
    run_id = await rt.start(first_of_expiring_wf)
    await worker.drain()
    [later] = [h for h in await rt.list_hooks(run_id=run_id) if h.name == "later"]
    await asyncio.sleep(0.1)
    await raw(rt).fire_due(limit=10)  # the expiry, before any worker runs
    with pytest.raises(HookClosed):
        await rt.resume_hook(later.token, "too late")
    await worker.drain()
    assert (await rt.wait(run_id, timeout=5))[0] == 0


@workflow(name="first_of_hook_or_timer_wf")
async def first_of_hook_or_timer_wf() -> list[Any]:
    # (longer than a drain takes on a loaded machine: the timer is fired by the test)
    which, value = await first(hook("approve"), sleep("300ms"))
    return [which, value]


async def test_a_fired_timer_in_a_first_withdraws_its_hooks(rt: Runtime, worker: Worker) -> None:
    """first(hook, sleep) whose timer fired before any worker ran: an answer then is
    refused (HookClosed) and changes nothing, and the run takes the timer. Before, the
    answer was accepted (the person was told it counted) and the run, deciding by the
    log's order, took the timer and never used it."""
    run_id = await rt.start(first_of_hook_or_timer_wf)
    await worker.drain()
    [approve] = await rt.list_hooks(run_id=run_id)
    await asyncio.sleep(0.35)
    await raw(rt).fire_due(limit=10)  # the timer fires; no worker runs yet
    before = await rt.events(run_id)
    with pytest.raises(HookClosed):
        await rt.resume_hook(approve.token, "yes")
    assert await rt.events(run_id) == before
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, None]
    after = {h.name: h.status.value for h in await rt.list_hooks(None, run_id=run_id)}
    assert after == {"approve": "closed"}


handed_out: list[str] = []


async def _hand_out_slowly(token: str) -> None:
    handed_out.append(token)
    await asyncio.sleep(0.1)  # meanwhile the first()'s timer is due
    await raw(current_runtime[0]).fire_due(limit=10)  # and fires, the run still running


@workflow(name="first_timer_fires_in_on_created_wf")
async def first_timer_fires_in_on_created_wf() -> list[Any]:
    which, value = await first(sleep("20ms"), hook("a", on_created=_hand_out_slowly))
    return [which, value]


async def test_a_timer_that_fired_before_its_first_was_written_withdraws_its_hooks(
    rt: Runtime, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timer of a first() fires while the run still runs (during a hook's on_created),
    before the suspension writes the first()'s group: the suspension is refused, and an
    answer before the worker's decision is refused too (HookClosed). Found by review:
    FIRE_DUE found no group to settle then, and the answer was accepted, never used."""
    current_runtime[:] = [rt]
    handed_out.clear()
    answers: list[Any] = []
    original = ExecutionStore.apply

    async def answer_after_a_refused_suspension(self: ExecutionStore, *a: Any, **k: Any) -> Any:
        applied = await original(self, *a, **k)
        if applied.outcome is ApplyOutcome.REFUSED and not answers:
            try:  # the group is written now: the refused suspension's writes stand
                answers.append(await rt.resume_hook(handed_out[0], "yes"))
            except HookClosed as exc:
                answers.append(exc)
        return applied

    monkeypatch.setattr(ExecutionStore, "apply", answer_after_a_refused_suspension)
    run_id = await rt.start(first_timer_fires_in_on_created_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, None]
    assert len(answers) == 1 and isinstance(answers[0], HookClosed)
    after = {h.name: h.status.value for h in await rt.list_hooks(None, run_id=run_id)}
    assert after == {"a": "closed"}


# The tokens of a first()'s hooks as on_created hands them out, and what answering them
# there brought: both branches are asked in one turn of the loop, before the run suspends.
ASKED_TOGETHER: dict[str, Any] = {}


async def _hand_out_a(token: str) -> None:
    ASKED_TOGETHER["a"] = token


async def _answer_both(token: str) -> None:
    rt: Runtime = ASKED_TOGETHER["rt"]
    while "a" not in ASKED_TOGETHER:  # the other branch's on_created, in the same pass
        await asyncio.sleep(0.005)
    outcomes = ASKED_TOGETHER["outcomes"]
    for answered in (ASKED_TOGETHER["a"], token):
        try:
            outcomes.append(await rt.resume_hook(answered, "yes"))
        except HookClosed as exc:
            outcomes.append(exc)
        if not ASKED_TOGETHER.get("listed"):  # what the API shows right after the first
            run_id = token.split(":")[0]
            hooks = await rt.list_hooks(None, run_id=run_id)
            ASKED_TOGETHER["listed"] = {h.name: h.status.value for h in hooks}


@workflow(name="first_both_answered_while_asked_wf")
async def first_both_answered_while_asked_wf() -> tuple[int, Any]:
    return await first(hook("a", on_created=_hand_out_a), hook("b", on_created=_answer_both))


@workflow(name="first_timer_then_answer_while_asked_wf")
async def first_timer_then_answer_while_asked_wf() -> tuple[int, Any]:
    return await first(sleep("20ms"), hook("b", on_created=_fire_then_answer))


async def _fire_then_answer(token: str) -> None:
    rt: Runtime = ASKED_TOGETHER["rt"]
    await asyncio.sleep(0.1)  # the timer of the other branch is due
    await raw(rt).fire_due(limit=10)  # and fires while the run still runs
    try:
        ASKED_TOGETHER["outcomes"].append(await rt.resume_hook(token, "yes"))
    except HookClosed as exc:
        ASKED_TOGETHER["outcomes"].append(exc)


async def test_two_answers_while_a_first_is_being_asked_take_only_the_first(
    rt: Runtime, worker: Worker
) -> None:
    """Both hooks of a first() are handed out by their on_created and both answered there,
    before the run suspends (the suspension writes the first()'s group): the first answer
    closes the other hook at once, the second answer is refused (HookClosed) and changes
    nothing, and the run takes the first. Before, both were accepted, the run used the
    first, and the second stayed "received", acknowledged and never used."""
    ASKED_TOGETHER.clear()
    ASKED_TOGETHER.update(rt=rt, outcomes=[])
    run_id = await rt.start(first_both_answered_while_asked_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, "yes"]
    first_answer, second_answer = ASKED_TOGETHER["outcomes"]
    assert first_answer is True and isinstance(second_answer, HookClosed)
    assert ASKED_TOGETHER["listed"] == {"a": "received", "b": "closed"}
    types = [e.type for e in await rt.events(run_id)]
    assert types.count("hook.received") == 1
    after = {h.name: h.status.value for h in await rt.list_hooks(None, run_id=run_id)}
    assert after == {"a": "received", "b": "closed"}


async def test_an_answer_after_a_first_timer_fired_while_asking_is_refused(
    rt: Runtime, worker: Worker
) -> None:
    """The same when the first to finish is the first()'s timer, fired during the hook's
    on_created: an answer given there too is refused at once, not only once the suspension
    has written the group."""
    ASKED_TOGETHER.clear()
    ASKED_TOGETHER.update(rt=rt, outcomes=[])
    run_id = await rt.start(first_timer_then_answer_while_asked_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [0, None]
    [outcome] = ASKED_TOGETHER["outcomes"]
    assert isinstance(outcome, HookClosed)
    assert "hook.received" not in [e.type for e in await rt.events(run_id)]
    after = {h.name: h.status.value for h in await rt.list_hooks(None, run_id=run_id)}
    assert after == {"b": "closed"}


async def _answer_then_let_the_other_expire(token: str) -> None:
    rt: Runtime = ASKED_TOGETHER["rt"]
    ASKED_TOGETHER["outcomes"].append(await rt.resume_hook(token, "yes"))
    await asyncio.sleep(0.1)  # the other hook's deadline passes
    await raw(rt).fire_due(limit=10)


@workflow(name="first_other_expires_while_asked_wf")
async def first_other_expires_while_asked_wf() -> tuple[int, Any]:
    # "b" is recorded with "a"'s creation, which its on_created needs durable first
    return await first(
        hook("b", timeout="20ms", on_timeout="return"),
        hook("a", on_created=_answer_then_let_the_other_expire),
    )


async def test_a_hook_whose_first_was_won_while_asking_is_withdrawn_not_expired(
    rt: Runtime, worker: Worker
) -> None:
    """A first()'s hook is answered in its on_created, and the other hook's deadline passes
    before the run suspends: the other is withdrawn (closed), not expired; no
    hook.expired is recorded for a wait that had lost already."""
    ASKED_TOGETHER.clear()
    ASKED_TOGETHER.update(rt=rt, outcomes=[])
    run_id = await rt.start(first_other_expires_while_asked_wf)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == [1, "yes"]
    assert ASKED_TOGETHER["outcomes"] == [True]
    assert "hook.expired" not in [e.type for e in await rt.events(run_id)]
    after = {h.name: h.status.value for h in await rt.list_hooks(None, run_id=run_id)}
    assert after == {"a": "received", "b": "closed"}
