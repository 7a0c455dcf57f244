"""Answering a hook: :meth:`AnswerCalls.resume_hook`, the one path every answer takes
(the API, the websocket, answer links, the CLI): the payload is encoded and bounded, checked
against the hook's JSON Schema when the store says the hook has one, and recorded by the
store in one step; each outcome the store reports becomes its own error.

:class:`AnswerCalls` is a base class of :class:`~runtime.client.Runtime`; it needs the
runtime's store, limits and retention."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from typing import Any

import jsonschema
from referencing.exceptions import Unresolvable

from . import tracing
from ._codec import encode_fragment, encode_value, loads
from .errors import (
    EventLimitExceeded,
    HookAlreadyAnswered,
    HookCancelled,
    HookClosed,
    HookExpired,
    HookNotFound,
    InvalidPayload,
    InvalidToken,
    RunFinished,
    RunNotFound,
    UsageError,
)
from .ids import parse_token
from .settings import Limits
from .store import Answer, ResumeOutcome, Store

__all__ = ["AnswerCalls"]

MAX_ANSWERED_BY_CHARS = 200


class AnswerCalls:
    store: Store
    limits: Limits
    retention_seconds: int

    async def resume_hook(
        self, token: str, payload: Any, *, answered_by: str | None = None
    ) -> bool:
        """Deliver ``payload`` as the answer of the hook ``token``.

        ``answered_by`` says who answered (``"link:<key id>"``, ``"session:<id>"``,
        ``"key:<API key name>"``, or any short text): it is recorded in the
        ``hook.received`` event, not compared between duplicate answers.

        Returns True when the answer was recorded, False when the same answer had already
        been accepted (idempotent). Raises InvalidToken, HookNotFound, RunNotFound,
        HookAlreadyAnswered (a different answer was accepted), HookExpired/HookCancelled,
        RunFinished, InvalidPayload/PayloadTooLarge; none of these changes anything.
        """
        if tracing.enabled():
            with tracing.span("parley.resume_hook", attributes=_resume_attributes(token)):
                return await self._resume_hook(token, payload, answered_by)
        return await self._resume_hook(token, payload, answered_by)

    async def _resume_hook(self, token: str, payload: Any, answered_by: str | None) -> bool:
        run_id, hook_id = parse_token(token)
        ids = {"run_id": run_id, "hook_id": hook_id}
        trace = tracing.traceparent()
        # the execution this answer wakes links to it (runtime.tracing)
        traced = {} if trace is None else {"trace": trace}
        encoded = encode_value(
            payload,
            what="hook payload",
            limit=self.limits.max_payload_bytes,
            max_depth=self.limits.max_depth,
            **ids,
        )
        answer = Answer(
            run_id=run_id,
            hook_id=hook_id,
            token=token,
            payload=encoded,
            digest=hashlib.sha1(encoded).hexdigest(),
            event=encode_fragment(
                "payload", encoded, hook_id=hook_id, **_answered_by(answered_by, **ids), **traced
            ),
            announcement=encode_fragment(
                "payload", encoded, type="answered", run_id=run_id, token=token
            ),
        )
        kept = self.retention_seconds
        resumed = await self.store.resume(
            answer, max_events=self.limits.max_events, retention_seconds=kept
        )
        if resumed.outcome is ResumeOutcome.NEEDS_VALIDATION:
            # what is stored, not the Python object: a tuple is stored as an array, an int
            # key as a string
            _validate(resumed.schema or {}, loads(encoded), run_id, hook_id)
            resumed = await self.store.resume(
                dataclasses.replace(answer, validated=True),
                max_events=self.limits.max_events,
                retention_seconds=kept,
            )
        outcome = resumed.outcome
        if outcome is ResumeOutcome.RECORDED:
            return True
        if outcome is ResumeOutcome.DUPLICATE:
            return False
        if outcome is ResumeOutcome.NO_RUN:
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        if outcome is ResumeOutcome.NO_HOOK:
            raise HookNotFound(f"run has no hook {hook_id!r}", **ids)
        if outcome is ResumeOutcome.CONFLICT:
            raise HookAlreadyAnswered("a different answer was already accepted", **ids)
        if outcome is ResumeOutcome.EXPIRED:
            raise HookExpired("the hook expired before this answer", **ids)
        if outcome is ResumeOutcome.CLOSED:
            raise HookClosed(
                "the hook was withdrawn: another wait of a first() finished first (its "
                "run's, or its parent's when the run is a child that lost)",
                **ids,
            )
        if outcome is ResumeOutcome.CANCELLED:
            raise HookCancelled("the run was cancelled; the hook no longer takes answers", **ids)
        if outcome is ResumeOutcome.FINISHED:
            raise RunFinished(f"run already {resumed.run_status}", **ids)
        if outcome is ResumeOutcome.LIMIT:
            raise EventLimitExceeded("the run reached its maximum number of events", **ids)
        raise AssertionError(f"unexpected resume outcome {outcome!r}")


MAX_ANSWERED_BY_CHARS = 200


def _resume_attributes(token: str) -> dict[str, str]:
    """A ``parley.resume_hook`` span's attributes: the run and hook ids besides the token,
    the ids the execution and hook.wait spans carry, to find an answer's span by them (a
    malformed token has none: the call fails inside the span with InvalidToken)."""
    attributes = {"parley.token": token}
    try:
        run_id, hook_id = parse_token(token)
    except InvalidToken:
        return attributes
    attributes["parley.run_id"] = run_id
    attributes["parley.hook_id"] = hook_id
    return attributes


def _answered_by(answered_by: str | None, *, run_id: str, hook_id: str) -> dict[str, str]:
    """The ``answered_by`` field of a ``hook.received`` event (absent when not given)."""
    if answered_by is None:
        return {}
    if not isinstance(answered_by, str) or not 0 < len(answered_by) <= MAX_ANSWERED_BY_CHARS:
        raise UsageError(
            f"answered_by must be a string of 1 to {MAX_ANSWERED_BY_CHARS} characters, "
            f"got {answered_by!r:.80}",
            run_id=run_id,
            hook_id=hook_id,
        )
    return {"answered_by": answered_by}


def _validate(schema: dict[str, Any], payload: Any, run_id: str, hook_id: str) -> None:
    validator = _validator(encode_value(schema, what="schema", limit=1 << 30).decode())
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(payload))
    except Unresolvable as exc:
        # a hook created before such schemas were refused at creation (engine/hooks.py)
        raise UsageError(
            f"the hook's schema refers to {exc!s:.200}, which is not in it: no answer can be "
            "validated against it",
            run_id=run_id,
            hook_id=hook_id,
        ) from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise InvalidPayload(
            f"answer does not match the hook's schema at {where}: {error.message}",
            run_id=run_id,
            hook_id=hook_id,
        )


@functools.lru_cache(maxsize=256)  # bounded: schemas may be generated per question
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(loads(schema_json))
