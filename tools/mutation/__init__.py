"""userdp's mutation suite: small, realistic bugs in the privacy-relevant code, each of which the tests must
catch (``python3 tools/mutate.py``; see ``docs/development.md``).

A mutant is one exact text replacement in one file of ``src/userdp``. Its ``tests`` are the pytest node ids
of its area that must fail once it is applied: the runner applies it in a private copy of the sources, runs
those tests (``-x``), and reports it *killed* when they fail and *survived* when they pass. Every mutant
must be killed; a new sensitivity, noise scale, threshold, budget split, conversion, contribution bound,
keyed purpose or ledger charge gets its mutant in the same commit.

The mutants live in one module per area (``noise_privacy``, ``mechanisms``, ``engines``, ...), each holding a
``MUTANTS`` list; :func:`all_mutants` collects them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["KINDS", "CLASSES", "AREAS", "Mutant", "all_mutants"]

KINDS = {
    "sensitivity": "a sensitivity (l1, l2, per-candidate) used to calibrate noise or selection",
    "noise-scale": "the scale of the noise actually drawn, or the calibration behind it",
    "threshold": "a release threshold or its delta term",
    "budget-split": "how epsilon or delta is split between the steps of a release, and what is deducted",
    "conversion": "a conversion between guarantees or neighbour relations (and its accounting)",
    "contribution-bound": "a per-user contribution bound: its value, and that it is applied before any "
    "data-dependent choice",
    "keyed-purpose": "the purpose, key or stream a keyed per-user draw reads",
    "ledger-charge": "what a release charges to a Session or ledger",
    "engine-bounding": "an engine's per-user bounding or grouping (users split, merged or unbounded)",
    "refusal": "a refusal that must not depend on the data, or a check that must refuse",
    "sampler": "an exact sampler's law",
}
"""What each mutant breaks (its ``kind``)."""

CLASSES = {
    1: "a test setting up a path the release never takes by default (explicit arguments, fixed bounds)",
    2: "a check recomputing a law or parameter from the plan instead of running the sampler",
    3: "a check comparing a reported parameter with itself",
    4: "equality across engines standing in for correctness",
    5: "a distributed test passing because the engine runs one partition",
    6: "purposes, streams and keys assumed distinct and never compared",
}
"""The classes of weak test that issue 32 closed; a mutant names those it guards against (``classes``)."""

AREAS = ("noise_privacy", "dem", "heatmaps", "distinct_vocabulary", "aggregates", "engines", "ledger", "releases")


@dataclass(frozen=True)
class Mutant:
    """One mutant: replace ``old`` (which must occur exactly once in ``path``) by ``new``.

    ``path`` is relative to ``src/userdp``; ``tests`` are pytest node ids (relative to the repository root)
    of which at least one must fail; ``why`` says what a user would lose if the bug shipped."""

    id: str
    kind: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str
    classes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"mutant {self.id}: unknown kind {self.kind!r}")
        if not self.tests:
            raise ValueError(f"mutant {self.id}: names no test")
        if self.old == self.new:
            raise ValueError(f"mutant {self.id}: changes nothing")
        for c in self.classes:
            if c not in CLASSES:
                raise ValueError(f"mutant {self.id}: unknown class {c}")


def all_mutants() -> list[Mutant]:
    """Every mutant of every area, ids unique."""
    out: list[Mutant] = []
    for area in AREAS:
        out.extend(importlib.import_module(f"{__name__}.{area}").MUTANTS)
    ids = [m.id for m in out]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"mutant ids used twice: {twice}")
    return out
