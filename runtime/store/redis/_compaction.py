"""Compacting ended runs: their log and hooks become one archive (``._archive``), swapped
in by ``lua/compact.lua``, fenced; readers take a run's log and hooks from whichever of
the two forms it has (:func:`read_log`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from redis.exceptions import RedisError

from ...errors import ParleyError
from ...models import Event
from . import _archive, _decode, _keys
from ._part import StorePart

log = logging.getLogger("parley.store")


def archive_key(keys: _keys.RunKeys) -> str:
    return _keys.key("archive", keys.partition, run_id=keys.run_id)


class CompactionStore(StorePart):
    """The compaction part of :class:`~runtime.store.redis.RedisStore`."""

    async def _compact_ended(self, run_id: str, entries: list[Any], hooks: list[bytes]) -> bool:
        """Compact run ``run_id``, just ended, from the log and hooks its ending script
        returned (``entries``: XRANGE's reply in a script; ``hooks``: HGETALL's, flat).
        Best effort: the run has ended whatever happens here, and a run left uncompacted
        (this failed, or the worker died first) is read the same way, only bigger."""
        if not entries:
            return False
        keys = self._run(run_id)
        blob = _archive.pack(entries, hooks)
        try:
            done = await self.scripts.compact(
                keys=[*keys.all, archive_key(keys)],
                args=[entries[-1][0], len(entries), len(hooks) // 2, blob],
            )
        except (ParleyError, RedisError, OSError) as exc:
            log.info("run %s ended but was not compacted (%s): it stays readable", run_id, exc)
            return False
        return bool(done)

    async def compact(self, run_ids: Sequence[str]) -> int:
        """Compact these ended runs (reading each one's log and hooks first); runs not
        ended, already compacted, or changed meanwhile are left as they are. Returns how
        many were compacted."""
        compacted = 0
        for run_id in run_ids:
            keys = self._run(run_id)
            # not one atomic read: the swap's fence finds out if they changed in between
            try:
                async with self.client.pipeline(transaction=False) as pipe:
                    pipe.xrange(keys.events)
                    pipe.hgetall(keys.hooks)
                    stream, hash_ = await pipe.execute()
            except (RedisError, OSError) as exc:
                log.info("run %s was not compacted (%s): it stays readable", run_id, exc)
                continue
            # in the form an ending script returns them
            entries = [(i, [b"t", f[b"t"], b"d", f[b"d"]]) for i, f in stream]
            hooks = [part for item in hash_.items() for part in item]
            if await self._compact_ended(run_id, entries, hooks):
                compacted += 1
        return compacted

    async def read_log(
        self, run_id: str, *, with_events: bool = True
    ) -> tuple[bool, list[Event], dict[bytes, bytes]]:
        """Whether run ``run_id``'s hash exists, its log (unless ``with_events`` is false)
        and its hooks hash, from the stream and the hash or from its archive."""
        keys = self._run(run_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.exists(keys.run)
            if with_events:
                pipe.xrange(keys.events)
            pipe.hgetall(keys.hooks)
            pipe.get(archive_key(keys))
            replies = await pipe.execute()
        exists, blob = bool(replies[0]), replies[-1]
        if blob is not None:
            events, hooks = _archive.unpack(blob)
            return exists, events if with_events else [], hooks
        events = _decode.events(replies[1]) if with_events else []
        return exists, events, replies[-2]
