"""The identifiers Parley hands out and accepts: run ids, session ids, workflow/step/hook
names and hook tokens, with the checks that turn a malformed one into a clear error.

A hook token is ``"<run_id>:<hook_id>"``: Parley's run ids are ``r-`` + 24 hex digits, a
caller's own are letters, digits, ``_``, ``-`` and ``.`` (no ``:``), and hook ids are built
from names restricted below, so a token splits unambiguously and is safe in a URL path.
"""

from __future__ import annotations

import re
import secrets

from .errors import InvalidToken, RunNotFound, UsageError

RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.]{0,99}$")
IDEMPOTENCY_KEY_MAX = 200
NAME_RE = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
HOOK_ID_RE = re.compile(r"^[A-Za-z0-9_\-.]{1,200}$")
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_\-]{16,64}$")

__all__ = [
    "HOOK_ID_RE",
    "NAME_RE",
    "RUN_ID_RE",
    "SESSION_ID_RE",
    "check_idempotency_key",
    "check_name",
    "check_new_run_id",
    "check_run_id",
    "check_session_id",
    "make_token",
    "new_run_id",
    "new_session_id",
    "parse_token",
]


def new_run_id() -> str:
    return "r-" + secrets.token_hex(12)


def new_session_id() -> str:
    """A random, unguessable chat-session id."""
    return secrets.token_urlsafe(24)


def make_token(run_id: str, hook_id: str) -> str:
    return f"{run_id}:{hook_id}"


def parse_token(token: object) -> tuple[str, str]:
    """Split a hook token into (run_id, hook_id), or raise :class:`InvalidToken`."""
    if not isinstance(token, str):
        raise InvalidToken(f"expected a token string, got {type(token).__name__}")
    run_id, sep, hook_id = token.partition(":")
    if not sep or not RUN_ID_RE.fullmatch(run_id) or not HOOK_ID_RE.fullmatch(hook_id):
        shown = token if len(token) <= 80 else token[:77] + "..."
        raise InvalidToken(f"expected a token '<run_id>:<hook_id>', got {shown!r}")
    return run_id, hook_id


def check_run_id(run_id: object) -> str:
    """A run id to look up: malformed is a RunNotFound (no such run can exist)."""
    if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
        raise RunNotFound(
            f"expected a run id (1 to 100 letters, digits, '_', '-', '.'), got {run_id!r:.120}"
        )
    return run_id


def check_new_run_id(run_id: object) -> str:
    """A caller's id for a new run: a clear UsageError when it cannot be one."""
    if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
        raise UsageError(
            "a run id is 1 to 100 letters, digits, '_', '-' or '.', starting with a letter or "
            f"digit; got {run_id!r:.120}"
        )
    return run_id


def check_idempotency_key(key: object) -> str:
    if not isinstance(key, str) or not key or len(key) > IDEMPOTENCY_KEY_MAX:
        raise UsageError(
            f"an idempotency key is a string of 1 to {IDEMPOTENCY_KEY_MAX} characters, "
            f"got {key!r:.120}"
        )
    return key


def check_session_id(session: object) -> str:
    if not isinstance(session, str) or not SESSION_ID_RE.fullmatch(session):
        raise UsageError(f"a session id must match {SESSION_ID_RE.pattern}, got {session!r}")
    return session


def check_name(name: object, what: str) -> str:
    """A workflow, step or hook name: letters, digits, ``_`` and ``-``, 1 to 64 of them."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise UsageError(f"{what} name must match {NAME_RE.pattern}, got {name!r}")
    return name
