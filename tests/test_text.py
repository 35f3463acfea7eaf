"""The compiled tokenizer gives exactly the words of ``tokenize`` (Python's ``\\w+`` on ``str.lower``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from userdp.data import UserDataset
from userdp.text import encode_strings, tokenize, tokenize_codes, tokenize_column


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


def test_every_code_point_of_the_basic_plane_in_context() -> None:
    # each code point inside a word, alone, and next to ASCII; the rows the tables cannot split (capital
    # sigma, dotted capital I, code points from U+10000) go to Python and are mixed in between
    texts = [f"ab{chr(c)}CD {chr(c)} X{chr(c)}" for c in range(0x80, 0x10000) if not 0xD800 <= c < 0xE000]
    texts += ["ΣΑΣ ΌΣΟΣ", "İstanbul KELVIN \u212a", "ﬁne straße", "naïve café résumé", "emoji 😀x 𝔘nicode"]
    texts += [f"word{c} {chr(c)}" for c in (0x10000, 0x1D518, 0x1F600, 0x10FFFF)]
    _check(texts)


def test_codes_index_the_sorted_vocabulary() -> None:
    texts = ["The cat, the CAT", "", "Ωmega ωMEGA straße", "Σίσυφος ΣΊΣΥΦΟΣ", "z_1 Z_1"]
    counts, codes, vocab = tokenize_codes(pa.array(texts))
    ref_counts, ref_words = _reference(texts)
    ref_vocab, ref_codes = np.unique(np.array(ref_words, dtype=object), return_inverse=True)
    assert counts.tolist() == ref_counts
    assert vocab.tolist() == ref_vocab.tolist() and vocab.dtype == object
    assert codes.tolist() == ref_codes.reshape(-1).tolist()


def test_tables_grow_with_many_distinct_words_and_long_rows() -> None:
    # 200,000 distinct words (the table starts with room for 32,768) and 3 MB of vocabulary (it starts at
    # 1 MB), in rows of very different lengths
    rng = np.random.default_rng(1)
    words = [f"w{i:06d}{'x' * int(rng.integers(0, 12))}" for i in range(200_000)]
    order = rng.permutation(len(words))
    cuts = np.sort(rng.choice(len(words), 300, replace=False))
    texts = [" ".join(words[j] for j in part) for part in np.split(order, cuts)]
    texts.append(" ".join(words[:50_000]).upper())  # one long row of words seen before
    counts, codes, vocab = tokenize_codes(pa.array(texts))
    ref_counts, ref_words = _reference(texts)
    ref_vocab, ref_codes = np.unique(np.array(ref_words, dtype=object), return_inverse=True)
    assert counts.tolist() == ref_counts
    assert vocab.tolist() == ref_vocab.tolist()
    assert np.array_equal(codes, ref_codes.reshape(-1))


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


def test_rows_of_one_letter_words() -> None:
    # the most words per byte: one-letter rows and rows of one-letter words (the output is sized for them)
    _check(["a"] * 5000 + ["b c d e"] * 100 + ["é"] * 300 + ["Σ"] * 10)


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
