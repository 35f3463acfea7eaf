"""What a heatmap release really draws: a spy on the lattice Laplace sampler, and the paper's parameters
computed from their definitions.

Every noisy value of every heatmap mechanism passes through :func:`userdp.noise.mechanisms.add_laplace`
(directly, or through ``laplace_mechanism``): ``z ~ DLap(t)`` is drawn by ``discrete_laplace`` and added on the
lattice ``g Z`` by ``_lattice_add``. :class:`NoiseSpy` wraps those two functions (calling the real ones) and
records, in order, what each draw noised, the law it was drawn from (``g DLap(t)``, scale ``g t``), the integers
drawn and the values released. Tests then measure the noise actually added and the law the sampler was handed,
instead of reading a release's ``params`` (which would only compare a reported number with itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest


@dataclass
class Draw:
    """One call of the lattice Laplace mechanism: ``out = g (rint(values / g) + z)``, ``z ~ DLap(t)`` (arrays
    flattened, in the order they were noised)."""

    values: np.ndarray
    granularity: float
    t: int
    z: np.ndarray
    out: np.ndarray

    @property
    def scale(self) -> float:
        """The Laplace scale of the law the sampler was handed (``g t``)."""
        return self.granularity * self.t

    @property
    def noise(self) -> np.ndarray:
        """The noise actually added: released minus true values (the lattice noise plus a rounding of at most
        ``g / 2``, about ``2^-41`` of the scale)."""
        return self.out - self.values


class NoiseSpy:
    """Record every lattice Laplace draw made while it is installed (``monkeypatch`` undoes it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import userdp.noise.mechanisms as mech

        self.draws: list[Draw] = []
        real_dlap, real_add = mech.discrete_laplace, mech._lattice_add
        pending: list[int] = []

        def dlap(t, size, rng=None):
            pending.append(int(t))
            return real_dlap(t, size, rng)

        def lattice_add(values, g, noise):
            out = real_add(values, g, noise)
            if pending:  # a Laplace draw (the Gaussian mechanism adds its noise on a lattice too)
                v = np.asarray(values, dtype=np.float64).reshape(-1)  # flattened, in the order noised
                z = np.asarray(noise).reshape(-1)
                self.draws.append(Draw(v.copy(), float(g), pending.pop(), z.copy(), out.reshape(-1).copy()))
            return out

        monkeypatch.setattr(mech, "discrete_laplace", dlap)
        monkeypatch.setattr(mech, "_lattice_add", lattice_add)

    def take(self) -> list[Draw]:
        """The draws recorded since the last call, in order."""
        out, self.draws = self.draws, []
        return out


def assert_law(draws: list[Draw], scale: float, rel: float = 1e-6) -> None:
    """Every draw was made from the lattice Laplace law of ``scale`` (up to the rounding terms of the
    calibration, ``(dim + 1) 2^-40`` of the scale)."""
    for d in draws:
        assert d.scale == pytest.approx(scale, rel=rel), (d.scale, scale)


def assert_laplace_scale(noise: np.ndarray, scale: float, tol: float = 0.15) -> None:
    """The noise drawn is centred Laplace of ``scale``: its mean absolute value (``scale`` for Laplace; relative
    standard error ``1 / sqrt(n)``) is within ``tol`` of ``scale``, and its mean within 4 standard errors of 0.
    With ``n >= 900`` and ``tol = 0.15`` the true scale passes by 4.5 standard errors, and a scale 30% off (too
    small or too large) fails by 3.5 or more."""
    x = np.asarray(noise, dtype=np.float64).reshape(-1)
    assert x.size >= 900, f"{x.size} draws are too few to tell a scale 30% off"
    assert abs(np.mean(np.abs(x)) / scale - 1) < tol, (np.mean(np.abs(x)), scale)
    assert abs(np.mean(x)) < 4 * scale * math.sqrt(2 / x.size)


# --------------------------------------------------------------------------------------------
# The papers' parameters, from their definitions (never from a release's plan or params)
# --------------------------------------------------------------------------------------------


def sparse_level_epsilons(epsilon: float, L: int, w: int = 20, gamma: float = 1 / math.sqrt(2)) -> dict[int, float]:
    """Ghazi et al., Algorithm 1 with section 4's choices: levels ``q = floor(log2 sqrt(w))`` to ``L`` measured,
    ``eps_i = gamma^|i - q| eps / Z`` with ``Z`` the sum of the weights."""
    q = min(int(math.floor(math.log2(math.sqrt(w)))), L)
    weights = {i: gamma ** abs(i - q) for i in range(q, L + 1)}
    Z = sum(weights.values())
    return {i: epsilon * v / Z for i, v in weights.items()}


def privtree_paper_lambda(epsilon_tree: float, beta: int = 4) -> float:
    """PrivTree's ``lambda = (2 beta - 1) / ((beta - 1) eps_tree)`` (Zhang et al., Theorem 3.1); userdp proves it
    for fractional users up to ``eps_tree`` about 1.178 (the tests stay below 1)."""
    assert epsilon_tree <= 1.0
    return (2 * beta - 1) / ((beta - 1) * epsilon_tree)


def block_sums(s: np.ndarray, row_edges: np.ndarray, col_edges: np.ndarray) -> np.ndarray:
    """Sums of ``s`` over the blocks ``[row_edges[i], row_edges[i+1]) x [col_edges[j], col_edges[j+1])``, by
    plain loops."""
    out = np.zeros((len(row_edges) - 1, len(col_edges) - 1))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = s[row_edges[i] : row_edges[i + 1], col_edges[j] : col_edges[j + 1]].sum()
    return out


def padded_pyramid(s: np.ndarray) -> list[np.ndarray]:
    """The quadtree of cell sums over ``s`` zero-padded to the enclosing ``2^L x 2^L`` square, root first."""
    H, W = s.shape
    L = max(0, math.ceil(math.log2(max(H, W))))
    side = 2**L
    S = np.zeros((side, side))
    S[:H, :W] = s
    out = []
    for i in range(L + 1):
        span = side // 2**i
        out.append(block_sums(S, np.arange(0, side + 1, span), np.arange(0, side + 1, span)))
    return out
