"""The compiled tokenizer gives exactly the words of ``tokenize`` (Python's ``\\w+`` on ``str.lower``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from userdp.data import UserDataset
from userdp.text import encode_strings, tokenize, tokenize_column


def _reference(texts: list[str]) -> tuple[list[int], list[str]]:
    counts, words = [], []
    for t in texts:
        w = tokenize(t)
        counts.append(len(w))
        words.extend(w)
    return counts, words


def _check(texts: list[str], arr=None) -> None:
    counts, words = tokenize_column(pa.array(texts) if arr is None else arr)
    ref_counts, ref_words = _reference(texts)
    assert counts.tolist() == ref_counts
    assert words.to_pylist() == ref_words


def test_every_ascii_byte_and_separator() -> None:
    chars = "".join(chr(b) for b in range(128))
    _check([chars, chars * 3, "Hello_World 42x--y__z", "", " ", "ALLCAPS", "a", "_", "tail word"])


def test_every_code_point_below_u3000_in_context() -> None:
    # each code point inside a word, alone, and next to ASCII: the non-ASCII rows take Python's own path
    texts = [f"ab{chr(c)}CD {chr(c)} X{chr(c)}" for c in range(0x80, 0x3000) if not 0xD800 <= c < 0xE000]
    texts += ["ΣΑΣ ΌΣΟΣ", "İstanbul KELVIN \u212a", "ﬁne straße", "naïve café résumé"]
    _check(texts)


def test_random_mixture_chunked_and_sliced() -> None:
    rng = np.random.default_rng(3)
    alphabet = list("abcXYZ019_ ,.-'\n\t") + ["é", "Ω", "ß", "İ", "\u00a0", "’", "😀"]
    texts = ["".join(rng.choice(alphabet, size=rng.integers(0, 40))) for _ in range(400)]
    _check(texts)
    chunked = pa.chunked_array([pa.array(texts[:150]), pa.array(texts[150:])])
    _check(texts, chunked)
    sliced = pa.array(["zz top"] + texts)[1:]
    _check(texts, sliced)
    _check(texts, pa.array(texts, type=pa.large_string()))


def test_no_rows_and_no_words() -> None:
    counts, words = tokenize_column(pa.array([], type=pa.string()))
    assert counts.size == 0 and len(words) == 0
    _check(["", "  ", "--"])


def test_encode_strings_is_numpys_unique() -> None:
    vals = ["b", "a", "é", "b", "Z", "", "a", "zz", "ä"]
    uniq, codes = encode_strings(pa.array(vals))
    ref_u, ref_inv = np.unique(np.array(vals, dtype=object), return_inverse=True)
    assert uniq.tolist() == ref_u.tolist() and uniq.dtype == object
    assert codes.tolist() == ref_inv.reshape(-1).tolist()


@pytest.mark.parametrize("keys", [["m2", "m1", "m2", "m3", "m1"], [5, 3, 5, 1, 3]])
def test_from_rows_is_from_arrays_of_the_repeated_rows(keys) -> None:
    counts = np.array([2, 0, 3, 1, 2])
    words = ["x", "y", "z", "x", "w", "v", "y", "x"]
    ref = UserDataset.from_arrays(np.repeat(np.array(keys, dtype=object if isinstance(keys[0], str) else None),
                                            counts), np.array(words, dtype=object))  # fmt: skip
    codes = ref.domain.encode(np.array(words, dtype=object))
    got = UserDataset.from_rows(np.array(keys), counts, codes, ref.domain)
    assert got.offsets.tolist() == ref.offsets.tolist()
    assert got.items.tolist() == ref.items.tolist()
    assert got.user_ids.tolist() == ref.user_ids.tolist()


def test_dedupe_keeps_each_users_distinct_items_sorted() -> None:
    rng = np.random.default_rng(0)
    users = rng.integers(0, 30, 2000)
    items = rng.integers(0, 50, 2000)
    ds = UserDataset.from_arrays(users, items)
    d = ds.dedupe()
    pairs = np.unique(np.column_stack([ds.user_index(), ds.items]), axis=0)
    assert d.items.tolist() == pairs[:, 1].tolist()
    assert np.repeat(np.arange(d.n_users), d.counts()).tolist() == pairs[:, 0].tolist()
