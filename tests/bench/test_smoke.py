"""A small run of the benchmark, so it cannot rot: every run completes exactly once and
every figure is printed. Speed is not asserted (the machine is shared)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]


def _bench(*args: str) -> tuple[dict[str, Any], str]:
    """Run the README's command (it starts its own redis-server) and parse its JSON line."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.hitl", *args],
        cwd=ROOT,
        capture_output=True,
        timeout=90,
        check=False,
    )
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"{out}\n{proc.stderr.decode()}"
    return orjson.loads(out.strip().splitlines()[-1]), out


def test_hitl_lifecycles_complete_once() -> None:
    result, table = _bench(
        "--runs", "50", "--workers", "1", "--warmup", "10", "--probe", "5",
        "--idle-window", "0.2",
    )  # fmt: skip
    assert result["completed_once"] == 50, result["problems"]
    assert result["problems"] == []
    for figure in (
        "start_rate",
        "resume_rate",
        "lifecycles_per_s",
        "top_level_commands_per_lifecycle",
        "round_trips_per_lifecycle",
        "redis_bytes_per_suspended_run",
        "worker_rss_kb_suspended",
        "worker_tasks_suspended",
    ):
        assert figure in result, figure
    for key in ("p50", "p95", "p99"):
        assert result["resume_latency_light_ms"][key] > 0
        assert result["resume_latency_under_load_ms"][key] >= 0
    # A suspended run holds no task in the worker.
    assert result["worker_tasks_suspended"] == result["worker_tasks_idle"]
    assert "lifecycles/s end to end" in table


def test_deadlines_fire_once_and_never_early() -> None:
    result, table = _bench("--mode", "deadline", "--runs", "50", "--workers", "1")
    assert result["expired_once"] == 50, result["problems"]
    assert result["early"] == 0
    assert result["lateness_ms"]["n"] == 50
    assert "deadline tick" in table
