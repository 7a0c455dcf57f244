"""A deadline on reading each HTTP request, which uvicorn does not have.

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but waits for ever
for the rest of a request once its first byte came, and for the first byte of a new
connection: a client that sends half a request (slowloris) holds a connection, a socket
and its buffers for as long as it likes. No ASGI middleware can help: the application
sees a request only once its headers are complete.

:func:`protocol_with_read_timeout` is uvicorn's own h11 protocol (the one ``parley
server`` used already: httptools is not installed) with one timer: armed when a connection
opens or a request's first bytes arrive, disarmed when the request — headers and body —
has been read whole or the connection became a websocket. If it fires, the connection is
closed (with ``408 Request Timeout`` while the headers are still incomplete). Time spent
producing the response is not counted.
"""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("parley.server")

REQUEST_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: 26\r\n\r\nthe request took too long\n"
)


class ReadTimeoutH11Protocol(H11Protocol):
    """H11Protocol with a deadline of :attr:`read_timeout` seconds on reading a request."""

    read_timeout: float = 10.0
    _read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._reading():
            if self._read_timer is None:  # the first bytes of a request on a kept-alive
                self._arm()  # connection (uvicorn's keep-alive timer is cancelled by them)
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _reading(self) -> bool:
        """Is this connection still receiving a request (not answering one, not a
        websocket, not closing)?"""
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return False
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def _arm(self) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(self.read_timeout, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if not self._reading():
            return
        in_headers = self.cycle is None or self.cycle.response_complete
        log.info(
            "closing a connection from %s: its request was not read within %gs (%s)",
            self.client[0] if self.client else "?",
            self.read_timeout,
            "headers incomplete" if in_headers else "body incomplete",
        )
        if in_headers:
            self.transport.write(REQUEST_TIMEOUT_RESPONSE)
        self.transport.close()


def protocol_with_read_timeout(seconds: float) -> type[ReadTimeoutH11Protocol]:
    """The protocol class to give ``uvicorn.run(http=...)``."""
    return type("ReadTimeoutH11Protocol", (ReadTimeoutH11Protocol,), {"read_timeout": seconds})
