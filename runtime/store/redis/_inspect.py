"""Reading the Redis store: runs, their logs and hooks, the pending hooks of every run,
and the store-wide counters (the operator's and the server's views)."""

from __future__ import annotations

import dataclasses

from ..._codec import loads
from ...ids import RUN_ID_RE, parse_token
from ...models import Event, HookInfo, RunInfo, RunStatus
from . import _decode, _keys, _records
from ._calls import store_call
from ._compaction import CompactionStore, archive_key


class InspectionStore(CompactionStore):
    """The inspection part of :class:`~runtime.store.redis.RedisStore`."""

    @store_call
    async def get_run(self, run_id: str) -> RunInfo | None:
        keys = self._run(run_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.run)
            pipe.hgetall(keys.hooks)
            pipe.smembers(_keys.key("children", keys.partition, run_id=run_id))
            pipe.get(archive_key(keys))
            pipe.hget(keys.run, "archive")  # last: see read_log
            run, hooks, children, legacy, segment_id = await pipe.execute()
        if not run:
            return None
        archived = await self.unarchive(keys, segment_id, legacy)
        if archived is not None:  # an ended run, compacted (._compaction)
            hooks = archived[1]
        info = _decode.run_info(run_id, run, hooks)
        if children:
            info = dataclasses.replace(info, child_run_ids=sorted(c.decode() for c in children))
        return info

    @store_call
    async def events(self, run_id: str) -> list[Event] | None:
        exists, events, _ = await self.read_log(run_id)
        if not events and not exists:
            return None
        return events

    @store_call
    async def run_hooks(self, run_id: str) -> list[HookInfo] | None:
        exists, _, hooks = await self.read_log(run_id, with_events=False)
        if not exists:
            return None
        session = await self.client.hget(self._run(run_id).run, "session")
        return _records.decode_all(run_id, hooks, _decode.opt_text(session))

    @store_call
    async def pending_hooks(self, tag: tuple[str, str] | None = None) -> list[HookInfo]:
        async with self.client.pipeline(transaction=False) as pipe:
            for partition in range(self.partitions):
                pipe.smembers(_keys.key("pending", partition))
            members = await pipe.execute()
        tokens = sorted(t.decode() for group in members for t in group)
        async with self.client.pipeline(transaction=False) as pipe:
            for token in tokens:
                run_id, hook_id = parse_token(token)
                keys = self._run(run_id)
                pipe.hget(keys.hooks, hook_id)
                if tag is None:
                    pipe.hget(keys.run, "session")
                else:  # the same one command per hook, with the run's tags
                    pipe.hmget(keys.run, "session", "tags")
            values = await pipe.execute()
        result = []
        for i, token in enumerate(tokens):
            record, session = values[2 * i], values[2 * i + 1]
            if tag is not None:
                session, tags = session
                if not tags or loads(tags).get(tag[0]) != tag[1]:
                    continue
            if record is not None and _records.is_pending(record):
                run_id, hook_id = parse_token(token)
                result.append(_records.decode(run_id, hook_id, record, _decode.opt_text(session)))
        return result

    @store_call
    async def list_runs(
        self,
        status: RunStatus | None,
        limit: int | None,
        version: str | None = None,
        tag: tuple[str, str] | None = None,
    ) -> list[RunInfo]:
        """An operator's scan: O(keys), not for hot paths; with ``tag``, the tag index."""
        if tag is not None:
            return await self._tagged_runs(tag, status, limit, version)
        run_ids = []
        pattern = f"{_keys.PREFIX}:{{p:*}}:{_keys.TEMPLATES['run'].format(run_id='*')}"
        async for key in self.client.scan_iter(match=pattern, count=1000):
            run_id = key.decode().rsplit(":run:", 1)[1]
            if RUN_ID_RE.fullmatch(run_id):
                run_ids.append(run_id)
        infos = []
        for i in range(0, len(run_ids), 500):
            chunk = run_ids[i : i + 500]
            async with self.client.pipeline(transaction=False) as pipe:
                for run_id in chunk:
                    pipe.hgetall(self._run(run_id).run)
                replies = await pipe.execute()
            for run_id, run in zip(chunk, replies, strict=True):
                if run:
                    info = _decode.run_info(run_id, run, {})
                    if (status is None or info.status is status) and (
                        version is None or info.version == version
                    ):
                        infos.append(info)
        infos.sort(key=lambda r: r.created_at or 0, reverse=True)
        return infos if limit is None else infos[:limit]

    async def _tagged_runs(
        self,
        tag: tuple[str, str],
        status: RunStatus | None,
        limit: int | None,
        version: str | None,
    ) -> list[RunInfo]:
        """Runs tagged ``tag``, newest first, from the partitions' tag index (lua/tags.lua):
        the newest ``limit`` of each partition (one command per partition, one round
        trip), then the hashes of the newest ``limit`` of those (one command per run).
        O(partitions + limit) commands whatever the store holds; a filter (status,
        version) that leaves fewer than ``limit`` doubles the window."""
        keys = [
            _keys.key("tag", p, tag=f"{tag[0]}{_keys.TAG_SEP}{tag[1]}")
            for p in range(self.partitions)
        ]
        window = limit
        while True:
            async with self.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.zrevrange(key, 0, -1 if window is None else window - 1, withscores=True)
                replies = await pipe.execute()
            ranked = sorted(
                ((score, member.decode()) for reply in replies for member, score in reply),
                reverse=True,
            )
            chosen = [run_id for _, run_id in (ranked if window is None else ranked[:window])]
            async with self.client.pipeline(transaction=False) as pipe:
                for run_id in chosen:
                    pipe.hgetall(self._run(run_id).run)
                runs = await pipe.execute()
            infos = []
            for run_id, run in zip(chosen, runs, strict=True):
                if not run:  # its keys expired, not yet pruned from the index
                    continue
                info = _decode.run_info(run_id, run, {})
                if (status is None or info.status is status) and (
                    version is None or info.version == version
                ):
                    infos.append(info)
            more = window is not None and (
                len(ranked) > window or any(len(reply) >= window for reply in replies)
            )
            if window is None or len(infos) >= window or not more:
                return infos if limit is None else infos[:limit]
            window *= 2

    @store_call
    async def stats(self) -> dict[str, int]:
        async with self.client.pipeline(transaction=False) as pipe:
            for partition in range(self.partitions):
                pipe.hgetall(_keys.key("stats", partition))
                pipe.scard(_keys.key("pending", partition))
            replies = await pipe.execute()
        totals = dict.fromkeys(
            (
                "started",
                "completed",
                "failed",
                "cancelled",
                "suspended",
                "blocked",
                "parked",
                "hooks_pending",
            ),
            0,
        )
        for i in range(0, len(replies), 2):
            for field, value in replies[i].items():
                if field.decode() in totals:
                    totals[field.decode()] += int(value)
            totals["hooks_pending"] += int(replies[i + 1])
        return totals
