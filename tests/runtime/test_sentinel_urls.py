"""Store URLs of Sentinel deployments and of the ``?wait=N`` durability mode: what they
name, and the clear error (saying what was expected) for each malformed one. No server."""

from __future__ import annotations

import pytest

from runtime import Runtime, UsageError
from runtime.settings import REPLICA_WAIT_TIMEOUT_MS
from runtime.store import open_store
from runtime.store.redis._connect import (
    Durability,
    SentinelTarget,
    connect,
    durability_of,
    parse_sentinel_url,
)


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_db() -> None:
    url = "redis+sentinel://:s%40cret@10.0.0.1:26380,sentinel-b,10.0.0.3:5000/orders/3"
    assert parse_sentinel_url(url) == SentinelTarget(
        sentinels=(("10.0.0.1", 26380), ("sentinel-b", 26379), ("10.0.0.3", 5000)),
        service="orders",
        db=3,
        password="s@cret",
    )


def test_a_sentinel_url_takes_a_user_and_the_sentinels_password() -> None:
    target = parse_sentinel_url("redis+sentinel://app:pw@h:1/svc?sentinel_password=spw&wait=1")
    assert (target.username, target.password, target.sentinel_password, target.db) == (
        "app",
        "pw",
        "spw",
        0,
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis+sentinel://h:26379", "the master's service name"),
        ("redis+sentinel://h:26379/", "the master's service name"),
        ("redis+sentinel://h:26379/svc/zero", "the master's service name"),
        ("redis+sentinel://h:26379/svc/0/extra", "the master's service name"),
        ("redis+sentinel://h:port/svc", "each sentinel as host or host:port, got 'h:port'"),
        ("redis+sentinel://h:1,,h:2/svc", "each sentinel as host or host:port, got ''"),
        ("redis+sentinel://h:99999/svc", "each sentinel as host or host:port"),
        ("redis+sentinel://h/svc?db=2", "got 'db'"),
        ("redis+sentinel://h/svc?socket_timeout=1", "got 'socket_timeout'"),
    ],
)
def test_a_malformed_sentinel_url_says_what_was_expected(url: str, expected: str) -> None:
    with pytest.raises(UsageError, match="expected") as raised:
        parse_sentinel_url(url)
    assert expected in str(raised.value)


def test_an_error_never_shows_the_password() -> None:
    with pytest.raises(UsageError) as raised:
        parse_sentinel_url("redis+sentinel://app:hunter2@h:1")
    assert "hunter2" not in str(raised.value)
    assert "app:***@h:1" in str(raised.value)


def test_the_durability_mode_is_opt_in_and_read_from_the_url() -> None:
    assert durability_of("redis://127.0.0.1:6379/0") is None
    assert durability_of("redis+sentinel://h/svc") is None
    assert durability_of("redis://h:6379/0?wait=1") == Durability(1, REPLICA_WAIT_TIMEOUT_MS)
    assert durability_of("unix:///tmp/r.sock?wait=2&wait_timeout=250") == Durability(2, 250)
    assert durability_of("redis+sentinel://h/svc/0?wait=1&wait_timeout=5000") == Durability(1, 5000)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://h/0?wait=0", "expected 'wait' to be a number of replicas from 1 to 16"),
        ("redis://h/0?wait=", "expected 'wait' to be a number of replicas"),
        ("redis://h/0?wait=one", "got 'one'"),
        ("redis://h/0?wait_timeout=100", "expected 'wait' to be a number of replicas"),
        ("redis://h/0?wait=1&wait_timeout=0", "'wait_timeout' to be milliseconds from 1 to"),
        ("redis://h/0?wait=1&wait_timeout=60000", "'wait_timeout' to be milliseconds"),
        ("redis+cluster://h:1,h:2?wait=1", "on Redis Cluster it is per node"),
        ("memory://x?wait=1", "the embedded store has no replicas"),
    ],
)
def test_a_bad_durability_parameter_is_refused_clearly(url: str, expected: str) -> None:
    with pytest.raises(UsageError, match="expected") as raised:
        durability_of(url)
    assert expected in str(raised.value)
    with pytest.raises(UsageError):  # before any connection is attempted
        connect(url)


def test_a_runtime_refuses_a_bad_store_url_before_connecting() -> None:
    with pytest.raises(UsageError, match="service name"):
        Runtime("redis+sentinel://127.0.0.1:1", partitions=2)
    with pytest.raises(UsageError, match="per node"):
        open_store("redis+cluster://127.0.0.1:1?wait=1", partitions=2)


def test_the_durability_parameters_are_not_passed_to_redis_py() -> None:
    # redis-py would take ``wait`` as a connection option and fail on the first command.
    client = connect("redis://127.0.0.1:1/0?wait=1&wait_timeout=300&socket_timeout=2")
    kwargs = client.connection_pool.connection_kwargs
    assert "wait" not in kwargs and "wait_timeout" not in kwargs
    assert kwargs["socket_timeout"] == 2
