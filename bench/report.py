"""``python -m bench.report`` (or ``python -m bench.hitl --mode report``): every figure of
issue 14 in one run, one table and one JSON line.

Runs, each on its own private redis-server: the main mode with 1 worker and with 2
(followed, on the 2-worker server, by this machine's Redis ceiling), the rounds mode (resume
cost at rounds 1 / 100 / 1,000) and the idle mode (1 / 4 / 8 workers at 16 / 64
partitions). ``--quick`` shrinks each part (fewer runs, shorter windows) but keeps the
rounds and the cells. Progress goes to stderr; stdout is the table, then the JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from contextlib import redirect_stdout
from typing import Any

from .ceiling import ceiling_rows, fraction
from .common import Row, load_average, print_report, verdict
from .idle import idle_rows, run_idle
from .lifecycle import settings_text
from .rounds import rounds_rows, run_rounds
from .summary import item_1_rows


def _part(args: argparse.Namespace, **changes: Any) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "print": False, **changes})


def _shrunk(args: argparse.Namespace) -> argparse.Namespace:
    """``--quick``: smaller figures unless the command line asked for smaller still."""
    if not args.quick:
        return args
    return _part(
        args,
        runs=min(args.runs or 300, 300),
        warmup=min(args.warmup, 50),
        probe=min(args.probe, 20),
        idle_window=min(args.idle_window, 1.0),
        ceiling_scripts=min(args.ceiling_scripts, 30_000),
        samples=min(args.samples, 3),
        spread=min(args.spread, 1.0),
        print=getattr(args, "print", True),
    )


def _log(text: str) -> None:
    print(f"[report] {text}", file=sys.stderr, flush=True)


async def run_report(args: argparse.Namespace) -> dict[str, Any]:
    from .hitl import main_async  # the main mode, as the command line runs it

    args = _shrunk(args)
    runs = args.runs or 2000
    main: dict[int, dict[str, Any]] = {}
    with redirect_stdout(sys.stderr):
        for workers in (1, 2):
            _log(f"main mode, {runs} runs, {workers} worker(s)")
            ceiling = args.ceiling_scripts if workers == 2 else 0
            main[workers] = await main_async(
                _part(args, mode="main", runs=runs, workers=workers, ceiling_scripts=ceiling)
            )
        _log("rounds mode")
        rounds = await run_rounds(_part(args, mode="rounds"))
        _log("idle mode")
        idle_runs = 50 if args.quick else 200
        idle = await run_idle(_part(args, mode="idle"), idle_runs)
    ceiling = main[2].get("ceiling", {})
    for part in main.values():
        part["fraction_of_ceiling"] = fraction(part["lifecycles_per_s"], ceiling)
    problems = [
        *main[1]["problems"], *main[2]["problems"], *rounds["problems"], *idle["problems"]
    ]  # fmt: skip
    result: dict[str, Any] = {
        "bench": "report",
        "quick": args.quick,
        "load_avg": load_average(),
        "problems": problems,
        "completed_once": all(
            r["completed_once"] == r["runs"] for r in (main[1], main[2], rounds, idle)
        ),
        "summary": _summary(main, rounds, idle, ceiling),
        "main_1_worker": main[1],
        "main_2_workers": main[2],
        "rounds": rounds,
        "idle": idle,
    }
    notes = [
        f"load average at the end: {result['load_avg']} (shared machine: figures vary)",
        "each part on its own private redis-server; see bench/README.md for how each is measured",
        f"ceiling measured with {ceiling.get('how', '-')}",
    ]
    if getattr(args, "print", True):
        print_report("parley benchmark report (issue 14)", _rows(main, rounds, idle), notes, result)
    return result


def _summary(
    main: dict[int, dict[str, Any]],
    rounds: dict[str, Any],
    idle: dict[str, Any],
    ceiling: dict[str, Any],
) -> dict[str, Any]:
    return {
        "lifecycles_per_s": {str(k): r["lifecycles_per_s"] for k, r in main.items()},
        "cpu_us_per_lifecycle": {str(k): r["cpu_us_per_lifecycle"] for k, r in main.items()},
        "ceiling_lifecycles_per_s": ceiling.get("lifecycles_per_s", 0),
        "fraction_of_ceiling": {str(k): r["fraction_of_ceiling"] for k, r in main.items()},
        "resume_ms_by_round": {k: v["latency_ms_median"] for k, v in rounds["per_resume"].items()},
        "idle_commands_per_s": {k: c["commands_per_s"] for k, c in idle["cells"].items()},
        "idle_lateness_p99_ms": {
            k: c["deadlines"].get("lateness_ms", {}).get("p99") for k, c in idle["cells"].items()
        },
        "bytes_per_suspended_run": main[2]["redis_bytes_per_suspended_run"],
        "bytes_per_finished_run": main[2]["redis_bytes_per_finished_run"],
        "redis_at_defaults": main[2]["redis_at_defaults"],
    }


def _rows(
    main: dict[int, dict[str, Any]], rounds: dict[str, Any], idle: dict[str, Any]
) -> list[Row]:
    rows: list[Row] = []
    for k, r in main.items():
        n = r["runs"]
        rows += [
            (f"{k} worker(s): runs completed exactly once", f"{r['completed_once']}/{n}",
             f"{n}/{n}", verdict(r["completed_once"] == n)),
            (f"{k} worker(s): lifecycles/s end to end", f"{r['lifecycles_per_s']:,.0f}", "", ""),
            (f"{k} worker(s): CPU us / lifecycle", str(r["cpu_us_per_lifecycle"]), "", ""),
            *item_1_rows(
                {p: us for p, us in r["cpu_us_per_lifecycle"].items() if p != "redis_server_info"},
                r["cpu_us_per_lifecycle"]["redis_server_info"],
                r["lifecycles_per_s"],
                k,
            ),
            (f"{k} worker(s): top-level commands / lifecycle",
             f"{r['top_level_commands_per_lifecycle']}", "<= 8",
             verdict(r["top_level_commands_per_lifecycle"] <= 8.05)),
            (f"{k} worker(s): resume latency light p50/p99 ms",
             f"{r['resume_latency_light_ms']['p50']}/{r['resume_latency_light_ms']['p99']}",
             "", ""),
        ]  # fmt: skip
    rows += ceiling_rows(main[2])
    rows.append(("  1 worker's fraction of it", f"{main[1]['fraction_of_ceiling']:.1%}", "", ""))
    rows += rounds_rows(rounds)
    rows += idle_rows(idle)
    r2 = main[2]
    defaults = "at Redis defaults" if r2["redis_at_defaults"] else "settings changed"
    rows += [
        (f"Redis bytes / suspended run ({defaults})",
         f"{r2['redis_bytes_per_suspended_run']:,}", "<= 1536",
         verdict(r2["redis_bytes_per_suspended_run"] <= 1536)),
        ("Redis bytes / finished run", f"{r2['redis_bytes_per_finished_run']:,}", "<= 1024",
         verdict(r2["redis_bytes_per_finished_run"] <= 1024)),
        ("  MEMORY USAGE by key, finished (sample)",
         str(r2["redis_key_bytes_finished_sample"]), "", ""),
        ("Redis settings in effect", settings_text(r2["redis_config"]), "", ""),
    ]  # fmt: skip
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from .hitl import parse_args

    args = parse_args(["--mode", "report", *(argv if argv is not None else sys.argv[1:])])
    result = asyncio.run(run_report(args))
    return 0 if not result["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
