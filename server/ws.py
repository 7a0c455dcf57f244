"""The websocket gateway of a chat session: ``/ws/sessions/{session_id}?after=<id>``.

Server → page: every message of the session's outbox stream after ``after`` (``0-0`` for a
fresh page), each with its stream ``id``: prompts (``token``, ``hook``, ``prompt``,
``schema``, ``expires_at``, plus the hook's current ``state``), visitor messages (with the
page's ``client_id`` when it gave one), agent text chunks, answers, expiries, run status.
A page that reconnects with the last id it saw gets everything after
it and nothing twice. The live part comes from the process's shared outbox tailer
(``server.tailer``); a page that falls more than ``ws_queue_size`` messages behind is
closed with 4408 (and reconnects with its last id), an unreachable store closes with 1011.
Replies to the page's own frames: ``ack`` / ``error`` (echoing its ``ref``; a frame refused
unread, too large or over the rate, has its ``ref`` echoed when the frame begins with it),
``pong``.

Page → server (JSON text frames of at most ``max_frame_bytes``, at most ``rate`` per
second): ``{"type": "answer", "token", "payload"}`` (through ``resume_hook``; only hooks of
this session), ``{"type": "message", "text", "agent"?, "client_id"?}`` (starts the chat
workflow), ``{"type": "ping"}``. A bad frame gets an error frame and changes nothing. A page
of an origin the server does not allow (``server.origins``) is closed with 4403.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from typing import Any

import orjson
from starlette.websockets import WebSocket, WebSocketState

from runtime import ParleyError, Runtime

from ._tasks import cancel_and_wait
from .abuse import RateLimited
from .context import ServerConfig, ServerContext
from .errors import ApiError, error_body, parley_error_body
from .tailer import (
    CLOSE_GOING_AWAY,
    CLOSE_TOO_SLOW,
    CLOSE_UNAVAILABLE,
    Subscription,
    SubscriptionEnded,
)

log = logging.getLogger("parley.server.ws")

# ASCII digits only (``\d`` also takes other scripts' digits, which Redis refuses)
STREAM_ID_RE = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
MAX_STREAM_ID_PART = 2**64 - 1  # each part of a Redis stream id is an unsigned 64-bit number
CLIENT_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# The ``ref`` a frame opens with (the widget writes it first): read from the head of a frame
# refused unread (too large, over the rate), so its error still names the frame it refuses.
HEAD_REF_RE = re.compile(r'\{\s*"ref"\s*:\s*(?:"([A-Za-z0-9_-]{1,64})"|(-?[0-9]{1,15})\s*[,}])')
HEAD_REF_CHARS = 100
CLOSE_UNKNOWN_SESSION = 4404
CLOSE_BAD_REQUEST = 4400
CLOSE_ORIGIN_NOT_ALLOWED = 4403
CLOSE_POLICY = 1008  # too many rejected frames in a row
MAX_REJECTED_IN_A_ROW = 50
REPLAY_BATCH = 100
__all__ = ["CLOSE_TOO_SLOW", "CLOSE_UNAVAILABLE", "SessionSocket", "session_socket"]


def head_ref(text: str | None) -> str | int | None:
    """The ``ref`` of a frame that begins with it, read without parsing the frame."""
    found = HEAD_REF_RE.match(text[:HEAD_REF_CHARS].lstrip()) if text is not None else None
    if found is None:
        return None
    return found[1] if found[1] is not None else int(found[2])


def is_stream_id(text: str) -> bool:
    """Whether ``text`` is a stream id Redis takes. Checked before the page is told
    ``ready``: an id Redis refuses would fail the first read, and the socket would close
    as "store unavailable" (1011) instead of 4400."""
    if not STREAM_ID_RE.fullmatch(text):
        return False
    ms, _, seq = text.partition("-")
    return int(ms) <= MAX_STREAM_ID_PART and int(seq) <= MAX_STREAM_ID_PART


class RateLimiter:
    """Token bucket: ``rate`` frames per second, bursts up to ``burst``."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class FrameError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SessionSocket:
    """One open websocket of one session."""

    def __init__(self, ctx: ServerContext, websocket: WebSocket, session: str) -> None:
        self.ctx = ctx
        self.ws = websocket
        self.session = session
        self.config = ctx.config
        self.limiter = RateLimiter(ctx.config.ws_rate, ctx.config.ws_burst)
        self._send_lock = asyncio.Lock()
        self.rejected_in_a_row = 0
        self.closing = False  # ends the replay even if a cancellation gets lost in redis-py

    async def send(self, frame: dict[str, Any]) -> None:
        try:
            text = orjson.dumps(frame).decode()
        except orjson.JSONEncodeError as exc:
            if "id" not in frame:
                raise
            # An outbox message no frame can carry (nested past orjson's limit, written
            # before payload limits existed): sent as "omitted" with its id, so the page
            # moves past it instead of reconnecting into it for ever.
            log.warning("session %s: message %s cannot be sent: %s", self.session, frame["id"], exc)
            text = orjson.dumps({"type": "omitted", "id": frame["id"], "reason": str(exc)}).decode()
        async with self._send_lock:
            await self.ws.send_text(text)

    # server -> page --------------------------------------------------------------------
    async def pump(self, after: str) -> None:
        """Forward every message of the session's outbox after ``after``: first the
        history, read by this socket alone, then what the process's tailer fans out."""
        rt = self.ctx.runtime
        sub: Subscription | None = None
        try:
            # Replay with non-blocking reads: a long history is sent at this page's pace
            # and never sits in the tailer's bounded queue.
            while not self.closing:
                messages = await rt.read_outbox(self.session, after, count=REPLAY_BATCH)
                for entry_id, message in messages:
                    await self._forward(entry_id, message)
                    after = entry_id
                if len(messages) < REPLAY_BATCH:
                    break
            # Subscribe from the last id delivered: an entry appended after the replay's
            # last read has a greater id, so the tailer delivers it (nothing is missed
            # between replay and subscription), and nothing up to ``after`` is delivered
            # twice.
            sub = await self.ctx.tailer.subscribe(self.session, after)
            while not self.closing:
                entry_id, message = await sub.get()
                await self._forward(entry_id, message)
        except asyncio.CancelledError:
            raise
        except SubscriptionEnded as end:  # too slow, store unreachable, shutdown
            with contextlib.suppress(Exception):
                await self.ws.close(end.code, end.reason[:120])
        except Exception as exc:  # store unreachable or socket gone: the page reconnects
            log.warning("session %s: outbox tail stopped: %s", self.session, exc)
            with contextlib.suppress(Exception):
                await self.ws.close(CLOSE_UNAVAILABLE, "the message store is unavailable")
        finally:
            if sub is not None:
                self.ctx.tailer.unsubscribe(sub)

    async def _forward(self, entry_id: str, message: dict[str, Any]) -> None:
        frame = {**message, "id": entry_id}
        if message.get("type") == "prompt":
            frame["state"] = await self._hook_state(message)
        await self.send(frame)

    async def _hook_state(self, prompt: dict[str, Any]) -> str:
        """pending / received / expired / cancelled: a replayed prompt that was answered
        is shown as answered, even if its ``answered`` message was never written."""
        run_id, token = prompt.get("run_id"), prompt.get("token")
        if not isinstance(run_id, str):
            return "pending"
        for hook in await self.ctx.runtime.list_hooks(None, run_id=run_id):
            if hook.token == token:
                return hook.status.value
        return "pending"

    # page -> server --------------------------------------------------------------------
    async def serve(self) -> None:
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            text: str | None = message.get("text")
            data: bytes | None = message.get("bytes")
            ref: Any = None
            try:
                if not self.limiter.allow():
                    raise FrameError(
                        "rate_limited",
                        f"at most {self.config.ws_rate:g} frames per second; this frame was "
                        "dropped",
                    )
                size = len(text.encode()) if text is not None else len(data or b"")
                if size > self.config.max_frame_bytes:
                    raise FrameError(
                        "frame_too_large",
                        f"a frame may be at most {self.config.max_frame_bytes} bytes, got {size}",
                    )
                if text is None:
                    raise FrameError("malformed", "expected a JSON text frame, got a binary frame")
                try:
                    frame = Runtime.decode(text)  # integers exact (see Runtime.decode)
                except ValueError as exc:
                    raise FrameError("malformed", f"expected a JSON object: {exc}") from None
                if not isinstance(frame, dict):
                    raise FrameError(
                        "malformed", f"expected a JSON object, got {type(frame).__name__}"
                    )
                ref = frame.get("ref") if isinstance(frame.get("ref"), str | int) else None
                reply = await self.handle(frame)
                self.rejected_in_a_row = 0
            except FrameError as exc:
                reply = {"type": "error", **error_body(exc.code, exc.message)}
                if ref is None:  # refused before it was parsed
                    ref = head_ref(text)
                self.rejected_in_a_row += 1
            except ApiError as exc:
                reply = {"type": "error", **error_body(exc.code, exc.message)}
                if isinstance(exc, RateLimited):
                    reply["retry_after"] = exc.retry_after
                self.rejected_in_a_row += 1
            except ParleyError as exc:
                reply = {"type": "error", **parley_error_body(exc)}
                self.rejected_in_a_row += 1
            if ref is not None:
                reply["ref"] = ref
            await self.send(reply)
            if self.rejected_in_a_row >= MAX_REJECTED_IN_A_ROW:
                await self.ws.close(CLOSE_POLICY, "too many rejected frames")
                return

    def _chat_workflow(self, agent: Any) -> str:
        """The workflow a visitor's message starts: the server's default, or one of the
        other chat workflows it offers, named by the page's ``agent``."""
        config = self.ctx.config
        if agent is None:
            if config.chat_workflow is None:
                raise FrameError("no_chat_workflow", "this server has no chat workflow to start")
            return config.chat_workflow
        offered = sorted({*config.chat_workflows, *filter(None, [config.chat_workflow])})
        if agent not in offered:
            raise FrameError(
                "unknown_agent", f"expected 'agent' to be one of {offered}, got {agent!r:.40}"
            )
        return str(agent)

    async def handle(self, frame: dict[str, Any]) -> dict[str, Any]:
        kind = frame.get("type")
        if kind == "answer":
            if "token" not in frame or "payload" not in frame:
                raise FrameError(
                    "malformed", 'expected {"type": "answer", "token": ..., "payload": ...}'
                )
            token = frame["token"]
            recorded = await self.ctx.sessions.answer(token, frame["payload"], session=self.session)
            return {"type": "ack", "for": "answer", "token": token, "recorded": recorded}
        if kind == "message":
            workflow = self._chat_workflow(frame.get("agent"))
            client_id = frame.get("client_id")
            if client_id is not None and not (
                isinstance(client_id, str) and CLIENT_ID_RE.fullmatch(client_id)
            ):
                raise FrameError(
                    "malformed",
                    "expected 'client_id' to be 1-64 letters, digits, '-' or '_', got "
                    f"{client_id!r:.40}",
                )
            abuse, peer = self.ctx.abuse, self.ws.scope.get("client")
            run_id = await self.ctx.sessions.start_chat(
                self.session,
                workflow,
                frame.get("text"),
                max_chars=self.config.max_message_chars,
                client_id=client_id,
                admit=lambda: abuse.hit(abuse.messages, peer),
            )
            return {"type": "ack", "for": "message", "run_id": run_id, "client_id": client_id}
        if kind == "ping":
            return {"type": "pong"}
        raise FrameError(
            "unknown_type", f"expected a frame type answer, message or ping, got {kind!r:.40}"
        )


async def session_socket(websocket: WebSocket) -> None:
    ctx: ServerContext = websocket.app.state.ctx
    session = websocket.path_params["session_id"]
    await websocket.accept()
    origin = websocket.headers.get("origin")
    if not ctx.config.origins.allows(origin, websocket.headers.get("host")):
        await _refuse(
            websocket,
            CLOSE_ORIGIN_NOT_ALLOWED,
            "origin_not_allowed",
            f"pages of {origin!r:.100} may not use this server; allowed: "
            f"{ctx.config.origins.describe()} (PARLEY_ALLOWED_ORIGINS)",
        )
        return
    after = websocket.query_params.get("after") or "0-0"
    if not is_stream_id(after):
        await _refuse(
            websocket,
            CLOSE_BAD_REQUEST,
            "malformed",
            "expected ?after=<stream id like 1700000000000-0, each part at most "
            f"{MAX_STREAM_ID_PART}>, got {after!r:.40}",
        )
        return
    if not await ctx.sessions.exists(session):
        await _refuse(
            websocket,
            CLOSE_UNKNOWN_SESSION,
            "session_not_found",
            "no such session; create one with POST /api/sessions",
        )
        return
    sock = SessionSocket(ctx, websocket, session)
    await sock.send(
        {"type": "ready", "session_id": session, "after": after, "limits": limits(ctx.config)}
    )
    pump = asyncio.create_task(sock.pump(after), name=f"parley-ws-{session[:8]}")
    try:
        await sock.serve()
    finally:
        sock.closing = True
        await cancel_and_wait([pump])
        if websocket.application_state is WebSocketState.CONNECTED:
            with contextlib.suppress(Exception):
                await websocket.close()


def limits(config: ServerConfig) -> dict[str, Any]:
    """What the page must know of this server: its limits and what its close codes mean
    (sent in the first frame, so the widget copies none of them)."""
    return {
        "max_message_chars": config.max_message_chars,
        "max_frame_bytes": config.max_frame_bytes,
        "frames_per_second": config.ws_rate,
        "close_codes": {
            "unknown_session": CLOSE_UNKNOWN_SESSION,
            "bad_request": CLOSE_BAD_REQUEST,
            "origin_not_allowed": CLOSE_ORIGIN_NOT_ALLOWED,
            "too_slow": CLOSE_TOO_SLOW,
            "unavailable": CLOSE_UNAVAILABLE,
            "going_away": CLOSE_GOING_AWAY,
            "policy": CLOSE_POLICY,
        },
    }


async def _refuse(websocket: WebSocket, close_code: int, code: str, message: str) -> None:
    await websocket.send_text(orjson.dumps({"type": "error", **error_body(code, message)}).decode())
    await websocket.close(close_code, message[:120])
