"""The standing rules, enforced in CI: ruff clean and formatted, mypy --strict clean, widget
modules of a readable size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_clean() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_is_clean() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


WIDGET_MODULE_MAX_LINES = 400


def test_every_widget_module_stays_small() -> None:
    """The widget is split by concept (chat.js keeps the conversation; display.js,
    frames.js and sending.js what is shown, received and sent): no module grows past
    ~400 lines."""
    modules = sorted((ROOT / "widget").glob("*.js"))
    assert modules
    sizes = {p.name: len(p.read_text().splitlines()) for p in modules}
    assert {name: n for name, n in sizes.items() if n > WIDGET_MODULE_MAX_LINES} == {}
