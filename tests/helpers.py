"""Test helpers shared by several test modules."""

from __future__ import annotations

import asyncio
from types import TracebackType

from runtime import RunStatus, Runtime, Worker


class running:
    """Run a worker in the background for the duration of an ``async with`` block."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Worker:
        self.task = asyncio.create_task(self.worker.run())
        return self.worker

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.worker.stop()
        assert self.task is not None
        await self.task


async def finishes_with_a_child_of_its_own(
    rt: Runtime, worker: Worker, run_id: str, old_child: str
) -> None:
    """``run_id`` (a parent_of_waiting_wf, tests/apps/children_app.py) waits on a child
    other than ``old_child`` and completes once that child's hook is answered."""
    await worker.drain()
    [new_child] = (await rt.get_run(run_id)).child_run_ids
    assert new_child != old_child
    [pending] = await rt.list_hooks(run_id=new_child)
    await rt.resume_hook(pending.token, "go")
    await worker.drain()
    assert (await rt.get_run(run_id)).status is RunStatus.COMPLETED


async def answer(rt: Runtime, name: str, value: object) -> None:
    """Answer the one pending hook named ``name``."""
    [pending] = [h for h in await rt.list_hooks() if h.name == name]
    await rt.resume_hook(pending.token, value)


async def message_then_stop(rt: Runtime, worker: Worker, workflow: object) -> str:
    """Start ``workflow``; send message "a" (topic "v") and let ``worker`` run the run;
    then answer the hook "stop" and let it run again."""
    run_id = await rt.start(workflow)  # type: ignore[arg-type]
    await worker.drain()
    await rt.send(run_id, "v", "a")
    await worker.drain()
    await answer(rt, "stop", 1)
    await worker.drain()
    return run_id


async def stop_then_message(rt: Runtime, worker: Worker, workflow: object) -> str:
    """Start ``workflow`` and let ``worker`` run it; then answer the hook "stop" and send
    message "a" (topic "v") before it runs again, and let it."""
    run_id = await rt.start(workflow)  # type: ignore[arg-type]
    await worker.drain()
    await answer(rt, "stop", 1)
    await rt.send(run_id, "v", "a")
    await worker.drain()
    return run_id


def cached_or_full(rt: Runtime, worker: Worker, full: bool) -> Worker:
    """``worker`` (it resumes runs from its replay cache), or with ``full`` one that
    replays each run's whole log."""
    return Worker(rt, timer_tick=0.01, replay_cache=0) if full else worker
