"""Reading the store: event logs, hooks, runs and store-wide counters (the operator's and
the server's views). Mixed into :class:`runtime.Runtime`."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from ._decoding import hook_info, hook_infos, opt_text, run_info
from ._keys import PREFIX, RUN_ID_RE, parse_token, pending_hooks_key, run_keys, stats_key
from ._replay import parse_stream_entries
from .errors import RunNotFound, UsageError
from .models import Event, HookInfo, HookStatus, RunInfo, RunStatus


class Inspection:
    """Needs ``partitions`` and a connected ``redis`` (provided by Runtime)."""

    partitions: int

    @property
    def redis(self) -> aioredis.Redis:  # pragma: no cover - Runtime overrides it
        raise NotImplementedError

    async def events(self, run_id: str) -> list[Event]:
        keys = run_keys(check_run_id(run_id), self.partitions)
        entries: Any = await self.redis.xrange(keys.events)
        if not entries and not await self.redis.exists(keys.run):
            raise RunNotFound(f"no run {run_id!r}", run_id=run_id)
        return parse_stream_entries(entries)

    async def list_hooks(
        self, status: str | HookStatus | None = "pending", *, run_id: str | None = None
    ) -> list[HookInfo]:
        """Hooks of one run (any status), or the pending hooks of every run."""
        wanted = None if status is None else HookStatus(status)
        if run_id is not None:
            keys = run_keys(check_run_id(run_id), self.partitions)
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hget(keys.run, "session")
                pipe.hgetall(keys.hooks)
                session, hooks = await pipe.execute()
            infos = hook_infos(run_id, hooks, opt_text(session))
            return [h for h in infos if wanted is None or h.status is wanted]
        if wanted is not HookStatus.PENDING:
            raise UsageError("listing hooks of every run supports status='pending' only")
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in range(self.partitions):
                pipe.smembers(pending_hooks_key(partition))
            members = await pipe.execute()
        tokens = sorted(t.decode() for group in members for t in group)
        async with self.redis.pipeline(transaction=False) as pipe:
            for token in tokens:
                rid, hook_id = parse_token(token)
                keys = run_keys(rid, self.partitions)
                pipe.hget(keys.hooks, hook_id)
                pipe.hget(keys.run, "session")
            values = await pipe.execute()
        result = []
        for i, token in enumerate(tokens):
            value, session = values[2 * i], values[2 * i + 1]
            if value is not None and value[:1] == b"P":
                rid, hook_id = parse_token(token)
                result.append(hook_info(rid, hook_id, value, opt_text(session)))
        return result

    async def list_runs(
        self, status: str | RunStatus | None = None, *, limit: int | None = None
    ) -> list[RunInfo]:
        """Runs in the store, newest first (an operator's scan: O(keys), not for hot paths).

        ``status`` filters; ``limit`` bounds the number returned.
        """
        wanted = None if status is None else RunStatus(status)
        run_ids = []
        async for key in self.redis.scan_iter(match=f"{PREFIX}:{{p:*}}:run:*", count=1000):
            name = key.decode()
            rid = name.rsplit(":run:", 1)[1]
            if RUN_ID_RE.match(rid):
                run_ids.append(rid)
        infos = []
        for i in range(0, len(run_ids), 500):
            async with self.redis.pipeline(transaction=False) as pipe:
                for rid in run_ids[i : i + 500]:
                    pipe.hgetall(run_keys(rid, self.partitions).run)
                replies = await pipe.execute()
            for rid, run in zip(run_ids[i : i + 500], replies, strict=True):
                if run:
                    info = run_info(rid, run, {})
                    if wanted is None or info.status is wanted:
                        infos.append(info)
        infos.sort(key=lambda r: r.created_at or 0, reverse=True)
        return infos if limit is None else infos[:limit]

    async def stats(self) -> dict[str, int]:
        """Store-wide counters: runs started/completed/failed/cancelled since the store
        began, runs suspended now, and hooks pending now."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in range(self.partitions):
                pipe.hgetall(stats_key(partition))
                pipe.scard(pending_hooks_key(partition))
            replies = await pipe.execute()
        totals = dict.fromkeys(
            ("started", "completed", "failed", "cancelled", "suspended", "hooks_pending"), 0
        )
        for i in range(0, len(replies), 2):
            for field, value in replies[i].items():
                if field.decode() in totals:
                    totals[field.decode()] += int(value)
            totals["hooks_pending"] += int(replies[i + 1])
        return totals


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        raise RunNotFound(f"expected a run id like 'r-' + 24 hex digits, got {run_id!r}")
    return run_id
