"""Mutants of the distinct count (Knop & Steinke), private vocabularies and per-key counts (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

MUTANTS: list[Mutant] = [
    Mutant(
        "counts-auto-noise-with-selection-share",
        "budget-split",
        "vocabulary/counts.py",
        "counts = laplace_mechanism(true, float(l0 * linf), eps_c, src)",
        'counts = laplace_mechanism(true, float(l0 * linf), eps_c + plan["epsilon_select"], src)',
        ("tests/vocabulary/test_counts.py",),
        "per-key counts with bounds='auto' draw noise as if GEM's share of epsilon were the counts' too: "
        "the noise is 0.8x the stated sd and the release spends more than epsilon",
        (1,),
    ),
    Mutant(
        "counts-select-keys-before-bounding",
        "contribution-bound",
        "vocabulary/counts.py",
        "hist, held = _histogram(off_b, its_b, labels.size, cal, src)",
        "hist, held = _histogram(offsets, keys, labels.size, cal, src)",
        ("tests/vocabulary/test_counts.py",),
        "the keys are selected from every key a person holds, not from their max_keys kept keys: one person "
        "holding 10^6 keys gets one of them released",
        (1,),
    ),
    Mutant(
        "vocabulary-release-twice-max-items",
        "contribution-bound",
        "releases/vocabulary.py",
        "data, int(max_items), partial(keyed_keep, streams, cap=int(max_items)),",
        "data, 2 * int(max_items), partial(keyed_keep, streams, cap=2 * int(max_items)),",
        ("tests/vocabulary/test_union.py", "tests/releases/test_engines_agree.py"),
        "the vocabulary release lets each person count toward 2 max_items items: twice the sensitivity the "
        "threshold and noise were calibrated for",
        (4,),
    ),
    Mutant(
        "distinct-gem-half-sensitivity",
        "sensitivity",
        "distinct/release.py",
        "idx = exponential_mechanism(plan.scores, 1.0, plan.epsilon_select, src)",
        "idx = exponential_mechanism(plan.scores, 0.5, plan.epsilon_select, src)",
        ("tests/distinct/test_distinct.py", "tests/plan/test_distinct.py"),
        "the distinct count's choice of l is made with half GEM's sensitivity: 2 epsilon_select spent",
        (2,),
    ),
]
