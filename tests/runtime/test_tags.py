"""Tags (search attributes): given at start, changed by the workflow with ``set_tags``
(a recorded, replayed call), listed by an index on the memory store and real Redis."""

from __future__ import annotations

import asyncio

import pytest

from runtime import (
    InvalidTag,
    RunStatus,
    Runtime,
    UsageError,
    Worker,
    hook,
    set_tags,
    step,
    workflow,
)
from runtime.tags import MAX_TAGS, parse_tag
from tests.raw_redis import raw

set_tags_calls: list[dict[str, str]] = []


@workflow(name="tagged_wf")
async def tagged_wf(priority: str) -> dict[str, str]:
    tags = await set_tags({"priority": priority, "stage": "review"})
    set_tags_calls.append(tags)
    await hook("approve")
    return await set_tags({"stage": None, "outcome": "approved"})


@step
async def tag_inside_step() -> None:
    await set_tags({"a": "b"})


@workflow(name="tags_in_step_wf")
async def tags_in_step_wf() -> None:
    await tag_inside_step()


def _text(member: object) -> str:
    assert isinstance(member, bytes)
    return member.decode()


async def _ids(rt: Runtime, tag: str, **filters: object) -> list[str]:
    return [r.run_id for r in await rt.list_runs(tag=tag, **filters)]  # type: ignore[arg-type]


async def test_start_tags_are_recorded_and_listed_newest_first(rt: Runtime) -> None:
    first = await rt.start(tagged_wf, "low", tags={"customer": "acme", "priority": "high"})
    await asyncio.sleep(0.005)  # newest first is by creation time (ms)
    second = await rt.start(tagged_wf, "low", tags={"customer": "acme"})
    other = await rt.start(tagged_wf, "low", tags={"customer": "globex"})
    untagged = await rt.start(tagged_wf, "low")
    assert (await rt.get_run(first)).tags == {"customer": "acme", "priority": "high"}
    assert (await rt.get_run(untagged)).tags == {}
    assert await _ids(rt, "customer:acme") == [second, first]
    assert await _ids(rt, "customer:globex") == [other]
    assert await rt.list_runs(tag=("priority", "high")) == [await rt.get_run(first)]
    assert await _ids(rt, "customer:acme", limit=1) == [second]
    assert await _ids(rt, "customer:nobody") == []
    assert await _ids(rt, "customer:acme", status="completed") == []
    started = (await rt.events(first))[0]
    assert started.data["tags"] == {"customer": "acme", "priority": "high"}


async def test_untagged_start_writes_no_tag_key(rt: Runtime) -> None:
    run_id = await rt.start(tagged_wf, "low")
    store = raw(rt)
    assert not [k async for k in store.client.scan_iter(match="*tag*")]
    assert b"tags" not in await store.client.hgetall(store.run_keys(run_id).run)


async def test_set_tags_moves_the_run_in_the_index_once_across_replays(
    rt: Runtime, worker: Worker
) -> None:
    set_tags_calls.clear()
    run_id = await rt.start(tagged_wf, "urgent", tags={"customer": "acme", "stage": "new"})
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.SUSPENDED
    assert info.tags == {"customer": "acme", "priority": "urgent", "stage": "review"}
    assert await _ids(rt, "stage:review") == [run_id]
    assert await _ids(rt, "stage:new") == []  # it lost that one
    assert [h.run_id for h in await rt.list_hooks(tag="priority:urgent")] == [run_id]
    assert await rt.list_hooks(tag="priority:low") == []
    [pending] = await rt.list_hooks()
    await rt.resume_hook(pending.token, "ok")
    await worker.drain()
    assert await rt.wait(run_id, timeout=5) == {
        "customer": "acme",
        "outcome": "approved",
        "priority": "urgent",
    }
    # replayed, the first set_tags was not recorded again
    types = [e.type for e in await rt.events(run_id)]
    assert types.count("tags.set") == 2
    assert set_tags_calls == [{"customer": "acme", "priority": "urgent", "stage": "review"}] * 2
    # a finished run stays listed (until its keys expire) under the tags it ended with
    assert await _ids(rt, "outcome:approved") == [run_id]
    assert await _ids(rt, "stage:review") == []
    assert await _ids(rt, "customer:acme", status="completed") == [run_id]


async def test_set_tags_is_refused_inside_a_step_and_outside_a_workflow(
    rt: Runtime, worker: Worker
) -> None:
    with pytest.raises(UsageError, match="while a workflow runs"):
        await set_tags({"a": "b"})
    run_id = await rt.start(tags_in_step_wf)
    await worker.drain()
    info = await rt.get_run(run_id)
    assert info.status is RunStatus.FAILED
    assert info.error is not None and "workflow body" in info.error["message"]


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ({"": "x"}, "tag key"),
        ({"1abc": "x"}, "tag key"),
        ({"a b": "x"}, "tag key"),
        ({"k" * 65: "x"}, "tag key"),
        ({"customer": ""}, "value of tag 'customer'"),
        ({"customer": "a b"}, "value of tag 'customer'"),
        ({"customer": "a|b"}, "value of tag 'customer'"),
        ({"customer": "{p:1}"}, "value of tag 'customer'"),
        ({"customer": "x" * 129}, "value of tag 'customer'"),
        ({"customer": 3}, "value of tag 'customer'"),
        ({f"k{i}": "v" for i in range(MAX_TAGS + 1)}, f"at most {MAX_TAGS} tags"),
    ],
)
async def test_invalid_tags_are_refused_with_a_clear_error(
    rt: Runtime, tags: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidTag, match=message):
        await rt.start(tagged_wf, "low", tags=tags)  # type: ignore[arg-type]
    assert await rt.list_runs() == []


def test_parse_tag() -> None:
    assert parse_tag("customer:acme:eu") == ("customer", "acme:eu")
    assert parse_tag("customer=acme", "=") == ("customer", "acme")
    with pytest.raises(InvalidTag, match="expected a tag as key:value"):
        parse_tag("customer")


async def test_cancel_and_restart_keep_the_index_right(rt: Runtime, worker: Worker) -> None:
    run_id = await rt.start(tagged_wf, "low", tags={"customer": "acme"})
    await worker.drain()
    await rt.cancel(run_id)
    assert await _ids(rt, "customer:acme", status="cancelled") == [run_id]
    await asyncio.sleep(0.005)
    new_id = await rt.restart(run_id)
    assert (await rt.get_run(new_id)).tags == {
        "customer": "acme",
        "priority": "low",
        "stage": "review",
    }
    assert await _ids(rt, "stage:review") == [new_id, run_id]


async def test_expired_runs_leave_the_index(backend_url: str) -> None:
    async with Runtime(backend_url, partitions=1, retention=1) as rt:
        old = await rt.start(tagged_wf, "low", tags={"customer": "acme"})
        await rt.cancel(old)
        store = raw(rt)
        index = store.keys.key("tag", 0, tag="customer=acme")
        assert [_text(m) for m in await store.client.zrange(index, 0, -1)] == [old]
        await asyncio.sleep(1.2)  # the tag-ends entry is due: ended + retention (1 s)
        assert await _ids(rt, "customer:acme") == []  # its hash is gone: skipped
        new = await rt.start(tagged_wf, "low", tags={"customer": "acme"})  # prunes
        assert [_text(m) for m in await store.client.zrange(index, 0, -1)] == [new]


async def test_a_run_id_used_again_stays_listed_under_its_tags(backend_url: str) -> None:
    """order-1 ends, its keys expire, and a new order-1 is tagged partly like it; pruning
    the earlier run's index entries keeps the new run's. Before, the prune removed the id
    from every tag the earlier run had: the new run was missing from those listings for
    its whole life. A tag only the earlier run had is still dropped."""
    async with Runtime(backend_url, partitions=1, retention=1) as rt:
        old_tags = {"customer": "acme", "tier": "gold"}
        old = await rt.start(tagged_wf, "low", run_id="order-1", tags=old_tags)
        await rt.cancel(old)
        await asyncio.sleep(1.2)  # the earlier run's keys expire; its tag-ends entry is due
        new_tags = {"customer": "acme", "team": "b"}
        new = await rt.start(tagged_wf, "low", run_id="order-1", tags=new_tags)  # prunes
        assert new == old
        assert await _ids(rt, "customer:acme") == ["order-1"]
        assert await _ids(rt, "team:b") == ["order-1"]
        store = raw(rt)
        assert await store.client.zcard(store.keys.key("tag", 0, tag="tier=gold")) == 0
        assert await store.client.zcard(store.keys.key("tag_ends", 0)) == 0
