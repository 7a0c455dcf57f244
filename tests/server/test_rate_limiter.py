"""The websocket's token bucket (server.ws.RateLimiter), on a clock the test moves."""

from __future__ import annotations

import pytest

from server.ws import RateLimiter


class Clock:
    """Stands in for ``time.monotonic`` in server.ws. The tests move it by binary-exact
    amounts (multiples of 1/8 s), so the bucket's arithmetic has no rounding to hide in."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("server.ws.time.monotonic", fake)
    return fake


def _allowed(limiter: RateLimiter, n: int) -> int:
    return sum(limiter.allow() for _ in range(n))


def test_a_burst_is_allowed_then_refused(clock: Clock) -> None:
    limiter = RateLimiter(rate=2.0, burst=5)
    assert [limiter.allow() for _ in range(5)] == [True] * 5
    assert limiter.allow() is False
    assert limiter.allow() is False  # no time passed: still refused


def test_refused_frames_cost_nothing(clock: Clock) -> None:
    limiter = RateLimiter(rate=1.0, burst=1)
    assert limiter.allow() is True
    assert _allowed(limiter, 100) == 0  # many refusals in a row...
    clock.advance(1.0)
    assert limiter.allow() is True  # ...do not push the next token further away


def test_tokens_refill_at_the_rate(clock: Clock) -> None:
    limiter = RateLimiter(rate=4.0, burst=4)
    assert _allowed(limiter, 10) == 4
    clock.advance(0.125)  # half a token
    assert limiter.allow() is False
    clock.advance(0.125)  # half + half = 1 token
    assert limiter.allow() is True
    assert limiter.allow() is False
    clock.advance(0.5)  # 2 tokens
    assert _allowed(limiter, 10) == 2


def test_partial_refills_accumulate(clock: Clock) -> None:
    limiter = RateLimiter(rate=1.0, burst=1)
    assert limiter.allow() is True
    for _ in range(3):
        clock.advance(0.25)
        assert limiter.allow() is False  # each refused call still counts the time passed
    clock.advance(0.25)
    assert limiter.allow() is True


def test_refill_is_capped_at_the_burst(clock: Clock) -> None:
    limiter = RateLimiter(rate=10.0, burst=3)
    assert _allowed(limiter, 3) == 3
    clock.advance(3600)  # an hour idle: 36000 tokens' worth, capped at 3
    assert _allowed(limiter, 10) == 3


def test_a_fresh_limiter_starts_full_but_not_above_burst(clock: Clock) -> None:
    limiter = RateLimiter(rate=100.0, burst=2)
    clock.advance(60)
    assert _allowed(limiter, 5) == 2


def test_sustained_rate_over_time(clock: Clock) -> None:
    limiter = RateLimiter(rate=6.0, burst=5)
    assert _allowed(limiter, 5) == 5
    allowed = 0
    for _ in range(80):  # 10 seconds in steps of 1/8 s, three tries a step
        clock.advance(0.125)
        allowed += _allowed(limiter, 3)
    assert allowed == 60  # the rate, whatever the callers try


def test_zero_rate_never_refills(clock: Clock) -> None:
    limiter = RateLimiter(rate=0.0, burst=2)
    assert _allowed(limiter, 3) == 2
    clock.advance(1e6)
    assert limiter.allow() is False


def test_zero_burst_refuses_everything(clock: Clock) -> None:
    limiter = RateLimiter(rate=100.0, burst=0)
    clock.advance(10)
    assert _allowed(limiter, 5) == 0
