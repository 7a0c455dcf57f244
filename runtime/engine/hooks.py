"""A hook's creation and the asking for it: its record (with its prompt to the run's
session), then ``on_created`` — which the hook does not expire before, so that a worker
dying in between leaves the asking to the re-execution, with a fresh deadline."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

import jsonschema
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from .. import _faults
from .._codec import due_ms, dumps
from ..errors import UsageError
from ..models import EventType
from ..store import HookSpec
from .execution import Execution
from .scopes import Position

OnCreated = Callable[[str], Awaitable[None] | None]


async def ask(execution: Execution, hook_id: str, token: str, on_created: OnCreated | None) -> None:
    """Hand the token out (``on_created``); once it returned, the hook's deadline counts
    again (``asked``, written with the suspension)."""
    if on_created is not None:
        outcome = on_created(token)
        if inspect.isawaitable(outcome):
            await outcome
        if execution.index.hooks_created[hook_id].get("expires_at") is not None:
            execution.writes.asked(hook_id)
    # Only once it returned: if it raised, a retried step calls it again.
    execution.notified.add(hook_id)
    _faults.crash_point("after_on_created")


# What a hook's record holds besides its state (the hook.created event holds the same).
_META_FIELDS = ("name", "step_id", "expires_at", "prompt", "schema")


async def ask_again(execution: Execution, hook_id: str, timeout: float | datetime | None) -> None:
    """The hook was recorded by an execution that did not see its ``on_created`` return
    (its worker died, or ``on_created`` raised and the step is retried), so it has not
    expired (``asking``): the person is asked now, and given the whole ``timeout`` from
    now — an instant stays that instant. Durable before ``on_created`` runs, so a link it
    signs (``hook_url``) and the hook's ``expires_at`` carry the new deadline."""
    created = execution.index.hooks_created[hook_id]
    if timeout is None or created.get("expires_at") is None:
        return
    expires_at_ms = due_ms(timeout, execution.now_ms())
    if expires_at_ms <= created["expires_at"]:
        return
    meta = {field: created[field] for field in _META_FIELDS if field in created}
    meta["expires_at"] = expires_at_ms
    spec = HookSpec(
        hook_id,
        execution.token(hook_id),
        meta,
        validated=meta.get("schema") is not None,
        expires_at_ms=expires_at_ms,
    )
    execution.writes.create_hook(spec)  # the store keeps an answered or closed hook as is
    execution.writes.asking(hook_id, expires_at_ms)
    created["expires_at"] = expires_at_ms
    await execution.flush()


def create_hook(
    execution: Execution,
    name: str,
    hook_id: str,
    step_id: str | None,
    seq: Position | None,
    expires_at_ms: int | None,
    schema: dict[str, Any] | None,
    prompt: str | None,
    token: str,
) -> None:
    if schema is not None:
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise UsageError(
                f"schema of hook {name!r} is not a valid JSON Schema: {exc.message}",
                run_id=execution.run_id,
                hook_id=hook_id,
            ) from None
        unresolvable = _unresolvable_ref(schema)
        if unresolvable is not None:
            # Refused now: every answer would otherwise fail to validate (nothing is
            # fetched from elsewhere), and the hook could only expire.
            raise UsageError(
                f"schema of hook {name!r} refers to {unresolvable!r}, which is not in it "
                f"(a $ref must point inside the schema, e.g. '#/$defs/...')",
                run_id=execution.run_id,
                hook_id=hook_id,
            )
    if prompt is None and schema is not None:
        prompt = schema.get("description") or schema.get("title")
    # Absent rather than null: a suspended run's bytes are the cost that matters.
    meta: dict[str, Any] = {"name": name}
    for field, value in (
        ("step_id", step_id),
        ("expires_at", expires_at_ms),
        ("prompt", prompt),
        ("schema", schema),
    ):
        if value is not None:
            meta[field] = value
    created = {"hook_id": hook_id, **meta}
    if seq is not None:
        created["seq"] = seq
    execution.record(EventType.HOOK_CREATED, created)
    execution.writes.create_hook(
        HookSpec(hook_id, token, meta, validated=schema is not None, expires_at_ms=expires_at_ms)
    )
    if execution.session:
        # A prompt keeps the session's messages from expiring while it is pending.
        execution.writes.prompt(
            dumps(
                {
                    "type": "prompt",
                    "run_id": execution.run_id,
                    "token": token,
                    "hook": name,
                    "prompt": prompt,
                    "schema": schema,
                    "expires_at": expires_at_ms,
                }
            )
        )


_SCHEMA_URI = "urn:parley:hook-schema"


def _unresolvable_ref(schema: dict[str, Any]) -> str | None:
    """The first ``$ref`` of ``schema`` that does not resolve inside it, if any."""
    registry = Registry().with_resource(_SCHEMA_URI, DRAFT202012.create_resource(schema))
    resolver = registry.crawl().resolver(base_uri=_SCHEMA_URI)
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return ref
    return None


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)
