"""Faults between Parley and Redis, for tests: a TCP proxy that can hold replies back,
drop the replies of the connections that sent a given command, and cut every connection."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator


class Proxy:
    """A TCP proxy to Redis that can hold replies back or drop every connection."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.replies = asyncio.Event()  # cleared: replies wait
        self.replies.set()
        self.dropping = False  # the next bytes from a client close its connection
        # Set: a connection that sends bytes containing it never gets its reply and is
        # closed (the command ran; its caller does not hear). Others are left alone.
        self.drop_replies_to: bytes | None = None
        # Set: a connection that sends bytes containing it is closed before they reach Redis
        # (the command never ran; its caller sees a lost connection). Others are left alone.
        self.drop_requests_with: bytes | None = None
        # Set: the reply to a connection's bytes containing it reaches the client only
        # ``hold_seconds`` later (the command ran at once; a stall on the way back).
        self.hold_replies_to: bytes | None = None
        self.hold_seconds = 0.0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, up_writer]

        doomed = False
        holding = False

        async def upstream() -> None:
            nonlocal doomed, holding
            while data := await reader.read(65536):
                if self.dropping:
                    break
                if self.drop_requests_with is not None and self.drop_requests_with in data:
                    break
                if self.drop_replies_to is not None and self.drop_replies_to in data:
                    doomed = True
                if self.hold_replies_to is not None and self.hold_replies_to in data:
                    holding = True
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            nonlocal holding
            while data := await up_reader.read(65536):
                await self.replies.wait()
                if doomed:
                    break
                if holding:
                    holding = False
                    await asyncio.sleep(self.hold_seconds)
                writer.write(data)
                await writer.drain()

        pumps = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        with contextlib.suppress(Exception):
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        for w in (writer, up_writer):
            w.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()

    def cut(self) -> None:
        """Close every connection now (the client sees a lost connection)."""
        for writer in self._writers:
            writer.close()
        self._writers.clear()


@contextlib.contextmanager
def proxy_in_a_thread(host: str, port: int) -> Iterator[Proxy]:
    """A :class:`Proxy` on an event loop of its own, for synchronous tests (a Starlette
    TestClient runs the app on another loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = Proxy(host, port)
    asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(5)
    try:
        yield proxy
    finally:
        asyncio.run_coroutine_threadsafe(_close_all(proxy), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


async def _close_all(proxy: Proxy) -> None:
    """Close the proxy and end its connections' tasks, so the loop stops with none pending."""
    await proxy.close()
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
