"""The direction of dependencies (import-linter contracts in pyproject.toml), checked in
CI: no cycles, no upward imports, Redis only in the store."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"], cwd=root, env=env, capture_output=True, text=True
    )


def test_the_import_contracts_hold() -> None:
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # an upward import: the store would depend on the worker
        ("runtime/store/base.py", "from ..worker import Worker", "runtime is layered"),
        # a cycle between siblings: the engine's replay index would import the execution
        ("runtime/engine/replay.py", "from . import execution", "no import cycles"),
        # the engine reaching for the server
        ("runtime/engine/waits.py", "import server.app", "never imports the server"),
        # the server reaching into the engine
        ("server/sessions.py", "from runtime.engine import waits", "public API"),
        # Redis outside the store
        ("runtime/client.py", "import redis", "only the Redis store"),
    ],
)
def test_a_contract_breaks_when_its_rule_is_broken(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    for name in ("runtime", "server", "examples"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / module
    text = path.read_text()
    anchor = "from __future__ import annotations\n"
    path.write_text(text.replace(anchor, anchor + line + "  # noqa\n", 1))
    out = lint_imports(tmp_path)
    assert out.returncode != 0
    assert re.search(re.escape(broken) + r".*BROKEN", out.stdout), out.stdout


def test_only_the_store_and_the_test_helpers_import_redis() -> None:
    found = subprocess.run(
        ["grep", "-rln", r"import redis\|from redis", "runtime", "server", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    allowed = {"runtime/testing.py"}
    assert {f for f in found if not f.startswith("runtime/store/redis/")} <= allowed, found
