"""Keyed per-user streams: AES-256-CTR under a key derived from a master secret and the purpose, from a
counter block keyed by the user, so that every engine, and a retried Spark task, draws the same per-user
randomness."""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
from typing import Any

import numpy as np
from numba import njit

from ..errors import DataError
from .kernels import _U64
from .sources import RandomSource, RngLike, resolve_rng

# --------------------------------------------------------------------------------------------
# Keyed per-user streams: AES-256-CTR under a per-purpose key, from a per-user counter block
# --------------------------------------------------------------------------------------------
#
# Per-user randomness that must be recomputable (a retried Spark task, the local engine reproducing
# the Spark engine's rows) is a deterministic function of a 256-bit master secret and the user key:
#
#   K_aes = HMAC-SHA256(master, label | "aes\0" | len(purpose) | purpose)      (len: 4 bytes, big-endian)
#   K_iv  = HMAC-SHA256(master, label | "iv\0" | len(purpose) | purpose)
#   K_int = HMAC-SHA256(master, label | "int\0" | len(purpose) | purpose)
#   N_u   = AES-256(K_int, "int64\0\0\0" | u as 8 bytes big-endian two's complement)
#                                    for an integer key u (not a bool) with -2^63 <= u < 2^63, else
#   N_u   = BLAKE2b(key = K_iv, digest_size = 16, message = encode_user_key(u))  (the initial counter block)
#   stream of u = AES-256-CTR keystream under K_aes from the counter block N_u   (128-bit big-endian counter)
#
# so every user's stream is a standard CTR stream, and all of a purpose's users share one AES key: the
# cipher is set up once per process and purpose, and the streams of a whole chunk of users come out of
# one AES call over their counter blocks. The counter blocks of integer keys (the usual person ids) come out
# of one AES call too (AES under K_int as a pseudo-random permutation of one block: distinct keys, distinct
# blocks); any other key costs one keyed BLAKE2b of its encoding. Without the master, N_u is a pseudo-random
# 128-bit value and the keystream blocks of different users are AES
# of different counter blocks -- pseudo-random and independent -- unless two users' counter ranges
# overlap: with n users drawing at most 2^40 blocks each, probability below n^2 * 2^-88 (10^8 users:
# about 2^-35), plus Q^2 * 2^-129 for Q blocks drawn under one AES key (AES is a permutation), and no one
# without K_iv can steer it. A party that knows its own users' keys, items and outputs learns nothing
# about the master, the purpose keys or other users' streams.
#
# (Version 1 of these streams, until November 2026, keyed one AES key per user by HMAC; setting up a
# cipher per user, about 9 us, dominated PrivEMDItemWise on many users. Version 2 derived every counter block
# with a keyed BLAKE2b in a Python loop, a fifth of PrivEMDItemWise's time at 10^6 users. Seeded keyed
# outputs changed with v2 and v3.)

_KEYED_STREAM_LABEL = b"userdp keyed per-user streams v3\x00"
_INT_TAG = int.from_bytes(b"int64\x00\x00\x00", "big")  # the first half of an integer key's block
_KEYED_SEED_LABEL = b"userdp keyed master from an explicit seed v1\x00"
_MASTER_BYTES = 32


def encode_user_key(user_key: object) -> bytes:
    """The canonical, type-tagged byte encoding of a user key (the message the per-user key is derived from).

    Keys that a local dataset and a Spark executor see for the same user encode identically: NumPy scalars
    encode like the Python values they hold (``np.int64(7)``, ``np.int32(7)`` and ``7`` agree, as do
    ``np.str_('a')`` and ``'a'``), and ``-0.0`` encodes like ``0.0``. Keys of different types never collide
    (``1``, ``'1'``, ``b'1'``, ``1.0`` and ``True`` are five different users): the encoding is a type tag,
    a zero byte, then an unambiguous payload (decimal digits for integers, UTF-8 for strings, the raw bytes,
    ``float.hex`` for floats).

    Parameters
    ----------
    user_key:
        An integer (Python or NumPy, not bool), a string, bytes, a float, or a bool.

    Returns
    -------
    bytes
        The encoding.

    Raises
    ------
    DataError
        For any other type (dates, decimals, tuples, ``None``...): convert the user column to strings or
        integers first.
    """
    if isinstance(user_key, (bool, np.bool_)):
        return b"bool\x00" + (b"1" if user_key else b"0")
    if isinstance(user_key, (int, np.integer)):
        return b"int\x00" + str(int(user_key)).encode("ascii")
    if isinstance(user_key, str):
        return b"str\x00" + user_key.encode("utf-8", "surrogatepass")
    if isinstance(user_key, (bytes, bytearray, memoryview)):
        return b"bytes\x00" + bytes(user_key)
    if isinstance(user_key, (float, np.floating)):
        x = float(user_key)
        return b"float\x00" + (0.0 if x == 0.0 else x).hex().encode("ascii")
    raise DataError(
        "keyed per-user randomness needs user keys that are integers, strings, bytes or floats, "
        f"not {type(user_key).__name__}; convert the user column first"
    )


def _purpose_keys(master: bytes, purpose: str) -> tuple[bytes, bytes, bytes]:
    """The purpose's AES-256 key, its counter-block key and its integer counter-block key: HMAC-SHA256 of the
    master over the label, a role tag and the length-prefixed purpose."""
    p = purpose.encode("utf-8")
    tail = len(p).to_bytes(4, "big") + p
    return (
        hmac.new(master, _KEYED_STREAM_LABEL + b"aes\x00" + tail, hashlib.sha256).digest(),
        hmac.new(master, _KEYED_STREAM_LABEL + b"iv\x00" + tail, hashlib.sha256).digest(),
        hmac.new(master, _KEYED_STREAM_LABEL + b"int\x00" + tail, hashlib.sha256).digest(),
    )


def _is_int64(k: object) -> bool:
    """Whether a user key takes the integer counter block: an integer (not a bool) in ``[-2^63, 2^63)``."""
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) and -(2**63) <= int(k) < 2**63


def _int_counter_blocks(int_cipher: Any, keys: np.ndarray) -> np.ndarray:
    """``N_u`` of integer keys (an int64 array): AES-256 under the purpose's integer key of the blocks
    ``"int64\\0\\0\\0" | u`` (8 bytes big-endian), all in one call; shape ``(n, 2)``, big-endian words."""
    blocks = np.empty((keys.size, 2), dtype=">u8")
    blocks[:, 0] = _INT_TAG
    blocks[:, 1] = keys.astype(np.int64).view(np.uint64)
    out = np.empty(keys.size * 2 + 2, dtype=">u8")  # update_into wants room for one more block less a byte
    n = int_cipher.update_into(blocks.reshape(-1).view(np.uint8), out.view(np.uint8))
    return out[: n // 8].reshape(-1, 2)


def _counter_blocks(int_cipher: Any, iv_key: bytes, user_keys: Any) -> np.ndarray:
    """Every user's initial counter block ``N_u`` (shape ``(n, 2)``, big-endian words): integer keys by one AES
    call, any other key by a keyed BLAKE2b of :func:`encode_user_key` (the dispatch is by each key's value, so
    a key gets the same block in an integer array, an object array or alone)."""
    if type(user_keys) is list and len(user_keys) == 1 and _is_int64(user_keys[0]):  # one person (source())
        block = int_cipher.update(_INT_TAG.to_bytes(8, "big") + int(user_keys[0]).to_bytes(8, "big", signed=True))
        return np.frombuffer(block, dtype=">u8").reshape(1, 2)
    arr = user_keys if type(user_keys) is np.ndarray and user_keys.ndim == 1 else None
    if arr is not None and (arr.dtype.kind == "i" or (arr.dtype.kind == "u" and (not arr.size or arr.max() < 2**63))):
        return _int_counter_blocks(int_cipher, arr)
    if arr is not None and arr.dtype.kind == "U":
        return _keyed_digests(iv_key, _encode_user_keys(arr))
    keys = list(user_keys.tolist() if arr is not None and arr.dtype.kind in "iu" else user_keys)
    ints = [i for i, k in enumerate(keys) if _is_int64(k)]
    if not ints:
        return _keyed_digests(iv_key, _encode_user_keys(keys))
    out = np.empty((len(keys), 2), dtype=">u8")
    out[ints] = _int_counter_blocks(int_cipher, np.array([int(keys[i]) for i in ints], dtype=np.int64))
    if len(ints) < len(keys):
        taken = set(ints)
        rest = [i for i in range(len(keys)) if i not in taken]
        out[rest] = _keyed_digests(iv_key, _encode_user_keys([keys[i] for i in rest]))
    return out


def _keyed_digests(iv_key: bytes, encodings: list[bytes]) -> np.ndarray:
    """BLAKE2b-128 under ``iv_key`` of every encoding, as ``(n, 2)`` big-endian words."""
    digests = b"".join(hashlib.blake2b(e, digest_size=16, key=iv_key).digest() for e in encodings)
    return np.frombuffer(digests, dtype=">u8").reshape(-1, 2)


def _encode_user_keys(user_keys: Any) -> list[bytes]:
    """:func:`encode_user_key` of every key; a string array without a per-key type test (integer keys in
    int64's range take the integer counter block, :func:`_counter_blocks`, not an encoding)."""
    arr = user_keys if type(user_keys) is np.ndarray and user_keys.ndim == 1 else None
    if arr is not None and arr.dtype.kind == "U":
        return [b"str\x00" + v.encode("utf-8", "surrogatepass") for v in arr.tolist()]
    return [encode_user_key(k) for k in user_keys]


_M8, _M16 = np.uint64(0x00FF00FF00FF00FF), np.uint64(0x0000FFFF0000FFFF)
_LITTLE = sys.byteorder == "little"


@njit(cache=True)
def _big_endian(x, swap):
    """The word whose in-memory bytes are ``x`` in big-endian order (a byte swap on a little-endian host)."""
    if not swap:
        return x
    x = ((x & _M8) << np.uint64(8)) | ((x >> np.uint64(8)) & _M8)
    x = ((x & _M16) << np.uint64(16)) | ((x >> np.uint64(16)) & _M16)
    return (x << np.uint64(32)) | (x >> np.uint64(32))


@njit(cache=True)
def _counter_blocks_kernel(hi, lo, counts, swap, out):
    """``out[j]`` (two words, high first, each stored big-endian) = the j-th block of the concatenated runs:
    user ``i``'s counter blocks ``N_i + b`` (mod 2^128) for ``b < counts[i]``, ``N_i = hi[i] * 2^64 + lo[i]``."""
    j = 0
    for i in range(counts.size):
        h, l0 = hi[i], lo[i]
        for b in range(counts[i]):
            low = l0 + np.uint64(b)
            out[j, 0] = _big_endian(h + np.uint64(1) if low < l0 else h, swap)  # the carry into the high word
            out[j, 1] = _big_endian(low, swap)
            j += 1


def _keystream(cipher: Any, hi: np.ndarray, lo: np.ndarray, counts: np.ndarray, first: int = 0) -> np.ndarray:
    """The keystream words (little-endian) of every user ``i``'s counter blocks ``N_i + first + b``, ``b <
    counts[i]`` (mod 2^128), user after user: two words a block, one AES call for all of them."""
    out = np.empty((int(counts.sum()), 2), dtype=_U64)
    if first:
        lo = lo + _U64(first)
        hi = hi + (lo < _U64(first)).astype(_U64)
    _counter_blocks_kernel(hi, lo, counts.astype(np.int64), _LITTLE, out)
    ks = np.empty(out.size + 2, dtype=_U64)  # update_into wants room for one more block less a byte
    n = cipher.update_into(out.reshape(-1).view(np.uint8), ks.view(np.uint8))  # byte buffers, no copies
    ks = ks[: n // 8]
    return ks if _LITTLE else ks.byteswap()


class KeyedSource(RandomSource):
    """One user's random stream for one purpose: the AES-256-CTR keystream under the purpose's key, from the
    user's counter block, read from its start.

    A :class:`RandomSource` whose :meth:`words` read the keystream, so every sampler built on words
    (``integers``, ``randbelow``, ``shuffle``, ``permutation``, GKRR's kernel, the exact noise samplers)
    works on it unchanged, and two sources of the same user and purpose give the same draws in the same
    order. Made by :meth:`KeyedStreams.source` or :meth:`KeyedBatch.source`; not picklable (ship the
    :class:`KeyedStreams` instead).
    """

    def __init__(self, batch: KeyedBatch, index: int) -> None:
        super().__init__()
        self._batch, self._index, self._pos = batch, int(index), 0

    @property
    def seeded(self) -> bool:
        """True when the master came from an explicit seed (reproducible: not for real releases)."""
        return self._batch.seeded

    @property
    def _os_csprng(self) -> bool:
        return False  # a keyed stream is replayed alike by every engine: its words are read in a fixed pattern

    def __repr__(self) -> str:
        return "KeyedSource(seeded)" if self.seeded else "KeyedSource(AES-256-CTR, os.urandom master)"

    def words(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit words of the keystream (little-endian, so every platform agrees)."""
        n = int(n)
        if n <= 0:
            return np.empty(0, dtype=_U64)
        pos, self._pos = self._pos, self._pos + n
        b0, b1 = pos // 2, (pos + n + 1) // 2
        i = self._index
        b = self._batch
        ks = _keystream(b._cipher, b.hi[i : i + 1], b.lo[i : i + 1], np.array([b1 - b0]), b0)
        return ks[pos - 2 * b0 : pos - 2 * b0 + n]

    def __reduce__(self):
        raise TypeError("a KeyedSource cannot be pickled; ship the KeyedStreams and call .source() where needed")


class KeyedBatch:
    """The keyed streams of a list of users for one purpose: their counter blocks, computed once, and the
    purpose's cipher. :meth:`words` reads many users' streams with one AES call; :meth:`source` gives user
    ``i``'s stream as a :class:`KeyedSource`. Made by :meth:`KeyedStreams.batch`."""

    def __init__(self, ciphers: tuple[Any, bytes, Any], user_keys: Any, seeded: bool) -> None:
        if isinstance(user_keys, (str, bytes)) or (isinstance(user_keys, np.ndarray) and user_keys.ndim != 1):
            raise ValueError("user keys must be a one-dimensional sequence or array")
        cipher, iv_key, int_cipher = ciphers
        n = _counter_blocks(int_cipher, iv_key, user_keys).astype(_U64)
        self.hi, self.lo = np.ascontiguousarray(n[:, 0]), np.ascontiguousarray(n[:, 1])
        self._cipher, self.seeded = cipher, bool(seeded)

    def __len__(self) -> int:
        return int(self.lo.size)

    def __reduce__(self):
        raise TypeError("a KeyedBatch cannot be pickled; ship the KeyedStreams and call .batch() where needed")

    def source(self, i: int) -> KeyedSource:
        """User ``i``'s stream from its start."""
        return KeyedSource(self, i)

    def words(self, counts: np.ndarray) -> np.ndarray:
        """The first ``counts[i]`` words of user ``i``'s stream, for every user, concatenated (user 0 first):
        the words ``self.source(i).words(counts[i])`` would give."""
        counts = np.asarray(counts)
        if (
            counts.shape != self.lo.shape
            or (counts.size and counts.dtype.kind not in "iu")
            or (counts.size and not 0 <= counts.min() <= counts.max() < 2**62)
        ):
            raise ValueError("one non-negative integer word count per user")
        counts = counts.astype(np.int64)
        nb = (counts + 1) // 2
        total = int(nb.sum())
        if total == 0:
            return np.empty(0, dtype=_U64)
        ks = _keystream(self._cipher, self.hi, self.lo, nb)
        if np.all(counts % 2 == 0):
            return ks
        keep = np.ones(2 * total, dtype=bool)
        keep[2 * np.cumsum(nb)[counts % 2 == 1] - 1] = False  # the unread half of an odd count's last block
        return ks[keep]


def _keyed_streams_from_state(master: bytes, seeded: bool) -> KeyedStreams:
    return KeyedStreams._from_master(master, seeded)


class KeyedStreams:
    """A 256-bit master secret and the per-user random streams derived from it.

    ``KeyedStreams().source(user_key, purpose)`` is user ``user_key``'s stream for one purpose: the
    AES-256-CTR keystream under the purpose's key HMAC-SHA256(master, label ‖ "aes" ‖ purpose), from the
    user's counter block -- AES-256 under HMAC-SHA256(master, label ‖ "int" ‖ purpose) of the tagged 8 bytes
    of an integer key in int64's range, else BLAKE2b-128 of :func:`encode_user_key` under the purpose's
    counter-block key HMAC-SHA256(master, label ‖ "iv" ‖ purpose) -- as a :class:`KeyedSource`;
    :meth:`batch` gives the streams
    of many users at once. The same master, purpose and key always give the same stream -- on the
    driver, on every Spark executor and in the local engine -- so a retried task recomputes the same rows;
    without the master, the streams of different users (or purposes) are computationally independent, and
    knowing one's own user's stream reveals nothing about the master or any other user's stream.

    Parameters
    ----------
    seed:
        ``None`` (default): the master is 32 fresh bytes from the OS CSPRNG (``os.urandom``). An integer
        gives a reproducible master (SHA-256 of the seed) for tests and demonstrations only: it is marked
        :attr:`seeded`, like ``RandomSource(seed)``, and gives no privacy.

    Notes
    -----
    The master is never logged, printed or returned, and ``repr``/``str`` do not show it. It must, however,
    reach every executor that derives per-user streams: an instance is picklable, and the pickle (for
    example inside the closure Spark ships to its executors) **contains the master**. Treat the cluster's
    task serialization as seeing the secret, as it sees the data. Use one instance per release (or a
    distinct ``purpose`` per use) so that unrelated draws for the same user never share a stream.
    """

    __slots__ = ("_master", "_seeded", "_ciphers")

    def __init__(self, seed: int | None = None) -> None:

        if seed is None:
            master, from_seed = os.urandom(_MASTER_BYTES), False
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            master, from_seed = hashlib.sha256(_KEYED_SEED_LABEL + encode_user_key(int(seed))).digest(), True
        else:
            raise TypeError(f"seed must be None or an int, not {type(seed).__name__}")
        self._master: bytes = master
        self._seeded: bool = from_seed
        self._ciphers: dict[str, tuple[Any, bytes, Any]] = {}

    @classmethod
    def _from_master(cls, master: bytes, seeded: bool) -> KeyedStreams:
        master = bytes(master)
        if len(master) != _MASTER_BYTES:
            raise ValueError(f"the master secret must be {_MASTER_BYTES} bytes")
        obj = cls.__new__(cls)
        obj._master, obj._seeded, obj._ciphers = master, bool(seeded), {}
        return obj

    @classmethod
    def from_rng(cls, rng: KeyedStreams | RngLike = None) -> KeyedStreams:
        """Resolve the ``rng=`` argument of a keyed operation.

        A :class:`KeyedStreams` is returned as is (share one between engines to get the same draws).
        ``None`` or an unseeded :class:`RandomSource` gives a fresh master from ``os.urandom(32)``; an int
        is a seed (``KeyedStreams(seed)``); a seeded source or NumPy generator gives a reproducible master of
        256 bits drawn from it. Reproducible masters are marked :attr:`seeded`.
        """
        if isinstance(rng, KeyedStreams):
            return rng
        if rng is None:
            return cls()
        if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
            return cls(int(rng))
        src = resolve_rng(rng)
        if not src.seeded:
            return cls()
        return cls._from_master(src.words(_MASTER_BYTES // 8).astype("<u8").tobytes(), seeded=True)

    @property
    def seeded(self) -> bool:
        """True when the master is reproducible (an explicit seed): such streams give no privacy."""
        return self._seeded

    def _purpose(self, purpose: str) -> tuple[Any, bytes, Any]:
        """The purpose's AES-256 cipher (a reusable ECB encryptor over counter blocks: CTR by hand), its
        counter-block key and its integer counter-block cipher (ECB, one block a key), made once per process
        and purpose."""
        purpose = str(purpose)
        if purpose not in self._ciphers:
            from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

            aes_key, iv_key, int_key = _purpose_keys(self._master, purpose)
            self._ciphers[purpose] = (
                Cipher(algorithms.AES(aes_key), modes.ECB()).encryptor(),
                iv_key,
                Cipher(algorithms.AES(int_key), modes.ECB()).encryptor(),
            )
        return self._ciphers[purpose]

    def batch(self, user_keys: Any, purpose: str = "") -> KeyedBatch:
        """The streams of the users ``user_keys`` (a sequence or array) for ``purpose``, as a
        :class:`KeyedBatch`: ``batch.source(i)`` is ``self.source(user_keys[i], purpose)``.

        Raises
        ------
        DataError
            When a user key's type has no canonical encoding (see :func:`encode_user_key`).
        """
        return KeyedBatch(self._purpose(purpose), user_keys, self._seeded)

    def source(self, user_key: object, purpose: str = "") -> KeyedSource:
        """User ``user_key``'s stream for ``purpose`` (a fresh :class:`KeyedSource` at the stream's start).

        Raises
        ------
        DataError
            When the user key's type has no canonical encoding (see :func:`encode_user_key`).
        """
        return self.batch([user_key], purpose).source(0)

    def __repr__(self) -> str:
        return "KeyedStreams(seeded)" if self._seeded else "KeyedStreams(os.urandom, 256-bit master)"

    def __reduce__(self):
        return (_keyed_streams_from_state, (self._master, self._seeded))


# Purposes of the keyed per-user streams (one stream per user and purpose; see KeyedStreams.source).
SAMPLE_PURPOSE = "BoundedEMDReduction: sampling with replacement"
RANDOMIZE_PURPOSE = "local-model item randomization"
BOUND_PURPOSE = "set union: contribution bounding"
SIPS_BOUND_PURPOSE = "DP-SIPS: contribution bounding, round"


def sips_round_purpose(round_: int) -> str:
    """The purpose of DP-SIPS's bounding in round ``round_`` (from 1): :data:`SIPS_BOUND_PURPOSE` and the
    round's number, so that every round reads its own words (each round keeps a fresh uniformly random subset
    of what the person has left, independent of the other rounds' choices; Swanberg et al. 2023, Algorithm 1)."""
    return f"{SIPS_BOUND_PURPOSE} {int(round_)}"


def keyed_sample_indices(streams: KeyedStreams, user_key: object, size: int, s: int) -> np.ndarray:
    """``s`` indices drawn uniformly with replacement from ``range(size)`` with the user's keyed stream for
    :data:`SAMPLE_PURPOSE`. Every engine calls this function for every user (in memory, per chunk, on the
    Spark executors), so they draw the same rows, and a retried task draws them again."""
    return streams.source(user_key, SAMPLE_PURPOSE).integers(int(size), size=int(s))


def keyed_randomize(streams: KeyedStreams, user_key: object, codes: np.ndarray, randomizer) -> np.ndarray:
    """One user's randomized item codes: ``randomizer`` applied to the user's sorted codes with the user's
    keyed stream for :data:`RANDOMIZE_PURPOSE`, sorted. Every engine calls this function for every user."""
    codes = np.sort(np.asarray(codes, dtype=np.int64))
    return np.sort(randomizer.randomize(codes, streams.source(user_key, RANDOMIZE_PURPOSE)))


def keyed_keep(
    streams: KeyedStreams, user_key: object, size: int, cap: int, purpose: str = BOUND_PURPOSE
) -> np.ndarray:
    """Which ``cap`` of a user's ``size`` items (in the order of their labels' text) the user keeps: a
    uniformly random subset, the ``cap`` smallest of ``size`` words of the user's keyed stream for ``purpose``
    (:data:`BOUND_PURPOSE`; DP-SIPS's rounds: :func:`sips_round_purpose`; ties, of probability below
    ``size^2 / 2^65``, go to the earlier item). Returns the kept positions, ascending. Every engine calls this
    for every user holding more than ``cap`` items (in memory, per chunk, on the Spark executors), so they
    keep the same items."""
    words = streams.source(user_key, purpose).words(int(size))
    return np.sort(np.argsort(words, kind="stable")[: int(cap)])


class KeyedKeep:
    """:func:`keyed_keep` with its streams, bound and purpose fixed: ``keep(user_key, size)`` is
    ``keyed_keep(streams, user_key, size, cap, purpose)``, and :meth:`many` draws the same choice for many
    users with one AES call (the engines' batch path; picklable, so it runs on the Spark executors too)."""

    def __init__(self, streams: KeyedStreams, cap: int, purpose: str = BOUND_PURPOSE) -> None:
        self.streams, self.cap, self.purpose = streams, int(cap), str(purpose)

    def __call__(self, user_key: object, size: int) -> np.ndarray:
        return keyed_keep(self.streams, user_key, size, self.cap, self.purpose)

    def many(self, user_keys: Any, sizes: np.ndarray) -> np.ndarray:
        """Which items every user keeps: for users ``i`` holding ``sizes[i]`` items (each more than ``cap``,
        in the order of their labels' text), a boolean per item, users one after another, true at the
        positions ``self(user_keys[i], sizes[i])`` gives."""
        sizes = np.asarray(sizes, dtype=np.int64)
        words = self.streams.batch(user_keys, self.purpose).words(sizes)
        kept = np.zeros(words.size, dtype=np.bool_)
        _smallest_per_run(sizes, words, np.int64(self.cap), kept)
        return kept


@njit(cache=True)
def _smallest_per_run(sizes, words, cap, kept):
    """``kept`` true at the ``cap`` smallest words of every run (runs of ``sizes[i]`` words, one after
    another), ties to the earlier word: :func:`keyed_keep`'s stable argsort, run by run."""
    start = 0
    for i in range(sizes.size):
        order = np.argsort(words[start : start + sizes[i]], kind="mergesort")
        for j in range(min(cap, sizes[i])):
            kept[start + order[j]] = True
        start += sizes[i]
