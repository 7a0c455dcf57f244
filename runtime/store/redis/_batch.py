"""Script calls, automatically pipelined.

Every script call made during one turn of the event loop — the claims of a batch of tasks,
the suspensions and completions of concurrent executions, a driver's burst of answers —
goes to Redis in one pipeline: one write and one read instead of one round trip each, and
one connection checkout instead of many. A lone call waits one loop iteration, no more.

EVALSHA is sent directly (redis-py's pipelined scripts would first ask SCRIPT EXISTS:
an extra round trip per pipeline); on NOSCRIPT — a restarted or failed-over Redis — the
scripts are loaded again and the calls that missed are retried.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from ._calls import OUTAGE, unavailable

Arg = bytes | str | int | float


class Script:
    """One Lua script, called by EVALSHA through the batcher."""

    def __init__(self, batcher: Batcher, source: str) -> None:
        self.batcher = batcher
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, *, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        return await self.batcher.call(self, keys, args)


_Call = tuple[Script, Sequence[str], Sequence[Arg], "asyncio.Future[Any]"]


class Batcher:
    """Collects the script calls of one event-loop turn and sends them as one pipeline."""

    def __init__(self, client: aioredis.Redis, *, pipelined: bool) -> None:
        self.client = client
        # Off on Redis Cluster: a pipeline there splits by node, so direct calls are as
        # cheap and keep each call's error its own.
        self.pipelined = pipelined
        self._queue: list[_Call] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def call(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        if not self.pipelined:
            return await self._direct(script, keys, args)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((script, keys, args, future))
        if len(self._queue) == 1:
            asyncio.get_running_loop().call_soon(self._flush)
        return await future

    async def _direct(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Any:
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

    async def _pipeline(self, calls: list[_Call]) -> list[Any]:
        if len(calls) == 1:
            script, keys, args, _ = calls[0]
            try:
                return [await self.client.evalsha(script.sha, len(keys), *keys, *args)]
            except ResponseError as exc:
                return [exc]
        async with self.client.pipeline(transaction=False) as pipe:
            for script, keys, args, _ in calls:
                pipe.evalsha(script.sha, len(keys), *keys, *args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies
