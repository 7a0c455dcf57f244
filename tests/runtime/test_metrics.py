"""The process's instruments as Prometheus scrapes them (runtime/metrics.py)."""

from __future__ import annotations

from prometheus_client import generate_latest

from runtime.metrics import Metrics


def _samples(metrics: Metrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {
        name: float(value)
        for name, _, value in (line.rpartition(" ") for line in text.splitlines())
        if name and not name.startswith("#")
    }


def test_executions_are_counted_by_outcome() -> None:
    metrics = Metrics()
    for outcome in ("suspended", "completed", "suspended", "failed"):
        metrics.executed(outcome)
    samples = _samples(metrics)
    assert samples['parley_executions_total{outcome="suspended"}'] == 2
    assert samples['parley_executions_total{outcome="completed"}'] == 1
    assert samples['parley_executions_total{outcome="failed"}'] == 1


def test_resume_latency_buckets_count_the_values_at_most_their_bound() -> None:
    metrics = Metrics()
    for seconds in (0.0005, 0.001, 0.0011, 0.3, 7.0):
        metrics.resumed(seconds)
    samples = _samples(metrics)
    bucket = 'parley_resume_latency_seconds_bucket{le="%s"}'
    assert samples[bucket % "0.001"] == 2  # 0.001 itself is at most 0.001
    assert samples[bucket % "0.002"] == 3
    assert samples[bucket % "0.25"] == 3
    assert samples[bucket % "0.5"] == 4
    assert samples[bucket % "5.0"] == 4
    assert samples[bucket % "+Inf"] == 5
    assert samples["parley_resume_latency_seconds_count"] == 5
    assert abs(samples["parley_resume_latency_seconds_sum"] - 7.3026) < 1e-9


def test_an_idle_process_exposes_both_families_empty() -> None:
    samples = _samples(Metrics())
    assert samples["parley_resume_latency_seconds_count"] == 0
    assert not [name for name in samples if name.startswith("parley_executions_total")]
