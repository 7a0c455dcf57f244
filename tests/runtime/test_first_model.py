"""first() against what it promises, on generated programs: every message sent to a run is
handled exactly once, whatever the program raced against "stop", the order in which its
messages and answers arrive, and which worker (one resuming from its replay cache, one
replaying the whole log) executes each resume.

The programs (tests/apps/first_programs_app.py) nest receives, hooks, timers, child runs,
sequences, gathers, first()s and tasks awaited later; timers, and some receives' and
hooks' timeouts, are short enough to fire while the test plays. A message a receive took
is either handed to a step at once, or returned as it came, and then only where nothing
runs after it in its task or any task that reads it: so when its branch loses, nothing
used it and first() must give it back (to the run's later receives); when its branch
wins, the workflow handles it. A message handled twice, or one that no receive ever gets
(the run then never ends), fails the test.

The examples are derandomized (the same ones on every run) unless ``PARLEY_FUZZ_SEED`` is
set; ``PARLEY_FUZZ_EXAMPLES`` sets how many (with a seed: to search for new failures).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, event, example, given, seed, settings
from hypothesis import strategies as st

from runtime import RunStatus, Runtime, Worker
from runtime.errors import HookExpired
from runtime.models import EventType
from tests.apps.first_programs_app import END, SHORT, first_program
from tests.apps.messages_app import handled
from tests.helpers import running

EXAMPLES = int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "300"))
FUZZ_SEED = os.environ.get("PARLEY_FUZZ_SEED")

MAX_DEPTH = 3


@st.composite
def _program(draw: st.DrawFn, may_return_raw: bool, depth: int) -> list[Any]:
    """One program; ``may_return_raw``: its value may carry a message as it came (nothing
    in its task, or a task reading it, runs after it)."""
    leaf = depth >= MAX_DEPTH or draw(st.booleans())
    if leaf:
        kind = draw(
            st.sampled_from(["hook", "hook", "hook", "recv", "recv", "recv", "sleep", "child"])
        )
        if kind == "sleep":
            return ["sleep"]
        if kind == "child":  # its hook named once the whole program is drawn
            return ["child", ""]
        if kind == "hook":  # named once the whole program is drawn
            return ["hook", ""] if draw(st.integers(0, 2)) else ["hook", "", "short"]
        handled_at_once = True if not may_return_raw else draw(st.booleans())
        return ["recv", handled_at_once, draw(st.sampled_from([False, True, "short"]))]
    kind = draw(st.sampled_from(["seq", "gather", "first", "spawn"]))
    size = 2 if kind == "spawn" else draw(st.integers(2 if kind == "first" else 1, 3))
    if kind == "seq":
        # only the last of a sequence has nothing after it in its task
        parts = [draw(_program(False, depth + 1)) for _ in range(size - 1)]
        parts.append(draw(_program(may_return_raw, depth + 1)))
    else:  # (a spawned task's value is read only once the rest of its creator's is done)
        parts = [draw(_program(may_return_raw, depth + 1)) for _ in range(size)]
    return [kind, parts]


def _name_hooks(program: list[Any], names: list[str]) -> list[Any]:
    if program[0] in ("hook", "child"):
        names.append(f"h{len(names)}")
        return [program[0], names[-1], *program[2:]]
    if program[0] in ("recv", "sleep"):
        return program
    return [program[0], [_name_hooks(part, names) for part in program[1]]]


programs = _program(True, 0).map(lambda program: _name_hooks(program, []))


# A schedule: what happens after the run's first pass, in order. "send": the next message;
# "drain": a worker runs the run until it waits (live: a few ms pass); "wait": the short
# timers and hooks started so far come due, then a drain; a number k: the k-th pending hook
# (by name, modulo their number) is answered.
Action = str | int
schedules = st.lists(st.sampled_from(["send", "drain", "wait"]) | st.integers(0, 7), max_size=8)


@dataclass(frozen=True)
class Scenario:
    """``workers``: which worker runs each drain, in turn (True: the one resuming from its
    replay cache); ``rotation``: the order in which the end answers what still waits (the
    pending hooks by name, rotated); ``live``: while the schedule plays, a worker runs the
    run in the background, so answers and messages arrive while a pass is running."""

    program: list[Any]
    schedule: list[Action]
    workers: list[bool]
    rotation: int
    live: bool
    continues: int = 0


async def _play(url: str, scenario: Scenario) -> None:
    handled.clear()
    sent: list[str] = []
    async with Runtime(url, partitions=1) as rt:
        cached = Worker(rt, timer_tick=0.01)
        full = Worker(rt, timer_tick=0.01, replay_cache=0)
        turns = itertools.cycle(scenario.workers)

        async def drain() -> None:
            await (cached if next(turns) else full).drain()

        async def pending() -> list[Any]:
            # the run's hooks and its children's: the store holds this scenario's alone
            return sorted(await rt.list_hooks(), key=lambda h: h.name)

        run_id = await rt.start(first_program, scenario.program, scenario.continues)
        await drain()
        async with contextlib.AsyncExitStack() as background:
            if scenario.live:
                await background.enter_async_context(running(cached))
            for action in scenario.schedule:
                if action == "send":
                    await rt.send(run_id, "v", f"m{len(sent)}")
                    sent.append(f"m{len(sent)}")
                elif action == "drain":
                    await (asyncio.sleep(0.002) if scenario.live else drain())
                elif action == "wait":
                    await asyncio.sleep(SHORT + 0.01)
                    if not scenario.live:
                        await drain()
                elif waiting := await pending():
                    with contextlib.suppress(HookExpired):  # (live: withdrawn meanwhile)
                        await rt.resume_hook(waiting[int(action) % len(waiting)].token, 1)
        # The end: answer whatever waits (stop included) until nothing does, then "end".
        for _ in range(20):
            await drain()
            waiting = await pending()
            if not waiting:
                break
            turn = scenario.rotation % len(waiting)
            for hook in waiting[turn:] + waiting[:turn]:
                with contextlib.suppress(HookExpired):  # (one with a short timeout)
                    await rt.resume_hook(hook.token, 1)
        await rt.send(run_id, "v", END)
        await drain()
        info, chain = await rt.get_run(run_id), 1
        while info.continued_to is not None:
            info, chain = await rt.get_run(info.continued_to), chain + 1
        assert info.status is RunStatus.COMPLETED, (
            f"the run did not end ({info.status.value}): a message was never received; "
            f"sent {sent}, handled {handled}"
        )
        assert sorted(handled) == sorted(sent), f"sent {sent}, handled {handled}"
        which, returned, later = await rt.wait(run_id, timeout=5)
        event(f"won: {'stop' if which == 0 else 'the program'}")
        event(f"messages handled in the program: {len(sent) - returned - later}")
        event(f"messages given back: {later}")
        event(f"runs in the chain: {chain if chain < 3 else '3 or more'}")
        children = len((await rt.get_run(run_id)).child_run_ids)
        event(f"child runs started: {children if children < 2 else '2 or more'}")
        kinds = [e.type for e in await rt.events(run_id)]
        fired = kinds.count(EventType.TIMER_FIRED) + kinds.count(EventType.HOOK_EXPIRED)
        event(f"timers fired and hooks expired: {fired if fired < 2 else '2 or more'}")


def scenarios(live: st.SearchStrategy[bool]) -> st.SearchStrategy[Scenario]:
    return st.builds(
        Scenario,
        program=programs,
        schedule=schedules,
        workers=st.lists(st.booleans(), min_size=1, max_size=6),
        rotation=st.integers(0, 5),
        live=live,
        continues=st.sampled_from([0, 0, 1, 2]),
    )


# Found by this test (each failed before the fix named).
FOUND = [
    # a task started, a receive, then the task awaited; stop answered before the task's
    # hook: the read ended the branch's track, its receive counted as used and its message
    # was lost (engine/tracks.py, _last_call)
    Scenario(["spawn", [["hook", "h0"], ["recv", False, False]]], ["send"], [True], 1, False),
    # a task that had handed a message to a step after a receive with a timeout was still
    # replaying it when stop won: the message was given back and handled twice
    # (engine/firsts.py, _catch_up)
    Scenario(
        [
            "spawn",
            [
                ["seq", [["recv", True, True], ["seq", [["recv", False, False]]]]],
                ["seq", [["seq", [["hook", "h0"], ["recv", False, False]]]]],
            ],
        ],
        ["send"],
        [True],
        1,
        False,
    ),
    # a worker stopped while a pass ran and an answer came in: the task its last read was
    # delivered, or its respawn, sat in its pending list, and the run's later messages
    # queued no task (worker.py, give_back.lua; the embedded store's cancelled blocking
    # read kept serving, _embedded.py; a stopped worker drained again admitted nothing)
    Scenario(["hook", "h0"], [0, "send"], [True], 0, True),
    # a message won; stop's answer, come in as the decision was written, made the store
    # refuse that write, which held the result of the step that handled the message: the
    # run restarted from its log and the step ran again (engine/firsts.py: the decision is
    # flushed before a step runs)
    Scenario(["recv", False, False], ["send", 0], [False], 0, True),
    # the same, the message handled by a step inside the branch, before the decision: the
    # step's result is recorded before deciding (engine/firsts.py)
    Scenario(["recv", True, False], ["send", 0], [False], 0, True),
    # failed only under this directory's check of every APPLY (conftest.py), whose reads
    # ran in the execution's context: the client's tasks were taken for the losing
    # branch's, as calls after its receive, and its message was kept and lost
    Scenario(
        [
            "seq",
            [
                ["seq", [["seq", [["recv", True, False]]]]],
                ["seq", [["first", [["recv", False, False], ["recv", False, True]]]]],
            ],
        ],
        ["send", "send", "send"],
        [False],
        0,
        False,
    ),
    # a first() nested in a gathered task, whose branch had handed a message to a step,
    # was still replaying when stop won; the enclosing first() did not wait for the nested
    # one's branch tasks, so the message was given back and handled twice (seed 63;
    # engine/firsts.py, _in_branch: a branch's track knows its task)
    Scenario(
        [
            "gather",
            [
                ["seq", [["hook", "h1"], ["hook", "h2"]]],
                ["first", [["hook", "h3"], ["recv", True, True]]],
            ],
        ],
        ["send"],
        [False],
        0,
        False,
    ),
    # the same, earlier: a nested first() had created its branches' tasks, which had not
    # run yet, when stop won; the message its receive had taken in an earlier pass was
    # neither kept nor given back: lost (seed 67; engine/tracks.py, started_task: a
    # branch's track knows its numbering as its task is made). Timing-dependent: on the
    # old engine it failed about 1 run in 10 with the machine loaded
    Scenario(
        [
            "spawn",
            [
                [
                    "spawn",
                    [["first", [["recv", False, True], ["sleep"], ["hook", "h0"]]], ["hook", "h1"]],
                ],
                ["sleep"],
            ],
        ],
        ["send"],
        [True],
        4,
        False,
    ),
    # the same, deterministic: a receive with a timeout in a task started by a task the
    # branch started; stop won while its first()'s branches had not run yet, and the
    # message it had taken in an earlier pass was lost (seed 68, shrunk)
    Scenario(
        [
            "spawn",
            [
                ["spawn", [["recv", False, True], ["hook", "h0"]]],
                ["seq", [["hook", "h1"], ["hook", "h2"]]],
            ],
        ],
        ["send"],
        [False],
        0,
        False,
    ),
    # a message sent during the race waited in the inbox when the run continued as new;
    # the run ended with it and the successor never received it (store/redis/lua/apply.lua,
    # 'continue': the inbox goes on to the successor's)
    Scenario(["hook", "h0", "short"], ["send"], [False], 0, False, continues=1),
    # a message a losing branch's receive gave back was in the log, untaken, when the run
    # continued as new: lost (engine/endings.py, _finish_continued hands it on)
    Scenario(
        ["spawn", [["recv", False, "short"], ["hook", "h0", "short"]]],
        ["send", 3, 0],
        [True],
        0,
        False,
        continues=1,
    ),
    # a step flushed while a decision's write was in flight and ran before it; the write
    # was refused (STALE) with the step's result, and only the task whose write met the
    # refusal unwound (engine/writer.py). Timing-dependent: about 1 run in 15 failed
    Scenario(
        [
            "seq",
            [
                [
                    "seq",
                    [
                        ["hook", "h0"],
                        ["gather", [["recv", True, False], ["hook", "h1"], ["recv", True, False]]],
                        ["spawn", [["hook", "h2"], ["recv", True, True]]],
                    ],
                ],
                [
                    "spawn",
                    [
                        ["first", [["hook", "h3"], ["hook", "h4"], ["hook", "h5"]]],
                        ["recv", True, True],
                    ],
                ],
                ["recv", True, True],
            ],
        ],
        ["send", 6, "send", "send", 0, "drain", 4],
        [False, True, True, False],
        2,
        True,
    ),
]


def _property(examples: int, live: st.SearchStrategy[bool]) -> Any:
    """A test of the property over ``examples`` scenarios: derandomized (or seeded), every
    scenario of FOUND first."""

    def decorate(test: Any) -> Any:
        test = given(scenario=scenarios(live))(test)
        for found in FOUND:
            test = example(scenario=found)(test)
        test = settings(
            max_examples=max(1, examples),
            deadline=None,
            derandomize=FUZZ_SEED is None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )(test)
        if FUZZ_SEED is not None:
            test = seed(int(FUZZ_SEED))(test)
        return pytest.mark.timeout(600)(test)

    return decorate


@_property(EXAMPLES, live=st.just(False))
def test_every_message_is_handled_once_embedded(scenario: Scenario) -> None:
    asyncio.run(_play(f"memory://{uuid.uuid4().hex}", scenario))


@_property(EXAMPLES // 3, live=st.just(True))
def test_every_message_is_handled_once_with_a_worker_running(scenario: Scenario) -> None:
    asyncio.run(_play(f"memory://{uuid.uuid4().hex}", scenario))


def _another_task_factory(
    loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
) -> asyncio.Task[Any]:
    """A task factory of the application's (an instrumentation library's, say), installed
    before Parley's, which wraps it."""
    return asyncio.Task(coro, loop=loop, **kwargs)


@_property(EXAMPLES // 6, live=st.booleans())
def test_every_message_is_handled_once_under_another_task_factory(scenario: Scenario) -> None:
    """(With it, tasks a branch started were not known to first(), which decided while
    one still replayed: FOUND[1] handled its message twice, engine/tasks.py.)"""

    async def play() -> None:
        asyncio.get_running_loop().set_task_factory(_another_task_factory)
        await _play(f"memory://{uuid.uuid4().hex}", scenario)

    asyncio.run(play())


@_property(EXAMPLES // 2, live=st.booleans())
def test_every_message_is_handled_once_on_redis(session_redis_url: str, scenario: Scenario) -> None:
    client = redis.Redis.from_url(session_redis_url)
    try:
        client.flushdb()
        asyncio.run(_play(session_redis_url, scenario))
    finally:
        client.flushdb()
        client.close()
