"""Run the mutants of :mod:`tests.mutants.catalog`: ``python -m tests.mutants.run [names...]``.

For each mutant: copy the repository's files (tracked, and untracked but not ignored) to a
temporary directory, apply the mutant there, start a private redis-server, and run its
tests in the copy (cwd and ``PYTHONPATH`` = the copy, so the test process and every
``parley worker`` subprocess it starts import the mutated code). A mutant is *caught* when
pytest reports failed tests (exit code 1). One line per mutant; the exit status is
non-zero if any mutant survived, is stale, or could not be run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from runtime.testing import RedisServer
from tests.mutants.catalog import MUTANTS, Mutant, by_name

ROOT = Path(__file__).resolve().parents[2]
# pytest's exit code when tests ran and some failed; anything else (usage error, no test
# collected, interrupted, internal error) means the mutant was not tested.
TESTS_FAILED = 1
# Checked in the copy before the tests run: the mutated module is what Python imports.
_PREFLIGHT = """
import importlib, pathlib, sys
import tests.processes
root = pathlib.Path.cwd().resolve()
module = importlib.import_module(sys.argv[1])
where = pathlib.Path(module.__file__).resolve()
assert where.is_relative_to(root), f"{sys.argv[1]} imported from {where}, not {root}"
assert tests.processes.ROOT.resolve() == root, tests.processes.ROOT
assert sys.argv[2] in where.read_text(), f"the mutation is not in {where}"
"""


class StaleMutant(Exception):
    """The mutant's snippet does not occur exactly once: it would test nothing."""


@dataclass(frozen=True, slots=True)
class Result:
    mutant: Mutant
    outcome: str  # caught | SURVIVED | STALE | ERROR
    seconds: float
    output: str

    @property
    def caught(self) -> bool:
        return self.outcome == "caught"

    def line(self) -> str:
        return f"{self.mutant.name:<34} {self.outcome:<9} {self.seconds:6.1f} s"


def check_snippet(mutant: Mutant, root: Path = ROOT) -> str:
    """The file's text; raises :class:`StaleMutant` unless ``old`` occurs exactly once."""
    path = root / mutant.path
    if not path.is_file():
        raise StaleMutant(
            f"mutant {mutant.name!r} is stale: {mutant.path} does not exist "
            "(re-target it in tests/mutants/catalog.py)"
        )
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise StaleMutant(
            f"mutant {mutant.name!r} is stale: its snippet occurs {count} times in "
            f"{mutant.path}, expected exactly once (re-target it in tests/mutants/catalog.py):"
            f"\n{mutant.old}"
        )
    if mutant.new == mutant.old:
        raise StaleMutant(f"mutant {mutant.name!r} changes nothing")
    return text


def repo_files(root: Path = ROOT) -> list[str]:
    """Tracked files, and untracked ones git does not ignore (the work in progress too)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def copy_repo(dest: Path, root: Path = ROOT) -> None:
    for name in repo_files(root):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def _module_of(path: str) -> str | None:
    """The importable module of a repository-relative ``.py`` file."""
    if not path.endswith(".py"):
        return None
    module = path[: -len(".py")].replace("/", ".")
    return module.removesuffix(".__init__")


def run_mutant(mutant: Mutant, root: Path = ROOT) -> Result:
    started = time.monotonic()
    try:
        text = check_snippet(mutant, root)
    except StaleMutant as exc:
        return Result(mutant, "STALE", 0.0, str(exc))
    with tempfile.TemporaryDirectory(prefix=f"parley-mutant-{mutant.name}-") as tmp:
        copy = Path(tmp).resolve()
        copy_repo(copy, root)
        (copy / mutant.path).write_text(text.replace(mutant.old, mutant.new))
        server = RedisServer("--appendonly", "no")
        try:
            env = {
                key: value
                for key, value in os.environ.items()
                if not key.startswith(("PYTEST_", "PARLEY_CRASH_AT"))
            }
            env.update(PYTHONPATH=str(copy), PARLEY_TEST_REDIS=server.url)
            module = _module_of(mutant.path)
            if module is not None:
                check = subprocess.run(
                    [sys.executable, "-c", _PREFLIGHT, module, mutant.new],
                    cwd=copy,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                if check.returncode != 0:
                    output = check.stdout + check.stderr
                    return Result(mutant, "ERROR", time.monotonic() - started, output)
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                 *mutant.tests],
                cwd=copy,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )  # fmt: skip
        finally:
            server.stop()
    output = proc.stdout + proc.stderr
    if proc.returncode == TESTS_FAILED:
        outcome = "caught"
    elif proc.returncode == 0:
        outcome = "SURVIVED"
    else:
        outcome = "ERROR"
        output = f"pytest exited with {proc.returncode}\n{output}"
    return Result(mutant, outcome, time.monotonic() - started, output)


def run_all(mutants: Iterable[Mutant], jobs: int = 1) -> list[Result]:
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_mutant, m) for m in mutants]
        results = []
        for future in futures:
            result = future.result()
            print(result.line(), flush=True)
            if not result.caught:
                print("    " + result.output.strip()[-3000:].replace("\n", "\n    "), flush=True)
            results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants.run", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"mutants (default: all {len(MUTANTS)})")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    results = run_all(by_name(args.names), jobs=args.jobs)
    bad = [r for r in results if not r.caught]
    print(
        f"{len(results) - len(bad)}/{len(results)} mutants caught "
        f"in {time.monotonic() - started:.1f} s"
        + (f"; not caught: {', '.join(r.mutant.name for r in bad)}" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
