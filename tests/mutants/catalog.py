"""Mutants: each one disables one guarantee of the engine, and the few tests named with it
must fail (``python -m tests.mutants.run``, and ``tests/test_mutants.py`` in CI).

Every location is here, in one file: when code moves, re-target ``path`` and ``old``. A
mutant whose ``old`` snippet does not occur exactly once in ``path`` is *stale* and fails
loudly (it would otherwise test nothing).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    path: str  # repository-relative file
    old: str  # an exact snippet, occurring exactly once in that file
    new: str  # its replacement, which disables one guarantee
    tests: tuple[str, ...]  # pytest node ids that must fail (the first failure stops)


SCRIPTS = "runtime/_scripts.py"
RUNTIME_TESTS = "tests/runtime"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="apply_fence_check",
        path=SCRIPTS,
        old="if redis.call('HGET', run, 'fence') ~= ARGV[1] then return {'lost'} end",
        new="-- (mutant) no fence check: a worker that lost its lease writes anyway",
        tests=(
            f"{RUNTIME_TESTS}/test_races.py::test_a_write_after_the_run_was_cancelled_is_refused",
            f"{RUNTIME_TESTS}/test_races.py::test_a_worker_that_lost_its_lease_cannot_write",
        ),
    ),
    Mutant(
        name="apply_suspend_refusal",
        path=SCRIPTS,
        old="local refuse = mode == 'suspend' and #external > 0",
        new="local refuse = false  -- (mutant) suspends although an answer arrived",
        tests=(
            f"{RUNTIME_TESTS}/test_step_hook.py::test_answer_from_inside_on_created_is_not_lost",
        ),
    ),
    Mutant(
        name="fire_due_fires_nothing",
        path=SCRIPTS,
        old="redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT'",
        new="redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(0', 'LIMIT'",
        tests=(
            f"{RUNTIME_TESTS}/test_deadlines.py::test_a_due_deadline_fires_and_a_later_one_waits",
        ),
    ),
    Mutant(
        name="fire_due_fires_early",
        path=SCRIPTS,
        old="redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT'",
        new="redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'LIMIT'",
        tests=(
            f"{RUNTIME_TESTS}/test_deadlines.py::test_a_due_deadline_fires_and_a_later_one_waits",
        ),
    ),
    Mutant(
        name="partition_spread",
        path="runtime/_keys.py",
        old="return zlib.crc32(run_id.encode()) % partitions",
        new="return 0  # (mutant) every run in partition 0",
        tests=(f"{RUNTIME_TESTS}/test_partitions.py::test_runs_spread_over_every_partition",),
    ),
    Mutant(
        name="suspend_is_base_exception",
        path="runtime/_execution.py",
        old="class Suspend(BaseException):",
        new="class Suspend(Exception):",
        tests=(
            f"{RUNTIME_TESTS}/test_step_hook.py"
            "::test_except_exception_around_a_wait_cannot_swallow_the_suspension",
        ),
    ),
    Mutant(
        name="resume_answer_dedup",
        path=SCRIPTS,
        old="if redis.call('HGET', KEYS[3], ARGV[2] .. '!p') == ARGV[8] then",
        new="if redis.call('HGET', KEYS[3], ARGV[2] .. '!p') ~= ARGV[8] then",
        tests=(f"{RUNTIME_TESTS}/test_answers.py::test_duplicate_and_conflicting_answers",),
    ),
    Mutant(
        name="heartbeat_cancels_lost_execution",
        path="runtime/worker.py",
        old="                    task.cancel()",
        new="                    pass  # (mutant) the execution goes on after losing its lease",
        tests=(
            f"{RUNTIME_TESTS}/test_races.py::test_cancel_stops_a_running_step_at_the_next_heartbeat",
        ),
    ),
    Mutant(
        name="apply_acks_task",
        path=SCRIPTS,
        old="redis.call('XACK', KEYS[5], 'workers', msg)",
        new="-- (mutant) no XACK: the task stays pending after suspend/finish",
        tests=(f"{RUNTIME_TESTS}/test_step_hook.py::test_seed_review_step_end_to_end",),
    ),
    Mutant(
        name="resume_refuses_expired_hook",
        path=SCRIPTS,
        old="if st == 'E' then return {'expired'} end",
        new="-- (mutant) an answer after the expiry is recorded too",
        tests=(f"{RUNTIME_TESTS}/test_deadlines.py::test_an_answer_after_the_expiry_is_refused",),
    ),
    # Observable only in a `parley worker` subprocess: caught only if the worker processes
    # the tests start import the mutated copy (a canary for the runner itself).
    Mutant(
        name="crash_points_disarmed",
        path="runtime/_faults.py",
        old="os.kill(os.getpid(), signal.SIGKILL)",
        new="pass  # (mutant) crash points do nothing",
        tests=(f"{RUNTIME_TESTS}/test_crash_points.py::test_crash_at[after_step_start]",),
    ),
)


def by_name(names: list[str] | tuple[str, ...]) -> list[Mutant]:
    """The mutants named (all of them for none); an unknown name is an error."""
    if not names:
        return list(MUTANTS)
    known = {m.name: m for m in MUTANTS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown mutant(s) {unknown}; known: {sorted(known)}")
    return [known[n] for n in names]
