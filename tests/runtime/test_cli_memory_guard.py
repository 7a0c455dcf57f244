"""Operations commands and workers refuse the embedded memory:// store unless told
``--allow-memory``: in a process of its own it is always empty, so ``parley runs list``
would print "(none)" and a worker would wait for ever, both looking fine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.processes import ROOT


def parley(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "list"),
        ("runs", "show", "r1"),
        ("hooks", "list", "--redis", "memory://"),
        ("hooks", "resume", "a:b", "--payload", "1", "--redis", "memory://x"),
        ("worker", "--app", "examples.support_agent"),
    ],
)
def test_refused_without_the_flag(args: tuple[str, ...]) -> None:
    out = parley(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "refusing the embedded memory:// store" in out.stderr
    assert "--redis redis://host:port" in out.stderr and "--allow-memory" in out.stderr
    assert out.stdout == ""  # nothing ran, nothing listed


def test_allowed_with_the_flag() -> None:
    out = parley("runs", "list", "--allow-memory")
    assert out.returncode == 0, out.stderr
    assert "(none)" in out.stdout
