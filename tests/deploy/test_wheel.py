"""The wheel is a complete installation: built from a copy of the sources, installed into
a fresh virtual environment (dependencies from the package index), ``parley demo`` and
``parley server`` from that environment serve the widget and the demo pages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runtime.testing import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = ("pyproject.toml", "README.md", "runtime", "server", "examples", "widget")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the wheel, the fresh environment's bin directory)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, src / name)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--wheel-dir",
            str(tmp / "dist"),
            str(src),
        ]
    )
    [wheel] = (tmp / "dist").glob("parley-*.whl")
    run([sys.executable, "-m", "venv", str(tmp / "venv")])
    bin_dir = tmp / "venv" / "bin"
    run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)])
    yield wheel, bin_dir


def run(command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def test_the_wheel_carries_the_widget_the_demo_pages_and_the_lua_scripts(
    installed: tuple[Path, Path],
) -> None:
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (
        "widget/parley-widget.js",
        "widget/chat.js",
        "widget/parley-widget.css",
        "widget/demo.html",
        "widget/demo-langchain.html",
        "widget/vendor/marked.esm.js",
        "widget/vendor/marked.LICENSE",
        "widget/vendor/purify.es.mjs",
        "widget/vendor/dompurify.LICENSE",
        "widget/console/index.html",
        "widget/console/console.js",
        "widget/answer-page.js",
        "runtime/store/redis/lua/apply.lua",
        "runtime/store/redis/lua/retry.lua",
    ):
        assert name in names, name


def serve(
    bin_dir: Path, args: list[str], env: dict[str, str], cwd: Path
) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL")}
    proc = subprocess.Popen(
        [str(bin_dir / "parley"), *args, "--port", str(port)],
        cwd=cwd,  # not the source tree: only the installed package can be imported
        env={**clean, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(base + "/healthz").status_code == 200:
                return base, proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"parley {args[0]} did not start:\n{output}")
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["demo", "--volatile"], {}),
        (
            ["server", "--app", "examples.support_agent", "--redis", "memory://"],
            {"PARLEY_API_KEY": "k-0123456789abc", "PARLEY_CHAT_WORKFLOW": "support_agent"},
        ),
    ],
    ids=["demo", "server"],
)
def test_the_installed_commands_serve_the_widget_and_the_demo_page(
    installed: tuple[Path, Path], tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    _, bin_dir = installed
    base, proc = serve(bin_dir, args, env, tmp_path)
    try:
        script = httpx.get(base + "/widget/parley-widget.js")
        assert script.status_code == 200 and "export function mount" in script.text
        assert "javascript" in script.headers["content-type"]
        for path in (
            "/widget/chat.js",
            "/widget/vendor/marked.esm.js",
            "/widget/parley-widget.css",
        ):
            assert httpx.get(base + path).status_code == 200, path
        page = httpx.get(base + "/")
        assert page.status_code == 200 and "parley-widget.js" in page.text
        assert httpx.get(base + "/langchain").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    output = proc.stdout.read().decode() if proc.stdout else ""
    assert "Traceback" not in output, output
