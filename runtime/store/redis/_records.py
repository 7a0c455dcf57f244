"""The hook record: how one hook is stored in its run's hooks hash.

A record is ``<state><schema flag><metadata JSON>``: the state is one letter (below); the
schema flag is ``S`` when answers must be validated against a JSON Schema, ``-``
otherwise. Lua reads and flips the state letter alone (``hook_state``/``with_hook_state``
in ``lua/lib.lua``), never the JSON. The accepted answer's digest is kept in the same hash
under ``<hook_id>!p``, to tell a duplicate answer from a conflicting one.
"""

from __future__ import annotations

from typing import Any

from ..._codec import dumps, loads
from ...ids import make_token
from ...models import HookInfo, HookStatus

STATE_LETTERS = {
    HookStatus.PENDING: "P",
    HookStatus.RECEIVED: "R",
    HookStatus.EXPIRED: "E",
    HookStatus.CANCELLED: "C",
    HookStatus.CLOSED: "X",
}
_STATE_BY_LETTER = {ord(letter): state for state, letter in STATE_LETTERS.items()}
DIGEST_SUFFIX = "!p"
# Under ``<wait id>!f``: the hooks and timers of the first() this wait is a branch of, as
# ``=<wait id>,<wait id>...``; before the run suspended on that first(), only its name,
# ``~<name>``, and under ``~<name>!f`` the wait that finished first, ``><wait id>`` (the
# leading ``=``, ``~`` and ``>`` keep each from reading as a record's state letter).
FIRST_SUFFIX = "!f"


def encode_pending(meta: dict[str, Any], *, validated: bool) -> str:
    """A new, pending hook's record."""
    return "P" + ("S" if validated else "-") + dumps(meta).decode()


def decode(run_id: str, hook_id: str, record: bytes, session: str | None) -> HookInfo:
    meta = loads(record[2:])
    expires = meta.get("expires_at")
    return HookInfo(
        token=make_token(run_id, hook_id),
        run_id=run_id,
        hook_id=hook_id,
        name=meta["name"],
        status=_STATE_BY_LETTER[record[0]],
        step_id=meta.get("step_id"),
        expires_at=None if expires is None else expires / 1000,
        session=session,
        prompt=meta.get("prompt"),
        schema=meta.get("schema"),
    )


def is_pending(record: bytes) -> bool:
    return record[:1] == b"P"


def schema_of(record: bytes) -> dict[str, Any] | None:
    return loads(record[2:]).get("schema") if record[1:2] == b"S" else None


def decode_all(run_id: str, hooks: dict[bytes, bytes], session: str | None) -> list[HookInfo]:
    """Every hook of a run's hooks hash (the answer digests left out), by hook id."""
    return [
        decode(run_id, field.decode(), value, session)
        for field, value in sorted(hooks.items())
        if not field.endswith((DIGEST_SUFFIX.encode(), FIRST_SUFFIX.encode()))
    ]
