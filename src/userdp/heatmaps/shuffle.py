"""DP heatmaps in the shuffle model (Ghazi et al., AAAI 2023, appendix F): the noisy pyramid ``y'`` of
Algorithm 1 computed by a distributed protocol (Balle, Bell, Gascón & Nissim, CCS 2020 [BBGN20]; the
coordinate-by-coordinate summation of Cheu et al. 2019), then the rest of the sparse EMD aggregation
(:mod:`.sparse`: top-``w`` selection and Reconstruct) run on it unchanged.

The protocol (appendix F, with ``n`` parties, scaling factor ``B`` and ``m`` coordinates)
-----------------------------------------------------------------------------------------
* **Randomizer** (each party ``j``, :func:`randomize_user`): the party's pyramid ``y^j`` (its cell sums at
  every measured level, over the real cells), scaled and rounded ``z^j = floor(B y^j)``, plus its noise share
  ``X_j - Y_j`` per coordinate with ``X_j, Y_j ~ Polya(1/n, alpha_i)`` independent (level ``i``'s ratio
  ``alpha_i = exp(-eps_i / B)``); the noisy ``z'^j`` is split into ``r`` additive shares in ``Z_q`` (``r - 1``
  uniform, the last one ``z'^j`` minus their sum) and every share is sent as the message ``(a, w^b_a)``.
* **Shuffler** (:func:`shuffle_messages`): a uniformly random permutation of all ``n r m`` messages.
* **Analyzer** (:func:`analyze`): per coordinate ``a``, the sum over ``Z_q`` of the messages labelled ``a``,
  decoded to an integer (below), divided by ``B``: the noisy cell sums ``y' = P s + nu`` of Algorithm 1.
  :func:`shuffle_sparse_emd_agg` then runs Algorithm 1's selection and Algorithm 2 on them.

**The noise adds up to the central discrete Laplace exactly.** ``Polya(r, alpha)`` (negative binomial of real
shape ``r``) is infinitely divisible: ``n`` independent ``Polya(1/n, alpha)`` add up to ``Polya(1, alpha)``, the
geometric law, and the difference of two independent geometrics is the discrete Laplace ``P(x) ∝
alpha^|x|``. Each coordinate's total noise is therefore exactly discrete Laplace of ratio ``alpha_i`` (tested
by exact convolution and on the sampler's draws). The draws are exact (:func:`userdp.noise.polya`: an exact
geometric split by a Polya urn, integer arithmetic only).

**Sensitivity and epsilon.** Neighbouring inputs: one of the ``n`` parties holds a distribution (mass 1) or
holds nothing (the all-zero input; it still sends its noise shares): the add/remove-one-user relation of
the central algorithm, with the number of parties public. A party's level-``i`` coordinates ``floor(B y^j_i)``
are non-negative and sum to at most ``B``, so each level's integer sums change by at most ``B`` in l1, and
noise of ratio ``alpha_i <= exp(-eps_i / B)`` makes level ``i`` ``eps_i``-DP; the levels compose to ``eps =
sum_i eps_i`` (the budget split of :func:`.sparse.level_budgets`). ``alpha_i = exp(-STEP / tau_i)`` with the
integer ``tau_i = ceil(B STEP / eps_i)`` and ``STEP = 2^20``, so level ``i`` spends ``B STEP / tau_i``, in
``(eps_i (1 - eps_i / (B STEP)), eps_i]``: the rounding only ever adds noise. Replacing one party's
distribution by another is the composition of a removal and an addition: ``2 eps``.

**Delta** (the summation's): the analyzer's view is within ``delta`` of a function of the ``m`` noisy sums
alone when every coordinate is split into

    ``r = ceil((2 ln(e^eps + 1) + 2 ln(m / delta) + ln q) / ln n + 1)``

shares (appendix F's choice, from Corollary 6 and Lemma 5.2 of [BBGN20]; we take the appendix's parameter
as stated). The view is then ``(eps, delta)``-DP: :class:`userdp.privacy.ShuffleDP`.

Where the appendix is ambiguous or wrong, and what is done here
--------------------------------------------------------------
* **Two Polya shares per party and coordinate, not one.** The appendix adds one ``Polya(1/n, .)`` term per
  party; their sum is a geometric, which is one-sided (``>= 0``) and gives no privacy at all (the output is
  never below the true sum, so a removal is detected whenever the noise is 0). The discrete Laplace needs the
  *difference* of two independent sums: each party adds ``X_j - Y_j``.
* **The ratio carries the scaling.** The appendix writes ``Polya(1/n, e^{-eps_i})``; the coordinates are
  scaled by ``B`` (sensitivity ``B`` per level), so the ratio must be ``e^{-eps_i / B}`` for ``eps_i``-DP
  (with ``e^{-eps_i}`` the protocol would be ``B eps``-DP).
* **The last share is that of the noisy value:** ``w^r = z'^j - w^1 - ... - w^{r-1}`` (the appendix writes
  ``z^j``, which would drop the noise).
* **The modulus has room for the noise: ``q = B n + 2h + 1``**, not ``q = B n``. The noisy sum ``sum_j z^j +
  N`` lies in ``[-h, B n + h]`` except with probability below ``beta`` per coordinate (``h =
  ceil(ln(1/beta) / min_i(eps_i / B))``, ``beta = wrap_probability``, default ``1e-9``), and the analyzer decodes
  the residue to the representative in ``[-h, q - h)``. With ``q = B n`` a true sum of ``B n`` already wraps to
  0, and an empty cell with negative noise decodes to nearly ``B n`` -- the largest possible count -- which
  the top-``w`` selection would then pick. Decoding is post-processing: a wrap costs accuracy, never privacy.
  The larger ``q`` enters ``r`` (through ``ln q``) and the message length; Figure 12's numbers are reported
  for both ``q``.
* **Communication counts the real coordinates.** ``m`` is the number of measured cells (levels ``q_0..L`` of
  :func:`.sparse.level_budgets`) that hold at least one real cell of the grid: the padding of a rectangular
  grid to ``2^L x 2^L`` is public and empty, so no party sends it. Each message is ``(a, w)`` with ``a`` in
  ``[m]`` and ``w`` in ``Z_q``: ``ceil(log2(m q))`` bits; a party sends ``r m`` messages.

Simulation
----------
``simulate="messages"`` (the default) runs the protocol: every party's randomizer, the shuffler and the
analyzer, ``n r m`` messages in memory. ``simulate="aggregate"`` computes what the analyzer decodes directly,
``(sum_j z^j + X - Y) mod q`` with ``X, Y`` the sums of the parties' Polya shares drawn from their exact law
(two geometrics): the analyzer's output is a function of those residues only (the shares cancel in every sum
over ``Z_q``, whatever the permutation), so the two have the same output law; the aggregate path costs
``O(m)`` draws instead of ``O(n m r)`` messages and ``O(n m B / eps)`` urn steps (the experiments use it on
320 x 240 grids).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import DataError, ParameterError
from ..noise import RngLike, polya, resolve_rng
from ..privacy.guarantees import Neighbours, ShuffleDP
from ..privacy.params import check_delta
from ..privacy.result import ErrorStatement, Release
from .sparse import _measure, _pyramid, level_budgets, pad_square, padded_levels, reconstruct

__all__ = [
    "STEP",
    "ShufflePlan",
    "shuffle_plan",
    "user_pyramid",
    "noise_shares",
    "randomize_user",
    "shuffle_messages",
    "analyze",
    "shuffle_sparse_emd_agg",
]

STEP = 2**20
"""The noise ratio of level ``i`` is ``exp(-STEP / tau_i)`` with the integer ``tau_i = ceil(B STEP / eps_i)``."""

MAX_SCALING = 2**20


@dataclass(frozen=True)
class ShufflePlan:
    """Every public parameter of the protocol (nothing here depends on the data).

    ``cells[i]``: the measured level-``i`` cells holding a real cell (``(k, 2)`` rows and columns, row-major);
    coordinate ``offsets[i] + k`` is the ``k``-th of them. ``taus[i]``: level ``i``'s noise ratio is
    ``exp(-STEP / taus[i])``. ``headroom``: ``h``; ``modulus``: ``q = B n + 2 h + 1``."""

    shape: tuple[int, int]
    parties: int
    scaling: int
    epsilon: float
    delta: float
    w: int
    gamma: float
    levels: int
    first_level: int
    level_epsilons: dict[int, float]
    taus: dict[int, int]
    cells: dict[int, np.ndarray]
    offsets: dict[int, int]
    coordinates: int
    headroom: int
    modulus: int
    shares: int
    bits_per_message: int

    @property
    def messages_per_user(self) -> int:
        """``r m``: every coordinate split into ``r`` shares."""
        return self.shares * self.coordinates

    @property
    def bits_per_user(self) -> int:
        """``r m ceil(log2(m q))`` (appendix F, "Communication")."""
        return self.messages_per_user * self.bits_per_message

    def effective_level_epsilons(self) -> dict[int, float]:
        """``B STEP / tau_i <= eps_i``: what each level really spends."""
        return {i: self.scaling * STEP / t for i, t in self.taus.items()}

    def paper_communication(self) -> dict[str, int]:
        """Appendix F's numbers with its modulus ``q = B n`` (which has no room for the noise)."""
        q = self.scaling * self.parties
        r = split_shares(self.epsilon, self.delta, self.coordinates, q, self.parties)
        bits = _bits(self.coordinates * q)
        return {"modulus": q, "shares": r, "bits_per_message": bits, "messages_per_user": r * self.coordinates,
                "bits_per_user": r * self.coordinates * bits}


def _bits(x: int) -> int:
    """``ceil(log2(x))`` exactly, for an integer ``x >= 2``."""
    return (int(x) - 1).bit_length()


def split_shares(epsilon: float, delta: float, m: int, q: int, n: int) -> int:
    """``r = ceil((2 ln(e^eps + 1) + 2 ln(m / delta) + ln q) / ln n + 1)`` (appendix F; [BBGN20] Corollary 6
    and Lemma 5.2): the shares per coordinate for the summation's ``delta``."""
    lse = epsilon + math.log1p(math.exp(-epsilon))  # ln(e^eps + 1) without overflow
    return math.ceil((2 * lse + 2 * math.log(m / delta) + math.log(q)) / math.log(n) + 1)


def shuffle_plan(
    shape: tuple[int, int],
    parties: int,
    epsilon: float,
    delta: float,
    scaling: int,
    w: int = 20,
    gamma: float = 1 / math.sqrt(2),
    wrap_probability: float = 1e-9,
) -> ShufflePlan:
    """The protocol's public parameters for a ``rows x cols`` grid and ``parties`` users (appendix F).

    Parameters
    ----------
    scaling:
        ``B``, an integer in ``[1, 2^20]``.
    delta:
        The summation's ``delta`` in ``(0, 1)``: sets the shares per coordinate ``r``.
    wrap_probability:
        ``beta``: the chance, per coordinate, that the noise leaves the modulus' headroom (a utility knob).
    """
    try:
        H, W = (int(shape[0]), int(shape[1]))
    except (TypeError, ValueError, IndexError):
        raise ParameterError("shape must be (rows, cols)") from None
    if H < 1 or W < 1:
        raise ParameterError("the grid must have at least one row and one column")
    n = int(parties)
    if n != parties or n < 2:
        raise ParameterError(f"the shuffle protocol needs at least 2 parties, got {parties!r}")
    if n > 2**20:
        raise ParameterError("at most 2^20 parties (the Polya shape 1/n)")
    B = scaling
    if isinstance(B, bool) or not isinstance(B, (int, np.integer)) or not 1 <= int(B) <= MAX_SCALING:
        raise ParameterError(f"the scaling factor B must be an integer in [1, 2^20], got {scaling!r}")
    B = int(B)
    delta = check_delta(delta)
    if not delta > 0:
        raise ParameterError("the shuffle protocol needs delta > 0 (the summation's delta)")
    beta = float(wrap_probability)
    if not 0 < beta < 1:
        raise ParameterError(f"wrap_probability must lie in (0, 1), got {wrap_probability!r}")
    L = padded_levels((H, W))
    first, budgets = level_budgets(epsilon, L, w, gamma)
    taus = {i: math.ceil(B * STEP / e) for i, e in budgets.items()}
    if max(taus.values()) > 2**52:
        raise ParameterError("B / eps_i is too large for the exact sampler (at most 2^32)")
    _, real = pad_square(np.zeros((H, W)))
    reals = _pyramid(real.astype(np.int64), L)
    cells, offsets, m = {}, {}, 0
    for i in sorted(budgets):
        rr, cc = np.nonzero(reals[i] > 0)
        cells[i] = np.stack([rr, cc], axis=1).astype(np.int64)
        offsets[i] = m
        m += cells[i].shape[0]
    rate = min(STEP / t for t in taus.values())  # the smallest -ln(alpha_i)
    h = math.ceil(math.log(1 / beta) / rate)
    q = B * n + 2 * h + 1
    r = split_shares(float(epsilon), delta, m, q, n)
    return ShufflePlan(
        (H, W), n, B, float(epsilon), delta, int(w), float(gamma), L, first, budgets, taus, cells, offsets, m, h,
        q, r, _bits(m * q),
    )


def _check_user(p: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64)
    if arr.shape != tuple(shape):
        raise DataError(f"every user's distribution must be a {shape[0]} x {shape[1]} array")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise DataError("a user's distribution must be finite and non-negative")
    if arr.sum() > 1 + 1e-9:
        raise DataError("a user's distribution has mass above 1")
    return arr


def user_pyramid(p: np.ndarray, plan: ShufflePlan) -> np.ndarray:
    """``y^j``: the cell sums of one user's distribution at every measured level, over the plan's coordinates
    (Algorithm 1's ``[P_{q_0} p_j, ..., P_L p_j]`` unscaled by ``2^-i``)."""
    arr = _check_user(p, plan.shape)
    S, _ = pad_square(arr)
    pyr = _pyramid(S, plan.levels)
    return np.concatenate([pyr[i][c[:, 0], c[:, 1]] for i, c in sorted(plan.cells.items())])


def scaled_round(y: np.ndarray, plan: ShufflePlan) -> np.ndarray:
    """``z^j = floor(B y^j)`` (non-negative integers; each level sums to at most ``B``)."""
    return np.floor(plan.scaling * y).astype(np.int64)


def noise_shares(plan: ShufflePlan, rng: RngLike = None) -> np.ndarray:
    """One party's noise for every coordinate: ``X - Y`` with ``X, Y ~ Polya(1/n, exp(-STEP/tau_i))`` drawn
    exactly and independently. Summed over the ``n`` parties: exactly discrete Laplace of ratio
    ``exp(-STEP/tau_i)`` per coordinate."""
    src = resolve_rng(rng)
    out = np.empty(plan.coordinates, dtype=np.int64)
    for i, c in sorted(plan.cells.items()):
        k, o = c.shape[0], plan.offsets[i]
        x = polya(1, plan.parties, plan.taus[i], k, src, step=STEP)
        y = polya(1, plan.parties, plan.taus[i], k, src, step=STEP)
        out[o : o + k] = x - y
    return out


def randomize_user(p: np.ndarray, plan: ShufflePlan, rng: RngLike = None) -> np.ndarray:
    """The local randomizer of one party: its ``r m`` messages ``(a, w^b_a)`` as an ``(r m, 2)`` int64 array.

    ``z' = floor(B y) + X - Y`` (:func:`noise_shares`), split into ``r - 1`` exact uniform shares in ``Z_q`` and
    the last share ``z' - sum`` (mod ``q``)."""
    src = resolve_rng(rng)
    z = scaled_round(user_pyramid(p, plan), plan) + noise_shares(plan, src)
    m, r, q = plan.coordinates, plan.shares, plan.modulus
    shares = src.integers(q, size=(r - 1) * m).reshape(r - 1, m)
    last = np.mod(z - shares.sum(axis=0), q)
    values = np.concatenate([shares, last[None, :]]).reshape(-1)
    index = np.tile(np.arange(m, dtype=np.int64), r)
    return np.stack([index, values], axis=1)


def shuffle_messages(messages: list[np.ndarray], rng: RngLike = None) -> np.ndarray:
    """The shuffler: all parties' messages in one uniformly random order (an exact random permutation)."""
    allm = np.concatenate(messages) if messages else np.empty((0, 2), dtype=np.int64)
    return allm[resolve_rng(rng).permutation(allm.shape[0])]


def decode(residues: np.ndarray, plan: ShufflePlan) -> np.ndarray:
    """The integer in ``[-h, q - h)`` congruent to each residue mod ``q`` (post-processing)."""
    v = np.mod(np.asarray(residues, dtype=np.int64), plan.modulus)
    return np.where(v >= plan.modulus - plan.headroom, v - plan.modulus, v)


def analyze(messages: np.ndarray, plan: ShufflePlan) -> np.ndarray:
    """The analyzer: per coordinate, the sum over ``Z_q`` of the messages that name it, decoded
    (:func:`decode`): the noisy integer sums ``sum_j z^j + N`` (divide by ``B`` for ``y'``)."""
    msg = np.asarray(messages, dtype=np.int64)
    if msg.ndim != 2 or msg.shape[1] != 2:
        raise DataError("messages must be an (N, 2) array of (coordinate, share)")
    if msg.size and (msg[:, 0].min() < 0 or msg[:, 0].max() >= plan.coordinates):
        raise DataError("a message names a coordinate outside the plan")
    sums = np.zeros(plan.coordinates, dtype=np.int64)
    np.add.at(sums, msg[:, 0], np.mod(msg[:, 1], plan.modulus))
    return decode(sums, plan)


def _aggregate(users: np.ndarray, plan: ShufflePlan, rng) -> np.ndarray:
    """What :func:`analyze` returns, computed without the messages: ``decode(sum_j z^j + X - Y)`` with ``X, Y``
    the sums of the parties' ``Polya(1/n)`` shares drawn from their exact law, ``Polya(1) = `` geometric."""
    total = np.zeros(plan.coordinates, dtype=np.int64)
    for p in users:
        total += scaled_round(user_pyramid(p, plan), plan)
    noise = np.empty(plan.coordinates, dtype=np.int64)
    for i, c in sorted(plan.cells.items()):
        k, o = c.shape[0], plan.offsets[i]
        t = plan.taus[i]
        noise[o : o + k] = polya(1, 1, t, k, rng, step=STEP) - polya(1, 1, t, k, rng, step=STEP)
    return decode(total + noise, plan)


def noisy_sums(decoded: np.ndarray, plan: ShufflePlan) -> dict[int, np.ndarray]:
    """``y'``: the decoded sums divided by ``B``, as level arrays of noisy cell sums (padding cells 0, never
    read)."""
    out = {}
    for i, c in plan.cells.items():
        a = np.zeros((2**i, 2**i))
        o = plan.offsets[i]
        a[c[:, 0], c[:, 1]] = decoded[o : o + c.shape[0]] / plan.scaling
        out[i] = a
    return out


def shuffle_sparse_emd_agg(
    users: np.ndarray,
    epsilon: float,
    delta: float,
    scaling: int,
    w: int = 20,
    gamma: float = 1 / math.sqrt(2),
    wrap_probability: float = 1e-9,
    simulate: str = "messages",
    rng: RngLike = None,
) -> Release:
    """DPSparseEMDAgg + Reconstruct with ``y'`` computed by the shuffle protocol of appendix F.

    Parameters
    ----------
    users:
        ``(n, rows, cols)``: every party's distribution (mass 1, or 0 for a party holding nothing).
    epsilon, delta:
        The guarantee ``(epsilon, delta)`` (``delta`` the summation's, ``> 0``).
    scaling:
        ``B`` (integer in ``[1, 2^20]``): coordinates are ``floor(B y)``; larger ``B`` rounds less and sends
        longer messages.
    simulate:
        ``"messages"`` (every randomizer, the shuffler and the analyzer) or ``"aggregate"`` (the analyzer's
        decoded sums drawn from the same law directly; see the module's docstring).

    Returns
    -------
    Release
        ``value``: the normalized estimate (``rows x cols``); guarantee :class:`ShuffleDP`; ``extras``: the
        communication per user and the decoded integer sums.
    """
    if simulate not in ("messages", "aggregate"):
        raise ParameterError(f"simulate must be 'messages' or 'aggregate', got {simulate!r}")
    shp = np.shape(users)
    if len(shp) != 3 or shp[0] < 1:
        raise DataError("users must be an (n, rows, cols) array of per-user distributions")
    plan = shuffle_plan(shp[1:], shp[0], epsilon, delta, scaling, w, gamma, wrap_probability)
    src = resolve_rng(rng)
    arr = np.asarray(users, dtype=np.float64)
    if simulate == "messages":
        msgs = [randomize_user(p, plan, src) for p in arr]
        decoded = analyze(shuffle_messages(msgs, src), plan)
    else:
        decoded = _aggregate(arr, plan, src)
    H, W = plan.shape
    _, real = pad_square(np.zeros((H, W)))
    levels = _measure(
        np.zeros(real.shape), plan.levels, plan.level_epsilons, plan.w, src, None if real.all() else real,
        noisy_sums=noisy_sums(decoded, plan),
    )
    s_hat = reconstruct(levels)[:H, :W]
    total = s_hat.sum()
    a_hat = s_hat / total if total > 0 else np.full_like(s_hat, 1.0 / s_hat.size)
    guarantee = ShuffleDP(
        plan.epsilon, plan.delta, Neighbours.ADD_REMOVE_USER, parties=plan.parties,
        messages_per_coordinate=plan.shares, modulus=plan.modulus, coordinates=plan.coordinates,
        scaling=plan.scaling,
    )
    comm = {"messages_per_user": plan.messages_per_user, "bits_per_message": plan.bits_per_message,
            "bits_per_user": plan.bits_per_user}
    return Release(
        a_hat,
        guarantee,
        "DPSparseEMDAgg + Reconstruct in the shuffle model (Ghazi et al., appendix F; Balle et al. 2020)",
        {
            "epsilon": plan.epsilon,
            "delta": plan.delta,
            "B": plan.scaling,
            "n": plan.parties,
            "w": plan.w,
            "gamma": plan.gamma,
            "q": plan.first_level,
            "levels": plan.levels,
            "level_epsilons": dict(plan.level_epsilons),
            "effective_level_epsilons": plan.effective_level_epsilons(),
            "modulus": plan.modulus,
            "headroom": plan.headroom,
            "shares": plan.shares,
            "coordinates": plan.coordinates,
            "simulate": simulate,
        },
        ErrorStatement(
            "the central algorithm's error (Theorem 3.1) plus the rounding floor(B y): at most 1/B per user and "
            "cell; wrap-around with probability below wrap_probability per coordinate"
        ),
        {"communication": comm, "decoded_sums": decoded, "kept_finest_cells": int(levels.kept[plan.levels].shape[0])},
    )
