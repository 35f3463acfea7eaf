"""Exceptions raised by userdp.

Every error is raised *before* anything is released: a mechanism validates its inputs and parameters
first and only then draws noise.
"""

from __future__ import annotations


class UserDPError(Exception):
    """Base class of every error userdp raises on purpose."""


class DataError(UserDPError, ValueError):
    """The input data is malformed: missing columns, NaN/inf, empty input, unsupported types,
    points outside the declared domain, unknown items."""


class ParameterError(UserDPError, ValueError):
    """A privacy or mechanism parameter is outside the range where the stated guarantee is proven."""


class BudgetExceededError(UserDPError):
    """A release would spend more privacy budget than is left in a :class:`userdp.privacy.Session`."""
