"""Real worker and `parley` CLI processes for crash, zombie, scale and CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from runtime import testing

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4


class WorkerProcess(testing.WorkerProcess):
    """A test worker: the test Redis in ``PARLEY_TEST_REDIS`` (the apps count side effects
    there), a short lease, and optionally a crash point (``runtime._faults``)."""

    def __init__(
        self,
        redis_url: str,
        app: str,
        *,
        crash_at: str | None = None,
        lease: float = 1.0,
        concurrency: int = 16,
        extra_env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        env = {**os.environ, "PARLEY_TEST_REDIS": redis_url, **(extra_env or {})}
        env.pop("PARLEY_CRASH_AT", None)
        if crash_at:
            env["PARLEY_CRASH_AT"] = crash_at
        super().__init__(
            redis_url,
            app,
            partitions=PARTITIONS,
            lease=lease,
            concurrency=concurrency,
            env=env,
            extra_args=extra_args,
            cwd=ROOT,
        )


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll a cheap condition until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on loopback TCP ``port``.

    A 200 from the port is not enough to say a freshly started server is up: while a test
    had its server stopped, another test's free port may have been this one, and that
    stranger answers. The kernel says whose socket it is (Linux: /proc)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue  # closed meanwhile
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except FileNotFoundError:
        return False  # the process has exited
    listening = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == listening and int(local.rsplit(":", 1)[1], 16) == port and inode in inodes:
                return True
    return False


def parley_with(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The command with ``env`` over an environment without any ``PARLEY_*`` variable."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    full.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=ROOT,
        env={**full, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


BROKEN_APP = "parley_test_broken_app"  # written by unimportable_apps, on PYTHONPATH


def unimportable_apps(directory: Path) -> dict[str, tuple[str, ...]]:
    """``--app`` values that do not import, each with what its error must say. One is a
    module (written into ``directory``) that is found but whose own import fails: the
    error says so, with the original error and where it was raised."""
    (directory / f"{BROKEN_APP}.py").write_text("import parley_no_such_dependency\n")
    return {
        "no_such_module": (
            "--app: expected a module this process can import, got 'no_such_module': "
            "ModuleNotFoundError: No module named 'no_such_module'",
        ),
        "tests.apps.no_such_app": (
            "got 'tests.apps.no_such_app': ModuleNotFoundError: No module named "
            "'tests.apps.no_such_app'",
        ),
        "tests.apps.hitl_app:hitl": (
            "--app: expected a module's import path (package.module, not module:attr or a "
            "file), got 'tests.apps.hitl_app:hitl'",
        ),
        BROKEN_APP: (
            f"--app {BROKEN_APP!r}: the module was found, but importing it failed at "
            f"{directory / BROKEN_APP}.py, line 1: ModuleNotFoundError: No module named "
            "'parley_no_such_dependency'",
        ),
    }


def check_unimportable_apps_refused(
    directory: Path, prefix: str, *command: str, env: dict[str, str] | None = None
) -> None:
    """``command`` with each ``--app`` of :func:`unimportable_apps`: one line starting with
    ``prefix`` that says what was given and why it failed, and exit status 2."""
    for app, said in unimportable_apps(directory).items():
        out = parley_with({"PYTHONPATH": str(directory), **(env or {})}, *command, "--app", app)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-600:]
        assert out.stderr.startswith(prefix) and out.stderr.count("\n") == 1, out.stderr
        for part in said:
            assert part in out.stderr, out.stderr


def without_module(directory: Path, missing: str) -> dict[str, str]:
    """The environment of a process in which ``missing`` (and its submodules) cannot be
    imported, as if not installed: a ``sitecustomize`` written into ``directory``, on its
    PYTHONPATH, refuses it before any finder looks."""
    (directory / "sitecustomize.py").write_text(
        "import importlib.abc, sys\n"
        "\n"
        "class NotInstalled(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {missing!r} or name.startswith({missing + '.'!r}):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
    )
    return {"PYTHONPATH": str(directory)}
