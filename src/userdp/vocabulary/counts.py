"""Per-key counts with privately chosen contribution bounds: how many records (check-ins, reviews) each key
(venue, category, word) has, under ``(epsilon, delta)``-DP for adding or removing one person.

Each person may contribute to many keys, many times per key. Two public bounds make the counts' sensitivity
finite: ``L0``, the most keys one person counts toward, and ``Linf``, the most records one person counts for
one key. A person holding more keys keeps the ``L0`` keys they hold most records of (ties by key), and
counts at most ``Linf`` records on each; then one person changes at most ``L0`` counts by at most ``Linf``
each: l1 sensitivity ``L0 Linf``, l2 sensitivity ``sqrt(L0) Linf``.

**Choosing the bounds privately** (``bounds="auto"``). Small bounds drop data (bias); large ones need more
noise. For every candidate ``b = (L0, Linf)`` of a public grid, the score is the data the bounds keep minus
the noise they imply over the ``K`` keys released:

    ``q_b = kept_b(D) - K * E|noise_b|``,

whose maximizer minimizes the total absolute error ``dropped_b + K E|noise_b|`` (the total is the same for
every ``b``). Adding or removing a person changes ``kept_b`` by at most that person's kept records,
``L0 Linf``: the candidates have different sensitivities, so the choice is the generalized exponential
mechanism (Raskhodnikova & Smith 2015) with the normalized scores of Knop & Steinke (NeurIPS 2023,
Theorem 3.4, as :func:`userdp.distinct.release.gem_select`), whose sensitivity is 1, rather than an
exponential mechanism with sensitivity the largest candidate's (as PipelineDP's ``PrivateL0Calculator``
does). ``E|noise_b|`` is a public function of ``b``: ``L0 Linf / epsilon_c`` for Laplace noise, the Gaussian's
``sigma sqrt(2 / pi)``.

Keys are either public (a list the caller gives: records of other keys are dropped before bounding) or
selected privately from the data by the person-level set union (:mod:`userdp.vocabulary.union`), with its
own share of the budget. The three steps compose sequentially.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from ..errors import ParameterError
from ..noise import RngLike, calibrate_gaussian, calibrate_laplace, gaussian_mechanism, laplace_mechanism, resolve_rng
from ..privacy.guarantees import ApproxDP, Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release

__all__ = [
    "BOUND_GRID",
    "bounded_counts_part",
    "choose_bounds_from_kept",
    "kept_grid_part",
    "key_counts_from_sums",
    "bounded_key_counts",
    "choose_bounds",
    "kept_records",
    "noise_mean_abs",
    "plan_key_counts",
    "private_key_counts",
    "select_counted_keys",
]

BOUND_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # the default public candidates for L0 and for Linf


def _person_order(offsets: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """Within each person, records of keys ordered by multiplicity, largest first (stable: ties by key)."""
    person = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    return np.lexsort((-mult, person))


@njit(cache=True)
def _kept_grid(offsets, mult_sorted, l0s, linfs, out):
    """``out[a, b] = sum over persons of sum of min(m, linfs[b]) over the person's l0s[a] largest m``."""
    for u in range(offsets.size - 1):
        lo, hi = offsets[u], offsets[u + 1]
        n = hi - lo
        if n == 0:
            continue
        for b in range(linfs.size):
            cap = linfs[b]
            acc = 0
            a = 0
            for j in range(n):
                m = mult_sorted[lo + j]
                acc += m if m < cap else cap
                while a < l0s.size and l0s[a] == j + 1:
                    out[a, b] += acc
                    a += 1
            while a < l0s.size:  # the person holds fewer keys than l0s[a]
                out[a, b] += acc
                a += 1


def kept_records(
    offsets: np.ndarray, mult: np.ndarray, l0s: np.ndarray | list[int], linfs: np.ndarray | list[int]
) -> np.ndarray:
    """``kept[a, b]``: the records the bounds ``(l0s[a], linfs[b])`` keep in all, each person keeping their
    ``L0`` keys of most records and at most ``Linf`` records on each. ``offsets, mult``: the persons' keys in
    CSR form (one entry per person and key, ``mult`` its records)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    mult = np.asarray(mult, dtype=np.int64)
    l0s = np.asarray(l0s, dtype=np.int64)
    linfs = np.asarray(linfs, dtype=np.int64)
    order = _person_order(offsets, mult)
    out = np.zeros((l0s.size, linfs.size), dtype=np.int64)
    _kept_grid(offsets, mult[order], np.sort(l0s), linfs, out)
    return out[np.argsort(np.argsort(l0s))]


def bounded_key_counts(
    offsets: np.ndarray, keys: np.ndarray, mult: np.ndarray, n_keys: int, l0: int, linf: int
) -> np.ndarray:
    """The records per key after bounding: each person keeps their ``l0`` keys of most records (ties by key
    code) and counts at most ``linf`` records on each."""
    offsets = np.asarray(offsets, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.int64)
    mult = np.asarray(mult, dtype=np.int64)
    order = _person_order(offsets, mult)
    rank = np.empty(order.size, dtype=np.int64)
    person = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    rank[order] = np.arange(order.size) - offsets[person[order]]  # 0 for the person's key of most records
    keep = rank < l0
    return np.bincount(keys[keep], weights=np.minimum(mult[keep], linf), minlength=int(n_keys)).astype(np.int64)


def noise_mean_abs(l0: int, linf: int, epsilon: float, delta: float, noise: str, n_keys: int = 1) -> float:
    """``E|noise|`` of one count under bounds ``(l0, linf)``: Laplace ``l0 linf / epsilon`` (the lattice
    calibration's scale), Gaussian ``sigma sqrt(2/pi)``. A public function of the parameters."""
    if noise == "laplace":
        return calibrate_laplace(float(l0 * linf), epsilon, dim=max(1, n_keys)).scale
    return calibrate_gaussian(math.sqrt(l0) * linf, epsilon, delta, dim=max(1, n_keys)).sigma * math.sqrt(2 / math.pi)


def choose_bounds(
    offsets: np.ndarray,
    mult: np.ndarray,
    n_keys: int,
    epsilon_select: float,
    epsilon_counts: float,
    delta_counts: float = 0.0,
    noise: str = "laplace",
    l0s: tuple[int, ...] = BOUND_GRID,
    linfs: tuple[int, ...] = BOUND_GRID,
    beta: float = 0.1,
    rng: RngLike = None,
) -> tuple[int, int, dict]:
    """The bounds ``(L0, Linf)`` chosen by GEM over the public grid ``l0s x linfs`` (see the module):
    ``epsilon_select``-DP. Returns ``(L0, Linf, details)`` with the scores and the candidates."""
    kept = kept_records(offsets, mult, list(l0s), list(linfs)).reshape(-1)
    return choose_bounds_from_kept(kept, n_keys, epsilon_select, epsilon_counts, delta_counts, noise, l0s, linfs,
                                   beta, rng)  # fmt: skip


def choose_bounds_from_kept(
    kept: np.ndarray,
    n_keys: int,
    epsilon_select: float,
    epsilon_counts: float,
    delta_counts: float = 0.0,
    noise: str = "laplace",
    l0s: tuple[int, ...] = BOUND_GRID,
    linfs: tuple[int, ...] = BOUND_GRID,
    beta: float = 0.1,
    rng: RngLike = None,
) -> tuple[int, int, dict]:
    """:func:`choose_bounds` from the kept records of every candidate (``kept[a * len(linfs) + b]`` for
    ``(l0s[a], linfs[b])``: :func:`kept_records`, summed over the persons wherever they were counted)."""
    from ..distinct.release import gem_select

    grid = [(a, b) for a in l0s for b in linfs]
    kept = np.asarray(kept, dtype=np.int64).reshape(-1).astype(np.float64)
    noise_abs = np.array([noise_mean_abs(a, b, epsilon_counts, delta_counts, noise, n_keys) for a, b in grid])
    q = kept - max(1, n_keys) * noise_abs
    sens = np.array([float(a * b) for a, b in grid])
    i, scores = gem_select(q, sens, epsilon_select, beta, rng)
    return grid[i][0], grid[i][1], {"candidates": grid, "scores": scores, "noise_mean_abs": noise_abs}


# --------------------------------------------------------------------------------------------
# The per-person parts: run where the data are (on Spark's executors too), on batches of whole persons
# --------------------------------------------------------------------------------------------


_LOOKUP: list = [None]  # the last domain's lookup: (labels, counted, positions, ranks), held by identity


def _domain_lookup(labels: np.ndarray, counted: Any) -> tuple[np.ndarray, np.ndarray]:
    """For every code of the domain whose ``labels`` are given: its position among the ``counted`` keys (sorted
    text; -1 if not counted) and its rank in the labels' text order. Computed once per domain and key list
    (every batch of a release shares both objects: the last pair is kept, by identity, so that a batch pays
    for the codes it holds, not for the domain's size)."""
    last = _LOOKUP[0]
    if last is not None and last[0] is labels and last[1] is counted and np.array_equal(last[4], counted):
        return last[2], last[3]  # (the same objects, unchanged in place)
    lab = np.array([str(x) for x in np.asarray(labels, dtype=object)], dtype=object)
    keys = np.asarray(counted, dtype=object)
    if keys.size == 0 or lab.size == 0:
        pos = np.full(lab.size, -1, dtype=np.int64)
    else:  # each label's position among the counted keys (a hash lookup), -1 if it is not counted
        found = pc.index_in(pa.array(lab, type=pa.large_string()), value_set=pa.array(keys, type=pa.large_string()))
        pos = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    if lab.size < 2 or bool(np.all(lab[1:] > lab[:-1])):  # already in text order (codes numbered so)
        rank = np.arange(lab.size, dtype=np.int64)
    else:
        rank = np.unique(lab, return_inverse=True)[1].reshape(-1).astype(np.int64)
    _LOOKUP[0] = (labels, counted, pos, rank, np.array(counted, dtype=object, copy=True))
    return pos, rank


def _restricted(sets: Any, mult: np.ndarray, counted: np.ndarray):
    """A batch's persons restricted to the ``counted`` keys (sorted text): their CSR offsets, the entries'
    positions in ``counted`` and multiplicities, entries of a person in the order of their keys' text."""
    pos, rank = _domain_lookup(sets.domain.labels, counted)
    items = np.asarray(sets.items, dtype=np.int64)
    codes = pos[items] if items.size else np.empty(0, dtype=np.int64)
    deg = np.diff(np.asarray(sets.offsets, dtype=np.int64))
    person = np.repeat(np.arange(deg.size), deg)
    keep = codes >= 0
    person_k, codes_k, rank_k = person[keep], codes[keep], rank[items[keep]]
    mult_k = np.asarray(mult, dtype=np.int64)[keep]
    step = rank_k[1:] > rank_k[:-1]
    if not bool(np.all((person_k[1:] > person_k[:-1]) | ((person_k[1:] == person_k[:-1]) & step))):
        order = np.lexsort((rank_k, person_k))  # each person's entries in the labels' text order
        person_k, codes_k, mult_k = person_k[order], codes_k[order], mult_k[order]
    offsets_k = np.r_[0, np.cumsum(np.bincount(person_k, minlength=deg.size))].astype(np.int64)
    return offsets_k, codes_k, mult_k


def kept_grid_part(sets: Any, mult: np.ndarray, counted: np.ndarray, l0s: tuple[int, ...], linfs: tuple[int, ...]):
    """One batch of whole persons' share of :func:`kept_records` over the ``counted`` keys, as one row (label
    ``""``) for :meth:`userdp.engines.Engine.key_record_sums`."""
    offsets_k, _, mult_k = _restricted(sets, mult, counted)
    kept = kept_records(offsets_k, mult_k, list(l0s), list(linfs)).reshape(1, -1)
    return np.array([""], dtype=object), kept


def bounded_counts_part(sets: Any, mult: np.ndarray, counted: np.ndarray, l0: int, linf: int):
    """One batch of whole persons' share of :func:`bounded_key_counts` over the ``counted`` keys: the keys it
    counts and their records, for :meth:`userdp.engines.Engine.key_record_sums`."""
    counted = np.asarray(counted, dtype=object)
    offsets_k, codes_k, mult_k = _restricted(sets, mult, counted)
    counts = bounded_key_counts(offsets_k, codes_k, mult_k, counted.size, l0, linf)
    got = np.flatnonzero(counts > 0)
    return counted[got], counts[got].reshape(-1, 1)


# The two parts are the definitions; an engine that computes one of them in its own query language (the
# DuckDB engine, in SQL) recognises it by this mark, reads its keywords and must give the same sums (tested).
kept_grid_part.key_part = "kept_grid"  # type: ignore[attr-defined]
bounded_counts_part.key_part = "bounded_counts"  # type: ignore[attr-defined]


def _check_grid(name: str, grid, distinct: bool = True) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in grid)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be whole numbers >= 1") from None
    if not vals or min(vals) < 1 or max(vals) > 10**6 or (distinct and len(set(vals)) != len(vals)):
        what = "distinct whole numbers" if distinct else "whole numbers"
        raise ParameterError(f"{name} must be {what} in [1, 10^6], got {grid!r}")
    return vals


def plan_key_counts(
    epsilon: float,
    delta: float = 0.0,
    *,
    bounds: str | tuple[int, int] = "auto",
    noise: str = "laplace",
    public_keys: bool = True,
    select_fraction: float = 0.2,
    key_fraction: float = 0.5,
    max_keys: int | str = "auto",
    l0s: tuple[int, ...] = BOUND_GRID,
    linfs: tuple[int, ...] = BOUND_GRID,
) -> dict:
    """Check the parameters of :func:`private_key_counts` and split its budget, before any data is read.

    With keys selected from the data and ``max_keys="auto"`` (the default), the key selection's share
    ``epsilon_keys`` is split as the vocabulary's ``max_items="auto"`` splits its budget
    (:func:`~userdp.vocabulary.plan_vocabulary` with no counts): :func:`~userdp.vocabulary.auto_bound_epsilon`
    of it (2%, no delta) chooses ``max_keys``, the rest calibrates the set union; every calibration is checked
    at the grid's largest candidate (8192), so no chosen bound can be refused after the data are read.
    ``"epsilon_max_keys"`` is the choice's share (0 with public keys or a whole ``max_keys``)."""
    from .union import check_noise_budget, plan_vocabulary

    eps, dlt = check_noise_budget(noise, epsilon, delta)  # delta in [0, 1)
    needs_delta = noise == "gaussian" or not public_keys
    if needs_delta and dlt <= 0:
        raise ParameterError(
            "this release needs delta > 0 (--delta, e.g. 1e-6): with Gaussian noise (--noise gaussian), or with "
            "keys selected from the data (no --keys; keys=None), where a key only one person holds must be "
            "released with probability at most delta"
        )
    auto = isinstance(bounds, str)
    if auto and bounds != "auto":
        raise ParameterError(f"bounds must be 'auto' or a pair (L0, Linf), got {bounds!r}")
    if not auto:
        pair = _check_grid("bounds", bounds, distinct=False)
        if len(pair) != 2:
            raise ParameterError(f"bounds must be 'auto' or a pair (L0, Linf), got {bounds!r}")
        l0, linf = pair
        l0s, linfs = (l0,), (linf,)
    else:
        l0s, linfs = _check_grid("the L0 candidates", l0s), _check_grid("the Linf candidates", linfs)
    fracs = {"select_fraction": select_fraction, "key_fraction": key_fraction}
    for name, f in fracs.items():
        try:
            fracs[name] = float(f)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} must be a number in (0, 1)") from None
    eps_keys = 0.0 if public_keys else eps * fracs["key_fraction"]
    eps_select = (eps - eps_keys) * fracs["select_fraction"] if auto else 0.0
    eps_counts = eps - eps_keys - eps_select
    while eps_keys + eps_select + eps_counts > eps:
        eps_counts = math.nextafter(eps_counts, 0.0)
    for name, f in fracs.items():
        used = (name == "select_fraction" and auto) or (name == "key_fraction" and not public_keys)
        if used and not 0.0 < f < 1.0:
            raise ParameterError(f"{name} must lie in (0, 1), got {f!r}")
    delta_keys = dlt / 2 if (not public_keys and noise == "gaussian") else (dlt if not public_keys else 0.0)
    delta_counts = dlt - delta_keys if noise == "gaussian" else 0.0
    key_plan = None
    if not public_keys:  # the weighted Gaussian set union ("auto": max_keys chosen first, from its share)
        key_plan = plan_vocabulary(eps_keys, delta_keys, max_keys, "gaussian", False, 0.0)
    elif not (max_keys == "auto" or (isinstance(max_keys, int | np.integer) and not isinstance(max_keys, bool)
                                     and 1 <= max_keys <= 10_000)):  # fmt: skip
        raise ParameterError(f"max_keys must be 'auto' or a whole number in [1, 10000], got {max_keys!r}")
    try:  # the most noise any candidate implies, for a public bound on the number of keys
        noise_mean_abs(max(l0s), max(linfs), eps_counts, delta_counts, noise, 1 << 31)
    except ParameterError as exc:
        raise ParameterError(f"the counts' share of the budget is too small for these bounds ({exc})") from None
    return {
        "epsilon": eps,
        "delta": dlt,
        "noise": noise,
        "auto": auto,
        "l0s": l0s,
        "linfs": linfs,
        "epsilon_keys": eps_keys,
        "delta_keys": delta_keys,
        "epsilon_select": eps_select,
        "epsilon_counts": eps_counts,
        "delta_counts": delta_counts,
        "key_plan": key_plan,
        "max_keys": max_keys if isinstance(max_keys, str) else int(max_keys),
        "epsilon_max_keys": key_plan["epsilon_bound"] if key_plan is not None else 0.0,
    }


def private_key_counts(
    offsets: np.ndarray,
    keys: np.ndarray,
    mult: np.ndarray,
    labels: np.ndarray,
    epsilon: float,
    delta: float = 0.0,
    *,
    public_keys: np.ndarray | None = None,
    bounds: str | tuple[int, int] = "auto",
    noise: str = "laplace",
    select_fraction: float = 0.2,
    key_fraction: float = 0.5,
    max_keys: int | str = "auto",
    l0s: tuple[int, ...] = BOUND_GRID,
    linfs: tuple[int, ...] = BOUND_GRID,
    rng: RngLike = None,
) -> Release:
    """Noisy records per key, with the contribution bounds chosen privately (or given).

    Parameters
    ----------
    offsets, keys, mult:
        The persons in CSR form: person ``u`` holds ``mult[e]`` records of key ``keys[e]`` for ``e`` in
        ``offsets[u]:offsets[u+1]`` (each key once per person), key codes in ``[0, len(labels))``.
    labels:
        The keys' labels in code order.
    epsilon, delta:
        ``(epsilon, delta)``-DP for adding or removing one person, in total (``delta = 0`` with public keys
        and Laplace noise: pure DP).
    public_keys:
        The labels to count (public: chosen without looking at the data; keys of the data outside them are
        dropped, listed keys the data lacks get noisy counts of zero). ``None``: the keys are selected from
        the data by the weighted Gaussian set union (``key_fraction`` of ``epsilon`` and half of ``delta``
        with Gaussian counts, all of it with Laplace counts; ``max_keys`` keys per person), and only selected
        keys are counted.
    max_keys:
        The most keys one person contributes to the key selection (unused with public keys). ``"auto"``
        (the default): chosen privately from the persons' numbers of distinct keys exactly as the vocabulary's
        ``max_items="auto"`` for the Gaussian union that selects them (:func:`~userdp.vocabulary.choose_max_items`:
        a 90% quantile, :func:`~userdp.vocabulary.auto_quantile` ``("gaussian")``, on the grid
        ``1, 2, 4, ..., 8192`` by the exponential mechanism) with 2% of the selection's share of ``epsilon``
        and no delta; the set union runs at the rest. A whole number in ``[1, 10000]``: that public bound,
        nothing spent on a choice.
    bounds:
        ``"auto"`` (GEM over ``l0s x linfs`` with ``select_fraction`` of the remaining budget) or a public
        pair ``(L0, Linf)``.
    noise:
        ``"laplace"`` or ``"gaussian"`` for the counts.

    Returns
    -------
    Release
        ``value``: ``{"keys": labels (sorted), "counts": noisy bounded counts, "l0": L0, "linf": Linf}``.
    """
    plan = plan_key_counts(epsilon, delta, bounds=bounds, noise=noise, public_keys=public_keys is not None,
                           select_fraction=select_fraction, key_fraction=key_fraction, max_keys=max_keys,
                           l0s=l0s, linfs=linfs)  # fmt: skip
    from ..data import FiniteDomain, UserDataset
    from ..engines.base import bounded_item_sums_of, merge_item_sums

    labels = np.asarray(labels)
    offsets = np.asarray(offsets, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.int64)
    mult = np.asarray(mult, dtype=np.int64)
    if keys.size and (keys.min() < 0 or keys.max() >= labels.size):
        raise ParameterError("key codes must lie in [0, len(labels))")
    if mult.size and mult.min() < 1:
        raise ParameterError("every multiplicity must be at least 1")
    text = np.array([str(x) for x in labels], dtype=object)
    persons = np.arange(offsets.size - 1)  # keyed by their position
    sets = UserDataset(offsets, keys, persons, FiniteDomain(text, public=False))

    def item_sums(cap, keep, weights):
        return bounded_item_sums_of(sets, cap, keep, weights)

    def record_sums(fn, width):
        return merge_item_sums([fn(sets, mult)], width)

    return key_counts_from_sums(item_sums, record_sums, plan, public_keys=public_keys, rng=rng)


def stated_key_count_losses(plan: dict) -> tuple:
    """The zCDP guarantee the per-key counts release states with Gaussian noise (``Release.losses``), from its
    public plan alone (:func:`plan_key_counts`), for adding or removing one person: the GEM choice's pure
    ``DPLoss`` and one :class:`~userdp.privacy.composition.ZCDPLoss`, the sum of the other steps' (as
    :func:`userdp.vocabulary.union.stated_losses` derives them):

    * the keys selected from the data: the weighted Gaussian set union's ``rho`` and threshold ``delta``, with
      the private choice of ``max_keys`` (``epsilon^2 / 2``);
    * the bounds chosen by GEM: ``epsilon_select``-DP, stated as such (a ``DPLoss``; a zCDP budget charges it
      ``epsilon_select^2 / 2``);
    * the counts: :func:`~userdp.vocabulary.union.gaussian_rho_bound` of their ``(epsilon, delta)``, whatever
      the chosen bounds (the noise is calibrated to their sensitivity) and the number of keys;
    * the samplers' cut tails: at most ``max_keys <= 10,000`` coordinates in the selection and ``L0 <= 10,000``
      counts per person.

    Nothing is stated for Laplace counts (their ``(epsilon, delta)`` is charged)."""
    from ..privacy.composition import DPLoss, ZCDPLoss
    from .union import _TAIL_TV, gaussian_rho_bound

    if plan["noise"] != "gaussian" or max(plan["l0s"]) > 10_000:
        return ()
    rho = gaussian_rho_bound(plan["epsilon_counts"], plan["delta_counts"])
    delta = 0.0
    kp = plan["key_plan"]
    if kp is not None:
        cal = kp["calibration"]
        rho += kp["epsilon_bound"] ** 2 / 2 + cal.unit**2 / (2.0 * cal.scale**2)
        delta = kp["delta_set"] - cal.delta_gaussian
    gem = plan["epsilon_select"]
    losses = ((DPLoss(gem),) if gem > 0 else ()) + (ZCDPLoss(rho, delta, _TAIL_TV, plan["epsilon"] - gem),)
    from ..privacy.composition import basic_epsilon

    eps, dlt = basic_epsilon(losses)
    if eps > plan["epsilon"] or dlt > plan["delta"]:
        return ()
    return losses


def select_counted_keys(
    item_sums: Callable, record_sums: Callable, plan: dict, public_keys: np.ndarray | None, rng: RngLike = None
) -> dict:
    """The keys a per-key release counts: the ``public_keys`` (as sorted text), or the keys selected from the
    data by the weighted Gaussian set union with ``plan``'s share (:func:`plan_key_counts`; ``max_keys``
    chosen privately first when ``"auto"``), each person's keys bounded to ``max_keys`` by their keyed stream.
    ``item_sums`` and ``record_sums`` as in :func:`key_counts_from_sums`. Returns ``{"keys", "how",
    "key_plan", "max_keys", "epsilon_max_keys"}`` (``max_keys`` and ``key_plan`` ``None`` with public keys)."""
    from ..noise import KeyedStreams, keyed_keep
    from .union import _select, choose_max_items_with, plan_vocabulary, vocabulary_sum_columns

    src = resolve_rng(rng)
    key_plan = None
    max_keys, eps_max_keys = None, 0.0  # (public keys: no selection, no bound on keys for it)
    if public_keys is not None:  # compared as text, as the engines code labels
        out_labels = np.unique(np.array([str(k) for k in public_keys], dtype=object)) if len(public_keys) else None
        if out_labels is None:
            raise ParameterError("public_keys is empty: list at least one key (or None to select them)")
        how_keys = "public keys"
    else:
        key_plan = plan["key_plan"]
        if key_plan["auto"]:  # max_keys first: each person's distinct keys counted where the data are
            choice = choose_max_items_with(record_sums, plan["epsilon_keys"], src, noise="gaussian")
            key_plan = plan_vocabulary(plan["epsilon_keys"], plan["delta_keys"], choice, "gaussian", False, 0.0)
        cal = key_plan["calibration"]
        streams = KeyedStreams.from_rng(src)
        cap = int(cal.max_items)
        weights = partial(vocabulary_sum_columns, noise="gaussian")
        lab, sums = item_sums(cap, partial(keyed_keep, streams, cap=cap), weights)
        lab = np.array([str(x) for x in np.asarray(lab, dtype=object)], dtype=object)
        sums = np.asarray(sums, dtype=np.int64).reshape(-1, 2)
        chosen, _ = _select(sums[:, 0], cal, src, sums[:, 1] > 0)  # the selection sees each person's kept keys
        out_labels = np.sort(lab[chosen]).astype(object)
        how_keys = "keys selected by the weighted Gaussian set union"
        max_keys, eps_max_keys = int(cal.max_items), float(key_plan["epsilon_bound"])
    return {"keys": out_labels, "how": how_keys, "key_plan": key_plan, "max_keys": max_keys,
            "epsilon_max_keys": eps_max_keys}


def key_counts_from_sums(
    item_sums: Callable,
    record_sums: Callable,
    plan: dict,
    *,
    public_keys: np.ndarray | None = None,
    rng: RngLike = None,
) -> Release:
    """The per-key counts release (:func:`private_key_counts`) from aggregates computed where the data are:
    ``item_sums(cap, keep, weights)`` (:meth:`userdp.engines.Engine.bounded_item_sums` of the persons' keys: the
    selection's per-person bounding) and ``record_sums(fn, width)`` (:meth:`userdp.engines.Engine.key_record_sums`:
    the bounds' kept records and the bounded counts, person by person). Only sums over persons, one row per
    key (the counted keys: public, or selected privately), reach this function. ``plan`` is
    :func:`plan_key_counts`'s.

    Each person's keys for the selection are bounded to ``max_keys`` by the person's keyed stream
    (:func:`userdp.noise.keyed_keep`, a uniformly random subset: every engine keeps the same keys) before the
    set union; the bounds and the counts see each person restricted to the counted keys."""
    from .union import auto_quantile

    src = resolve_rng(rng)
    noise = plan["noise"]
    sel = select_counted_keys(item_sums, record_sums, plan, public_keys, src)
    out_labels, how_keys, key_plan = sel["keys"], sel["how"], sel["key_plan"]
    max_keys, eps_max_keys = sel["max_keys"], sel["epsilon_max_keys"]
    n_keys = out_labels.size
    details = None
    eps_c, delta_c = plan["epsilon_counts"], plan["delta_counts"]
    if plan["auto"]:
        width = len(plan["l0s"]) * len(plan["linfs"])
        _, kept = record_sums(partial(kept_grid_part, counted=out_labels, l0s=plan["l0s"], linfs=plan["linfs"]), width)
        kept = np.asarray(kept, dtype=np.int64).reshape(-1, width)
        kept = kept[0] if kept.shape[0] else np.zeros(width, dtype=np.int64)
        l0, linf, details = choose_bounds_from_kept(kept, n_keys, plan["epsilon_select"], eps_c, delta_c, noise,
                                                    plan["l0s"], plan["linfs"], rng=src)  # fmt: skip
    else:
        l0, linf = plan["l0s"][0], plan["linfs"][0]
    got, per_key = record_sums(partial(bounded_counts_part, counted=out_labels, l0=l0, linf=linf), 1)
    _LOOKUP[0] = None  # the batches' lookup (key text read off the data) is not kept past the release's passes
    true = np.zeros(n_keys, dtype=np.float64)
    if len(got):
        true[np.searchsorted(out_labels, np.array([str(x) for x in got], dtype=object))] = np.asarray(per_key)[:, 0]
    if n_keys == 0:
        counts = true
        sd = 0.0
    elif noise == "laplace":
        counts = laplace_mechanism(true, float(l0 * linf), eps_c, src)
        sd = math.sqrt(2.0) * calibrate_laplace(float(l0 * linf), eps_c, dim=n_keys).scale
    else:
        counts = gaussian_mechanism(true, math.sqrt(l0) * linf, eps_c, delta_c, src)
        sd = calibrate_gaussian(math.sqrt(l0) * linf, eps_c, delta_c, dim=n_keys).sigma
    eps, dlt = plan["epsilon"], plan["delta"]
    used_delta = plan["delta_keys"] + delta_c  # Laplace counts of public keys spend none of delta
    guarantee = (
        PureDP(eps, Neighbours.ADD_REMOVE_USER)
        if used_delta == 0
        else ApproxDP(eps, dlt, Neighbours.ADD_REMOVE_USER)
    )
    chosen_how = "chosen by GEM" if plan["auto"] else "given"
    error = ErrorStatement(
        f"each count has noise sd {sd:.3g} and counts each person's {l0} keys of most records, at most {linf} "
        f"records on each (bounds {chosen_how}); records beyond the bounds are dropped, so counts err low"
        + (f"; the keys were selected from each person's at most {max_keys} keys "
           f"({'chosen privately' if eps_max_keys > 0 else 'given'})" if max_keys is not None else "")
    )  # fmt: skip
    params = {
        "epsilon": eps,
        "delta": dlt,
        "noise": noise,
        "keys": how_keys,
        "bounds": "auto" if plan["auto"] else "given",
        "l0": int(l0),
        "linf": int(linf),
        "epsilon_keys": plan["epsilon_keys"],
        "delta_keys": plan["delta_keys"],
        "max_keys": max_keys,
        "max_keys_chosen": eps_max_keys > 0,
        "epsilon_max_keys": eps_max_keys,
        "epsilon_key_set": key_plan["epsilon_set"] if key_plan is not None else 0.0,
        "epsilon_select": plan["epsilon_select"],
        "epsilon_counts": eps_c,
        "delta_counts": delta_c,
        "count_sd": sd,
    }
    if details is not None:
        params["candidates"] = [f"{a}x{b}" for a, b in details["candidates"]]
    user = Neighbours.ADD_REMOVE_USER
    parts: dict = {}  # each step's guarantee; their sequential composition is the release's
    if eps_max_keys > 0:
        parts["max_keys"] = PureDP(eps_max_keys, user)
    if key_plan is not None:
        parts["keys"] = ApproxDP(key_plan["epsilon_set"], key_plan["delta_set"], user)
    if plan["epsilon_select"] > 0:
        parts["bounds"] = PureDP(plan["epsilon_select"], user)
    parts["counts"] = ApproxDP(eps_c, delta_c, user) if delta_c > 0 else PureDP(eps_c, user)
    return Release(
        {"keys": out_labels, "counts": np.asarray(counts), "l0": int(l0), "linf": int(linf)},
        guarantee,
        (f"max_keys chosen privately (exponential mechanism, a {auto_quantile('gaussian'):.0%} quantile of the "
         "persons' key counts) + " if eps_max_keys > 0 else "")
        + f"per-key counts, contribution bounds {chosen_how}"
        + (" (GEM, Knop & Steinke's scores)" if plan["auto"] else ""),
        params,
        error,
        {"composed_of": parts},
        stated_key_count_losses(plan),
    )  # fmt: skip
