"""Mutants of the engines' per-user bounding and grouping (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

MUTANTS: list[Mutant] = [
    Mutant(
        "chunked-contiguity-off-by-one",
        "engine-bounding",
        "engines/chunked.py",
        "monotone = bool(keys[0] > self.top)",
        "monotone = bool(keys[0] >= self.top)",
        ("tests/engines/test_chunked_engine.py",),
        "a user whose rows are split across two chunks, the second starting with that user, is accepted: "
        "their contribution is counted twice (twice the sensitivity)",
    ),
]
