"""Two deploys of the same workflows, for the replay-check and versioning tests: the code
a worker runs is chosen by ``PARLEY_TEST_VARIANT`` (worker processes) or by
``VARIANT["name"]`` (in-process tests).

- ``a``: the code the runs were started on.
- ``a2``: the same calls; its final step says it ran (versioning: which code finished).
- ``swap``: the two ``prepare`` steps swapped (same name, other arguments).
- ``rename``: the workflow's hook renamed.
- ``insert``: a step inserted before the hook.
- ``remove``: the second ``prepare`` removed.
- ``rename_step_hook``: the hook inside ``ask_step`` renamed.
"""

from __future__ import annotations

import os
from typing import Any

from runtime import hook, patched, step, step_hook, workflow

VARIANT = {"name": os.environ.get("PARLEY_TEST_VARIANT", "a")}


def variant() -> str:
    return VARIANT["name"]


@step
async def prepare(n: int) -> int:
    return n * 10


@step
async def audit() -> str:
    return "audited"


@step
async def finish(answer: Any) -> dict[str, Any]:
    return {"answer": answer, "finished_by": variant()}


@step
async def ask_step() -> Any:
    name = "confirmation" if variant() == "rename_step_hook" else "confirm"
    return await step_hook(name)


@workflow(name="deploy_wf")
async def deploy_wf() -> dict[str, Any]:
    v = variant()
    if v == "swap":
        b = await prepare(2)
        a = await prepare(1)
    elif v == "remove":
        a, b = await prepare(1), 0
    else:
        a = await prepare(1)
        b = await prepare(2)
    if v == "insert":
        await audit()
    answer = await hook("approval" if v == "rename" else "approve")
    confirmed = await ask_step()
    done = await finish(answer)
    return {"a": a, "b": b, "confirmed": confirmed, **done}


@step
async def old_path() -> str:
    return "old"


@step
async def new_path() -> str:
    return "new"


@step
async def old_ask() -> str:
    return f"old:{await step_hook('decide')}"


@step
async def new_ask() -> str:
    return f"new:{await step_hook('decide')}"


@workflow(name="patched_wf")
async def patched_wf() -> list[str]:
    # the deploy after "a" patched both the first step and the step that asks
    if variant() != "a" and patched("v2"):
        return [await new_path(), await new_ask()]
    return [await old_path(), await old_ask()]


# A step changed by a patch while runs waited inside it: the step's name stays ("pick"),
# its code is the one of the deploy (a step records the patches its code knows when it
# starts).
@step(name="pick")
async def pick_v1() -> str:
    return f"v1:{await step_hook('choice')}"


@step(name="pick")
async def pick_v2() -> str:
    answer = await step_hook("choice")
    if patched("pick-v2"):
        return f"v2:{answer}"
    return f"v1:{answer}"


@workflow(name="patched_step_wf")
async def patched_step_wf() -> str:
    return await (pick_v1 if variant() == "a" else pick_v2)()
