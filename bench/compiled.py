"""``python -m bench.compiled``: what compiling the engine's hot modules with mypyc would
give a worker's CPU per HITL lifecycle (issue 14, item 1: "that work not done in Python").

Parley ships as Python, and this bench does not change that: it copies ``runtime/``,
``bench/`` and ``pyproject.toml`` to a temporary directory, compiles :data:`MODULES` there
with mypyc (mypy's compiler, in the dev extras; it needs a C compiler and Python's
headers), checks that the copy imports the compiled modules, and runs the same benches in
both trees:

- ``bench.engine`` (the engine's floor: one recorded lifecycle replayed with no Redis),
  CPU µs per lifecycle, the two trees alternated ``--repeats`` times (this VM's speed moves
  by the hour, so an A/B is measured in one window), and with ``--instructions N`` the
  instructions per lifecycle counted by callgrind;
- with ``--hitl N``, ``bench.hitl --runs 2000 --workers 2`` N times in each tree, alternated:
  the workers' CPU µs per lifecycle and lifecycles/s, medians;
- with ``--worker``, ``bench.instructions --runs 600 --warmup 100`` in each tree: a real
  worker's instructions per lifecycle (less idle), the figure ``bench/README.md`` compares
  trees by.

The modules are the engine's path from the claim's decoding to the APPLY's encoding that
mypyc compiles as they are written. Not in the list, and why: the store's parts
(``RedisStore`` inherits from several, and mypyc compiles no multiple inheritance but of
traits), ``runtime/worker/consumer.py``, ``workflow/decorators.py``, ``_clock``, ``_faults``,
``store/records.py`` and ``metrics.py`` (with ``consumer.py`` compiled too the engine's
floor never finishes its first resume: the exception fault below).

**The compiled tree is measured, not a correct build.** mypyc (2.4.1, the newest) keeps an
exception that passed a ``finally`` which awaits as the task's current exception after the
``except`` that caught it, and a later awaiting ``finally`` raises it again. The engine has
that shape throughout (``Execution.run``: the body's ``Suspend`` passes the ``finally`` that
settles its children). ``bench/exception_probe.py`` is compiled with the modules and run in
both trees; its verdict is printed with the figures. The bench's lifecycle does not take
the path that goes wrong while the consumer stays Python (each execution starts from a
Python frame); other paths do: ``tests/runtime`` fails on the compiled tree.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .summary import workers_cpu_us

ROOT = Path(__file__).resolve().parent.parent

MODULES: tuple[str, ...] = (
    "runtime/_codec.py",
    "runtime/ids.py",
    "runtime/models.py",
    "runtime/registry.py",
    "runtime/engine/endings.py",
    "runtime/engine/execution.py",
    "runtime/engine/hooks.py",
    "runtime/engine/messages.py",
    "runtime/engine/replay.py",
    "runtime/engine/replay_cache.py",
    "runtime/engine/signals.py",
    "runtime/engine/steps.py",
    "runtime/engine/waits.py",
    "runtime/engine/writer.py",
    "runtime/store/writes.py",
    "runtime/store/redis/_decode.py",
    "runtime/workflow/primitives.py",
)

# Compiled with the modules, run in both trees: whether exceptions keep Python's semantics
PROBE = "bench/exception_probe.py"

_IGNORE = shutil.ignore_patterns("__pycache__", "*.so", "build")


def build(tree: Path, modules: Sequence[str]) -> None:
    """A copy of this checkout's code in ``tree`` with ``modules`` compiled by mypyc."""
    for name in ("runtime", "bench"):
        shutil.copytree(ROOT / name, tree / name, ignore=_IGNORE)
    shutil.copy2(ROOT / "pyproject.toml", tree / "pyproject.toml")
    proc = subprocess.run(
        [sys.executable, "-m", "mypyc", *modules, PROBE],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        errors = [line for line in proc.stdout.splitlines() if "error:" in line]
        raise SystemExit(
            "mypyc could not compile the modules:\n" + "\n".join(errors or [proc.stderr[-2000:]])
        )
    check_compiled(tree, [*modules, PROBE])


def exception_semantics(tree: Path) -> dict[str, bool]:
    """:func:`bench.exception_probe.probe` run in ``tree``: ``raised_again`` is True where
    a caught exception is raised again by a later awaiting ``finally``."""
    run = "from bench.exception_probe import main; main()"  # (-m cannot run a compiled one)
    return _json_of([sys.executable, "-c", run], tree, 60)


def check_compiled(tree: Path, modules: Sequence[str]) -> None:
    """Every module of ``modules`` is imported from an extension module in ``tree``, not
    from its source there or from this checkout (an installed ``runtime`` found first)."""
    names = [m.removesuffix(".py").replace("/", ".") for m in modules]
    probe = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    print(importlib.import_module(name).__file__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"the compiled tree does not import: {proc.stderr[-2000:]}")
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for name, path in zip(names, proc.stdout.split(), strict=True):
        if not (path.startswith(str(tree)) and path.endswith(suffixes)):
            raise SystemExit(f"{name} is imported from {path}, not compiled in {tree}")


def _json_of(cmd: list[str], tree: Path, timeout: float) -> dict[str, Any]:
    proc = subprocess.run(
        cmd, cwd=tree, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[1:])} failed in {tree}:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = orjson.loads(proc.stdout.strip().splitlines()[-1])
    return result


def measure(
    tree: Path, *, runs: int, repeats: int, instructions: int, worker: bool, hitl: int
) -> dict[str, dict[str, Any]]:
    """The benches in this checkout ("python") and in the compiled ``tree`` ("compiled")."""
    trees = {"python": ROOT, "compiled": tree}
    samples: dict[str, list[float]] = {name: [] for name in trees}
    engine = [sys.executable, "-m", "bench.engine", "--runs", str(runs), "--repeats", "1"]
    for _ in range(repeats):  # alternated: both trees in the same minutes
        for name, where in trees.items():
            samples[name].append(_json_of(engine, where, 600)["cpu_us_per_lifecycle"])
    hitl_runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    hitl_cmd = [sys.executable, "-m", "bench.hitl", "--runs", "2000", "--workers", "2"]
    for _ in range(hitl):
        for name, where in trees.items():
            hitl_runs[name].append(_json_of(hitl_cmd, where, 900))
    out: dict[str, dict[str, Any]] = {}
    for name, where in trees.items():
        figures: dict[str, Any] = {
            "exception_probe": exception_semantics(where),
            "engine_cpu_us_per_lifecycle": statistics.median(samples[name]),
            "engine_cpu_us_samples": samples[name],
        }
        if instructions:
            counted = _json_of([*engine, "--instructions", str(instructions)], where, 900)[
                "instructions_per_lifecycle"
            ]
            figures["engine_instructions_per_lifecycle"] = counted
        if worker:
            figures["worker_instructions_per_lifecycle_less_idle"] = _json_of(
                [sys.executable, "-m", "bench.instructions", "--runs", "600", "--warmup", "100"],
                where,
                900,
            )["worker_instructions_per_lifecycle_less_idle"]
        if hitl:
            workers_us = [workers_cpu_us(r["cpu_us_per_lifecycle"]) for r in hitl_runs[name]]
            figures["hitl_workers_cpu_us_per_lifecycle"] = statistics.median(workers_us)
            figures["hitl_workers_cpu_us_samples"] = workers_us
            figures["hitl_lifecycles_per_s"] = statistics.median(
                r["lifecycles_per_s"] for r in hitl_runs[name]
            )
            figures["hitl_lifecycles_per_s_samples"] = [
                r["lifecycles_per_s"] for r in hitl_runs[name]
            ]
        out[name] = figures
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compiled", description=__doc__)
    parser.add_argument("--runs", type=int, default=20_000, help="bench.engine's lifecycles")
    parser.add_argument("--repeats", type=int, default=3, help="alternated bench.engine runs")
    parser.add_argument(
        "--instructions",
        type=int,
        metavar="N",
        default=0,
        help="also count bench.engine's instructions per lifecycle over N lifecycles",
    )
    parser.add_argument(
        "--worker", action="store_true", help="also count a worker's (bench.instructions)"
    )
    parser.add_argument(
        "--hitl",
        type=int,
        metavar="N",
        default=0,
        help="also run bench.hitl --runs 2000 --workers 2 N times in each tree, alternated",
    )
    parser.add_argument(
        "--modules", nargs="+", default=list(MODULES), help="the modules to compile"
    )
    args = parser.parse_args(argv)
    for name in ("runs", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    unknown = [m for m in args.modules if not (ROOT / m).is_file()]
    if unknown:
        parser.error(f"--modules: no such file in {ROOT}: {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="parley-compiled-") as workdir:
        tree = Path(workdir)
        build(tree, args.modules)
        figures = measure(
            tree,
            runs=args.runs,
            repeats=args.repeats,
            instructions=args.instructions,
            worker=args.worker,
            hitl=args.hitl,
        )
    python, compiled = figures["python"], figures["compiled"]
    print(f"{len(args.modules)} modules compiled with mypyc; python -> compiled (ratio):")
    for name, found in figures.items():
        probe = found["exception_probe"]
        verdict = (
            "a caught exception is raised again by a later awaiting finally: NOT a correct build"
            if probe["raised_again"]
            else "exceptions keep Python's semantics"
        )
        print(f"  {name} tree: {verdict}")
    for key in python:
        if key.endswith("_samples") or key == "exception_probe":
            continue
        ratio = compiled[key] / python[key] if python[key] else float("nan")
        print(f"  {key}: {python[key]:,} -> {compiled[key]:,} ({ratio:.2f})")
    print(orjson.dumps({"bench": "compiled", "modules": args.modules, **figures}).decode())


if __name__ == "__main__":
    main()
