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


LUA = "runtime/store/redis/lua"
RUNTIME_TESTS = "tests/runtime"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="apply_fence_check",
        path=f"{LUA}/apply.lua",
        old="if rs[1] ~= req.fence then return {'lost'} end",
        new="-- (mutant) no fence check: a worker that lost its lease writes anyway",
        tests=(
            f"{RUNTIME_TESTS}/test_races.py::test_a_write_after_the_run_was_cancelled_is_refused",
            f"{RUNTIME_TESTS}/test_races.py::test_a_worker_that_lost_its_lease_cannot_write",
        ),
    ),
    Mutant(
        name="apply_suspend_refusal",
        path=f"{LUA}/apply.lua",
        old="local refused = suspension ~= nil and #arrived > 0",
        new="local refused = false  -- (mutant) suspends although an answer arrived",
        tests=(
            f"{RUNTIME_TESTS}/test_step_hook.py::test_answer_from_inside_on_created_is_not_lost",
        ),
    ),
    Mutant(
        name="apply_trusts_any_known_count",
        path=f"{LUA}/apply.lua",
        old="if req.known == (rs[2] or '0') then",
        new="if req.known ~= nil then  -- (mutant) never reads what arrived once told a count",
        tests=(
            f"{RUNTIME_TESTS}/test_step_hook.py::test_answer_from_inside_on_created_is_not_lost",
        ),
    ),
    Mutant(
        name="fire_due_fires_nothing",
        path=f"{LUA}/fire_due.lua",
        old="redis.call('ZRANGEBYSCORE', deadlines_key, '-inf', now, 'LIMIT'",
        new="redis.call('ZRANGEBYSCORE', deadlines_key, '-inf', '(0', 'LIMIT'",
        tests=(
            f"{RUNTIME_TESTS}/test_deadlines.py::test_a_due_deadline_fires_and_a_later_one_waits",
        ),
    ),
    Mutant(
        name="fire_due_fires_early",
        path=f"{LUA}/fire_due.lua",
        old="redis.call('ZRANGEBYSCORE', deadlines_key, '-inf', now, 'LIMIT'",
        new="redis.call('ZRANGEBYSCORE', deadlines_key, '-inf', '+inf', 'LIMIT'",
        tests=(
            f"{RUNTIME_TESTS}/test_deadlines.py::test_a_due_deadline_fires_and_a_later_one_waits",
        ),
    ),
    Mutant(
        name="partition_spread",
        path="runtime/store/redis/_keys.py",
        old="return zlib.crc32(key.encode()) % partitions",
        new="return 0  # (mutant) every run in partition 0",
        tests=(f"{RUNTIME_TESTS}/test_partitions.py::test_runs_spread_over_every_partition",),
    ),
    Mutant(
        name="suspend_is_base_exception",
        path="runtime/engine/signals.py",
        old="class Suspend(BaseException):",
        new="class Suspend(Exception):",
        tests=(
            f"{RUNTIME_TESTS}/test_step_hook.py"
            "::test_except_exception_around_a_wait_cannot_swallow_the_suspension",
        ),
    ),
    Mutant(
        name="resume_answer_dedup",
        path=f"{LUA}/resume.lua",
        old="if redis.call('HGET', keys.hooks, hook_id .. DIGEST_SUFFIX) == digest then",
        new="if redis.call('HGET', keys.hooks, hook_id .. DIGEST_SUFFIX) ~= digest then",
        tests=(f"{RUNTIME_TESTS}/test_answers.py::test_duplicate_and_conflicting_answers",),
    ),
    Mutant(
        name="heartbeat_cancels_lost_execution",
        path="runtime/worker/consumer.py",
        old="        task.cancel()\n        return True",
        new="        return True  # (mutant) the execution goes on after losing its lease",
        tests=(
            f"{RUNTIME_TESTS}/test_races.py::test_cancel_stops_a_running_step_at_the_next_heartbeat",
        ),
    ),
    Mutant(
        name="apply_acks_task",
        path=f"{LUA}/apply.lua",
        old="if msg then ack_task(keys.tasks, msg) end",
        new="-- (mutant) no XACK: the task stays pending after suspend/finish",
        tests=(f"{RUNTIME_TESTS}/test_step_hook.py::test_seed_review_step_end_to_end",),
    ),
    Mutant(
        name="resume_refuses_expired_hook",
        path=f"{LUA}/resume.lua",
        old="if state == HOOK_EXPIRED then return {'expired'} end",
        new="-- (mutant) an answer after the expiry is recorded too",
        tests=(f"{RUNTIME_TESTS}/test_deadlines.py::test_an_answer_after_the_expiry_is_refused",),
    ),
    Mutant(
        name="replay_check",
        path="runtime/engine/execution.py",
        old=(
            "            self.block(position, recorded.describe(), "
            "Call(kind, name, digest).describe())"
        ),
        new="            pass  # (mutant) a call that differs from the log is replayed anyway",
        tests=(
            f"{RUNTIME_TESTS}/test_nondeterminism.py::"
            "test_a_changed_workflow_is_blocked_then_retried_with_the_right_code[redis-swap]",
        ),
    ),
    Mutant(
        name="step_hook_rename_check",
        path="runtime/engine/steps.py",
        old="    if wait is None or wait == hook_id or wait in scope.consumed:",
        new="    if True:  # (mutant) a renamed step_hook asks the person again",
        tests=(
            f"{RUNTIME_TESTS}/test_nondeterminism.py::"
            "test_a_changed_workflow_is_blocked_then_retried_with_the_right_code"
            "[redis-rename_step_hook]",
        ),
    ),
    Mutant(
        name="version_parking",
        path="runtime/store/redis/lua/claim.lua",
        old="  if not served then",
        new="  if false then  -- (mutant) any worker replays any version",
        tests=(f"{RUNTIME_TESTS}/test_versions.py::test_a_worker_parks_runs_of_another_version",),
    ),
    Mutant(
        name="compact_fence",
        path=f"{LUA}/compact.lua",
        old="FINISHED[status] and redis.call('XLEN', events) == length",
        new="FINISHED[status]  -- (mutant) swaps an archive older than the log",
        tests=(
            f"{RUNTIME_TESTS}/store/test_compaction.py"
            "::test_compaction_is_fenced_against_a_change_after_its_read",
        ),
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
