"""``python -m bench.prototype``: how few bytecodes a Python engine could spend on the bench
lifecycle, measured beside the real engine's floor (issue 14, item 1).

Item 1 asks a worker for ÷2.6 of the baseline's instructions per lifecycle; with the
transport and the rest of a worker as they are, that leaves the engine about half of the
~7,000 bytecodes ``bench.engine --opcodes`` counts today. Whether a redesign can get there
is the question this prototype answers before any production code moves.

**A prototype, not an engine.** It knows one workflow shape, the bench's (a workflow that
calls one step, which saves a checkpoint and waits for one hook), and none of what the
engine also does on every lifecycle: first()'s scoring, messages, children, timers,
patches, limits, leases lost, stale writes, the outcome metrics, tracing, a run's scopes
for parallel branches. What it keeps is the work no design can leave out: decoding the
recorded claims (events, checkpoints, the log's mode and count), an index of what the log
says (steps started and completed, hooks answered), the step's id and its arguments' digest
checked on replay, the events, the checkpoint and the hook's record encoded as the real
engine encodes them, the APPLY requests built and their replies read. It is shaped as the
redesign proposed: runs driven by batch from one coroutine, each run's workflow a
coroutine sent to by hand (no asyncio task, future or context per run), a run's writes
yielded to the driver.

The replies are the ones ``bench.engine`` recorded from one real lifecycle (no Redis, as
its floor), and every APPLY the prototype asks for in the first lifecycle is checked
against the recording's, field by field but the clock: the prototype did the same writes.
Printed: bytecodes per lifecycle (``bench.opcodes``, exact) and CPU µs per lifecycle for
the prototype and for the engine floor, in one process. The difference is an upper bound on
what a redesign can save: a real engine keeps the features this leaves out.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import time
from collections.abc import Coroutine, Generator
from typing import Any

import orjson

from runtime._codec import _DUMP_OPTS as SORTED  # the engine's event encoding
from runtime._loop import run
from runtime.cli.worker import YOUNG_COLLECTION_EVERY

from .app import CHECKPOINT
from .engine import Recording, recorded_floor
from .opcodes import count_opcodes, summary

BATCH = 64  # runs driven together, as a worker's concurrency


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=SORTED).decode()


class Suspend(Exception):
    """The run waits: raised by a hook not yet answered."""


class Write:
    """A run's APPLY, yielded to the driver; the run is sent the reply."""

    __slots__ = ("request",)

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request

    def __await__(self) -> Generator[Write, Any, Any]:
        reply = yield self
        return reply


class Run:
    """One run as the prototype knows it: its claim, its index and the writes buffered."""

    __slots__ = ("after", "args", "checkpoints", "completed", "count", "fence", "positions",
                 "received", "run_id", "started", "suspension", "writes")  # fmt: skip

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.args: list[Any] = []
        self.started: dict[str, str | None] = {}  # step id -> its arguments' digest
        self.completed: dict[str, Any] = {}
        self.received: dict[str, Any] = {}
        self.fence = ""
        self.after = "0-0"
        self.count = 0

    def claimed(self, reply: list[Any]) -> None:
        """Read a claim's reply: the fence, the events new to this worker, the checkpoints."""
        self.fence = reply[1].decode()
        entries = reply[4]
        for _, fields in entries:
            handler = _INDEX.get(fields[1])
            if handler is not None:
                handler(self, orjson.loads(fields[3]))
        if entries:
            self.after = entries[-1][0].decode()
        flat = reply[5]
        self.checkpoints = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
        self.count = int(reply[8])
        self.writes: list[list[Any]] = []
        self.positions = 0
        self.suspension: list[list[Any]] | None = None

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.writes.append(["event", kind, _dumps(data)])

    def request(self, now_ms: int) -> dict[str, Any]:
        writes, self.writes = self.writes, []
        request = {
            "fence": self.fence,
            "now": str(now_ms),
            "max_events": 10_000,
            "after": self.after,
            "retention": "604800",
            "writes": writes,
            "known": str(self.count),
        }
        self.count += sum(1 for op in writes if op[0] == "event")
        return request

    def applied(self, reply: list[Any]) -> None:
        if reply[0] != b"ok":
            raise RuntimeError(f"the recorded APPLY replied {reply[0]!r}")
        self.after = reply[1].decode()


def _started(run: Run, data: dict[str, Any]) -> None:
    run.args = data.get("args", [])


def _step_started(run: Run, data: dict[str, Any]) -> None:
    run.started[data["step_id"]] = data.get("args")


def _step_completed(run: Run, data: dict[str, Any]) -> None:
    run.completed[data["step_id"]] = data.get("result")


def _hook_received(run: Run, data: dict[str, Any]) -> None:
    run.received[data["hook_id"]] = data.get("payload")


_INDEX = {
    b"workflow.started": _started,
    b"step.started": _step_started,
    b"step.completed": _step_completed,
    b"hook.received": _hook_received,
}

# The run whose code is running: the driver sets it around each send (one run's code runs
# at a time, in the driver's coroutine).
_current: Run


def _now_ms() -> int:
    return int(time.time() * 1000)


# the primitives the bench workflow uses ------------------------------------------------
async def step(name: str, fn: Any, *args: Any) -> Any:
    run = _current
    digest = hashlib.sha1(orjson.dumps([list(args), {}], option=SORTED)).hexdigest()[:16]
    position = run.positions
    step_id = f"{name}-{position}"
    run.positions += 1
    if step_id in run.completed:
        return run.completed[step_id]
    if step_id in run.started:
        if run.started[step_id] != digest:
            raise RuntimeError(f"step {step_id!r} called with other arguments on replay")
    else:
        run.started[step_id] = digest
        started = {"step_id": step_id, "name": name, "seq": position, "args": digest}
        run.event("step.started", started)
    result = await fn(step_id, *args)
    run.event("step.completed", {"step_id": step_id, "result": result})
    run.writes.append(["uncheckpoint", step_id])
    return result


async def save_checkpoint(step_id: str, value: Any) -> None:
    run = _current
    run.writes.append(["checkpoint", step_id, _dumps(value)])
    run.applied(await Write(run.request(_now_ms())))


def load_checkpoint(step_id: str) -> Any:
    state = _current.checkpoints.get(step_id)
    return None if state is None else orjson.loads(state)


def step_hook(step_id: str, name: str) -> Any:
    run = _current
    hook_id = f"{step_id}.{name}.0"
    if hook_id in run.received:
        return run.received[hook_id]
    meta = {"name": name, "step_id": step_id}
    run.event("hook.created", {"hook_id": hook_id, **meta})
    run.writes.append(["hook", hook_id, "P-" + _dumps(meta), f"{run.run_id}:{hook_id}"])
    run.suspension = [["event", "step.suspended", _dumps({"step_id": step_id, "wait": hook_id})]]
    raise Suspend


# the bench workflow, on those primitives (bench/app.py's bench_hitl and converse) ------
async def converse(step_id: str, due_at: Any, notify: bool, defer: bool) -> Any:
    if load_checkpoint(step_id) is None:
        await save_checkpoint(step_id, CHECKPOINT)
    return step_hook(step_id, "answer")


async def bench_hitl(due_at: Any = None, notify: bool = False, defer: bool = False) -> Any:
    return await step("converse", converse, due_at, notify, defer)


# the driver ------------------------------------------------------------------------------
class Driver:
    """Runs the recorded lifecycle for a batch of runs at a time: each run's claim read, its
    workflow sent to until it asks for a write (answered with the recorded reply) or ends."""

    def __init__(self, recording: Recording) -> None:
        self.run_id = recording.tasks[0].run_id
        calls = recording.calls
        self.claims = [reply for name, reply in calls if name == "claim"]
        applies = [reply for name, reply in calls if name == "apply"]
        # the start's writes (the checkpoint, the suspension) and the resume's (the end)
        self.start_replies, self.resume_replies = applies[:2], applies[2:]
        self.expected = recording.applied
        self.asked: list[dict[str, Any]] | None = None  # the requests sent, while checking

    def _execute(self, run: Run, apply_replies: list[Any]) -> None:
        """One execution of the run's workflow to its end or its suspension."""
        global _current
        coro: Coroutine[Any, Any, Any] = bench_hitl(*run.args)
        replies = iter(apply_replies)
        value: Any = None
        while True:
            _current = run
            try:
                write = coro.send(value)
            except StopIteration as done:
                run.event("workflow.completed", {"result": done.value})
                request = run.request(_now_ms())
                request["finish"] = {"status": "completed", "value": _dumps(done.value)}
                break
            except Suspend:
                request = run.request(_now_ms())
                request["suspension"] = run.suspension
                break
            self._sent(write.request)
            value = next(replies)
        self._sent(request)  # the execution's last write: its end or its suspension
        run.applied(next(replies))

    def _sent(self, request: dict[str, Any]) -> None:
        orjson.dumps(request)  # the script's argument, as the store sends it
        if self.asked is not None:
            self.asked.append(request)

    def lifecycles(self, n: int) -> None:
        cache: dict[int, Run] = {}
        start, resume = self.claims
        done = 0
        while done < n:
            batch = range(min(BATCH, n - done))
            for i in batch:  # the starts: a claim each, executed to their suspension
                run = cache[i] = Run(self.run_id)
                run.claimed(start)
                self._execute(run, self.start_replies)
            for i in batch:  # the answers came: the resumes, from the cached index
                run = cache.pop(i)
                run.claimed(resume)
                self._execute(run, self.resume_replies)
            done += len(batch)

    def check(self) -> None:
        """A lifecycle asks for the recorded APPLYs, but for the clock."""
        asked_all: list[dict[str, Any]] = []
        self.asked = asked_all
        try:
            self.lifecycles(1)
        finally:
            self.asked = None
        if len(asked_all) != len(self.expected):
            raise RuntimeError(
                f"the prototype sent {len(asked_all)} APPLYs, the recording has"
                f" {len(self.expected)}"
            )
        for asked, expected in zip(asked_all, self.expected, strict=True):
            if {**asked, "now": ""} != {**expected, "now": ""}:
                raise RuntimeError(f"the prototype asked {asked}, the recording has {expected}")


async def _measure(runs: int, repeats: int, opcodes: int) -> dict[str, Any]:
    floor = await recorded_floor()
    driver = Driver(floor.recording)
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    driver.check()
    driver.lifecycles(200)
    await floor.lifecycles(200)

    async def prototype(n: int) -> None:
        driver.lifecycles(n)

    result: dict[str, Any] = {"bench": "prototype", "runs": runs}
    for name, lifecycles in (("prototype", prototype), ("engine", floor.lifecycles)):
        samples = []
        for _ in range(repeats):
            began = time.process_time()
            await lifecycles(runs)
            samples.append((time.process_time() - began) / runs * 1e6)
        counted = await count_opcodes(lambda: lifecycles(opcodes))  # noqa: B023 (awaited here)
        result[name] = {
            "cpu_us_per_lifecycle": round(statistics.median(samples), 1),
            "cpu_us_samples": [round(s, 1) for s in samples],
            "opcodes_per_lifecycle": summary(counted, opcodes, 12),
        }
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prototype", description=__doc__)
    parser.add_argument("--runs", type=int, default=20_000, help="lifecycles per window")
    parser.add_argument("--repeats", type=int, default=3, help="windows; the median is printed")
    parser.add_argument("--opcodes", type=int, default=200, help="lifecycles counted by opcode")
    args = parser.parse_args(argv)
    for name in ("runs", "repeats", "opcodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    result = run(_measure(args.runs, args.repeats, args.opcodes))
    for name in ("prototype", "engine"):
        figures = result[name]
        counted = figures["opcodes_per_lifecycle"]
        print(f"{name}: {counted['opcodes']:,} bytecodes per lifecycle"
              f" ({counted['runtime_opcodes']:,} in runtime/),"
              f" CPU µs per lifecycle {figures['cpu_us_per_lifecycle']}"
              f" (samples {figures['cpu_us_samples']})")  # fmt: skip
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
