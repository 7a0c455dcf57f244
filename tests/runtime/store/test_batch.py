"""The auto-pipelining script batcher (runtime.store.redis._batch) against a real Redis.

Round trips are counted on the wire: the client's connections record every socket write
and the commands it carries (parsed from RESP), so "one pipeline" means one write holding
every EVALSHA, whatever redis-py does above the socket. A small TCP proxy in front of
Redis holds replies back (calls in flight) or drops connections (an outage).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis
from redis._parsers import _AsyncRESP3Parser
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from runtime import StoreUnavailable
from runtime.store.redis._batch import Batcher, Script, hiredis_parser
from tests.faults import Proxy

ECHO = "return {KEYS[1], ARGV[1]}"
INCR = "return redis.call('INCR', KEYS[1])"
ERROR_REPLY = "return redis.error_reply('boom ' .. ARGV[1])"
LUA_ERROR = "error('kaput')"


def _fresh(source: str) -> str:
    """The script with a unique comment: a SHA Redis has never seen (NOSCRIPT at first)."""
    return f"-- {uuid.uuid4().hex}\n{source}"


def _parse_commands(data: bytes) -> list[str]:
    """The command names in a RESP payload (``SCRIPT LOAD`` with its subcommand)."""
    names = []
    pos = 0
    while pos < len(data):
        assert data[pos : pos + 1] == b"*", data[pos : pos + 20]
        end = data.index(b"\r\n", pos)
        count = int(data[pos + 1 : end])
        pos = end + 2
        parts = []
        for _ in range(count):
            assert data[pos : pos + 1] == b"$"
            end = data.index(b"\r\n", pos)
            size = int(data[pos + 1 : end])
            pos = end + 2
            parts.append(data[pos : pos + size])
            pos += size + 2
        name = parts[0].decode().upper()
        if name in ("SCRIPT", "CLIENT") and len(parts) > 1:
            name += " " + parts[1].decode().upper()
        names.append(name)
    return names


class Wire:
    """What the client sent: one entry per socket write, the commands it carried."""

    def __init__(self) -> None:
        self.writes: list[list[str]] = []

    def script_writes(self) -> list[list[str]]:
        """The writes that carry script commands (not the connection's handshake)."""
        return [
            write for write in self.writes if any(c in ("EVALSHA", "SCRIPT LOAD") for c in write)
        ]

    def clear(self) -> None:
        self.writes.clear()


# Both ways a batch's replies are read (runtime/store/redis/_batch.py): straight from
# hiredis' reader, and through redis-py's read_response where hiredis is not redis-py's
# parser (the pure-Python RESP3 parser here).
PARSERS = {"hiredis": None, "python": _AsyncRESP3Parser}


def make_client(url: str, wire: Wire, parser: str = "hiredis") -> aioredis.Redis:
    class WireConnection(Connection):
        async def send_packed_command(
            self, command: bytes | str | Iterable[bytes], check_health: bool = True
        ) -> None:
            if isinstance(command, str):
                data = command.encode()
            elif isinstance(command, bytes):
                data = command
            else:
                command = list(command)
                data = b"".join(command)
            wire.writes.append(_parse_commands(data))
            await super().send_packed_command(command, check_health)

    options: dict[str, Any] = {}
    if PARSERS[parser] is not None:
        options["parser_class"] = PARSERS[parser]
    pool = aioredis.ConnectionPool.from_url(
        url, connection_class=WireConnection, retry=Retry(NoBackoff(), 0), **options
    )
    return aioredis.Redis(connection_pool=pool)


@pytest.fixture
async def wire() -> Wire:
    return Wire()


@pytest.fixture(params=sorted(PARSERS))
def parser(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def client(redis_url: str, wire: Wire, parser: str) -> AsyncIterator[aioredis.Redis]:
    c = make_client(redis_url, wire, parser)
    yield c
    await c.aclose()


@pytest.fixture
async def proxied(
    redis_url: str, proxy: Proxy, wire: Wire, parser: str
) -> AsyncIterator[aioredis.Redis]:
    """A client whose connections go through ``proxy``."""
    parts = urlsplit(redis_url)
    c = make_client(f"redis://127.0.0.1:{proxy.port}{parts.path}", wire, parser)
    yield c
    await c.aclose()


async def scripts(
    client: aioredis.Redis, wire: Wire, *sources: str, pipelined: bool = True
) -> tuple[Batcher, list[Script]]:
    """A batcher and its scripts, loaded already; the wire log starts empty."""
    batcher = Batcher(client, pipelined=pipelined)
    for source in sources:
        await client.script_load(source)
    wire.clear()
    return batcher, [Script(batcher, source) for source in sources]


async def _settle(*aws: Awaitable[Any]) -> list[Any]:
    """Gather with a deadline: a batcher that loses a caller's reply fails, not hangs."""
    return await asyncio.wait_for(asyncio.gather(*aws, return_exceptions=True), 5)


# one loop turn, one round trip --------------------------------------------------------


def test_script_sha_is_the_sha1_of_its_source() -> None:
    script = Script(Batcher(aioredis.Redis(), pipelined=True), ECHO)
    assert script.sha == hashlib.sha1(ECHO.encode()).hexdigest()
    assert script.source == ECHO


@pytest.mark.parametrize(
    ("keys", "args"),
    [
        (["k"], [b"v"]),
        (["k", "k\u00e9"], ["s", b"b", 7, -3, 1.5, b"", "x" * 1023, b"y" * 1024, "z" * 5000]),
        ([], [str(n) for n in range(1030)]),  # more items than the tables hold
    ],
)
def test_a_script_call_is_packed_as_redis_py_packs_it(keys: list[str], args: list[Any]) -> None:
    """The packing's length prefixes and array header come from tables up to 1,024 and are
    formatted above: the bytes are redis-py's own, on both sides of the boundary."""
    client = aioredis.Redis()
    script = Script(Batcher(client, pipelined=True), ECHO)
    expected = Connection().pack_command("EVALSHA", script.sha, len(keys), *keys, *args)
    assert script.pack(keys, args) == b"".join(expected)


async def test_long_arguments_reach_the_script_intact(client: aioredis.Redis, wire: Wire) -> None:
    script = Script(Batcher(client, pipelined=True), ECHO)
    for size in (1023, 1024, 70_000):
        assert await script(keys=["k"], args=["x" * size]) == [b"k", b"x" * size]


async def test_calls_of_one_loop_turn_share_one_pipeline(
    client: aioredis.Redis, wire: Wire
) -> None:
    _, (echo, incr) = await scripts(client, wire, ECHO, INCR)
    results = await _settle(
        *(echo(keys=[f"k{i}"], args=[f"v{i}"]) for i in range(4)),
        incr(keys=["counter"], args=[]),
        incr(keys=["counter"], args=[]),
    )
    assert wire.script_writes() == [["EVALSHA"] * 6]  # one write, one round trip
    # each caller gets its own reply, in order
    assert results[:4] == [[f"k{i}".encode(), f"v{i}".encode()] for i in range(4)]
    assert sorted(results[4:]) == [1, 2]
    assert await client.get("counter") == b"2"


async def test_a_lone_call_is_sent_directly(client: aioredis.Redis, wire: Wire) -> None:
    _, (echo,) = await scripts(client, wire, ECHO)
    assert await echo(keys=["a"], args=["b"]) == [b"a", b"b"]
    assert wire.script_writes() == [["EVALSHA"]]


async def test_awaited_calls_go_one_round_trip_each(client: aioredis.Redis, wire: Wire) -> None:
    _, (incr,) = await scripts(client, wire, INCR)
    for expected in (1, 2, 3):
        assert await incr(keys=["n"], args=[]) == expected
    assert wire.script_writes() == [["EVALSHA"]] * 3


async def test_calls_made_while_a_batch_is_in_flight_form_the_next_batch(
    proxied: aioredis.Redis, proxy: Proxy, wire: Wire
) -> None:
    _, (echo,) = await scripts(proxied, wire, ECHO)
    proxy.replies.clear()  # the first batch stays in flight
    first = [asyncio.ensure_future(echo(keys=["a"], args=[str(i)])) for i in range(2)]
    await asyncio.sleep(0.05)
    assert wire.script_writes() == [["EVALSHA"] * 2]
    later = [asyncio.ensure_future(echo(keys=["b"], args=[str(i)])) for i in range(3)]
    await asyncio.sleep(0.05)
    proxy.replies.set()
    results = await _settle(*first, *later)
    assert results == [[b"a", b"0"], [b"a", b"1"], [b"b", b"0"], [b"b", b"1"], [b"b", b"2"]]
    assert wire.script_writes() == [["EVALSHA"] * 2, ["EVALSHA"] * 3]


# errors -------------------------------------------------------------------------------


async def test_a_script_error_fails_only_its_own_call(client: aioredis.Redis, wire: Wire) -> None:
    _, (incr, error_reply, lua_error) = await scripts(client, wire, INCR, ERROR_REPLY, LUA_ERROR)
    results = await _settle(
        incr(keys=["a"], args=[]),
        error_reply(keys=["x"], args=["one"]),
        incr(keys=["b"], args=[]),
        lua_error(keys=["y"], args=[]),
        incr(keys=["a"], args=[]),
    )
    assert wire.script_writes() == [["EVALSHA"] * 5]
    assert results[0] == 1 and results[2] == 1 and results[4] == 2
    assert isinstance(results[1], ResponseError) and "boom one" in str(results[1])
    assert isinstance(results[3], ResponseError) and "kaput" in str(results[3])
    assert await client.mget("a", "b") == [b"2", b"1"]


async def test_a_lone_failing_call_raises_its_error(client: aioredis.Redis, wire: Wire) -> None:
    _, (error_reply,) = await scripts(client, wire, ERROR_REPLY)
    with pytest.raises(ResponseError, match="boom alone"):
        await error_reply(keys=["x"], args=["alone"])


async def test_a_redis_error_inside_a_script_fails_only_its_call(
    client: aioredis.Redis, wire: Wire
) -> None:
    wrong_type = "return redis.call('INCR', KEYS[1])"  # on a list: WRONGTYPE
    _, (incr,) = await scripts(client, wire, wrong_type)
    await client.rpush("list", "x")
    results = await _settle(incr(keys=["list"], args=[]), incr(keys=["n"], args=[]))
    assert isinstance(results[0], ResponseError) and "WRONGTYPE" in str(results[0])
    assert results[1] == 1


# NOSCRIPT -----------------------------------------------------------------------------


async def test_noscript_in_a_batch_loads_and_retries_only_the_missing_calls(
    client: aioredis.Redis, wire: Wire
) -> None:
    batcher, (loaded,) = await scripts(client, wire, INCR)
    missing = Script(batcher, _fresh(INCR))
    other_missing = Script(batcher, _fresh(ECHO))
    results = await _settle(
        loaded(keys=["loaded"], args=[]),
        missing(keys=["missing"], args=[]),
        other_missing(keys=["k"], args=["v"]),
        missing(keys=["missing"], args=[]),
    )
    assert results[0] == 1
    assert sorted([results[1], results[3]]) == [1, 2]
    assert results[2] == [b"k", b"v"]
    writes = wire.script_writes()
    assert writes[0] == ["EVALSHA"] * 4  # the batch: two scripts missing
    assert sorted(map(tuple, writes[1:3])) == [("SCRIPT LOAD",)] * 2  # each loaded once
    assert writes[3:] == [["EVALSHA"] * 3]  # only the three that missed, in one retry
    # NOSCRIPT means not run: every call ran exactly once
    assert await client.mget("loaded", "missing") == [b"1", b"2"]
    assert await client.script_exists(missing.sha, other_missing.sha) == [True, True]


async def test_noscript_after_script_flush_is_transparent(
    client: aioredis.Redis, wire: Wire
) -> None:
    _, (incr, echo) = await scripts(client, wire, INCR, ECHO)
    assert await _settle(incr(keys=["n"], args=[]), echo(keys=["a"], args=["b"])) == [
        1,
        [b"a", b"b"],
    ]
    await client.script_flush()  # as after a Redis restart or a failover
    assert await client.script_exists(incr.sha, echo.sha) == [False, False]
    wire.clear()
    results = await _settle(
        incr(keys=["n"], args=[]), echo(keys=["c"], args=["d"]), incr(keys=["n"], args=[])
    )
    assert sorted([results[0], results[2]]) == [2, 3] and results[1] == [b"c", b"d"]
    assert await client.get("n") == b"3"
    writes = wire.script_writes()
    assert writes[0] == ["EVALSHA"] * 3 and writes[-1] == ["EVALSHA"] * 3
    assert len(writes) == 4  # batch, two loads, retry
    # a lone call after another flush reloads too
    await client.script_flush()
    wire.clear()
    assert await incr(keys=["n"], args=[]) == 4
    assert wire.script_writes() == [["EVALSHA"], ["SCRIPT LOAD"], ["EVALSHA"]]


async def test_a_script_that_still_misses_after_the_reload_fails_its_call(
    client: aioredis.Redis, wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the reload does not stick (flushed again in between), the call fails with
    NOSCRIPT rather than looping."""
    batcher, (echo,) = await scripts(client, wire, ECHO)
    missing = Script(batcher, _fresh(INCR))
    original = client.script_load

    async def load_then_flush(source: str) -> Any:
        sha = await original(source)
        await client.script_flush()
        return sha

    monkeypatch.setattr(client, "script_load", load_then_flush)
    results = await _settle(missing(keys=["n"], args=[]), echo(keys=["a"], args=["b"]))
    assert isinstance(results[0], NoScriptError)
    assert results[1] == [b"a", b"b"]
    assert await client.get("n") is None


async def test_a_failed_reload_does_not_fail_the_calls_that_already_succeeded(
    client: aioredis.Redis, wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    batcher, (incr,) = await scripts(client, wire, INCR)
    missing = Script(batcher, _fresh(ECHO))

    async def connection_lost(source: str) -> Any:
        raise RedisConnectionError("connection lost while loading the script")

    monkeypatch.setattr(client, "script_load", connection_lost)
    results = await _settle(incr(keys=["n"], args=[]), missing(keys=["a"], args=["b"]))
    assert await client.get("n") == b"1"  # the INCR ran...
    assert isinstance(results[1], StoreUnavailable)
    assert isinstance(results[1].__cause__, RedisConnectionError)
    assert results[0] == 1  # ...so its caller should get its reply


# outages ------------------------------------------------------------------------------


async def test_a_connection_failure_fails_every_call_of_the_batch(
    proxied: aioredis.Redis, proxy: Proxy, wire: Wire
) -> None:
    batcher, (incr, echo) = await scripts(proxied, wire, INCR, ECHO)
    assert await incr(keys=["n"], args=[]) == 1  # the connection works
    proxy.dropping = True
    results = await _settle(
        incr(keys=["n"], args=[]), echo(keys=["a"], args=["b"]), incr(keys=["m"], args=[])
    )
    # an unreachable store is Parley's StoreUnavailable, the cause kept
    assert all(isinstance(r, StoreUnavailable) for r in results), results
    assert all(isinstance(r.__cause__, RedisConnectionError) for r in results), results
    # the batcher is not wedged: once Redis is reachable again, calls go through
    proxy.dropping = False
    assert await _settle(incr(keys=["n"], args=[]), echo(keys=["a"], args=["c"])) == [
        2,
        [b"a", b"c"],
    ]
    assert not batcher._tasks  # every send finished


async def test_a_lone_call_fails_on_a_connection_failure(
    proxied: aioredis.Redis, proxy: Proxy, wire: Wire
) -> None:
    _, (incr,) = await scripts(proxied, wire, INCR)
    proxy.dropping = True
    with pytest.raises(StoreUnavailable):
        await asyncio.wait_for(incr(keys=["n"], args=[]), 5)


# cancellation -------------------------------------------------------------------------


async def test_a_caller_cancelled_before_the_send_is_left_out(
    client: aioredis.Redis, wire: Wire
) -> None:
    _, (incr,) = await scripts(client, wire, INCR)
    calls = [asyncio.ensure_future(incr(keys=[key], args=[])) for key in ("a", "b", "c")]
    await asyncio.sleep(0)  # every call is queued; the batch is not sent yet
    assert wire.script_writes() == []
    calls[1].cancel()
    results = await _settle(*calls)
    assert results[0] == 1 and results[2] == 1
    assert isinstance(results[1], asyncio.CancelledError)
    assert wire.script_writes() == [["EVALSHA"] * 2]  # the cancelled call was not sent
    assert await client.mget("a", "b", "c") == [b"1", None, b"1"]


async def test_a_caller_cancelled_in_flight_does_not_break_the_others(
    proxied: aioredis.Redis, proxy: Proxy, wire: Wire
) -> None:
    batcher, (incr,) = await scripts(proxied, wire, INCR)
    proxy.replies.clear()
    calls = [asyncio.ensure_future(incr(keys=[key], args=[])) for key in ("a", "b", "c")]
    await asyncio.sleep(0.05)
    assert wire.script_writes() == [["EVALSHA"] * 3]  # sent, replies held back
    calls[0].cancel()
    calls[2].cancel()
    await asyncio.sleep(0)
    proxy.replies.set()
    results = await _settle(*calls)
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1] == 1
    assert isinstance(results[2], asyncio.CancelledError)
    # a cancelled caller does not unsend its call: it ran
    assert await proxied.mget("a", "b", "c") == [b"1", b"1", b"1"]
    await asyncio.sleep(0)
    assert not batcher._tasks
    assert await incr(keys=["b"], args=[]) == 2  # and the batcher goes on


async def test_a_batch_cancelled_in_flight_leaves_no_reply_for_the_next_batch(
    proxied: aioredis.Redis, proxy: Proxy, wire: Wire
) -> None:
    """A batch cancelled between its write and its replies (a worker shutting down) must not
    hand its connection back with replies still to come: the next batch on it would read
    them as its own."""
    batcher, (echo,) = await scripts(proxied, wire, ECHO)
    proxy.replies.clear()
    first = asyncio.ensure_future(echo(keys=["stale"], args=["reply"]))
    await asyncio.sleep(0.05)
    assert wire.script_writes() == [["EVALSHA"]]
    for task in list(batcher._tasks):
        task.cancel()
    results = await _settle(first)
    assert isinstance(results[0], asyncio.CancelledError)
    proxy.replies.set()
    await asyncio.sleep(0.05)  # the stale reply arrives, on a connection no one reuses
    assert await echo(keys=["fresh"], args=["reply"]) == [b"fresh", b"reply"]


async def test_a_batch_whose_callers_all_cancelled_sends_nothing(
    client: aioredis.Redis, wire: Wire
) -> None:
    _, (incr,) = await scripts(client, wire, INCR)
    calls = [asyncio.ensure_future(incr(keys=["n"], args=[])) for _ in range(3)]
    await asyncio.sleep(0)
    for call in calls:
        call.cancel()
    results = await _settle(*calls)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    await asyncio.sleep(0.01)
    assert wire.script_writes() == []
    assert await client.get("n") is None
    assert await incr(keys=["n"], args=[]) == 1


# unpipelined (Redis Cluster) ----------------------------------------------------------


async def test_unpipelined_calls_are_sent_directly(client: aioredis.Redis, wire: Wire) -> None:
    _, (echo, incr) = await scripts(client, wire, ECHO, INCR, pipelined=False)
    results = await _settle(
        echo(keys=["a"], args=["1"]), echo(keys=["b"], args=["2"]), incr(keys=["n"], args=[])
    )
    assert results == [[b"a", b"1"], [b"b", b"2"], 1]
    assert wire.script_writes() == [["EVALSHA"]] * 3  # one round trip each


async def test_unpipelined_errors_are_each_calls_own(client: aioredis.Redis, wire: Wire) -> None:
    _, (incr, error_reply) = await scripts(client, wire, INCR, ERROR_REPLY, pipelined=False)
    results = await _settle(incr(keys=["n"], args=[]), error_reply(keys=["x"], args=["direct"]))
    assert results[0] == 1
    assert isinstance(results[1], ResponseError) and "boom direct" in str(results[1])


async def test_unpipelined_noscript_loads_and_retries(client: aioredis.Redis, wire: Wire) -> None:
    batcher, _ = await scripts(client, wire, pipelined=False)
    missing = Script(batcher, _fresh(INCR))
    assert await missing(keys=["n"], args=[]) == 1
    assert wire.script_writes() == [["EVALSHA"], ["SCRIPT LOAD"], ["EVALSHA"]]
    assert await client.get("n") == b"1"  # ran once


# the wire log itself ------------------------------------------------------------------


def test_parse_commands_reads_pipelined_resp() -> None:
    payload = b"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$1\r\nx\r\n"
    assert _parse_commands(payload) == ["PING", "SCRIPT LOAD"]


async def test_plain_commands_go_in_one_write_with_their_replies_as_sent(
    client: aioredis.Redis, wire: Wire
) -> None:
    """``Batcher.commands``: one write for all, a stream's entries as Redis' arrays (not
    redis-py's dicts), an error reply returned in its place without failing the others."""
    batcher = Batcher(client, pipelined=True)
    stream = f"s-{uuid.uuid4().hex}"
    entry_id = await client.xadd(stream, {"t": "x", "d": "{}"})
    wire.clear()
    replies = await batcher.commands(
        [("XRANGE", stream, "-", "+"), ("INCR", stream), ("XLEN", stream)]
    )
    assert [w for w in wire.writes if "XRANGE" in w] == [["XRANGE", "INCR", "XLEN"]]
    assert replies[0] == [[entry_id, [b"t", b"x", b"d", b"{}"]]]
    assert isinstance(replies[1], ResponseError) and "WRONGTYPE" in str(replies[1])
    assert replies[2] == 1
    await client.delete(stream)


async def test_replies_are_read_from_hiredis_unless_redis_py_parses_otherwise(
    client: aioredis.Redis, parser: str
) -> None:
    """With the redis-py and hiredis this project installs, a batch's replies come straight
    from hiredis' reader; if an upgrade renames what that reads, this fails (the batcher
    itself falls back to read_response and keeps working, only slower)."""
    _, (echo,) = await scripts(client, Wire(), ECHO)
    assert await echo(keys=["k"], args=["v"]) == [b"k", b"v"]
    connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        assert (hiredis_parser(connection) is not None) is (parser == "hiredis")
    finally:
        await client.connection_pool.release(connection)
