"""Worker processes run on uvloop when it is installed (a dependency on this platform) and
on asyncio's loop with PARLEY_EVENT_LOOP=asyncio; both execute runs. The CPU it saves is
measured in bench/ (bench/README.md), not asserted here."""

from __future__ import annotations

import pytest

from runtime import Runtime
from runtime.settings import Settings
from tests.processes import WorkerProcess

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("choice", "expected"), [("auto", "uvloop"), ("asyncio", "asyncio")])
async def test_a_worker_runs_on_the_chosen_loop(
    prt: Runtime, redis_url: str, workers: list[WorkerProcess], choice: str, expected: str
) -> None:
    worker = WorkerProcess(
        redis_url, "tests.apps.restart_app", extra_env={"PARLEY_EVENT_LOOP": choice}
    )
    workers.append(worker)
    assert f"{expected} loop" in worker.log()
    run_id = await prt.start("restart_echo", "hi")
    assert await prt.wait(run_id, timeout=15) == "hi"


def test_an_unknown_loop_is_refused() -> None:
    with pytest.raises(ValueError, match="PARLEY_EVENT_LOOP must be one of auto, asyncio"):
        Settings.from_env({"PARLEY_EVENT_LOOP": "trio"})
