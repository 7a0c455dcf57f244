"""Randomized chaos: many runs with 1-3 sequential hooks; answers early, late, duplicated,
conflicting and after expiry; worker processes SIGKILLed at random moments. Every
invariant must hold for every run at the end. Reproduce with PARLEY_CHAOS_SEED=<seed>.

The second test adds the store's faults: its own Redis with AOF (``appendfsync always``)
SIGKILLed and restarted under the running workers, one worker whose clock is 30 s ahead
(libfaketime), and at the end Redis restarted **empty**: runs started afterwards complete."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from runtime import HookAlreadyAnswered, HookExpired, Runtime, StoreUnavailable, WorkflowNotFound
from runtime.testing import RedisServer
from tests.processes import PARTITIONS, WorkerProcess
from tests.runtime.test_clock_skew import skewed_env

pytestmark = pytest.mark.e2e

RUNS = int(os.environ.get("PARLEY_CHAOS_RUNS", "200"))
MIN_KILLS = 20
EXPIRE_TIMEOUT = 0.4  # rounds planned to expire
ANSWER_TIMEOUT = 120.0  # rounds planned to be answered
APP = "tests.apps.hitl_app"


class Chaos:
    """The driver: answers what the plans say, kills workers (and Redis) on a random
    schedule, and records what each call acknowledged."""

    def __init__(
        self, rt: Runtime, rng: random.Random, seed: int, spawn: Callable[[int], WorkerProcess]
    ) -> None:
        self.rt = rt
        self.rng = rng
        self.seed = seed
        self.spawn = spawn
        self.workers = [spawn(i) for i in range(3)]
        self.kills = 0
        self.accepted: dict[str, Any] = {}  # token -> the payload resume_hook acknowledged
        self.expired_tokens: set[str] = set()
        self.plan_of: dict[str, list[str]] = {}

    async def start(self, plans: list[list[str]]) -> list[str]:
        run_ids = []
        for plan in plans:
            timeouts = [EXPIRE_TIMEOUT if p == "expire" else ANSWER_TIMEOUT for p in plan]
            run_id = await self.rt.start("chaos", timeouts)
            self.plan_of[run_id] = plan
            run_ids.append(run_id)
        return run_ids

    def kill_a_worker(self) -> None:
        victim = self.rng.randrange(len(self.workers))
        self.workers[victim].kill()
        self.workers[victim].stop()
        self.workers[victim] = self.spawn(victim)
        self.kills += 1

    async def drive(
        self,
        run_ids: list[str],
        *,
        min_kills: int,
        timeout: float,
        other_fault: Callable[[], None] | None = None,
    ) -> None:
        rng = self.rng
        finished: set[str] = set()
        deadline = time.monotonic() + timeout
        next_kill = time.monotonic() + rng.uniform(0.1, 0.4)
        next_fault = time.monotonic() + rng.uniform(1.0, 2.0)
        while len(finished) < len(run_ids) or self.kills < min_kills:
            assert time.monotonic() < deadline, f"chaos did not converge (seed {self.seed})"
            if time.monotonic() >= next_kill:
                self.kill_a_worker()
                next_kill = time.monotonic() + rng.uniform(0.1, 0.5)
            if other_fault is not None and time.monotonic() >= next_fault:
                other_fault()
                next_fault = time.monotonic() + rng.uniform(1.5, 3.0)
            try:
                await self._answer(finished, run_ids)
            except StoreUnavailable:
                # Redis is restarting: nothing the failed call did was acknowledged; the
                # next pass sends what is still pending again.
                await asyncio.sleep(0.1)
                continue
            await asyncio.sleep(0.05)

    async def _answer(self, finished: set[str], run_ids: list[str]) -> None:
        rt, rng = self.rt, self.rng
        for hook in await rt.list_hooks():
            if hook.token in self.accepted or hook.token in self.expired_tokens:
                continue
            round_no = int(hook.hook_id.rsplit(".", 1)[1])
            if self.plan_of[hook.run_id][round_no] == "expire":
                self.expired_tokens.add(hook.token)
                continue
            payload = {"run": hook.run_id, "round": round_no}
            await rt.resume_hook(hook.token, payload)
            self.accepted[hook.token] = payload
            if rng.random() < 0.3:  # a duplicate delivery: idempotent
                assert await rt.resume_hook(hook.token, payload) is False
            if rng.random() < 0.1:  # a conflicting answer: refused
                with pytest.raises(HookAlreadyAnswered):
                    await rt.resume_hook(hook.token, {"other": True})
        for token in sorted(self.expired_tokens):  # answers arriving after expiry
            run_id = token.split(":")[0]
            hooks = {h.token: h for h in await rt.list_hooks(None, run_id=run_id)}
            if hooks[token].status.value == "expired":
                with pytest.raises(HookExpired) as late:
                    await rt.resume_hook(token, "too late")
                assert type(late.value) is HookExpired  # not HookCancelled
                self.expired_tokens.discard(token)
        for run_id in run_ids:
            if run_id not in finished and (await rt.get_run(run_id)).status.finished:
                finished.add(run_id)

    async def check_runs(self, run_ids: list[str]) -> None:
        """Every run completed once, with every answer it was given applied once."""
        for run_id in run_ids:
            plan = self.plan_of[run_id]
            result = await self.rt.wait(run_id, timeout=1)
            for round_no, outcome in enumerate(plan):
                if outcome == "expire":
                    assert result[round_no] == "timeout"
                else:
                    assert result[round_no] == {"run": run_id, "round": round_no}
            events = await self.rt.events(run_id)
            types = [e.type for e in events]
            assert types.count("workflow.completed") == 1, (self.seed, run_id)
            assert types.count("hook.created") == len(plan), (self.seed, run_id)
            for round_no in range(len(plan)):
                hook_id = f"chaos_rounds-0.q.{round_no}"
                outcomes = [
                    e.type
                    for e in events
                    if e.type in ("hook.received", "hook.expired") and e.data["hook_id"] == hook_id
                ]
                assert len(outcomes) == 1, (self.seed, run_id, hook_id, outcomes)
        for token, payload in self.accepted.items():  # every acknowledged answer is there
            run_id = token.split(":")[0]
            if run_id in run_ids:
                round_no = int(token.rsplit(".", 1)[1])
                assert (await self.rt.wait(run_id, timeout=1))[round_no] == payload

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


def _plans(rng: random.Random, runs: int, outcomes: list[str]) -> list[list[str]]:
    return [[rng.choice(outcomes) for _ in range(rng.randint(1, 3))] for _ in range(runs)]


def _seed() -> tuple[int, random.Random]:
    seed = int(os.environ.get("PARLEY_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"\nchaos seed: {seed} (PARLEY_CHAOS_SEED={seed} reproduces the plan)")
    return seed, random.Random(seed)


async def test_chaos(redis_url: str) -> None:
    seed, rng = _seed()
    plans = _plans(rng, RUNS, ["answer", "answer", "answer", "expire"])
    chaos: Chaos | None = None
    try:
        async with Runtime(redis_url, partitions=PARTITIONS) as rt:
            chaos = Chaos(rt, rng, seed, lambda _: WorkerProcess(redis_url, APP, lease=1.0))
            run_ids = await chaos.start(plans)
            await chaos.drive(run_ids, min_kills=MIN_KILLS, timeout=240)
            _check_store_is_clean(redis_url)
            answered_rounds = sum(p.count("answer") for p in plans)
            assert len(chaos.accepted) == answered_rounds
            await chaos.check_runs(run_ids)
    finally:
        if chaos is not None:
            chaos.stop()
    assert chaos.kills >= MIN_KILLS


async def test_chaos_with_redis_restarts_a_skewed_clock_and_an_empty_restart() -> None:
    seed, rng = _seed()
    server = RedisServer("--appendonly", "yes", "--appendfsync", "always")
    chaos: Chaos | None = None
    restarts = 0

    def spawn(index: int) -> WorkerProcess:
        # worker 0 is 30 s ahead of the others, through every restart
        env = skewed_env("+30s") if index == 0 else {}
        return WorkerProcess(server.url, APP, lease=1.0, extra_env=env)

    def restart_redis() -> None:
        nonlocal restarts
        server.kill()  # SIGKILL: only what AOF (always) fsynced survives
        server.start()
        restarts += 1

    try:
        async with Runtime(server.url, partitions=PARTITIONS) as rt:
            chaos = Chaos(rt, rng, seed, spawn)
            run_ids = await chaos.start(_plans(rng, RUNS // 2, ["answer", "answer", "expire"]))
            await chaos.drive(
                run_ids, min_kills=MIN_KILLS // 2, timeout=240, other_fault=restart_redis
            )
            assert restarts >= 2
            print(f"Redis restarted {restarts} times, {chaos.kills} worker kills")
            _check_store_is_clean(server.url)
            await chaos.check_runs(run_ids)

            # Redis comes back empty: what it held is gone, the workers carry on.
            server.kill()
            shutil.rmtree(server.dir / "appendonlydir", ignore_errors=True)
            server.start()
            after = await _start_when_back(chaos, _plans(rng, 20, ["answer"]))
            await chaos.drive(after, min_kills=chaos.kills + 3, timeout=120)
            _check_store_is_clean(server.url)
            await chaos.check_runs(after)
    finally:
        if chaos is not None:
            chaos.stop()
        server.stop()


async def _start_when_back(chaos: Chaos, plans: list[list[str]]) -> list[str]:
    """Starts, once Redis answers and the workers have announced their workflows again."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return await chaos.start(plans)
        except (StoreUnavailable, WorkflowNotFound):
            assert time.monotonic() < deadline, "the store did not come back"
            await asyncio.sleep(0.1)


def _check_store_is_clean(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        for p in range(PARTITIONS):
            prefix = f"parley:{{p:{p}}}:"
            assert client.xpending(prefix + "tasks", "workers")["pending"] == 0
            assert client.zcard(prefix + "deadlines") == 0
            assert client.scard(prefix + "pending") == 0
        assert not list(client.scan_iter("parley:*:ckpt"))
    finally:
        client.close()
