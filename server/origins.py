"""Which web pages may use the widget: one allow-list for CORS and the websocket.

A page on the server's own origin is always allowed; other origins only when listed in
``PARLEY_ALLOWED_ORIGINS`` (``https://shop.example,https://www.shop.example``, or ``*``).
The same policy answers the browser's CORS checks for the widget's files and
``POST /api/sessions`` (:class:`CorsMiddleware`), and the websocket's ``Origin`` check
(``server.ws``): a page that may not load the widget may not talk to a session either.

Requests without an ``Origin`` header (curl, a backend, a same-origin GET) are not from a
cross-origin page and are let through; the HTTP API behind the key needs no CORS at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Paths a page on another origin uses: the widget's files and creating a session.
CORS_PATHS = ("/widget/", "/api/sessions")
PREFLIGHT_MAX_AGE = "600"


def normalize_origin(origin: str) -> str:
    """``scheme://host[:port]`` in lower case; ValueError for anything else."""
    parts = urlsplit(origin.strip())
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username
    ):
        raise ValueError(
            f"expected an origin like https://shop.example or http://127.0.0.1:8080 "
            f"(scheme://host[:port], no path), got {origin!r}"
        )
    return f"{parts.scheme}://{parts.netloc.lower()}"


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    allowed: frozenset[str] = frozenset()
    any_origin: bool = False

    @classmethod
    def from_list(cls, origins: Iterable[str]) -> OriginPolicy:
        """From ``PARLEY_ALLOWED_ORIGINS``' entries; a malformed entry is a ValueError
        naming it (the server refuses to start rather than guess)."""
        names = [o.strip() for o in origins if o.strip()]
        if "*" in names:
            return cls(any_origin=True)
        try:
            return cls(allowed=frozenset(normalize_origin(o) for o in names))
        except ValueError as exc:
            raise ValueError(f"PARLEY_ALLOWED_ORIGINS: {exc}") from None

    def allows(self, origin: str | None, host: str | None) -> bool:
        """May a page of ``origin`` use this server, reached as ``host`` (its Host header)?
        No Origin: not a cross-origin page. The server's own origin: always (compared by
        host and port, so a TLS-terminating proxy in front does not break it)."""
        if origin is None:
            return True
        if self.any_origin:
            return True
        try:
            normalized = normalize_origin(origin)
        except ValueError:
            return False  # "null" (sandboxed frames, file://) and garbage
        if host is not None and urlsplit(normalized).netloc == host.lower():
            return True
        return normalized in self.allowed

    def describe(self) -> str:
        if self.any_origin:
            return "any origin"
        listed = ", ".join(sorted(self.allowed))
        return f"this server's own origin{', ' + listed if listed else ''}"


class CorsMiddleware:
    """CORS for the paths a cross-origin page uses (:data:`CORS_PATHS`), by the
    :class:`OriginPolicy`: allowed origins get ``Access-Control-Allow-Origin`` (and their
    preflight answered); a refused origin gets no CORS headers (the browser blocks the
    module) and ``POST /api/sessions`` is refused with 403 before it creates anything."""

    def __init__(self, app: ASGIApp, policy: OriginPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(CORS_PATHS):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        allowed = self.policy.allows(origin, headers.get("host"))
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await self._preflight(send, origin, allowed, headers)
            return
        if not allowed:
            if scope["path"].startswith("/api/"):
                await _refuse(send, origin, self.policy)
                return
            await self.app(scope, receive, send)  # no CORS headers: the browser refuses it
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                response_headers["Access-Control-Allow-Origin"] = origin
                response_headers.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _preflight(self, send: Send, origin: str, allowed: bool, headers: Headers) -> None:
        response: list[tuple[bytes, bytes]] = [(b"vary", b"Origin"), (b"content-length", b"0")]
        status = 403
        if allowed:
            status = 204
            requested = headers.get("access-control-request-headers", "")
            response += [
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
                (b"access-control-max-age", PREFLIGHT_MAX_AGE.encode()),
            ]
            if requested:
                response.append((b"access-control-allow-headers", requested.encode("latin-1")))
        await send({"type": "http.response.start", "status": status, "headers": response})
        await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, origin: str, policy: OriginPolicy) -> None:
    body = orjson.dumps(
        {
            "error": "origin_not_allowed",
            "message": f"pages of {origin[:100]} may not use this server; allowed: "
            f"{policy.describe()} (PARLEY_ALLOWED_ORIGINS)",
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"vary", b"Origin"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
