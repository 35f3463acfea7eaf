"""Keyed per-user streams: AES-256-CTR under HMAC-SHA256(master, purpose, user key), so that every engine, and
a retried Spark task, draws the same per-user randomness."""

from __future__ import annotations

import hashlib
import hmac
import os

import numpy as np

from ..errors import DataError
from .kernels import _U64
from .sources import RandomSource, RngLike, resolve_rng

# --------------------------------------------------------------------------------------------
# Keyed per-user streams: AES-256-CTR under HMAC-SHA256(master, user key)
# --------------------------------------------------------------------------------------------
#
# Per-user randomness that must be recomputable (a retried Spark task, the local engine reproducing
# the Spark engine's rows) is a deterministic function of a 256-bit master secret and the user key.
# The function is a PRF (HMAC-SHA256) followed by a stream cipher (AES-256-CTR), so a party that knows
# its own users' keys, items and outputs learns nothing about the master or about other users' streams.

_KEYED_STREAM_LABEL = b"userdp keyed per-user stream v1\x00"
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


def _keyed_stream_key(master: bytes, purpose: str, user_key: object) -> bytes:
    """The 256-bit AES key of one user's stream: HMAC-SHA256 over a label, the length-prefixed purpose and
    the canonical user key encoding (the key encoding comes last, so the message is unambiguous)."""

    p = purpose.encode("utf-8")
    msg = _KEYED_STREAM_LABEL + len(p).to_bytes(4, "big") + p + encode_user_key(user_key)
    return hmac.new(master, msg, hashlib.sha256).digest()


class KeyedSource(RandomSource):
    """One user's random stream: the AES-256-CTR keystream under a per-user key, counter starting at zero.

    A :class:`RandomSource` whose :meth:`words` read the keystream, so every sampler built on words
    (``integers``, ``randbelow``, ``shuffle``, ``permutation``, GKRR's kernel, the exact noise samplers)
    works on it unchanged, and two sources with the same key give the same draws in the same order.
    Made by :meth:`KeyedStreams.source`; not picklable (ship the :class:`KeyedStreams` instead).
    """

    def __init__(self, key: bytes, seeded: bool) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        super().__init__()
        # Each per-user key encrypts exactly one stream, so a fixed all-zero initial counter block is safe.
        self._encryptor = Cipher(algorithms.AES(bytes(key)), modes.CTR(bytes(16))).encryptor()
        self._from_seed = bool(seeded)

    @property
    def seeded(self) -> bool:
        """True when the master came from an explicit seed (reproducible: not for real releases)."""
        return self._from_seed

    @property
    def _os_csprng(self) -> bool:
        return False  # a keyed stream is replayed alike by every engine: its words are read in a fixed pattern

    def __repr__(self) -> str:
        return "KeyedSource(seeded)" if self._from_seed else "KeyedSource(AES-256-CTR, os.urandom master)"

    def words(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit words of the keystream (little-endian, so every platform agrees)."""
        n = int(n)
        if n <= 0:
            return np.empty(0, dtype=_U64)
        return np.frombuffer(self._encryptor.update(bytes(8 * n)), dtype="<u8").astype(_U64)

    def __reduce__(self):
        raise TypeError("a KeyedSource cannot be pickled; ship the KeyedStreams and call .source() where needed")


def _keyed_streams_from_state(master: bytes, seeded: bool) -> KeyedStreams:
    return KeyedStreams._from_master(master, seeded)


class KeyedStreams:
    """A 256-bit master secret and the per-user random streams derived from it.

    ``KeyedStreams().source(user_key, purpose)`` is user ``user_key``'s stream for one purpose: the
    AES-256-CTR keystream under the key HMAC-SHA256(master, label ‖ purpose ‖ :func:`encode_user_key`),
    as a :class:`KeyedSource`. The same master, purpose and key always give the same stream -- on the
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

    __slots__ = ("_master", "_seeded")

    def __init__(self, seed: int | None = None) -> None:

        if seed is None:
            master, from_seed = os.urandom(_MASTER_BYTES), False
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            master, from_seed = hashlib.sha256(_KEYED_SEED_LABEL + encode_user_key(int(seed))).digest(), True
        else:
            raise TypeError(f"seed must be None or an int, not {type(seed).__name__}")
        self._master: bytes = master
        self._seeded: bool = from_seed

    @classmethod
    def _from_master(cls, master: bytes, seeded: bool) -> KeyedStreams:
        master = bytes(master)
        if len(master) != _MASTER_BYTES:
            raise ValueError(f"the master secret must be {_MASTER_BYTES} bytes")
        obj = cls.__new__(cls)
        obj._master, obj._seeded = master, bool(seeded)
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

    def source(self, user_key: object, purpose: str = "") -> KeyedSource:
        """User ``user_key``'s stream for ``purpose`` (a fresh :class:`KeyedSource` at the stream's start).

        Raises
        ------
        DataError
            When the user key's type has no canonical encoding (see :func:`encode_user_key`).
        """
        return KeyedSource(_keyed_stream_key(self._master, str(purpose), user_key), self._seeded)

    def __repr__(self) -> str:
        return "KeyedStreams(seeded)" if self._seeded else "KeyedStreams(os.urandom, 256-bit master)"

    def __reduce__(self):
        return (_keyed_streams_from_state, (self._master, self._seeded))


# Purposes of the keyed per-user streams (one stream per user and purpose; see KeyedStreams.source).
SAMPLE_PURPOSE = "BoundedEMDReduction: sampling with replacement"
RANDOMIZE_PURPOSE = "local-model item randomization"
BOUND_PURPOSE = "set union: contribution bounding"


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


def keyed_keep(streams: KeyedStreams, user_key: object, size: int, cap: int) -> np.ndarray:
    """Which ``cap`` of a user's ``size`` items (in the order of their labels' text) the user keeps: a
    uniformly random subset, the ``cap`` smallest of ``size`` words of the user's keyed stream for
    :data:`BOUND_PURPOSE` (ties, of probability below ``size^2 / 2^65``, go to the earlier item). Returns the
    kept positions, ascending. Every engine calls this for every user holding more than ``cap`` items (in
    memory, per chunk, on the Spark executors), so they keep the same items."""
    words = streams.source(user_key, BOUND_PURPOSE).words(int(size))
    return np.sort(np.argsort(words, kind="stable")[: int(cap)])
