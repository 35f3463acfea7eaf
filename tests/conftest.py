from __future__ import annotations

from pathlib import Path

import pytest

from userdp.noise import RandomSource

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def rng() -> RandomSource:
    """A seeded source: tests are reproducible (never use seeds for real releases)."""
    return RandomSource(20261122)
