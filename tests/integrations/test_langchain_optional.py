"""Without the ``langchain`` extra, ``import runtime`` works and the integration fails to
import with a message naming the extra (acceptance 6). Checked in a subprocess whose
import system refuses langchain_core and langgraph, as if they were not installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.processes import ROOT

PROBE = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("langchain_core", "langgraph"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())

    import runtime
    import runtime.integrations
    assert runtime.step_hook is not None
    try:
        import runtime.integrations.langchain
    except ImportError as exc:
        print("IMPORT-ERROR:", exc)
    else:
        print("IMPORTED")
    assert not any(m.split(".")[0] in ("langchain_core", "langgraph") for m in sys.modules)
    print("RUNTIME-OK")
    """
)


def test_integration_import_names_the_extra_when_langchain_is_missing() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "RUNTIME-OK"
    [error] = [line for line in lines if line.startswith("IMPORT-")]
    assert error.startswith("IMPORT-ERROR:")
    assert "parley[langchain]" in error
    assert "pip install" in error


def test_integration_imports_with_the_extra() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import runtime.integrations.langchain as m; print(m.run_agent)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "No module named 'langchain_core'" in proc.stderr:
        pytest.skip("the langchain extra is not installed")
    assert proc.returncode == 0, proc.stderr
    assert "run_agent" in proc.stdout


def test_the_integration_keeps_its_public_names() -> None:
    """Its modules are private: users import every name from the integration itself,
    including the callback types they annotate their own callbacks with."""
    lc = pytest.importorskip("runtime.integrations.langchain")
    assert sorted(lc.__all__) == [
        "HumanRequest",
        "HumanTool",
        "HumanToolNotDriven",
        "create_agent_graph",
        "decode_transcript",
        "encode_transcript",
        "final_text",
        "run_agent",
    ]
    for name in [*lc.__all__, "CHECKPOINT_VERSION", "HumanTools", "OnCreated", "OnText"]:
        assert getattr(lc, name) is not None, name
    assert lc.CHECKPOINT_VERSION == 1  # the checkpoints of waiting runs still load
