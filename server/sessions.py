"""Chat sessions: created for the widget, bound to the runs they start, and the one place
where an answer is delivered (``resume_hook``) and announced to the session's page.

A session is a random, unguessable id. Besides the session's outbox (its messages), the
store keeps a small record per session: when it was created and its active run.

Memory across turns: a chat workflow that returns an object with a ``"memory"`` field
(``{"reply": ..., "memory": [...]}``) gets that value back as the keyword argument
``memory`` when the same session's next message starts it again. What it keeps, and how
much, is the workflow's choice (it is run input: at most ``Limits.max_payload_bytes``).
A workflow that never returns ``memory`` is started as ``workflow(text)``, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runtime import RunInfo, RunNotFound, RunStatus, Runtime, UsageError
from runtime.ids import check_session_id, new_session_id, parse_token

from .errors import ApiError, ForbiddenHook

SESSION_TTL_SECONDS = 7 * 24 * 3600
START_LOCK_MS = 10_000


class Sessions:
    def __init__(self, runtime: Runtime, *, ttl_seconds: int = SESSION_TTL_SECONDS) -> None:
        self.rt = runtime
        self.ttl_seconds = ttl_seconds

    async def create(self) -> str:
        session = new_session_id()
        await self.rt.store.create_session(session, self.ttl_seconds)
        return session

    async def exists(self, session: str) -> bool:
        try:
            check_session_id(session)
        except UsageError:
            return False
        return await self.rt.store.session_exists(session)

    async def require(self, session: str) -> None:
        """404 for an unknown session; a malformed id is a UsageError (400)."""
        if not await self.rt.store.session_exists(check_session_id(session)):
            raise ApiError(404, "session_not_found", f"no session {session!r}")

    async def bind(self, session: str, run_id: str) -> None:
        """Make ``run_id`` the session's active run (keeps the session alive)."""
        await self.rt.store.bind_session(check_session_id(session), run_id, self.ttl_seconds)

    async def last_run(self, session: str) -> RunInfo | None:
        """The session's latest run (finished or not), while the store still has it."""
        run_id = await self.rt.store.session_run(check_session_id(session))
        if not run_id:
            return None
        try:
            return await self.rt.get_run(run_id)
        except RunNotFound:
            return None

    async def active_run(self, session: str) -> str | None:
        """The session's run that has not finished yet, if any."""
        info = await self.last_run(session)
        return None if info is None or info.status.finished else info.run_id

    async def start_chat(
        self,
        session: str,
        workflow: str,
        text: Any,
        *,
        max_chars: int,
        client_id: str | None = None,
        admit: Callable[[], Awaitable[None]] | None = None,
    ) -> str:
        """A visitor's message: shown in the session, then a run of ``workflow(text)`` bound
        to the session (with ``memory=`` from the previous run, see above); a start the
        runtime refuses (the workflow unknown, its input too large) shows nothing. Refused
        (ApiError 409 ``busy``) while the session's previous run is still going, so a
        session has at most one active run. ``client_id``, the page's own id for the
        message, is echoed in the session's ``visitor`` message (so the page that queued
        it recognises it) and names the run: the same message sent again (a page that
        lost its socket before the ack) is shown and started once — its run's id is
        returned, busy or not. ``admit`` (the sender's rate limit) is awaited once the
        message would start a run, before anything is recorded: it raises to refuse it;
        a duplicate or a busy refusal does not count against it."""
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "invalid_message", "expected a non-empty message text")
        if len(text) > max_chars:
            raise ApiError(
                413,
                "message_too_large",
                f"a message may have at most {max_chars} characters, got {len(text)}",
            )
        store = self.rt.store
        # Closes the race of two sockets of one session sending at the same moment: both
        # would see no active run and start two.
        if not await store.lock_session(check_session_id(session), START_LOCK_MS):
            raise ApiError(409, "busy", "the previous message is still being handled")
        try:
            key = None if client_id is None else f"chat:{session}:{client_id}"
            if key is not None and (sent := await self._run_of(session, key)) is not None:
                return sent
            previous = await self.last_run(session)
            if previous is not None and not previous.status.finished:
                raise ApiError(
                    409,
                    "busy",
                    f"the agent is still working on run {previous.run_id}; answer its "
                    "question or wait for its reply before sending a new message",
                )
            if admit is not None:
                await admit()
            visitor: dict[str, Any] = {"type": "visitor", "text": text}
            if client_id is not None:
                visitor["client_id"] = client_id
            kwargs = {"memory": memory} if (memory := _memory(previous, workflow)) else {}
            run_id = await self.rt.start_with_message(
                session, visitor, workflow, text, idempotency_key=key, **kwargs
            )
            await self.bind(session, run_id)
            return run_id
        finally:
            await store.unlock_session(session)

    async def _run_of(self, session: str, key: str) -> str | None:
        """The run a message of this idempotency key already started, if any."""
        run_id = self.rt.store.new_run_id(session, key)
        try:
            await self.rt.get_run(run_id)
        except RunNotFound:
            return None
        return run_id

    async def answer(
        self,
        token: Any,
        payload: Any,
        *,
        session: str | None = None,
        answered_by: str | None = None,
    ) -> bool:
        """Deliver an answer through ``resume_hook`` (THE resume path). With ``session``,
        the hook must belong to a run of that session. The engine announces a recorded
        answer to the run's session (``{"type": "answered", ...}``) atomically with it, so
        every open page shows it. ``answered_by`` (default: ``session:<id>`` with a
        session) is recorded in the ``hook.received`` event."""
        run_id, _hook_id = parse_token(token)  # a malformed token is 400, not 404
        info = await self.rt.get_run(run_id)
        if session is not None and info.session != session:
            raise ForbiddenHook(
                "this hook belongs to another session; a page may only answer its own "
                "session's prompts",
                run_id=run_id,
            )
        if answered_by is None and session is not None:
            answered_by = f"session:{session}"
        return await self.rt.resume_hook(token, payload, answered_by=answered_by)


def _memory(previous: RunInfo | None, workflow: str) -> Any:
    """What the session's previous run of ``workflow`` asked to remember, if anything."""
    if previous is None or previous.status is not RunStatus.COMPLETED:
        return None
    if previous.workflow != workflow or not isinstance(previous.result, dict):
        return None
    return previous.result.get("memory")
