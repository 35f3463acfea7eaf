"""Random sources: the OS CSPRNG (AES-256-CTR batches under keys from ``os.urandom``) by default; a seeded
PCG64 source only when a caller passes a seed."""

from __future__ import annotations

import os

import numpy as np

from .kernels import _BATCH, _MAX_BATCH_WORDS, _U64, _below_batch, _shuffle_inplace

# --------------------------------------------------------------------------------------------
# Random sources
# --------------------------------------------------------------------------------------------


_ZEROS = bytearray(0)
_PARALLEL_MIN = 1 << 17  # unseeded fills of at least this many items run on several threads
_THREADS = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _aes_ctr_into(out: np.ndarray) -> None:
    """Fill the ``uint64`` array ``out`` with AES-256-CTR keystream under a fresh key and counter block from
    the OS CSPRNG."""
    global _ZEROS
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    nbytes = 8 * out.size
    if len(_ZEROS) < nbytes + 15:
        _ZEROS = bytearray(nbytes + 15)
    enc = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(os.urandom(16))).encryptor()
    # update_into wants 15 spare bytes after its output: all but the last 16 bytes go straight into `out`,
    # the last 16 through a small scratch buffer.
    view = memoryview(out).cast("B")
    k = min(nbytes, 16)
    if nbytes > k:
        enc.update_into(memoryview(_ZEROS)[: nbytes - k], view)
    tail = bytearray(k + 15)
    enc.update_into(memoryview(_ZEROS)[:k], tail)
    view[nbytes - k :] = tail[:k]


def _aes_ctr_words(n: int) -> np.ndarray:
    """``n`` words of AES-256-CTR keystream under a fresh key from the OS CSPRNG."""
    out = np.empty(n, dtype=_U64)
    _aes_ctr_into(out)
    return out


class RandomSource:
    """A stream of uniformly random 64-bit words and the exact uniform draws built on it.

    Parameters
    ----------
    seed:
        ``None`` (default) reads the operating system's CSPRNG. An integer or a
        :class:`numpy.random.Generator` gives a reproducible, *non-cryptographic* stream for
        experiments and tests only.
    """

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        if seed is None:
            self._gen: np.random.Generator | None = None
        elif isinstance(seed, np.random.Generator):
            self._gen = seed
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            self._gen = np.random.Generator(np.random.PCG64(int(seed)))
        else:
            raise TypeError(f"seed must be None, an int or a numpy Generator, not {type(seed).__name__}")

    @property
    def seeded(self) -> bool:
        """True when this stream is reproducible (and therefore not suitable for real releases)."""
        return self._gen is not None

    @property
    def _os_csprng(self) -> bool:
        """True when the words are fresh OS CSPRNG output, which no one can reproduce: a fill may then use
        them in any order, on several threads, and carry unread ones over. A seeded source, and a keyed
        per-user stream (:class:`~userdp.noise.keyed.KeyedSource`, which every engine must replay alike),
        read their words in the one fixed pattern, as does any subclass with its own :meth:`words`."""
        return self._gen is None and type(self).words is RandomSource.words

    def __repr__(self) -> str:
        return "RandomSource(seeded)" if self.seeded else "RandomSource(os.urandom)"

    # -- raw words ------------------------------------------------------------------------
    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words (``uint64``).

        Unseeded: up to 512 words come straight from ``os.urandom``; larger batches are the AES-256-CTR
        keystream under a fresh 256-bit key and 128-bit counter block drawn from ``os.urandom`` for that
        batch (the CTR-DRBG construction of NIST SP 800-90A, as BoringSSL uses), about 10x faster.
        """
        n = int(n)
        if n <= 0:
            return np.empty(0, dtype=_U64)
        if self._gen is None:
            if n <= 512:
                return np.frombuffer(os.urandom(8 * n), dtype=_U64).copy()
            return _aes_ctr_words(n)
        return self._gen.bit_generator.random_raw(n).astype(_U64, copy=False)

    def _fill(self, kernel, out: np.ndarray, per_item: int, *params, slow=None) -> np.ndarray:
        """Fill ``out`` (along its first axis) with a batch kernel, continuing any item that ran out of words
        on the same words plus fresh ones (see the kernel conventions above). ``slow(i)`` finishes item ``i``
        on Python integers when a kernel hands it over (flag 1).

        A seeded source reads its generator's words in a fixed pattern, so a seed always gives the same
        output. The OS CSPRNG has no such duty: a large fill is cut into contiguous slices, one per core,
        each run by its own thread (the kernels release the GIL) on its own AES-CTR streams under fresh keys,
        and the words an item leaves unread are carried into the next batch rather than thrown away. Every
        item is still the exact algorithm run on uniform words, and the slices' streams are independent, so
        the output law is unchanged."""
        n = out.shape[0]
        if self._os_csprng and slow is None and _THREADS > 1 and n >= _PARALLEL_MIN:
            from concurrent.futures import ThreadPoolExecutor

            cuts = np.linspace(0, n, _THREADS + 1).astype(np.int64)
            with ThreadPoolExecutor(_THREADS) as pool:
                jobs = [
                    pool.submit(self._fill_serial, kernel, out[a:b], per_item, *params)
                    for a, b in zip(cuts[:-1], cuts[1:], strict=True)
                ]
                for job in jobs:
                    job.result()
            return out
        return self._fill_serial(kernel, out, per_item, *params, slow=slow)

    def _fill_serial(self, kernel, out: np.ndarray, per_item: int, *params, slow=None) -> np.ndarray:
        n = out.shape[0]
        carry = self._os_csprng  # keep unread CSPRNG words for the next batch
        batch = max(1, min(_BATCH, _MAX_BATCH_WORDS // per_item))  # at most 32 MB of words at a time
        left = np.empty(0, dtype=_U64)
        start = 0
        while start < n:
            stop = min(n, start + batch)
            words = self._more(left, per_item * (stop - start) + 4096)
            i = start
            while i < stop:
                res = kernel(words, i, stop, out, *params)
                j, pos = int(res[0]), int(res[1])
                if j >= stop:
                    break
                if len(res) > 2 and res[2] == 1:
                    slow(j)  # item j is finished on Python integers; the words after pos are unused
                    words, i = words[pos:], j + 1
                    continue
                words = self._more(words[pos:], per_item * (stop - j) + 4096 + (words.size - pos))
                i = j
            if carry and j >= stop:
                left = words[pos:]
            start = stop
        return out

    def _more(self, head: np.ndarray, n_new: int) -> np.ndarray:
        """``head`` followed by words making ``n_new`` in all, or by ``n_new`` fresh words for a seeded or
        keyed source (whose stream must not depend on how many words were left over)."""
        if not self._os_csprng:
            return np.concatenate([head, self.words(n_new)]) if head.size else self.words(n_new)
        if head.size >= n_new:
            return head
        if n_new - head.size <= 512:
            return np.concatenate([head, self.words(n_new - head.size)])
        words = np.empty(n_new, dtype=_U64)
        words[: head.size] = head
        _aes_ctr_into(words[head.size :])
        return words

    # -- uniform draws ------------------------------------------------------------------------
    def uniform(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Uniform floats in the open interval (0, 1): ``(k + 1/2) 2**-53`` for uniform 53-bit ``k``.

        Not used by any mechanism (floats never decide a private output); for simulations and tests."""
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        n = int(np.prod(shape, dtype=np.int64))
        w = self.words(n) >> _U64(11)
        return ((w.astype(np.float64) + 0.5) * 2.0**-53).reshape(shape)

    def integers(self, high: int | np.ndarray, size: int | None = None) -> np.ndarray:
        """Exact uniform integers in ``[0, high)`` (``high`` a scalar with ``size``, or an array).

        Rejection sampling: how many words an item uses is independent of its value, so a batch that runs
        out of words can be redrawn whole without biasing the output."""
        if np.isscalar(high):
            if size is None:
                raise TypeError("size is required when high is a scalar")
            highs = np.full(int(size), int(high), dtype=np.int64)
        else:
            highs = np.ascontiguousarray(high, dtype=np.int64)
        if highs.size and (highs.min() < 1):
            raise ValueError("every upper bound must be at least 1")
        out = np.empty(highs.shape, dtype=np.int64)
        flat_h = highs.reshape(-1)
        flat = out.reshape(-1)
        for start in range(0, flat.size, _BATCH):
            h = flat_h[start : start + _BATCH]
            chunk = flat[start : start + _BATCH]
            budget = 3 * chunk.size + 4096
            while not _below_batch(self.words(budget), h, chunk):
                budget *= 2
        return out

    def bits(self, size: int) -> np.ndarray:
        """``size`` fair coin flips as a boolean array."""
        return (self.words(size) & _U64(1)).astype(bool)

    def shuffle(self, arr: np.ndarray) -> None:
        """Uniformly random in-place permutation (Fisher-Yates) of a 1-D array (word use is independent of
        the permutation drawn, so a redraw after running out of words is unbiased)."""
        budget = 2 * arr.size + 4096
        while True:
            work = arr.copy()
            if _shuffle_inplace(self.words(budget), work):
                arr[...] = work
                return
            budget *= 2

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of ``range(n)``."""
        p = np.arange(int(n), dtype=np.int64)
        self.shuffle(p)
        return p

    def randbelow(self, n: int) -> int:
        """Exact uniform Python integer in ``[0, n)`` for arbitrarily large ``n``."""
        if n < 1:
            raise ValueError("n must be >= 1")
        if n == 1:
            return 0
        k = (n - 1).bit_length()
        nwords = (k + 63) // 64
        while True:
            w = self.words(nwords)
            v = int.from_bytes(w.tobytes(), "little") & ((1 << k) - 1)
            if v < n:
                return v


def seeded(seed: int) -> RandomSource:
    """A reproducible random source for experiments and tests (never for real releases)."""
    return RandomSource(seed)


RngLike = RandomSource | np.random.Generator | int | None


def resolve_rng(rng: RngLike) -> RandomSource:
    """Turn the ``rng=`` argument of any userdp function into a :class:`RandomSource`.

    ``None`` gives the OS CSPRNG. A seed or generator is accepted only because the caller passed it.
    """
    if isinstance(rng, RandomSource):
        return rng
    return RandomSource(rng)
