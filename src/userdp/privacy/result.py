"""The result object every userdp release returns."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .guarantees import Guarantee

__all__ = ["Release", "ErrorStatement"]


@dataclass(frozen=True)
class ErrorStatement:
    """What is known about the error of a release.

    ``bound`` holds with probability at least ``confidence`` (``None`` where the statement is an
    expectation or a one-sided statement described in ``description``).
    """

    description: str
    bound: float | None = None
    confidence: float | None = None

    def __str__(self) -> str:
        return self.description


@dataclass(frozen=True)
class Release:
    """A differentially private release.

    Attributes
    ----------
    value:
        The released value(s): safe to publish.
    guarantee:
        The privacy guarantee the release satisfies.
    mechanism:
        Name of the mechanism (with the paper's algorithm number where there is one).
    params:
        Every public parameter that determined the release (privacy parameters, bounds, sizes).
    error:
        An error or confidence statement, where the mechanism has one.
    extras:
        Other released (private-safe) by-products, e.g. a chosen parameter.
    losses:
        The release's privacy loss stated more exactly than ``guarantee``
        (:class:`~userdp.privacy.composition.PrivacyLoss` parts, composed sequentially; they imply
        ``guarantee``), for the ledger's tight total (:class:`~userdp.privacy.Session`): for example the
        :class:`~userdp.privacy.composition.ZCDPLoss` of a Gaussian release. Empty when the guarantee is all
        that is stated. Fixed by the public parameters alone, never by the data.
    """

    value: Any
    guarantee: Guarantee
    mechanism: str
    params: Mapping[str, Any] = field(default_factory=dict)
    error: ErrorStatement | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    losses: tuple = ()

    def summary(self) -> str:
        lines = [f"{self.mechanism}", f"  guarantee: {self.guarantee.describe()}"]
        if self.params:
            lines.append("  parameters: " + ", ".join(f"{k}={v}" for k, v in self.params.items()))
        if self.error is not None:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)


def laplace_tail(scale: float, beta: float) -> float:
    """``P(|Lap(scale)| > scale ln(1/beta)) = beta``."""
    return scale * math.log(1.0 / beta)
