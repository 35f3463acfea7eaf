"""A ledger file shared by concurrent runs is never overspent (issue 13, finding 4).

Each process runs the library's own charge path, ``userdp.cli.ledger.charge`` (what every ``--ledger``
subcommand calls), against one ledger file. The processes are forked so that they start at a barrier
with the test's imports (and any monkeypatching of the library) in place.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from pathlib import Path

import pytest

from userdp.cli import ledger as cli_ledger
from userdp.errors import BudgetExceededError
from userdp.privacy import Neighbours, PureDP, Session

REPLACE = Neighbours.REPLACE_USER
_CTX = mp.get_context("fork")


def _charge_many(ledger: str, epsilon: float, attempts: int, barrier, results) -> None:
    """One CLI run after another: charge ``attempts`` releases of ``epsilon`` (replace one user)."""
    args = argparse.Namespace(ledger=ledger, command="distinct")
    barrier.wait()
    successes = 0
    for _ in range(attempts):
        try:
            cli_ledger.charge(args, PureDP(epsilon, neighbours=REPLACE), "toy")
            successes += 1
        except BudgetExceededError:
            pass
    results.put(successes)


def test_concurrent_charges_never_overspend(tmp_path: Path) -> None:
    """8 processes x 6 attempts of 0.07 against a budget of 1: exactly 14 succeed (0.98), and the ledger
    records exactly those 14. Without the lock, charges are lost or the budget is overspent."""
    ledger = tmp_path / "ledger.json"
    Session(PureDP(1.0, neighbours=REPLACE)).save(ledger)
    n_processes, attempts, epsilon = 8, 6, 0.07
    barrier, results = _CTX.Barrier(n_processes), _CTX.Queue()
    procs = [
        _CTX.Process(target=_charge_many, args=(str(ledger), epsilon, attempts, barrier, results), daemon=True)
        for _ in range(n_processes)
    ]
    for p in procs:
        p.start()
    successes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    recorded = json.loads(ledger.read_text())["entries"]
    fits = int(1.0 / epsilon)  # 14
    assert sum(successes) == len(recorded) == fits, (successes, len(recorded))
    total = sum(e["guarantee"]["epsilon"] for e in recorded)
    assert total == pytest.approx(fits * epsilon) and total <= 1.0


def _charge_once(ledger: str, epsilon: float, go, started, results) -> None:
    go.wait()
    started.set()
    try:
        cli_ledger.charge(argparse.Namespace(ledger=ledger, command="heatmap"), PureDP(epsilon, neighbours=REPLACE), "")
        results.put("charged")
    except BudgetExceededError:
        results.put("refused")


def test_a_run_waits_for_the_lock_and_rereads_the_ledger(tmp_path: Path) -> None:
    """While one process holds the ledger (Session.locked) and charges 0.9 of 1.0, a concurrent run that
    charges 0.9 must wait, then see the first charge and be refused. Deterministic: the holder keeps the
    lock well after the other run has started charging. (The other process is forked before the lock is
    taken: a child forked while the lock is held would share the parent's lock.)"""
    ledger = tmp_path / "ledger.json"
    Session(PureDP(1.0, neighbours=REPLACE)).save(ledger)
    go, started, results = _CTX.Event(), _CTX.Event(), _CTX.Queue()
    other = _CTX.Process(target=_charge_once, args=(str(ledger), 0.9, go, started, results), daemon=True)
    other.start()
    with Session.locked(ledger) as session:
        session.charge(PureDP(0.9, neighbours=REPLACE), "first")
        go.set()
        assert started.wait(timeout=60)
        time.sleep(0.5)  # ample time for the other run to finish if nothing made it wait
        assert results.empty(), "the other run charged while the ledger was locked"
    assert results.get(timeout=60) == "refused"
    other.join(timeout=60)
    after = Session.load(ledger)
    assert [e.label for e in after.ledger] == ["first"]
    assert after.spent().epsilon == pytest.approx(0.9)


def test_nothing_is_written_when_the_locked_block_raises(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    Session(PureDP(1.0, neighbours=REPLACE)).save(ledger)
    before = ledger.read_text()
    with pytest.raises(BudgetExceededError), Session.locked(ledger) as s:
        s.charge(PureDP(0.5, neighbours=REPLACE), "fits")
        s.charge(PureDP(0.6, neighbours=REPLACE), "does not fit")
    assert ledger.read_text() == before
    with Session.locked(ledger) as s:  # the lock was released
        assert s.ledger == []
