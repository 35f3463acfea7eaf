"""The default RandomSource's large-batch path: AES-256-CTR under a key and counter block from os.urandom.

Batches of more than 512 words are not read from os.urandom directly but expanded with AES-256-CTR; these
tests check that the expansion is keyed by the OS CSPRNG on every batch (a fixed key and counter would make
every process draw the same "random" words).
"""

from __future__ import annotations

import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from userdp.noise import RandomSource, discrete_laplace

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


def test_keystream_written_in_place_is_the_whole_keystream(monkeypatch):
    """The large-batch path writes the keystream straight into the output array (its last 16 bytes through a
    scratch buffer): every word, the last ones included, is the AES-256-CTR keystream."""
    monkeypatch.setattr(os, "urandom", lambda n: b"\x3c" * n)
    for n in (513, 514, 515, 1001, 4097):
        enc = Cipher(algorithms.AES(b"\x3c" * 32), modes.CTR(b"\x3c" * 16)).encryptor()
        expected = np.frombuffer(enc.update(bytes(8 * n)), dtype="<u8")
        assert np.array_equal(RandomSource().words(n), expected), n


def _dlap_chi2(x: np.ndarray, t: float) -> float:
    from scipy import stats

    q = np.exp(-1 / t)
    ks = np.arange(-25, 26)
    p = (1 - q) / (1 + q) * q ** np.abs(ks)
    obs = np.array([np.sum(x == k) for k in ks] + [np.sum(np.abs(x) > 25)])
    exp = np.concatenate([p, [1 - p.sum()]]) * x.size
    return stats.chisquare(obs, exp).pvalue


def test_unseeded_large_fill_runs_on_threads_with_independent_streams(monkeypatch):
    """A large unseeded fill is cut into one slice per thread, each on its own keys: the output keeps the
    exact law (a 30% wrong scale is rejected) and the slices share no stream."""
    import userdp.noise.sources as sources

    monkeypatch.setattr(sources, "_THREADS", 2)
    seen_threads = set()
    real = sources._aes_ctr_into

    def spy(out):
        import threading

        seen_threads.add(threading.get_ident())
        real(out)

    monkeypatch.setattr(sources, "_aes_ctr_into", spy)
    n = sources._PARALLEL_MIN * 2
    x = discrete_laplace(3, n)
    assert len(seen_threads) == 2
    assert _dlap_chi2(x, 3) > 1e-5  # (unseeded: a sound sampler fails this 1 run in 10^5)
    assert _dlap_chi2(x, 3 * 1.3) < 1e-6 and _dlap_chi2(x, 3 * 0.7) < 1e-6
    # At t = 2**40 two independent draws coincide with probability about 1/(4t) = 2.3e-13, so the (n/2)^2 pairs of
    # the two halves share a value about 4e-3 of the time (CI saw one), and 10 or more only with probability
    # below 1e-30; a shared stream would repeat about n/2 of them.
    y = discrete_laplace(2**40, n)
    assert np.intersect1d(y[: n // 2], y[n // 2 :]).size < 10


def test_unseeded_fill_reads_the_words_an_item_left_unread(monkeypatch):
    """The CSPRNG's words that a batch did not read start the next batch: a fill costs about the words its
    samples read (9.2 per discrete Laplace sample at t = 2**40), not the 16 per item it reserves. Forcing a
    continuation after every item (one word reserved per item) keeps the exact law."""
    import userdp.noise.sources as sources
    from userdp.noise.kernels import _dlap_batch

    monkeypatch.setattr(sources, "_THREADS", 1)
    drawn = [0]
    real = sources._aes_ctr_into

    def count(out):
        drawn[0] += out.size
        real(out)

    monkeypatch.setattr(sources, "_aes_ctr_into", count)
    n = 400_000
    x = discrete_laplace(2**40, n)
    assert drawn[0] / n < 10.5
    assert np.unique(x).size > n - 5  # no word read twice (a repeated stream would repeat samples)
    out = np.empty(200_000, dtype=np.int64)
    RandomSource()._fill(_dlap_batch, out, 1, np.int64(3))
    # (unseeded: a sound sampler fails the first check 1 run in 10^5; at 1e-3 CI saw it fail once)
    assert _dlap_chi2(out, 3) > 1e-5 and _dlap_chi2(out, 3 * 1.3) < 1e-6
