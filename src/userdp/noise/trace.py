"""The exact auditor's view of a release: what each randomized step hands its sampler (:func:`recording`).

Inside ``with recording() as log:`` every exact exponential mechanism (:func:`userdp.noise.exponential_mechanism`)
and every sampler that announces itself with :func:`note` (the aggregates' integer Laplace,
:func:`userdp.vocabulary.aggregates.integer_laplace`) appends its inputs -- the scores, the sensitivity and the
epsilon it is handed, or the integer sums with the discrete Laplace's ``t`` and granularity -- and its output to
``log.draws``, labelled by the release step that drew it (:func:`step`). With ``recording(replay=picks)`` the
exponential mechanisms return ``picks`` in order instead of drawing: the auditor runs a neighbouring dataset
*conditioned on the same earlier choices*, as sequential composition conditions on them. Outside a recording
nothing is kept and nothing changes; a release never enters one itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DrawLog", "note", "recording", "step"]


@dataclass
class DrawLog:
    """The draws of one traced run: ``draws`` (one dict per draw: ``step``, ``kind``, its inputs, ``out``),
    ``replay`` (the exponential mechanisms' outputs to reproduce, in order, or ``None``)."""

    draws: list[dict] = field(default_factory=list)
    replay: list[int] | None = None
    label: str = ""
    _replayed: int = 0

    def picks(self) -> list[int]:
        """The exponential mechanisms' outputs, in order (what a neighbour's run replays)."""
        return [int(d["out"]) for d in self.draws if d["kind"] == "exponential"]

    def forced(self) -> int | None:
        if self.replay is None or self._replayed >= len(self.replay):
            return None
        self._replayed += 1
        return int(self.replay[self._replayed - 1])


_ACTIVE: ContextVar[DrawLog | None] = ContextVar("userdp_draw_log", default=None)


def active() -> DrawLog | None:
    """The recording in progress, if any."""
    return _ACTIVE.get()


@contextmanager
def recording(replay: list[int] | None = None) -> Iterator[DrawLog]:
    """Record every draw made inside the block (see the module); with ``replay``, the exponential
    mechanisms return those outputs in order. For the exact auditor (:mod:`userdp.audit`) only."""
    log = DrawLog(replay=None if replay is None else [int(i) for i in replay])
    token = _ACTIVE.set(log)
    try:
        yield log
    finally:
        _ACTIVE.reset(token)


@contextmanager
def step(name: str) -> Iterator[None]:
    """Label the draws made inside the block with the release step ``name`` (a no-op when not recording)."""
    log = _ACTIVE.get()
    if log is None:
        yield
        return
    before, log.label = log.label, str(name)
    try:
        yield
    finally:
        log.label = before


def note(kind: str, out: Any, **inputs: Any) -> None:
    """Append one draw (``kind``, its ``inputs``, its output ``out``) to the recording in progress, if any."""
    log = _ACTIVE.get()
    if log is not None:
        log.draws.append({"step": log.label, "kind": kind, **inputs, "out": out})
