"""The public API: exactly what the design names, plus the documented extras; every
exported name exists; every error derives from ParleyError."""

from __future__ import annotations

import inspect

import runtime
from runtime import errors

DESIGN_NAMES = {
    "workflow",
    "step",
    "hook",
    "step_hook",
    "STEP_HOOK_TIMEOUT",
    "save_step_checkpoint",
    "load_step_checkpoint",
    "delete_step_checkpoint",
    "sleep",
    "Runtime",
}
ISSUE_ERRORS = {
    "ParleyError",
    "HookNotFound",
    "HookAlreadyAnswered",
    "HookExpired",
    "HookTimeout",
    "InvalidToken",
    "InvalidPayload",
    "RunNotFound",
    "LeaseLost",
}


def test_all_is_explicit_and_complete() -> None:
    exported = set(runtime.__all__)
    assert exported >= DESIGN_NAMES
    assert exported >= ISSUE_ERRORS
    assert len(runtime.__all__) == len(exported)  # no duplicates
    for name in runtime.__all__:
        assert hasattr(runtime, name), name
    public = {n for n in vars(runtime) if not n.startswith("_")}
    modules = {n for n in public if inspect.ismodule(getattr(runtime, n))}
    assert public - modules - {"annotations"} == exported


def test_every_error_has_one_root_and_a_stable_code() -> None:
    codes = set()
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ParleyError)
        codes.add(cls.code)
    assert len(codes) == len(errors.__all__)  # each error its own code
    err = errors.HookExpired("too late", run_id="r-1", hook_id="h0.x")
    assert str(err) == "too late (run=r-1, hook=h0.x)"


def test_runtime_signature_matches_the_contract() -> None:
    params = inspect.signature(runtime.Runtime).parameters
    assert list(params)[:2] == ["redis_url", "partitions"]
    assert params["partitions"].default == 16
    hook_params = list(inspect.signature(runtime.step_hook).parameters)
    assert hook_params[:5] == ["name", "timeout", "on_created", "schema", "on_timeout"]
    assert inspect.signature(runtime.step_hook).parameters["on_timeout"].default == "raise"


async def test_connect_as_in_the_design(redis_url: str) -> None:
    rt = await runtime.Runtime.connect(redis_url, partitions=2)
    try:
        assert rt.partitions == 2
        assert await rt.connect() is rt  # idempotent on an instance
        assert await rt.list_hooks() == []
    finally:
        await rt.close()
