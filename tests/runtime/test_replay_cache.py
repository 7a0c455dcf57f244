"""The replay cache stays correct whoever advanced the run: a worker whose remembered
index is stale (another worker executed rounds since) or whose run's history was
rewritten replays exactly what a worker without a cache would, and the replay checks
(nondeterminism) still see the whole history. In-process workers driven by drain(),
against the embedded store and real Redis."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from runtime import RunStatus, Runtime, Worker, hook, step, step_hook, workflow
from runtime.errors import EventLimitExceeded
from runtime.ids import make_token
from runtime.store import Applied, ApplyOutcome
from runtime.store.redis import _keys
from runtime.store.redis._executions import ExecutionStore
from tests.raw_redis import raw

executed: Counter[str] = Counter()
variant = {"second": "noted"}


@pytest.fixture(autouse=True)
def _reset() -> None:
    executed.clear()
    variant["second"] = "noted"


@step
async def ask(n: int) -> Any:
    return await step_hook("answer")


@step
async def noted(n: int, answer: str) -> str:
    executed[f"noted-{n}"] += 1
    return f"{n}:{answer}"


@workflow(name="cache_chat")
async def cache_chat(rounds: int) -> list[str]:
    out = []
    for n in range(rounds):
        out.append(await noted(n, await ask(n)))
    return out


async def _answer(rt: Runtime, run_id: str, n: int, worker: Worker) -> None:
    await rt.resume_hook(make_token(run_id, f"ask-{n}.answer.0"), f"a{n}")
    await worker.drain()


def _cache(worker: Worker) -> Any:
    return worker.tasks.replay_cache


async def test_a_stale_cache_is_extended_by_what_another_worker_did(rt: Runtime) -> None:
    a, b = Worker(rt, name="A"), Worker(rt, name="B")
    run_id = await rt.start(cache_chat, 6)
    await a.drain()  # round 0 asked
    await _answer(rt, run_id, 0, a)  # A executes round 1: it remembers the run at round 1
    assert run_id in [*_cache(a)._entries]
    for n in (1, 2, 3):  # B executes rounds 2..4 (A is not chosen)
        await _answer(rt, run_id, n, b)
    assert _cache(b).hits == 2  # B's own index, from its first execution of the run on
    await _answer(rt, run_id, 4, a)  # A again, with its index of round 1
    assert _cache(a).hits == 2 and _cache(a).misses == 0  # the tail held B's rounds
    await _answer(rt, run_id, 5, a)
    assert await rt.wait(run_id, timeout=5) == [f"{n}:a{n}" for n in range(6)]
    # every step ran once: nothing B recorded was executed again by A
    assert executed == Counter({f"noted-{n}": 1 for n in range(6)})
    started = [e.data["step_id"] for e in await rt.events(run_id) if e.type == "step.started"]
    assert len(started) == len(set(started)) == 12


async def test_a_rewritten_history_makes_the_worker_replay_the_whole_log(rt: Runtime) -> None:
    """Anything that rewrites a run's log bumps its generation: the claim returns the whole
    log and the worker rebuilds its index instead of extending the one it kept."""
    worker = Worker(rt, name="A")
    run_id = await rt.start(cache_chat, 3)
    await worker.drain()
    await _answer(rt, run_id, 0, worker)
    client = raw(rt).client
    await client.hincrby(_keys.run_keys(run_id, rt.store.partitions).run, "gen", 1)
    await _answer(rt, run_id, 1, worker)
    assert _cache(worker).misses == 1
    await _answer(rt, run_id, 2, worker)
    assert _cache(worker).misses == 1 and _cache(worker).hits == 2
    assert await rt.wait(run_id, timeout=5) == ["0:a0", "1:a1", "2:a2"]
    assert executed == Counter({"noted-0": 1, "noted-1": 1, "noted-2": 1})


async def test_a_log_that_lost_events_is_not_taken_for_a_tail(rt: Runtime) -> None:
    """The proof is the count too: a log whose events since the worker's last one do not
    add up to the run's count is read whole."""
    worker = Worker(rt, name="A")
    run_id = await rt.start(cache_chat, 2)
    await worker.drain()
    keys = _keys.run_keys(run_id, rt.store.partitions)
    await raw(rt).client.hincrby(keys.run, "nev", 1)  # an event the worker never saw
    await _answer(rt, run_id, 0, worker)
    assert _cache(worker).misses == 1
    await _answer(rt, run_id, 1, worker)
    assert await rt.wait(run_id, timeout=5) == ["0:a0", "1:a1"]


@step
async def other(n: int, answer: str) -> str:
    return answer


@workflow(name="cache_drift")
async def cache_drift(rounds: int) -> list[str]:
    out = []
    for n in range(rounds):
        answer = await ask(n)
        if n == 0 or variant["second"] == "noted":
            out.append(await noted(n, answer))
        else:
            out.append(await other(n, answer))
    return out


async def test_nondeterminism_is_detected_with_a_cached_index(rt: Runtime) -> None:
    worker = Worker(rt, name="A")
    run_id = await rt.start(cache_drift, 4)
    await worker.drain()
    await _answer(rt, run_id, 0, worker)
    await _answer(rt, run_id, 1, worker)  # noted(1) recorded at position 3
    variant["second"] = "other"  # the code now calls other() there
    await _answer(rt, run_id, 2, worker)
    assert _cache(worker).hits == 3 and _cache(worker).misses == 0
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.BLOCKED
    assert info.error is not None and "noted" in info.error["message"]
    assert run_id not in _cache(worker)._entries  # a blocked run is not remembered


def test_the_cache_is_bounded_in_runs_and_in_events() -> None:
    from runtime.engine.replay import ReplayIndex
    from runtime.engine.replay_cache import CachedReplay, ReplayCache
    from runtime.registry import get_workflow
    from runtime.store import KnownLog

    wf = get_workflow(cache_chat)
    cache = ReplayCache(size=3, max_events=100)

    def entry(count: int) -> CachedReplay:
        return CachedReplay(ReplayIndex(), KnownLog("1-0", count, "0"), wf)

    for n in range(5):
        cache.keep(f"r{n}", entry(10))
    assert len(cache) == 3 and cache.events == 30  # the 3 most recent
    assert cache.take("r0", wf) is None and cache.take("r4", wf) is not None
    assert cache.events == 20
    cache.keep("big", entry(95))  # evicts the older ones to fit the event budget
    assert len(cache) == 1 and cache.events == 95
    cache.keep("huge", entry(101))  # larger than the budget: not kept
    assert len(cache) == 1 and cache.take("huge", wf) is None
    assert cache.take("big", None) is None and cache.events == 0  # other code: dropped


def test_the_cache_is_bounded_in_the_bytes_of_its_runs_data() -> None:
    from runtime.engine.replay import ReplayIndex
    from runtime.engine.replay_cache import CachedReplay, ReplayCache
    from runtime.registry import get_workflow
    from runtime.store import KnownLog

    wf = get_workflow(cache_chat)
    cache = ReplayCache(size=100, max_events=1_000, max_bytes=10_000)

    def entry(data_bytes: int) -> CachedReplay:
        return CachedReplay(ReplayIndex(), KnownLog("1-0", 2, "0"), wf, data_bytes)

    for n in range(4):
        cache.keep(f"r{n}", entry(3_000))  # few events, large payloads
    assert len(cache) == 3 and cache.data_bytes == 9_000  # the 3 most recent
    assert cache.take("r0", wf) is None
    assert cache.take("r3", wf) is not None and cache.data_bytes == 6_000
    cache.keep("huge", entry(10_001))  # larger than the budget: not kept
    assert cache.take("huge", wf) is None and cache.data_bytes == 6_000


async def test_a_worker_remembers_a_run_by_the_bytes_of_its_log(rt: Runtime) -> None:
    """What the cache counts for a run is the data its log holds, byte for byte, however
    the worker learned it: its own writes, the tails of its claims, or a whole log another
    worker wrote."""

    async def log_bytes() -> int:
        entries: Any = await raw(rt).client.xrange(raw(rt).run_keys(run_id).events)
        return sum(len(fields[b"d"]) for _, fields in entries)

    a, b = Worker(rt, name="A"), Worker(rt, name="B")
    run_id = await rt.start(cache_chat, 4)
    await a.drain()
    for n in range(2):
        await rt.resume_hook(make_token(run_id, f"ask-{n}.answer.0"), "x" * (1_000 * (n + 1)))
        await a.drain()
    assert _cache(a)._entries[run_id].data_bytes == _cache(a).data_bytes == await log_bytes()
    await rt.resume_hook(make_token(run_id, "ask-2.answer.0"), "y" * 3_000)
    await b.drain()  # B never saw the run: its claim reads the whole log
    assert _cache(b)._entries[run_id].data_bytes == await log_bytes() > 6_000


hold: dict[str, Any] = {}


@step
async def slow_note(n: int, answer: str) -> str:
    executed[f"slow-{n}"] += 1
    if hold.get("round") == n and executed[f"slow-{n}"] == 1:
        hold["entered"].set()  # the first execution of this step stalls (a paused worker)
        await hold["release"].wait()
    return f"{n}:{answer}"


@workflow(name="cache_zombie")
async def cache_zombie(rounds: int) -> list[str]:
    out = []
    for n in range(rounds):
        out.append(await slow_note(n, await ask(n)))
    return out


async def test_a_worker_that_lost_its_lease_keeps_no_index_of_the_run(
    backend_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Worker A remembers the run at round 1, stalls past its lease in round 2's step; B
    takes the run over and executes rounds 2..4; A's late write is refused and A keeps no
    index of the run, so its next claim replays the whole log: nothing B recorded runs
    again, and the result is right."""
    hold.update(round=1, entered=asyncio.Event(), release=asyncio.Event())
    async with Runtime(backend_url, partitions=2, lease_seconds=0.2) as rt:
        a = Worker(rt, name="A")
        run_id = await rt.start(cache_zombie, 6)
        await a.drain()
        await _answer(rt, run_id, 0, a)
        assert run_id in _cache(a)._entries  # A remembers the run at round 1
        await rt.resume_hook(make_token(run_id, "ask-1.answer.0"), "a1")
        stalled = asyncio.create_task(a.drain())
        await asyncio.wait_for(hold["entered"].wait(), 5)
        b = Worker(rt, name="B", visibility_timeout=0)
        deadline = time.monotonic() + 10
        while not any(h.hook_id == "ask-2.answer.0" for h in await rt.list_hooks()):
            assert time.monotonic() < deadline, "B never took the run over"
            await b.reclaim()  # takes the task; its claim waits for A's lease to lapse
            await b.drain()
            await asyncio.sleep(0.02)
        await _answer(rt, run_id, 2, b)
        await _answer(rt, run_id, 3, b)
        hold["release"].set()
        await asyncio.wait_for(stalled, 5)
        assert "lease_lost" in caplog.text
        assert run_id not in _cache(a)._entries  # its execution's index was not kept
        await _answer(rt, run_id, 4, a)
        await _answer(rt, run_id, 5, a)
        assert await rt.wait(run_id, timeout=5) == [f"{n}:a{n}" for n in range(6)]
    # the stalled step ran twice (A's lost execution, B's); everything else once
    assert executed == Counter({"slow-1": 2, **{f"slow-{n}": 1 for n in (0, 2, 3, 4, 5)}})
    async with Runtime(backend_url, partitions=2) as rt:
        events = await rt.events(run_id)
    completed = [e.data["step_id"] for e in events if e.type == "step.completed"]
    assert len(completed) == len(set(completed)) == 12


@step
async def refused_step() -> str:
    return "stepped"


@workflow(name="limit_caught_wf")
async def limit_caught_wf() -> Any:
    value = await refused_step()
    try:
        await refused_step()  # the first one's events are flushed before it: refused
    except EventLimitExceeded:
        value = "refused"
    return [value, await hook("after")]


async def test_an_execution_with_a_refused_write_keeps_no_index(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the store refused (the event limit) leaves the index holding events the log
    lacks; user code that catches EventLimitExceeded may still suspend cleanly, and the
    worker must not keep that index for the run's next claim (it would replay events that
    never happened). Before, it kept it."""
    original = ExecutionStore.apply
    refusals = {"left": 1}

    async def refuse_the_first_step_flush(
        self: ExecutionStore, run_id: str, fence: str, after: str, writes: Any, **kwargs: Any
    ) -> Any:
        if refusals["left"] and writes.event_count >= 2 and kwargs.get("suspension") is None:
            refusals["left"] -= 1
            return Applied(ApplyOutcome.LIMIT)  # as APPLY answers at the limit: nothing written
        return await original(self, run_id, fence, after, writes, **kwargs)

    monkeypatch.setattr(ExecutionStore, "apply", refuse_the_first_step_flush)
    worker = Worker(rt, timer_tick=0.01)
    run_id = await rt.start(limit_caught_wf)
    await worker.drain()
    assert refusals["left"] == 0
    assert [h.name for h in await rt.list_hooks(run_id=run_id)] == ["after"]  # suspended
    assert run_id not in _cache(worker)._entries
