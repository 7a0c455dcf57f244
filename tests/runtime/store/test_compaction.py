"""What Redis keeps of a run: a suspended run's small log at its used size, an ended run
compacted into one archive (log + hooks), read back in full, the swap fenced."""

from __future__ import annotations

import asyncio
import math
import re
import zlib
from collections import Counter
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from runtime import (
    Runtime,
    Worker,
    load_step_checkpoint,
    save_step_checkpoint,
    step,
    step_hook,
    workflow,
)
from runtime.errors import HookAlreadyAnswered
from runtime.models import Event, HookStatus, RunStatus
from runtime.store.redis import RedisStore, _archive, _compaction, _scripts
from runtime.store.redis._durability import READ_ONLY_SCRIPTS
from tests.helpers import running
from tests.raw_redis import raw

# orjson.dumps({"state": "x" * 88}) is 100 bytes: the checkpoint of bench/app.py
CHECKPOINT = {"state": "x" * 88}


@step
async def converse() -> Any:
    if await load_step_checkpoint() is None:
        await save_step_checkpoint(CHECKPOINT)
    return await step_hook("answer")


@workflow(name="compaction_hitl")
async def compaction_hitl(note: str = "") -> Any:
    return await converse()


async def _flush_once_scheduled(store: RedisStore) -> int:
    """``flush_compactions()`` once a background worker has scheduled the run's compaction:
    ``rt.wait()`` returns when the end is in the log, which can be before the worker's
    coroutine has read its APPLY's reply, where the compaction is scheduled (seen once in
    a full suite run: 0 flushed)."""
    for _ in range(500):
        if flushed := await store.flush_compactions():
            return flushed
        await asyncio.sleep(0.01)
    return 0


async def _suspended(rt: Runtime, note: str = "") -> tuple[str, str]:
    run_id = await rt.start(compaction_hitl, note)
    for _ in range(500):
        hooks = [h for h in await rt.list_hooks() if h.run_id == run_id]
        if hooks and (await rt.get_run(run_id)).status is RunStatus.SUSPENDED:  # type: ignore[union-attr]
            return run_id, hooks[0].token
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not suspend")


def _run_key_names(store: RedisStore, run_id: str) -> list[str]:
    keys = store.run_keys(run_id)
    names = ("run", "events", "ckpt", "hooks", "inbox", "children")
    return [store.keys.key(name, keys.partition, run_id=run_id) for name in names]


async def _segment_of(store: RedisStore, run_id: str) -> str | None:
    """The key of the segment run ``run_id``'s hash names, if it names one."""
    keys = store.run_keys(run_id)
    segment_id = await store.client.hget(keys.run, "archive")
    if segment_id is None:
        return None
    return _compaction.segment_key(keys.partition, segment_id.decode())


async def _bytes(client: aioredis.Redis, keys: list[str]) -> int:
    total = 0
    for key in keys:
        total += await client.memory_usage(key, samples=0) or 0
    return total


async def test_bench_run_costs_at_most_1kb_once_finished(redis_url: str) -> None:
    """MEMORY USAGE of everything left of a finished bench-like run (100-byte checkpoint,
    one step_hook): it was ~5.3 KB (a 4 KB stream node, hooks hash, run hash)."""
    async with Runtime(redis_url, partitions=4) as rt:
        worker = Worker(rt, timer_tick=0.01)
        async with running(worker):
            run_id, token = await _suspended(rt)
            store = raw(rt)
            suspended = await _bytes(store.client, _run_key_names(store, run_id))
            await rt.resume_hook(token, {"ok": True})
            assert await rt.wait(run_id) == {"ok": True}
            # compacted a few seconds after its end (waiters on its stream see its end)
            keys = store.run_keys(run_id)
            assert await store.client.exists(keys.events, keys.hooks) == 2
            assert await _flush_once_scheduled(store) == 1
        segment = await _segment_of(store, run_id)
        assert segment is not None  # the run's own: it ended alone
        finished = await _bytes(store.client, [*_run_key_names(store, run_id), segment])
        print(f"MEMORY USAGE of a bench-like run: suspended {suspended} B, finished {finished} B")
        assert finished <= 1024
        keys = store.run_keys(run_id)
        assert await store.client.exists(keys.events, keys.hooks, keys.ckpt) == 0


async def test_suspended_log_is_stored_at_its_used_size(redis_url: str) -> None:
    """A suspended run's stream is not left at a 4 KB node (Redis 7.0 allocates a new
    stream node at stream-node-max-bytes): MEMORY USAGE of its 4 events was 4,728 B."""
    async with Runtime(redis_url, partitions=4) as rt:
        worker = Worker(rt, timer_tick=0.01)
        async with running(worker):
            run_id, _ = await _suspended(rt)
        store = raw(rt)
        size = await store.client.memory_usage(store.run_keys(run_id).events, samples=0)
        assert size is not None and size <= 1200, size
        assert len(await rt.events(run_id)) == 4


async def test_history_and_hooks_read_the_same_after_compaction(rt: Runtime) -> None:
    """Everything a reader saw of the run before it ended is still there, the same, after
    it was compacted; and an answer to a hook of the compacted run gets the outcome it
    got before (duplicate, conflict, finished)."""
    worker = Worker(rt, timer_tick=0.01)
    note = "é ✓ " + "y" * 300  # non-ASCII and a value longer than a listpack entry
    async with running(worker):
        run_id, token = await _suspended(rt, note)
        before = await rt.events(run_id)
        await rt.resume_hook(token, {"ok": True, "n": 2**53})
        assert await rt.wait(run_id) == {"ok": True, "n": 2**53}
    store = raw(rt)
    assert await store.flush_compactions() == 1
    keys = store.run_keys(run_id)
    assert await store.client.exists(keys.events, keys.hooks) == 0
    segment = await _segment_of(store, run_id)
    assert segment is not None and await store.client.exists(segment)
    after = await rt.events(run_id)
    assert after is not None and before is not None
    assert after[: len(before)] == before
    assert [e.type for e in after[len(before) :]] == [
        "hook.received",
        "step.completed",
        "workflow.completed",
    ]
    assert after[0].data["args"] == [note]
    info = await rt.get_run(run_id)
    assert info is not None and info.status is RunStatus.COMPLETED
    assert [(h.name, h.status) for h in info.hooks] == [("answer", HookStatus.RECEIVED)]
    assert await rt.resume_hook(token, {"ok": True, "n": 2**53}) is False  # a duplicate
    with pytest.raises(HookAlreadyAnswered):
        await rt.resume_hook(token, {"ok": False})


async def _ended_uncompacted(store: RedisStore, run_id: str, status: str) -> None:
    """A run whose ending was not followed by its compaction (its worker died in
    between): the form every run had before compaction existed."""
    keys = store.run_keys(run_id)
    await store.client.hset(keys.run, mapping={"status": status, "wf": "wf", "created": 1})
    for n in range(3):
        await _append(store, run_id, "step.started", f'{{"n":{n}}}')
    await store.client.hset(keys.hooks, "h", 'R-{"name":"h"}')


async def _append(store: RedisStore, run_id: str, event_type: str, data: str) -> None:
    """An event appended as every script appends one (lua/lib.lua append_event): the
    run's event count `nev` goes up with it."""
    keys = store.run_keys(run_id)
    await store.client.xadd(keys.events, {"t": event_type, "d": data})
    await store.client.hincrby(keys.run, "nev", 1)


async def _swap_read(store: RedisStore, run_id: str, read: tuple[Any, Any]) -> int:
    """The swap of run ``run_id`` in a segment made of an earlier read of its log and hooks."""
    run_read = _compaction.RunRead(store.run_keys(run_id), *read)
    return await store._swap(_compaction.pack_segment([run_read]))


async def _read(store: RedisStore, run_id: str) -> tuple[Any, Any]:
    return (await store._read_units([[store.run_keys(run_id)]]))[0][0]


async def test_runs_are_compacted_in_units_of_one_partition(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit (one XREAD, one hooks script, one swap) holds runs of one partition only, as
    many as it may, so that runs ending together share those three commands."""
    store = raw(rt)
    monkeypatch.setattr(_compaction, "_UNIT_RUNS", 3)
    monkeypatch.setattr(_compaction, "_ROUND_RUNS", 5)
    run_ids = [store.new_run_id(None) for _ in range(40)]
    rounds = store._rounds(run_ids)
    units = [unit for units in rounds for unit in units]
    assert sorted(run.run_id for unit in units for run in unit) == sorted(run_ids)
    assert all(len({run.partition for run in unit}) == 1 for unit in units)
    assert all(1 <= len(unit) <= 3 for unit in units)
    assert all(sum(map(len, units)) <= 5 for units in rounds)
    per_partition = Counter(store.run_keys(run_id).partition for run_id in run_ids)
    assert len(units) == sum(math.ceil(n / 3) for n in per_partition.values())
    assert store._rounds([]) == []
    # a unit bigger than a round: a round of its own, nothing left out
    monkeypatch.setattr(_compaction, "_ROUND_RUNS", 2)
    rounds = store._rounds(run_ids)
    assert all(len(units) == 1 for units in rounds)
    assert sorted(run.run_id for units in rounds for run in units[0]) == sorted(run_ids)


async def test_compaction_is_fenced_against_a_change_after_its_read(rt: Runtime) -> None:
    store = raw(rt)
    run_id = store.new_run_id(None)
    keys = store.run_keys(run_id)
    await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
    read = await _read(store, run_id)
    # an event lands between the read and the swap: the swap refuses, nothing is lost
    await _append(store, run_id, "timer.fired", "{}")
    assert not await _swap_read(store, run_id, read)
    assert await store.client.xlen(keys.events) == 4
    # a hook written between the read and the swap: refused too
    read = await _read(store, run_id)
    await store.client.hset(keys.hooks, "h2", 'P-{"name":"h2"}')
    assert not await _swap_read(store, run_id, read)
    # read again: compacted, with all of it
    before = await rt.events(run_id)
    raced_log, _ = await _read(store, run_id)
    assert await store.compact([run_id]) == 1
    assert await rt.events(run_id) == before and len(before or []) == 4
    assert [h.hook_id for h in await store.run_hooks(run_id) or []] == ["h", "h2"]
    # a second compaction whose read raced the first (the log read before its swap, the
    # hooks after: none left) is refused: the archive keeps the hooks
    assert not await _swap_read(store, run_id, (raced_log, {}))
    assert [h.hook_id for h in await store.run_hooks(run_id) or []] == ["h", "h2"]
    # a second compaction (another worker, a retry of the call) changes nothing
    assert await store.compact([run_id]) == 0
    assert await rt.events(run_id) == before


@pytest.mark.parametrize("status", [RunStatus.BLOCKED, RunStatus.SUSPENDED, RunStatus.RUNNING])
async def test_a_run_that_has_not_ended_is_not_compacted(rt: Runtime, status: RunStatus) -> None:
    """A blocked run waits for a retry (retry.lua appends to its log and re-executes it),
    a suspended or running one goes on: none of them is compacted."""
    store = raw(rt)
    run_id = store.new_run_id(None)
    await _ended_uncompacted(store, run_id, status.value)
    assert await store.compact([run_id]) == 0
    keys = store.run_keys(run_id)
    assert await store.client.xlen(keys.events) == 3


async def test_a_cancelled_run_and_its_log_are_compacted(rt: Runtime) -> None:
    worker = Worker(rt, timer_tick=0.01)
    async with running(worker):
        run_id, _ = await _suspended(rt)
        before = await rt.events(run_id)
        await rt.cancel(run_id)
    store = raw(rt)
    assert await store.flush_compactions() == 1
    keys = store.run_keys(run_id)
    assert await store.client.exists(keys.events, keys.hooks, keys.ckpt) == 0
    after = await rt.events(run_id)
    assert before is not None and after is not None
    assert after[:-1] == before and after[-1].type == "workflow.cancelled"
    assert isinstance(after[-1], Event)
    info = await rt.get_run(run_id)
    assert info is not None and [h.status for h in info.hooks] == [HookStatus.CANCELLED]


async def test_a_waiter_that_blocks_on_the_stream_just_after_the_end_sees_it(rt: Runtime) -> None:
    """Runtime.wait reads the run's state, then blocks on its stream from the last event
    it saw: the stream is still there for the delay, so a read issued just after the run
    ended returns at once (on a stream already gone it would block for its timeout)."""
    worker = Worker(rt, timer_tick=0.01)
    async with running(worker):
        run_id, token = await _suspended(rt)
        snapshot = await rt.store.run_snapshot(run_id)
        await rt.resume_hook(token, "yes")
        while (await rt.store.run_snapshot(run_id)).status is not RunStatus.COMPLETED:
            await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await rt.store.wait_for_events(run_id, snapshot.last_event_id, 5_000)
        assert loop.time() - started < 1
    store = raw(rt)
    assert await store.flush_compactions() == 1
    after = await rt.store.run_snapshot(run_id)
    assert after.status is RunStatus.COMPLETED and after.last_event_id != snapshot.last_event_id


@step
async def fetch_note() -> str:
    return "fetched"


@workflow(name="compaction_two_steps")
async def compaction_two_steps() -> Any:
    note = await fetch_note()
    return [note, await converse()]


async def test_a_compacted_run_can_be_restarted_and_forked(rt: Runtime) -> None:
    """restart reads the old run's log (from its archive now) and copies what comes
    before the chosen step into the new run."""
    worker = Worker(rt, timer_tick=0.01)
    async with running(worker):
        run_id = await rt.start(compaction_two_steps)
        while not [h for h in await rt.list_hooks() if h.run_id == run_id]:
            await asyncio.sleep(0.02)
        [hook] = [h for h in await rt.list_hooks() if h.run_id == run_id]
        await rt.resume_hook(hook.token, "first")
        assert await rt.wait(run_id) == ["fetched", "first"]
        assert await raw(rt).flush_compactions() >= 1
        fork = await rt.restart(run_id, from_step="converse")
        copied = await rt.events(fork)
        assert copied is not None and "step.completed" in [e.type for e in copied]
        while not [h for h in await rt.list_hooks() if h.run_id == fork]:
            await asyncio.sleep(0.02)
        [again] = [h for h in await rt.list_hooks() if h.run_id == fork]
        await rt.resume_hook(again.token, "second")
        assert await rt.wait(fork) == ["fetched", "second"]
    info = await rt.get_run(run_id)
    assert info is not None and info.restarted_as == fork


async def test_the_operator_compacts_the_ended_runs_left_uncompacted(rt: Runtime) -> None:
    """Runs whose process stopped within the delay keep their stream: one scan compacts
    the ended ones, and only those."""
    store = raw(rt)
    left = {status: store.new_run_id(None) for status in RunStatus}
    for status, run_id in left.items():
        await _ended_uncompacted(store, run_id, status.value)
    before = {run_id: await rt.events(run_id) for run_id in left.values()}
    ended = {status for status in RunStatus if status.finished}
    assert await rt.compact_ended() == len(ended)
    for status, run_id in left.items():
        keys = store.run_keys(run_id)
        assert await store.client.exists(keys.events) == (0 if status in ended else 1)
        assert await rt.events(run_id) == before[run_id]
    assert await rt.compact_ended() == 0


async def test_compaction_reads_a_store_on_resp2(redis_url: str) -> None:
    """The compactor reads logs and hooks as Redis sends them: a hash is a map on RESP3 (the
    default) and a flat array on RESP2; both make the same archive."""
    async with Runtime(f"{redis_url}?protocol=2", partitions=4) as rt:
        store = raw(rt)
        assert store.client.connection_pool.connection_kwargs.get("protocol") == 2
        async with running(Worker(rt, timer_tick=0.01)):
            run_id, token = await _suspended(rt)
            before = await rt.events(run_id)
            await rt.resume_hook(token, {"ok": True})
            assert await rt.wait(run_id) == {"ok": True}
            assert await _flush_once_scheduled(store) == 1
        after = await rt.events(run_id)
        assert before is not None and after is not None and after[: len(before)] == before
        assert [(h.name, h.status) for h in await store.run_hooks(run_id) or []] == [
            ("answer", HookStatus.RECEIVED)
        ]
        # compacted already: no stream left to read (XREAD's nil reply on RESP2)
        assert await store.compact([run_id]) == 0
        assert await rt.events(run_id) == after


_CONTAINERS = {"XGROUP", "XINFO"}  # the container commands the scripts call


async def test_the_scripts_that_only_read_are_those_marked_read_only(redis_url: str) -> None:
    """A script in READ_ONLY_SCRIPTS is sent without the WAIT for replicas of ``?wait=N``
    (runtime/store/redis/_durability.py): Redis' own command table (COMMAND INFO) says that
    every command it calls only reads, and that every other script calls one that writes.
    A container command (XGROUP, XINFO) is judged by its subcommand's flags."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        for name in _scripts.NAMES:
            calls = re.findall(r"redis\.p?call\('(\w+)'(?:, '(\w+)')?", _scripts.source(name))
            assert calls, f"{name}: no redis.call found"
            called = {c if c.upper() not in _CONTAINERS else f"{c}|{sub}" for c, sub in calls}
            info = await client.execute_command("COMMAND", "INFO", *called)
            writes = {command for command, spec in info.items() if "write" in spec["flags"]}
            assert (name in READ_ONLY_SCRIPTS) == (not writes), (name, writes)
    finally:
        await client.aclose()


async def test_a_failing_round_does_not_stop_the_compactor(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background compaction that fails (here an unexpected error in its read) leaves its
    runs as they are and goes on with the next round: nothing it raises ends the task."""
    store = raw(rt)
    ended = []
    async with running(Worker(rt, timer_tick=0.01)):
        for _ in range(2):
            run_id, token = await _suspended(rt)
            await rt.resume_hook(token, {"ok": True})
            assert await rt.wait(run_id) == {"ok": True}
            ended.append(run_id)
        store._due.clear()  # type: ignore[union-attr]  # compacted by hand below
    monkeypatch.setattr(_compaction, "_UNIT_RUNS", 1)
    monkeypatch.setattr(_compaction, "_ROUND_RUNS", 1)  # a round per run, whatever partition
    read_units = store._read_units
    calls = 0

    async def fails_first(units: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug in the read")
        return await read_units(units)

    monkeypatch.setattr(store, "_read_units", fails_first)
    assert await store._compact_best_effort(ended) == 1
    first, second = (store.run_keys(r) for r in ended)
    assert await store.client.exists(first.events) == 1  # left as it was, readable
    assert await store.client.exists(second.events) == 0  # compacted
    assert [e.type for e in await rt.events(ended[0]) or []][-1] == "workflow.completed"


def _runs_in(blob: bytes) -> list[str]:
    """The ids of the runs a segment holds, from its header (runtime/store/redis/_archive.py:
    format 2, a zlib stream of the header line then the documents)."""
    assert blob[:1] == b"\x02", f"not a segment: format {blob[:1]!r}"
    data = zlib.decompressobj(zdict=_archive._ZDICT_1).decompress(blob[1:])
    return list(orjson.loads(data[: data.index(b"\n")]))


def _ids_in_one_partition(store: RedisStore, n: int) -> list[str]:
    """``n`` new run ids of one partition (the first id's)."""
    ids = [store.new_run_id(None)]
    while len(ids) < n:
        run_id = store.new_run_id(None)
        if store.run_keys(run_id).partition == store.run_keys(ids[0]).partition:
            ids.append(run_id)
    return ids


async def test_runs_that_ended_together_share_one_segment(rt: Runtime) -> None:
    """One segment for the runs of a partition compacted together, each read back in full
    from it, and kept as long as the longest-kept of them."""
    store = raw(rt)
    run_ids = _ids_in_one_partition(store, 5)
    for ttl_s, run_id in enumerate(run_ids, start=1):
        await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
        await _append(store, run_id, "workflow.completed", f'{{"result":"{run_id}"}}')
        await store.client.hset(store.run_keys(run_id).hooks, f"h-{run_id}", 'E-{"name":"x"}')
        await store.client.expire(store.run_keys(run_id).run, 100 * ttl_s)
    before = {run_id: await rt.events(run_id) for run_id in run_ids}
    assert await store.compact(run_ids) == 5
    segments = {await _segment_of(store, run_id) for run_id in run_ids}
    assert len(segments) == 1
    [segment] = segments
    assert segment is not None
    blob = await store.client.get(segment)
    assert sorted(_runs_in(blob)) == sorted(run_ids)
    for run_id in run_ids:
        keys = store.run_keys(run_id)
        assert await store.client.exists(keys.events, keys.hooks, keys.ckpt) == 0
        assert await rt.events(run_id) == before[run_id]
        hooks = await store.run_hooks(run_id) or []
        assert sorted(h.hook_id for h in hooks) == sorted(["h", f"h-{run_id}"])
    # it expires with the last of its runs, not before
    assert 490 < await store.client.ttl(segment) <= 500


async def test_a_segment_of_a_run_kept_for_good_is_kept_for_good(rt: Runtime) -> None:
    store = raw(rt)
    kept, expiring = _ids_in_one_partition(store, 2)
    for run_id in (kept, expiring):
        await _ended_uncompacted(store, run_id, RunStatus.FAILED.value)
    await store.client.expire(store.run_keys(expiring).run, 100)
    assert await store.compact([kept, expiring]) == 2
    segment = await _segment_of(store, kept)
    assert segment is not None and segment == await _segment_of(store, expiring)
    assert await store.client.ttl(segment) == -1


async def test_a_segment_holds_runs_up_to_its_size(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs go into a segment while their documents fit in SEGMENT_BYTES (what reading one
    run inflates); a run bigger than that has one of its own."""
    monkeypatch.setattr(_archive, "SEGMENT_BYTES", 1000)
    store = raw(rt)
    run_ids = _ids_in_one_partition(store, 7)
    big = run_ids[3]
    for run_id in run_ids:
        await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
    await _append(store, big, "step.completed", '{"result":"' + "z" * 3000 + '"}')
    before = {run_id: await rt.events(run_id) for run_id in run_ids}
    assert await store.compact(run_ids) == 7
    holders: dict[str, list[str]] = {}
    for run_id in run_ids:
        segment = await _segment_of(store, run_id)
        assert segment is not None
        holders.setdefault(segment, []).append(run_id)
        assert await rt.events(run_id) == before[run_id]
    assert [big] in holders.values()
    assert len(holders) >= 3  # 6 small documents of ~300 bytes do not fit in one
    for segment, members in holders.items():
        blob = await store.client.get(segment)
        assert _runs_in(blob) == members  # in order, nothing else
        if members != [big]:
            inflated = zlib.decompressobj(zdict=_archive._ZDICT_1).decompress(blob[1:])
            assert len(inflated) - inflated.index(b"\n") - 1 <= 1000


async def test_a_run_refused_by_its_fence_is_left_out_of_its_segment(rt: Runtime) -> None:
    """A run that changed after the read its document was made from stays as it is (its
    hash does not name the segment); its partners are swapped in, and it is compacted
    later into another segment, with the change."""
    store = raw(rt)
    changed, steady = _ids_in_one_partition(store, 2)
    for run_id in (changed, steady):
        await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
    [reads] = await store._read_units([[store.run_keys(changed), store.run_keys(steady)]])
    await _append(store, changed, "timer.fired", "{}")
    units = [
        _compaction.RunRead(store.run_keys(run_id), *read)
        for run_id, read in zip((changed, steady), reads, strict=True)
    ]
    segment = _compaction.pack_segment(units)
    assert await store._swap(segment) == 1
    assert await _segment_of(store, changed) is None
    assert await store.client.xlen(store.run_keys(changed).events) == 4
    assert await _segment_of(store, steady) == _compaction.segment_key(
        store.run_keys(steady).partition, segment.segment_id
    )
    assert await store.compact([changed]) == 1
    later = await _segment_of(store, changed)
    assert later is not None and later != await _segment_of(store, steady)
    events = await rt.events(changed)
    assert events is not None and [e.type for e in events][-1] == "timer.fired"


# A run compacted by the code before segments (at 2a240e4, by hand, on Redis 7.0): its hash
# and its own archive (format 1) at run:<id>:archive. Its hook was answered "yes".
_OLD_RUN_ID = "r-e1fed83c41cc7968ec9de677"
_OLD_TOKEN = "r-e1fed83c41cc7968ec9de677:h0.answer"
_OLD_HASH = {
    "status": "completed",
    "wf": "archived_before_segments",
    "created": "1796154731659",
    "fence": "2",
    "nev": "5",
    "ver": "",
    "out": '"old:yes"',
    "ended": "1796154731729",
    "last": "1796154731730-0",
}
_OLD_ARCHIVE = bytes.fromhex(
    "0158a4b971b04f6d93cd0ec22010849f45ced6b02d3f6d1fc3331c80423c1835f6600ce1dd6d6b7169e389"
    "90ec4e6626dfe61764278033d980107545cb5cbf2031f340eed781e8a48fe59e8476d9dbba8f04f1bad093"
    "b98d2fff9ca63260f9ff25e78f246cac604b313387aafbedba4343d8472cb07dfb711dd83bdc6b35745b4a"
    "5167c483987ae967cda4f5da322af6e45c45b50457a4576b7445d2ec204f1d1e33c0c67a098eb774e0e02d"
    "138e0716a80bc649ebac6f99a19c7581a4f4012e538822"
)


async def test_a_run_compacted_before_segments_reads_the_same(rt: Runtime) -> None:
    """Its own archive (format 1) is read by every reader, and an answer to its hook gets
    the outcome it got before."""
    store = raw(rt)
    keys = store.run_keys(_OLD_RUN_ID)
    await store.client.hset(keys.run, mapping=_OLD_HASH)
    await store.client.set(_compaction.archive_key(keys), _OLD_ARCHIVE)
    events = await rt.events(_OLD_RUN_ID)
    assert events is not None
    assert [(e.type, e.data) for e in events] == [
        ("workflow.started", {"args": ["old"]}),
        ("hook.created", {"hook_id": "h0.answer", "name": "answer", "seq": 0}),
        ("workflow.suspended", {"wait": "h0.answer"}),
        ("hook.received", {"payload": "yes", "hook_id": "h0.answer"}),
        ("workflow.completed", {"result": "old:yes"}),
    ]
    info = await rt.get_run(_OLD_RUN_ID)
    assert info is not None and info.result == "old:yes"
    assert [(h.name, h.status) for h in info.hooks] == [("answer", HookStatus.RECEIVED)]
    assert await rt.resume_hook(_OLD_TOKEN, "yes") is False  # a duplicate
    with pytest.raises(HookAlreadyAnswered):
        await rt.resume_hook(_OLD_TOKEN, "no")
    assert await store.compact([_OLD_RUN_ID]) == 0  # nothing left to compact
    assert await rt.events(_OLD_RUN_ID) == events


class _SplitPipeline:
    """A pipeline whose commands reach Redis one by one, with ``between`` awaited after the
    first: what a pipeline split across reads (a proxy, a large reply) lets happen."""

    def __init__(self, client: Any, between: Any) -> None:
        self.client, self.between, self.calls = client, between, []

    async def __aenter__(self) -> _SplitPipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        def queue(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, args, kwargs))

        return queue

    async def execute(self) -> list[Any]:
        replies = []
        for i, (name, args, kwargs) in enumerate(self.calls):
            replies.append(await getattr(self.client, name)(*args, **kwargs))
            if i == 0:
                await self.between()
        return replies


def _split_next_pipeline(client: Any, monkeypatch: pytest.MonkeyPatch, between: Any) -> None:
    """The client's next pipeline is a _SplitPipeline; those after it, its own."""
    original = client.pipeline
    taken: list[bool] = []

    def pipeline(transaction: bool = True) -> Any:
        if taken:
            return original(transaction=transaction)
        taken.append(True)
        return _SplitPipeline(client, between)

    monkeypatch.setattr(client, "pipeline", pipeline)


@pytest.mark.parametrize("reader", ["events", "get_run"])
async def test_a_run_compacted_in_the_middle_of_a_read_is_read_whole(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """Race closed: the swap landing between a reader's first read and the others (its
    stream and hooks read gone, its segment not named yet) read the ended run with no log
    and no hooks; the readers read the run's segment last."""
    store = raw(rt)
    run_id = store.new_run_id(None)
    await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
    before = await rt.events(run_id)

    async def compact() -> None:
        assert await store.compact([run_id]) == 1

    _split_next_pipeline(store.client, monkeypatch, compact)
    if reader == "events":
        assert await rt.events(run_id) == before
    else:
        info = await rt.get_run(run_id)
        assert info is not None and [h.hook_id for h in info.hooks] == ["h"]
    assert await _segment_of(store, run_id) is not None  # it did happen in between


async def test_runs_in_their_last_millisecond_are_swapped_without_an_error(rt: Runtime) -> None:
    """A run whose expiry is a millisecond away has a PTTL of 0: the segment's expiry was
    set from it as PX 0, which the server refuses, after the runs' hashes had been made to
    name the segment. Now the segment lives at least 1 ms, and is written before them."""
    store = raw(rt)
    for _ in range(150):
        run_id = store.new_run_id(None)
        await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
        read = await _read(store, run_id)
        await store.client.pexpire(store.run_keys(run_id).run, 1)
        await _swap_read(store, run_id, read)  # raised "invalid expire time" ~1 in 14


async def test_runs_that_end_within_the_batch_window_share_a_segment(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compactor, once the first run is due, waits COMPACT_BATCH_SECONDS for more: runs
    of a partition that ended within it go into one segment."""
    monkeypatch.setattr(_compaction, "COMPACT_BATCH_SECONDS", 0.3)
    store = raw(rt)
    monkeypatch.setattr(store, "compact_delay", 0.0)
    run_ids = _ids_in_one_partition(store, 3)
    for run_id in run_ids:
        await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
    store._compact_later(run_ids[0])
    await asyncio.sleep(0.1)
    for run_id in run_ids[1:]:
        store._compact_later(run_id)
    for _ in range(200):
        segments = [await _segment_of(store, run_id) for run_id in run_ids]
        if all(segments):
            break
        await asyncio.sleep(0.02)
    assert len(set(segments)) == 1 and None not in segments


async def test_a_run_whose_segment_is_gone_reads_empty_and_says_so(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    store = raw(rt)
    run_id = store.new_run_id(None)
    await _ended_uncompacted(store, run_id, RunStatus.COMPLETED.value)
    assert await store.compact([run_id]) == 1
    segment = await _segment_of(store, run_id)
    assert segment is not None
    await store.client.delete(segment)  # by hand, or evicted
    with caplog.at_level("WARNING", logger="parley.store"):
        assert await rt.events(run_id) == []
    assert any(run_id in r.getMessage() and segment in r.getMessage() for r in caplog.records)
