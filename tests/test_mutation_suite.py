"""The mutation suite (``tools/mutate.py``, mutants in ``tools/mutation``) stays runnable: every mutant still
applies to the code it names (its text occurs exactly once) and compiles, names tests that exist, and the
suite covers every kind of privacy-relevant parameter. CI runs the mutants themselves (``python3
tools/mutate.py``); this check keeps a refactor from silently turning a mutant into a no-op. One test runs a
cheap mutant through the runner's fork server, unmutated and mutated, so that the fork server keeps answering
what a fresh ``python -m pytest`` would."""

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


def test_the_fork_server_passes_a_baseline_and_kills_its_mutant(suite, tmp_path):
    """A mutant of the keyed streams (a test of a second or so): unmutated its tests pass in a child of the
    fork server, mutated they fail, and the runner reports it killed by the test that names the bug."""
    mutate, mutants, _, _ = suite
    m = next(m for m in mutants if m.id == "keyed-int-key-is-the-iv-key")
    work = mutate._copy_sources(tmp_path)
    server = mutate.ForkServer()
    try:
        assert mutate.baseline(m, work, 300, server.pytest).status == "passes"
        o = mutate.run_one(m, work, 300, server.pytest)
        assert (o.status, o.detail.split("::")[0]) == ("killed", "tests/test_keyed_streams.py")
        assert not server.unsafe  # the server forked: it did not fall back to a fresh interpreter
    finally:
        server.close()
    assert (work / "userdp" / m.path).read_text() == (mutate.SRC / m.path).read_text()


def test_the_fork_server_refuses_to_fork_holding_userdp_and_runs_spark_first(suite):
    """Here userdp is imported: a fork server in this state would hand its children this userdp, not the
    mutant, so it must see that it is unsafe. And the slow mutants (Spark's) start first."""
    mutate, mutants, _, _ = suite
    assert "userdp" in mutate._unsafe_modules()
    order = mutate.longest_first(mutants)
    assert sorted(order, key=lambda m: m.id) == sorted(mutants, key=lambda m: m.id)
    spark = [i for i, m in enumerate(order) if any("spark" in t for t in m.tests)]
    assert spark and max(spark) < len(order) // 2
