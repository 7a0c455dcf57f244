"""The contract of the Store protocol (runtime.store.base.Store), run against every
backend: the embedded store (memory://) and real Redis.

Only the protocol's methods are used here, through ``rt.store``, so a new backend passes
this suite by implementing the protocol, whatever it stores underneath. Deadlines are
driven by the ``now_ms`` given to ``fire_due``, never by sleeping; the one test of
retention expiry waits a little over a second, the consumer sweep's a tenth of one.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from runtime import Runtime
from runtime.errors import StoreUnavailable, UsageError
from runtime.ids import RUN_ID_RE
from runtime.models import EventType, HookStatus, RunStatus
from runtime.store import (
    Answer,
    Applied,
    ApplyOutcome,
    CancelOutcome,
    Claim,
    ClaimStatus,
    Finish,
    HookSpec,
    ResumeOutcome,
    RetryOutcome,
    Store,
    Task,
    Writes,
)

CONSUMER = "c1"
VERSION = "v1"
LEASE_MS = 30_000
MAX_EVENTS = 1000
RETENTION = 3600
START_DATA = b'{"args":[1],"kwargs":{"k":"v"}}'
SCHEMA = {"type": "object", "required": ["choice"]}


@pytest.fixture
def store(rt: Runtime) -> Store:
    return rt.store


def data(**fields: Any) -> bytes:
    return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


def all_partitions(store: Store) -> tuple[int, ...]:
    return tuple(range(store.partitions))


async def read_all_tasks(store: Store, consumer: str = CONSUMER) -> list[Task]:
    """Every new task, read through each task source the store offers."""
    tasks: list[Task] = []
    for source in store.task_sources():
        tasks += await store.read_tasks(consumer, source, 100, None)
    return tasks


async def task_of(store: Store, run_id: str, consumer: str = CONSUMER) -> Task:
    tasks = [t for t in await read_all_tasks(store, consumer) if t.run_id == run_id]
    assert len(tasks) == 1, tasks
    return tasks[0]


async def claim(
    store: Store,
    task: Task,
    consumer: str = CONSUMER,
    lease_ms: int = LEASE_MS,
    version: str = VERSION,
    serves: tuple[str, ...] = (VERSION,),
) -> Claim:
    """Claim ``task`` as a worker of ``version`` serving ``serves``."""
    return await store.claim(task, consumer, lease_ms, version, serves)


async def start(
    store: Store, session: str | None = None, workflow: str = "wf", input: bytes = START_DATA
) -> str:
    run_id = store.new_run_id(session)
    assert await store.start(run_id, workflow, session, input) is True
    return run_id


@dataclass
class Running:
    """A run claimed by CONSUMER: its task, fence and the last event id it has seen."""

    run_id: str
    task: Task
    fence: str
    seen: str


async def running(store: Store, session: str | None = None) -> Running:
    run_id = await start(store, session)
    task = await task_of(store, run_id)
    claimed = await claim(store, task)
    assert claimed.status is ClaimStatus.OK
    return Running(run_id, task, claimed.fence, claimed.events[-1].id)


async def apply(
    store: Store,
    run: Running,
    writes: Writes,
    *,
    suspension: Writes | None = None,
    finish: Finish | None = None,
    max_events: int = MAX_EVENTS,
    retention_seconds: int = RETENTION,
) -> Applied:
    applied = await store.apply(
        run.run_id,
        run.fence,
        run.seen,
        writes,
        suspension=suspension,
        finish=finish,
        max_events=max_events,
        retention_seconds=retention_seconds,
    )
    if applied.last_id:
        run.seen = applied.last_id
    return applied


def hook_writes(
    run_id: str,
    hook_id: str = "s-0.approve",
    *,
    schema: dict[str, Any] | None = None,
    expires_at_ms: int | None = None,
    prompt: str | None = None,
) -> Writes:
    meta: dict[str, Any] = {"name": hook_id.rsplit(".", 1)[-1], "step_id": "s-0"}
    if schema is not None:
        meta["schema"] = schema
    if expires_at_ms is not None:
        meta["expires_at"] = expires_at_ms
    if prompt is not None:
        meta["prompt"] = prompt
    writes = Writes()
    writes.event(EventType.HOOK_CREATED, data(hook_id=hook_id, **meta))
    writes.create_hook(
        HookSpec(hook_id, f"{run_id}:{hook_id}", meta, schema is not None, expires_at_ms)
    )
    return writes


def suspend(wait: str) -> Writes:
    writes = Writes()
    writes.event(EventType.WORKFLOW_SUSPENDED, data(wait=wait))
    return writes


async def suspended_on_hook(
    store: Store,
    hook_id: str = "s-0.approve",
    *,
    schema: dict[str, Any] | None = None,
    expires_at_ms: int | None = None,
    session: str | None = None,
) -> Running:
    run = await running(store, session)
    writes = hook_writes(run.run_id, hook_id, schema=schema, expires_at_ms=expires_at_ms)
    applied = await apply(store, run, writes, suspension=suspend(hook_id))
    assert applied.outcome is ApplyOutcome.OK
    return run


def answer(run_id: str, hook_id: str, value: Any, *, validated: bool = False) -> Answer:
    payload = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    token = f"{run_id}:{hook_id}"
    return Answer(
        run_id=run_id,
        hook_id=hook_id,
        token=token,
        payload=payload,
        digest=hashlib.sha1(payload).hexdigest(),
        event=b'{"hook_id":"%s","payload":%s}' % (hook_id.encode(), payload),
        announcement=b'{"type":"answered","token":"%s"}' % token.encode(),
        validated=validated,
    )


async def event_types(store: Store, run_id: str) -> list[str]:
    events = await store.events(run_id)
    assert events is not None
    return [e.type for e in events]


async def status_of(store: Store, run_id: str) -> RunStatus | None:
    info = await store.get_run(run_id)
    return None if info is None else info.status


async def cancel(store: Store, run_id: str, retention_seconds: int = RETENTION) -> Any:
    return await store.cancel(
        run_id,
        event=data(reason="test"),
        message=data(type="status", status="cancelled", run_id=run_id),
        retention_seconds=retention_seconds,
    )


async def same_group_sessions(store: Store, n: int) -> list[str]:
    """``n`` session ids whose outboxes one read_outboxes can read together."""
    by_group: dict[str, list[str]] = {}
    for i in range(1000):
        session = f"session-{i:04d}-contract"
        group = by_group.setdefault(store.outbox_group(session), [])
        group.append(session)
        if len(group) == n:
            return group
    raise AssertionError("no outbox group got enough sessions")


# lifecycle ----------------------------------------------------------------------------


async def test_open_is_idempotent_and_ping_answers(store: Store) -> None:
    await store.open()
    await store.open()
    await store.ping()


async def test_a_closed_store_is_unavailable_until_reopened(store: Store) -> None:
    run_id = await start(store)
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.ping()
    await store.close()  # idempotent
    await store.open()
    await store.ping()
    assert await status_of(store, run_id) is RunStatus.PENDING  # the data outlives a close


# runs ---------------------------------------------------------------------------------


async def test_new_run_ids_are_fresh_and_well_formed(store: Store) -> None:
    ids = {store.new_run_id(None) for _ in range(50)} | {store.new_run_id("s" * 20)}
    assert len(ids) == 51
    assert all(RUN_ID_RE.match(run_id) for run_id in ids)


async def test_runs_of_a_session_share_its_partition(store: Store) -> None:
    session = "session-partition-0001"
    session_runs = {await start(store, session) for _ in range(8)}
    loose_runs = {await start(store) for _ in range(16)}
    tasks = {t.run_id: t for t in await read_all_tasks(store)}
    assert set(tasks) == session_runs | loose_runs
    assert len({tasks[r].partition for r in session_runs}) == 1
    # (without a session, runs spread: the check above is not true by accident)
    assert len({tasks[r].partition for r in loose_runs}) > 1
    # and the session's outbox group is stable
    assert store.outbox_group(session) == store.outbox_group(session)


async def test_a_start_with_a_message_posts_it_only_when_it_creates_the_run(
    store: Store,
) -> None:
    session = "session-start-msg-0001"
    run_id = store.new_run_id(session)
    message = data(type="visitor", text="hello")
    assert await store.start(
        run_id, "wf", session, START_DATA, message=message, retention_seconds=RETENTION
    )
    again = data(type="visitor", text="hello again")
    assert not await store.start(
        run_id, "wf", session, START_DATA, message=again, retention_seconds=RETENTION
    )
    assert [e.message for e in await store.read_outbox(session, "0-0", 10, None)] == [
        orjson.loads(message)
    ]
    # a session the run does not fit is the caller's mistake: refused, nothing written
    loose = store.new_run_id(None)
    while store.fits_session(loose, session):
        loose = store.new_run_id(None)
    with pytest.raises(UsageError, match="fits_session") as refused:
        await store.start(loose, "wf", session, START_DATA, message=message)
    assert refused.value.run_id == loose
    assert await store.get_run(loose) is None
    # without the session's retention (EXPIRE 0 would delete the outbox): refused
    other = store.new_run_id(session)
    with pytest.raises(UsageError, match="retention"):
        await store.start(other, "wf", session, START_DATA, message=again)
    assert await store.get_run(other) is None
    assert len(await store.read_outbox(session, "0-0", 10, None)) == 1


async def test_start_creates_the_run_once(store: Store) -> None:
    run_id = store.new_run_id(None)
    assert await store.start(run_id, "wf", None, START_DATA) is True
    before = await store.events(run_id)
    assert await store.start(run_id, "other", "session-other-0001", b'{"args":[2]}') is False
    # nothing changed: one run, its first event, one task
    assert await store.events(run_id) == before
    assert before is not None and [(e.type, e.data) for e in before] == [
        ("workflow.started", {"args": [1], "kwargs": {"k": "v"}})
    ]
    info = await store.get_run(run_id)
    assert info is not None
    assert (info.workflow, info.session, info.status) == ("wf", None, RunStatus.PENDING)
    assert info.created_at is not None and abs(info.created_at - time.time()) < 60
    tasks = await read_all_tasks(store)
    assert [(t.run_id, t.workflow) for t in tasks] == [(run_id, "wf")]
    assert (await store.stats())["started"] == 1


async def test_a_session_run_knows_its_session(store: Store) -> None:
    session = "session-known-0001"
    run_id = await start(store, session)
    info = await store.get_run(run_id)
    assert info is not None and info.session == session
    claimed = await claim(store, await task_of(store, run_id))
    assert claimed.session == session


async def test_announced_workflows(store: Store) -> None:
    assert await store.workflow_announced("billing") is False
    await store.announce_workflows(["billing", "support"])
    await store.announce_workflows([])
    assert await store.workflow_announced("billing") is True
    assert await store.workflow_announced("support") is True
    assert await store.workflow_announced("other") is False


# tasks --------------------------------------------------------------------------------


async def test_task_sources_cover_every_partition_once(store: Store) -> None:
    partitions = [p for source in store.task_sources() for p in source]
    assert sorted(partitions) == list(range(store.partitions))


async def test_a_task_is_delivered_once(store: Store) -> None:
    run_id = await start(store, workflow="billing")
    [task] = await read_all_tasks(store)
    assert (task.run_id, task.workflow) == (run_id, "billing")
    assert 0 <= task.partition < store.partitions
    assert await read_all_tasks(store) == []
    assert await read_all_tasks(store, "c2") == []  # nor to another consumer


async def test_read_tasks_respects_count_and_blocks_at_most_block_ms(store: Store) -> None:
    runs = {await start(store) for _ in range(6)}
    first = await store.read_tasks(CONSUMER, all_partitions(store), 1, None)
    assert 1 <= len(first) <= store.partitions  # COUNT applies per partition
    rest = await read_all_tasks(store)
    assert {t.run_id for t in first + rest} == runs
    began = time.monotonic()
    assert await store.read_tasks(CONSUMER, all_partitions(store), 10, 100) == []
    assert 0.05 <= time.monotonic() - began < 2


async def test_a_blocking_read_returns_when_a_task_arrives(store: Store) -> None:
    reader = asyncio.ensure_future(store.read_tasks(CONSUMER, all_partitions(store), 10, 5000))
    await asyncio.sleep(0.05)
    run_id = await start(store)
    tasks = await asyncio.wait_for(reader, 3)
    assert [t.run_id for t in tasks] == [run_id]


async def test_reclaim_takes_over_idle_unacknowledged_tasks(store: Store) -> None:
    run_id = await start(store)
    task = await task_of(store, run_id)
    assert await store.reclaim("c2", 60_000) == []  # not idle long enough
    [taken] = await store.reclaim("c2", 0)
    assert taken == task  # the same message, now c2's
    [again] = await store.reclaim("c3", 0)  # still unacknowledged
    assert again.message_id == task.message_id


async def test_hand_back_requeues_the_run_for_any_consumer(store: Store) -> None:
    run_id = await start(store, workflow="billing")
    task = await task_of(store, run_id)
    await store.hand_back(task)
    [new] = await read_all_tasks(store, "c2")
    assert (new.run_id, new.workflow, new.partition) == (run_id, "billing", task.partition)
    assert new.message_id != task.message_id
    # the old message is acknowledged: nothing left for a reclaim but the new one
    assert [t.message_id for t in await store.reclaim("c3", 0)] == [new.message_id]


async def test_give_back_requeues_what_a_consumer_read_and_did_not_finish(store: Store) -> None:
    runs = {await start(store, workflow="billing") for _ in range(3)}
    read = await read_all_tasks(store, "c1")
    done, *unfinished = read
    await store.hand_back(done)  # acknowledged (here by a hand-back): not c1's any more
    assert await store.give_back("c1") == len(unfinished)
    again = await read_all_tasks(store, "c2")
    assert sorted(t.run_id for t in again) == sorted(t.run_id for t in read)
    assert {t.run_id for t in again} == runs
    assert {t.workflow for t in again} == {"billing"}
    messages = {(t.partition, t.message_id) for t in again}
    assert not messages & {(t.partition, t.message_id) for t in read}
    # nothing of c1's is left to reclaim; giving back again finds nothing
    reclaimed = await store.reclaim("c3", 0)
    assert {(t.partition, t.message_id) for t in reclaimed} == messages
    assert await store.give_back("c1") == 0


async def test_sweep_forgets_idle_empty_consumers_and_never_a_pending_task(store: Store) -> None:
    await task_of(store, await start(store), "dead")
    await store.reclaim(CONSUMER, 0)  # what the dead consumer read is c1's now
    held = await task_of(store, await start(store), "holder")
    await asyncio.sleep(0.12)
    assert await store.sweep_consumers(CONSUMER, 60_000) == 0  # none idle that long
    assert await store.sweep_consumers(CONSUMER, 50) >= 1  # the dead one, at least
    assert await store.sweep_consumers(CONSUMER, 50) == 0  # idempotent
    # the holder's task is still pending, c1's too (a caller never sweeps itself). Keyed
    # by partition too: each partition's stream numbers its entries on its own, so two
    # tasks added in the same millisecond in two partitions have the same message id.
    reclaimed = {(t.partition, t.message_id) for t in await store.reclaim("c2", 0)}
    assert (held.partition, held.message_id) in reclaimed
    assert len(reclaimed) == 2


# claim --------------------------------------------------------------------------------


async def test_claim_returns_the_lease_and_what_replay_needs(store: Store) -> None:
    run_id = await start(store, workflow="billing")
    claimed = await claim(store, await task_of(store, run_id))
    assert claimed.status is ClaimStatus.OK
    assert claimed.fence and claimed.workflow == "billing" and claimed.session is None
    assert [(e.type, e.data) for e in claimed.events] == [
        ("workflow.started", {"args": [1], "kwargs": {"k": "v"}})
    ]
    assert claimed.checkpoints == {}
    assert await status_of(store, run_id) is RunStatus.RUNNING


async def test_a_new_claim_returns_checkpoints_and_moves_the_fence(store: Store) -> None:
    run = await running(store)
    writes = Writes()
    writes.event(EventType.STEP_STARTED, data(step_id="s-0"))
    writes.save_checkpoint("s-0", b'{"draft":1}')
    writes.save_checkpoint("s-1", b'{"x":2}')
    writes.delete_checkpoint("s-1")
    assert (await apply(store, run, writes)).outcome is ApplyOutcome.OK
    again = await claim(store, run.task)  # the same consumer may take its run back
    assert again.status is ClaimStatus.OK
    assert again.fence != run.fence
    assert again.checkpoints == {"s-0": b'{"draft":1}'}
    assert [e.type for e in again.events] == ["workflow.started", "step.started"]


async def test_claim_skips_a_finished_run_and_acks_the_task(store: Store) -> None:
    run = await running(store)
    await store.hand_back(run.task)  # a duplicate task of the run
    duplicate = await task_of(store, run.run_id, "c2")
    done = await apply(store, run, Writes(), finish=Finish(RunStatus.COMPLETED, b"1"))
    assert done.outcome is ApplyOutcome.OK
    skipped = await claim(store, duplicate, "c2")
    assert skipped.status is ClaimStatus.SKIPPED
    assert await store.reclaim("c3", 0) == []  # acknowledged
    assert await status_of(store, run.run_id) is RunStatus.COMPLETED


async def test_claim_skips_a_suspended_run_and_acks_the_task(store: Store) -> None:
    run = await running(store)
    await store.hand_back(run.task)
    duplicate = await task_of(store, run.run_id, "c2")
    assert (await apply(store, run, Writes(), suspension=suspend("t0"))).outcome is (
        ApplyOutcome.OK
    )
    assert (await claim(store, duplicate, "c2")).status is ClaimStatus.SKIPPED
    assert await store.reclaim("c3", 0) == []
    assert await status_of(store, run.run_id) is RunStatus.SUSPENDED


async def test_claim_skips_a_run_that_does_not_exist(store: Store) -> None:
    ghost = Task(store.new_run_id(None), "wf", "1-1", 0)
    assert (await claim(store, ghost)).status is ClaimStatus.SKIPPED
    assert await store.get_run(ghost.run_id) is None


async def test_claim_is_busy_while_another_consumer_holds_a_live_lease(store: Store) -> None:
    run = await running(store)
    [taken] = await store.reclaim("c2", 0)  # c2 gets the same task (c1 looks dead)
    assert (await claim(store, taken, "c2")).status is ClaimStatus.BUSY
    # the task stays pending: another reclaim still finds it
    assert [t.message_id for t in await store.reclaim("c3", 0)] == [run.task.message_id]
    # c1's lease is untouched
    writes = Writes()
    writes.event(EventType.STEP_STARTED, data(step_id="s-0"))
    assert (await apply(store, run, writes)).outcome is ApplyOutcome.OK


async def test_an_expired_lease_can_be_taken_over(store: Store) -> None:
    run_id = await start(store)
    task = await task_of(store, run_id)
    first = await claim(store, task, CONSUMER, lease_ms=1)
    await asyncio.sleep(0.02)
    second = await claim(store, task, "c2")
    assert second.status is ClaimStatus.OK and second.fence != first.fence
    stale = Running(run_id, task, first.fence, first.events[-1].id)
    assert (await apply(store, stale, Writes())).outcome is ApplyOutcome.LOST


# apply --------------------------------------------------------------------------------


async def test_apply_appends_events_in_order(store: Store) -> None:
    run = await running(store)
    writes = Writes()
    writes.event(EventType.STEP_STARTED, data(step_id="s-0", attempt=0))
    writes.event(EventType.STEP_COMPLETED, data(step_id="s-0", result=[1, 2]))
    applied = await apply(store, run, writes)
    assert applied.outcome is ApplyOutcome.OK and applied.arrived == []
    events = await store.events(run.run_id)
    assert events is not None
    assert [(e.type, e.data) for e in events[1:]] == [
        ("step.started", {"step_id": "s-0", "attempt": 0}),
        ("step.completed", {"step_id": "s-0", "result": [1, 2]}),
    ]
    assert applied.last_id == events[-1].id
    ids = [tuple(int(part) for part in e.id.split("-")) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # an empty batch is fine and appends nothing
    empty = await apply(store, run, Writes())
    assert empty.outcome is ApplyOutcome.OK and empty.last_id is None
    assert await store.events(run.run_id) == events


async def test_apply_with_a_stale_fence_is_lost_and_writes_nothing(store: Store) -> None:
    run = await running(store)
    again = await claim(store, run.task)  # the lease moved on
    writes = Writes()
    writes.event(EventType.STEP_STARTED, data(step_id="s-0"))
    writes.save_checkpoint("s-0", b"1")
    writes.create_hook(HookSpec("h0.x", f"{run.run_id}:h0.x", {"name": "x"}, False, 10))
    writes.schedule_timer("t0", 10)
    lost = await apply(store, run, writes, suspension=suspend("h0.x"))
    assert lost.outcome is ApplyOutcome.LOST and lost.last_id is None
    assert await event_types(store, run.run_id) == ["workflow.started"]
    assert await store.run_hooks(run.run_id) == []
    assert await status_of(store, run.run_id) is RunStatus.RUNNING
    report = await store.fire_due(now_ms=100, limit=10)
    assert report.lateness_ms == [] and report.next_due_ms is None  # no deadline written
    assert (await claim(store, run.task)).checkpoints == {}
    assert again.fence != run.fence


async def test_apply_beyond_max_events_is_refused_whole(store: Store) -> None:
    run = await running(store)  # 1 event so far
    writes = Writes()
    for i in range(2):
        writes.event(EventType.STEP_STARTED, data(step_id=f"s-{i}"))
    writes.save_checkpoint("s-0", b"1")
    limited = await apply(store, run, writes, suspension=suspend("t0"), max_events=3)
    assert limited.outcome is ApplyOutcome.LIMIT  # 1 + 2 + 1 suspension event > 3
    assert await event_types(store, run.run_id) == ["workflow.started"]
    assert await status_of(store, run.run_id) is RunStatus.RUNNING
    assert (await claim(store, run.task)).checkpoints == {}


async def test_apply_up_to_max_events_is_allowed(store: Store) -> None:
    run = await running(store)
    writes = Writes()
    for i in range(3):
        writes.event(EventType.STEP_STARTED, data(step_id=f"s-{i}"))
    assert (await apply(store, run, writes, max_events=4)).outcome is ApplyOutcome.OK
    one_more = Writes()
    one_more.event(EventType.STEP_STARTED, data(step_id="s-9"))
    assert (await apply(store, run, one_more, max_events=4)).outcome is ApplyOutcome.LIMIT
    assert len(await event_types(store, run.run_id)) == 4


async def test_a_suspension_is_refused_when_an_event_arrived(store: Store) -> None:
    run = await running(store)
    assert (await apply(store, run, hook_writes(run.run_id, "h0.a"))).outcome is ApplyOutcome.OK
    # the answer lands while the execution still runs (e.g. from on_created)
    assert (
        await store.resume(
            answer(run.run_id, "h0.a", "yes"), max_events=MAX_EVENTS, retention_seconds=RETENTION
        )
    ).outcome is (ResumeOutcome.RECORDED)
    assert await read_all_tasks(store) == []  # a running run is not enqueued again
    writes = Writes()
    writes.event(EventType.STEP_STARTED, data(step_id="s-1"))
    writes.save_checkpoint("s-1", b"1")
    suspension = hook_writes(run.run_id, "h1.b")
    suspension.event(EventType.WORKFLOW_SUSPENDED, data(wait="h1.b"))

    refused = await apply(store, run, writes, suspension=suspension)

    assert refused.outcome is ApplyOutcome.REFUSED
    assert [(e.type, e.data) for e in refused.arrived] == [
        ("hook.received", {"hook_id": "h0.a", "payload": "yes"})
    ]
    # the writes are recorded, the suspension is not
    assert await event_types(store, run.run_id) == [
        "workflow.started",
        "hook.created",
        "hook.received",
        "step.started",
    ]
    assert refused.last_id == (await store.events(run.run_id) or [])[-1].id
    assert await status_of(store, run.run_id) is RunStatus.RUNNING
    assert [h.hook_id for h in await store.run_hooks(run.run_id) or []] == ["h0.a"]
    assert [t.run_id for t in await store.reclaim("c2", 0)] == [run.run_id]  # not acked
    assert (await claim(store, run.task)).checkpoints == {"s-1": b"1"}


async def test_a_known_event_count_still_sees_what_arrived(store: Store) -> None:
    """Given how many events the log holds up to ``after``, a store may skip reading the
    log when nothing arrived: an answer that did arrive must still refuse the suspension."""
    run_id = await start(store)
    task = await task_of(store, run_id)
    claimed = await claim(store, task)
    assert claimed.event_count == 1  # workflow.started
    run = Running(run_id, task, claimed.fence, claimed.events[-1].id)
    writes = hook_writes(run_id, "h0.a")
    applied = await store.apply(
        run_id, run.fence, run.seen, writes,
        max_events=MAX_EVENTS, retention_seconds=RETENTION, known_count=claimed.event_count,
    )  # fmt: skip
    assert (applied.outcome, applied.arrived) == (ApplyOutcome.OK, [])
    known = claimed.event_count + writes.event_count
    assert applied.last_id is not None
    assert (
        await store.resume(
            answer(run_id, "h0.a", "yes"), max_events=MAX_EVENTS, retention_seconds=RETENTION
        )
    ).outcome is ResumeOutcome.RECORDED

    refused = await store.apply(
        run_id, run.fence, applied.last_id, Writes(), suspension=suspend("h0.a"),
        max_events=MAX_EVENTS, retention_seconds=RETENTION, known_count=known,
    )  # fmt: skip

    assert refused.outcome is ApplyOutcome.REFUSED
    assert [(e.type, e.data) for e in refused.arrived] == [
        ("hook.received", {"hook_id": "h0.a", "payload": "yes"})
    ]
    assert await status_of(store, run_id) is RunStatus.RUNNING
    # told the count that includes the answer, the suspension goes through
    suspended = await store.apply(
        run_id, run.fence, refused.arrived[-1].id, Writes(), suspension=suspend("h0.a"),
        max_events=MAX_EVENTS, retention_seconds=RETENTION, known_count=known + 1,
    )  # fmt: skip
    assert (suspended.outcome, suspended.arrived) == (ApplyOutcome.OK, [])
    assert await status_of(store, run_id) is RunStatus.SUSPENDED


async def test_apply_reports_arrived_events_without_a_suspension(store: Store) -> None:
    run = await running(store)
    writes = Writes()
    writes.schedule_timer("t0", 50)
    assert (await apply(store, run, writes)).outcome is ApplyOutcome.OK
    assert (await store.fire_due(now_ms=60, limit=10)).lateness_ms == [10]
    nothing = await apply(store, run, Writes())
    assert nothing.outcome is ApplyOutcome.OK
    assert [(e.type, e.data) for e in nothing.arrived] == [("timer.fired", {"timer_id": "t0"})]


async def test_a_suspension_acks_the_task_and_counts(store: Store) -> None:
    run = await running(store)
    applied = await apply(store, run, hook_writes(run.run_id, "h0.a"), suspension=suspend("h0.a"))
    assert applied.outcome is ApplyOutcome.OK
    assert await status_of(store, run.run_id) is RunStatus.SUSPENDED
    assert await event_types(store, run.run_id) == [
        "workflow.started",
        "hook.created",
        "workflow.suspended",
    ]
    assert await store.reclaim("c2", 0) == []
    stats = await store.stats()
    assert stats["suspended"] == 1 and stats["hooks_pending"] == 1


async def test_finishing_completes_the_run(store: Store) -> None:
    run = await running(store)
    done = Writes()
    done.event(EventType.WORKFLOW_COMPLETED, data(result={"total": 3}))
    applied = await apply(store, run, done, finish=Finish(RunStatus.COMPLETED, b'{"total":3}'))
    assert applied.outcome is ApplyOutcome.OK
    info = await store.get_run(run.run_id)
    assert info is not None
    assert info.status is RunStatus.COMPLETED and info.result == {"total": 3}
    assert info.error is None
    snapshot = await store.run_snapshot(run.run_id)
    assert snapshot.status is RunStatus.COMPLETED and snapshot.output == b'{"total":3}'
    assert await store.reclaim("c2", 0) == []  # task acknowledged
    assert (await store.stats())["completed"] == 1


async def test_finishing_as_failed_records_the_error(store: Store) -> None:
    run = await running(store)
    error = {"type": "ValueError", "message": "bad"}
    failed = await apply(store, run, Writes(), finish=Finish(RunStatus.FAILED, data(**error)))
    assert failed.outcome is ApplyOutcome.OK
    info = await store.get_run(run.run_id)
    assert info is not None
    assert info.status is RunStatus.FAILED and info.error == error and info.result is None
    assert (await store.stats())["failed"] == 1


async def test_finishing_closes_pending_hooks_and_deadlines(store: Store) -> None:
    session = "session-finish-0001"
    run = await running(store, session)
    writes = hook_writes(run.run_id, "h0.a", expires_at_ms=1000)
    writes.schedule_timer("t0", 2000)
    assert (await apply(store, run, writes)).outcome is ApplyOutcome.OK
    assert len(await store.pending_hooks()) == 1
    done = await apply(store, run, Writes(), finish=Finish(RunStatus.COMPLETED, b"null"))
    assert done.outcome is ApplyOutcome.OK
    assert await store.pending_hooks() == []
    [hook] = await store.run_hooks(run.run_id) or []
    assert hook.status is HookStatus.CANCELLED
    report = await store.fire_due(now_ms=10_000, limit=10)
    assert report.lateness_ms == [] and report.next_due_ms is None
    assert await event_types(store, run.run_id) == ["workflow.started", "hook.created"]
    assert (await store.stats())["hooks_pending"] == 0


async def test_finished_runs_and_sessions_expire_after_their_retention(store: Store) -> None:
    run = await running(store)
    await apply(store, run, Writes(), finish=Finish(RunStatus.COMPLETED, b"1"), retention_seconds=1)
    cancelled = await running(store)
    assert (await cancel(store, cancelled.run_id, retention_seconds=1)).outcome is (
        CancelOutcome.CANCELLED
    )
    kept = await running(store)
    await store.create_session("session-expiring-0001", 1)
    await store.bind_session("session-bound-000001", kept.run_id, 1)
    assert await store.lock_session("session-expiring-0001", 1000)
    await asyncio.sleep(1.3)
    for run_id in (run.run_id, cancelled.run_id):
        assert await store.get_run(run_id) is None
        assert await store.events(run_id) is None
        assert await store.run_hooks(run_id) is None
    assert await status_of(store, kept.run_id) is RunStatus.RUNNING  # not finished: kept
    assert await store.session_exists("session-expiring-0001") is False
    assert await store.session_run("session-bound-000001") is None
    assert await store.lock_session("session-expiring-0001", 1000) is True


# resume -------------------------------------------------------------------------------


async def test_resume_records_the_answer_and_enqueues_a_suspended_run(store: Store) -> None:
    run = await suspended_on_hook(store)
    resumed = await store.resume(
        answer(run.run_id, "s-0.approve", "yes"), max_events=100, retention_seconds=RETENTION
    )
    assert resumed.outcome is ResumeOutcome.RECORDED
    events = await store.events(run.run_id)
    assert events is not None
    assert (events[-1].type, events[-1].data) == (
        "hook.received",
        {"hook_id": "s-0.approve", "payload": "yes"},
    )
    assert await status_of(store, run.run_id) is RunStatus.PENDING
    [task] = await read_all_tasks(store)
    assert (task.run_id, task.workflow) == (run.run_id, "wf")
    [hook] = await store.run_hooks(run.run_id) or []
    assert hook.status is HookStatus.RECEIVED
    assert await store.pending_hooks() == []
    stats = await store.stats()
    assert stats["suspended"] == 0 and stats["hooks_pending"] == 0


async def test_resume_same_answer_again_is_a_duplicate(store: Store) -> None:
    run = await suspended_on_hook(store)
    first = answer(run.run_id, "s-0.approve", {"choice": "yes", "n": 1})
    assert (
        await store.resume(first, max_events=100, retention_seconds=RETENTION)
    ).outcome is ResumeOutcome.RECORDED
    before = await store.events(run.run_id)
    # the same payload (same digest) again
    again = answer(run.run_id, "s-0.approve", {"n": 1, "choice": "yes"})
    assert (
        await store.resume(again, max_events=100, retention_seconds=RETENTION)
    ).outcome is ResumeOutcome.DUPLICATE
    assert await store.events(run.run_id) == before
    assert len(await read_all_tasks(store)) == 1  # enqueued once


async def test_resume_a_different_answer_is_a_conflict(store: Store) -> None:
    run = await suspended_on_hook(store)
    assert (
        await store.resume(
            answer(run.run_id, "s-0.approve", "yes"), max_events=100, retention_seconds=RETENTION
        )
    ).outcome is ResumeOutcome.RECORDED
    before = await store.events(run.run_id)
    conflict = await store.resume(
        answer(run.run_id, "s-0.approve", "no"), max_events=100, retention_seconds=RETENTION
    )
    assert conflict.outcome is ResumeOutcome.CONFLICT
    assert await store.events(run.run_id) == before


async def test_resume_a_validated_hook_asks_for_validation_first(store: Store) -> None:
    run = await suspended_on_hook(store, schema=SCHEMA)
    unchecked = answer(run.run_id, "s-0.approve", {"choice": "yes"})
    asked = await store.resume(unchecked, max_events=100, retention_seconds=RETENTION)
    assert asked.outcome is ResumeOutcome.NEEDS_VALIDATION
    assert asked.schema == SCHEMA
    assert await event_types(store, run.run_id) == [
        "workflow.started",
        "hook.created",
        "workflow.suspended",
    ]
    assert await status_of(store, run.run_id) is RunStatus.SUSPENDED
    checked = answer(run.run_id, "s-0.approve", {"choice": "yes"}, validated=True)
    assert (
        await store.resume(checked, max_events=100, retention_seconds=RETENTION)
    ).outcome is ResumeOutcome.RECORDED


async def test_resume_an_unvalidated_hook_needs_no_validation(store: Store) -> None:
    run = await suspended_on_hook(store)
    resumed = await store.resume(
        answer(run.run_id, "s-0.approve", 1), max_events=100, retention_seconds=RETENTION
    )
    assert resumed.outcome is ResumeOutcome.RECORDED and resumed.schema is None


async def test_resume_without_run_or_hook(store: Store) -> None:
    ghost = store.new_run_id(None)
    assert (
        await store.resume(answer(ghost, "h0.a", 1), max_events=100, retention_seconds=RETENTION)
    ).outcome is (ResumeOutcome.NO_RUN)
    run = await suspended_on_hook(store)
    missing = await store.resume(
        answer(run.run_id, "h9.nope", 1), max_events=100, retention_seconds=RETENTION
    )
    assert missing.outcome is ResumeOutcome.NO_HOOK
    assert await status_of(store, run.run_id) is RunStatus.SUSPENDED


async def test_resume_an_expired_hook(store: Store) -> None:
    run = await suspended_on_hook(store, expires_at_ms=5000)
    assert (await store.fire_due(now_ms=5000, limit=10)).lateness_ms == [0]
    before = await store.events(run.run_id)
    expired = await store.resume(
        answer(run.run_id, "s-0.approve", "late"), max_events=100, retention_seconds=RETENTION
    )
    assert expired.outcome is ResumeOutcome.EXPIRED
    assert await store.events(run.run_id) == before


async def test_resume_a_hook_of_a_cancelled_run(store: Store) -> None:
    run = await suspended_on_hook(store)
    assert (await cancel(store, run.run_id)).outcome is CancelOutcome.CANCELLED
    before = await store.events(run.run_id)
    resumed = await store.resume(
        answer(run.run_id, "s-0.approve", "yes"), max_events=100, retention_seconds=RETENTION
    )
    assert resumed.outcome is ResumeOutcome.CANCELLED
    assert await store.events(run.run_id) == before


async def test_resume_a_hook_of_a_finished_run(store: Store) -> None:
    run = await running(store)
    assert (await apply(store, run, hook_writes(run.run_id, "h0.a"))).outcome is ApplyOutcome.OK
    finish = Finish(RunStatus.FAILED, data(type="E", message="step failed after the token"))
    assert (await apply(store, run, Writes(), finish=finish)).outcome is ApplyOutcome.OK
    resumed = await store.resume(
        answer(run.run_id, "h0.a", "yes"), max_events=100, retention_seconds=RETENTION
    )
    assert (resumed.outcome, resumed.run_status) == (ResumeOutcome.FINISHED, "failed")


async def test_resume_after_the_run_finished_is_still_a_duplicate(store: Store) -> None:
    run = await running(store)
    assert (await apply(store, run, hook_writes(run.run_id, "h0.a"))).outcome is ApplyOutcome.OK
    yes = answer(run.run_id, "h0.a", "yes")
    assert (
        await store.resume(yes, max_events=100, retention_seconds=RETENTION)
    ).outcome is ResumeOutcome.RECORDED
    await apply(store, run, Writes(), finish=Finish(RunStatus.COMPLETED, b'"yes"'))
    assert (
        await store.resume(yes, max_events=100, retention_seconds=RETENTION)
    ).outcome is ResumeOutcome.DUPLICATE
    no = answer(run.run_id, "h0.a", "no")
    assert (
        await store.resume(no, max_events=100, retention_seconds=RETENTION)
    ).outcome is ResumeOutcome.CONFLICT


async def test_resume_at_the_event_limit(store: Store) -> None:
    run = await suspended_on_hook(store)  # 3 events
    limited = await store.resume(
        answer(run.run_id, "s-0.approve", 1), max_events=3, retention_seconds=RETENTION
    )
    assert limited.outcome is ResumeOutcome.LIMIT
    assert len(await event_types(store, run.run_id)) == 3
    assert await status_of(store, run.run_id) is RunStatus.SUSPENDED


async def test_resume_posts_the_announcement_to_the_session(store: Store) -> None:
    session = "session-announce-0001"
    run = await suspended_on_hook(store, session=session)
    resumed = await store.resume(
        answer(run.run_id, "s-0.approve", "ok"), max_events=100, retention_seconds=RETENTION
    )
    assert resumed.outcome is ResumeOutcome.RECORDED
    entries = await store.read_outbox(session, "0-0", 10, None)
    assert [e.message for e in entries] == [
        {"type": "answered", "token": f"{run.run_id}:s-0.approve"}
    ]


# cancel -------------------------------------------------------------------------------


async def test_cancel_a_running_run(store: Store) -> None:
    session = "session-cancel-000001"
    run = await running(store, session)
    assert (await apply(store, run, hook_writes(run.run_id, "h0.a", expires_at_ms=10))).outcome is (
        ApplyOutcome.OK
    )
    cancelled = await cancel(store, run.run_id)
    assert cancelled.outcome is CancelOutcome.CANCELLED and cancelled.run_status is None
    events = await store.events(run.run_id)
    assert events is not None
    assert (events[-1].type, events[-1].data) == ("workflow.cancelled", {"reason": "test"})
    assert await status_of(store, run.run_id) is RunStatus.CANCELLED
    [hook] = await store.run_hooks(run.run_id) or []
    assert hook.status is HookStatus.CANCELLED
    assert await store.pending_hooks() == []
    assert (await store.fire_due(now_ms=100, limit=10)).lateness_ms == []  # deadline gone
    # the worker's next write is refused
    assert (await apply(store, run, Writes())).outcome is ApplyOutcome.LOST
    assert await store.reclaim("c2", 0) == []  # its task acknowledged
    messages = [e.message for e in await store.read_outbox(session, "0-0", 10, None)]
    assert messages[-1] == {"type": "status", "status": "cancelled", "run_id": run.run_id}
    assert (await store.stats())["cancelled"] == 1


async def test_cancel_a_suspended_run(store: Store) -> None:
    run = await suspended_on_hook(store)
    assert (await store.stats())["suspended"] == 1
    assert (await cancel(store, run.run_id)).outcome is CancelOutcome.CANCELLED
    stats = await store.stats()
    assert stats["suspended"] == 0 and stats["cancelled"] == 1 and stats["hooks_pending"] == 0


async def test_cancel_a_pending_run_skips_its_task(store: Store) -> None:
    run_id = await start(store)
    assert (await cancel(store, run_id)).outcome is CancelOutcome.CANCELLED
    task = await task_of(store, run_id)
    assert (await claim(store, task)).status is ClaimStatus.SKIPPED
    assert await store.reclaim("c2", 0) == []


async def test_cancel_without_a_run(store: Store) -> None:
    cancelled = await cancel(store, store.new_run_id(None))
    assert cancelled.outcome is CancelOutcome.NO_RUN


async def test_cancel_a_finished_run(store: Store) -> None:
    run = await running(store)
    await apply(store, run, Writes(), finish=Finish(RunStatus.COMPLETED, b"1"))
    before = await store.events(run.run_id)
    finished = await cancel(store, run.run_id)
    assert (finished.outcome, finished.run_status) == (CancelOutcome.FINISHED, "completed")
    assert await store.events(run.run_id) == before
    assert await status_of(store, run.run_id) is RunStatus.COMPLETED
    other = await running(store)
    assert (await cancel(store, other.run_id)).outcome is CancelOutcome.CANCELLED
    again = await cancel(store, other.run_id)
    assert (again.outcome, again.run_status) == (CancelOutcome.FINISHED, "cancelled")


# deadlines ----------------------------------------------------------------------------


async def test_fire_due_expires_a_pending_hook_once(store: Store) -> None:
    session = "session-expiry-000001"
    run = await suspended_on_hook(store, expires_at_ms=10_000, session=session)
    early = await store.fire_due(now_ms=9_999, limit=10)
    assert early.lateness_ms == [] and early.next_due_ms == 10_000 and not early.saturated
    assert await status_of(store, run.run_id) is RunStatus.SUSPENDED

    fired = await store.fire_due(now_ms=10_025, limit=10)
    assert fired.lateness_ms == [25] and fired.next_due_ms is None and not fired.saturated
    events = await store.events(run.run_id)
    assert events is not None
    assert (events[-1].type, events[-1].data) == ("hook.expired", {"hook_id": "s-0.approve"})
    [hook] = await store.run_hooks(run.run_id) or []
    assert hook.status is HookStatus.EXPIRED
    assert await store.pending_hooks() == []
    assert await status_of(store, run.run_id) is RunStatus.PENDING  # woken
    [task] = await read_all_tasks(store)
    assert task.run_id == run.run_id
    messages = [e.message for e in await store.read_outbox(session, "0-0", 10, None)]
    assert messages[-1]["type"] == "expired"

    again = await store.fire_due(now_ms=20_000, limit=10)
    assert again.lateness_ms == [] and again.next_due_ms is None
    assert await store.events(run.run_id) == events
    assert await read_all_tasks(store) == []


async def test_fire_due_after_an_answer_does_nothing(store: Store) -> None:
    run = await suspended_on_hook(store, expires_at_ms=10_000)
    assert (
        await store.resume(
            answer(run.run_id, "s-0.approve", 1), max_events=100, retention_seconds=RETENTION
        )
    ).outcome is ResumeOutcome.RECORDED
    report = await store.fire_due(now_ms=20_000, limit=10)
    assert report.lateness_ms == [] and report.next_due_ms is None
    assert "hook.expired" not in await event_types(store, run.run_id)


async def test_fire_due_fires_a_timer(store: Store) -> None:
    run = await running(store)
    writes = Writes()
    writes.event(EventType.TIMER_SCHEDULED, data(timer_id="t0", due=7_000))
    writes.schedule_timer("t0", 7_000)
    assert (await apply(store, run, writes, suspension=suspend("t0"))).outcome is (ApplyOutcome.OK)
    assert (await store.fire_due(now_ms=6_999, limit=10)).next_due_ms == 7_000
    fired = await store.fire_due(now_ms=7_007, limit=10)
    assert fired.lateness_ms == [7]
    events = await store.events(run.run_id)
    assert events is not None
    assert (events[-1].type, events[-1].data) == ("timer.fired", {"timer_id": "t0"})
    assert await status_of(store, run.run_id) is RunStatus.PENDING
    assert [t.run_id for t in await read_all_tasks(store)] == [run.run_id]
    assert (await store.stats())["suspended"] == 0
    assert (await store.fire_due(now_ms=9_000, limit=10)).lateness_ms == []


async def test_fire_due_reports_the_earliest_deadline_and_saturation(store: Store) -> None:
    run = await running(store)
    writes = hook_writes(run.run_id, "h0.a", expires_at_ms=3_000)
    for hook_id, due in (("h1.b", 1_000), ("h2.c", 2_000)):
        more = hook_writes(run.run_id, hook_id, expires_at_ms=due)
        writes.ops += more.ops
        writes.event_count += more.event_count
    other = await running(store)
    timer = Writes()
    timer.schedule_timer("t0", 1_500)
    assert (await apply(store, run, writes)).outcome is ApplyOutcome.OK
    assert (await apply(store, other, timer)).outcome is ApplyOutcome.OK
    assert (await store.fire_due(now_ms=0, limit=10)).next_due_ms == 1_000

    # two of the run's deadlines are due, but one pass fires at most ``limit`` per partition
    # (the earliest first); the other run's timer may be in another partition
    first = await store.fire_due(now_ms=2_500, limit=1)
    assert first.saturated is True
    assert 1_500 in first.lateness_ms and 500 not in first.lateness_ms
    rest = await store.fire_due(now_ms=2_500, limit=10)
    assert not rest.saturated
    assert sorted(first.lateness_ms + rest.lateness_ms) == [500, 1_000, 1_500]
    assert rest.next_due_ms == 3_000
    assert sorted(h.hook_id for h in await store.pending_hooks()) == ["h0.a"]


# versions: parked and blocked runs ----------------------------------------------------


async def parked(store: Store) -> Running:
    """A run first claimed by a v1 worker, then handed to a worker serving v2 only."""
    run = await suspended_on_hook(store)
    resumed = await store.resume(
        answer(run.run_id, "s-0.approve", 1), max_events=100, retention_seconds=RETENTION
    )
    assert resumed.outcome is ResumeOutcome.RECORDED
    task = await task_of(store, run.run_id)
    result = await claim(store, task, "c2", version="v2", serves=("v2",))
    assert result.status is ClaimStatus.PARKED
    return run


async def test_a_run_keeps_the_version_of_its_first_claim(store: Store) -> None:
    run = await running(store)
    info = await store.get_run(run.run_id)
    assert info is not None and info.version == VERSION
    again = await claim(store, run.task, CONSUMER, version="v2", serves=("v1", "v2"))
    assert again.status is ClaimStatus.OK
    info = await store.get_run(run.run_id)
    assert info is not None and info.version == VERSION
    never_claimed = await start(store)
    assert [r.run_id for r in await store.list_runs(None, None, VERSION)] == [run.run_id]
    assert await store.list_runs(None, None, "v2") == []
    assert {r.run_id for r in await store.list_runs(None, None)} == {run.run_id, never_claimed}


async def test_a_run_of_a_version_not_served_is_parked_until_unparked(store: Store) -> None:
    run = await parked(store)
    assert await status_of(store, run.run_id) is RunStatus.PARKED
    assert await store.reclaim("c3", 0) == []  # the task is acknowledged
    assert (await store.stats())["parked"] == 1
    assert await store.unpark(["v2", "v3"]) == 0  # nothing parked for those
    assert await store.unpark([VERSION]) == 1
    assert await status_of(store, run.run_id) is RunStatus.PENDING
    assert (await store.stats())["parked"] == 0
    task = await task_of(store, run.run_id)
    resumed = await claim(store, task)
    assert resumed.status is ClaimStatus.OK
    assert [e.type for e in resumed.events][-1] == "hook.received"  # its log, untouched
    assert await store.unpark([VERSION]) == 0  # sent back once


async def test_cancelling_a_parked_run_unparks_nothing(store: Store) -> None:
    run = await parked(store)
    assert (await cancel(store, run.run_id)).outcome is CancelOutcome.CANCELLED
    assert (await store.stats())["parked"] == 0
    assert await store.unpark([VERSION]) == 0
    assert await status_of(store, run.run_id) is RunStatus.CANCELLED
    assert await read_all_tasks(store) == []


async def test_a_blocked_run_waits_for_a_retry(store: Store) -> None:
    run = await running(store)
    writes = hook_writes(run.run_id, "h0.a", expires_at_ms=10_000)
    writes.save_checkpoint("s-0", b'{"kept":true}')
    assert (await apply(store, run, writes)).outcome is ApplyOutcome.OK
    await store.hand_back(run.task)
    duplicate = await task_of(store, run.run_id, "c2")
    error = {"type": "NondeterminismError", "message": "step 'a' is now step 'b'"}
    blocked = await apply(store, run, Writes(), finish=Finish(RunStatus.BLOCKED, data(**error)))
    assert blocked.outcome is ApplyOutcome.OK
    info = await store.get_run(run.run_id)
    assert info is not None and info.status is RunStatus.BLOCKED and info.error == error
    assert (await store.stats())["blocked"] == 1
    assert (await claim(store, duplicate, "c2")).status is ClaimStatus.SKIPPED
    assert await store.reclaim("c3", 0) == []
    # not an end: hooks stay pending (and answerable), deadlines and checkpoints stay
    assert [h.hook_id for h in await store.pending_hooks()] == ["h0.a"]
    assert (await store.fire_due(now_ms=0, limit=10)).next_due_ms == 10_000

    retried = await store.retry(run.run_id, event=data(by="operator"))
    assert retried.outcome is RetryOutcome.RETRIED
    events = await store.events(run.run_id)
    assert events is not None
    assert (events[-1].type, events[-1].data) == ("workflow.retried", {"by": "operator"})
    assert await status_of(store, run.run_id) is RunStatus.PENDING
    assert (await store.stats())["blocked"] == 0
    task = await task_of(store, run.run_id)
    assert (await claim(store, task)).checkpoints == {"s-0": b'{"kept":true}'}

    again = await store.retry(run.run_id, event=data(by="operator"))
    assert (again.outcome, again.run_status) == (RetryOutcome.NOT_BLOCKED, "running")
    ghost = await store.retry(store.new_run_id(None), event=b"{}")
    assert ghost.outcome is RetryOutcome.NO_RUN


async def test_cancelling_a_blocked_run(store: Store) -> None:
    run = await running(store)
    await apply(store, run, Writes(), finish=Finish(RunStatus.BLOCKED, data(type="E")))
    assert (await cancel(store, run.run_id)).outcome is CancelOutcome.CANCELLED
    stats = await store.stats()
    assert stats["blocked"] == 0 and stats["cancelled"] == 1
    retried = await store.retry(run.run_id, event=b"{}")
    assert (retried.outcome, retried.run_status) == (RetryOutcome.NOT_BLOCKED, "cancelled")


# heartbeats ---------------------------------------------------------------------------


async def test_heartbeat_extends_only_live_leases(store: Store) -> None:
    first = await running(store)
    second = await running(store)
    stale_fence = second.fence
    await claim(store, second.task)  # second's lease moves to a new fence
    alive = await store.heartbeat(
        [(first.run_id, first.fence), (second.run_id, stale_fence)], 60_000, CONSUMER
    )
    assert alive == [True, False]
    assert await store.heartbeat([], 60_000, CONSUMER) == []


async def test_heartbeat_keeps_a_short_lease_alive(store: Store) -> None:
    run_id = await start(store)
    task = await task_of(store, run_id)
    claimed = await claim(store, task, CONSUMER, lease_ms=1)
    assert await store.heartbeat([(run_id, claimed.fence)], 60_000, CONSUMER) == [True]
    await asyncio.sleep(0.02)  # the original lease would have expired
    assert (await claim(store, task, "c2")).status is ClaimStatus.BUSY


async def test_heartbeat_resets_the_task_idle_time(store: Store) -> None:
    run = await running(store)
    await asyncio.sleep(0.15)
    assert await store.heartbeat([(run.run_id, run.fence)], 60_000, CONSUMER) == [True]
    assert await store.reclaim("c2", 100) == []  # idle for less than 100 ms now
    await asyncio.sleep(0.15)
    assert [t.run_id for t in await store.reclaim("c2", 100)] == [run.run_id]


# inspection ---------------------------------------------------------------------------


async def test_inspection_of_a_missing_run(store: Store) -> None:
    ghost = store.new_run_id(None)
    assert await store.get_run(ghost) is None
    assert await store.events(ghost) is None
    assert await store.run_hooks(ghost) is None
    snapshot = await store.run_snapshot(ghost)
    assert snapshot.status is None


async def test_run_hooks_and_pending_hooks_describe_each_hook(store: Store) -> None:
    session = "session-hooks-0000001"
    run = await running(store, session)
    writes = hook_writes(run.run_id, "s-0.approve", schema=SCHEMA, expires_at_ms=9_000_500)
    more = hook_writes(run.run_id, "h1.note", prompt="Anything to add?")
    writes.ops += more.ops
    assert (await apply(store, run, writes)).outcome is ApplyOutcome.OK
    hooks = {h.hook_id: h for h in await store.run_hooks(run.run_id) or []}
    assert set(hooks) == {"s-0.approve", "h1.note"}
    approve = hooks["s-0.approve"]
    assert approve.token == f"{run.run_id}:s-0.approve" and approve.run_id == run.run_id
    assert approve.name == "approve" and approve.step_id == "s-0"
    assert approve.status is HookStatus.PENDING and approve.session == session
    assert approve.schema == SCHEMA and approve.expires_at == 9_000.5
    assert hooks["h1.note"].prompt == "Anything to add?" and hooks["h1.note"].expires_at is None
    other = await suspended_on_hook(store, "h0.x")
    pending = await store.pending_hooks()
    assert sorted(h.token for h in pending) == sorted(
        [approve.token, hooks["h1.note"].token, f"{other.run_id}:h0.x"]
    )
    assert (await store.stats())["hooks_pending"] == 3
    info = await store.get_run(run.run_id)
    assert info is not None and {h.hook_id for h in info.hooks} == set(hooks)


async def test_list_runs_filters_limits_and_puts_the_newest_first(store: Store) -> None:
    assert await store.list_runs(None, None) == []
    first = await running(store)
    await asyncio.sleep(0.005)
    second = await suspended_on_hook(store)
    await asyncio.sleep(0.005)
    third = await start(store)
    assert [r.run_id for r in await store.list_runs(None, None)] == [
        third,
        second.run_id,
        first.run_id,
    ]
    assert [r.run_id for r in await store.list_runs(None, 2)] == [third, second.run_id]
    assert [r.run_id for r in await store.list_runs(RunStatus.SUSPENDED, None)] == [second.run_id]
    assert [r.run_id for r in await store.list_runs(RunStatus.RUNNING, 10)] == [first.run_id]
    assert await store.list_runs(RunStatus.COMPLETED, None) == []


async def test_stats_count_what_happened(store: Store) -> None:
    empty = await store.stats()
    assert {k: empty[k] for k in ("started", "completed", "failed", "cancelled")} == dict.fromkeys(
        ("started", "completed", "failed", "cancelled"), 0
    )
    done = await running(store)
    await apply(store, done, Writes(), finish=Finish(RunStatus.COMPLETED, b"1"))
    failed = await running(store)
    await apply(store, failed, Writes(), finish=Finish(RunStatus.FAILED, b"{}"))
    await suspended_on_hook(store)
    stats = await store.stats()
    assert stats["started"] == 3 and stats["completed"] == 1 and stats["failed"] == 1
    assert stats["suspended"] == 1 and stats["hooks_pending"] == 1 and stats["cancelled"] == 0


async def test_run_snapshot_and_wait_for_events(store: Store) -> None:
    run = await running(store)
    snapshot = await store.run_snapshot(run.run_id)
    assert snapshot.status is RunStatus.RUNNING and snapshot.output == b""
    assert snapshot.last_event_id == run.seen
    # no new event: returns after block_ms
    began = time.monotonic()
    await store.wait_for_events(run.run_id, snapshot.last_event_id, 100)
    assert time.monotonic() - began >= 0.05
    # an event ends the wait early
    waiter = asyncio.ensure_future(store.wait_for_events(run.run_id, snapshot.last_event_id, 5_000))
    await asyncio.sleep(0.05)
    done = Writes()
    done.event(EventType.WORKFLOW_COMPLETED, data(result=7))
    await apply(store, run, done, finish=Finish(RunStatus.COMPLETED, b"7"))
    await asyncio.wait_for(waiter, 3)
    after = await store.run_snapshot(run.run_id)
    assert after.status is RunStatus.COMPLETED and after.output == b"7"
    assert after.last_event_id == run.seen != snapshot.last_event_id


# sessions -----------------------------------------------------------------------------


async def test_sessions_exist_once_created(store: Store) -> None:
    session = "session-created-00001"
    assert await store.session_exists(session) is False
    await store.create_session(session, 60)
    assert await store.session_exists(session) is True
    assert await store.session_run(session) is None


async def test_a_session_is_bound_to_its_run(store: Store) -> None:
    session = "session-bound-0000001"
    await store.create_session(session, 60)
    run_id = await start(store, session)
    await store.bind_session(session, run_id, 60)
    assert await store.session_run(session) == run_id
    assert await store.session_exists(session) is True
    later = await start(store, session)
    await store.bind_session(session, later, 60)
    assert await store.session_run(session) == later


async def test_the_session_lock_has_one_holder(store: Store) -> None:
    session = "session-locked-000001"
    assert await store.lock_session(session, 10_000) is True
    assert await store.lock_session(session, 10_000) is False
    assert await store.lock_session("session-other-0000001", 10_000) is True
    await store.unlock_session(session)
    assert await store.lock_session(session, 10_000) is True
    await store.unlock_session("session-never-locked1")  # harmless


async def test_the_session_lock_expires(store: Store) -> None:
    session = "session-lock-ttl-0001"
    assert await store.lock_session(session, 50) is True
    await asyncio.sleep(0.12)
    assert await store.lock_session(session, 50) is True


# outboxes -----------------------------------------------------------------------------


async def test_post_and_read_outbox(store: Store) -> None:
    session = "session-outbox-000001"
    assert await store.read_outbox(session, "0-0", 10, None) == []
    ids = [await store.post(session, data(n=i), retention_seconds=RETENTION) for i in range(5)]
    assert len(set(ids)) == 5
    entries = await store.read_outbox(session, "0-0", 10, None)
    assert [(e.id, e.message) for e in entries] == [(ids[i], {"n": i}) for i in range(5)]
    after = await store.read_outbox(session, ids[2], 10, None)
    assert [e.message["n"] for e in after] == [3, 4]
    assert [e.message["n"] for e in await store.read_outbox(session, "0-0", 2, None)] == [0, 1]
    assert await store.read_outbox(session, ids[-1], 10, None) == []
    # sessions do not share outboxes
    assert await store.read_outbox("session-outbox-000002", "0-0", 10, None) == []


async def test_a_blocking_outbox_read_waits_for_a_post(store: Store) -> None:
    session = "session-outbox-block1"
    last = await store.post(session, data(n=0), retention_seconds=RETENTION)
    began = time.monotonic()
    assert await store.read_outbox(session, last, 10, 100) == []
    assert time.monotonic() - began >= 0.05
    reader = asyncio.ensure_future(store.read_outbox(session, last, 10, 5_000))
    await asyncio.sleep(0.05)
    new_id = await store.post(session, data(n=1), retention_seconds=RETENTION)
    entries = await asyncio.wait_for(reader, 3)
    assert [(e.id, e.message) for e in entries] == [(new_id, {"n": 1})]


async def test_read_outboxes_reads_a_group_after_each_cursor(store: Store) -> None:
    one, two = await same_group_sessions(store, 2)
    group = store.outbox_group(one)
    a0 = await store.post(one, data(s=1, n=0), retention_seconds=RETENTION)
    a1 = await store.post(one, data(s=1, n=1), retention_seconds=RETENTION)
    b0 = await store.post(two, data(s=2, n=0), retention_seconds=RETENTION)
    read = await store.read_outboxes(group, {one: "0-0", two: "0-0"}, "proc-1", "0-0", 10, 100)
    assert read.wake_cursor is None
    assert {s: [e.id for e in entries] for s, entries in read.entries.items()} == {
        one: [a0, a1],
        two: [b0],
    }
    assert read.entries[one][1].message == {"s": 1, "n": 1}
    later = await store.read_outboxes(group, {one: a0, two: b0}, "proc-1", "0-0", 10, 100)
    assert {s: [e.id for e in entries] for s, entries in later.entries.items()} == {one: [a1]}


async def test_read_outboxes_blocks_until_a_post(store: Store) -> None:
    one, two = await same_group_sessions(store, 2)
    group = store.outbox_group(one)
    a0 = await store.post(one, data(n=0), retention_seconds=RETENTION)
    b0 = await store.post(two, data(n=0), retention_seconds=RETENTION)
    began = time.monotonic()
    quiet = await store.read_outboxes(group, {one: a0, two: b0}, "proc-1", "0-0", 10, 100)
    assert quiet.entries == {} and quiet.wake_cursor is None
    assert time.monotonic() - began >= 0.05
    reader = asyncio.ensure_future(
        store.read_outboxes(group, {one: a0, two: b0}, "proc-1", "0-0", 10, 5_000)
    )
    await asyncio.sleep(0.05)
    b1 = await store.post(two, data(n=1), retention_seconds=RETENTION)
    read = await asyncio.wait_for(reader, 3)
    assert {s: [e.id for e in entries] for s, entries in read.entries.items()} == {two: [b1]}


async def test_wake_reader_ends_a_blocking_read_early(store: Store) -> None:
    [session] = await same_group_sessions(store, 1)
    group = store.outbox_group(session)
    last = await store.post(session, data(n=0), retention_seconds=RETENTION)
    began = time.monotonic()
    reader = asyncio.ensure_future(
        store.read_outboxes(group, {session: last}, "proc-1", "0-0", 10, 5_000)
    )
    await asyncio.sleep(0.05)
    await store.wake_reader(group, "proc-2")  # another reader's wake-up: not ours
    await asyncio.sleep(0.05)
    assert not reader.done()
    await store.wake_reader(group, "proc-1")
    woken = await asyncio.wait_for(reader, 3)
    assert time.monotonic() - began < 3
    assert woken.entries == {} and woken.wake_cursor is not None
    # from the new wake cursor, the wake-up is consumed: the next read blocks its full time
    began = time.monotonic()
    quiet = await store.read_outboxes(group, {session: last}, "proc-1", woken.wake_cursor, 10, 100)
    assert quiet.entries == {} and quiet.wake_cursor is None
    assert time.monotonic() - began >= 0.05


async def test_a_wake_up_sent_before_the_read_still_counts(store: Store) -> None:
    [session] = await same_group_sessions(store, 1)
    group = store.outbox_group(session)
    await store.wake_reader(group, "proc-1")
    read = await asyncio.wait_for(
        store.read_outboxes(group, {session: "0-0"}, "proc-1", "0-0", 10, 5_000), 3
    )
    assert read.wake_cursor is not None


async def test_drop_reader_forgets_its_wake_ups(store: Store) -> None:
    [session] = await same_group_sessions(store, 1)
    group = store.outbox_group(session)
    await store.wake_reader(group, "proc-1")
    await store.drop_reader(group, "proc-1")
    began = time.monotonic()
    read = await store.read_outboxes(group, {session: "0-0"}, "proc-1", "0-0", 10, 100)
    assert read.wake_cursor is None and read.entries == {}
    assert time.monotonic() - began >= 0.05


async def test_a_deadline_that_becomes_its_partitions_earliest_leaves_a_notice(
    store: Store,
) -> None:
    """The deadline loop sleeps towards the earliest deadline a pass saw; a deadline
    scheduled after the pass that is now its partition's earliest wakes it (a notice read
    from the pass's marks), a later one does not."""
    run = await running(store)
    marks = (await store.fire_due(now_ms=0, limit=10)).marks
    assert await store.deadline_notices(marks, 1) == {}
    assert (
        await apply(store, run, hook_writes(run.run_id, "h0.a", expires_at_ms=5_000))
    ).outcome is (ApplyOutcome.OK)
    [(partition, notice)] = (await store.deadline_notices(marks, 1)).items()
    assert notice.due_ms == 5_000
    marks = (await store.fire_due(now_ms=0, limit=10)).marks
    assert marks[partition] == notice.mark  # the pass returns where it read up to

    later = hook_writes(run.run_id, "h1.b", expires_at_ms=9_000)
    assert (await apply(store, run, later)).outcome is ApplyOutcome.OK
    assert await store.deadline_notices(marks, 1) == {}  # 5,000 is still the earliest
    earlier = hook_writes(run.run_id, "h2.c", expires_at_ms=2_000)
    assert (await apply(store, run, earlier)).outcome is ApplyOutcome.OK
    assert {p: n.due_ms for p, n in (await store.deadline_notices(marks, 1)).items()} == {
        partition: 2_000
    }


def joined(writes: Writes, wait_id: str, group: str = "0") -> Writes:
    writes.join_first(wait_id, group)
    return writes


async def hook_states(store: Store, run_id: str) -> dict[str, HookStatus]:
    return {h.hook_id: h.status for h in await store.run_hooks(run_id) or []}


async def test_a_first_won_before_the_run_suspends_withdraws_its_other_waits(
    store: Store,
) -> None:
    """join_first: the hooks of one first() created (and handed out) before the run
    suspends on it. The first answered withdraws the others at once, one created after
    that is withdrawn as it joins, their answers are refused and change nothing, and the
    suspension's group then leaves only the final group behind."""
    run = await running(store)
    assert (await apply(store, run, joined(hook_writes(run.run_id, "h0.a"), "h0.a"))).outcome is (
        ApplyOutcome.OK
    )
    await apply(store, run, joined(hook_writes(run.run_id, "h1.b"), "h1.b"))
    recorded = await store.resume(
        answer(run.run_id, "h0.a", "yes"), max_events=100, retention_seconds=RETENTION
    )
    assert recorded.outcome is ResumeOutcome.RECORDED
    assert await hook_states(store, run.run_id) == {
        "h0.a": HookStatus.RECEIVED,
        "h1.b": HookStatus.CLOSED,
    }
    await apply(store, run, joined(hook_writes(run.run_id, "h2.c"), "h2.c"))  # joins late
    assert (await hook_states(store, run.run_id))["h2.c"] is HookStatus.CLOSED
    before = await store.events(run.run_id)
    for late in ("h1.b", "h2.c"):
        refused = await store.resume(
            answer(run.run_id, late, "no"), max_events=100, retention_seconds=RETENTION
        )
        assert refused.outcome is ResumeOutcome.CLOSED
    assert await store.events(run.run_id) == before
    assert await store.pending_hooks() == []
    group = Writes()
    group.first_group(["h0.a", "h1.b", "h2.c"])
    await apply(store, run, group, suspension=suspend("h0.a"))
    assert await hook_states(store, run.run_id) == {
        "h0.a": HookStatus.RECEIVED,
        "h1.b": HookStatus.CLOSED,
        "h2.c": HookStatus.CLOSED,
    }


async def test_a_first_whose_timer_fired_before_the_run_suspended_refuses_its_hooks(
    store: Store,
) -> None:
    """The same when the first of the group to finish is its timer, fired by FIRE_DUE while
    the run still runs: its hook is withdrawn in the same step."""
    run = await running(store)
    writes = joined(hook_writes(run.run_id, "h0.a"), "h0.a")
    writes.event(EventType.TIMER_SCHEDULED, data(timer_id="t0", due=10))
    writes.schedule_timer("t0", 10)
    await apply(store, run, joined(writes, "t0"))
    report = await store.fire_due(now_ms=100, limit=10)
    assert len(report.lateness_ms) == 1
    assert await hook_states(store, run.run_id) == {"h0.a": HookStatus.CLOSED}
    refused = await store.resume(
        answer(run.run_id, "h0.a", "yes"), max_events=100, retention_seconds=RETENTION
    )
    assert refused.outcome is ResumeOutcome.CLOSED
    assert "hook.received" not in await event_types(store, run.run_id)
