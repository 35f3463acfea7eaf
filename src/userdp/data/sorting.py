"""In-place sorts of array ranges for compiled kernels.

NumPy's sorts inside a numba kernel (``np.sort``, ``np.argsort``, ``a[i:j].sort()``) compile numba's generic
quicksort into every kernel that uses them, seconds each on a cold cache, and assigning a sorted copy back to a
slice compiles numba's shape-mismatch message (its string formatting: seconds more). :func:`sort_range` and
:func:`sort_pairs` are an introsort (quicksort, median of three, insertion sort below 24 elements, heapsort past
twice log2(n) levels: O(n log n) in the worst case) on a fixed stack, no allocation beyond it: a fraction of a
second to compile, as fast as numba's quicksort, and the same ascending order (equal keys are interchangeable
where they are used).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_SHORT = 24  # ranges this short are insertion-sorted


@njit(cache=True, nogil=True)
def sort_range(a, lo, hi):
    """Sort ``a[lo:hi]`` ascending, in place."""
    _introsort(a, None, lo, hi)


@njit(cache=True, nogil=True)
def sort_pairs(keys, vals, lo, hi):
    """Sort ``keys[lo:hi]`` ascending, in place, moving ``vals[lo:hi]`` with them (the order of equal keys is
    unspecified)."""
    _introsort(keys, vals, lo, hi)


@njit(cache=True, nogil=True)
def _swap(a, v, i, j):
    t = a[i]
    a[i] = a[j]
    a[j] = t
    if v is not None:
        w = v[i]
        v[i] = v[j]
        v[j] = w


@njit(cache=True, nogil=True)
def _introsort(a, v, lo, hi):
    n = hi - lo
    if n < 2:
        return
    depth_limit = 2
    m = n
    while m > 1:
        depth_limit += 2
        m >>= 1
    stack = np.empty((depth_limit + 2, 3), np.int64)  # (lo, hi, depth): the larger part waits, so few entries
    top = 0
    stack[0, 0] = lo
    stack[0, 1] = hi
    stack[0, 2] = depth_limit
    top = 1
    while top > 0:
        top -= 1
        lo = stack[top, 0]
        hi = stack[top, 1]
        depth = stack[top, 2]
        while hi - lo > _SHORT:
            if depth == 0:
                _heapsort(a, v, lo, hi)
                lo = hi
                break
            depth -= 1
            mid = lo + (hi - lo) // 2
            # median of three to a[lo]
            if a[mid] < a[lo]:
                _swap(a, v, mid, lo)
            if a[hi - 1] < a[lo]:
                _swap(a, v, hi - 1, lo)
            if a[hi - 1] < a[mid]:
                _swap(a, v, hi - 1, mid)
            _swap(a, v, lo, mid)
            pivot = a[lo]
            i = lo + 1
            j = hi - 1
            while True:  # Hoare partition around a[lo]
                while i <= j and a[i] < pivot:
                    i += 1
                while i <= j and a[j] > pivot:
                    j -= 1
                if i >= j:
                    break
                _swap(a, v, i, j)
                i += 1
                j -= 1
            _swap(a, v, lo, j)
            # recurse into the smaller part, keep the larger for later
            if j - lo < hi - (j + 1):
                stack[top, 0] = j + 1
                stack[top, 1] = hi
                stack[top, 2] = depth
                top += 1
                hi = j
            else:
                stack[top, 0] = lo
                stack[top, 1] = j
                stack[top, 2] = depth
                top += 1
                lo = j + 1
        for p in range(lo + 1, hi):  # insertion sort of the short range
            k = p
            while k > lo and a[k - 1] > a[k]:
                _swap(a, v, k - 1, k)
                k -= 1


@njit(cache=True, nogil=True)
def _heapsort(a, v, lo, hi):
    n = hi - lo
    for start in range(n // 2 - 1, -1, -1):
        _sift(a, v, lo, start, n)
    for end in range(n - 1, 0, -1):
        _swap(a, v, lo, lo + end)
        _sift(a, v, lo, np.int64(0), end)


@njit(cache=True, nogil=True)
def _sift(a, v, lo, root, n):
    while True:
        child = 2 * root + 1
        if child >= n:
            return
        if child + 1 < n and a[lo + child + 1] > a[lo + child]:
            child += 1
        if a[lo + child] <= a[lo + root]:
            return
        _swap(a, v, lo + root, lo + child)
        root = child
