"""bench.exception_probe, as Python runs it: the exception caught inside is gone once the
function returned, and the later awaiting ``finally`` returns. (Compiled by mypyc 2.4.1 it
reports both: ``python -m bench.compiled`` prints that verdict.)"""

from __future__ import annotations

import asyncio
import sys

from bench.exception_probe import awaits_in_finally, catches_through_an_awaiting_finally, probe


def test_the_probe_finds_python_semantics_in_python() -> None:
    assert asyncio.run(probe()) == {"outlives_except": False, "raised_again": False}


def test_python_does_not_raise_a_handled_exception_again_in_an_awaiting_finally() -> None:
    """Even while an exception is being handled (current, as the compiled code leaves one
    after its except), Python's awaiting ``finally`` returns: ``raised_again`` is the
    compiler's fault, not a behaviour the probe's coroutines have of their own."""

    async def leaves_it_current() -> bool:
        await catches_through_an_awaiting_finally()
        try:
            raise KeyError("current while the probe's coroutine runs")
        except KeyError:
            assert sys.exc_info()[0] is KeyError
            return await awaits_in_finally() == "returned"

    assert asyncio.run(leaves_it_current())
