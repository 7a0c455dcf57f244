"""Randomized chaos: many runs with 1-3 sequential hooks; answers early, late, duplicated,
conflicting and after expiry; worker processes SIGKILLed at random moments. Every
invariant must hold for every run at the end. Reproduce with PARLEY_CHAOS_SEED=<seed>."""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

import pytest
import redis

from runtime import HookAlreadyAnswered, HookExpired, Runtime
from tests.processes import PARTITIONS, WorkerProcess

pytestmark = pytest.mark.e2e

RUNS = int(os.environ.get("PARLEY_CHAOS_RUNS", "200"))
MIN_KILLS = 20
EXPIRE_TIMEOUT = 0.4  # rounds planned to expire
ANSWER_TIMEOUT = 120.0  # rounds planned to be answered


async def test_chaos(redis_url: str) -> None:
    seed = int(os.environ.get("PARLEY_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"\nchaos seed: {seed} (PARLEY_CHAOS_SEED={seed} reproduces the plan)")
    rng = random.Random(seed)
    plans: list[list[str]] = [
        [rng.choice(["answer", "answer", "answer", "expire"]) for _ in range(rng.randint(1, 3))]
        for _ in range(RUNS)
    ]
    workers = [WorkerProcess(redis_url, "tests.apps.hitl_app", lease=1.0) for _ in range(3)]
    kills = 0
    accepted: dict[str, Any] = {}  # token -> the payload resume_hook acknowledged
    try:
        async with Runtime(redis_url, partitions=PARTITIONS) as rt:
            run_ids = []
            for plan in plans:
                timeouts = [EXPIRE_TIMEOUT if p == "expire" else ANSWER_TIMEOUT for p in plan]
                run_ids.append(await rt.start("chaos", timeouts))
            plan_of = dict(zip(run_ids, plans, strict=True))
            finished: set[str] = set()
            expired_tokens: set[str] = set()
            deadline = time.monotonic() + 240
            next_kill = time.monotonic() + rng.uniform(0.1, 0.4)
            while len(finished) < len(run_ids) or kills < MIN_KILLS:
                assert time.monotonic() < deadline, f"chaos did not converge (seed {seed})"
                if time.monotonic() >= next_kill:
                    victim = rng.randrange(len(workers))
                    workers[victim].kill()
                    workers[victim].stop()
                    workers[victim] = WorkerProcess(redis_url, "tests.apps.hitl_app", lease=1.0)
                    kills += 1
                    next_kill = time.monotonic() + rng.uniform(0.1, 0.5)
                for hook in await rt.list_hooks():
                    if hook.token in accepted or hook.token in expired_tokens:
                        continue
                    round_no = int(hook.hook_id.rsplit(".", 1)[1])
                    if plan_of[hook.run_id][round_no] == "expire":
                        expired_tokens.add(hook.token)
                        continue
                    payload = {"run": hook.run_id, "round": round_no}
                    await rt.resume_hook(hook.token, payload)
                    accepted[hook.token] = payload
                    if rng.random() < 0.3:  # a duplicate delivery: idempotent
                        assert await rt.resume_hook(hook.token, payload) is False
                    if rng.random() < 0.1:  # a conflicting answer: refused
                        with pytest.raises(HookAlreadyAnswered):
                            await rt.resume_hook(hook.token, {"other": True})
                for token in sorted(expired_tokens):  # answers arriving after expiry
                    run_id = token.split(":")[0]
                    hooks = {h.token: h for h in await rt.list_hooks(None, run_id=run_id)}
                    if hooks[token].status.value == "expired":
                        with pytest.raises(HookExpired) as late:
                            await rt.resume_hook(token, "too late")
                        assert type(late.value) is HookExpired  # not HookCancelled
                        expired_tokens.discard(token)
                for run_id in run_ids:
                    if run_id not in finished and (await rt.get_run(run_id)).status.finished:
                        finished.add(run_id)
                await asyncio.sleep(0.05)

            _check_invariants(rt, redis_url, run_ids, plan_of, accepted)
            for run_id in run_ids:
                result = await rt.wait(run_id, timeout=1)
                for round_no, outcome in enumerate(plan_of[run_id]):
                    if outcome == "expire":
                        assert result[round_no] == "timeout"
                    else:
                        assert result[round_no] == {"run": run_id, "round": round_no}
                events = await rt.events(run_id)
                types = [e.type for e in events]
                assert types.count("workflow.completed") == 1, (seed, run_id)
                assert types.count("hook.created") == len(plan_of[run_id]), (seed, run_id)
                for round_no in range(len(plan_of[run_id])):
                    hook_id = f"chaos_rounds-0.q.{round_no}"
                    outcomes = [
                        e.type
                        for e in events
                        if e.type in ("hook.received", "hook.expired")
                        and e.data["hook_id"] == hook_id
                    ]
                    assert len(outcomes) == 1, (seed, run_id, hook_id, outcomes)
    finally:
        for worker in workers:
            worker.stop()
    assert kills >= MIN_KILLS


def _check_invariants(
    rt: Runtime,
    redis_url: str,
    run_ids: list[str],
    plan_of: dict[str, list[str]],
    accepted: dict[str, Any],
) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        for p in range(PARTITIONS):
            prefix = f"parley:{{p:{p}}}:"
            assert client.xpending(prefix + "tasks", "workers")["pending"] == 0
            assert client.zcard(prefix + "deadlines") == 0
            assert client.scard(prefix + "pending") == 0
        assert not list(client.scan_iter("parley:*:ckpt"))
        answered_rounds = sum(p.count("answer") for p in plan_of.values())
        assert len(accepted) == answered_rounds
    finally:
        client.close()
