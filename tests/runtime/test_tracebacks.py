"""The traceback of an application's exception in the ``step.failed`` and
``workflow.failed`` events (bounded), and none for Parley's own control flow."""

from __future__ import annotations

import pytest

from runtime import RunStatus, Runtime, Worker, save_step_checkpoint, step, workflow
from runtime.engine.failures import MAX_TRACEBACK_CHARS, describe_error
from runtime.errors import HookTimeout, RunFailed, StepFailed


def parse_the_invoice(text: str) -> int:
    return int(text)


@step(retries=0)
async def read_invoice() -> int:
    return parse_the_invoice("not a number")


@workflow(name="tb_step_wf")
async def tb_step_wf() -> int:
    return await read_invoice()


def check_the_order(n: int) -> None:
    raise KeyError(f"order {n}")


@workflow(name="tb_workflow_wf")
async def tb_workflow_wf() -> None:
    check_the_order(7)


async def test_a_failed_step_records_its_traceback(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(tb_step_wf)
    await worker.drain()
    events = await rt.events(run_id)
    [failed] = [e.data for e in events if e.type == "step.failed"]
    tb = failed["error"]["traceback"]
    assert failed["error"]["type"] == "ValueError"
    assert "in parse_the_invoice" in tb and "in read_invoice" in tb
    assert tb.endswith("ValueError: invalid literal for int() with base 10: 'not a number'")
    # The workflow then fails on StepFailed: Parley's own signal, no traceback.
    [wf_failed] = [e.data for e in events if e.type == "workflow.failed"]
    assert wf_failed["error"]["type"] == "StepFailed"
    assert "traceback" not in wf_failed["error"]


async def test_a_failed_workflow_records_its_traceback(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(tb_workflow_wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED
    [failed] = [e.data for e in await rt.events(run_id) if e.type == "workflow.failed"]
    tb = failed["error"]["traceback"]
    assert "in check_the_order" in tb and "in tb_workflow_wf" in tb
    assert info.error is not None and info.error["traceback"] == tb


def test_the_traceback_is_bounded_and_only_for_real_exceptions() -> None:
    def deep(n: int) -> None:
        if n == 0:
            raise RuntimeError("x" * 20_000)
        deep(n - 1)

    try:
        deep(50)
    except RuntimeError as exc:
        tb = describe_error(exc)["traceback"]
    assert len(tb) == MAX_TRACEBACK_CHARS
    assert tb.startswith("\u2026") and tb.endswith("x")
    assert "traceback" not in describe_error(StepFailed("step 'a' failed"))
    assert "traceback" not in describe_error(ValueError("never raised"))


async def test_a_failed_runs_error_names_the_run_once(rt: Runtime, worker: Worker) -> None:
    """Before, the run's recorded message was ``str()`` of its StepFailed, "(run=…)" and
    all, and RunFailed added it again: "... (run=r-1) (run=r-1)"."""
    run_id = await rt.start(tb_step_wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.error is not None
    assert info.error["message"] == (
        "step 'read_invoice-0' failed: ValueError: invalid literal for int() with base 10:"
        " 'not a number'"
    )
    with pytest.raises(RunFailed) as failed:
        await rt.wait(run_id, timeout=5)
    assert str(failed.value).count(run_id) == 1


def test_an_error_about_another_run_or_a_hook_still_names_it() -> None:
    about_a_hook = HookTimeout("no answer in time", run_id="r-1", hook_id="h0.ask")
    assert describe_error(about_a_hook, "r-1")["message"] == "no answer in time (hook=h0.ask)"
    about_another_run = StepFailed("it failed", run_id="r-2")
    assert describe_error(about_another_run, "r-1")["message"] == "it failed (run=r-2)"
    assert describe_error(about_another_run)["message"] == "it failed (run=r-2)"


class NotJson:
    pass


@step(retries=0)
async def saves_a_bad_checkpoint() -> None:
    await save_step_checkpoint({"reading": NotJson()})  # InvalidPayload about this run


@workflow(name="tb_own_error_wf")
async def tb_own_error_wf() -> None:
    await saves_a_bad_checkpoint()


async def test_a_step_failing_on_an_error_about_its_own_run_names_the_run_once(
    rt: Runtime, worker: Worker
) -> None:
    """A step's recorded error named its run ("(run=…)") inside its own run's log, and the
    run's error and RunFailed then carried that name along: twice in what the caller saw."""
    run_id = await rt.start(tb_own_error_wf)
    await worker.drain()
    [failed] = [e.data for e in await rt.events(run_id) if e.type == "step.failed"]
    assert failed["error"]["type"] == "InvalidPayload"
    assert run_id not in failed["error"]["message"]
    info = await rt.get_run(run_id)
    assert info.error is not None and run_id not in info.error["message"]
    with pytest.raises(RunFailed) as raised:
        await rt.wait(run_id, timeout=5)
    assert str(raised.value).count(run_id) == 1


class OutOfTheBlue(BaseException):
    """An application's BaseException: not an Exception, not one of Parley's signals."""


def raise_out_of_the_blue() -> None:
    raise OutOfTheBlue("the code raised a BaseException")


@workflow(name="tb_base_exception_wf")
async def tb_base_exception_wf() -> None:
    raise_out_of_the_blue()


async def test_a_base_exception_of_the_codes_own_fails_the_run(rt: Runtime, worker: Worker) -> None:
    """Before, it went past the worker (which takes Exception): the run stayed "running"
    without a word, executed again at each redelivery."""
    run_id = await rt.start(tb_base_exception_wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED
    assert info.error is not None and info.error["type"] == "OutOfTheBlue"
    assert info.error["message"] == "the code raised a BaseException"
    assert "in raise_out_of_the_blue" in info.error["traceback"]
