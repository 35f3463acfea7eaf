"""Keyed per-user streams (userdp.noise.KeyedStreams): a 256-bit master from os.urandom, per-user AES-256-CTR
streams keyed by HMAC-SHA256(master, canonical user key), the same draws in every process, distinct draws
for distinct masters, users and purposes, and a master that is never shown."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import userdp
from userdp.dem import GKRR
from userdp.errors import DataError
from userdp.metrics import ClusteredMetric
from userdp.noise import KeyedSource, KeyedStreams, RandomSource, discrete_laplace, encode_user_key

MASTER = bytes(range(0x40, 0x60))  # a recognisable 32-byte "os.urandom" output


@pytest.fixture
def fixed_urandom(monkeypatch):
    """os.urandom returns MASTER for 32-byte requests (and real bytes otherwise); records the sizes asked."""
    real, asked = os.urandom, []

    def fake(n: int) -> bytes:
        asked.append(n)
        return MASTER if n == 32 else real(n)

    monkeypatch.setattr(os, "urandom", fake)
    return asked


def _draws(src: RandomSource) -> list:
    """Everything the engines and randomizers draw from a per-user stream, in one fixed order."""
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    arr = np.arange(50)
    src.shuffle(arr)
    return [
        src.words(700).tolist(),  # above 512: a different path in the OS-backed source
        src.integers(17, size=40).tolist(),
        src.randbelow(10**30),
        arr.tolist(),
        src.permutation(20).tolist(),
        src.uniform(5).tolist(),
        gk.randomize(np.arange(40) % 40, src).tolist(),
        discrete_laplace(3, 10, rng=src).tolist(),
    ]


def test_distinct_masters_users_and_purposes_give_different_streams():
    a, b = KeyedStreams(), KeyedStreams()
    assert not a.seeded and not b.seeded
    assert np.intersect1d(a.source(1).words(1000), b.source(1).words(1000)).size == 0
    assert not np.array_equal(KeyedStreams(1).source(1).words(8), KeyedStreams(2).source(1).words(8))
    assert not np.array_equal(a.source(1).words(8), a.source(2).words(8))
    assert not np.array_equal(a.source(1, "sample").words(8), a.source(1, "randomize").words(8))


def test_same_master_and_key_give_the_same_stream_in_every_process():
    """Every sampler draws the same from two sources for the same master and key, after pickling too (as
    Spark ships the master), and a fresh Python process unpickling the master derives the same stream."""
    streams = KeyedStreams()
    expected = _draws(streams.source("user-7", "p"))
    assert _draws(streams.source("user-7", "p")) == expected
    assert _draws(pickle.loads(pickle.dumps(streams)).source("user-7", "p")) == expected
    code = "import pickle, sys\nprint(pickle.loads(sys.stdin.buffer.read()).source('user-7', 'p').words(2000).tolist())"
    env = {**os.environ, "PYTHONPATH": str(Path(userdp.__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(streams), capture_output=True, env=env)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert json.loads(done.stdout) == streams.source("user-7", "p").words(2000).tolist()


_LABEL = b"userdp keyed per-user streams v3\x00"


def _expected_block(master: bytes, purpose: bytes, key: object, encoding: bytes) -> bytes:
    """A user's initial counter block computed here from the construction: AES-256 under the purpose's integer
    key of ``"int64\\0\\0\\0" | key`` (8 bytes big-endian) for an integer key in int64's range, else
    BLAKE2b-128 of the key's encoding under the purpose's counter-block key."""
    tail = len(purpose).to_bytes(4, "big") + purpose
    if isinstance(key, int) and not isinstance(key, bool) and -(2**63) <= key < 2**63:
        int_key = hmac.new(master, _LABEL + b"int\x00" + tail, hashlib.sha256).digest()
        block = b"int64\x00\x00\x00" + key.to_bytes(8, "big", signed=True)
        return Cipher(algorithms.AES(int_key), modes.ECB()).encryptor().update(block)
    iv_key = hmac.new(master, _LABEL + b"iv\x00" + tail, hashlib.sha256).digest()
    return hashlib.blake2b(encoding, digest_size=16, key=iv_key).digest()


def _expected_stream(master: bytes, purpose: bytes, key: object, encoding: bytes, n: int) -> np.ndarray:
    """The first ``n`` words of a user's stream computed here from the construction, with hmac, hashlib and
    cryptography: the purpose's AES key, the user's counter block (:func:`_expected_block`), AES-CTR."""
    tail = len(purpose).to_bytes(4, "big") + purpose
    aes_key = hmac.new(master, _LABEL + b"aes\x00" + tail, hashlib.sha256).digest()
    enc = Cipher(algorithms.AES(aes_key), modes.CTR(_expected_block(master, purpose, key, encoding))).encryptor()
    return np.frombuffer(enc.update(bytes(8 * n)), dtype="<u8")


def test_stream_is_aes256_ctr_under_a_purpose_key_from_a_keyed_user_counter_block(fixed_urandom):
    """A known-answer check computed here with hmac, hashlib and cryptography: the master is os.urandom(32);
    the purpose's AES key HMAC-SHA256(master, label | "aes" | len(purpose) | purpose), its counter-block keys
    the same with "iv" and "int"; an integer user's initial counter block AES-256 of its tagged 8 bytes under
    the "int" key, another user's BLAKE2b-128 of its encoding under the "iv" key; the stream AES-256-CTR from
    that block. A PCG64 (or any other) stream, a constant key, a counter block not keyed by the user, a key
    used in two roles or a master not read from os.urandom all fail it."""
    streams = KeyedStreams()
    assert 32 in fixed_urandom
    purpose = b"BoundedEMDReduction: sampling with replacement"
    cases = [(12345, b"int\x0012345"), (-7, b"int\x00-7"), (2**63, b"int\x00" + str(2**63).encode()),
             ("alice", b"str\x00alice")]  # fmt: skip
    for key, encoding in cases:
        expected = _expected_stream(MASTER, purpose, key, encoding, 1001)
        src = streams.source(key, purpose.decode())
        got = np.concatenate([src.words(1), src.words(999), src.words(1)])  # odd reads cross block halves
        assert np.array_equal(got, expected), key
        batch = streams.batch(np.array([key, key], dtype=object), purpose.decode())
        assert np.array_equal(batch.words(np.array([3, 1001])), np.concatenate([expected[:3], expected]))


def test_a_counter_block_that_wraps_continues_as_ctr_mode_does():
    """The 128-bit counter carries from its low word into its high word and wraps at 2^128, as OpenSSL's CTR."""
    from userdp.noise.keyed import KeyedBatch

    streams = KeyedStreams(3)
    ciphers = streams._purpose("p")
    for hi, lo in [(5, 2**64 - 2), (2**64 - 1, 2**64 - 1)]:
        batch = KeyedBatch(ciphers, [1], False)
        batch.hi[:], batch.lo[:] = hi, lo
        from userdp.noise.keyed import _purpose_keys

        aes_key, _, _ = _purpose_keys(streams._master, "p")
        block = ((hi << 64) | lo).to_bytes(16, "big")
        expected = np.frombuffer(Cipher(algorithms.AES(aes_key), modes.CTR(block)).encryptor().update(bytes(80)), "<u8")
        assert np.array_equal(batch.source(0).words(10), expected)
        assert np.array_equal(batch.words(np.array([10])), expected)
        src = batch.source(0)  # reads that start past the carry
        assert np.array_equal(np.concatenate([src.words(3), src.words(4), src.words(3)]), expected)


def test_key_encoding_is_canonical_and_type_tagged():
    same = [(7, np.int64(7)), (7, np.int32(7)), (7, np.uint64(7)), ("a", np.str_("a")), (b"a", np.bytes_(b"a"))]
    same += [(b"a", bytearray(b"a")), (0.0, -0.0), (0.5, np.float64(0.5)), (True, np.bool_(True))]
    for x, y in same:
        assert encode_user_key(x) == encode_user_key(y)
    keys = [1, "1", b"1", 1.0, True, -1, "-1", 10, "", b"", 0, False, 0.0, "int\x001"]
    encodings = [encode_user_key(k) for k in keys]
    assert len(set(encodings)) == len(keys)
    streams = KeyedStreams()
    assert not np.array_equal(streams.source(1).words(4), streams.source("1").words(4))
    assert np.array_equal(streams.source(np.int64(1)).words(4), streams.source(1).words(4))
    for bad in (None, (1, 2), 1 + 2j):
        with pytest.raises(DataError, match="user keys"):
            streams.source(bad)


def test_master_is_256_bits_from_os_urandom_and_never_shown(fixed_urandom):
    streams = KeyedStreams()
    assert fixed_urandom.count(32) == 1
    src = streams.source(3)
    shown = [repr(streams), str(streams), f"{streams}", repr(src), str(src)]
    try:
        streams.source(object())
    except DataError as e:
        shown.append(str(e))
    for text in shown:
        assert MASTER.hex() not in text.lower() and repr(MASTER) not in text
    assert "urandom" in repr(streams) and not src.seeded
    with pytest.raises(TypeError):
        pickle.dumps(src)  # ship the KeyedStreams, not a stream


def test_seeded_masters_are_reproducible_and_marked(fixed_urandom):
    a, b = KeyedStreams(5), KeyedStreams(5)
    assert a.seeded and a.source(1).seeded and "seeded" in repr(a)
    assert np.array_equal(a.source(1).words(8), b.source(1).words(8))
    assert KeyedStreams.from_rng(a) is a
    assert KeyedStreams.from_rng(5).seeded
    seeded_src = KeyedStreams.from_rng(RandomSource(9))
    assert seeded_src.seeded
    assert np.array_equal(seeded_src.source(1).words(8), KeyedStreams.from_rng(RandomSource(9)).source(1).words(8))
    assert fixed_urandom == []  # nothing seeded touched the OS CSPRNG
    assert not KeyedStreams.from_rng(None).seeded and not KeyedStreams.from_rng(RandomSource()).seeded
    assert fixed_urandom.count(32) >= 2
    with pytest.raises(TypeError):
        KeyedStreams(1.5)
    assert isinstance(a.source(1), KeyedSource) and isinstance(a.source(1), RandomSource)


def test_large_fills_read_a_keyed_stream_in_its_one_fixed_pattern(monkeypatch):
    """The OS CSPRNG's large fills run on threads and carry unread words over; a keyed stream must not (two
    engines replaying a user's stream must draw alike), even with threads available."""
    import userdp.noise.sources as sources

    monkeypatch.setattr(sources, "_THREADS", 2)
    streams = KeyedStreams()
    n = sources._PARALLEL_MIN + 3
    a = discrete_laplace(3, n, rng=streams.source("u", "p"))
    b_src = streams.source("u", "p")
    assert np.array_equal(discrete_laplace(3, n, rng=b_src), a)
    # the fixed pattern: 16 words reserved per item and batch, the unread ones thrown away (as before)
    c_src = streams.source("u", "p")
    monkeypatch.setattr(sources, "_THREADS", 1)
    assert np.array_equal(discrete_laplace(3, n, rng=c_src), a)
    assert np.array_equal(b_src.words(4), c_src.words(4))


def test_every_keyed_draw_reads_its_own_purpose(monkeypatch):
    """Purposes are compared, not assumed distinct: the purposes of ``userdp.noise.keyed`` differ pairwise,
    each public keyed draw (rows sampled, items randomized, items kept) reads exactly one of them, no two
    draws read the same one, and one user's streams for different purposes differ -- so the items a person
    keeps are not decided by the words that also randomize or sample them."""
    import userdp.noise.keyed as keyed

    purposes = {name: getattr(keyed, name) for name in dir(keyed) if name.endswith("_PURPOSE")}
    assert len(purposes) >= 3 and len(set(purposes.values())) == len(purposes)
    streams = KeyedStreams(4)
    real, seen = KeyedStreams.batch, []

    def spy(self, user_keys, purpose=""):
        seen.append(purpose)
        return real(self, user_keys, purpose)

    monkeypatch.setattr(KeyedStreams, "batch", spy)
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    draws = {
        "sample": lambda: keyed.keyed_sample_indices(streams, 7, 10, 3),
        "randomize": lambda: keyed.keyed_randomize(streams, 7, np.arange(6), gk),
        "keep": lambda: keyed.keyed_keep(streams, 7, 10, 3),
    }
    read = {}
    for name, draw in draws.items():
        seen.clear()
        draw()
        assert len(set(seen)) == 1, (name, seen)
        read[name] = seen[0]
    assert len(set(read.values())) == len(read), read
    assert set(read.values()) <= set(purposes.values())
    monkeypatch.undo()
    first = {p: streams.source(7, p).words(8) for p in purposes.values()}
    for a, b in [(a, b) for a in first for b in first if a < b]:
        assert np.intersect1d(first[a], first[b]).size == 0, (a, b)


def test_dp_sips_rounds_each_read_their_own_bounding_purpose(monkeypatch):
    """DP-SIPS keeps a fresh subset in every round: round ``r``'s bounding reads the purpose
    :func:`~userdp.noise.sips_round_purpose` ``(r)``, the rounds' purposes differ from each other and from
    every module purpose, and one user's streams for two rounds share no word."""
    import userdp.noise.keyed as keyed
    from userdp.noise import sips_round_purpose

    rounds = [sips_round_purpose(r) for r in range(1, 11)]
    module = {getattr(keyed, name) for name in dir(keyed) if name.endswith("_PURPOSE")}
    assert len(set(rounds)) == len(rounds) and not set(rounds) & module
    streams = KeyedStreams(4)
    real, seen = KeyedStreams.batch, []

    def spy(self, user_keys, purpose=""):
        seen.append(purpose)
        return real(self, user_keys, purpose)

    monkeypatch.setattr(KeyedStreams, "batch", spy)
    keyed.keyed_keep(streams, 7, 10, 3, purpose=rounds[1])
    assert set(seen) == {rounds[1]}
    monkeypatch.undo()
    a, b = (streams.source(7, p).words(8) for p in rounds[:2])
    assert np.intersect1d(a, b).size == 0


def test_keyed_keep_for_many_users_is_the_per_user_choice():
    """:class:`~userdp.noise.KeyedKeep`'s batch path (one AES call for all the users an engine bounds) keeps,
    for every user, exactly the positions :func:`~userdp.noise.keyed_keep` gives that user alone."""
    from userdp.noise import KeyedKeep, keyed_keep

    streams = KeyedStreams(9)
    rng = np.random.default_rng(2)
    for cap, purpose in ((1, "set union: contribution bounding"), (3, "DP-SIPS: contribution bounding, round 2")):
        keys = [5, -3, "p7", 12, 2**40]
        sizes = rng.integers(cap + 1, 40, len(keys))
        keep = KeyedKeep(streams, cap, purpose)
        got = keep.many(np.array(keys, dtype=object), sizes)
        start = 0
        for k, n in zip(keys, sizes.tolist(), strict=True):
            want = keyed_keep(streams, k, n, cap, purpose)
            assert np.flatnonzero(got[start : start + n]).tolist() == want.tolist() == keep(k, n).tolist()
            start += n


def test_purpose_keys_and_counter_blocks_are_distinct():
    """The three keys a purpose derives (its AES key and its two counter-block keys) differ from each other and
    from every other purpose's, and distinct users get distinct counter blocks, integer keys (AES of their
    blocks) and others (BLAKE2b) alike: a collision in any of them would make two streams that are meant to be
    independent share words."""
    from userdp.noise.keyed import _purpose_keys

    keys = [k for p in ("", "a", "b", "set union: contribution bounding") for k in _purpose_keys(MASTER, p)]
    assert len(set(keys)) == len(keys) and all(len(k) == 32 for k in keys)
    assert len(keys) == 12
    users = np.array([*range(-1000, 1000), *(str(i) for i in range(1000)), 2**63, 2**64 + 1], dtype=object)
    for batch in (KeyedStreams(2).batch(np.arange(2000), "p"), KeyedStreams(2).batch(users, "p")):
        blocks = set(zip(batch.hi.tolist(), batch.lo.tolist(), strict=True))
        assert len(blocks) == len(batch)


def test_batches_of_many_users_read_each_users_own_stream():
    """A batch of many users (the in-memory and chunked engines read whole arrays of user keys, through the
    fast encodings of integer and string arrays) gives each user the stream ``source(user)`` gives one user
    at a time (the Spark executors' path) -- and that stream is the known AES-CTR one (checked above), so the
    agreement is not one shared mistake (computed here for an integer and a string array): an integer
    array's key must encode as the integer, a string array's as the string."""
    streams = KeyedStreams(8)
    for keys in (
        np.array([5, -3, 2**40, 5, 0], dtype=np.int64),
        np.array([1, 2, 3], dtype=np.uint32),
        np.array([1, 2**63, 2**64 - 1], dtype=np.uint64),  # past int64: the BLAKE2b block, as one at a time
        np.array(["alice", "bob", "", "ünï"]),
        np.array([1, "1", b"1", 1.0, True], dtype=object),
    ):
        batch = streams.batch(keys, "p")
        counts = np.arange(len(keys)) * 3 + 1
        words = batch.words(counts)
        at = 0
        for i, key in enumerate(keys.tolist()):
            one = streams.source(key, "p").words(int(counts[i]))
            assert np.array_equal(batch.source(i).words(int(counts[i])), one), key
            assert np.array_equal(words[at : at + counts[i]], one), key
            assert encode_user_key(keys[i]) == encode_user_key(key)
            at += int(counts[i])
    # and the common stream is the construction's, computed here: not one mistake shared by both paths
    for keys, encoding in ((np.array([7], dtype=np.int64), b"int\x007"), (np.array(["7"]), b"str\x007")):
        got = streams.batch(keys, "p").words(np.array([5]))
        assert np.array_equal(got, _expected_stream(streams._master, b"p", keys.tolist()[0], encoding, 5))


def test_keyed_keep_keeps_a_uniform_subset_of_exactly_cap():
    """``keyed_keep`` (the set union's contribution bound): exactly ``cap`` distinct positions, the ``cap``
    smallest words of the user's stream for the bounding purpose, and every subset of that size equally
    likely across users (chi-square over 6 subsets of 2 of 4 items); keeping one more item is caught."""
    from itertools import combinations

    from scipy import stats

    from userdp.noise.keyed import BOUND_PURPOSE, keyed_keep

    streams = KeyedStreams(6)
    subsets = {c: 0 for c in combinations(range(4), 2)}
    for user in range(1800):
        kept = keyed_keep(streams, user, 4, 2)
        assert kept.tolist() == sorted(set(kept.tolist())) and len(kept) == 2
        if user < 200:
            words = streams.source(user, BOUND_PURPOSE).words(4)
            assert kept.tolist() == sorted(np.argsort(words, kind="stable")[:2].tolist())
        subsets[tuple(kept.tolist())] += 1
    assert stats.chisquare(list(subsets.values())).pvalue > 1e-3
    assert len(keyed_keep(streams, "u", 10, 9)) == 9 and len(keyed_keep(streams, "u", 10, 1)) == 1


def test_keyed_sample_indices_sample_uniformly_with_replacement():
    """``keyed_sample_indices`` (BoundedEMDReduction's sampling): ``s`` indices uniform on ``range(size)``, the
    last index included (chi-square over 5 indices), drawn from the user's stream for the sampling purpose."""
    from scipy import stats

    from userdp.noise.keyed import SAMPLE_PURPOSE, keyed_sample_indices

    streams = KeyedStreams(9)
    counts = np.zeros(5, dtype=np.int64)
    for user in range(1500):
        idx = keyed_sample_indices(streams, user, 5, 3)
        assert idx.shape == (3,) and idx.min() >= 0 and idx.max() < 5
        assert np.array_equal(idx, streams.source(user, SAMPLE_PURPOSE).integers(5, size=3))
        counts += np.bincount(idx, minlength=5)
    assert counts[4] > 0 and stats.chisquare(counts).pvalue > 1e-3
