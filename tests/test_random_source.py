"""The default RandomSource's large-batch path: AES-256-CTR under a key and counter block from os.urandom.

Batches of more than 512 words are not read from os.urandom directly but expanded with AES-256-CTR; these
tests check that the expansion is keyed by the OS CSPRNG on every batch (a fixed key and counter would make
every process draw the same "random" words).
"""

from __future__ import annotations

import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from userdp.noise import RandomSource

BATCH = 1000  # > 512 words: the AES-CTR path


def test_unseeded_sources_differ_on_aes_batches():
    a, b = RandomSource(), RandomSource()
    wa, wb = a.words(BATCH), b.words(BATCH)
    assert wa.dtype == np.uint64 and wa.size == BATCH
    # Independent 64-bit words: any shared word (let alone a shared batch) has probability about 2**-44.
    assert np.intersect1d(wa, wb).size == 0
    assert np.intersect1d(wa, a.words(BATCH)).size == 0  # a fresh key per batch, not a reused keystream
    assert np.intersect1d(RandomSource().words(513), RandomSource().words(513)).size == 0
    assert np.unique(wa).size == BATCH


def test_aes_batch_key_and_counter_come_from_os_urandom(monkeypatch):
    """With os.urandom replaced by a constant function the batch becomes deterministic, and it is exactly the
    AES-256-CTR keystream under that key and initial counter block: the batch's only entropy is os.urandom."""
    monkeypatch.setattr(os, "urandom", lambda n: b"\x5a" * n)
    a, b = RandomSource().words(BATCH), RandomSource().words(BATCH)
    assert np.array_equal(a, b)
    enc = Cipher(algorithms.AES(b"\x5a" * 32), modes.CTR(b"\x5a" * 16)).encryptor()
    expected = np.frombuffer(enc.update(bytes(8 * BATCH)), dtype="<u8")
    assert np.array_equal(a, expected)
