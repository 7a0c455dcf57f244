"""Faults between Parley and Redis, for tests: a TCP proxy that can hold replies back
and cut every connection."""

from __future__ import annotations

import asyncio
import contextlib


class Proxy:
    """A TCP proxy to Redis that can hold replies back or drop every connection."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.replies = asyncio.Event()  # cleared: replies wait
        self.replies.set()
        self.dropping = False  # the next bytes from a client close its connection
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

        async def upstream() -> None:
            while data := await reader.read(65536):
                if self.dropping:
                    break
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            while data := await up_reader.read(65536):
                await self.replies.wait()
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
