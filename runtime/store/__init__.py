"""The store boundary: the :class:`Store` protocol, its typed requests and results, the
:class:`Writes` an execution applies, and :func:`open_store`, which picks the backend from
a URL. Everything above this package talks to the store through these names only."""

from __future__ import annotations

from .base import Store
from .records import (
    Answer,
    Applied,
    ApplyOutcome,
    Cancelled,
    CancelOutcome,
    Claim,
    ClaimStatus,
    DueReport,
    Finish,
    KnownLog,
    Notice,
    OutboxEntry,
    OutboxRead,
    Resumed,
    ResumeOutcome,
    Retried,
    RetryOutcome,
    RunSnapshot,
    SendOutcome,
    Sent,
    Task,
)
from .writes import HookSpec, Writes

__all__ = [
    "Answer",
    "Applied",
    "ApplyOutcome",
    "CancelOutcome",
    "Cancelled",
    "Claim",
    "ClaimStatus",
    "DueReport",
    "Finish",
    "HookSpec",
    "KnownLog",
    "Notice",
    "OutboxEntry",
    "OutboxRead",
    "ResumeOutcome",
    "Resumed",
    "Retried",
    "RetryOutcome",
    "RunSnapshot",
    "SendOutcome",
    "Sent",
    "Store",
    "Task",
    "Writes",
    "open_store",
]

SCHEMES = (
    "redis://",
    "rediss://",
    "unix://",
    "redis+cluster://",
    "redis+sentinel://",
    "memory://",
)


def open_store(url: str, *, partitions: int) -> Store:
    """The store for ``url`` (not connected yet: ``await store.open()``).

    Every scheme is served by :class:`~runtime.store.redis.RedisStore`; ``memory://`` is
    the embedded store (fakeredis in this process). A new backend adds its scheme here.
    """
    from ..errors import UsageError

    if url.startswith(SCHEMES):
        from .redis import RedisStore

        return RedisStore(url, partitions)
    raise UsageError(
        f"expected a store URL 'redis://host:port[/db]', 'rediss://...', 'unix://...', "
        f"'redis+cluster://host:port,...', 'redis+sentinel://host:port,.../service[/db]' "
        f"or 'memory://[name]', got {url!r}"
    )
