"""The compiled range sorts (userdp.data.sorting): ascending, in place, only inside the range, pairs kept
together, on every shape that steers the introsort (short, reversed, constant, few values, adversarial)."""

from collections import Counter

import numpy as np
import pytest

from userdp.data.sorting import _heapsort, sort_pairs, sort_range


def _cases(rng):
    for n in [*range(0, 40), 100, 1000, 20000]:
        yield rng.integers(-(10**12), 10**12, n)
        yield rng.integers(0, 3, n)
        yield np.arange(n)[::-1].copy()
        yield np.zeros(n, np.int64)
        yield np.tile(np.arange(min(n, 7)), n // 7 + 1)[:n].astype(np.int64)  # organ-pipe-like repeats


def test_sort_range_sorts_only_its_range():
    rng = np.random.default_rng(0)
    for keys in _cases(rng):
        a = keys.copy()
        sort_range(a, 0, a.size)
        assert np.array_equal(a, np.sort(keys))
        if keys.size > 4:
            b = keys.copy()
            sort_range(b, 2, keys.size - 1)
            assert np.array_equal(b[2:-1], np.sort(keys[2:-1]))
            assert b[0] == keys[0] and b[1] == keys[1] and b[-1] == keys[-1]


def test_sort_pairs_moves_values_with_keys():
    rng = np.random.default_rng(1)
    for keys in _cases(rng):
        vals = rng.integers(0, 1000, keys.size)
        k, v = keys.copy(), vals.copy()
        sort_pairs(k, v, 0, k.size)
        assert np.array_equal(k, np.sort(keys))
        got, want = zip(k.tolist(), v.tolist(), strict=True), zip(keys.tolist(), vals.tolist(), strict=True)
        assert Counter(got) == Counter(want)


@pytest.mark.parametrize("n", [25, 26, 100, 257])
def test_heapsort_fallback(n):
    """The worst-case path (taken past the depth limit) sorts on its own."""
    keys = np.random.default_rng(n).integers(0, 50, n)
    vals = np.arange(n)
    k, v = keys.copy(), vals.copy()
    _heapsort(k, v, 0, n)
    assert np.array_equal(k, np.sort(keys))
    assert np.array_equal(keys[v], k)
    s = keys.copy()
    _heapsort(s, None, 0, n)
    assert np.array_equal(s, np.sort(keys))


def test_median_of_three_killer_is_sorted():
    """An input built against median-of-three pivots still sorts (the depth limit hands it to the heapsort)."""
    n = 4096
    a = np.empty(n, np.int64)
    half = n // 2
    for i in range(half):  # Musser's median-of-3 killer shape
        a[i] = 2 * i + 1 if i % 2 == 0 else half + i + (half % 2)
        a[half + i] = 2 * (i + 1)
    b = a.copy()
    sort_range(b, 0, n)
    assert np.array_equal(b, np.sort(a))
