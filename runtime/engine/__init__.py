"""The engine: one execution of a run (replay, buffered writes, suspension and the end of
the run), steps, and the mechanics of durable waits. It depends on the store protocol
only; the workflow API (``runtime.workflow``) and the worker sit above it."""

from __future__ import annotations
