"""bench.prototype asks for the writes the real engine made: its figures are of the same
work. Checked against a lifecycle recorded on a real redis-server."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator

import pytest

from bench.engine import Recording, record
from bench.prototype import Driver
from runtime.testing import RedisServer

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]


@pytest.fixture
async def recording() -> AsyncIterator[Recording]:
    server = RedisServer()
    try:
        _, _, recorded = await record(server.url)
    finally:
        server.stop()
    yield recorded


async def test_the_prototype_asks_for_the_recorded_applies(recording: Recording) -> None:
    driver = Driver(recording)
    driver.check()
    # what was checked: the real engine's three writes of a lifecycle
    kinds = [[op[0] for op in request["writes"]] for request in recording.applied]
    assert kinds == [["event", "checkpoint"], ["event", "hook"], ["event", "uncheckpoint", "event"]]
    assert recording.applied[1]["suspension"][0][1] == "step.suspended"
    assert recording.applied[2]["finish"] == {"status": "completed", "value": '"ok"'}
    driver.lifecycles(3 * 64 + 5)  # full batches and a partial one, from the same replies
    driver.check()


async def test_a_write_other_than_the_recorded_stops_the_check(recording: Recording) -> None:
    recording.applied[1]["writes"][0][2] = '{"hook_id":"another"}'
    with pytest.raises(RuntimeError, match="the prototype asked"):
        Driver(recording).check()


@pytest.mark.parametrize("change", ["one more", "one fewer"])
async def test_a_lifecycle_of_other_writes_stops_the_check(
    recording: Recording, change: str
) -> None:
    if change == "one more":
        recording.applied.append(recording.applied[-1])
    else:
        recording.applied.pop()
    with pytest.raises(RuntimeError, match="APPLYs, the recording has"):
        Driver(recording).check()
