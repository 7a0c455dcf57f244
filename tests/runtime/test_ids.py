"""Ids and tokens: a trailing newline (which ``$`` would let through) is not an id."""

from __future__ import annotations

import pytest

from runtime import InvalidToken, RunNotFound, UsageError
from runtime.ids import check_name, check_run_id, check_session_id, parse_token

RUN = "r-" + "0" * 24


def test_a_well_formed_token_splits() -> None:
    assert parse_token(f"{RUN}:h0.approve") == (RUN, "h0.approve")


@pytest.mark.parametrize("suffix", ["\n", " ", "\r\n"])
def test_trailing_whitespace_is_not_part_of_an_id(suffix: str) -> None:
    with pytest.raises(InvalidToken):
        parse_token(f"{RUN}:abc{suffix}")
    with pytest.raises(InvalidToken):
        parse_token(f"{RUN}{suffix}:abc")
    with pytest.raises(RunNotFound):
        check_run_id(RUN + suffix)
    with pytest.raises(UsageError):
        check_session_id("s" * 20 + suffix)
    with pytest.raises(UsageError):
        check_name("approve" + suffix, "hook")
