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

**Delta** (the summation's; proven here, :func:`split_mix_chi2_bound`). For one coordinate, let ``V_x`` be the
shuffled vector of the ``n r`` shares of inputs ``x in Z_q^n`` and ``U_s`` the uniform vector of ``Z_q^{n r}``
with the same sum ``s``. **Lemma:** ``chi^2(V_x || U_s) <= X(n, r, q)`` (the formula in
:func:`split_mix_chi2_bound`), so ``TV(V_x, U_s) <= sqrt(X) / 2`` whatever ``x``. The ``m`` coordinates' shares
are independent given the noisy inputs and the view (the multiset of ``(a, w)``) is the ``m`` per-coordinate
vectors, so the view is within ``eta = m sqrt(X) / 2`` in total variation of ``prod_a U_{s_a}``, a function of
the noisy sums ``s`` alone, which are ``eps``-DP. Hence ``(eps, (1 + e^eps) eta)``-DP
(:func:`summation_delta`): ``P[V(D) in A] <= P[U(D) in A] + eta <= e^eps P[U(D') in A] + eta <= e^eps P[V(D')
in A] + (1 + e^eps) eta``.

``r`` is appendix F's choice

    ``r_F = ceil((2 ln(e^eps + 1) + 2 ln(m / delta) + ln q) / ln n + 1)``

("as in Corollary 6 and Lemma 5.2 of [BBGN20]", Balle, Bell, Gascón & Nissim, CCS 2020, arXiv 2002.00817;
that paper's text could not be read here, so nothing rests on it), raised, if needed, to the smallest ``r``
for which the lemma gives ``(1 + e^eps) m sqrt(X(n, r, q)) / 2 <= delta``. ``r_F`` read as a general statement
(``r >= (2 sigma + log2 q) / log2 n + 1`` shares make the view ``2^-sigma``-close) is false for small ``q``:
at ``n = 999``, ``q = 3``, ``r = 3`` it promises ``TV <= 0.0017``, and the exact law of the count of each
residue gives ``TV = 0.0090`` between the inputs ``0^999`` and ``1^999`` (``r_F = 3`` at ``eps = 0.1``,
``delta = 0.01``, ``m = 1``); the lemma's bound there is ``0.0106``. At the paper's setting (``n = 50``,
``eps = 5``, ``delta = 1e-5``, 320 x 240, ``B = 256``) ``r = r_F = 19``, where the lemma proves ``delta = 2.3e-9``
(16 shares would prove ``1e-5``); it raises ``r`` near the border, e.g. ``n = 1000``, ``eps = 1``, ``delta =
1e-6``, ``B = 4`` on 2 x 2 cells: ``r_F = 7`` proves only ``1.19e-6``, so ``r = 8``.

*Proof of the lemma.* (1) ``V_x(y) = q^{-n(r-1)} N_x(y) / |A|`` with ``|A| = (n r)! / (r!)^n`` assignments of
positions to parties and ``N_x(y)`` those whose blocks sum to ``x``; ``U_s(y) = q^{-(n r - 1)}``, so ``V_x / U_s
= q^{n-1} N_x / |A|``. (2) ``chi^2 + 1 = q^{2(n-1)} E_U[N_x^2] / |A|^2``; for two assignments ``A, A'`` the
``2n`` block sums are a map ``Z_q^{n r} -> Z_q^{2n}`` whose matrix is the incidence matrix of the bipartite
graph of blocks (``A_i ~ A'_j`` when they share a position), totally unimodular, so its image has exactly
``q^{2n - c}`` elements (``c`` the graph's components) for any modulus, and ``P_U[both hold] <= q^{-(2n - c -
1)}``: ``chi^2 + 1 <= E[q^{c-1}]`` over a uniform partition ``A'``. (3) ``q^{c-1} = sum over sets T of
components not containing block 1 of (q - 1)^|T| <= sum_j (q - 1)^j N_j`` with ``N_j`` the families of ``j``
disjoint non-empty sets of ``A``-blocks avoiding block 1, each *closed* (its positions a union of
``A'``-blocks); ``E[N_j] = (1/j!) sum_{s_1..s_j} (n-1)! / (prod s_t! (n-1-S)!) prod T(s_t) T(n-S) / T(n)``
(``S = sum s_t``, ``T(k) = (k r)! / ((r!)^k k!)`` partitions into blocks), and summing over ``j`` gives the
exponential in ``X``. (4) ``TV <= sqrt(chi^2) / 2`` (Cauchy-Schwarz). Audited exactly: on every input of
small instances the enumerated ``chi^2`` is at most ``X`` (equal at ``n = 2``), and ``X`` is recomputed with
exact rationals in the tests.

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
from scipy.special import gammaln, logsumexp

from ..errors import DataError, ParameterError
from ..noise import RngLike, polya, resolve_rng
from ..privacy.guarantees import Neighbours, ShuffleDP
from ..privacy.params import check_delta
from ..privacy.result import ErrorStatement, Release
from .sparse import _measure, _pyramid, level_budgets, pad_square, padded_levels, reconstruct

__all__ = [
    "STEP",
    "MAX_PARTIES",
    "ShufflePlan",
    "split_shares",
    "split_mix_chi2_bound",
    "summation_delta",
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
    ``exp(-STEP / taus[i])``. ``headroom``: ``h``; ``modulus``: ``q = B n + 2 h + 1``; ``shares``: ``r``, appendix
    F's or the smallest that the lemma proves for ``delta`` if that is larger."""

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
    summation_delta: float
    """What the lemma proves at ``shares`` (:func:`summation_delta`), at most ``delta``."""

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
    """Appendix F's ``r_F = ceil((2 ln(e^eps + 1) + 2 ln(m / delta) + ln q) / ln n + 1)`` (citing [BBGN20]
    Corollary 6 and Lemma 5.2): the floor of the shares per coordinate. Not a proof of ``delta`` by itself
    (see the module's docstring): :func:`shuffle_plan` raises it until :func:`summation_delta` meets
    ``delta``."""
    lse = epsilon + math.log1p(math.exp(-epsilon))  # ln(e^eps + 1) without overflow
    return math.ceil((2 * lse + 2 * math.log(m / delta) + math.log(q)) / math.log(n) + 1)


MAX_PARTIES = 2**14
"""The lemma's bound costs ``O(n^2)`` (about 3 s at ``n = 2^14``)."""

BOUND_MARGIN = 1e-6
"""Relative margin on the floating-point evaluation of the lemma's bound (its rounding error is below 1e-9)."""


def _log_partitions(k: np.ndarray, r: int) -> np.ndarray:
    """``ln T(k)``, ``T(k) = (k r)! / ((r!)^k k!)``: the partitions of ``k r`` positions into ``k`` blocks of
    ``r``."""
    k = np.asarray(k, dtype=np.float64)
    return gammaln(k * r + 1) - k * gammaln(r + 1) - gammaln(k + 1)


def split_mix_chi2_bound(n: int, r: int, q: int) -> float:
    """``X(n, r, q)``: the lemma's bound on ``chi^2(V_x || U_s)`` for one coordinate of split-and-mix (``n``
    parties, ``r`` shares each in ``Z_q``; proof in the module's docstring):

        ``X = sum_{S=1}^{n-1} w_S [t^S] (exp((q - 1) G(t)) - 1)``,
        ``G(t) = sum_{s>=1} T(s) / s! t^s``,  ``w_S = (n-1)! / (n-1-S)! T(n - S) / T(n)``,

    ``T(k) = (k r)! / ((r!)^k k!)``. Evaluated in log space (all terms are positive) with the recurrence
    ``f_k = (1/k) sum_{i=1}^k i h_i f_{k-i}`` of ``exp(H)``, ``H = (q - 1) G``; ``O(n^2)``."""
    n, r, q = int(n), int(r), int(q)
    if n < 2 or r < 1 or q < 2:
        raise ParameterError("the split-and-mix bound needs n >= 2, r >= 1 and q >= 2")
    S = np.arange(1, n)
    logh = math.log(q - 1) + _log_partitions(S, r) - gammaln(S + 1)  # h_s = (q - 1) T(s) / s!
    logf = np.full(n, -np.inf)
    logf[0] = 0.0
    logi = np.log(S.astype(np.float64))
    for k in range(1, n):
        logf[k] = logsumexp(logi[:k] + logh[:k] + logf[k - 1 :: -1][:k]) - math.log(k)
    logw = gammaln(n) - gammaln(n - S) + _log_partitions(n - S, r) - _log_partitions(np.array([n]), r)[0]
    return float(math.exp(min(logsumexp(logw + logf[1:]), 700.0)) * (1 + BOUND_MARGIN))


def summation_delta(epsilon: float, m: int, n: int, r: int, q: int) -> float:
    """The ``delta`` proven for ``m`` coordinates of split-and-mix on ``eps``-DP noisy sums:
    ``(1 + e^eps) m sqrt(X(n, r, q)) / 2`` (module docstring; capped at 1)."""
    eta = m * math.sqrt(split_mix_chi2_bound(n, r, q)) / 2
    return min(1.0, (1 + math.exp(min(epsilon, 700.0))) * eta)


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
        The summation's ``delta`` in ``(0, 1)``: sets the shares per coordinate ``r`` (appendix F's, raised
        until :func:`summation_delta` is at most ``delta``).
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
    if n > MAX_PARTIES:
        raise ParameterError(f"at most {MAX_PARTIES} parties (the summation's delta is proven in O(n^2))")
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
    proven = summation_delta(float(epsilon), m, n, r, q)
    while proven > delta:  # the appendix's r is not enough: the smallest r the lemma proves
        r += 1
        proven = summation_delta(float(epsilon), m, n, r, q)
    return ShufflePlan(
        (H, W), n, B, float(epsilon), delta, int(w), float(gamma), L, first, budgets, taus, cells, offsets, m, h,
        q, r, _bits(m * q), proven,
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
            "appendix_shares": split_shares(plan.epsilon, plan.delta, plan.coordinates, plan.modulus, plan.parties),
            "summation_delta": plan.summation_delta,
            "coordinates": plan.coordinates,
            "simulate": simulate,
        },
        ErrorStatement(
            "the central algorithm's error (Theorem 3.1) plus the rounding floor(B y): at most 1/B per user and "
            "cell; wrap-around with probability below wrap_probability per coordinate"
        ),
        {"communication": comm, "decoded_sums": decoded, "kept_finest_cells": int(levels.kept[plan.levels].shape[0])},
    )
