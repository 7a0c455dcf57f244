"""Signed answer links (``runtime.links``): ``/a/<link>`` answers one hook, no API key.

``GET /a/<link>`` shows a small page with the hook's prompt and a form rendered from its
JSON Schema by the widget's form code (``widget/answer-page.js``); it changes nothing (mail
scanners fetch links). ``POST /a/<link>`` ``{"payload": ...}`` answers through the same
``Runtime.resume_hook`` as every other path, recorded as ``answered_by="link:<key id>"``
(``:<who>`` when the link names its recipient). A link is single use — a second answer is
"already answered" even when identical — and stops working when its hook expires or its
run is cancelled. An altered link, one of a retired key, or an expired one gets a clear
page (or JSON error) and changes nothing.

``POST /api/hooks/<token>/link`` (an ``operator`` key) mints a link for a pending hook.
"""

from __future__ import annotations

import html
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from runtime import (
    HookInfo,
    HookStatus,
    InvalidLink,
    ParleyError,
    RunNotFound,
    StoreUnavailable,
)
from runtime.ids import parse_token
from runtime.links import Link, LinkSigner

from .api import _json, ctx_of, expect_object, read_json, require_api_key
from .auth import Permission
from .context import ServerContext
from .errors import ApiError, status_of

# Links are secrets in a URL: never sent on as a referrer, never cached, never framed.
PAGE_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
}

# What a person sees for each reason a link cannot be used (status, title, text). The text
# is the page's and also the ``message`` of a refused POST, which the answer page shows as
# it is: so it says, in plain words, what happened and what the person can do. The
# verifier's own wording (signatures, key ids, the link's format) is for a machine or an
# operator, never for them.
REFUSALS: dict[str, tuple[int, str, str]] = {
    "not_configured": (
        404,
        "Answer links are off",
        "This server does not take answers through links. "
        "Ask whoever sent the link how else to answer.",
    ),
    "malformed": (
        400,
        "This link is not valid",
        "This link is not valid: it may have been copied incompletely. "
        "Copy the whole link from the message you got, or ask for a new link.",
    ),
    "bad_signature": (
        403,
        "This link is not valid",
        "This link is not valid: it was altered or mistyped. "
        "Nothing was changed. Copy the whole link again, or ask for a new link.",
    ),
    "unknown_key": (
        403,
        "This link is no longer valid",
        "This link is no longer valid: it was made with a key this server no longer "
        "accepts. Nothing was changed. Ask for a new link.",
    ),
    "expired": (
        410,
        "This question expired",
        "This question expired: the time to answer it has passed. "
        "If it still matters, ask whoever sent it to ask again.",
    ),
    "received": (
        409,
        "Already answered",
        "This question was already answered, and it takes only one answer. Nothing more is needed.",
    ),
    "cancelled": (
        410,
        "This question was withdrawn",
        "This question was withdrawn: its conversation was cancelled. Nothing more is needed.",
    ),
    "closed": (
        410,
        "This question was withdrawn",
        "This question was withdrawn: the conversation went on without it, so it no longer "
        "takes answers. Nothing more is needed.",
    ),
    "finished": (
        410,
        "This conversation has ended",
        "This conversation has ended, so the question no longer takes answers. "
        "Nothing more is needed.",
    ),
    "not_found": (
        404,
        "Question not found",
        "This question no longer exists, so it cannot be answered. Nothing more is needed.",
    ),
}


# What a person reads when their answer itself was refused, by error code: what happened
# and what to do (nothing was recorded; the page keeps what they entered, to correct it
# and send it again). The runtime's wording (the schema's path and rule, byte counts) goes
# in ``detail``.
ANSWER_ERRORS: dict[str, str] = {
    "invalid_payload": (
        "This answer does not fit the question, so it was not recorded. "
        "Check what you entered and send it again."
    ),
    "payload_too_large": (
        "This answer is too long, so it was not recorded. Shorten it and send it again."
    ),
    "store_unavailable": (
        "Your answer may not have been recorded: the service is briefly unavailable. "
        "Wait a moment and send it again."
    ),
}
# the same words for the other codes of each case
ANSWER_ERRORS["request_too_large"] = ANSWER_ERRORS["payload_too_large"]
ANSWER_ERROR_FALLBACK = (
    "Your answer could not be recorded. Send it again in a moment; if it still does not "
    "go through, ask whoever sent the link how else to answer."
)


def _known(reason: str) -> str:
    """The reason as REFUSALS knows it: one it does not know is shown as a damaged link."""
    return reason if reason in REFUSALS else "malformed"


def _signer(ctx: ServerContext) -> LinkSigner:
    if ctx.links is None:
        raise InvalidLink(
            "this server has no answer-link keys (PARLEY_LINK_KEYS)", "not_configured"
        )
    return ctx.links


async def _hook(ctx: ServerContext, token: str) -> HookInfo | None:
    run_id, _ = parse_token(token)
    for hook in await ctx.runtime.list_hooks(None, run_id=run_id):
        if hook.token == token:
            return hook
    return None


def _page(title: str, body: str, status: int, *, script: bool = False) -> HTMLResponse:
    """A page in English; its script (``widget/answer-page.js``) puts it in the visitor's
    language (``widget/i18n.js``, ``ANSWER_PAGE``: by each refusal's reason and each
    answer error's code, so a new one here wants its words there)."""
    scripts = '<script type="module" src="/widget/answer-page.js"></script>' if script else ""
    return HTMLResponse(
        f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{html.escape(title)} — Parley</title>
  <link rel="stylesheet" href="/widget/parley-widget.css">
  <link rel="stylesheet" href="/widget/answer-page.css">
</head>
<body>
  <main class="parley-widget parley-answer-page">
    <header class="parley-header"><h1 class="parley-title">{html.escape(title)}</h1></header>
    <div class="parley-log">{body}</div>
  </main>
  {scripts}
</body>
</html>
""",
        status,
        headers=PAGE_HEADERS,
    )


def refusal_page(reason: str) -> HTMLResponse:
    reason = _known(reason)
    status, title, text = REFUSALS[reason]
    # data-reason: the machine-readable reason, as the JSON refusal's "reason"
    body = (
        f'<p class="parley-msg parley-system" role="alert" data-reason="{html.escape(reason)}">'
        f"{html.escape(text)}</p>"
    )
    return _page(title, body, status, script=True)  # the script says it in the visitor's language


def _state_reason(hook: HookInfo | None) -> str | None:
    """Why a hook no longer takes answers, or None while it is pending."""
    if hook is None:
        return "not_found"
    if hook.status is HookStatus.PENDING:
        return None
    return {
        HookStatus.RECEIVED: "received",
        HookStatus.EXPIRED: "expired",
        HookStatus.CANCELLED: "cancelled",
        HookStatus.CLOSED: "closed",
    }[hook.status]


async def link_page(request: Request) -> Response:
    """The hook's prompt and answer form; changes nothing."""
    ctx = ctx_of(request)
    try:
        link = _signer(ctx).verify(request.path_params["link"], now=await ctx.runtime.now_ms())
        hook = await _hook(ctx, link.token)
    except InvalidLink as exc:
        return refusal_page(exc.reason)
    except RunNotFound:
        return refusal_page("not_found")
    reason = _state_reason(hook)
    if reason is not None or hook is None:
        return refusal_page(reason or "not_found")
    prompt = hook.prompt or hook.name
    data = {
        "prompt": prompt,
        "schema": hook.schema,
        "expires_at": hook.expires_at,
    }
    # JSON in a non-executed script element: "<" escaped so it cannot close the element.
    embedded = orjson.dumps(data).decode().replace("<", "\\u003c")
    body = (
        f'<script type="application/json" id="parley-hook">{embedded}</script>'
        '<section class="parley-prompt" aria-labelledby="parley-question">'
        f'<p class="parley-question" id="parley-question">{html.escape(prompt)}</p>'
        '<div id="parley-form"><p class="parley-prompt-note">Loading the form…</p></div>'
        "</section>"
        '<p class="parley-error" id="parley-error" role="alert"></p>'
        '<p class="parley-msg parley-system" id="parley-result" role="status"></p>'
    )
    return _page("A question for you", body, 200, script=True)


# Errors of resume_hook that mean the hook no longer takes answers, as refusal reasons.
REASON_BY_CODE = {
    "hook_already_answered": "received",
    "hook_expired": "expired",
    "hook_cancelled": "cancelled",
    "hook_closed": "closed",
    "run_finished": "finished",
    "hook_not_found": "not_found",
    "run_not_found": "not_found",
}


def _refusal_json(reason: str, detail: str, **ids: Any) -> Response:
    """A refused answer: ``error`` and ``reason`` for a machine, ``message`` for the person
    (the answer page shows it), ``detail`` what the runtime said, for an operator."""
    reason = _known(reason)
    status, _, message = REFUSALS[reason]
    code = {v: k for k, v in REASON_BY_CODE.items()}.get(reason, "invalid_link")
    body = {"error": code, "reason": reason, "message": message, "detail": detail, **ids}
    return _json(body, status)


def _answer_error_json(code: str, detail: str, status: int, **ids: Any) -> Response:
    """An answer refused for itself (it does not fit the question, it is too large) or not
    recorded for now (the store is out of reach): the person may send it again. As a
    refusal of the link: ``message`` in plain words, the runtime's wording in ``detail``."""
    message = ANSWER_ERRORS.get(code, ANSWER_ERROR_FALLBACK)
    body = {"error": code, "reason": code, "message": message, "detail": detail, **ids}
    return _json(body, status)


async def link_answer(request: Request) -> Response:
    """Answer the link's hook: ``{"payload": ...}``."""
    try:
        return await _link_answer(request)
    except ApiError as exc:  # the body: too large, not JSON
        return _answer_error_json(exc.code, exc.message, exc.status)
    except StoreUnavailable as exc:
        return _answer_error_json(exc.code, exc.message, 503)


async def _link_answer(request: Request) -> Response:
    ctx = ctx_of(request)
    try:
        link: Link = _signer(ctx).verify(
            request.path_params["link"], now=await ctx.runtime.now_ms()
        )
    except InvalidLink as exc:
        return _refusal_json(exc.reason, exc.message)
    body = expect_object(await read_json(request, limit=ctx.config.max_body_bytes), "the body")
    if "payload" not in body:
        raise ApiError(400, "malformed", 'expected a body {"payload": <answer>}, got no payload')
    run_id, hook_id = parse_token(link.token)
    ids = {"run_id": run_id, "hook_id": hook_id}
    try:
        recorded = await ctx.runtime.resume_hook(
            link.token, body["payload"], answered_by=link.answered_by
        )
    except StoreUnavailable as exc:
        return _answer_error_json(exc.code, exc.message, 503, **ids)
    except ParleyError as exc:
        reason = REASON_BY_CODE.get(exc.code)
        if reason is None:  # the answer itself is wrong (schema, size): the person may retry
            return _answer_error_json(exc.code, exc.message, status_of(exc), **ids)
        return _refusal_json(reason, exc.message, **ids)
    if not recorded:  # the same answer again: a link is single use
        return _refusal_json("received", "the hook was already answered", **ids)
    return _json({"recorded": True, "answered_by": link.answered_by, **ids})


async def mint_link(request: Request) -> Response:
    """``POST /api/hooks/<token>/link`` ``{"who": optional recipient}``: a link for a
    pending hook, expiring with it."""
    ctx = require_api_key(request, Permission.ANSWER)
    body = expect_object(
        await read_json(request, limit=ctx.config.max_body_bytes, required=False), "the body"
    )
    who = body.get("who")
    if who is not None and not isinstance(who, str):
        raise ApiError(400, "malformed", "expected 'who' to be a string")
    token = request.path_params["token"]
    run_id, hook_id = parse_token(token)
    if ctx.links is None:
        raise ApiError(
            404, "links_not_configured", "this server has no answer-link keys (PARLEY_LINK_KEYS)"
        )
    signer = ctx.links
    hook = await _hook(ctx, token)
    reason = _state_reason(hook)
    if reason is not None or hook is None:
        raise ApiError(
            410 if reason != "not_found" else 404,
            "hook_not_pending",
            f"expected a pending hook, got one that is {reason}",
        )
    expires = None if hook.expires_at is None else int(hook.expires_at * 1000)
    link = signer.sign(token, expires_at_ms=expires, who=who)
    base = ctx.config.public_url or str(request.base_url).rstrip("/")
    return _json(
        {
            "token": token,
            "link": link,
            "url": f"{base}/a/{link}",
            "key_id": signer.signing_key_id,
            "expires_at": hook.expires_at,
            "run_id": run_id,
            "hook_id": hook_id,
        },
        201,
    )


LINK_ROUTES = [
    Route("/a/{link}", link_page, methods=["GET"]),
    Route("/a/{link}", link_answer, methods=["POST"]),
    Route("/api/hooks/{token}/link", mint_link, methods=["POST"]),
]
