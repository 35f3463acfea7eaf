"""What a d_EM release is asked for and what it delivers (PrivEMDLinear, PrivEMDItemWise, frequency estimation).

``alpha=A, delta=D`` is the request (``D = 0``: a pure guarantee).

* Without ``samples`` (every user holds the same number of items, or PrivEMDLinear in the local model): the
  release is ``(alpha, delta)``-d_EM-DP with ``alpha <= A`` and ``delta <= D``. PrivEMDItemWise and frequency
  estimation use the best amplification route whose ``delta'`` meets ``D`` (composition when ``D = 0``);
  PrivEMDLinear uses the Gaussian variant when ``D > 0``, pure noise otherwise.
* With ``samples=S`` (BoundedEMDReduction, Theorem 5.3): the request is ``A``-d_EM-DP at resolution ``r``,
  i.e. ``(A r, D, r)``-discrete d_EM-DP. ``D > 0`` is required (Lemma 5.2's projection fails with probability
  ``D/2``; the inner release gets the other ``D/2``, or all of ``D`` when Lemma 5.2's distance ``c`` is at
  least 1 and the projection needs none). The inner bounded release gets ``alpha = A r / min(c, 1)``, and the
  delivered guarantee is computed from the inner release's *realized* ``(alpha, delta')``
  (:func:`userdp.privacy.accounting.reduction_guarantee_of`): its delta is the delta used.

A delivered guarantee weaker than the request -- alpha or epsilon above it by more than ``REQUEST_RTOL``
(1e-9, relative), or any delta above it -- is refused (nothing is released or charged) unless
``allow_weaker``; then the weaker guarantee is the one reported, with a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ParameterError
from ..privacy.accounting import (
    REDUCTION_NEEDS_BOUNDED,
    REQUEST_RTOL,
    reduction_alpha,
    reduction_distance,
    reduction_guarantee_of,
)
from ..privacy.budget import guarantee_to_dict
from ..privacy.guarantees import EMDMetricDP, Guarantee
from ..privacy.params import check_delta, warn_large_delta

__all__ = ["Request", "plan_request", "deliver"]


@dataclass(frozen=True)
class Request:
    """The guarantee a d_EM release is asked for, and the inner release planned to deliver it.

    ``alpha``, ``delta``: the request (``delta`` 0 if absent). With ``samples``: ``samples``, ``r`` and the
    projection's delta ``projection_delta`` (Lemma 5.2). ``inner_alpha`` and ``inner_delta`` are the target of
    the bounded release on the (projected) data.
    """

    alpha: float
    delta: float
    samples: int | None = None
    r: float | None = None
    projection_delta: float = 0.0
    inner_alpha: float = 0.0
    inner_delta: float = 0.0

    @property
    def epsilon(self) -> float | None:
        """With ``samples``: the requested discrete epsilon ``alpha r``."""
        return None if self.samples is None else self.alpha * self.r

    def as_dict(self) -> dict:
        out = {"alpha": self.alpha, "delta": self.delta}
        if self.samples is not None:
            out.update({"r": self.r, "epsilon": self.epsilon})
        return out

    def describe(self) -> str:
        if self.samples is None:
            return f"(alpha = {self.alpha:.6g}, delta = {self.delta:.3g})-d_EM-DP"
        return (
            f"alpha = {self.alpha:.6g} at resolution r = {self.r:.4g}: ({self.epsilon:.6g}, {self.delta:.3g}, "
            f"r={self.r:.4g})-discrete d_EM-DP"
        )


def plan_request(
    alpha: float, delta: float | None = None, samples: int | None = None, r: float = 0.05, *, warn: bool = False
) -> Request:
    """Check ``alpha``, ``delta``, ``samples``, ``r`` and plan the inner release.

    ``delta`` is checked by :func:`userdp.privacy.check_delta` (refused outside ``[0, 1)``); with ``warn`` (a
    release's request) a delta above :data:`userdp.privacy.DELTA_CEILING` gives a
    :class:`~userdp.privacy.LargeDeltaWarning`."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ParameterError(f"alpha (--alpha) must be a positive number, got {alpha!r}") from None
    if not (math.isfinite(a) and a > 0):
        raise ParameterError(f"alpha (--alpha) must be positive and finite, got {alpha!r}")
    d = 0.0 if delta is None else check_delta(delta, "delta (--delta)")
    if samples is None:
        if warn:
            warn_large_delta(d if delta is None else delta)
        return Request(a, d, inner_alpha=a, inner_delta=d)
    if isinstance(samples, bool) or int(samples) != samples or samples < 1:
        raise ParameterError(f"samples (--samples) must be a positive integer, got {samples!r}")
    s = int(samples)
    if d == 0:
        raise ParameterError(
            "samples S (--samples; BoundedEMDReduction, Theorem 5.3) needs delta > 0: the projection's distance "
            "bound (Lemma 5.2) fails with probability delta; pass e.g. delta=1e-6 (--delta 1e-6)"
        )
    r = float(r)
    projection_delta = d / 2
    c = reduction_distance(r, s, projection_delta)  # also checks r in (0, 1]
    inner_alpha = reduction_alpha(a * r, r, s, projection_delta)
    inner_delta = d if c >= 1 else d - projection_delta  # c >= 1: the projection needs no delta
    if warn:
        warn_large_delta(delta)
    return Request(a, d, s, r, projection_delta, inner_alpha, inner_delta)


def deliver(req: Request, inner: Guarantee, allow_weaker: bool = False) -> tuple[Guarantee, dict]:
    """The guarantee delivered around the inner release's realized guarantee, checked against the request.

    Returns the guarantee and the report fields (``requested``, ``delivered``, ``inner_alpha``,
    ``inner_delta``, ``inner_delta_prime``, and ``guarantee_warning`` when a weaker release was allowed)."""
    if req.samples is None:
        g, realized, asked = inner, inner.alpha, req.alpha
    else:
        if not isinstance(inner, EMDMetricDP):
            raise ParameterError(REDUCTION_NEEDS_BOUNDED)
        g = reduction_guarantee_of(inner, req.r, req.samples, req.projection_delta)
        realized, asked = g.epsilon, req.epsilon
    name = "alpha" if req.samples is None else "epsilon (alpha r)"
    problems = []
    if realized > asked * (1 + REQUEST_RTOL):
        problems.append(
            f"its {name} {realized:.6g} exceeds the requested {asked:.6g}: lower alpha (--alpha; about "
            f"{req.alpha * asked / realized:.6g})"
        )
    if g.delta > req.delta:
        problems.append(f"its delta {g.delta:.3g} exceeds the requested {req.delta:.3g}: raise delta (--delta)")
    fields = {
        "requested": req.as_dict(),
        "delivered": guarantee_to_dict(g),
        "inner_alpha": req.inner_alpha,
        "inner_delta": req.inner_delta,
        "inner_delta_prime": float(getattr(inner, "delta", 0.0)),
    }
    if problems:
        text = f"the release would be weaker than requested ({req.describe()}): " + "; ".join(problems)
        if not allow_weaker:
            raise ParameterError(text + "; or pass allow_weaker=True (--allow-weaker) to release the weaker guarantee")
        fields["guarantee_warning"] = text + " (released because of allow_weaker)"
    return g, fields
