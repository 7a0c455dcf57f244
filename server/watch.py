"""What the console watches live: the pending hooks (for the approvals inbox) and the
store-wide counters over the last hour (for its chart).

One :class:`HookWatcher` per server process reads the store's pending hooks every
``interval`` seconds *while someone listens*, and hands every listener the new list when
it changed — so N open consoles cost the store one read per interval, and none when no
console is open. :class:`StatsHistory` samples ``Runtime.stats()`` once per ``every``
seconds, keeping the last hour.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import Any

from runtime import HookInfo, RunNotFound, Runtime, StoreUnavailable

from ._tasks import cancel_and_wait

log = logging.getLogger("parley.server.watch")


class HookWatcher:
    def __init__(self, runtime: Runtime, *, interval: float = 0.25) -> None:
        self.runtime = runtime
        self.interval = interval
        self._listeners: set[asyncio.Queue[list[dict[str, Any]]]] = set()
        self._task: asyncio.Task[None] | None = None
        self._last: list[dict[str, Any]] | None = None
        self._created: dict[str, float | None] = {}

    def listeners(self) -> int:
        return len(self._listeners)

    def subscribe(self) -> asyncio.Queue[list[dict[str, Any]]]:
        """A queue that gets the current pending hooks at once, then every change."""
        queue: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue(maxsize=1)
        self._listeners.add(queue)
        if self._last is not None:
            queue.put_nowait(self._last)
        if self._task is None or self._task.done():
            self._last = None
            self._task = asyncio.create_task(self._poll(), name="parley-hook-watcher")
        return queue

    def unsubscribe(self, queue: asyncio.Queue[list[dict[str, Any]]]) -> None:
        self._listeners.discard(queue)

    async def _created_at(self, hook: HookInfo) -> float | None:
        """When the hook was created (its ``hook.created`` event), read once per hook."""
        if hook.token not in self._created:
            created = None
            for event in await self.runtime.events(hook.run_id):
                if event.type == "hook.created" and event.data.get("hook_id") == hook.hook_id:
                    created = event.timestamp_ms / 1000
            self._created[hook.token] = created
        return self._created[hook.token]

    async def _poll(self) -> None:
        while self._listeners:
            try:
                pending = await self.runtime.list_hooks("pending")
                hooks = [{**h.to_json(), "created_at": await self._created_at(h)} for h in pending]
                live = {h.token for h in pending}
                for token in [t for t in self._created if t not in live]:
                    del self._created[token]
            except (StoreUnavailable, RunNotFound) as exc:  # down; a run expired meanwhile
                log.warning("hook watcher: %s", exc)
                await asyncio.sleep(1.0)
                continue
            if hooks != self._last:
                self._last = hooks
                for queue in list(self._listeners):
                    # A listener behind gets the latest list, not every list in between.
                    with contextlib.suppress(asyncio.QueueEmpty):
                        queue.get_nowait()
                    queue.put_nowait(hooks)
            await asyncio.sleep(self.interval)
        self._last = None

    async def close(self) -> None:
        self._listeners.clear()
        if self._task is not None:
            await cancel_and_wait([self._task])


class StatsHistory:
    """``Runtime.stats()`` every ``every`` seconds, for the last ``keep`` seconds."""

    def __init__(self, runtime: Runtime, *, every: float = 30.0, keep: float = 3600.0) -> None:
        self.runtime = runtime
        self.every = every
        self.samples: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=max(2, int(keep / every) + 1)
        )
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="parley-stats-history")

    async def sample(self) -> dict[str, Any]:
        sample: dict[str, Any] = {"t": time.time(), **await self.runtime.stats()}
        self.samples.append(sample)
        return sample

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
            except StoreUnavailable as exc:
                log.warning("stats history: %s", exc)
            await asyncio.sleep(self.every)

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
