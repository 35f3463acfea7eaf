"""The distinct count release (Knop & Steinke, NeurIPS 2023, Algorithm 1) through :func:`userdp.releases.distinct`
with its defaults: the law of the bound ``l_hat`` the real sampler draws (the exponential mechanism's uniform
swept, its cells read off) against GEM's law computed here from the paper's definitions (``DC(D; l)`` by brute
force or an independent max flow, ``q_l``, the threshold ``t`` and the normalized scores), and the shifted
Laplace count at a fixed ``l_hat`` against the paper's scale ``l / eps_count`` and shift
``(l / eps_count) ln(1 / (2 beta))``. Nothing expected here is read off the release's plan or params."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from userdp import releases
from userdp.data import UserDataset
from userdp.noise import RandomSource

SETS = [{"a", "b", "c", "d"}, {"a", "b"}, {"c", "e"}, {"e"}, {"f", "g", "h"}]
TOP = 1 << 256  # the exponential mechanism's first uniform is randbelow(2^256)


class FirstUniform(RandomSource):
    """A seeded source whose first ``randbelow(2^256)``, the exponential mechanism's uniform ``U``, is ``u``;
    every other draw is the seeded stream's. Sweeping ``u`` reads off the law the real sampler implements."""

    def __init__(self, u: int, seed: int = 0) -> None:
        super().__init__(seed)
        self.u = u

    def randbelow(self, n: int) -> int:
        if n == TOP and self.u is not None:
            u, self.u = self.u, None
            return u
        return super().randbelow(n)


def _table(sets: list[set]) -> pa.Table:
    users = [u for u, s in enumerate(sets) for _ in s]
    items = [e for s in sets for e in sorted(s)]
    return pa.table({"user": users, "item": items})


def _dc_brute(sets: list[set], l: int) -> int:
    """``DC(D; l)`` by its definition: the most distinct elements when every person keeps at most ``l``."""
    options = [list(itertools.combinations(sorted(s), min(l, len(s)))) for s in sets]
    return max(len(set().union(*pick)) for pick in itertools.product(*options))


def _dc_flow(sets: list[set], l: int) -> int:
    """``DC(D; l)`` as a max flow source -> person (capacity l) -> element (1) -> sink, by SciPy."""
    elements = sorted(set().union(*sets))
    n, k = len(sets), len(elements)
    rows, cols, caps = [], [], []
    for u, s in enumerate(sets):
        rows.append(0), cols.append(1 + u), caps.append(l)
        for e in s:
            rows.append(1 + u), cols.append(1 + n + elements.index(e)), caps.append(1)
    for j in range(k):
        rows.append(1 + n + j), cols.append(n + k + 1), caps.append(1)
    g = sp.csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)), shape=(n + k + 2, n + k + 2))
    return int(maximum_flow(g, 0, n + k + 1).flow_value)


def _gem_law(dc: list[int], epsilon: float, beta: float) -> np.ndarray:
    """The paper's law of ``l_hat``: ``eps_select = eps_count = eps / 2``,
    ``q_l = DC(D; l) - (l / eps_count) ln(1 / (2 beta))``, ``t = 2 ln(l_max / beta) / eps_select``,
    ``s_l = min_j ((q_l - t l) - (q_j - t j)) / (l + j)`` and ``P[l] ∝ exp(eps_select s_l / 2)``."""
    e_sel = e_cnt = epsilon / 2
    ls = np.arange(1, len(dc) + 1, dtype=np.float64)
    q = np.asarray(dc, dtype=np.float64) - ls / e_cnt * math.log(1 / (2 * beta))
    a = q - 2 * math.log(len(dc) / beta) / e_sel * ls
    s = ((a[:, None] - a[None, :]) / (ls[:, None] + ls[None, :])).min(axis=1)
    w = np.exp(e_sel * (s - s.max()) / 2)
    return w / w.sum()


def _bound(source, epsilon: float, u: int, seed: int = 0, **kw) -> int:
    return releases.distinct(source, epsilon, rng=FirstUniform(u, seed), **kw).extras["bound"]


def test_the_release_draws_l_with_gem_s_law_exactly():
    """The cells of ``U`` in which the real release returns each ``l_hat`` (found by bisection to ``2^-48``)
    are GEM's probabilities from the paper's definitions, to 1e-9. Half GEM's sensitivity (the draw
    ``∝ exp(eps s)``), a threshold without its factor 2, ``q_l``'s term with ``ln(1/beta)``, unit sensitivities
    in the scores, or the whole epsilon counted for the count's share, each move a cell's edge by 0.03 or more.
    (The exact audit of ``userdp.audit`` recomputes the law from the release's own plan; this runs the sampler.)"""
    table = _table(SETS)
    eps, beta, l_max = 1.0, 0.1, 4
    dc = [_dc_brute(SETS, l) for l in range(1, l_max + 1)]
    assert dc == [5, 7, 8, 8]
    expected = np.cumsum(_gem_law(dc, eps, beta))[:-1]
    got = []
    for i in range(1, l_max):  # the smallest u with l_hat > i
        lo, hi = 0, TOP - 1
        assert _bound(table, eps, lo, beta=beta, l_max=l_max) <= i < _bound(table, eps, hi, beta=beta, l_max=l_max)
        while hi - lo > TOP >> 48:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if _bound(table, eps, mid, beta=beta, l_max=l_max) > i else (mid, hi)
        got.append(hi / TOP)
    assert np.allclose(got, expected, rtol=0, atol=1e-9), (got, expected)
    assert np.all(np.diff(np.r_[0, expected, 1]) > 0.03)  # every l is a real cell of the law


def test_the_release_with_its_defaults_draws_l_with_gem_s_law():
    """The public defaults (``l_max = 100``, ``beta = 0.05``, the exact matching count): on 64 uniforms spread
    over ``[0, 1)`` the real release returns the ``l_hat`` whose cell of GEM's law (from the paper's definitions,
    ``DC(D; l)`` by an independent max flow) holds the uniform."""
    rng = np.random.default_rng(0)
    sets = [{f"e{j}" for j in rng.choice(300, int(rng.integers(1, 31)), replace=False)} for _ in range(25)]
    table = _table(sets)
    dc = [_dc_flow(sets, l) for l in range(1, 101)]
    assert dc[0] < dc[9] < dc[-1]  # the count grows with l: the choice of l is a real one
    cdf = np.cumsum(_gem_law(dc, 1.0, 0.05))
    cells = 0
    for j in range(64):
        u = (2 * j + 1) * (TOP // 128)
        x = u / TOP
        if np.min(np.abs(cdf - x)) < 1e-9:
            continue
        want = int(np.searchsorted(cdf, x, side="right")) + 1
        assert _bound(table, 1.0, u) == want, (x, want)
        cells = max(cells, want)
    assert cells >= 10  # the uniforms reach past the first cells


def test_the_count_at_a_fixed_bound_has_the_paper_s_scale_and_shift():
    """With ``l_hat`` fixed (the uniform set at the top of ``[0, 1)``: ``l_hat = l_max = 4``) over 800 seeds, the
    release is ``DC(D) + Z - shift`` with ``Z`` Laplace of scale ``b = l / eps_count = 2 l / eps``: the sample
    standard deviation is ``sqrt(2) b`` within 12% (30% off is rejected; the count's noise calibrated for
    sensitivity 1, or with the whole epsilon, is 4x or 2x off), the mean is ``DC(D) - b ln(1 / (2 beta))``
    within 4 standard errors (a shift at the ``1 - 2 beta`` quantile is 14 off), and the release exceeds the
    true count with probability at most ``beta``."""
    table = _table(SETS)
    eps, beta, l_max = 1.0, 0.1, 4
    truth = len(set().union(*SETS))
    assert _dc_brute(SETS, l_max) == truth
    runs = 800
    vals = []
    for seed in range(runs):
        rel = releases.distinct(table, eps, beta=beta, l_max=l_max, rng=FirstUniform(TOP - 1, seed))
        assert rel.extras["bound"] == l_max
        vals.append(rel.value)
    vals = np.array(vals)
    b = l_max / (eps / 2)
    sd = math.sqrt(2) * b
    est = float(vals.std())
    assert abs(est / sd - 1) < 0.12 and abs(est / (1.3 * sd) - 1) > 0.15 and abs(est / (0.7 * sd) - 1) > 0.2, est
    shift = b * math.log(1 / (2 * beta))
    assert abs(vals.mean() - (truth - shift)) < 4 * sd / math.sqrt(runs), (vals.mean(), truth - shift)
    over = float(np.mean(vals > truth))
    assert over <= beta + 3 * math.sqrt(beta * (1 - beta) / runs), over


def test_the_release_of_a_dataset_and_of_its_table_agree_with_the_brute_force_count():
    """A :class:`~userdp.data.UserDataset` and a table of the same records give the same release for the same
    seed, and the first bound's count (``l_hat = 1``, uniform 0) is centred on ``DC(D; 1)`` by brute force."""
    table = _table(SETS)
    ds = UserDataset.from_table(table, "user", "item")
    a = releases.distinct(table, 1.0, beta=0.1, l_max=4, rng=FirstUniform(0, 5))
    b = releases.distinct(ds, 1.0, beta=0.1, l_max=4, rng=FirstUniform(0, 5))
    assert a.value == b.value and a.extras["bound"] == b.extras["bound"] == 1
    vals = np.array([releases.distinct(table, 1.0, beta=0.1, l_max=4, rng=FirstUniform(0, s)).value
                     for s in range(300)])  # fmt: skip
    b1 = 1 / 0.5
    centre = _dc_brute(SETS, 1) - b1 * math.log(1 / 0.2)
    assert abs(vals.mean() - centre) < 4 * math.sqrt(2) * b1 / math.sqrt(300)
