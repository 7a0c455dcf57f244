"""The worker: consumer and admission, deadlines, leases and reclaim."""

from __future__ import annotations

from .worker import Worker

__all__ = ["Worker"]
