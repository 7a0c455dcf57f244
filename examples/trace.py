"""How many times the demos' agents did something (model calls per turn, prompts handed
out), so tests can check that a crash re-ran nothing it should not have.

Off unless ``PARLEY_DEMO_TRACE`` names a file: each count is one JSON line appended to it
(``O_APPEND`` of one short line: whole lines, also from several processes).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import orjson

ENV = "PARLEY_DEMO_TRACE"


def count(run_id: str, field: str) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = orjson.dumps({"run_id": run_id, "field": field}) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def counts(path: str | Path, run_id: str) -> dict[str, int]:
    """The counts of one run recorded in the trace file ``path``."""
    try:
        lines = Path(path).read_bytes().splitlines()
    except FileNotFoundError:
        return {}
    found: Counter[str] = Counter()
    for line in lines:
        entry = orjson.loads(line)
        if entry["run_id"] == run_id:
            found[entry["field"]] += 1
    return dict(found)
