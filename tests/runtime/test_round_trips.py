"""Redis commands per HITL lifecycle, seen by the server itself: a private redis-server's
MONITOR feed lists every command it executes — alone or inside a pipeline — in order, so
a regression that adds a command anywhere (even one pipelined with another) fails here.
The worker is driven through its public ``drain()``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from runtime import (
    Runtime,
    Worker,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from runtime.store.redis import SCRIPT_NAMES
from runtime.testing import RedisServer
from tests.monitor import MARK, MonitorFeed
from tests.raw_redis import raw

# counts_commands: the suite's event count check (tests/runtime/conftest.py) adds commands
pytestmark = [pytest.mark.redis, pytest.mark.counts_commands]

PARTITIONS = 4
_SCRIPTS = SCRIPT_NAMES


class CommandLog(MonitorFeed):
    """Every command a private redis-server executes, split into sections by
    :meth:`mark`. Script calls are named after their script (``claim``, ``apply``...),
    other commands by their upper-case name; commands that scripts run inside Redis are
    left out (they cost no round trip)."""

    def sections(self, rt: Runtime) -> dict[str, list[str]]:
        """Ends the log; the commands between each marker and the next, by marker."""
        self.end()
        names = {getattr(raw(rt).scripts, name).sha: name for name in _SCRIPTS}
        sections: dict[str, list[str]] = {}
        current: list[str] = []
        for entry in self.entries:
            if entry["client_type"] == "lua":
                continue
            name, *args = entry["command"].split(" ")
            name = name.upper()
            if name == "ECHO" and args[0].startswith(MARK):
                current = sections.setdefault(args[0][len(MARK) :], [])
                continue
            current.append(names.get(args[0], args[0]) if name == "EVALSHA" else name)
        return sections


@pytest.fixture
def server() -> Iterator[RedisServer]:
    started = RedisServer("--appendonly", "no")
    yield started
    started.stop()


@pytest.fixture
def commands(server: RedisServer) -> Iterator[CommandLog]:
    log = CommandLog(server)
    yield log
    log.close()


async def _hand_out(token: str) -> None:
    handed_out.append(token)


handed_out: list[str] = []


@step
async def bench_step(with_on_created: bool) -> Any:
    if await load_step_checkpoint() is None:
        await save_step_checkpoint({"state": "x" * 100}, defer=True)
    return await step_hook("answer", on_created=_hand_out if with_on_created else None)


@workflow(name="lifecycle")
async def lifecycle(with_on_created: bool) -> Any:
    return await bench_step(with_on_created)


# What a drain costs besides the runs it executes: it announces the workflows it runs
# (SADD) and sends back the runs parked for its version (one script for all partitions),
# then each pass fires due deadlines (one script for all partitions) and reads the task
# streams; it returns after a pass whose read found nothing.
DRAIN_READS_TASK = ["SADD", "unpark", "fire_due", "XREADGROUP"]
DRAIN_FINDS_NOTHING = ["fire_due", "XREADGROUP"]


def _lifecycle_only(section: list[str]) -> list[str]:
    """A drained section without the drain's own cost (above)."""
    assert section[-len(DRAIN_FINDS_NOTHING) :] == DRAIN_FINDS_NOTHING, section
    rest = section[: -len(DRAIN_FINDS_NOTHING)]
    return [c for c in rest if c not in ("SADD", "unpark", "fire_due")]


async def _one_lifecycle(rt: Runtime, log: CommandLog, on_created: bool, n: int) -> Any:
    worker = Worker(rt)
    log.mark(f"start-{n}")
    run_id = await rt.start(lifecycle, on_created)
    await worker.drain()  # claim+load, [persist hook, on_created,] suspend+ack
    log.mark(f"test-reads-{n}")
    [pending] = await rt.list_hooks(run_id=run_id)
    log.mark(f"answer-{n}")
    await rt.resume_hook(pending.token, "yes")
    await worker.drain()  # claim+load, finish+ack
    log.mark(f"wait-{n}")
    result = await rt.wait(run_id, timeout=5)
    log.mark(f"compaction-{n}")
    assert await raw(rt).flush_compactions() == 1
    log.mark(f"end-{n}")
    return result


@pytest.mark.parametrize("on_created", [False, True])
async def test_hitl_lifecycle_round_trips(
    server: RedisServer, commands: CommandLog, on_created: bool
) -> None:
    async with Runtime(server.url, partitions=PARTITIONS) as rt:
        # The first lifecycle loads the scripts (NOSCRIPT, SCRIPT LOAD) and opens the
        # connection: the second one is what every later run costs.
        assert await _one_lifecycle(rt, commands, on_created, 0) == "yes"
        assert await _one_lifecycle(rt, commands, on_created, 1) == "yes"
        sections = commands.sections(rt)

    to_suspension = sections["start-1"]
    after_answer = sections["answer-1"]
    print("until suspended:", to_suspension, "\nafter the answer:", after_answer)
    persist_hook = ["apply"] if on_created else []  # the token is handed out: durable first
    # Every command, in order: nothing else reaches Redis, pipelined or not.
    assert to_suspension == [
        "start",
        *DRAIN_READS_TASK,
        "claim",
        *persist_hook,
        "apply",  # suspend + XACK (with the hook, the deferred checkpoint and the event)
        *DRAIN_FINDS_NOTHING,
    ]
    assert after_answer == ["resume", *DRAIN_READS_TASK, "claim", "apply", *DRAIN_FINDS_NOTHING]
    # The ended run's compaction comes seconds later (runtime/store/redis/_compaction.py):
    # the logs of a partition's runs that ended meanwhile read with one XREAD, their hooks
    # with one script, and their segment swapped in with one more (the first two are sent
    # at once, in either order). A lone run pays all three; runs that end together share
    # them (test_runs_ending_together_cost_at_most_8_commands_each_with_compaction).
    assert sorted(sections["compaction-1"]) == ["XREAD", "compact", "read_hooks"]

    # start, claim+load, [persist hook,] suspend+ack, answer, claim+load, finish+ack: one
    # script each; the XREADGROUPs are batched across runs by a real worker.
    lifecycle_commands = _lifecycle_only(to_suspension) + _lifecycle_only(after_answer)
    scripts = [c for c in lifecycle_commands if c != "XREADGROUP"]
    assert len(scripts) == (7 if on_created else 6), lifecycle_commands
    assert _lifecycle_only(after_answer) == ["resume", "XREADGROUP", "claim", "apply"]  # 4


async def test_runs_ending_together_cost_at_most_8_commands_each_with_compaction(
    server: RedisServer, commands: CommandLog
) -> None:
    """Issue 14's bound, with the compaction counted: runs of a partition that end together
    share its three commands, so a lifecycle costs its 6 scripts, its share of the task
    reads and a fraction of a command more."""
    async with Runtime(server.url, partitions=1) as rt:
        await _one_lifecycle(rt, commands, False, 0)  # loads the scripts
        worker = Worker(rt)
        commands.mark("starts")
        run_ids = [await rt.start(lifecycle, False) for _ in range(RUNS_TOGETHER)]
        await worker.drain()
        commands.mark("test-reads")
        tokens = [(await rt.list_hooks(run_id=run_id))[0].token for run_id in run_ids]
        commands.mark("answers")
        for token in tokens:
            await rt.resume_hook(token, "yes")
        await worker.drain()
        commands.mark("waits")
        for run_id in run_ids:
            assert await rt.wait(run_id, timeout=5) == "yes"
        commands.mark("compaction")
        assert await raw(rt).flush_compactions() == RUNS_TOGETHER
        commands.mark("end")
        sections = commands.sections(rt)
        for run_id in run_ids:  # compacted, and read the same
            assert not await raw(rt).client.exists(raw(rt).run_keys(run_id).events)
            [hook] = (await rt.get_run(run_id)).hooks
            assert hook.status.value == "received"
            assert [e.type for e in await rt.events(run_id) or []][-1] == "workflow.completed"
    assert sorted(sections["compaction"]) == ["XREAD", "compact", "read_hooks"]
    lifecycles = [
        *_lifecycle_only(sections["starts"]),
        *_lifecycle_only(sections["answers"]),
        *sections["compaction"],
    ]
    print(f"{len(lifecycles)} commands for {RUNS_TOGETHER} lifecycles:", Counter(lifecycles))
    assert Counter(lifecycles)["XREADGROUP"] <= 4  # a drain reads the tasks in batches
    assert len(lifecycles) / RUNS_TOGETHER <= 8


RUNS_TOGETHER = 20


@step
async def durable_save() -> Any:
    await save_step_checkpoint({"state": 1})
    return "saved"


@workflow(name="durable_save_wf")
async def durable_save_wf() -> Any:
    return await durable_save()


async def test_default_checkpoint_save_is_its_own_durable_write(
    server: RedisServer, commands: CommandLog
) -> None:
    async with Runtime(server.url, partitions=PARTITIONS) as rt:
        for n in range(2):  # the first run loads the scripts
            commands.mark(f"run-{n}")
            run_id = await rt.start(durable_save_wf)
            await Worker(rt).drain()
            commands.mark(f"wait-{n}")
            assert await rt.wait(run_id, timeout=5) == "saved"
        sections = commands.sections(rt)
    # start, claim, checkpoint (durable on return), finish
    assert _lifecycle_only(sections["run-1"]) == ["start", "XREADGROUP", "claim", "apply", "apply"]
