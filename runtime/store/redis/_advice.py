"""The Redis settings Parley recommends, checked against the server's: what a worker tells
the operator once at startup (a log warning and a metric, ``runtime.worker``)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from ._connect import SENTINEL_SCHEME
from ._part import StorePart

# (setting, the value recommended, why); _applies says when the server's other settings
# make it matter
RECOMMENDED: tuple[tuple[str, str, str], ...] = (
    (
        "maxmemory-policy",
        "noeviction",
        "with a maxmemory limit, any other policy lets Redis delete keys to make room: a "
        "run, its log or its pending hooks would vanish without a trace; with noeviction "
        "writes fail instead (StoreUnavailable), and nothing is lost",
    ),
    (
        "appendonly",
        "yes",
        "a Sentinel master that keeps its data only in memory comes back empty if it is "
        "restarted before its failover is over, and a sentinel that has not yet learned of "
        "the promotion can make the promoted replica resync from it: acknowledged writes "
        "are lost whatever ?wait said (README, Deployment). Turn AOF on, or let nothing "
        "restart a failed master before every sentinel names the new one",
    ),
)


def _applies(setting: str, config: dict[str, str], *, sentinel: bool) -> bool:
    if setting == "maxmemory-policy":  # without a limit nothing is ever evicted
        return config.get("maxmemory", "0") != "0"
    if setting == "appendonly":  # a lone server restarted empty loses its data either way
        return sentinel
    return True


class AdviceStore(StorePart):
    """The settings check of :class:`~runtime.store.redis.RedisStore`."""

    url: str

    async def settings_advice(self) -> list[tuple[str, str, str, str]]:
        """``(setting, its value, the value recommended, why)`` for each recommended Redis
        setting not in effect; [] when all are, or when they cannot be read (a managed
        Redis may refuse CONFIG: nothing is known, so nothing is said)."""
        if self.url.startswith("memory://"):
            return []
        config: dict[str, str] = {}
        try:
            for pattern in ("maxmemory", *(s for s, _, _ in RECOMMENDED)):
                reply: Any = await self.client.config_get(pattern)
                if reply and isinstance(next(iter(reply.values())), dict):  # a cluster's nodes
                    reply = next(iter(reply.values()))
                config.update({_text(k): _text(v) for k, v in reply.items()})
        except (RedisError, OSError):
            return []
        return [
            (setting, config[setting], wanted, why)
            for setting, wanted, why in RECOMMENDED
            if setting in config
            and config[setting] != wanted
            and _applies(setting, config, sentinel=self.url.startswith(SENTINEL_SCHEME))
        ]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
