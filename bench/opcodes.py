"""Bytecodes executed, counted by code object: the engine's own work per lifecycle in a
unit that does not depend on the machine, the hour or valgrind (``bench.engine
--opcodes N``; issue 14, item 1).

An instruction count (``bench.instructions``, callgrind) says how much a worker does; it
cannot say where in the Python code: CPython 3.11 runs every function in one C function,
``_PyEval_EvalFrameDefault``. This counter names the functions. It switches CPython's
per-opcode tracing on (``sys.settrace`` with ``frame.f_trace_opcodes``) for the duration
of one awaited coroutine and counts each opcode by the code object it ran in. The counts
are exact and repeat from run to run for the same work; the time they take under tracing
is not a figure (tracing makes each opcode many times slower). C functions the bytecode
calls (``orjson.dumps``, ``dict.get``) count as the one opcode that called them. Code
that ``dataclasses`` and ``namedtuple`` generate (their constructors) has no file: it is
counted under ``<string>``, in the total and not in ``runtime/``'s share.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from types import CodeType, FrameType
from typing import Any, NamedTuple

from .harness import ROOT


class Site(NamedTuple):
    """A code object by where it is: its file (relative to the repository when inside it),
    first line and name."""

    file: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.name}"


def _where(code: CodeType) -> Site:
    path = code.co_filename
    root = f"{ROOT}/"
    return Site(path.removeprefix(root), code.co_firstlineno, code.co_name)


async def count_opcodes(work: Callable[[], Awaitable[Any]]) -> Counter[Site]:
    """Await ``work()`` with every opcode this thread executes counted by its code object.
    Tracing is this thread's: other threads and the event loop's C code are not counted,
    the coroutines and callbacks the loop runs on this thread meanwhile are. The cyclic
    collector does not run meanwhile (its own work is C, never counted)."""
    by_code: Counter[CodeType] = Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            by_code[frame.f_code] += 1
        else:
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        return trace

    previous = sys.gettrace()
    # The cyclic collector is paused while counting: a collection the garbage of earlier
    # work happens to trigger runs that garbage's finalizers (Python code) inside the window,
    # and the same work would count differently from one window to the next.
    collecting = gc.isenabled()
    gc.disable()
    sys.settrace(trace)
    try:
        await work()
    finally:
        sys.settrace(previous)
        if collecting:
            gc.enable()
    sites: Counter[Site] = Counter()
    for code, count in by_code.items():
        sites[_where(code)] += count
    return sites


def by_file(sites: Counter[Site]) -> Counter[str]:
    files: Counter[str] = Counter()
    for site, count in sites.items():
        files[site.file] += count
    return files


def summary(sites: Counter[Site], per: int, top: int) -> dict[str, Any]:
    """Opcodes per unit of work (``per`` units counted), those of Parley's package
    (``runtime/``) apart, with the ``top`` files and functions that ran the most."""
    total = sum(sites.values())
    parley = sum(n for site, n in sites.items() if site.file.startswith("runtime/"))
    return {
        "opcodes": round(total / per, 1),
        "runtime_opcodes": round(parley / per, 1),
        "files": {file: round(n / per, 1) for file, n in by_file(sites).most_common(top)},
        "functions": {str(site): round(n / per, 1) for site, n in sites.most_common(top)},
    }
