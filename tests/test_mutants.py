"""The safety net is checked with mutants (``tests/mutants``): each disables one guarantee
in a copy of the repository, and the tests that claim to guard it must fail there.

Each mutant runs in its own temporary copy against its own private redis-server, so these
tests share nothing with the rest of the suite or with each other (safe to run in
parallel, e.g. under pytest-xdist)."""

from __future__ import annotations

import pytest

from tests.mutants.catalog import MUTANTS, Mutant
from tests.mutants.run import ROOT, StaleMutant, check_snippet, run_mutant


def test_every_mutant_snippet_occurs_exactly_once() -> None:
    """Fast: a code move that makes a mutant stale fails here, naming the mutant."""
    stale = []
    for mutant in MUTANTS:
        try:
            check_snippet(mutant, ROOT)
        except StaleMutant as exc:
            stale.append(str(exc))
    assert not stale, "\n\n".join(stale)
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names), "two mutants share a name"
    assert all(m.tests for m in MUTANTS)


@pytest.mark.e2e
@pytest.mark.mutants
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(mutant: Mutant) -> None:
    result = run_mutant(mutant, ROOT)
    print(result.line())
    assert result.caught, f"{result.line()}\n{result.output[-4000:]}"
