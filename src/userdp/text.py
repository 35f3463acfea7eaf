r"""Words of text: the tokenizer every engine uses, and a compiled version of it for whole columns.

:func:`tokenize` is the definition: Python's ``re.findall(r"\w+", text.lower())`` (Unicode word
characters, full Unicode lower-casing), as in Knop & Steinke's experiments. :func:`tokenize_codes` gives the
same words for a whole Arrow column, as codes into the sorted vocabulary, splitting and hashing in one
compiled pass over the column's UTF-8 bytes with per-code-point tables built from Python's own ``str.lower``
and ``re``; the rare row those tables cannot split goes through :func:`tokenize` itself.
:func:`tokenize_column` spells the words out. No library's kernel is used for the split because none has
Python's definitions (Arrow's and Polars' regular expressions use RE2 or Rust's ``regex``, whose ``\w`` and
lower-casing differ on non-ASCII text, which would change the vocabulary).
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pyarrow as pa
from numba import njit

__all__ = ["tokenize", "tokenize_codes", "tokenize_column", "encode_strings"]

_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens (``\\w+``, Unicode), as in Knop & Steinke's experiments. Every engine
    splits text columns with this function (or :func:`tokenize_column`, which gives the same words), so they
    find the same words."""
    return _TOKEN.findall(str(text).lower())


_LIMIT = 0x10000  # code points with a table entry (the Basic Multilingual Plane); others go to Python


@lru_cache(maxsize=1)
def _code_point_tables() -> tuple[np.ndarray, np.ndarray]:
    r"""Per code point ``c`` below U+10000: ``lower[c]``, the code point of ``chr(c).lower()``, and
    ``word[c]``, whether that is a word character (``\w``). Built from Python's own ``str.lower`` and
    ``re`` (60 ms, once per process), so the compiled scan agrees with :func:`tokenize` by construction.

    ``lower[c] = -1`` marks what a table cannot say: U+0130 (whose lower case is two code points) and
    U+03A3, capital sigma (Python lower-cases it to final or medial sigma depending on its neighbours).
    A row holding one of them, or a code point from U+10000 on, is split by :func:`tokenize` itself."""
    lower = np.full(_LIMIT, -1, np.int32)
    word = np.zeros(_LIMIT, np.uint8)
    for c in range(_LIMIT):
        if 0xD800 <= c < 0xE000 or c == 0x3A3:
            continue
        low = chr(c).lower()
        if len(low) == 1:
            lower[c] = ord(low)
            word[c] = _TOKEN.fullmatch(low) is not None
    return lower, word


@njit(cache=True, inline="always")
def _decode(data, i):
    """The code point starting at byte ``i`` of UTF-8 text and the next position (a lead byte from 0xF0 on,
    a code point beyond the tables, gives ``-1``)."""
    b = data[i]
    if b < 0x80:
        return np.int64(b), i + 1
    if b < 0xE0:
        return np.int64(((b & 0x1F) << 6) | (data[i + 1] & 0x3F)), i + 2
    if b < 0xF0:
        return np.int64(((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)), i + 3
    return np.int64(-1), i + 4


@njit(cache=True)
def _table_rows(data, offs, lower):
    """Rows whose every code point has a table entry (pure ASCII rows always do)."""
    n = offs.size - 1
    ok = np.ones(n, np.bool_)
    for r in range(n):
        i = offs[r]
        end = offs[r + 1]
        while i < end:
            c, i = _decode(data, i)
            if c < 0 or lower[c] < 0:
                ok[r] = False
                break
    return ok


@njit(cache=True, inline="always")
def _put_utf8(buf, pos, c):
    if c < 0x80:
        buf[pos] = c
        return pos + 1
    if c < 0x800:
        buf[pos] = 0xC0 | (c >> 6)
        buf[pos + 1] = 0x80 | (c & 0x3F)
        return pos + 2
    buf[pos] = 0xE0 | (c >> 12)
    buf[pos + 1] = 0x80 | ((c >> 6) & 0x3F)
    buf[pos + 2] = 0x80 | (c & 0x3F)
    return pos + 3


@njit(cache=True)
def _insert(slots, v_hash, v_off, e):
    mask = slots.size - 1
    s = np.int64(v_hash[e] & np.uint64(mask))
    while slots[s] >= 0:
        s = (s + 1) & mask
    slots[s] = e


@njit(cache=True)
def _scan_rows(r, t, k, nv, data, offs, table_ok, lower, word, other_data, other_offs, other_counts,
               codes, counts, slots, v_hash, v_off, vocab, wbuf):  # fmt: skip
    """:func:`_scan`'s loop from row ``r`` on, while the tables have room for the next row's words (none of
    its arrays is reallocated here, so the compiled loop keeps them in registers). Returns where it
    stopped: ``(r, t, k, nv)``."""
    n = offs.size - 1
    mask = slots.size - 1
    while r < n:
        if table_ok[r]:
            row_words = (offs[r + 1] - offs[r] + 1) // 2
            row_bytes = 3 * (offs[r + 1] - offs[r])
        else:
            row_words = other_counts[r]
            row_bytes = other_offs[k + row_words] - other_offs[k]
        if 2 * (nv + row_words) >= slots.size or v_off[nv] + row_bytes > vocab.size:
            break  # the caller grows the tables
        t0 = t
        i = offs[r]
        end = offs[r + 1]
        pending = table_ok[r]
        left = 0 if pending else other_counts[r]
        wlen = 0
        while pending or left > 0:
            if pending:
                if i < end:
                    c, i = _decode(data, i)  # (a row with table_ok has no lead byte from 0xF0 on)
                    if word[c]:
                        wlen = _put_utf8(wbuf, wlen, lower[c])
                        continue
                else:
                    pending = False
                if wlen == 0:
                    continue
            else:  # the next ready-made word of a row split by Python
                q = other_offs[k]
                wlen = other_offs[k + 1] - q
                for j in range(wlen):
                    wbuf[j] = other_data[q + j]
                k += 1
                left -= 1
            h = np.uint64(14695981039346656037)  # FNV-1a over the word's bytes
            for j in range(wlen):
                h = (h ^ np.uint64(wbuf[j])) * np.uint64(1099511628211)
            h ^= h >> np.uint64(33)  # FNV's low bits mix poorly and index the table: MurmurHash3's finish
            h *= np.uint64(0xFF51AFD7ED558CCD)
            h ^= h >> np.uint64(33)
            slot = np.int64(h & np.uint64(mask))
            code = -1
            while slots[slot] >= 0:
                e = slots[slot]
                if v_hash[e] == h and v_off[e + 1] - v_off[e] == wlen:
                    base = v_off[e]
                    same = True
                    for j in range(wlen):
                        if vocab[base + j] != wbuf[j]:
                            same = False
                            break
                    if same:
                        code = e
                        break
                slot = (slot + 1) & mask
            if code < 0:  # a new word
                code = nv
                base = v_off[nv]
                for j in range(wlen):
                    vocab[base + j] = wbuf[j]
                v_hash[nv] = h
                v_off[nv + 1] = base + wlen
                slots[slot] = nv
                nv += 1
            codes[t] = code
            t += 1
            wlen = 0
        counts[r] = t - t0
        r += 1
    return r, t, k, nv


@njit(cache=True)
def _scan(data, offs, table_ok, lower, word, other_data, other_offs, other_counts, max_words):
    """Split every row into words and give each distinct word a code (first-seen order), in one pass.

    Rows with ``table_ok`` are decoded here (UTF-8 -> code point -> the tables -> UTF-8); the words of the
    other rows come ready in ``other_*``. Codes come from an open-addressing hash table (linear probing,
    at most half full) over the words' bytes, whose distinct words are kept once in ``vocab``. Returns the
    codes, the words per row and the vocabulary (bytes and offsets)."""
    n = offs.size - 1
    codes = np.empty(max_words, np.int64)
    counts = np.zeros(n, np.int64)
    longest = 8
    for r in range(n):
        longest = max(longest, offs[r + 1] - offs[r])
    wbuf = np.empty(3 * longest + 8, np.uint8)  # one word, lower-cased (at most 3 bytes per input byte)
    slots = np.full(1 << 16, -1, np.int64)
    v_hash = np.empty(1 << 15, np.uint64)
    v_off = np.zeros((1 << 15) + 1, np.int64)
    vocab = np.empty(max(1 << 20, 3 * longest), np.uint8)
    r = t = k = nv = np.int64(0)  # typed: literal zeros would compile _scan_rows a second time
    while True:
        r, t, k, nv = _scan_rows(r, t, k, nv, data, offs, table_ok, lower, word, other_data, other_offs,
                                 other_counts, codes, counts, slots, v_hash, v_off, vocab, wbuf)  # fmt: skip
        if r == n:
            break
        # the next row may not fit: double the tables (and rehash) and the vocabulary's bytes
        if 2 * (nv + longest) >= slots.size // 2:
            slots = np.full(2 * slots.size, -1, np.int64)
            grown_h = np.empty(slots.size // 2, np.uint64)
            grown_o = np.zeros(slots.size // 2 + 1, np.int64)
            for e in range(nv):  # element by element: a slice copy compiles numba's shape message (seconds)
                grown_h[e] = v_hash[e]
                grown_o[e] = v_off[e]
            grown_o[nv] = v_off[nv]
            v_hash = grown_h
            v_off = grown_o
            for e in range(nv):
                _insert(slots, v_hash, v_off, e)
        if v_off[nv] + 3 * longest + max(0, other_offs[-1] - other_offs[0]) > vocab.size // 2:
            grown = np.empty(2 * vocab.size, np.uint8)
            for e in range(v_off[nv]):
                grown[e] = vocab[e]
            vocab = grown
    return codes[:t], counts, vocab[: v_off[nv]], v_off[: nv + 1]


@njit(cache=True)
def _renumber(codes, rank):
    for j in range(codes.size):
        codes[j] = rank[codes[j]]


def _one_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A chunked column as one array (without a copy when it has one chunk)."""
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def _sorted_ranks(distinct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct strings sorted (code-point order, as ``np.unique``) and each one's rank in that order."""
    perm = np.argsort(distinct, kind="stable")
    rank = np.empty(perm.size, dtype=np.int64)
    rank[perm] = np.arange(perm.size, dtype=np.int64)
    return distinct[perm], rank


def _string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes and ``int64`` offsets of a (large) string array, without copying the bytes."""
    arr = arr.cast(pa.large_string())
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    return data, offs


def tokenize_codes(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The words of every row of a text column, as codes into their sorted vocabulary.

    Returns ``(counts, codes, vocabulary)``: ``vocabulary`` holds the distinct words sorted (an object
    array of ``str``, code-point order, as ``np.unique`` gives), ``codes`` the concatenation over the rows
    of ``tokenize(texts[i])`` as positions in it, and ``counts[i]`` the number of words of row ``i``.
    Equal to calling :func:`tokenize` on every row and ``np.unique(..., return_inverse=True)`` on the words
    (tested on every code point of the Basic Multilingual Plane and on the IMDB reviews). Missing values are
    the caller's to refuse.

    Why by hand: the split must be Python's (``\w`` and ``str.lower`` on Unicode), which no columnar
    library implements (Arrow's and Polars' regular expressions are RE2 and Rust's ``regex``, whose ``\w``
    differ), and splitting and hashing in one compiled pass saves materializing 12 million word strings
    for IMDB (4.5 s -> 1 s from the Arrow column to the codes)."""
    texts = _one_array(texts)
    n = len(texts)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.empty(0, dtype=object)
    lower, word = _code_point_tables()
    data, offs = _string_buffers(texts)
    table_ok = _table_rows(data, offs, lower)
    python_rows = np.flatnonzero(~table_ok)
    other_counts = np.zeros(n, np.int64)
    other_words: list[str] = []
    if python_rows.size:
        for r, text in zip(python_rows.tolist(), texts.take(pa.array(python_rows)).to_pylist(), strict=True):
            words = tokenize(text)
            other_counts[r] = len(words)
            other_words.extend(words)
    other_data, other_offs = _string_buffers(pa.array(other_words, type=pa.large_string()))
    # a row of b bytes holds at most ceil(b / 2) words (each word a byte, and a separator between two)
    max_words = (int(offs[-1] - offs[0]) + n) // 2 + len(other_words) + 1
    codes, counts, vocab, v_off = _scan(data, offs, table_ok, lower, word, other_data, other_offs, other_counts,
                                        max_words)  # fmt: skip
    wide = vocab.size >= 2**31 - 1
    cls = pa.LargeStringArray if wide else pa.StringArray
    distinct = cls.from_buffers(v_off.size - 1, pa.py_buffer(v_off if wide else v_off.astype(np.int32)),
                                pa.py_buffer(vocab)).to_numpy(zero_copy_only=False)  # fmt: skip
    vocabulary, rank = _sorted_ranks(distinct)
    _renumber(codes, rank)
    return counts, codes, vocabulary


def tokenize_column(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """The words of every row of a text column: ``(counts, words)`` with ``words`` the concatenation of
    ``tokenize(texts[i])`` over the rows in order (an Arrow string array) and ``counts[i]`` the number of
    words of row ``i`` (:func:`tokenize_codes`, with the words spelled out)."""
    counts, codes, vocabulary = tokenize_codes(texts)
    return counts, pa.array(vocabulary, type=pa.large_string()).take(pa.array(codes))


def encode_strings(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(arr, return_inverse=True)`` of an Arrow string array: the distinct strings sorted in
    code-point order (an object array, as NumPy gives for Python strings) and each value's code.

    Arrow's hash dictionary encoding finds the distinct strings in one pass; only those are sorted, and the
    codes renumbered into that order."""
    enc = _one_array(arr).dictionary_encode()
    uniq, rank = _sorted_ranks(enc.dictionary.to_numpy(zero_copy_only=False))
    return uniq, rank[enc.indices.to_numpy(zero_copy_only=False)]
