"""Payload limits of what enters from outside (``Limits.max_depth``, integers within
±2**53), at ``resume_hook``, ``start``, ``send`` and ``post_to_session``: a refused value
is a clear InvalidPayload naming its run and hook, and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime import InvalidPayload, Limits, Runtime, Worker, step, step_hook, workflow
from runtime._codec import check_portable, loads_exact


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@step(name="free_answer")
async def free_answer() -> Any:
    return await step_hook("anything")  # no schema: only the payload limits stand guard


@workflow(name="limits_free")
async def limits_free() -> Any:
    return await free_answer()


@workflow(name="limits_echo")
async def limits_echo(value: Any = None) -> Any:
    return value


@pytest.fixture
async def rt(redis_url: str) -> AsyncIterator[Runtime]:
    async with Runtime(redis_url, partitions=4) as runtime:
        yield runtime


async def suspended(rt: Runtime) -> tuple[str, str]:
    run_id = await rt.start(limits_free)
    await Worker(rt).drain()
    [pending] = await rt.list_hooks(run_id=run_id)
    return run_id, pending.token


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (nested(254), "at most 64 levels deep"),  # the campaign's answer: 1011 for ever
        (nested(65), "at most 64 levels deep"),
        ({"n": 2**60}, "integers must be within ±2**53 (JSON numbers are exact only there); "),
        ([-(2**53) - 1], "got -9007199254740993"),
        (10**400, "an integer of 1329 bits"),
    ],
    ids=["254-deep", "65-deep", "2**60", "-2**53-1", "10**400"],
)
async def test_resume_hook_refuses_and_changes_nothing(
    rt: Runtime, payload: Any, says: str
) -> None:
    run_id, token = await suspended(rt)
    before = await rt.events(run_id)
    with pytest.raises(InvalidPayload) as refused:
        await rt.resume_hook(token, payload)
    assert says in refused.value.message
    assert (refused.value.run_id, refused.value.hook_id) == (run_id, token.split(":", 1)[1])
    assert await rt.events(run_id) == before
    [pending] = await rt.list_hooks(run_id=run_id)
    assert pending.token == token and pending.status.value == "pending"
    # the hook still takes an answer, at the limits
    limit = {"deep": nested(63), "n": 2**53, "m": -(2**53)}  # 64 levels deep
    assert await rt.resume_hook(token, limit) is True
    await Worker(rt).drain()
    assert await rt.wait(run_id, timeout=10) == limit


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        ((nested(254),), {}, "argument 0 of the run may nest"),
        ((), {"value": {"n": 2**60}}, "argument 'value' of the run: integers must be within"),
    ],
    ids=["deep-arg", "big-int-kwarg"],
)
async def test_start_refuses_and_starts_nothing(
    rt: Runtime, args: tuple[Any, ...], kwargs: dict[str, Any], says: str
) -> None:
    with pytest.raises(InvalidPayload) as refused:
        await rt.start(limits_echo, *args, idempotency_key="the-start", **kwargs)
    assert says in refused.value.message
    assert await rt.list_runs() == []
    # the idempotency key was not taken: a good start under it makes the run
    run_id = await rt.start(limits_echo, 5, idempotency_key="the-start")
    await Worker(rt).drain()
    assert await rt.wait(run_id, timeout=10) == 5


async def test_send_and_post_to_session_refuse_too(rt: Runtime) -> None:
    run_id, _token = await suspended(rt)
    with pytest.raises(InvalidPayload) as refused:
        await rt.send(run_id, "topic", {"n": 2**60})
    assert refused.value.run_id == run_id
    session = rt.new_session_id()
    with pytest.raises(InvalidPayload, match="at most 64 levels"):
        await rt.post_to_session(session, {"type": "text", "delta": nested(100)})
    assert await rt.read_outbox(session) == []


async def test_the_depth_limit_is_a_setting(redis_url: str) -> None:
    async with Runtime(redis_url, partitions=4, limits=Limits(max_depth=3)) as rt:
        with pytest.raises(InvalidPayload, match="at most 3 levels deep"):
            await rt.start(limits_echo, nested(4))
        await rt.start(limits_echo, nested(3))


def test_decode_reads_every_integer_exactly() -> None:
    # orjson alone reads integers beyond 64 bits as floats: another value, silently
    for text in ("18446744073709551616", "-9223372036854775809"):
        assert Runtime.decode(text) == int(text)
        assert isinstance(Runtime.decode(text), int)
    assert Runtime.decode(b'{"x": [1.5, 18446744073709551616]}') == {
        "x": [1.5, 18446744073709551616]
    }
    assert Runtime.decode("1.8446744073709552e19") == 1.8446744073709552e19  # a float stays
    assert Runtime.decode('{"n": 9007199254740993}') == {"n": 9007199254740993}
    with pytest.raises(ValueError):
        Runtime.decode("{not json")


def test_check_portable_bounds() -> None:
    check_portable(nested(64, {"a": 2**53}), what="x", max_depth=65)
    check_portable([True, False, 1.5, "s", None], what="x", max_depth=1)
    with pytest.raises(InvalidPayload):
        check_portable(nested(2, {}), what="x", max_depth=2)
    with pytest.raises(InvalidPayload, match="got 9007199254740993"):
        check_portable(loads_exact("[9007199254740993]"), what="x", max_depth=2)
