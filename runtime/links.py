"""Signed answer links: a URL that answers one hook and nothing else.

A link is ``v1.<key id>.<payload>.<signature>``: the payload (base64url JSON) names the
hook's token, when the link stops working (the hook's deadline, when it has one) and, if
given, who it was sent to; the signature is HMAC-SHA256 over everything before it, with
the secret of that key id. Several keys may be configured (``PARLEY_LINK_KEYS``): the
first signs new links, all of them verify, so a secret is rotated by putting a new key
first and removing the old one once its links have expired.

A valid signature is necessary, not sufficient: the link answers through
``Runtime.resume_hook``, so an answered (single use), expired or cancelled hook refuses
it like any other answer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ._clock import now_ms
from .errors import InvalidLink, UsageError
from .ids import parse_token

__all__ = ["KEY_ID_RE", "MIN_SECRET_BYTES", "Link", "LinkSigner"]

VERSION = "v1"
KEY_ID_RE = re.compile(r"^[A-Za-z0-9_\-]{1,32}$")
MIN_SECRET_BYTES = 16
MAX_LINK_CHARS = 2048
MAX_WHO_CHARS = 120
SIGNATURE_CHARS = 43  # HMAC-SHA256's 32 bytes in base64url, unpadded
B64URL_RE = re.compile(r"[A-Za-z0-9_\-]*")
SIGNATURE_RE = re.compile(rf"[A-Za-z0-9_\-]{{{SIGNATURE_CHARS}}}")


@dataclass(frozen=True, slots=True)
class Link:
    """What a verified link says."""

    token: str
    key_id: str
    expires_at_ms: int | None = None
    who: str | None = None

    @property
    def answered_by(self) -> str:
        """How an answer through this link is recorded in ``hook.received``."""
        return f"link:{self.key_id}" + (f":{self.who}" if self.who else "")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class LinkSigner:
    """Signs and verifies answer links with ``keys``: ``(key id, secret)`` pairs, the first
    one signing."""

    def __init__(self, keys: Sequence[tuple[str, str]]) -> None:
        if not keys:
            raise UsageError(
                "answer links need a signing key: set PARLEY_LINK_KEYS='<key id>=<secret>'"
            )
        self._keys: dict[str, bytes] = {}
        for key_id, secret in keys:
            if not KEY_ID_RE.fullmatch(key_id):
                raise UsageError(f"a link key id must match {KEY_ID_RE.pattern}, got {key_id!r}")
            if len(secret.encode()) < MIN_SECRET_BYTES:
                raise UsageError(
                    f"the secret of link key {key_id!r} must have at least {MIN_SECRET_BYTES} bytes"
                )
            if key_id in self._keys:
                raise UsageError(f"link key id {key_id!r} is configured twice")
            self._keys[key_id] = secret.encode()
        self.signing_key_id = keys[0][0]

    @property
    def key_ids(self) -> list[str]:
        return list(self._keys)

    def _signature(self, key_id: str, signed: str) -> bytes:
        return hmac.new(self._keys[key_id], signed.encode(), hashlib.sha256).digest()

    def sign(self, token: str, *, expires_at_ms: int | None = None, who: str | None = None) -> str:
        """A link that answers the hook ``token``, until ``expires_at_ms`` if given."""
        run_id, hook_id = parse_token(token)
        if who is not None and not 0 < len(who) <= MAX_WHO_CHARS:
            raise UsageError(
                f"who must have 1 to {MAX_WHO_CHARS} characters, got {len(who)}",
                run_id=run_id,
                hook_id=hook_id,
            )
        claims: dict[str, Any] = {"t": token}
        if expires_at_ms is not None:
            claims["x"] = int(expires_at_ms)
        if who is not None:
            claims["w"] = who
        signed = f"{VERSION}.{self.signing_key_id}.{_b64(orjson.dumps(claims))}"
        return f"{signed}.{_b64(self._signature(self.signing_key_id, signed))}"

    def verify(self, link: str, *, now: int | None = None) -> Link:
        """The link's claims, or :class:`InvalidLink` (``reason``: ``malformed``,
        ``unknown_key``, ``bad_signature`` or ``expired``)."""
        if not isinstance(link, str) or len(link) > MAX_LINK_CHARS:
            raise InvalidLink("expected an answer link 'v1.<key>.<payload>.<sig>'", "malformed")
        parts = link.split(".")
        if len(parts) != 4 or parts[0] != VERSION:
            raise InvalidLink("expected an answer link 'v1.<key>.<payload>.<sig>'", "malformed")
        _, key_id, payload, signature = parts
        if key_id not in self._keys:
            raise InvalidLink(
                f"the link was signed with key {key_id!r:.40}, which this server does not "
                "have (retired or never configured)",
                "unknown_key",
            )
        if not SIGNATURE_RE.fullmatch(signature):
            alphabet = "" if B64URL_RE.fullmatch(signature) else ", not all of them base64url"
            raise InvalidLink(
                f"expected the link's signature as {SIGNATURE_CHARS} base64url characters "
                f"(A-Z a-z 0-9 - _), got {len(signature)} characters{alphabet}",
                "malformed",
            )
        # The text is compared, not what it decodes to: a decoder skips characters outside
        # the alphabet and the last character's unused bits, so several texts decode to
        # the right signature, and an altered link would still answer the hook.
        expected = _b64(self._signature(key_id, f"{VERSION}.{key_id}.{payload}"))
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            raise InvalidLink(
                "the link's signature does not match: it was altered", "bad_signature"
            )
        # Signed by us: the payload is what we wrote.
        claims = orjson.loads(_unb64(payload))
        token = claims["t"]
        run_id, hook_id = parse_token(token)
        expires = claims.get("x")
        if expires is not None and (now_ms() if now is None else now) >= expires:
            raise InvalidLink(
                "the link expired with its question", "expired", run_id=run_id, hook_id=hook_id
            )
        return Link(token=token, key_id=key_id, expires_at_ms=expires, who=claims.get("w"))
