"""Mutants of the noise privacy area (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

MUTANTS: list[Mutant] = []
