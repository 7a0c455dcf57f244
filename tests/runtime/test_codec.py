"""runtime._codec: duration parsing and the canonical, size-limited JSON encoding."""

from __future__ import annotations

import dataclasses
import math
from datetime import timedelta
from decimal import Decimal
from typing import Any

import orjson
import pytest

from runtime._codec import dumps, encode_fragment, encode_value, loads, parse_duration
from runtime.errors import InvalidPayload, PayloadTooLarge, UsageError

# parse_duration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0.0),
        (5, 5.0),
        (2.5, 2.5),
        (0.001, 0.001),
        (10**9, 1e9),
        (timedelta(minutes=2, milliseconds=500), 120.5),
        (timedelta(0), 0.0),
        ("250ms", 0.25),
        ("30s", 30.0),
        ("5m", 300.0),
        ("24h", 86400.0),
        ("2d", 172800.0),
        ("1.5m", 90.0),
        ("0.5s", 0.5),
        ("45", 45.0),  # no unit: seconds
        ("0", 0.0),
        ("  30s  ", 30.0),
        ("30 s", 30.0),
        ("\t5m\n", 300.0),
    ],
)
def test_parse_duration_accepts(value: Any, seconds: float) -> None:
    result = parse_duration(value)
    assert isinstance(result, float)
    assert result == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value",
    ["", " ", "abc", "5x", "5 minutes", "m5", "1e3", "5mm", "1,5s", "s", "-5s", "+5s", "5.s"],
)
def test_parse_duration_rejects_bad_strings(value: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(value, what="sleep duration")
    message = str(caught.value)
    assert message.startswith("sleep duration must look like")
    assert "'30s'" in message and "'250ms'" in message  # what was expected
    assert f"got {value!r}" in message  # what arrived


@pytest.mark.parametrize("value", [-1, -0.5, timedelta(seconds=-3)])
def test_parse_duration_rejects_negatives(value: Any) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(value, what="timeout")
    message = str(caught.value)
    assert message.startswith("timeout must not be negative")
    assert f"got {value!r}" in message


@pytest.mark.parametrize("value", [True, False])
def test_parse_duration_rejects_bools(value: bool) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(value, what="retry_delay")
    message = str(caught.value)
    assert message.startswith("retry_delay must be seconds, a timedelta or a string")
    assert message.endswith("got a bool")


@pytest.mark.parametrize(
    ("value", "type_name"),
    [(None, "NoneType"), ([5], "list"), (b"5s", "bytes"), (Decimal("1.5"), "Decimal")],
)
def test_parse_duration_rejects_other_types(value: Any, type_name: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(value)
    message = str(caught.value)
    assert message.startswith("duration must be seconds, a timedelta or a string like '5m'")
    assert message.endswith(f"got {type_name}")


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_parse_duration_rejects_non_finite_numbers(value: float) -> None:
    with pytest.raises(UsageError):
        parse_duration(value, what="retention")


# encode_value -------------------------------------------------------------------------


def test_encode_value_is_canonical() -> None:
    a = encode_value({"b": 1, "a": {"z": [1, 2], "y": None}}, what="result", limit=1000)
    b = encode_value({"a": {"y": None, "z": [1, 2]}, "b": 1}, what="result", limit=1000)
    assert a == b == b'{"a":{"y":null,"z":[1,2]},"b":1}'
    assert loads(a) == {"a": {"y": None, "z": [1, 2]}, "b": 1}


def test_encode_value_of_plain_values() -> None:
    assert encode_value("hé", what="x", limit=100) == '"hé"'.encode()
    assert encode_value(None, what="x", limit=100) == b"null"  # a real null is fine
    assert encode_value([1.5, True], what="x", limit=100) == b"[1.5,true]"
    assert encode_value((1, 2), what="x", limit=100) == b"[1,2]"
    assert encode_value({1: "a"}, what="x", limit=100) == b'{"1":"a"}'  # keys made strings


def test_encode_value_limit_is_inclusive() -> None:
    value = "x" * 8  # encodes to 10 bytes with its quotes
    assert encode_value(value, what="answer", limit=10) == b'"xxxxxxxx"'
    with pytest.raises(PayloadTooLarge):
        encode_value(value, what="answer", limit=9)


def test_encode_value_too_large_says_size_limit_run_and_hook() -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        encode_value({"text": "y" * 100}, what="hook payload", limit=50, run_id="r-1", hook_id="h")
    error = caught.value
    assert isinstance(error, InvalidPayload)  # PayloadTooLarge is an InvalidPayload
    assert error.run_id == "r-1" and error.hook_id == "h"
    assert len(dumps({"text": "y" * 100})) == 111
    assert error.message == "hook payload is 111 bytes, the limit is 50"
    assert str(error) == "hook payload is 111 bytes, the limit is 50 (run=r-1, hook=h)"
    assert error.code == "payload_too_large"


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        math.inf,
        -math.inf,
        [1.0, math.nan],
        {"a": {"b": [math.inf]}},
        ({"deep": (1, [2, {"x": -math.inf}])},),
    ],
)
def test_encode_value_rejects_nan_and_infinity(value: Any) -> None:
    with pytest.raises(InvalidPayload) as caught:
        encode_value(value, what="step result", limit=10_000, run_id="r-2")
    assert not isinstance(caught.value, PayloadTooLarge)
    assert (
        caught.value.message == "step result contains NaN or Infinity, which JSON cannot represent"
    )
    assert caught.value.run_id == "r-2" and caught.value.hook_id is None


def test_encode_value_nan_check_is_not_fooled_by_null_text() -> None:
    # "null" in the encoding, but no non-finite float: accepted unchanged
    assert encode_value({"null": None, "s": "null"}, what="x", limit=100) == (
        b'{"null":null,"s":"null"}'
    )


@dataclasses.dataclass
class _Reading:
    value: float


def test_encode_value_rejects_nan_inside_a_dataclass() -> None:
    with pytest.raises(InvalidPayload):
        encode_value(_Reading(math.nan), what="step result", limit=1000)


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (object(), "object"),
        ({1, 2}, "set"),
        (b"bytes", "bytes"),
        (Decimal("1.5"), "Decimal"),
        ({"ok": [1, {"bad": object()}]}, "dict"),
        (2**70, "int"),  # beyond 64 bits
    ],
)
def test_encode_value_rejects_non_json_types(value: Any, type_name: str) -> None:
    with pytest.raises(InvalidPayload) as caught:
        encode_value(value, what="checkpoint", limit=10_000, run_id="r-3", hook_id="h-3")
    error = caught.value
    assert not isinstance(error, PayloadTooLarge)
    assert error.message.startswith(f"checkpoint must be JSON-serializable, got {type_name}: ")
    assert error.run_id == "r-3" and error.hook_id == "h-3"
    assert error.__cause__ is None  # `from None`: the orjson error is in the message


def test_dumps_and_loads_round_trip_canonically() -> None:
    value = {"z": 1, "a": [True, None, 1.25, "é"]}
    assert dumps(value) == b'{"a":[true,null,1.25,"\xc3\xa9"],"z":1}'
    assert loads(dumps(value)) == value
    assert loads('{"a":1}') == {"a": 1}


# encode_fragment ----------------------------------------------------------------------


def test_encode_fragment_embeds_the_encoded_value_as_is() -> None:
    encoded = encode_value({"b": 2, "a": 1}, what="payload", limit=100)
    data = encode_fragment("payload", encoded, hook_id="h0", type="answered")
    assert data == b'{"payload":{"a":1,"b":2},"hook_id":"h0","type":"answered"}'
    assert loads(data) == {"payload": {"a": 1, "b": 2}, "hook_id": "h0", "type": "answered"}


def test_encode_fragment_does_not_re_encode() -> None:
    # bytes kept verbatim (spacing included): the value is not parsed and dumped again
    data = encode_fragment("payload", b"[1, 2,  3]")
    assert data == b'{"payload":[1, 2,  3]}'
    assert loads(data) == {"payload": [1, 2, 3]}


def test_encode_fragment_with_scalars_and_no_fields() -> None:
    assert encode_fragment("payload", b"null") == b'{"payload":null}'
    assert encode_fragment("p", b'"x"', n=1, none=None) == b'{"p":"x","n":1,"none":null}'
    assert isinstance(orjson.loads(encode_fragment("p", b"1", q=[1])), dict)
