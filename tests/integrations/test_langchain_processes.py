"""The LangChain agent under SIGKILL (acceptance 2): real ``parley worker`` processes
running examples/langchain_agent.py, real Redis. Whatever the crash, the run completes
with the same model calls, the same side-effecting tool calls and one prompt per round as
a run without a crash."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from examples import trace
from runtime import HookInfo, RunStatus, Runtime
from tests.processes import PARTITIONS, WorkerProcess
from tests.raw_redis import raw

pytestmark = [pytest.mark.e2e, pytest.mark.redis]
APP = "examples.langchain_agent"
ONE_ROUND = ("Where is order B-7?", ["refund"])
TWO_ROUNDS = ("Order C-3 never came, new address", ["reship", "1 Main St"])


@pytest.fixture
async def prt(redis_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(redis_url, partitions=PARTITIONS) as runtime:
        yield runtime


class Fleet:
    """One doomed worker (it may carry a crash point); a healthy one replaces it once it
    died — never before, so the doomed worker is the one that meets the crash point."""

    def __init__(self, redis_url: str, crash_at: str | None) -> None:
        self.redis_url = redis_url
        self.doomed = WorkerProcess(redis_url, APP, crash_at=crash_at, lease=1.0)
        self.started = [self.doomed]
        self.replaced = False

    def stop(self) -> None:
        for proc in self.started:
            proc.stop()

    def kill_and_replace(self) -> None:
        self.doomed.kill()
        self.replace()

    def replace(self) -> None:
        self.replaced = True
        self.started.append(WorkerProcess(self.redis_url, APP, lease=1.0))

    def tend(self) -> None:
        if not self.replaced and self.doomed.proc.poll() is not None:
            assert self.doomed.proc.returncode == -9, self.doomed.log()
            self.replace()


@pytest.fixture
def fleets(redis_url: str) -> Iterator[Callable[[str | None], Fleet]]:
    made: list[Fleet] = []

    def make(crash_at: str | None) -> Fleet:
        made.append(Fleet(redis_url, crash_at))
        return made[-1]

    yield make
    for fleet in made:
        fleet.stop()


async def next_hook(rt: Runtime, fleet: Fleet, run_id: str, round_no: int) -> HookInfo:
    """The pending hook of round ``round_no`` once the run is suspended on it."""
    deadline = time.monotonic() + 30
    while True:
        fleet.tend()
        pending = await rt.list_hooks(run_id=run_id)
        run = await rt.get_run(run_id)
        if run.status is RunStatus.SUSPENDED and pending:
            [hook] = pending
            assert hook.token.endswith(f".ask_visitor.{round_no}")
            return hook
        assert time.monotonic() < deadline, f"run never suspended on round {round_no}"
        await asyncio.sleep(0.02)


async def finished(rt: Runtime, fleet: Fleet, run_id: str) -> None:
    deadline = time.monotonic() + 30
    while (await rt.get_run(run_id)).status is not RunStatus.COMPLETED:
        fleet.tend()
        assert time.monotonic() < deadline, "run never completed"
        await asyncio.sleep(0.02)


@pytest.fixture(autouse=True)
def _trace(demo_trace: Path) -> Path:
    return demo_trace


async def counts(rt: Runtime, run_id: str) -> dict[str, int]:
    return trace.counts(os.environ[trace.ENV], run_id)


@pytest.mark.parametrize(
    ("script", "crash_at", "on_created_calls"),
    [
        (ONE_ROUND, None, 1),  # SIGKILL while suspended
        (ONE_ROUND, "after_hook_created", 1),  # hook durable, visitor not yet told
        (ONE_ROUND, "after_on_created", 2),  # told, not yet suspended: at-least-once
        (ONE_ROUND, "before_step_reexecute", 1),  # while resuming
        (ONE_ROUND, "after_checkpoint_save", 1),  # mid-agent: after the first model turn
        (ONE_ROUND, "after_checkpoint_save@2", 1),  # mid-agent: after the side effect
        (TWO_ROUNDS, "after_hook_created@2", 2),  # while asking the second question
        (TWO_ROUNDS, "before_step_reexecute@2", 2),  # while resuming the second round
    ],
    ids=[
        "suspended",
        "hook-created",
        "on-created",
        "resuming",
        "mid-agent-model",
        "mid-agent-tool",
        "round2-created",
        "round2-resuming",
    ],
)
async def test_agent_survives_sigkill(
    prt: Runtime,
    fleets: Callable[[str | None], Fleet],
    script: tuple[str, list[str]],
    crash_at: str | None,
    on_created_calls: int,
) -> None:
    message, answers = script
    session = Runtime.new_session_id()
    fleet = fleets(crash_at)
    run_id = await prt.start("langchain_agent", message, session=session)

    for round_no, answer in enumerate(answers):
        hook = await next_hook(prt, fleet, run_id, round_no)
        if crash_at is None and round_no == 0:
            fleet.kill_and_replace()  # nothing of the run lives in the worker while it waits
        assert await prt.resume_hook(hook.token, answer)
    await finished(prt, fleet, run_id)
    result = await prt.wait(run_id, timeout=5)
    assert fleet.replaced  # the crash point was met (or the worker was killed)

    turns = len(answers) + 2
    assert result["reply"].startswith("Done: " + " / ".join(answers))
    # Same work as a run without a crash: each model turn once, the tool once.
    expected = {f"turn:{n}": 1 for n in range(turns)}
    assert await counts(prt, run_id) == {
        **expected,
        "lookup_order": 1,
        "on_created": on_created_calls,
    }
    frames = [m for _, m in await prt.read_outbox(session, count=1000)]
    assert [m["type"] for m in frames].count("prompt") == len(answers)  # prompted once each
    types = [e.type for e in await prt.events(run_id)]
    assert types.count("hook.created") == len(answers)
    assert types.count("step.suspended") == len(answers)
    assert await raw(prt).client.exists(raw(prt).run_keys(run_id).ckpt) == 0
