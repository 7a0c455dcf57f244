"""``hook_url(token)``: the signed answer link of a hook, for ``on_created`` to send by
email or chat (see :mod:`runtime.links`)."""

from __future__ import annotations

from ..engine.execution import current_execution
from ..errors import UsageError
from ..ids import parse_token
from ..links import LinkSigner
from ..settings import Settings

__all__ = ["hook_url"]


def hook_url(token: str, *, who: str | None = None, expires_at: float | None = None) -> str:
    """The URL (``$PARLEY_PUBLIC_URL/a/<link>``) that answers the hook ``token`` and nothing
    else, signed with the first of ``$PARLEY_LINK_KEYS``.

    It works once (the hook takes one answer), stops working when the hook expires — called
    from the hook's ``on_created``, the link carries the hook's deadline; elsewhere give
    ``expires_at`` (unix seconds) — and when the run is cancelled. ``who`` (the person it
    is sent to) is recorded as ``answered_by="link:<key id>:<who>"``.
    """
    run_id, hook_id = parse_token(token)
    settings = Settings.from_env()
    if settings.public_url is None:
        raise UsageError(
            "hook_url needs the server's public address: set PARLEY_PUBLIC_URL "
            "(e.g. https://parley.example.com)",
            run_id=run_id,
            hook_id=hook_id,
        )
    expires_ms = None if expires_at is None else int(expires_at * 1000)
    execution = current_execution.get()
    if expires_ms is None and execution is not None and execution.run_id == run_id:
        created = execution.index.hooks_created.get(hook_id)
        if created is not None and created.get("expires_at") is not None:
            expires_ms = int(created["expires_at"])
    link = LinkSigner(settings.link_keys).sign(token, expires_at_ms=expires_ms, who=who)
    return f"{settings.public_url}/a/{link}"
