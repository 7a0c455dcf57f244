"""A small run of the benchmark, so it cannot rot: every run completes exactly once and
every figure is printed. Speed is not asserted (the machine is shared)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.compiled import check_compiled

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]


def _command(*args: str, module: str = "bench.hitl") -> list[str]:
    return [sys.executable, "-m", module, *args]


def _parse(returncode: int, out: str, err: str) -> tuple[dict[str, Any], str]:
    assert returncode == 0, f"{out}\n{err}"
    return orjson.loads(out.strip().splitlines()[-1]), out


def _bench(*args: str, module: str = "bench.hitl") -> tuple[dict[str, Any], str]:
    """Run the README's command (it starts its own redis-server) and parse its JSON line."""
    proc = subprocess.run(
        _command(*args, module=module), cwd=ROOT, capture_output=True, timeout=90, check=False
    )
    return _parse(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


# where the instructions mode keeps its callgrind outputs (--keep); removed by its test
CALLGRIND_DIR = Path(tempfile.gettempdir()) / f"parley-smoke-callgrind-{os.getpid()}"

# The modes whose checks do not depend on the machine's load (runs completed once, figures
# present, no deadline early) run side by side: each starts its own redis-server and
# workers, and most of their time is spent waiting (windows, deadlines, compaction), so the
# suite waits for the slowest instead of their sum. The main mode, whose task count is read
# after the runs settle, runs alone before them.
CONCURRENT = {
    "deadline": _command("--mode", "deadline", "--runs", "50", "--workers", "1"),
    "rounds": _command(
        "--mode", "rounds", "--round-points", "1", "4", "--samples", "2", "--idle-window", "0.2"
    ),
    "idle": _command(
        "--mode", "idle", "--idle-workers", "1", "2", "--idle-partitions", "2",
        "--runs", "20", "--spread", "0.3", "--idle-window", "0.3",
    ),
    "ceiling": _command("--mode", "ceiling", "--ceiling-scripts", "2000"),
    "instructions": _command(
        "--runs", "20", "--warmup", "5", "--redis-too", "--keep", str(CALLGRIND_DIR),
        "--idle-seconds", "1", module="bench.instructions",
    ),
    "segments": _command("--sizes", "1", "3", "--runs", "6", module="bench.segments"),
    "floor": _command("--runs", "200", "--repeats", "2", module="bench.floor"),
    "engine": _command(
        "--runs", "200", "--warmup", "20", "--repeats", "2", "--instructions", "50",
        "--opcodes", "20", module="bench.engine",
    ),
    "prototype": _command(
        "--runs", "200", "--repeats", "1", "--opcodes", "20", module="bench.prototype"
    ),
    # one module compiled (the whole list takes a minute of CPU): the build, the check
    # that the copy imports it compiled, and both trees' figures
    "compiled": _command(
        "--modules", "runtime/engine/replay.py", "--runs", "100", "--repeats", "1",
        "--instructions", "20", module="bench.compiled",
    ),
    "report": _command(
        "--quick", "--runs", "20", "--warmup", "5", "--probe", "3", "--idle-window", "0.2",
        "--ceiling-scripts", "2000", "--round-points", "1", "3", "--samples", "2",
        "--idle-workers", "1", "--idle-partitions", "2",
        module="bench.report",
    ),
}  # fmt: skip


Launched = dict[str, "subprocess.Popen[bytes]"]


@pytest.fixture(scope="module")
def launched() -> Iterator[Launched]:
    # Each in a process group of its own: a mode not waited for (a test deselected or
    # failed) is killed with the redis-server and workers it started, which would otherwise
    # outlive it (its own cleanup does not run on SIGKILL).
    procs = {
        name: subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        for name, cmd in CONCURRENT.items()
    }
    try:
        yield procs
    finally:
        for proc in procs.values():
            # whether or not the mode itself has ended: what it started may not have
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def _finished(launched: Launched, name: str) -> tuple[dict[str, Any], str]:
    out, err = launched[name].communicate(timeout=180)
    return _parse(launched[name].returncode, out.decode(), err.decode())


def test_hitl_lifecycles_complete_once() -> None:
    result, table = _bench(
        "--runs", "50", "--workers", "1", "--warmup", "10", "--probe", "5",
        "--idle-window", "0.2", "--ceiling-scripts", "2000",
    )  # fmt: skip
    assert result["completed_once"] == 50, result["problems"]
    assert result["problems"] == []
    for figure in (
        "start_rate",
        "resume_rate",
        "lifecycles_per_s",
        "top_level_commands_per_lifecycle",
        "round_trips_per_lifecycle",
        "redis_bytes_per_suspended_run",
        "worker_rss_kb_suspended",
        "worker_tasks_suspended",
        "redis_bytes_per_finished_run",
        "redis_key_bytes_finished_sample",
    ):
        assert figure in result, figure
    assert result["ceiling"]["scripts_per_s"] > 0
    assert result["fraction_of_ceiling"] > 0
    # each process's share of its CPU spent in the kernel, a fraction
    shares = result["cpu_system_share"]
    assert set(shares) == set(result["cpu_us_per_lifecycle"]), shares
    assert all(0 <= share <= 1 for share in shares.values()), shares
    assert result["redis_config"]["stream-node-max-bytes"].isdigit()
    # read once compacted: the log is in the archive, the stream is gone
    assert result["redis_key_bytes_finished_sample"]["archive_share"] > 0
    assert result["redis_key_bytes_finished_sample"]["events"] == 0
    for key in ("p50", "p95", "p99"):
        assert result["resume_latency_light_ms"][key] > 0
        assert result["resume_latency_under_load_ms"][key] >= 0
    # A suspended run holds no task in the worker.
    assert result["worker_tasks_suspended"] == result["worker_tasks_idle"]
    assert "lifecycles/s end to end" in table
    # issue 14's item 1, judged on each run's own figures (1 worker: no rate target)
    assert "workers' CPU us / lifecycle (issue 14)" in table
    assert "total CPU us / lifecycle (issue 14)" in table
    assert "lifecycles/s with 2 workers (issue 14)" not in table
    assert "fraction of it" in table
    assert "Redis settings in effect" in table


def test_deadlines_fire_once_and_never_early(launched: Launched) -> None:
    result, table = _finished(launched, "deadline")
    assert result["expired_once"] == 50, result["problems"]
    assert result["early"] == 0
    assert result["lateness_ms"]["n"] == 50
    assert "deadline tick" in table


def test_rounds_mode_measures_each_round_of_one_run(launched: Launched) -> None:
    result, table = _finished(launched, "rounds")
    assert result["completed_once"] == 1, result["problems"]  # every round answered once
    assert result["rounds"] == 6
    assert set(result["per_resume"]) == {"1", "4"}
    for m in result["per_resume"].values():
        assert m["samples"] == 2 and len(m["latency_ms"]) == 2
        assert m["latency_ms_median"] > 0
        assert m["commands_top_level"] > 0
        for figure in ("worker_cpu_us", "redis_cpu_us", "worker_bytes_read"):
            assert figure in m, figure
    assert "resume at round 4" in table


def test_idle_mode_counts_commands_and_fires_deadlines_once(launched: Launched) -> None:
    result, table = _finished(launched, "idle")
    assert set(result["cells"]) == {"1x2", "2x2"}
    for cell in result["cells"].values():
        assert len(cell["commands_per_s_per_worker"]) == cell["workers"]
        assert cell["commands_per_s"] >= 0 and cell["redis_executed_per_s"] >= 0
        deadlines = cell["deadlines"]
        assert deadlines["expired_once"] == 20, deadlines["problems"]
        assert deadlines["early"] == 0
        assert deadlines["lateness_ms"]["n"] == 20
    assert result["problems"] == []
    assert "deadline lateness" in table


def test_ceiling_mode(launched: Launched) -> None:
    result, table = _finished(launched, "ceiling")
    assert result["ceiling"]["scripts_per_s"] > 0
    assert result["ceiling"]["lifecycles_per_s"] > 0
    assert "ceiling" in table


def test_floor_makes_every_call_of_both_shapes_once(launched: Launched) -> None:
    result, table = _finished(launched, "floor")
    assert result["problems"] == []
    for shape in ("tasks", "batch"):
        assert len(result["samples"][shape]) == 2
        for sample in result["samples"][shape]:
            # 200 measured + 200 warm-up lifecycles of 5 calls each, every one run once
            assert sample["calls"] == sample["calls_expected"] == 400 * 5
            assert sample["cpu_us_per_lifecycle"] > 0
        assert result["median"][shape]["lifecycles_per_s"] > 0
        assert f"{shape}: CPU µs per lifecycle, this process" in table


def test_engine_floor_replays_the_recorded_lifecycle_and_counts_it(launched: Launched) -> None:
    result, table = _finished(launched, "engine")
    # a start (claim, checkpoint with the hook, suspension) and a resume (claim, completion),
    # every replayed lifecycle checked against it (the bench stops on a call out of order)
    assert result["calls_per_lifecycle"] == ["claim", "apply", "apply", "claim", "apply"]
    assert len(result["cpu_us_samples"]) == 2
    assert result["cpu_us_per_lifecycle"] > 0
    assert result["instructions_per_lifecycle"] > 0
    opcodes = result["opcodes_per_lifecycle"]
    assert 0 < opcodes["runtime_opcodes"] < opcodes["opcodes"]
    assert "runtime/engine/execution.py" in opcodes["files"]
    assert "engine CPU µs per lifecycle" in table
    assert "engine bytecodes per lifecycle" in table


def test_prototype_mode_measures_the_prototype_beside_the_engine(launched: Launched) -> None:
    result, table = _finished(launched, "prototype")
    for name in ("prototype", "engine"):
        assert result[name]["cpu_us_per_lifecycle"] > 0
        assert result[name]["opcodes_per_lifecycle"]["opcodes"] > 0
        assert f"{name}: " in table
    # the prototype is its own code: nothing of runtime/ runs in its lifecycles
    assert result["prototype"]["opcodes_per_lifecycle"]["runtime_opcodes"] == 0
    assert result["engine"]["opcodes_per_lifecycle"]["runtime_opcodes"] > 0


@pytest.mark.skipif(shutil.which("cc") is None, reason="mypyc needs a C compiler")
def test_compiled_mode_measures_both_trees(launched: Launched) -> None:
    result, table = _finished(launched, "compiled")
    assert result["modules"] == ["runtime/engine/replay.py"]
    for tree in ("python", "compiled"):
        assert result[tree]["engine_cpu_us_per_lifecycle"] > 0
        assert result[tree]["engine_instructions_per_lifecycle"] > 0
        assert set(result[tree]["exception_probe"]) == {"outlives_except", "raised_again"}
    assert result["python"]["exception_probe"]["raised_again"] is False
    assert "1 modules compiled with mypyc" in table
    assert "python tree: exceptions keep Python's semantics" in table


def test_compiled_tree_check_refuses_modules_left_as_source(tmp_path: Path) -> None:
    """The check that makes the compiled figures the compiled code's: a copy whose module
    was not compiled is refused."""
    shutil.copytree(ROOT / "runtime", tmp_path / "runtime")
    refused = r"runtime\.engine\.replay is imported from .*/replay\.py, not compiled"
    with pytest.raises(SystemExit, match=refused):
        check_compiled(tmp_path, ["runtime/engine/replay.py"])


def test_segments_mode_prints_a_finished_runs_bytes_by_segment_size(launched: Launched) -> None:
    result, table = _finished(launched, "segments")
    alone, shared = result["sizes"]
    assert (alone["runs_per_segment"], shared["runs_per_segment"]) == (1, 3)
    assert alone["runs"] == shared["runs"] == 6
    assert alone["run_hash_bytes"] > 0
    # the same runs, in segments of 3: one blob of zlib (and one key) for three of them
    assert 0 < shared["segment_share_bytes"] < alone["segment_share_bytes"]
    assert "runs/segment" in table


def test_report_prints_every_figure_in_one_run(launched: Launched) -> None:
    result, table = _finished(launched, "report")
    assert result["completed_once"] is True, result["problems"]
    assert result["main_1_worker"]["completed_once"] == 20
    assert result["main_2_workers"]["completed_once"] == 20
    summary = result["summary"]
    assert set(summary["lifecycles_per_s"]) == {"1", "2"}
    assert set(summary["fraction_of_ceiling"]) == {"1", "2"}
    assert set(summary["resume_ms_by_round"]) == {"1", "3"}
    assert set(summary["idle_lateness_p99_ms"]) == {"1x2"}
    for figure in ("bytes_per_suspended_run", "bytes_per_finished_run", "cpu_us_per_lifecycle"):
        assert figure in summary, figure
    # one table and one JSON line on stdout
    assert table.count("== parley") == 1
    assert table.count("lifecycles/s with 2 workers (issue 14)") == 1
    assert table.count("workers' CPU us / lifecycle (issue 14)") == 2  # 1 and 2 workers


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_instructions_mode_counts_the_worker_and_redis(launched: Launched) -> None:
    result, table = _finished(launched, "instructions")
    assert result["runs"] == 20  # it returns only once all 20 completed
    # a lifecycle is hundreds of thousands of instructions in each process, never none
    assert result["worker_instructions_per_lifecycle"] > 10_000
    assert result["redis_instructions_per_lifecycle"] > 10_000
    assert "worker_instructions_per_lifecycle:" in table
    # Counted at rest too (redis-server's serverCron runs 10 times a second whatever the
    # load): the idle rate is subtracted from the window's count, which it lowers.
    for process in ("worker", "redis"):
        assert result[f"{process}_instructions_per_s_at_rest"] > 0
        less_idle = result[f"{process}_instructions_per_lifecycle_less_idle"]
        assert less_idle < result[f"{process}_instructions_per_lifecycle"]
    assert result["window_s"] > 0
    # --keep: the outputs callgrind_annotate reads, for a profile of each process
    try:
        assert result["callgrind_outputs"] == str(CALLGRIND_DIR)
        outputs = sorted(p.name for p in CALLGRIND_DIR.iterdir())
        assert any(n.startswith("worker.out") for n in outputs), outputs
        assert any(n.startswith("redis.out") for n in outputs), outputs
        worker_profile = max(CALLGRIND_DIR.glob("worker.out*"), key=lambda p: p.stat().st_size)
        annotated = subprocess.run(
            ["callgrind_annotate", str(worker_profile)], capture_output=True, text=True, check=True
        ).stdout
        assert "_PyEval_EvalFrameDefault" in annotated, annotated[:2000]
    finally:
        shutil.rmtree(CALLGRIND_DIR, ignore_errors=True)
