"""Summarize a pyinstrument session: self time by package area and by function.

Used by the bench app when ``$PARLEY_BENCH_PROFILE`` is set; the summary is written
next to pyinstrument's own tree (``<prefix>.<pid>.summary.txt``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

AREAS = (
    # the package's own path: runtime/store/redis/ is the engine's, not redis-py's
    ("site-packages/redis/", "redis-py client"),
    ("/hiredis", "hiredis parser"),
    ("/asyncio/", "asyncio event loop"),
    ("/runtime/", "parley engine (runtime/)"),
    ("/bench/", "bench app + probes"),
    ("/orjson", "orjson"),
    ("/jsonschema", "jsonschema"),
    ("selectors", "waiting in select (idle)"),
)


def area_of(path: str | None, function: str) -> str:
    path = path or ""
    if function in ("select", "poll", "epoll.poll") or path.endswith("selectors.py"):
        return "waiting in select (idle)"
    for marker, name in AREAS:
        if marker in path:
            return name
    if path.startswith("<built-in>") or not path:
        return "builtins (attributed to caller area below)"
    return "other"


def summarize(root: Any, top: int = 25) -> str:
    """Self time per area (a builtin's time goes to the area of its caller) and the
    functions with the most self time."""
    areas: Counter[str] = Counter()
    functions: Counter[str] = Counter()

    def walk(frame: Any, parent_area: str, parent_name: str) -> None:
        own = frame.total_self_time
        if frame.is_synthetic:  # "[self]" / hidden-frame groups: the caller's own time
            area, name = parent_area, parent_name
        else:
            area = area_of(frame.file_path, frame.function)
            name = f"{frame.function}  {frame.file_path_short}:{frame.line_no}"
            if area.startswith("builtins"):
                area = parent_area
        areas[area] += own
        if own:
            functions[name] += own
        for child in frame.children:
            walk(child, area, name)

    walk(root, "other", "<root>")
    total = sum(areas.values()) or 1.0
    lines = ["self time by area (s, share of samples):"]
    for area, seconds in areas.most_common():
        lines.append(f"  {seconds:8.3f}  {100 * seconds / total:5.1f}%  {area}")
    lines.append(f"top {top} functions by self time:")
    for name, seconds in functions.most_common(top):
        lines.append(f"  {seconds:8.3f}  {100 * seconds / total:5.1f}%  {name}")
    return "\n".join(lines) + "\n"
