"""The master of a ``redis+sentinel://`` URL, as the sentinels that know most recently
name it.

redis-py asks the sentinels in turn and takes the first answer naming a master that is not
down. Right after a failover, a sentinel that has not yet learned of the promotion still
names the old master; once its supervisor restarted that server (on its files, or empty),
it answers as a master of its own, and a new connection made there reads what it held when
it was killed, or nothing: a run "not found", a workflow "unknown". Every sentinel reports
the configuration epoch of the address it names, and an epoch grows only with a failover a
majority of sentinels authorised; so of the answers, the one with the highest epoch names
the current master (at an equal epoch, one from a sentinel not still leading that
failover: see ``_named``). All sentinels are asked at once, and once one has named a live
master the others have ``ANSWER_WINDOW_SECONDS`` more: a sentinel that hangs costs a new
connection that long, not its socket timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.exceptions import RedisError

# How long the sentinels' answers are awaited once one names a live master: a sentinel that
# hangs (its host paused, a network partition) must not hold every new connection for the
# socket timeout, and one that lags by more than this is as stale as one that answered.
ANSWER_WINDOW_SECONDS = 0.5


class NewestMasterSentinel(Sentinel):
    """A :class:`Sentinel` whose master is the one named with the highest configuration
    epoch among the sentinels that answer."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        asked = {
            asyncio.ensure_future(sentinel.sentinel_masters()): sentinel
            for sentinel in self.sentinels
        }
        newest: tuple[int, bool, str, int] | None = None
        errors: list[str] = []
        pending = set(asked)
        loop = asyncio.get_running_loop()
        deadline: float | None = None  # set once an answer names a live master
        try:
            while pending:
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                done, pending = await asyncio.wait(
                    pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:  # the window passed: the others are late
                    break
                for answered in done:
                    named = self._named(answered, asked[answered], service_name, errors)
                    if named is not None and (newest is None or named[:2] > newest[:2]):
                        newest = named
                if newest is not None and deadline is None:
                    deadline = loop.time() + ANSWER_WINDOW_SECONDS
        finally:
            for late in pending:
                late.cancel()
        if newest is None:
            detail = f": {', '.join(errors)}" if errors else ""
            raise MasterNotFoundError(f"No master found for {service_name!r}{detail}")
        _epoch, _settled, ip, port = newest
        return (self._force_master_ip or ip), port

    def _named(
        self, answered: asyncio.Future[Any], sentinel: Any, service_name: str, errors: list[str]
    ) -> tuple[int, bool, str, int] | None:
        """(epoch, settled, ip, port) of the live master a sentinel's answer names, if it
        names one; answers rank by the first two."""
        try:
            masters = answered.result()
        except RedisError as exc:
            # (any error: one sentinel's, say a plain Redis on its port or an ACL refusing
            # SENTINEL, must not hide what the others name)
            errors.append(f"{sentinel} - {exc!r}")
            return None
        state = cast(dict[str, Any], masters).get(service_name)
        if not state or not self.check_master_state(state, service_name):
            return None
        flags = state.get("flags", ())
        if isinstance(flags, str):
            flags = flags.split(",")
        # The sentinel leading a failover takes the new epoch when the replica it promoted
        # answers as a master, and names the old address until every replica has been
        # reconfigured: at the same epoch, a sentinel that is done names the new master.
        settled = "failover_in_progress" not in flags
        return int(state.get("config-epoch", 0)), settled, str(state["ip"]), int(state["port"])
