"""Logging set-up: text or JSON lines (``PARLEY_LOG_FORMAT=json``), each carrying the run
id and hook id it concerns when there is one (pass them as ``extra={"run_id": ...}``)."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

_CONTEXT_FIELDS = ("run_id", "hook_id", "step_id", "worker")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for name in _CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s pid=%(process)d %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = " ".join(
            f"{name}={getattr(record, name)}"
            for name in _CONTEXT_FIELDS
            if getattr(record, name, None) is not None
        )
        return f"{line} [{context}]" if context else line


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Configure the root logger for a Parley process (stderr); ``fmt`` is text or json."""
    fmt = fmt.lower()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
