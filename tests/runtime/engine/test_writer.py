"""engine/writer.py: an execution's writes reach the store in order, and none is sent once
one of them ended the execution. The store here is a scripted stand-in for the Redis one
(what APPLY answers, and when), so each race plays out the same way every time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime.engine.execution import Execution
from runtime.engine.signals import Abort
from runtime.models import EventType
from runtime.registry import get_workflow
from runtime.settings import Limits
from runtime.store import Applied, ApplyOutcome, Claim, ClaimStatus
from tests.apps.first_programs_app import first_program  # noqa: F401  (registers it)


class ScriptedStore:
    """Answers each APPLY with the next outcome; the first one waits for ``gate``."""

    def __init__(self, *outcomes: ApplyOutcome) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0
        self.gate = asyncio.Event()

    async def apply(self, *args: Any, **kwargs: Any) -> Applied:
        self.calls += 1
        if self.calls == 1:
            await self.gate.wait()
        return Applied(self.outcomes.pop(0))


def _execution(store: ScriptedStore) -> Execution:
    claim = Claim(ClaimStatus.OK, fence="1")
    workflow = get_workflow("first_program")
    return Execution(store, "r-writer", workflow, claim, limits=Limits(), retention_seconds=1)  # type: ignore[arg-type]


def _record(execution: Execution) -> None:
    execution.writes.event(EventType.MESSAGE_TAKEN, b"{}")


async def _two_flushes(execution: Execution) -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
    """A flush whose write is in flight (held by the store's gate), then a second one."""
    first = asyncio.ensure_future(execution.flush())
    await asyncio.sleep(0)
    second = asyncio.ensure_future(execution.flush())
    await asyncio.sleep(0)
    return first, second


async def test_a_flush_waits_for_the_write_in_flight_that_took_its_writes() -> None:
    """A step's flush while another task's write is in flight with everything recorded:
    it returns once that write is confirmed, and a decision recorded meanwhile still asks
    for a flush of its own. (It returned at once, and the first write's return cleared the
    flag: the step ran before the write that could be refused with its result.)"""
    store = ScriptedStore(ApplyOutcome.OK)
    execution = _execution(store)
    _record(execution)
    first, second = await _two_flushes(execution)
    execution.flush_before_step = True  # a first() decided meanwhile
    await asyncio.sleep(0.01)
    assert not second.done()
    store.gate.set()
    await asyncio.gather(first, second)
    assert execution.flush_before_step
    assert store.calls == 1


async def test_no_task_of_an_execution_writes_after_one_of_its_writes_aborted() -> None:
    """A write refused as stale ends the execution: a later write by any of its tasks
    raises too, and nothing reaches the store. (Only the task whose write met the refusal
    unwound; the workflow's task suspended with the refused decision in its index.)"""
    store = ScriptedStore(ApplyOutcome.STALE, ApplyOutcome.OK)
    store.gate.set()
    execution = _execution(store)
    _record(execution)
    with pytest.raises(Abort):
        await execution.flush()
    _record(execution)
    with pytest.raises(Abort):
        await execution.flush()
    assert store.calls == 1


async def test_a_flush_waiting_for_a_write_that_aborted_raises_too() -> None:
    """The step whose flush waited for the refused write does not run its body."""
    store = ScriptedStore(ApplyOutcome.STALE)
    execution = _execution(store)
    _record(execution)
    first, second = await _two_flushes(execution)
    store.gate.set()
    for flushing in (first, second):
        with pytest.raises(Abort):
            await flushing
    assert store.calls == 1
