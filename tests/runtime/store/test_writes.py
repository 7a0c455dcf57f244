"""The Writes builder, and what the Redis store makes of each of its ops: a Writes with
every op kind applied to a real claimed run, checked in the raw Redis data that
``lua/apply.lua`` leaves (on the embedded store and on real Redis)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runtime import Runtime
from runtime._codec import dumps
from runtime.ids import make_token
from runtime.models import EventType, RunStatus
from runtime.settings import TASKS_GROUP
from runtime.store import Applied, ApplyOutcome, Claim, ClaimStatus, Finish, HookSpec, Store, Writes
from runtime.store.redis import RedisStore
from tests.raw_redis import raw

# the builder ---------------------------------------------------------------------------


def _spec(hook_id: str = "s-0.approve", expires: int | None = 5000) -> HookSpec:
    return HookSpec(hook_id, f"r-x:{hook_id}", {"name": "approve"}, False, expires)


def test_a_new_writes_is_empty() -> None:
    writes = Writes()
    assert not writes
    assert len(writes) == 0
    assert writes.ops == [] and writes.event_count == 0
    assert repr(writes) == "<Writes []>"


def test_each_call_appends_its_op_in_order() -> None:
    hook = _spec()
    writes = Writes()
    writes.event(EventType.STEP_STARTED, b'{"step_id":"s-0"}')
    writes.save_checkpoint("s-0", b'{"n":1}')
    writes.delete_checkpoint("s-1")
    writes.create_hook(hook)
    writes.schedule_timer("t0", 1234)
    writes.post(b'{"type":"text"}')
    writes.prompt(b'{"type":"prompt"}')
    writes.event(EventType.HOOK_CREATED, b'{"hook_id":"s-0.approve"}')
    assert writes.ops == [
        ["event", "step.started", '{"step_id":"s-0"}'],
        ["checkpoint", "s-0", '{"n":1}'],
        ["uncheckpoint", "s-1"],
        ["hook", hook],
        ["timer", "t0", "1234"],
        ["post", '{"type":"text"}'],
        ["prompt", '{"type":"prompt"}'],
        ["event", "hook.created", '{"hook_id":"s-0.approve"}'],
    ]
    assert writes
    assert len(writes) == 8
    assert writes.event_count == 2  # events only
    assert repr(writes) == (
        "<Writes ['event', 'checkpoint', 'uncheckpoint', 'hook', 'timer', 'post', 'prompt', "
        "'event']>"
    )


def test_event_types_are_stored_as_their_string_value() -> None:
    writes = Writes()
    writes.event(EventType.TIMER_FIRED, b"{}")
    kind, event_type, _ = writes.ops[0]
    assert event_type == "timer.fired" and type(event_type) is str and kind == "event"


def test_non_event_ops_do_not_count_as_events() -> None:
    writes = Writes()
    writes.save_checkpoint("a", b"1")
    writes.post(b"{}")
    writes.prompt(b"{}")
    writes.schedule_timer("t", 1)
    writes.create_hook(_spec())
    writes.delete_checkpoint("a")
    assert writes.event_count == 0
    assert len(writes) == 6 and writes


def test_take_moves_the_ops_and_resets() -> None:
    writes = Writes()
    writes.event(EventType.STEP_STARTED, b"{}")
    writes.post(b"{}")
    ops_before = list(writes.ops)
    taken = writes.take()
    assert taken is not writes
    assert taken.ops == ops_before and taken.event_count == 1 and len(taken) == 2
    assert writes.ops == [] and writes.event_count == 0 and not writes
    # the two are independent afterwards
    writes.event(EventType.STEP_COMPLETED, b"{}")
    assert len(taken) == 2 and taken.event_count == 1
    assert len(writes) == 1 and writes.event_count == 1
    # taking an empty batch gives an empty batch
    writes.take()
    empty = writes.take()
    assert not empty and empty.event_count == 0


def test_hook_spec_is_frozen() -> None:
    spec = _spec()
    with pytest.raises(AttributeError):
        spec.token = "other"  # type: ignore[misc]


# applied by the Redis store -----------------------------------------------------------

MAX_EVENTS = 1000
RETENTION = 3600
START_DATA = b'{"args":[1]}'


async def _claim(store: Store, run_id: str) -> Claim:
    """Read the run's task and claim it."""
    tasks = await store.read_tasks("c1", tuple(range(store.partitions)), 100, None)
    [task] = [t for t in tasks if t.run_id == run_id]
    result = await store.claim(task, "c1", 30_000, "v1", ["v1"])
    assert result.status is ClaimStatus.OK
    return result


async def _apply(
    store: RedisStore, run_id: str, claim: Claim, writes: Writes, **options: Any
) -> Applied:
    """``writes`` applied by the execution that made ``claim``, from its last event on."""
    return await store.apply(
        run_id,
        claim.fence,
        claim.events[-1].id,
        writes,
        max_events=MAX_EVENTS,
        retention_seconds=RETENTION,
        **options,
    )


async def _stream(store: RedisStore, key: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """A stream's entries, raw."""
    entries: Any = await store.client.xrange(key)
    return [(entry_id, fields) for entry_id, fields in entries]


async def _claimed(rt: Runtime, session: str | None) -> tuple[str, Claim]:
    run_id = rt.store.new_run_id(session)
    assert await rt.store.start(run_id, "wf", session, START_DATA)
    return run_id, await _claim(rt.store, run_id)


def _every_op(run_id: str, due: int) -> tuple[Writes, dict[str, Any]]:
    validated_meta = {"name": "approve", "step_id": "s-0", "expires_at": due, "schema": {}}
    plain_meta = {"name": "note"}
    writes = Writes()
    writes.event(EventType.STEP_STARTED, b'{"attempt":0,"step_id":"s-0"}')
    writes.save_checkpoint("s-0", b'{"state":"draft"}')
    writes.save_checkpoint("s-1", b'{"state":"gone"}')
    writes.delete_checkpoint("s-1")
    writes.create_hook(
        HookSpec("s-0.approve", make_token(run_id, "s-0.approve"), validated_meta, True, due)
    )
    writes.create_hook(HookSpec("h1.note", make_token(run_id, "h1.note"), plain_meta, False, None))
    writes.schedule_timer("t0", due + 1)
    writes.post(b'{"text":"hello","type":"text"}')
    writes.prompt(b'{"token":"x","type":"prompt"}')
    writes.event(EventType.HOOK_CREATED, b'{"hook_id":"s-0.approve"}')
    return writes, {"s-0.approve": validated_meta, "h1.note": plain_meta}


async def test_every_op_lands_where_the_apply_script_puts_it(rt: Runtime) -> None:
    store = raw(rt)
    client = store.client
    session = rt.new_session_id()
    run_id, claim = await _claimed(rt, session)
    keys = store.run_keys(run_id)
    outbox = store.session_key("outbox", session)
    await store.post(session, b'{"type":"status"}', retention_seconds=3600)
    await client.expire(outbox, 500)  # a prompt makes the outbox persistent
    due = 1_900_000_000_000
    writes, metas = _every_op(run_id, due)

    applied = await _apply(store, run_id, claim, writes)

    assert applied.outcome is ApplyOutcome.OK and applied.arrived == []
    # events, in order, after workflow.started; last_id is the last one's
    entries = await _stream(store, keys.events)
    assert [(f[b"t"], f[b"d"]) for _, f in entries] == [
        (b"workflow.started", START_DATA),
        (b"step.started", b'{"attempt":0,"step_id":"s-0"}'),
        (b"hook.created", b'{"hook_id":"s-0.approve"}'),
    ]
    assert applied.last_id == entries[-1][0].decode()
    run = await client.hgetall(keys.run)
    assert run[b"nev"] == b"3"
    assert run[b"status"] == b"running"  # neither suspended nor finished
    # checkpoints: saved, and the deleted one gone
    assert await client.hgetall(keys.ckpt) == {b"s-0": b'{"state":"draft"}'}
    # hooks: record (state, schema flag, metadata), pending index, deadline when it expires
    assert await client.hgetall(keys.hooks) == {
        b"s-0.approve": b"PS" + dumps(metas["s-0.approve"]),
        b"h1.note": b"P-" + dumps(metas["h1.note"]),
    }
    assert await client.smembers(keys.pending) == {
        make_token(run_id, "s-0.approve").encode(),
        make_token(run_id, "h1.note").encode(),
    }
    timer_member = f"{run_id}|t|t0"
    assert await client.zrange(keys.deadlines, 0, -1, withscores=True) == [
        (f"{run_id}|h|s-0.approve".encode(), float(due)),
        (timer_member.encode(), float(due + 1)),
    ]
    # the run's timers are also named on the run
    assert orjson.loads(run[b"dl"]) == [timer_member]
    # session messages: after the one already there, in order
    messages = [f[b"m"] for _, f in await _stream(store, outbox)]
    assert messages == [
        b'{"type":"status"}',
        b'{"text":"hello","type":"text"}',
        b'{"token":"x","type":"prompt"}',
    ]
    assert await client.hget(store.keys.key("waiting", keys.partition), session) == b"1"
    assert await client.ttl(outbox) == -1  # persisted while the prompt is pending


async def _with_timer_t0_due_at_5s(rt: Runtime) -> tuple[str, Any]:
    """A claimed run that scheduled timer t0, due at 5,000 ms (of the tests' clock)."""
    run_id, claim = await _claimed(rt, None)
    writes = Writes()
    writes.schedule_timer("t0", 5_000)
    assert (await _apply(raw(rt), run_id, claim, writes)).outcome is ApplyOutcome.OK
    return run_id, raw(rt).run_keys(run_id)


async def test_a_fired_timer_is_no_longer_the_runs_timer(rt: Runtime) -> None:
    store = raw(rt)
    run_id, keys = await _with_timer_t0_due_at_5s(rt)
    assert await _timers(store, run_id) == [f"{run_id}|t|t0"]
    assert (await store.fire_due(now_ms=5_000, limit=10)).lateness_ms == [0]
    assert await store.client.hget(keys.run, "dl") is None
    assert await store.client.zcard(keys.deadlines) == 0


async def _timers(store: RedisStore, run_id: str) -> list[str]:
    dl = await store.client.hget(store.run_keys(run_id).run, "dl")
    return [] if dl is None else list(orjson.loads(dl))


async def test_every_pending_timer_of_a_run_is_named_and_withdrawn_at_its_end(
    rt: Runtime,
) -> None:
    """Two timers of one run pending at once (sleeps in parallel branches): each is named
    on the run until it fires or is withdrawn, and the run's end withdraws those left.
    Before, the run named only its last timer and its end left the other's deadline,
    which later fired into whatever run had the id by then."""
    store = raw(rt)
    run_id, claim = await _claimed(rt, None)
    keys = store.run_keys(run_id)
    writes = Writes()
    for timer_id, due in (("t0", 5_000), ("t1", 6_000), ("t2", 7_000)):
        writes.schedule_timer(timer_id, due)
    assert (await _apply(store, run_id, claim, writes)).outcome is ApplyOutcome.OK
    members = [f"{run_id}|t|{t}" for t in ("t0", "t1", "t2")]
    assert await _timers(store, run_id) == members
    assert (await store.fire_due(now_ms=5_000, limit=10)).lateness_ms == [0]  # t0 fired
    assert await _timers(store, run_id) == members[1:]
    withdraw = Writes()  # the execution still holds the run; t0 arrives with this write
    withdraw.cancel_timer("t2")
    assert (await _apply(store, run_id, claim, withdraw)).outcome is ApplyOutcome.OK
    assert await _timers(store, run_id) == members[1:2]
    assert await store.client.zrange(keys.deadlines, 0, -1) == [members[1].encode()]
    assert (await store.cancel(run_id, event=b"{}", message=b"{}", retention_seconds=60)).outcome
    assert await store.client.zcard(keys.deadlines) == 0  # t1 went with the run
    assert await store.client.hget(keys.run, "dl") is None


async def test_a_timer_named_the_way_of_earlier_versions_is_withdrawn_at_the_end(
    rt: Runtime,
) -> None:
    """A run suspended by an earlier Parley names its one timer plainly in 'dl' (not as a
    list): its end still withdraws it."""
    store = raw(rt)
    run_id, keys = await _with_timer_t0_due_at_5s(rt)
    member = f"{run_id}|t|t0"
    await store.client.hset(keys.run, "dl", member)  # as earlier versions wrote it
    await store.cancel(run_id, event=b"{}", message=b"{}", retention_seconds=60)
    assert await store.client.zcard(keys.deadlines) == 0


async def test_a_post_alone_refreshes_the_outbox_expiry(rt: Runtime) -> None:
    """The outbox expires the retention after its latest message (no prompt pending)."""
    store = raw(rt)
    session = rt.new_session_id()
    run_id, claim = await _claimed(rt, session)
    outbox = store.session_key("outbox", session)
    await store.post(session, b"{}", retention_seconds=3600)
    await store.client.expire(outbox, 500)
    writes = Writes()
    writes.post(b'{"n":1}')
    applied = await _apply(store, run_id, claim, writes)
    assert applied.outcome is ApplyOutcome.OK
    assert applied.last_id is None  # no event appended
    assert [f[b"m"] for _, f in await _stream(store, outbox)] == [b"{}", b'{"n":1}']
    assert 500 < await store.client.ttl(outbox) <= RETENTION
    assert (
        await store.client.hget(
            store.keys.key("waiting", store.run_keys(run_id).partition), session
        )
        is None
    )


async def test_posts_and_prompts_of_a_run_without_a_session_are_dropped(rt: Runtime) -> None:
    store = raw(rt)
    run_id, claim = await _claimed(rt, None)
    writes = Writes()
    writes.post(b'{"n":1}')
    writes.prompt(b'{"n":2}')
    writes.event(EventType.STEP_STARTED, b'{"step_id":"a"}')
    applied = await _apply(store, run_id, claim, writes)
    assert applied.outcome is ApplyOutcome.OK
    assert [k async for k in store.client.scan_iter(match="*session*")] == []
    assert [k async for k in store.client.scan_iter(match="*waiting*")] == []
    assert await store.client.xlen(store.run_keys(run_id).events) == 2


async def test_a_suspension_is_applied_after_the_writes_and_acks_the_task(rt: Runtime) -> None:
    store = raw(rt)
    run_id, claim = await _claimed(rt, None)
    keys = store.run_keys(run_id)
    writes = Writes()
    writes.event(EventType.STEP_STARTED, b'{"step_id":"s-0"}')
    suspension = Writes()
    suspension.create_hook(
        HookSpec("s-0.h", make_token(run_id, "s-0.h"), {"name": "h"}, False, None)
    )
    suspension.event(EventType.WORKFLOW_SUSPENDED, b'{"wait":"s-0.h"}')
    assert (await store.client.xpending(keys.tasks, TASKS_GROUP))["pending"] == 1

    applied = await _apply(store, run_id, claim, writes, suspension=suspension)

    assert applied.outcome is ApplyOutcome.OK
    types = [f[b"t"] for _, f in await _stream(store, keys.events)]
    assert types == [b"workflow.started", b"step.started", b"workflow.suspended"]
    run = await store.client.hgetall(keys.run)
    assert run[b"status"] == b"suspended"
    assert b"lease" not in run and b"owner" not in run and b"msg" not in run
    assert await store.client.hexists(keys.hooks, "s-0.h")
    assert await store.client.hget(keys.stats, "suspended") == b"1"
    # the task is acknowledged and deleted
    assert (await store.client.xpending(keys.tasks, TASKS_GROUP))["pending"] == 0
    assert await store.client.xlen(keys.tasks) == 0


async def test_a_refused_suspension_writes_the_writes_only(rt: Runtime) -> None:
    store = raw(rt)
    run_id, claim = await _claimed(rt, None)
    keys = store.run_keys(run_id)
    seen = claim.events[-1].id
    # an event lands after the execution's last read (as an answer or a timer would)
    first = Writes()
    first.event(EventType.TIMER_FIRED, b'{"timer_id":"t9"}')
    await store.apply(
        run_id, claim.fence, seen, first, max_events=MAX_EVENTS, retention_seconds=RETENTION
    )
    writes = Writes()
    writes.save_checkpoint("s-0", b"1")
    suspension = Writes()
    suspension.save_checkpoint("s-1", b"2")
    suspension.schedule_timer("t1", 99)
    suspension.event(EventType.WORKFLOW_SUSPENDED, b'{"wait":"t1"}')

    applied = await store.apply(
        run_id,
        claim.fence,
        seen,
        writes,
        suspension=suspension,
        max_events=MAX_EVENTS,
        retention_seconds=RETENTION,
    )

    assert applied.outcome is ApplyOutcome.REFUSED
    assert [e.type for e in applied.arrived] == ["timer.fired"]
    assert await store.client.hgetall(keys.ckpt) == {b"s-0": b"1"}  # the writes only
    assert await store.client.zcard(keys.deadlines) == 0
    run = await store.client.hgetall(keys.run)
    assert run[b"status"] == b"running" and b"dl" not in run and run[b"nev"] == b"2"
    assert (await store.client.xpending(keys.tasks, TASKS_GROUP))["pending"] == 1


async def test_finishing_cleans_what_the_run_left(rt: Runtime) -> None:
    store = raw(rt)
    client = store.client
    session = rt.new_session_id()
    run_id, claim = await _claimed(rt, session)
    keys = store.run_keys(run_id)
    outbox = store.session_key("outbox", session)
    writes, _ = _every_op(run_id, 1_900_000_000_000)
    applied = await _apply(store, run_id, claim, writes)
    assert applied.outcome is ApplyOutcome.OK
    done = Writes()
    done.event(EventType.WORKFLOW_COMPLETED, b'{"result":42}')

    finished = await store.apply(
        run_id,
        claim.fence,
        applied.last_id or "",
        done,
        finish=Finish(RunStatus.COMPLETED, b"42"),
        max_events=MAX_EVENTS,
        retention_seconds=RETENTION,
    )

    assert finished.outcome is ApplyOutcome.OK
    run = await client.hgetall(keys.run)
    assert run[b"status"] == b"completed" and run[b"out"] == b"42" and b"ended" in run
    assert b"dl" not in run and b"lease" not in run and b"msg" not in run
    # checkpoints go; pending hooks close (record, index, deadlines), so does the timer
    assert await client.exists(keys.ckpt) == 0
    # (the ended run is compacted, a moment later: its log and hooks go to its archive)
    assert await store.flush_compactions() == 1
    _, _, hooks = await store.read_log(run_id, with_events=False)
    assert {hook_id: record[:1] for hook_id, record in hooks.items()} == {
        b"s-0.approve": b"C",
        b"h1.note": b"C",
    }
    assert await client.exists(keys.events, keys.hooks) == 0
    assert await client.smembers(keys.pending) == set()
    assert await client.zcard(keys.deadlines) == 0
    # the session's prompt is no longer waiting: its outbox expires with the run
    assert await client.hget(store.keys.key("waiting", keys.partition), session) is None
    segment_id = (await client.hget(keys.run, "archive")).decode()
    segment = store.keys.key("segment", keys.partition, segment_id=segment_id)
    for key in (keys.run, segment, outbox):
        assert RETENTION - 60 < await client.ttl(key) <= RETENTION, key
    assert await client.hget(keys.stats, "completed") == b"1"
    assert (await client.xpending(keys.tasks, TASKS_GROUP))["pending"] == 0
