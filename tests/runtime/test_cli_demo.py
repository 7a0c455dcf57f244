"""``parley demo`` started as a real process: its private redis-server's data directory."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import ROOT


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_the_demo_starts_with_a_relative_data_dir(tmp_path: Path) -> None:
    """redis-server changes into its --dir before it opens --logfile: a relative data
    directory is made absolute first, or the server cannot open its log and exits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.pop("REDIS_URL", None)
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "demo.log"
    command = [sys.executable, "-m", "runtime.cli", "demo", "--data-dir", "demo-data"]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*command, "--port", str(_free_port())],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 40
        while "parley demo on http://" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-600:]
            assert time.monotonic() < deadline, log.read_text()[-600:]
            time.sleep(0.2)
        assert f"kept in {tmp_path / 'demo-data'}" in log.read_text()
        assert (tmp_path / "demo-data" / "redis.log").exists()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
