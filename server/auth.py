"""API keys with names and scopes.

Each key has a name (recorded as ``answered_by="key:<name>"`` when it answers a hook), a
scope and a secret. Scopes: ``admin`` may do everything, ``operator`` may read, answer
hooks, cancel runs and mint answer links, ``reader`` may only read. Keys come from the
environment (``PARLEY_API_KEY``: an admin key named ``default``; ``PARLEY_API_KEYS``:
``name:scope:secret,...``) or a JSON file (``PARLEY_API_KEYS_FILE``), all read in
:mod:`runtime.settings`. A presented key is compared with every configured key in
constant time (digests of equal length, no early exit), so the time taken says nothing
about which key, or how much of one, matched.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from runtime.settings import Settings

from .errors import ApiError

NAME_RE = re.compile(r"^[A-Za-z0-9_.@\-]{1,64}$")
MIN_SECRET_CHARS = 12


class Scope(enum.StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    READER = "reader"


class Permission(enum.StrEnum):
    READ = "read"  # runs, events, hooks, the console's views
    ANSWER = "answer"  # answer a hook; mint its answer link
    CANCEL = "cancel"  # cancel a run
    RETRY = "retry"  # send a blocked run back to the workers
    START = "start"  # start (and restart) runs
    MANAGE_KEYS = "manage_keys"  # see the configured keys


GRANTS: dict[Scope, frozenset[Permission]] = {
    Scope.ADMIN: frozenset(Permission),
    Scope.OPERATOR: frozenset(
        {Permission.READ, Permission.ANSWER, Permission.CANCEL, Permission.RETRY}
    ),
    Scope.READER: frozenset({Permission.READ}),
}


class KeyConfigError(ValueError):
    """The API keys' configuration is wrong (raised at startup, never per request)."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    name: str
    scope: Scope
    secret: str = field(repr=False)

    @property
    def answered_by(self) -> str:
        return f"key:{self.name}"

    def allows(self, permission: Permission) -> bool:
        return permission in GRANTS[self.scope]

    def to_json(self) -> dict[str, Any]:
        """What may be shown of a key: never its secret."""
        return {
            "name": self.name,
            "scope": self.scope.value,
            "permissions": sorted(p.value for p in GRANTS[self.scope]),
        }


def make_key(name: str, scope: str, secret: str, *, where: str) -> ApiKey:
    if not NAME_RE.fullmatch(name):
        raise KeyConfigError(f"{where}: a key name must match {NAME_RE.pattern}, got {name!r}")
    try:
        parsed = Scope(scope)
    except ValueError:
        raise KeyConfigError(
            f"{where}: key {name!r} has scope {scope!r}; expected admin, operator or reader"
        ) from None
    if len(secret) < MIN_SECRET_CHARS:
        raise KeyConfigError(
            f"{where}: the secret of key {name!r} must have at least {MIN_SECRET_CHARS} characters"
        )
    return ApiKey(name, parsed, secret)


def parse_keys(spec: str, *, where: str = "PARLEY_API_KEYS") -> list[ApiKey]:
    """``name:scope:secret`` items, comma-separated."""
    keys = []
    for n, item in enumerate(spec.split(","), 1):
        if not item.strip():
            continue
        parts = item.strip().split(":", 2)
        if len(parts) != 3:  # the item is not shown: it holds a secret
            raise KeyConfigError(f"{where}: item {n} must be 'name:scope:secret'")
        keys.append(make_key(*parts, where=where))
    return keys


def load_key_file(path: str | Path) -> list[ApiKey]:
    """A JSON file ``[{"name": ..., "scope": ..., "secret": ...}, ...]``."""
    where = str(path)
    try:
        data = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise KeyConfigError(f"{where}: cannot read the API keys file: {exc}") from None
    if not isinstance(data, list):
        raise KeyConfigError(f"{where}: expected a JSON array of keys, got {type(data).__name__}")
    keys = []
    for n, item in enumerate(data, 1):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(f), str) for f in ("name", "scope", "secret")
        ):
            raise KeyConfigError(
                f"{where}: key {n} must be an object with string name, scope and secret"
            )
        keys.append(make_key(item["name"], item["scope"], item["secret"], where=where))
    return keys


def keys_from_settings(settings: Settings) -> list[ApiKey]:
    """Every key the environment configures."""
    keys = []
    if settings.api_key:
        keys.append(make_key("default", "admin", settings.api_key, where="PARLEY_API_KEY"))
    keys += parse_keys(settings.api_keys)
    if settings.api_keys_file:
        keys += load_key_file(settings.api_keys_file)
    return keys


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class KeyRing:
    """The configured keys, looked up in constant time."""

    def __init__(self, keys: Iterable[ApiKey]) -> None:
        self.keys: Sequence[ApiKey] = tuple(keys)
        names = [k.name for k in self.keys]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise KeyConfigError(f"API key names must be unique; configured twice: {duplicates}")
        if len({k.secret for k in self.keys}) != len(self.keys):
            raise KeyConfigError("two API keys have the same secret; each key needs its own")
        self._digests = [(_digest(k.secret), k) for k in self.keys]

    def __len__(self) -> int:
        return len(self.keys)

    def authenticate(self, presented: str) -> ApiKey | None:
        given = _digest(presented)
        found: ApiKey | None = None
        for digest, key in self._digests:  # every key, every time: no early exit
            if hmac.compare_digest(given, digest):
                found = key
        return found


CHALLENGE = {"WWW-Authenticate": 'Bearer realm="parley"'}


def authorize(ring: KeyRing, header: str, permission: Permission) -> ApiKey:
    """The key in an ``Authorization: Bearer <key>`` header, if it has ``permission``:
    else 401 (no or unknown key) or 403 (the key's scope does not allow it)."""
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        raise ApiError(
            401, "unauthorized", "expected a header 'Authorization: Bearer <API key>'", CHALLENGE
        )
    key = ring.authenticate(presented.strip())
    if key is None:
        raise ApiError(401, "unauthorized", "the API key is not valid", CHALLENGE)
    if not key.allows(permission):
        raise ApiError(
            403,
            "forbidden",
            f"the API key {key.name!r} has scope {key.scope.value!r}, which does not allow "
            f"{permission.value!r}; expected a key whose scope does",
        )
    return key
