"""The one check of a privacy parameter ``delta``, shared by every release, accountant, guarantee and the command
line (``--delta``).

``delta`` is the probability with which an ``(epsilon, delta)`` guarantee may fail outright. It is refused
outside ``[0, 1)`` (and when it is not a number, or NaN): at ``delta >= 1`` a guarantee promises nothing, and a
release that claims one claims more than it delivers. ``delta = 0`` is a pure guarantee where a release offers
one.

Above :data:`DELTA_CEILING` (``1e-3``) a requested delta is accepted with a warning (:class:`LargeDeltaWarning`
in Python, ``userdp: warning: ...`` on the command line). The usual rule is ``delta`` well below ``1/n`` for
``n`` persons: a release that publishes the records of one person drawn at random is ``(0, 1/n)``-DP, yet it
exposes someone completely. ``n`` is usually private, so the warning uses a fixed public ceiling instead and
fires on the parameter alone, never on the data: a delta above ``1e-3`` breaks the rule on every data set of
1,000 persons or more (user-level DP is rarely useful on fewer). Below the ceiling the rule is the user's to
apply: with ``n`` persons, pick ``delta`` well below ``1/n`` (``1e-6`` is a common choice up to ``n`` in the
hundreds of thousands). See ``docs/guides/choosing-parameters.md``.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

from ..errors import ParameterError

__all__ = [
    "DELTA_CEILING",
    "AcknowledgedDelta",
    "LargeDeltaWarning",
    "check_delta",
    "delta_problem",
    "delta_warning",
    "warn_large_delta",
]

DELTA_CEILING = 1e-3
"""A requested delta above this public ceiling is accepted with a warning (never refused): it is ``1/n`` for
``n = 1,000`` persons, so a larger delta breaks the rule ``delta < 1/n`` on any data set of 1,000 persons or
more. It does not depend on the data."""


class LargeDeltaWarning(UserWarning):
    """A requested ``delta`` above :data:`DELTA_CEILING`: accepted, but the guarantee may fail for someone with
    a probability that is not negligible."""


class AcknowledgedDelta(float):
    """A delta whose warning its caller has already shown (the command line prints it once, as
    ``userdp: warning: ...``, when it parses ``--delta``). :func:`check_delta` still refuses it when it is out
    of range, but does not warn about it again."""


def delta_problem(delta: float, *, allow_zero: bool = True, floor: float = 0.0) -> str | None:
    """Why ``delta`` is refused, without the parameter's name (``"must lie in [0, 1), got 1.0: ..."``), or None.

    ``allow_zero=False``: ``0`` (a pure guarantee) is refused too. ``floor``: positive deltas below it are
    refused (the command line's ``1e-300``, where ``ln(1/delta)`` stays finite)."""
    low = "[0, 1)" if allow_zero else "(0, 1)"
    if isinstance(delta, bool | str | bytes):
        return f"must be a number in {low}, got {delta!r}"
    try:
        d = float(delta)
    except (TypeError, ValueError):
        return f"must be a number in {low}, got {delta!r}"
    if math.isnan(d) or d < 0 or d >= 1:
        why = "delta is the probability that the guarantee fails, and at delta >= 1 it promises nothing"
        return f"must lie in {low}, got {d!r} ({why})" if d >= 1 else f"must lie in {low}, got {d!r}"
    if d == 0 and not allow_zero:
        return f"must lie in {low}, got 0"
    if 0 < d < floor:
        return f"must {'be 0 or ' if allow_zero else ''}lie in [{_g(floor)}, 1), got {d!r}"
    return None


def _g(x: float) -> str:
    """``1e-05`` written ``1e-5``."""
    return f"{x:g}".replace("e-0", "e-")


def delta_warning(delta: float) -> str | None:
    """The warning for a valid requested ``delta`` above :data:`DELTA_CEILING`, or None. It depends on the
    parameter alone (public), never on the data."""
    d = float(delta)
    if not d > DELTA_CEILING:
        return None
    return (
        f"delta = {d:.3g} is above {_g(DELTA_CEILING)} (1/n for n = 1,000 persons): the guarantee may fail "
        "outright with probability delta (publishing the records of one of n persons, drawn at random, is "
        "(0, 1/n)-DP); choose delta well below 1/n for your n persons, such as 1e-6"
    )


def check_delta(
    delta: Any,
    name: str = "delta",
    *,
    allow_zero: bool = True,
    floor: float = 0.0,
    warn: bool = False,
) -> float:
    """``delta`` as a float, checked: the one validator of a delta (see the module docstring for the rule).

    Parameters
    ----------
    delta:
        The delta.
    name:
        How messages name it (``"delta"``, ``"delta'"``, ``"--delta"``).
    allow_zero:
        Whether ``0`` (a pure guarantee) is accepted.
    floor:
        Positive deltas below it are refused (default: none).
    warn:
        A requested delta (a release's parameter): above :data:`DELTA_CEILING` it is accepted with a
        :class:`LargeDeltaWarning`, unless it is an :class:`AcknowledgedDelta`.

    Raises
    ------
    ParameterError
        ``delta`` is not a number, NaN, negative, ``>= 1``, ``0`` where not allowed, or below ``floor``.
    """
    problem = delta_problem(delta, allow_zero=allow_zero, floor=floor)
    if problem is not None:
        pure = " (delta = 0, a pure guarantee, is not offered here)" if problem.endswith("got 0") else ""
        raise ParameterError(f"{name} {problem}{pure}")
    if warn:
        warn_large_delta(delta)
    return float(delta)


def warn_large_delta(delta: float) -> None:
    """A :class:`LargeDeltaWarning` for a requested ``delta`` above :data:`DELTA_CEILING` (none for an
    :class:`AcknowledgedDelta`), attributed to the first caller outside userdp. A release calls it once its
    parameters have passed every check, before any data is read."""
    if isinstance(delta, AcknowledgedDelta):
        return
    text = delta_warning(delta)
    if text is not None:
        warnings.warn(text, LargeDeltaWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside userdp (the user's call), so the warning names it."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "userdp":
        level, frame = level + 1, frame.f_back
    return level
