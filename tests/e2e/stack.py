"""A real Parley stack for end-to-end tests: ``parley server`` and ``parley worker``
processes on real Redis, on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.processes import PARTITIONS, ROOT, WorkerProcess, listens_on

API_KEY = "e2e-key-7f3a9c"
APP = "examples.support_agent"
SECOND_APP = "examples.langchain_agent"  # the /langchain demo (the dev extras install it)
TEST_APP = "tests.apps.widget_app"  # chat workflows of the widget's tests
CHAT_WORKFLOWS = ",".join(
    [
        "langchain_agent",
        "widget_kinds",
        "widget_markup",
        "widget_links",
        "widget_first",
        "widget_continued",
        "widget_first_child",
    ]
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Stack:
    def __init__(
        self, redis_url: str, env: dict[str, str] | None = None, apps: tuple[str, ...] = ()
    ) -> None:
        self.redis_url = redis_url
        self.apps = [arg for app in apps for arg in ("--app", app)]  # besides the usual ones
        self.env = {"PARLEY_DEMO_CHUNK_DELAY": "0.01", **(env or {})}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="parley-server-", suffix=".log"
        )
        self.workers: list[WorkerProcess] = []
        self.http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=10
        )
        self.start_server()
        self.start_worker()

    def start_server(self) -> None:
        self.server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runtime.cli",
                "server",
                "--app",
                APP,
                "--app",
                SECOND_APP,
                "--app",
                TEST_APP,
                *self.apps,
                "--redis",
                self.redis_url,
                "--partitions",
                str(PARTITIONS),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "WARNING",
            ],
            cwd=ROOT,
            env={
                **os.environ,
                **self.env,
                "PARLEY_TEST_REDIS": self.redis_url,  # the test apps count side effects there
                "PARLEY_API_KEY": API_KEY,
                "PARLEY_CHAT_WORKFLOW": "support_agent",
                "PARLEY_CHAT_WORKFLOWS": CHAT_WORKFLOWS,
            },
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
        )
        self._wait_healthy(timeout=20)

    def stop_server(self) -> None:
        if self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait(timeout=10)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                break
            try:
                # (the 200 could be another test's server that took the port while this
                # one was stopped: it counts only from the process this stack started)
                if self.http.get("/healthz").status_code == 200 and listens_on(
                    self.server.pid, self.port
                ):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server did not become healthy; log:\n{self.log()}")

    def start_worker(self, **env: str) -> WorkerProcess:
        worker = WorkerProcess(
            self.redis_url,
            APP,
            lease=2.0,
            extra_env={**self.env, **env},
            extra_args=("--app", SECOND_APP, "--app", TEST_APP, *self.apps),
        )
        self.workers.append(worker)
        return worker

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace")

    def pending_hooks(self) -> list[dict[str, Any]]:
        hooks: list[dict[str, Any]] = self.http.get("/api/hooks").json()["hooks"]
        return hooks

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.stop_server()
        self.http.close()
        self.log_file.close()
