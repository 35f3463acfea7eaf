"""The mutation suite (``tools/mutate.py``, mutants in ``tools/mutation``) stays runnable: every mutant still
applies to the code it names (its text occurs exactly once) and compiles, names tests that exist, and the
suite covers every kind of privacy-relevant parameter. CI runs the mutants themselves (``python3
tools/mutate.py``); this check keeps a refactor from silently turning a mutant into a no-op."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


@pytest.fixture(scope="module")
def suite():
    sys.path.insert(0, str(TOOLS))
    try:
        import mutate
        from mutation import CLASSES, KINDS, all_mutants

        yield mutate, all_mutants(), KINDS, CLASSES
    finally:
        sys.path.remove(str(TOOLS))


def test_every_mutant_applies_once_and_compiles(suite):
    mutate, mutants, _, _ = suite
    problems = {m.id: why for m in mutants if (why := mutate.check(m))}
    assert not problems


def test_the_suite_is_large_and_covers_every_kind_and_weakness(suite):
    _, mutants, kinds, classes = suite
    assert len(mutants) >= 60
    assert {m.kind for m in mutants} == set(kinds)
    assert {c for m in mutants for c in m.classes} == set(classes)
    assert len({m.id for m in mutants}) == len(mutants)


def test_a_mutant_that_changes_nothing_or_names_no_test_is_refused(suite):
    from mutation import Mutant

    with pytest.raises(ValueError, match="changes nothing"):
        Mutant("x", "sensitivity", "noise/mechanisms.py", "a", "a", ("tests/test_noise.py",), "")
    with pytest.raises(ValueError, match="names no test"):
        Mutant("x", "sensitivity", "noise/mechanisms.py", "a", "b", (), "")
    with pytest.raises(ValueError, match="unknown kind"):
        Mutant("x", "speed", "noise/mechanisms.py", "a", "b", ("tests/test_noise.py",), "")
