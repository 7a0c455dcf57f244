"""Whether this module, as imported, keeps Python's exception semantics in the engine's
pattern: an exception raised through a ``finally`` that awaits, caught by an ``except``,
and later an unrelated ``try``/``finally`` that awaits, in the same task.

``Execution.run`` has that shape (the body's ``Suspend`` passes the ``finally`` that
settles its children, the ``except Suspend`` records the suspension), and so does most of
the engine around a write. ``bench.compiled`` compiles this module with the engine's and
runs :func:`main` in both trees: compiled by mypyc 2.4.1, the handled exception stays the
task's current one after the function returned, and the next awaiting ``finally`` raises
it again, so ``Execution.run`` takes a run that completed for a suspension and loops.
"""

from __future__ import annotations

import asyncio
import sys

import orjson


class Handled(Exception):
    """Raised and caught inside :func:`catches_through_an_awaiting_finally`."""


async def catches_through_an_awaiting_finally() -> None:
    try:
        try:
            raise Handled("caught inside, never seen by the caller")
        finally:
            await asyncio.sleep(0)
    except Handled:
        return


async def awaits_in_finally() -> str:
    try:
        await asyncio.sleep(0)
    finally:
        await asyncio.sleep(0)
    return "returned"


async def probe() -> dict[str, bool]:
    """``outlives_except``: the caught exception is still ``sys.exc_info()`` after the
    function that caught it returned. ``raised_again``: an unrelated awaiting ``finally``
    then raised it (the control flow changed)."""
    await catches_through_an_awaiting_finally()
    outlives = sys.exc_info()[1] is not None
    try:
        await awaits_in_finally()
    except Handled:
        return {"outlives_except": outlives, "raised_again": True}
    return {"outlives_except": outlives, "raised_again": False}


def main() -> None:
    sys.stdout.write(orjson.dumps(asyncio.run(probe())).decode() + "\n")


if __name__ == "__main__":
    main()
