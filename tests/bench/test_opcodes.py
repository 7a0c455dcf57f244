"""bench.opcodes: the bytecodes a piece of work executes, by the function that ran them;
exact, so two counts of the same work agree to the opcode."""

from __future__ import annotations

import asyncio
import gc
import shutil
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from types import FrameType

import pytest

from bench.engine import recorded_floor
from bench.opcodes import Site, by_file, count_opcodes, summary


async def _loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


async def _loop_after_a_suspension(n: int) -> int:
    await asyncio.sleep(0)  # this frame is resumed by the event loop, not called again
    total = 0
    for i in range(n):
        total += i
    return total


Work = Callable[[int], Awaitable[int]]


def _count(work: Work, n: int) -> int:
    counted = asyncio.run(count_opcodes(lambda: work(n)))
    return sum(count for site, count in counted.items() if site.name == work.__name__)


@pytest.mark.parametrize("work", [_loop, _loop_after_a_suspension])
def test_each_iteration_adds_the_same_opcodes(work: Work) -> None:
    ten, twenty, thirty = (_count(work, n) for n in (10, 20, 30))
    assert ten > 0
    assert twenty - ten == thirty - twenty > 0


def test_the_sites_name_the_function_and_the_tracer_before_is_restored() -> None:
    def before(frame: FrameType, event: str, arg: object) -> None:
        return None

    async def measured() -> Counter[Site]:
        sys.settrace(before)
        try:
            counted = await count_opcodes(lambda: _loop(5))
            assert sys.gettrace() is before
            return counted
        finally:
            sys.settrace(None)

    collecting = gc.isenabled()
    counted = asyncio.run(measured())
    assert gc.isenabled() == collecting
    sites = [site for site in counted if site.name == "_loop"]
    assert sites == [Site("tests/bench/test_opcodes.py", _loop.__code__.co_firstlineno, "_loop")]
    assert by_file(counted)["tests/bench/test_opcodes.py"] >= counted[sites[0]]
    brief = summary(counted, per=1, top=3)
    assert brief["opcodes"] == sum(counted.values())
    assert brief["runtime_opcodes"] == 0  # nothing of runtime/ ran
    assert len(brief["functions"]) <= 3


@pytest.mark.redis
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
async def test_the_engine_floor_runs_the_same_opcodes_in_every_lifecycle() -> None:
    """What makes the count a figure to compare trees by: the engine's lifecycle, replayed
    from its recording, executes the same bytecodes each time."""
    floor = await recorded_floor()
    await floor.lifecycles(20)  # caches and first-call paths warmed
    totals = []
    for n in (5, 10, 15):
        counted = await count_opcodes(lambda: floor.lifecycles(n))  # noqa: B023 (awaited at once)
        totals.append(sum(counted.values()))
        assert by_file(counted)["runtime/engine/execution.py"] > 0
    assert totals[1] - totals[0] == totals[2] - totals[1] > 0
