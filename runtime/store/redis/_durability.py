"""Writes acknowledged only once replicas have them: store URLs with ``?wait=N``.

Redis replicates asynchronously: a master that replies to a write and fails before its
replica received it takes the write with it, and a failover promotes the replica without
it — an answer the visitor was told was recorded is gone. ``WAIT N timeout`` blocks until
N replicas acknowledged every write made *on the same connection* before it, so it is sent
right after the writes, in their pipeline (a WAIT on another connection would confirm
nothing, or a write of another master after a failover). When fewer than N replicas
confirm in time, the writes are not acknowledged: the caller gets
:class:`~runtime.errors.ReplicationUnconfirmed` (a :class:`StoreUnavailable`: the worker
and the server treat it as an outage, a retry is safe), never a success.

What is confirmed: every script call (start, answers, sends, cancels, a worker's writes —
its checkpoints, hooks and prompts, its claims and completions — and the outbox messages
of ``post_to_session`` and ``emit``, lua/post.lua). Not confirmed (they are re-created or
retried, or their loss is visible): task reads and hand-backs, session metadata and
workflow announcements.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from ...errors import ReplicationUnconfirmed
from . import _scripts
from ._batch import Batcher, Script, _Call, pack_command
from ._connect import Durability

# Scripts that write nothing need no confirmation (nor a replica to be read).
READ_ONLY_SCRIPTS = ("wait_state", "read_hooks")


def unconfirmed(durability: Durability, confirmed: object) -> ReplicationUnconfirmed:
    return ReplicationUnconfirmed(
        f"the write was applied by the Redis master but {confirmed} of the "
        f"{durability.replicas} replica(s) required (?wait={durability.replicas}) confirmed "
        f"it within {durability.timeout_ms} ms, so it is not acknowledged: whether it "
        f"survives a failover is unknown; retrying is safe"
    )


def check(durability: Durability, confirmed: object) -> None:
    if not isinstance(confirmed, int) or confirmed < durability.replicas:
        raise unconfirmed(durability, confirmed)


class ReplicatedBatcher(Batcher):
    """The batcher whose pipelines end with ``WAIT``: a batch's calls are answered only
    once the replicas confirmed them (all or none: one WAIT covers the pipeline)."""

    def __init__(self, client: aioredis.Redis, durability: Durability) -> None:
        super().__init__(client, pipelined=True)
        self.durability = durability
        self.read_only = frozenset(Script(self, _scripts.source(n)).sha for n in READ_ONLY_SCRIPTS)

    async def _pipeline(self, calls: list[_Call]) -> list[Any]:
        if all(script.sha in self.read_only for script, *_ in calls):
            return await super()._pipeline(calls)
        packed = b"".join(script.pack(keys, args) for script, keys, args, _ in calls)
        wait = pack_command("WAIT", self.durability.replicas, self.durability.timeout_ms)
        replies = await self._round_trip(packed + wait, len(calls) + 1)
        confirmed = replies.pop()
        if all(isinstance(reply, NoScriptError) for reply in replies):
            return replies  # nothing ran: the batcher loads the scripts and sends them again
        # Raised, every call of the batch fails with it (Batcher._send): none is acknowledged.
        check(self.durability, confirmed)
        return replies
