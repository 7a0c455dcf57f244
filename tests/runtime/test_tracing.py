"""OpenTelemetry spans of runs (runtime.tracing), read from the SDK's in-memory exporter
and, for worker processes, from the JSON lines they write (PARLEY_TRACING_FILE)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import propagate
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime import (
    RunFailed,
    RunStatus,
    Runtime,
    Worker,
    child,
    continue_as_new,
    hook,
    step,
    step_hook,
    tracing,
    workflow,
)
from runtime.errors import StoreUnavailable
from runtime.settings import Settings
from runtime.tracing import span_json
from tests.apps import versions_app  # noqa: F401  (registers deploy_wf)
from tests.apps.versions_app import VARIANT
from tests.processes import ROOT, WorkerProcess, wait_until


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    yield exporter
    tracing.disable()
    provider.shutdown()


@step
async def traced_review(draft: str) -> str:
    answer = await step_hook("review", prompt="OK?")
    return f"{draft}: {answer}"


@workflow(name="traced_wf")
async def traced_wf(draft: str) -> str:
    return await traced_review(draft)


def _finished(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    finished: tuple[ReadableSpan, ...] = exporter.get_finished_spans()
    return [span_json(s) for s in finished]


async def test_a_run_is_one_trace_across_its_executions(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    run_id = await rt.start(traced_wf, "draft")
    [start] = _finished(spans)
    assert start["name"] == "parley.start" and start["attributes"]["parley.run_id"] == run_id
    started = (await rt.events(run_id))[0]
    assert started.data["trace"].startswith(f"00-{start['trace_id']}-{start['span_id']}-")
    await worker.drain()
    [hook] = await rt.list_hooks()
    await rt.resume_hook(hook.token, "fine")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == "draft: fine"
    recorded = _finished(spans)
    names = [s["name"] for s in recorded]
    assert sorted(names) == sorted(
        [
            "parley.start",
            "parley.execution",
            "parley.step",
            "parley.resume_hook",
            "parley.execution",
            "parley.hook.wait",
            "parley.step",
        ]
    )
    by_name: dict[str, list[dict[str, Any]]] = {}
    for s in recorded:
        by_name.setdefault(s["name"], []).append(s)
    [resume] = by_name["parley.resume_hook"]
    first, second = sorted(by_name["parley.execution"], key=lambda s: s["start_ns"])
    # every execution is a child of the start, in its trace
    for execution in (first, second):
        assert execution["trace_id"] == start["trace_id"]
        assert execution["parent_span_id"] == start["span_id"]
    assert first["attributes"]["parley.outcome"] == "suspended"
    assert second["attributes"]["parley.outcome"] == "completed"
    # the answer came from elsewhere (its own trace here): the execution it woke links it
    assert second["links"] == [{"trace_id": resume["trace_id"], "span_id": resume["span_id"]}]
    for s in by_name["parley.step"] + by_name["parley.hook.wait"]:
        assert s["trace_id"] == start["trace_id"]
    [wait] = by_name["parley.hook.wait"]
    assert wait["parent_span_id"] == second["span_id"]
    assert wait["attributes"]["parley.outcome"] == "answered"
    # the wait starts at the hook's creation, an event time in whole ms: at that resolution
    # it is not before the execution that created it
    assert wait["end_ns"] >= wait["start_ns"] >= first["start_ns"] // 1_000_000 * 1_000_000
    suspended_step = min(by_name["parley.step"], key=lambda s: s["start_ns"])
    assert suspended_step["parent_span_id"] == first["span_id"]
    assert suspended_step["attributes"]["parley.unwound"] == "Suspend"
    assert suspended_step["status"] == "UNSET"  # a suspension is not an error


async def test_the_start_span_names_the_workflow_not_the_function_repr(
    rt: Runtime, spans: InMemorySpanExporter
) -> None:
    """Started with the function (as the README does) or by its name, the span carries the
    registered name: not str(function), a '<function traced_wf at 0x...>' repr."""
    await rt.start(traced_wf, "draft")
    await rt.start("traced_wf", "draft")
    starts = [s for s in _finished(spans) if s["name"] == "parley.start"]
    assert [s["attributes"]["parley.workflow"] for s in starts] == ["traced_wf", "traced_wf"]


async def test_resume_hook_and_step_spans_carry_the_run_and_hook_ids(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    """The ids parley.execution and parley.hook.wait carry, to search an answer's span and
    a step's by: parley.resume_hook had only the token, parley.step no run id."""
    run_id = await rt.start(traced_wf, "draft")
    await worker.drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    await rt.resume_hook(pending.token, "ok")
    await worker.drain()
    recorded = _finished(spans)
    [resume] = [s for s in recorded if s["name"] == "parley.resume_hook"]
    assert resume["attributes"].get("parley.run_id") == run_id
    assert resume["attributes"].get("parley.hook_id") == pending.hook_id
    steps = [s for s in recorded if s["name"] == "parley.step"]
    assert len(steps) == 2  # suspended on the hook, then completed
    assert [s["attributes"].get("parley.run_id") for s in steps] == [run_id, run_id]


async def test_untraced_runs_carry_no_trace(rt: Runtime, worker: Worker) -> None:
    assert not tracing.enabled()
    run_id = await rt.start(traced_wf, "draft")
    assert "trace" not in (await rt.events(run_id))[0].data


def test_the_engine_does_not_import_opentelemetry_unless_enabled() -> None:
    code = (
        "import sys, runtime, runtime.worker, runtime.cli, runtime.tracing\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def _spans_of(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_one_trace_across_a_killed_worker_and_another_process(
    prt: Runtime, redis_url: str, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """start → suspend on worker A → A killed (SIGKILL) → answer → resume on worker B →
    complete: one trace, whose executions are children of the start span."""
    file_a, file_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    doomed = WorkerProcess(
        redis_url, "tests.apps.hitl_app", extra_env={"PARLEY_TRACING_FILE": str(file_a)}
    )
    rescuer: WorkerProcess | None = None
    try:
        run_id = await prt.start("hitl")
        [start] = _finished(spans)
        wait_until(
            lambda: any(s["name"] == "parley.execution" for s in _spans_of(file_a)),
            20,
            "worker A's execution span",
        )
        assert (await prt.get_run(run_id)).status is RunStatus.SUSPENDED
        doomed.kill()
        [hook] = await prt.list_hooks()
        await prt.resume_hook(hook.token, "yes")
        rescuer = WorkerProcess(
            redis_url, "tests.apps.hitl_app", extra_env={"PARLEY_TRACING_FILE": str(file_b)}
        )
        result = await prt.wait(run_id, timeout=20)
        assert result["answer"] == "yes"
        wait_until(
            lambda: any(s["name"] == "parley.execution" for s in _spans_of(file_b)),
            20,
            "worker B's execution span",
        )
    finally:
        doomed.stop()
        if rescuer is not None:
            rescuer.stop()
    in_a, in_b = _spans_of(file_a), _spans_of(file_b)
    [exec_a] = [s for s in in_a if s["name"] == "parley.execution"]
    [exec_b] = [s for s in in_b if s["name"] == "parley.execution"]
    assert exec_a["attributes"]["parley.outcome"] == "suspended"
    assert exec_b["attributes"]["parley.outcome"] == "completed"
    assert {s["trace_id"] for s in [start, *in_a, *in_b]} == {start["trace_id"]}
    assert exec_a["parent_span_id"] == exec_b["parent_span_id"] == start["span_id"]
    assert {s["name"] for s in in_b} == {"parley.execution", "parley.step", "parley.hook.wait"}
    [resume] = [s for s in _finished(spans) if s["name"] == "parley.resume_hook"]
    assert exec_b["links"] == [{"trace_id": resume["trace_id"], "span_id": resume["span_id"]}]


@pytest.fixture
def foreign_propagator() -> Iterator[None]:
    """The process propagates another format than W3C trace context (OTEL_PROPAGATORS=b3,
    or none): what a service may choose for its own HTTP calls."""
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(CompositePropagator([]))
    yield
    propagate.set_global_textmap(before)


async def test_a_run_is_one_trace_whatever_the_process_propagates(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter, foreign_propagator: None
) -> None:
    """The README: the start's W3C traceparent is stored with the run. Stored by the
    global propagator, it was not there when that propagator was not W3C's, and every
    execution began a trace of its own."""
    run_id = await rt.start(traced_wf, "draft")
    [start] = _finished(spans)
    assert (await rt.events(run_id))[0].data["trace"].startswith(f"00-{start['trace_id']}-")
    await worker.drain()
    [hook] = await rt.list_hooks()
    await rt.resume_hook(hook.token, "fine")
    await worker.drain()
    recorded = _finished(spans)
    [resume] = [s for s in recorded if s["name"] == "parley.resume_hook"]
    executions = sorted(
        (s for s in recorded if s["name"] == "parley.execution"), key=lambda s: s["start_ns"]
    )
    assert [e["parent_span_id"] for e in executions] == [start["span_id"]] * 2
    assert {e["trace_id"] for e in executions} == {start["trace_id"]}
    assert executions[1]["links"] == [
        {"trace_id": resume["trace_id"], "span_id": resume["span_id"]}
    ]


WITHOUT = textwrap.dedent(
    """
    import importlib.abc, sys

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == MISSING or name.startswith(MISSING + "."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    from runtime import ParleyError, tracing
    from runtime.settings import Settings

    for what, call in [
        ("enable", tracing.enable),
        ("PARLEY_TRACING", lambda: tracing.configure(Settings.from_env({"PARLEY_TRACING": "1"}))),
        ("PARLEY_TRACING_FILE", lambda: tracing.configure(
            Settings.from_env({"PARLEY_TRACING_FILE": "spans.jsonl"}))),
    ]:
        try:
            call()
        except ParleyError as exc:
            print(what, "ParleyError", exc)
        except BaseException as exc:
            print(what, type(exc).__name__, exc)
        else:
            print(what, "ok")
        tracing.disable()
    """
)


@pytest.mark.parametrize("missing", ["opentelemetry", "opentelemetry.sdk"])
def test_tracing_without_opentelemetry_is_a_parley_error_naming_the_extra(missing: str) -> None:
    """Asked for while the ``otel`` extra (or only its SDK) is not installed, tracing is
    refused with a ParleyError that names what asked for it and the extra to install (it
    was a RuntimeError, or a bare ModuleNotFoundError from PARLEY_TRACING_FILE)."""
    code = f"MISSING = {missing!r}\n" + WITHOUT
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    said = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    if missing == "opentelemetry.sdk":  # the API is enough for the global provider
        assert said.pop("enable") == said.pop("PARLEY_TRACING") == "ok"
    assert said, proc.stdout
    for what, outcome in said.items():
        assert outcome.startswith("ParleyError "), (what, outcome)
        assert "pip install 'parley[otel]'" in outcome, (what, outcome)
        if what != "enable":
            assert what in outcome, (what, outcome)


@step
async def out_of_stock(order: str) -> str:
    raise ValueError(f"no stock for {order}")


@workflow(name="traced_failing_wf")
async def traced_failing_wf(order: str) -> str:
    return await out_of_stock(order)


@pytest.fixture
def spans_file(tmp_path: Path) -> Iterator[Path]:
    """Tracing as a ``parley`` process with PARLEY_TRACING_FILE has it."""
    path = tmp_path / "spans.jsonl"
    tracing.configure(Settings.from_env({"PARLEY_TRACING_FILE": str(path)}))
    yield path
    tracing.disable()


async def test_the_spans_file_says_which_exception_failed_a_step(
    rt: Runtime, worker: Worker, spans_file: Path
) -> None:
    """A failed step's span records its exception (the README: exceptions are recorded);
    the JSON lines of PARLEY_TRACING_FILE kept only status ERROR, not what was raised."""
    run_id = await rt.start(traced_failing_wf, "A-1")
    await worker.drain()
    with pytest.raises(RunFailed):
        await rt.wait(run_id, timeout=5)
    [failed] = [s for s in _spans_of(spans_file) if s["name"] == "parley.step"]
    assert failed["status"] == "ERROR"
    assert failed["status_description"] == "ValueError: no stock for A-1"
    [raised] = failed["events"]
    assert raised["name"] == "exception"
    assert raised["attributes"]["exception.type"] == "ValueError"
    assert raised["attributes"]["exception.message"] == "no stock for A-1"
    assert "out_of_stock" in raised["attributes"]["exception.stacktrace"]


@step
async def traced_count(n: int) -> int:
    return n


@workflow(name="traced_continuing_wf")
async def traced_continuing_wf(n: int) -> int:
    if n > 0:
        continue_as_new(n - 1)
    return await traced_count(n)


def _executions(recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        (s for s in recorded if s["name"] == "parley.execution"), key=lambda s: s["start_ns"]
    )


async def test_a_run_continued_as_new_is_the_same_trace(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    """A conversation that continues as new is one trace: each successor stores its
    predecessor's trace context, and its executions are children of the same start (not
    one level deeper per successor). The successor stored none, and its executions began
    traces of their own."""
    run_id = await rt.start(traced_continuing_wf, 2)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 0
    recorded = _finished(spans)
    [start] = [s for s in recorded if s["name"] == "parley.start"]
    executions = _executions(recorded)
    runs = [e["attributes"]["parley.run_id"] for e in executions]
    assert len(set(runs)) == 3 and runs[0] == run_id, runs
    assert [e["attributes"]["parley.outcome"] for e in executions] == [
        "continued",
        "continued",
        "completed",
    ]
    assert [(e["trace_id"], e["parent_span_id"]) for e in executions] == [
        (start["trace_id"], start["span_id"])
    ] * 3
    [counted] = [s for s in recorded if s["name"] == "parley.step"]
    assert counted["trace_id"] == start["trace_id"]
    assert counted["parent_span_id"] == executions[-1]["span_id"]
    stored = {(await rt.events(run))[0].data.get("trace") for run in runs}
    assert len(stored) == 1 and None not in stored, stored


@workflow(name="traced_child_wf")
async def traced_child_wf(n: int) -> int:
    return await traced_count(n + 1)


@workflow(name="traced_parent_wf")
async def traced_parent_wf(n: int) -> int:
    return await child(traced_child_wf, n)


async def test_a_child_run_is_in_its_parents_trace(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    """A child run's executions are children of the parent's execution that started it,
    in the parent's trace: the child stored no trace context, and each of its executions
    began a trace of its own, unlinked from the parent's."""
    run_id = await rt.start(traced_parent_wf, 1)
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == 2
    recorded = _finished(spans)
    [start] = [s for s in recorded if s["name"] == "parley.start"]
    executions = _executions(recorded)
    parents = [e for e in executions if e["attributes"]["parley.run_id"] == run_id]
    [child_execution] = [e for e in executions if e["attributes"]["parley.run_id"] != run_id]
    assert [e["attributes"]["parley.outcome"] for e in parents] == ["suspended", "completed"]
    assert {s["trace_id"] for s in recorded} == {start["trace_id"]}
    assert [e["parent_span_id"] for e in parents] == [start["span_id"]] * 2
    assert child_execution["parent_span_id"] == parents[0]["span_id"]
    assert child_execution["attributes"]["parley.outcome"] == "completed"
    [counted] = [s for s in recorded if s["name"] == "parley.step"]
    assert counted["parent_span_id"] == child_execution["span_id"]
    child_run = child_execution["attributes"]["parley.run_id"]
    stored = (await rt.events(child_run))[0].data
    assert stored["trace"].startswith(f"00-{start['trace_id']}-{parents[0]['span_id']}-")
    assert stored["args"] == [1]


OUTAGES = {"left": 0}  # how many more times traced_after_review meets an outage


@step
async def traced_after_review(answer: str) -> str:
    if OUTAGES["left"] > 0:
        OUTAGES["left"] -= 1
        raise StoreUnavailable("injected outage")  # the execution is abandoned, run again
    return answer.upper()


@workflow(name="traced_abandoned_wf")
async def traced_abandoned_wf(draft: str) -> str:
    return await traced_after_review(await traced_review(draft))


async def _run_again_to_its_end(rt: Runtime, worker: Worker, run_id: str) -> None:
    """The run's task, left pending by an execution that was abandoned, is reclaimed and
    executed until the run completes."""
    deadline = time.monotonic() + 10
    while (await rt.get_run(run_id)).status is not RunStatus.COMPLETED:
        assert time.monotonic() < deadline, "the run was not executed again"
        await worker.reclaim()
        await worker.drain()
        await asyncio.sleep(0.05)


async def _abandoned_once(backend_url: str) -> str:
    """A run of traced_abandoned_wf whose execution woken by its answer meets an outage
    (abandoned) and is run again to the end; returns its hook's id."""
    async with Runtime(backend_url, partitions=2, lease_seconds=0.3) as rt:
        run_id = await rt.start(traced_abandoned_wf, "draft")
        worker = Worker(rt, visibility_timeout=0)
        await worker.drain()
        [pending] = await rt.list_hooks(run_id=run_id)
        OUTAGES["left"] = 1
        try:
            await rt.resume_hook(pending.token, "fine")
            await worker.drain()  # woken, abandoned: the task stays pending
            assert OUTAGES["left"] == 0
            await _run_again_to_its_end(rt, worker, run_id)
        finally:
            OUTAGES["left"] = 0
        assert await rt.wait(run_id, timeout=5) == "DRAFT: FINE"
        return pending.hook_id


async def test_a_hook_wait_is_one_span_when_the_woken_execution_is_abandoned(
    backend_url: str, spans: InMemorySpanExporter
) -> None:
    """The execution an answer woke is abandoned (a store outage in a step after the
    hook): the execution that runs the run again records the same wait. Each recorded
    its parley.hook.wait span, and the one wait was two spans."""
    hook_id = await _abandoned_once(backend_url)
    recorded = _finished(spans)
    executions = _executions(recorded)
    assert len(executions) == 3, [e["attributes"] for e in executions]
    waits = [s for s in recorded if s["name"] == "parley.hook.wait"]
    assert len(waits) == 1, waits
    [wait] = waits
    assert wait["attributes"]["parley.hook_id"] == hook_id
    assert wait["parent_span_id"] == executions[-1]["span_id"]  # the one that went on


async def test_an_outage_marks_the_spans_it_cut_short_as_running_again(
    backend_url: str, spans: InMemorySpanExporter
) -> None:
    """A store outage in a step abandons the execution, which runs again: the step's and
    the execution's spans are ERROR (they did not do their work), with the exception and
    a description that says the run is not failed and the execution runs again. The
    execution's span said neither (only parley.unwound: Abort), the step's not that."""
    await _abandoned_once(backend_url)
    recorded = _finished(spans)
    abandoned = _executions(recorded)[1]
    cut_short = [
        s
        for s in recorded
        if s["name"] == "parley.step" and s["parent_span_id"] == abandoned["span_id"]
    ][-1]
    for cut in (abandoned, cut_short):
        assert cut["status"] == "ERROR", cut
        assert cut["status_description"] == (
            "StoreUnavailable: injected outage (a store outage, not a failure: the "
            "execution is abandoned and runs again)"
        )
        [raised] = cut["events"]
        assert raised["attributes"]["exception.type"] == "runtime.errors.StoreUnavailable"
    assert abandoned["attributes"]["parley.outcome"] == "abandoned"
    assert _executions(recorded)[2]["status"] == "UNSET"


def test_an_outage_outside_an_execution_is_said_as_it_is(spans: InMemorySpanExporter) -> None:
    """Only inside an execution does an outage run again: a client's call that met one
    (parley.start, parley.resume_hook) fails to its caller, and says just that."""
    for inside in (False, True):
        with contextlib.ExitStack() as stack:
            if inside:
                stack.enter_context(tracing.executing())
            with pytest.raises(RuntimeError), tracing.span("parley.probe"):
                try:
                    raise StoreUnavailable("down")
                except StoreUnavailable as exc:  # wrapped by user code: still an outage
                    raise RuntimeError("wrapped") from exc
    outside, inside_span = (s["status_description"] for s in _finished(spans))
    assert outside == "RuntimeError: wrapped"
    assert inside_span == f"RuntimeError: wrapped ({tracing.RUNS_AGAIN})"


async def test_a_hook_wait_is_one_span_when_its_run_is_blocked_then_retried(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    """The execution an answer woke blocks the run (its code changed) and records the
    wait; the retried run's execution, with the right code, recorded it again (no
    suspension between them), and the one wait was two spans."""
    run_id = await rt.start("deploy_wf")
    await worker.drain()  # waits on the workflow's hook "approve"
    [approve] = await rt.list_hooks(run_id=run_id)
    try:
        VARIANT["name"] = "swap"  # deployed while the run waits
        await rt.resume_hook(approve.token, "yes")
        await worker.drain()
        assert (await rt.get_run(run_id)).status is RunStatus.BLOCKED
    finally:
        VARIANT["name"] = "a"
    await rt.retry(run_id)
    await worker.drain()  # now waits inside ask_step, on "confirm"
    [confirm] = [h for h in await rt.list_hooks(run_id=run_id) if h.status.value == "pending"]
    await rt.resume_hook(confirm.token, "sure")
    await worker.drain()
    assert (await rt.wait(run_id, timeout=5))["answer"] == "yes"
    waits = [s for s in _finished(spans) if s["name"] == "parley.hook.wait"]
    assert sorted(s["attributes"]["parley.hook_id"] for s in waits) == sorted(
        [approve.hook_id, confirm.hook_id]
    ), waits


ANSWERING: dict[str, Any] = {}  # the Runtime that answers a hook from its on_created


async def _answer_at_once(token: str) -> None:
    rt: Runtime = ANSWERING["rt"]
    await rt.resume_hook(token, "at once")


@step
async def traced_answered_at_once() -> str:
    answer: str = await step_hook("quick", on_created=_answer_at_once)
    return answer


@workflow(name="traced_answered_while_running_wf")
async def traced_answered_while_running_wf() -> list[str]:
    # a workflow's hook and a step's, each answered while the execution that asked runs
    first: str = await hook("quick", on_created=_answer_at_once)
    return [first, await traced_answered_at_once()]


async def test_an_answer_taken_while_the_execution_runs_is_one_hook_wait_span(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    """An answer that arrives while the execution that asked still runs is taken at once
    (its suspension refused, the arrived events replayed): the wait is one
    parley.hook.wait span, as for an answer that woke a suspended run, a child of the
    execution that took it."""
    ANSWERING["rt"] = rt
    run_id = await rt.start(traced_answered_while_running_wf)
    await worker.drain()  # one execution: both suspensions are refused
    assert await rt.wait(run_id, timeout=5) == ["at once", "at once"]
    types = [e.type for e in await rt.events(run_id)]
    assert "step.suspended" not in types and "workflow.suspended" not in types, types
    recorded = _finished(spans)
    [execution] = _executions(recorded)
    assert execution["attributes"]["parley.outcome"] == "completed"
    waits = [s for s in recorded if s["name"] == "parley.hook.wait"]
    hooks = sorted(h.hook_id for h in await rt.list_hooks(None, run_id=run_id))
    assert len(hooks) == 2, hooks
    assert sorted(s["attributes"]["parley.hook_id"] for s in waits) == hooks, waits
    for wait in waits:
        assert wait["parent_span_id"] == execution["span_id"]
        assert wait["trace_id"] == execution["trace_id"]
        assert wait["attributes"]["parley.outcome"] == "answered"
        assert wait["attributes"]["parley.run_id"] == run_id
        assert wait["end_ns"] >= wait["start_ns"]


async def _run_untraced(rt: Runtime, worker: Worker, run_id: str) -> str:
    """The run's stored trace context (its start was traced), after a worker with tracing
    off executed it to its end."""
    stored: str = (await rt.events(run_id))[0].data["trace"]
    tracing.disable()  # the worker's process does not trace
    await worker.drain()
    await rt.wait(run_id, timeout=5)
    return stored


async def test_a_child_started_by_an_untraced_worker_is_in_its_parents_trace(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    """A run started by a traced client, executed by a worker with tracing off: the child
    it starts carries the parent's stored trace context as is (the worker has no span of
    its own to hand on), in the start's trace. It carried none: the untraced worker's
    traceparent() is None, and the run's stored one was not passed on."""
    run_id = await rt.start(traced_parent_wf, 1)
    stored = await _run_untraced(rt, worker, run_id)
    assert await rt.wait(run_id, timeout=5) == 2
    [child_id] = [
        e.data["child_run_id"] for e in await rt.events(run_id) if e.type == "child.started"
    ]
    assert (await rt.events(child_id))[0].data.get("trace") == stored
    assert [s["name"] for s in _finished(spans)] == ["parley.start"]  # nothing traced since


async def test_a_run_an_untraced_worker_continues_as_new_stays_in_its_trace(
    rt: Runtime, worker: Worker, spans: InMemorySpanExporter
) -> None:
    """The same for continue_as_new: each successor an untraced worker starts stores its
    predecessor's stored context as is (it stored none)."""
    run_id = await rt.start(traced_continuing_wf, 2)
    stored = await _run_untraced(rt, worker, run_id)
    runs = [run_id]
    while (ended := (await rt.events(runs[-1]))[-1]).type == "workflow.continued":
        runs.append(ended.data["continued_to"])
    assert len(runs) == 3, runs
    assert await rt.wait(runs[-1], timeout=5) == 0
    assert [(await rt.events(run))[0].data.get("trace") for run in runs] == [stored] * 3
    assert [s["name"] for s in _finished(spans)] == ["parley.start"]


@workflow(name="traced_taken_then_abandoned_wf")
async def traced_taken_then_abandoned_wf(suspend_first: bool) -> str:
    first = await hook("first") if suspend_first else ""
    taken: str = await hook("quick", on_created=_answer_at_once)
    return await traced_after_review(first + taken)


async def _taken_then_abandoned(
    backend_url: str, spans: InMemorySpanExporter, suspend_first: bool
) -> None:
    """A run whose execution takes an answer as it runs (its suspension refused) and is
    then abandoned (a store outage in the next step), then runs again to its end: each of
    its hook waits is one parley.hook.wait span, recorded by the execution that went on."""
    async with Runtime(backend_url, partitions=2, lease_seconds=0.3) as rt:
        ANSWERING["rt"] = rt
        run_id = await rt.start(traced_taken_then_abandoned_wf, suspend_first)
        worker = Worker(rt, visibility_timeout=0)
        if suspend_first:
            await worker.drain()
            [first] = await rt.list_hooks(run_id=run_id)
            await rt.resume_hook(first.token, "first, ")
        OUTAGES["left"] = 1
        try:
            await worker.drain()  # takes the answer, then abandoned: the task stays pending
            assert OUTAGES["left"] == 0
            await _run_again_to_its_end(rt, worker, run_id)
        finally:
            OUTAGES["left"] = 0
        expected = "FIRST, AT ONCE" if suspend_first else "AT ONCE"
        assert await rt.wait(run_id, timeout=5) == expected
        hooks = sorted(h.hook_id for h in await rt.list_hooks(None, run_id=run_id))
    recorded = _finished(spans)
    executions = _executions(recorded)
    outcomes = [e["attributes"]["parley.outcome"] for e in executions]
    assert outcomes[-2:] == ["abandoned", "completed"], outcomes
    waits = [s for s in recorded if s["name"] == "parley.hook.wait"]
    assert sorted(s["attributes"]["parley.hook_id"] for s in waits) == hooks, waits
    assert {s["parent_span_id"] for s in waits} == {executions[-1]["span_id"]}


async def test_an_answer_taken_as_it_ran_by_an_abandoned_execution_is_one_span(
    backend_url: str, spans: InMemorySpanExporter
) -> None:
    """The run had suspended before (on "first"): the abandoned execution that took
    "quick"'s answer records no span of it, the execution that runs the run again does
    (the answer is past the run's last suspension in the log it claims), once."""
    await _taken_then_abandoned(backend_url, spans, suspend_first=True)


async def test_an_answer_taken_before_a_first_suspension_by_an_abandoned_execution(
    backend_url: str, spans: InMemorySpanExporter
) -> None:
    """The same for a run that never suspended. Before, its wait had no span at all: the
    worker recorded only the waits that ended after the run's last suspension."""
    await _taken_then_abandoned(backend_url, spans, suspend_first=False)
