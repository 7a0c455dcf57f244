"""Script calls, automatically pipelined.

Every script call made during one turn of the event loop — the claims of a batch of tasks,
the suspensions and completions of concurrent executions, a driver's burst of answers —
goes to Redis in one pipeline: one write and one read instead of one round trip each, and
one connection checkout instead of many. A lone call waits one loop iteration, no more.

EVALSHA is sent directly (redis-py's pipelined scripts would first ask SCRIPT EXISTS:
an extra round trip per pipeline); on NOSCRIPT — a restarted or failed-over Redis — the
scripts are loaded again and the calls that missed are retried.

A batch is written and read on one pooled connection by :meth:`Batcher._round_trip`, not
through redis-py's ``Pipeline``: the calls are packed once (RESP, from bytes the scripts
and keys keep), and the replies are read under one timeout. Measured on this 2-core VM
(a trivial script, 1 key and 3 arguments, socket timeout set as the store sets it): CPU
per call 67 → 38 µs in bursts of 64, 120 → 68 µs in bursts of 8. Connection failures are
retried as redis-py retries its own (the connection's ``Retry``), so the semantics of a
dropped connection are the same.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import math
from collections.abc import Coroutine, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

# A batch's replies are read straight from hiredis' reader when redis-py parses with it:
# ``read_response`` wraps every reply in some eight Python calls (connection, parser, push
# and error checks): reading around them cut a worker's instructions per lifecycle by ~5 %
# (bench.instructions: 1.71-1.76 M -> 1.66-1.67 M). The names are redis-py's private ones
# (redis/_parsers/hiredis.py); where they are missing or differ (no hiredis, another
# redis-py) the replies are read through ``read_response`` as before, and
# tests/runtime/store/test_batch.py fails if the fast path is no longer the one taken.
try:
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _AsyncHiredisParser
except ImportError:  # pragma: no cover - a redis-py without them
    _AsyncHiredisParser = None  # type: ignore[assignment,misc]
    _NOT_ENOUGH_DATA = object()

from ._calls import OUTAGE, unavailable

Arg = bytes | str | int | float


class Packed:
    """Arguments encoded once as RESP and spliced into every call that passes them: the
    arguments a process sends unchanged on every call of a script (a worker's name, lease
    and versions on each claim), which would otherwise be encoded again each time."""

    __slots__ = ("args", "count", "resp")

    def __init__(self, args: Sequence[Arg]) -> None:
        self.args = tuple(args)
        self.count = len(self.args)
        self.resp = b"".join(_bulk(_encode(arg)) for arg in self.args)


# RESP's length prefixes and EVALSHA's array header for the sizes most calls have
_TABLED = 1024
_LENGTHS = tuple(b"$%d\r\n" % n for n in range(_TABLED))
_HEADS = tuple(b"*%d\r\n$7\r\nEVALSHA\r\n" % n for n in range(_TABLED))
_CRLF = b"\r\n"


def _bulk(item: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(item), item)


def _plain(args: Sequence[Arg | Packed]) -> list[Arg]:
    """The arguments with every Packed group in place, for a call made through redis-py."""
    out: list[Arg] = []
    for arg in args:
        if isinstance(arg, Packed):
            out.extend(arg.args)
        else:
            out.append(arg)
    return out


class Script:
    """One Lua script, called by EVALSHA through the batcher."""

    def __init__(self, batcher: Batcher, source: str) -> None:
        self.batcher = batcher
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self._head = b"$40\r\n" + self.sha.encode() + b"\r\n"  # the sha as a RESP bulk string

    def pack(self, keys: Sequence[str], args: Sequence[Arg | Packed]) -> bytes:
        """``EVALSHA sha numkeys keys... args...`` as RESP. On every script call of the
        hot path: str and bytes, nearly all of them, skip the general encoder, and the
        length prefixes come from a table, not from bytes formatting (by callgrind: a
        claim's packing 29k -> 25k instructions, an APPLY's 11.5k -> 9k, a compaction's
        swap 28k -> 23k a run)."""
        numkeys = b"%d" % len(keys)
        parts = [b"", self._head, _LENGTHS[len(numkeys)], numkeys, _CRLF]
        append = parts.append
        count = len(keys) + len(args) + 3
        for arg in (*keys, *args):
            if isinstance(arg, str):
                item = arg.encode()
            elif isinstance(arg, bytes):
                item = arg
            elif isinstance(arg, Packed):
                append(arg.resp)
                count += arg.count - 1
                continue
            else:
                item = _encode(arg)
            size = len(item)
            append(_LENGTHS[size] if size < _TABLED else b"$%d\r\n" % size)
            append(item)
            append(_CRLF)
        parts[0] = _HEADS[count] if count < _TABLED else b"*%d\r\n$7\r\nEVALSHA\r\n" % count
        return b"".join(parts)

    def __call__(
        self, *, keys: Sequence[str], args: Sequence[Arg | Packed]
    ) -> Coroutine[Any, Any, Any]:
        # the batcher's coroutine itself, not one more awaiting it (every script call)
        return self.batcher.call(self, keys, args)


_Call = tuple[Script, Sequence[str], Sequence[Arg | Packed], "asyncio.Future[Any]"]


def _encode(arg: Arg) -> bytes:
    """An argument as Redis receives it; the same bytes redis-py's encoder makes."""
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, int):
        return b"%d" % arg
    return repr(arg).encode()


def pack_command(*args: Arg) -> bytes:
    """Any command as RESP (the batch's trailing ``WAIT``, for one)."""
    return b"*%d\r\n%b" % (len(args), b"".join(_bulk(_encode(arg)) for arg in args))


class Batcher:
    """Collects the script calls of one event-loop turn and sends them as one pipeline."""

    def __init__(self, client: aioredis.Redis, *, pipelined: bool) -> None:
        self.client = client
        # Off on Redis Cluster: a pipeline there splits by node, so direct calls are as
        # cheap and keep each call's error its own.
        self.pipelined = pipelined
        self._queue: list[_Call] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def call(self, script: Script, keys: Sequence[str], args: Sequence[Arg | Packed]) -> Any:
        if not self.pipelined:
            # In an empty context of its own, as a batch's send is: the tasks the client
            # makes on its way (a timeout's) are the store's, not tasks of the workflow
            # whose call this is (engine/scopes.py numbers those).
            return await asyncio.get_running_loop().create_task(
                self._direct(script, keys, args), context=contextvars.Context()
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((script, keys, args, future))
        if len(self._queue) == 1:
            asyncio.get_running_loop().call_soon(self._flush)
        return await future

    async def _direct(
        self, script: Script, keys: Sequence[str], packed_args: Sequence[Arg | Packed]
    ) -> Any:
        args = _plain(packed_args)
        try:
            try:
                return await self.client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await self.client.script_load(script.source)
                return await self.client.evalsha(script.sha, len(keys), *keys, *args)
        except OUTAGE as exc:
            raise unavailable(exc) from exc

    def _flush(self) -> None:
        batch, self._queue = self._queue, []
        # Its own empty context: the send is the store's, not a task of the workflow whose
        # call happened to open the batch.
        task = asyncio.get_running_loop().create_task(
            self._send(batch), context=contextvars.Context()
        )
        self._tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[_Call]) -> None:
        live = [call for call in batch if not call[3].cancelled()]
        try:
            replies = await self._pipeline(live)
        except Exception as exc:  # the connection failed: every call in it failed
            self._fail(live, exc)
            return
        except BaseException:  # cancelled (shutdown): so are the calls waiting on it
            self._cancel(live)
            raise
        missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
        # Calls whose script ran have their reply now, whatever happens to the reload of
        # the others (their callers must not hear "unavailable" for a write that happened).
        self._settle(
            [(c, r) for i, (c, r) in enumerate(zip(live, replies, strict=True)) if i not in missing]
        )
        if not missing:
            return
        retry = [live[i] for i in missing]
        try:
            for script in {call[0] for call in retry}:
                await self.client.script_load(script.source)
            retried = await self._pipeline(retry)
        except Exception as exc:
            self._fail(retry, exc)
            return
        except BaseException:
            self._cancel(retry)
            raise
        self._settle(list(zip(retry, retried, strict=True)))

    @staticmethod
    def _settle(done: list[tuple[_Call, Any]]) -> None:
        for (*_, future), reply in done:
            if future.done():
                continue
            if isinstance(reply, ResponseError):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    @staticmethod
    def _fail(calls: list[_Call], exc: Exception) -> None:
        if isinstance(exc, OUTAGE):
            exc = unavailable(exc)
        for *_, future in calls:
            if not future.done():
                future.set_exception(exc)

    @staticmethod
    def _cancel(calls: list[_Call]) -> None:
        for *_, future in calls:
            future.cancel()

    async def commands(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """Plain commands (not scripts) in one round trip, now, each reply as Redis sent
        it (none of redis-py's response callbacks: a stream's entries stay lists, not dicts
        made in Python); an error reply is returned as its exception. Not on Redis Cluster
        (one connection reaches one node)."""
        return await self._round_trip(b"".join(pack_command(*c) for c in commands), len(commands))

    async def _pipeline(self, calls: list[_Call]) -> list[Any]:
        return await self._round_trip(
            b"".join(script.pack(keys, args) for script, keys, args, _ in calls), len(calls)
        )

    async def _round_trip(self, commands: bytes, count: int) -> list[Any]:
        """Send ``count`` packed commands on one connection and read their replies; an error
        reply is returned as its exception, a failed connection raises."""
        pool = self.client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            replies: list[Any] = await connection.retry.call_with_retry(
                lambda: _exchange(connection, commands, count),
                lambda _error: connection.disconnect(),
            )
            return replies
        except BaseException:
            # Cancelled or failed between the write and the last reply: replies may still
            # be on their way, and the next user of this connection would read them as its
            # own. Only a fresh connection goes back to the pool.
            await connection.disconnect(nowait=True)
            raise
        finally:
            await pool.release(connection)


def hiredis_parser(connection: AbstractConnection) -> Any | None:
    """The connection's hiredis parser, if its replies can be read from its reader: not
    for a connection that reads its replies its own way (the embedded store's fakeredis)."""
    if type(connection).read_response is not AbstractConnection.read_response:
        return None
    parser = getattr(connection, "_parser", None)
    if _AsyncHiredisParser is None or type(parser) is not _AsyncHiredisParser:
        return None
    if getattr(parser, "_reader", None) is None or not hasattr(parser, "read_from_socket"):
        return None
    return parser


async def _read_hiredis(parser: Any, count: int, replies: list[Any]) -> None:
    """``count`` replies from hiredis' reader, refilling it from the socket; an error reply
    comes as its exception (redis-py's parser sets hiredis up so), kept in place."""
    reader = parser._reader
    push = getattr(parser, "_hiredis_PushNotificationType", None)
    while len(replies) < count:
        reply = reader.gets()
        if reply is _NOT_ENOUGH_DATA:
            await parser.read_from_socket()
        elif isinstance(reply, RedisConnectionError):
            raise reply
        elif push is not None and isinstance(reply, push):
            continue  # a RESP3 push is no reply to these commands (none is subscribed here)
        else:
            replies.append(reply)


async def _exchange(connection: AbstractConnection, commands: bytes, count: int) -> list[Any]:
    await connection.send_packed_command(commands)
    replies: list[Any] = []
    parser = hiredis_parser(connection)
    try:
        # One timeout for the whole batch: a timeout per reply costs a timer each.
        async with asyncio.timeout(connection.socket_timeout):
            if parser is not None:
                await _read_hiredis(parser, count, replies)
            else:
                for _ in range(count):
                    try:
                        replies.append(await connection.read_response(timeout=math.inf))
                    except ResponseError as exc:
                        replies.append(exc)
    except TimeoutError:
        await connection.disconnect(nowait=True)
        raise RedisTimeoutError(
            f"Timeout reading from {connection.host}:{connection.port}"  # type: ignore[attr-defined]
        ) from None
    except OSError as exc:  # as read_response reports a broken socket
        await connection.disconnect(nowait=True)
        raise RedisConnectionError(f"Error while reading from Redis: {exc.args}") from exc
    if connection.health_check_interval:  # this connection was just used: no PING needed
        loop_time = asyncio.get_running_loop().time()
        connection.next_health_check = loop_time + connection.health_check_interval
    return replies
