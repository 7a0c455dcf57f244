"""Both demos — the LangChain one and the ``/`` support agent (its own loop, through
``ChatModelAdapter``) — on a real model (``PARLEY_DEMO_MODEL``, LangChain
``init_chat_model``) served by a local OpenAI-compatible streaming endpoint: the same
tools, the same durable ``ask_visitor``, streamed text; a worker SIGKILLed in the middle of
the final answer is replaced and the run completes, its earlier turns not run again and
the visitor asked once. Each worker has its own URL of the endpoint, so that each request
says which worker sent it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from examples import langchain_agent, trace
from examples.support_agent import hook_name
from runtime import HookInfo, RunStatus, Runtime, Worker
from runtime.ids import NAME_RE
from runtime.settings import TASKS_GROUP
from tests.helpers import running
from tests.processes import PARTITIONS, WorkerProcess
from tests.raw_redis import raw

from .fake_openai import (
    FINAL_CHUNKS,
    PRODUCTS,
    FakeOpenAI,
    final_text,
    support_final_text,
    support_script,
)

pytestmark = [pytest.mark.e2e, pytest.mark.redis]
APP = "examples.langchain_agent"


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


@pytest.fixture
async def prt(redis_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(redis_url, partitions=PARTITIONS) as runtime:
        yield runtime


async def outbox(rt: Runtime, session: str) -> list[dict[str, object]]:
    return [m for _, m in await rt.read_outbox(session, "0-0", count=10_000)]


def model_env(endpoint: FakeOpenAI, sender: str) -> dict[str, str]:
    """The demos on the fake model, their requests named ``sender``."""
    return {
        "PARLEY_DEMO_MODEL": "openai:fake-model",
        "PARLEY_DEMO_MODEL_BASE_URL": endpoint.url_for(sender),
        "PARLEY_DEMO_MODEL_API_KEY": "not-a-real-key",
    }


def worker(redis_url: str, app: str, endpoint: FakeOpenAI, sender: str) -> WorkerProcess:
    return WorkerProcess(redis_url, app, lease=1.0, extra_env=model_env(endpoint, sender))


async def pending_hook(rt: Runtime, run_id: str) -> HookInfo:
    for _ in range(400):
        hooks = await rt.list_hooks("pending", run_id=run_id)
        if hooks:
            break
        await asyncio.sleep(0.05)
    [hook] = hooks
    return hook


def stop(workers: list[WorkerProcess]) -> list[str]:
    """Stop the workers; returns their logs (deleted as they stop)."""
    logs = [process.log() for process in workers]
    for process in workers:
        process.stop()
    return logs


def asked_once_more_after_the_kill(endpoint: FakeOpenAI, logs: list[str]) -> None:
    """Who asked the model what: the killed worker each turn once, the worker that replaced
    it once, for the interrupted turn (its step re-executed from its checkpoint), the
    earlier turns not again. A second request of the second worker would be a second
    execution of the run: its log (in the message) says why (a reclaim, a lease lost, an
    outage)."""
    asked = [
        (request["messages"][-1]["role"], sender)
        for request, sender in zip(endpoint.requests, endpoint.senders, strict=True)
    ]
    expected = [("user", "killed"), ("tool", "killed"), ("tool", "killed"), ("tool", "next")]
    said = [line for log in logs for line in log.splitlines() if " INFO " not in line]
    assert asked == expected, "\n".join([f"(role, worker) asked: {asked}", *said])


async def test_the_demo_on_a_configured_model_survives_a_sigkill_mid_stream(
    redis_url: str, prt: Runtime, endpoint: FakeOpenAI, demo_trace: Path
) -> None:
    workers = [worker(redis_url, APP, endpoint, "killed")]
    try:
        session = prt.new_session_id()
        await prt.store.create_session(session, 3600)
        run_id = await prt.start("langchain_agent", "where is my order 1234?", session=session)
        hook = await pending_hook(prt, run_id)
        assert hook.schema is not None and hook.schema["enum"] == ["refund", "reship"]
        await prt.resume_hook(hook.token, "refund")
        await asyncio.to_thread(endpoint.final_started.wait, 20)
        workers[0].kill()  # SIGKILL while the model streams the final answer
        workers.append(worker(redis_url, APP, endpoint, "next"))
        result = await prt.wait(run_id, timeout=60)
    finally:
        logs = stop(workers)
    assert result["reply"] == final_text("refund")
    # the side-effecting tool and the prompt ran once; only the interrupted turn re-ran
    counts = trace.counts(demo_trace, run_id)
    assert counts["lookup_order"] == 1 and counts["on_created"] == 1
    asked_once_more_after_the_kill(endpoint, logs)
    messages = await outbox(prt, session)
    assert sum(m["type"] == "prompt" for m in messages) == 1
    chunks = [m for m in messages if m["type"] == "text" and m["seq"] == 0]
    restarted = [m["message_id"] for m in chunks]
    final_id = restarted[-1]
    # the final message was streamed, cut, then streamed again from its first chunk
    assert restarted.count(final_id) == 2
    final = [m for m in messages if m["type"] == "text" and m["message_id"] == final_id]
    assert len(final) > FINAL_CHUNKS  # a partial stream and a whole one


async def test_the_support_demo_on_a_configured_model_survives_a_sigkill_mid_stream(
    redis_url: str, prt: Runtime, demo_trace: Path
) -> None:
    endpoint = FakeOpenAI(script=support_script)
    app = "examples.support_agent"
    workers = [worker(redis_url, app, endpoint, "killed")]
    try:
        session = prt.new_session_id()
        await prt.store.create_session(session, 3600)
        run_id = await prt.start("support_agent", "my worker crashed", session=session)
        hook = await pending_hook(prt, run_id)
        # the model's own tool call, through the durable ask_visitor path
        assert hook.schema is not None and hook.schema["enum"] == PRODUCTS
        assert ".ask_visitor-call_ask." in hook.token
        await prt.resume_hook(hook.token, "Parley Cloud")
        await asyncio.to_thread(endpoint.final_started.wait, 20)
        workers[0].kill()  # SIGKILL while the model streams the final answer
        workers.append(worker(redis_url, app, endpoint, "next"))
        result = await prt.wait(run_id, timeout=60)
    finally:
        logs = stop(workers)
        endpoint.close()
    assert result["reply"] == support_final_text("Parley Cloud")
    assert {"role": "user", "content": "Parley Cloud"} in result["memory"]
    # the completed model calls and the prompt ran once; only the interrupted turn re-ran
    assert trace.counts(demo_trace, run_id) == {
        "turn:0": 1,
        "turn:1": 1,
        "turn:2": 2,
        "on_created": 1,
    }
    asked_once_more_after_the_kill(endpoint, logs)
    # the knowledge base was searched once: its one result is in every later transcript
    for request in endpoint.requests[1:]:
        results = [m for m in request["messages"] if m.get("tool_call_id") == "call_search"]
        assert len(results) == 1 and "Workers that crash" in results[0]["content"]
    assert endpoint.requests[1]["tools"][0]["function"]["name"] == "search_kb"
    messages = await outbox(prt, session)
    assert sum(m["type"] == "prompt" for m in messages) == 1
    first = [m for m in messages if m["type"] == "text" and m["message_id"] == f"{run_id}:0"]
    assert "".join(str(m["delta"]) for m in first) == "Let me look that up for you. "
    final = [m for m in messages if m["type"] == "text" and m["message_id"] == f"{run_id}:2"]
    # the final message was streamed, cut, then streamed again from its first chunk
    assert [m["seq"] for m in final].count(0) == 2
    assert len(final) > FINAL_CHUNKS  # a partial stream and a whole one


def test_a_tool_call_id_a_hook_name_cannot_hold_names_the_hook_by_a_digest() -> None:
    assert hook_name("call_ask") == "ask_visitor-call_ask"
    for odd in ("toolu:01/ÄB", "x" * 80):
        assert NAME_RE.fullmatch(hook_name(odd)) and hook_name(odd) == hook_name(odd)
    assert hook_name("a:b") != hook_name("a/b")


async def add_tasks(rt: Runtime, run_id: str, n: int, consumer: str | None = None) -> None:
    """``n`` more tasks of the run (as a task is delivered again: a reclaim, a resume),
    read by ``consumer`` if one is given."""
    store = raw(rt)
    tasks = store.run_keys(run_id).tasks
    for _ in range(n):
        await store.client.xadd(tasks, {"r": run_id, "w": "langchain_agent"})
    if consumer is not None:
        await store.client.xreadgroup(TASKS_GROUP, consumer, {tasks: ">"})


@pytest.mark.parametrize(
    "again", ["deferred_behind_its_execution", "in_its_reclaim_batch", "while_claimed_slowly"]
)
async def test_a_run_given_to_a_worker_twice_at_once_is_executed_once_at_a_time(
    again: str,
    redis_url: str,
    endpoint: FakeOpenAI,
    demo_trace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker never claims or executes one run twice at once: a task of a run it is
    claiming or executing is deferred, and a run's deferred tasks start one by one. Both
    claims won before (a worker may take its own run's lease back), two executions streamed
    the same turn, and the first's end took the second off the heartbeats: reclaimed, it
    ran once more, and so on. Seen under load, SIGKILL test above: a worker's reclaim gave
    it back the task it executed while an import blocked its loop (deferred); an answer
    enqueued another just as the run suspended (deferred too): the two started together.
    Or a killed worker held both and a reclaim delivered them together; or a claim
    outlasted the visibility timeout, and the worker's reclaim handed its task again."""
    for name, value in model_env(endpoint, "worker").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(langchain_agent, "_agents", {})  # an agent on this endpoint
    async with Runtime(redis_url, partitions=PARTITIONS, lease_seconds=1.0) as rt:
        claim = rt.store.claim
        claimed: list[str] = []
        answered = asyncio.Event()

        async def claim_as_seen(task: Any, *args: Any, **kwargs: Any) -> Any:
            first = not claimed
            if task.message_id not in claimed:
                claimed.append(task.message_id)
                if again == "while_claimed_slowly":  # its first claim, of each task
                    await asyncio.sleep(2.0)  # the visibility timeout (1 s), a reclaim pass
            if again == "deferred_behind_its_execution":
                if first:  # two more tasks, read while the run's first execution runs
                    got = await claim(task, *args, **kwargs)
                    await add_tasks(rt, run_id, 2)
                    await asyncio.sleep(0.5)  # read (the worker blocks 50 ms at most)
                    return got
                await answered.wait()  # they claim the run once it was woken
            return await claim(task, *args, **kwargs)

        monkeypatch.setattr(rt.store, "claim", claim_as_seen)
        session = rt.new_session_id()
        await rt.store.create_session(session, 3600)
        run_id = await rt.start("langchain_agent", "where is my order 1234?", session=session)
        if again == "in_its_reclaim_batch":
            await add_tasks(rt, run_id, 1, consumer="killed")  # both tasks
        async with running(Worker(rt, APP, block_seconds=0.05, timer_tick=0.05)):
            hook = await pending_hook(rt, run_id)
            while (await rt.get_run(run_id)).status is not RunStatus.SUSPENDED:
                await asyncio.sleep(0.01)
            await rt.resume_hook(hook.token, "refund")
            answered.set()
            result = await rt.wait(run_id, timeout=60)
        messages = await outbox(rt, session)
    assert result["reply"] == final_text("refund")
    assert [m["messages"][-1]["role"] for m in endpoint.requests] == ["user", "tool", "tool"]
    assert trace.counts(demo_trace, run_id) == {"lookup_order": 1, "on_created": 1}
    starts = [m["message_id"] for m in messages if m["type"] == "text" and m["seq"] == 0]
    assert len(starts) == len(set(starts)) == 2  # each turn's text streamed once


@pytest.mark.parametrize("app", ["examples.support_agent", "examples.langchain_agent"])
def test_a_demo_app_builds_its_configured_model_when_imported(app: str) -> None:
    """Built as the app is imported (a worker's start, before it takes tasks), not in the
    first step: building it imports the provider's package, which held a loaded worker's
    loop past its 1 s lease, and the run was executed again. Before, importing the app
    imported no provider (['False'])."""
    import subprocess
    import sys

    probe = f"import sys, {app}; print('langchain_openai' in sys.modules)"
    env = {
        "PATH": "/usr/bin:/bin",
        "PARLEY_DEMO_MODEL": "openai:fake-model",
        "PARLEY_DEMO_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
        "PARLEY_DEMO_MODEL_API_KEY": "not-a-real-key",
    }
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]
