"""Prometheus metrics and structured logs of a real worker process."""

from __future__ import annotations

import json
import urllib.request

import pytest

from runtime import Runtime
from tests.processes import PARTITIONS, WorkerProcess, wait_until
from tests.redis_servers import free_port

pytestmark = pytest.mark.e2e


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def _value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in metrics:\n{text}")


async def test_worker_metrics_and_json_logs(redis_url: str) -> None:
    port = free_port()
    worker = WorkerProcess(
        redis_url,
        "tests.apps.hitl_app",
        extra_env={"PARLEY_LOG_FORMAT": "json"},
        extra_args=("--metrics-port", str(port)),
    )
    try:
        async with Runtime(redis_url, partitions=PARTITIONS) as rt:
            runs = [await rt.start("echo") for _ in range(3)]
            timed_out = await rt.start("hitl", timeout=0.05)
            failed = await rt.start("boom")
            assert await rt.wait(timed_out, timeout=10) == "timed out"
            wait_until(lambda: "boom" in worker.log(), 10, "the failure log")
            wait_until_hooks = [h for h in await rt.list_hooks() if h.run_id in runs[:2]]
            assert len(wait_until_hooks) == 2
            for hook in wait_until_hooks:
                await rt.resume_hook(hook.token, "ok")
            for run_id in runs[:2]:
                await rt.wait(run_id, timeout=10)

            def scraped_all() -> bool:
                text = _scrape(port)
                return 'parley_executions_total{outcome="completed"} 3.0' in text

            wait_until(scraped_all, 10, "executions to be counted")
            text = _scrape(port)
            assert _value(text, 'parley_executions_total{outcome="failed"}') == 1
            assert _value(text, "parley_resume_latency_seconds_count") >= 3
            assert _value(text, "parley_deadline_lateness_seconds_count") == 1
            assert _value(text, 'parley_runs_total{event="started"}') == 5
            assert _value(text, "parley_runs_suspended") == 1
            assert _value(text, "parley_hooks_pending") == 1
            assert failed
        lines = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
        failure = next(line for line in lines if "boom" in line["message"])
        assert failure["run_id"] == failed and failure["level"] == "info"
        assert {"ts", "logger", "pid"} <= set(failure)
    finally:
        worker.stop()
