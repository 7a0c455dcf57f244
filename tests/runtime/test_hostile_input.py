"""Property-based tests of the inputs that arrive from outside: tokens and payloads."""

from __future__ import annotations

import asyncio
import math
import re
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import (
    InvalidPayload,
    InvalidToken,
    ParleyError,
    RunNotFound,
    Runtime,
    Worker,
    step,
    step_hook,
    workflow,
)
from runtime.ids import make_token, parse_token

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)  # exact in JSON; beyond is refused
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)


@given(st.text(max_size=300))
def test_any_string_parses_or_raises_invalid_token(text: str) -> None:
    try:
        run_id, hook_id = parse_token(text)
    except InvalidToken as exc:
        assert "expected a token" in str(exc)
    else:
        assert make_token(run_id, hook_id) == text


@given(st.one_of(st.integers(), st.binary(), st.lists(st.text()), st.none()))
def test_non_string_tokens_are_invalid(value: Any) -> None:
    with pytest.raises(InvalidToken, match="expected a token string"):
        parse_token(value)


@given(
    st.from_regex(r"r-[0-9a-f]{24}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9_\-.]{1,60}", fullmatch=True),
)
def test_valid_tokens_round_trip(run_id: str, hook_id: str) -> None:
    assert parse_token(make_token(run_id, hook_id)) == (run_id, hook_id)


@step
async def echo_step() -> Any:
    return await step_hook("echo")


@workflow(name="hostile_echo")
async def hostile_echo() -> Any:
    return await echo_step()


def _normalized(value: Any) -> Any:
    """What JSON makes of a value (-0.0 and 0.0 compare equal; dict keys are strings)."""
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, dict):
        return {str(k): _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_payload_reaches_the_step_unchanged(payload: Any) -> None:
    async def scenario() -> Any:
        async with Runtime(f"memory://{uuid.uuid4().hex}", partitions=1) as rt:
            worker = Worker(rt)
            run_id = await rt.start(hostile_echo)
            await worker.drain()
            [pending] = await rt.list_hooks()
            assert await rt.resume_hook(pending.token, payload) is True
            await worker.drain()
            return await rt.wait(run_id, timeout=5)

    assert asyncio.run(scenario()) == _normalized(payload)


not_json = st.one_of(
    st.builds(object),
    st.sets(st.integers(), min_size=1),
    st.binary(min_size=1),
    st.floats(allow_nan=True).filter(math.isnan),
    st.dictionaries(st.text(max_size=3), st.builds(object), min_size=1, max_size=2),
)


@settings(max_examples=25, deadline=None)
@given(not_json, st.text(max_size=40))
def test_bad_payloads_and_tokens_change_nothing(payload: Any, junk_token: str) -> None:
    async def scenario() -> None:
        async with Runtime(f"memory://{uuid.uuid4().hex}", partitions=1) as rt:
            worker = Worker(rt)
            run_id = await rt.start(hostile_echo)
            await worker.drain()
            [pending] = await rt.list_hooks()
            before = [(e.id, e.type) for e in await rt.events(run_id)]
            with pytest.raises(InvalidPayload):
                await rt.resume_hook(pending.token, payload)
            with pytest.raises(_junk_token_error(junk_token)):
                await rt.resume_hook(junk_token, "x")
            assert [(e.id, e.type) for e in await rt.events(run_id)] == before
            assert [h.token for h in await rt.list_hooks()] == [pending.token]

    asyncio.run(scenario())


WELL_FORMED_TOKEN = re.compile(r"r-[0-9a-f]{24}:[A-Za-z0-9_\-.]{1,200}")


def _junk_token_error(junk_token: str) -> type[ParleyError]:
    """What answering a junk token raises: InvalidToken, unless it happens to be well
    formed (then no such run exists)."""
    return RunNotFound if WELL_FORMED_TOKEN.fullmatch(junk_token) else InvalidToken
