"""Figures, table rows and the JSON result of the lifecycle benchmark (main/scale)."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from typing import Any

from .ceiling import ceiling_rows, fraction
from .common import Row, load_average, pcts, verdict
from .harness import Snapshot, command_breakdown, delta, partitions_per_pass
from .lifecycle import REDIS_DEFAULTS, Phase, settings_text

IDLE_ROUND_TRIPS = ("PIPELINE", "XREADGROUP:empty", "XAUTOCLAIM")
NOT_ROUND_TRIPS = ("PIPELINE:commands", "SET")  # a pipeline's size; the bench reporter


def _worker_sum(snapshot_workers: list[dict[str, Any]], key: str) -> int:
    return sum(int(w[key]) for w in snapshot_workers)


def _round_trips(phase: Phase) -> dict[str, int]:
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for w in phase.before.workers:
        before.update(w["round_trips"])
    for w in phase.after.workers:
        after.update(w["round_trips"])
    workers = delta(dict(after), dict(before))
    driver = delta(dict(phase.driver_after), dict(phase.driver_before))
    skip = IDLE_ROUND_TRIPS + NOT_ROUND_TRIPS
    lifecycle = {k: v for k, v in workers.items() if k not in skip}
    if "XREADGROUP" in lifecycle:
        lifecycle["XREADGROUP"] -= workers.get("XREADGROUP:empty", 0)
    return {
        "driver": sum(driver.values()),
        "workers": sum(v for v in lifecycle.values() if v > 0),
        "workers_background": sum(workers.get(k, 0) for k in IDLE_ROUND_TRIPS),
    }


def summarize(
    raw: dict[str, Any], args: argparse.Namespace, own_redis: bool
) -> tuple[dict[str, Any], list[Row], list[str]]:
    n = raw["runs"]
    start: Phase = raw["start"]
    resume: Phase = raw["resume"]
    check = raw["check"]
    idle0, idle1 = raw["idle"]
    t1 = max(check["suspended_ms"]) / 1000 - raw["t_start"] if check["suspended_ms"] else 0.0
    t2 = max(check["completed_ms"]) / 1000 - raw["t_answer"] if check["completed_ms"] else 0.0
    start_rate = n / t1 if t1 > 0 else 0.0
    resume_rate = n / t2 if t2 > 0 else 0.0
    e2e = n / (t1 + t2) if t1 + t2 > 0 else 0.0
    under_load = pcts(
        [c - r for c, r in zip(check["completed_ms"], check["received_ms"], strict=True)]
    )
    probe = raw["probe"]
    light = pcts(probe.get("accepted_ms", []))
    light_sent = pcts(probe.get("sent_ms", []))

    per_pass = partitions_per_pass(args)
    cmd_start = command_breakdown(start.before, start.after, per_pass)
    cmd_resume = command_breakdown(resume.before, resume.after, per_pass)
    top: Counter[str] = Counter(cmd_start["top_level"]) + Counter(cmd_resume["top_level"])
    lua: Counter[str] = Counter(cmd_start["inside_lua"]) + Counter(cmd_resume["inside_lua"])
    background: Counter[str] = Counter(cmd_start["background"]) + Counter(cmd_resume["background"])
    setup: Counter[str] = Counter(cmd_start["connection_setup"]) + Counter(
        cmd_resume["connection_setup"]
    )
    top_per = sum(top.values()) / n
    rt_start, rt_resume = _round_trips(start), _round_trips(resume)
    rt_per = (
        rt_start["driver"] + rt_start["workers"] + rt_resume["driver"] + rt_resume["workers"]
    ) / n
    idle_cmds = command_breakdown(idle0, idle1, per_pass)
    window = idle1.wall - idle0.wall
    idle_rate = {
        k: round(v / window, 1)
        for k, v in {**idle_cmds["top_level"], **idle_cmds["background"]}.items()
        if v
    }

    mem_per_run = (start.after.used_memory_dataset - start.before.used_memory_dataset) / n
    mem_total_per_run = (start.after.used_memory - start.before.used_memory) / n
    rss_idle = [w["rss_kb"] for w in start.before.workers]
    rss_susp = [w["rss_kb"] for w in start.after.workers]
    rss_growth_mb = max(b - a for a, b in zip(rss_idle, rss_susp, strict=True)) / 1024
    tasks_idle = [w["tasks"] for w in start.before.workers]
    tasks_susp = [w["tasks"] for w in raw["settled_workers"]]
    threads_idle = [w["threads"] for w in start.before.workers]
    threads_susp = [w["threads"] for w in raw["settled_workers"]]
    phases = (start, resume)

    def spent(figure: str) -> float:
        """How much a Snapshot counter grew over the measured phases (start and resume)."""
        return float(sum(getattr(p.after, figure) - getattr(p.before, figure) for p in phases))

    def spent_by_process(figure: str) -> dict[str, float]:
        """The same for a per-process counter, by process label."""
        return {
            label: sum(
                getattr(p.after, figure)[label] - getattr(p.before, figure)[label] for p in phases
            )
            for label in start.after.cpu
        }

    cpu_spent = spent_by_process("cpu")
    cpu = {label: round(seconds / n * 1e6) for label, seconds in cpu_spent.items()}
    redis_cpu = round(spent("redis_cpu") / n * 1e6)
    # Of each process's CPU in those phases, the share spent in the kernel (system calls:
    # a round trip's send, its reads, the loop's epoll): what batching saves, which an
    # instruction count (user space only, bench.instructions) does not see.
    kernel = spent_by_process("cpu_system")
    system_share = {label: _share(kernel[label], cpu_spent[label]) for label in cpu_spent}
    system_share["redis_server_info"] = _share(spent("redis_cpu_system"), spent("redis_cpu"))

    # The machine is shared: CPU the other processes used during the measured phases.
    ours = sum(cpu.values()) * n / 1e6
    busy = spent("machine_busy")
    wall = spent("wall")
    other_cores = max(0.0, busy - ours) / wall if wall > 0 else 0.0
    # (compaction's window is not in that figure: it is mostly idle, its CPU estimated)
    compaction = _compaction(raw, idle0, idle1, per_pass)
    for label, us in compaction["cpu_us"].items():
        cpu[label] += us
    redis_cpu += compaction["redis_cpu_us"]
    top_with_compaction = top_per + compaction["top_level_commands"]
    per_lifecycle_cpu = sum(cpu.values())  # driver + workers + redis, microseconds
    cpu_bound = _cpus() / per_lifecycle_cpu * 1e6 if per_lifecycle_cpu else 0.0
    e2e_target = 1500.0 if args.workers >= 2 else 900.0
    # (with a finished run's compaction: lua/compact.lua's commands)
    lua_per = sum(lua.values()) / n + compaction["inside_lua_commands"]
    result: dict[str, Any] = {
        "bench": "hitl",
        "mode": args.mode,
        "runs": n,
        "workers": args.workers,
        "partitions": args.partitions,
        "load_avg": load_average(),
        "private_redis": own_redis,
        "completed_once": check["completed_once"],
        "problems": check["problems"],
        "start_rate": round(start_rate, 1),
        "resume_rate": round(resume_rate, 1),
        "lifecycles_per_s": round(e2e, 1),
        "resume_latency_light_ms": light,
        "resume_latency_light_from_send_ms": light_sent,
        "resume_latency_under_load_ms": under_load,
        "top_level_commands_per_lifecycle": round(top_with_compaction, 2),
        "top_level_commands_per_lifecycle_before_compaction": round(top_per, 2),
        "compaction_per_finished_run": compaction,
        "top_level_commands": dict(top),
        "lua_commands_per_lifecycle": round(lua_per, 2),
        "background_commands": dict(background),
        "connection_setup_commands": dict(setup),
        "idle_commands_per_s": idle_rate,
        "round_trips_per_lifecycle": round(rt_per, 2),
        "round_trips": {"start": rt_start, "resume": rt_resume},
        "redis_bytes_per_suspended_run": round(mem_per_run),
        "redis_used_memory_delta_per_run": round(mem_total_per_run),
        "redis_key_bytes_sample": raw.get("key_bytes", {}),
        "worker_rss_kb_idle": rss_idle,
        "worker_rss_kb_suspended": rss_susp,
        "worker_rss_growth_mb": round(rss_growth_mb, 2),
        "worker_rss_kb_after_all_completed": [w["rss_kb"] for w in resume.after.workers],
        "worker_tasks_idle": tasks_idle,
        "worker_tasks_suspended": tasks_susp,
        "worker_threads_idle": threads_idle,
        "worker_threads_suspended": threads_susp,
        "cpu_us_per_lifecycle": {**cpu, "redis_server_info": redis_cpu},
        "cpu_system_share": system_share,
        "cpu_bound_lifecycles_per_s": round(cpu_bound),
        "other_processes_cores_busy": round(other_cores, 2),
        **_finished(raw),
        "ceiling": raw.get("ceiling", {}),
        "fraction_of_ceiling": fraction(e2e, raw.get("ceiling", {})),
    }
    ok_light = light["p50"] <= 2 and light["p99"] <= 10 if light["n"] else None
    no_task_per_run = (
        all(s <= i for s, i in zip(tasks_susp, tasks_idle, strict=True))
        and threads_susp == threads_idle
    )
    done = check["completed_once"]
    rows: list[Row] = [
        ("runs completed exactly once", f"{done}/{n}", f"{n}/{n}", verdict(done == n)),
        ("start rate (suspended/s)", f"{start_rate:,.0f}", "", ""),
        ("resume rate (completed/s)", f"{resume_rate:,.0f}", "", ""),
        (
            "lifecycles/s end to end",
            f"{e2e:,.0f}",
            f">= {e2e_target:,.0f} ({args.workers} workers)",
            verdict(e2e >= e2e_target),
        ),
        ("resume latency light p50/p95/p99 ms", _p3(light), "<= 2 / - / 10", verdict(ok_light)),
        ("  same, from answer sent", _p3(light_sent), "", ""),
        ("resume latency under load p50/p95/p99 ms", _p3(under_load), "1 ms resolution", ""),
        (
            "top-level Redis commands / lifecycle",
            f"{top_with_compaction:.2f} = {top_per:.2f} {dict(top)}"
            f" + compaction {compaction['top_level_commands']:.2f}"
            f" {compaction['top_level']}",
            "<= 8",
            verdict(top_with_compaction <= 8.05),
        ),
        ("commands inside Lua / lifecycle", f"{lua_per:.1f}", "", ""),
        ("client round trips / lifecycle", f"{rt_per:.2f}", "", ""),
        ("background during run (not counted)", str(dict(background)), "", ""),
        ("connection setup during run (not counted)", str(dict(setup)), "", ""),
        ("idle polling, commands/s (K workers)", str(idle_rate), "", ""),
        (
            "Redis bytes / suspended run (dataset"
            + (", Redis defaults)" if result["redis_at_defaults"] else ", settings changed)"),
            f"{mem_per_run:,.0f}",
            "<= 1536",
            verdict(mem_per_run <= 1536),
        ),
        ("  used_memory delta / run", f"{mem_total_per_run:,.0f}", "", ""),
        ("  MEMORY USAGE by key (sample)", str(raw.get("key_bytes", {})), "", ""),
        (
            "worker RSS KB idle -> suspended",
            f"{rss_idle} -> {rss_susp}",
            "growth <= 20 MB",
            verdict(rss_growth_mb <= 20),
        ),
        (
            "worker asyncio tasks idle -> suspended",
            f"{tasks_idle} -> {tasks_susp}",
            "no task per run",
            verdict(no_task_per_run),
        ),
        ("worker threads idle -> suspended", f"{threads_idle} -> {threads_susp}", "", ""),
        ("CPU us / lifecycle", str(result["cpu_us_per_lifecycle"]), "", ""),
        ("  of which the compaction after the end", str(compaction["cpu_us"]), "", ""),
        ("  share in the kernel (system calls)", str(result["cpu_system_share"]), "", ""),
        (
            "  => lifecycles/s if all cores were ours",
            f"{cpu_bound:,.0f}",
            f">= {e2e_target:,.0f}",
            verdict(cpu_bound >= e2e_target),
        ),
        *item_1_rows(cpu, redis_cpu, e2e, args.workers),
        ("other processes' load during run (cores)", f"{other_cores:.2f}", "", ""),
        *_finished_rows(result),
        *ceiling_rows(result),
    ]
    notes = [
        f"load average at the end: {result['load_avg']} on {_cpus()} CPUs (shared machine)",
        "light latency: resume_hook returned -> the driver's blocking XREAD returned"
        f" workflow.completed; {light['n']} runs answered at {probe.get('rate', 0):g}/s"
        " while the N runs were suspended",
        "under-load latency: workflow.completed id ms - hook.received id ms (Redis clock)",
    ]
    if result["ceiling"]:
        notes.append(f"ceiling measured with {result['ceiling']['how']}")
    if not own_redis:
        notes.append(
            "--redis given: INFO commandstats/memory are server-wide, other clients count too"
        )
    return result, rows, notes


def _compaction(
    raw: dict[str, Any], idle0: Snapshot, idle1: Snapshot, per_pass: int
) -> dict[str, Any]:
    """What compacting a finished run costs, per run: its commands and the CPU of each
    process but the driver (which only polls for the end). Runs are compacted seconds after
    they end, in the window after the resume phase, which is mostly idle: what an idle
    window spends in as long is taken off. A probe run compacted before that window is
    counted in the resume phase instead (its cost is then in the lifecycle figures)."""
    phase: Phase = raw["compaction"]
    runs = max(1, int(raw["finished"]["runs"]))
    idle_wall = idle1.wall - idle0.wall
    share = (phase.after.wall - phase.before.wall) / idle_wall if idle_wall > 0 else 0.0

    def busy(before: float, after: float, idle_before: float, idle_after: float) -> int:
        """CPU µs per run, less an idle window's share."""
        used = after - before - (idle_after - idle_before) * share
        return max(0, round(used / runs * 1e6))

    calls = command_breakdown(phase.before, phase.after, per_pass)
    idle = command_breakdown(idle0, idle1, per_pass)["top_level"]
    # The compactor's commands: an XREAD of a partition's streams and two scripts
    # (lua/read_hooks.lua, lua/compact.lua) per partition's runs that ended together.
    inside = dict(calls["inside_lua"])
    less_idle = {
        name: round(n - idle.get(name, 0) * share) for name, n in calls["top_level"].items()
    }
    commands = {name: n for name, n in less_idle.items() if n > 0}
    return {
        "runs": runs,
        "top_level_commands": round(sum(commands.values()) / runs, 2),
        "top_level": commands,
        "inside_lua_commands": round(sum(inside.values()) / runs, 2),
        "cpu_us": {
            label: busy(before, phase.after.cpu[label], idle0.cpu[label], idle1.cpu[label])
            for label, before in phase.before.cpu.items()
            if label != "driver"
        },
        "redis_cpu_us": busy(
            phase.before.redis_cpu, phase.after.redis_cpu, idle0.redis_cpu, idle1.redis_cpu
        ),
    }


def _finished(raw: dict[str, Any]) -> dict[str, Any]:
    finished = raw.get("finished", {})
    runs = max(1, int(finished.get("runs", 0)))
    config = raw.get("redis_config", {})
    return {
        "redis_bytes_per_finished_run": round(finished.get("dataset_delta", 0) / runs),
        "redis_used_memory_delta_per_finished_run": round(
            finished.get("used_memory_delta", 0) / runs
        ),
        "redis_key_bytes_finished_sample": finished.get("key_bytes", {}),
        "redis_config": config,
        "redis_at_defaults": all(config.get(k) == v for k, v in REDIS_DEFAULTS.items()),
    }


def _finished_rows(result: dict[str, Any]) -> list[Row]:
    per = result["redis_bytes_per_finished_run"]
    return [
        ("Redis bytes / finished run (dataset)", f"{per:,}", "<= 1024", verdict(per <= 1024)),
        (
            "  used_memory delta / finished run",
            f"{result['redis_used_memory_delta_per_finished_run']:,}",
            "",
            "",
        ),
        (
            "  MEMORY USAGE by key, finished (sample)",
            str(result["redis_key_bytes_finished_sample"]),
            "",
            "",
        ),
        (
            "Redis settings in effect",
            settings_text(result["redis_config"]),
            "",
            "",
        ),
    ]


def _p3(p: dict[str, float]) -> str:
    return f"{p['p50']}/{p['p95']}/{p['p99']}"


# Issue 14, item 1: CPU per HITL lifecycle (driver, workers and Redis, compaction
# included) and the rate they allow with 2 workers on the 2-core machine. Timed
# figures: met or missed depends on the machine's hour as much as on the code, so they
# are printed beside the ceiling, never asserted in a test.
WORKERS_US_TARGET = 300
TOTAL_US_TARGET = 800
TWO_WORKER_RATE_TARGET = 2500


def workers_cpu_us(cpu: dict[str, int]) -> int:
    """The workers' part of a run's CPU µs per lifecycle (its ``worker0``, ``worker1``...)."""
    return sum(us for label, us in cpu.items() if label.startswith("worker"))


def item_1_rows(cpu: dict[str, int], redis_cpu: int, e2e: float, workers: int) -> list[Row]:
    workers_us = workers_cpu_us(cpu)
    total_us = sum(cpu.values())
    rows: list[Row] = [
        (
            "  workers' CPU us / lifecycle (issue 14)",
            f"{workers_us:,}",
            f"<= {WORKERS_US_TARGET}",
            verdict(workers_us <= WORKERS_US_TARGET),
        ),
        (
            "  total CPU us / lifecycle (issue 14)",
            f"{total_us:,} (Redis by INFO: {redis_cpu:,})",
            f"<= {TOTAL_US_TARGET}",
            verdict(total_us <= TOTAL_US_TARGET),
        ),
    ]
    if workers == 2:
        rows.append(
            (
                "  lifecycles/s with 2 workers (issue 14)",
                f"{e2e:,.0f}",
                f">= {TWO_WORKER_RATE_TARGET:,}",
                verdict(e2e >= TWO_WORKER_RATE_TARGET),
            )
        )
    return rows


def _share(part: float, whole: float) -> float:
    return round(part / whole, 3) if whole > 0 else 0.0


def _cpus() -> int:
    return os.cpu_count() or 0
