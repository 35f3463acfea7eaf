"""The result of an audit: the claimed and the measured privacy, and whether the measurement refutes the claim
(:class:`AuditResult`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AuditResult"]


@dataclass(frozen=True)
class AuditResult:
    """Claimed vs measured privacy: ``passed`` is False when the measurement refutes the claim."""

    mechanism: str
    claimed: str
    measured: str
    passed: bool
    detail: str = ""
    detection_limit: float | None = None
    """Statistical audits only: the smallest hockey-stick divergence the test could have detected
    (:func:`detection_limit`); a mechanism whose true delta exceeds the claim by less passes unseen."""

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        out = f"[{verdict}] {self.mechanism}: claimed {self.claimed}; measured {self.measured}. {self.detail}"
        if self.detection_limit is not None:
            out = out.rstrip(". ") + f". Detection limit: cannot refute delta below {self.detection_limit:.2g}."
        return out
