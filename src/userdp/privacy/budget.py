"""A privacy budget that records releases, composes them and refuses overspending."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ..errors import BudgetExceededError, ParameterError
from .guarantees import ApproxDP, DiscreteEMDDP, EMDMetricDP, Guarantee, ItemMetricDP, PureDP

__all__ = ["Session", "LedgerEntry", "guarantee_to_dict", "guarantee_from_dict"]

_KINDS: dict[str, type] = {c.__name__: c for c in (PureDP, ApproxDP, ItemMetricDP, EMDMetricDP, DiscreteEMDDP)}


def guarantee_to_dict(g: Guarantee) -> dict:
    """A JSON-able description of a guarantee (a per-distance ``curve`` is not kept: the ledger composes
    the headline parameters)."""
    out: dict[str, Any] = {"kind": type(g).__name__}
    for f in dataclasses.fields(g):
        if f.name == "curve":
            continue
        v = getattr(g, f.name)
        out[f.name] = v.value if isinstance(v, Enum) else v
    return out


def guarantee_from_dict(d: dict) -> Guarantee:
    """Inverse of :func:`guarantee_to_dict`."""
    d = dict(d)
    kind = d.pop("kind", None)
    if kind not in _KINDS:
        raise ParameterError(f"unknown guarantee kind {kind!r} in the ledger")
    if kind == "PureDP":
        d.pop("delta", None)
    return _KINDS[kind](**d)


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded release."""

    label: str
    guarantee: Guarantee
    mechanism: str


class Session:
    """Tracks privacy spending against one budget per kind of guarantee.

    Releases are composed with basic (sequential) composition within each kind: epsilons (or alphas)
    add, deltas add. A guarantee of a kind with no budget, or one that would overspend, is refused
    *before* the release is computed.

    Examples
    --------
    >>> from userdp.privacy import Session, PureDP
    >>> s = Session(PureDP(1.0))
    >>> s.charge(PureDP(0.4), "histogram")
    >>> s.remaining(PureDP(0.1)).epsilon
    0.6
    """

    def __init__(self, budget: Guarantee | Sequence[Guarantee]):
        budgets = [budget] if isinstance(budget, Guarantee) else list(budget)
        if not budgets:
            raise ValueError("a session needs at least one budget")
        self._budgets: dict[tuple, Guarantee] = {}
        for b in budgets:
            key = b.budget_key()
            if key in self._budgets:
                raise ValueError(f"two budgets of the same kind: {b!r}")
            self._budgets[key] = b
        self._spent: dict[tuple, Guarantee] = {}
        self.ledger: list[LedgerEntry] = []

    def _budget_for(self, g: Guarantee) -> Guarantee:
        try:
            return self._budgets[g.budget_key()]
        except KeyError:
            raise BudgetExceededError(
                f"this session has no budget for guarantees of kind {g.budget_key()}; it has "
                f"{[b.describe() for b in self._budgets.values()]}"
            ) from None

    def spent(self, kind: Guarantee) -> Guarantee | None:
        """Total spent so far on the kind of ``kind`` (``None`` if nothing)."""
        return self._spent.get(kind.budget_key())

    def remaining(self, kind: Guarantee) -> Guarantee | None:
        """What is left of the budget of the kind of ``kind`` (``None`` if it is used up)."""
        budget = self._budget_for(kind)
        spent = self._spent.get(kind.budget_key())
        if spent is None:
            return budget
        main_field = "epsilon" if hasattr(budget, "epsilon") else "alpha"
        main = getattr(budget, main_field) - getattr(spent, main_field)
        if main <= 1e-12 * getattr(budget, main_field):
            return None
        delta = max(budget.delta - spent.delta, 0.0)
        if isinstance(budget, ApproxDP):
            if delta == 0.0:
                return PureDP(main, neighbours=budget.neighbours)
            return ApproxDP(main, delta, budget.neighbours)
        return dataclasses.replace(budget, **{main_field: main, "delta": delta})

    def can_spend(self, g: Guarantee) -> bool:
        """True if ``g`` fits in what is left."""
        try:
            budget = self._budget_for(g)
        except BudgetExceededError:
            return False
        spent = self._spent.get(g.budget_key())
        total = g if spent is None else spent.compose(g)
        return total.fits_within(budget)

    def charge(self, g: Guarantee, label: str = "", mechanism: str = "") -> None:
        """Record a release of guarantee ``g``; raise :class:`BudgetExceededError` (and record nothing)
        if it does not fit."""
        budget = self._budget_for(g)
        spent = self._spent.get(g.budget_key())
        total = g if spent is None else spent.compose(g)
        if not total.fits_within(budget):
            raise BudgetExceededError(
                f"release {label!r} needs {g.describe()}; with what is already spent the total would be "
                f"{total.describe()}, over the budget {budget.describe()}"
            )
        self._spent[g.budget_key()] = total
        self.ledger.append(LedgerEntry(label, g, mechanism))

    # ---------------------------------------------------------------- persistence (the CLI's --ledger)

    def to_dict(self) -> dict:
        return {
            "format": "userdp-ledger/1",
            "budgets": [guarantee_to_dict(b) for b in self._budgets.values()],
            "entries": [
                {"label": e.label, "mechanism": e.mechanism, "guarantee": guarantee_to_dict(e.guarantee)}
                for e in self.ledger
            ],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Session:
        if d.get("format") != "userdp-ledger/1":
            raise ParameterError("not a userdp ledger (format userdp-ledger/1)")
        s = cls([guarantee_from_dict(b) for b in d["budgets"]])
        for e in d.get("entries", []):
            s.charge(guarantee_from_dict(e["guarantee"]), e.get("label", ""), e.get("mechanism", ""))
        return s

    def save(self, path: str | Path) -> None:
        """Write the budgets and the ledger to ``path`` atomically (a temporary file, then a rename)."""
        path = Path(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=".ledger-")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_dict(), fh, indent=1)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> Session:
        """Read a ledger written by :meth:`save` (or ``userdp ledger init``)."""
        try:
            with open(path) as fh:
                return cls.from_dict(json.load(fh))
        except FileNotFoundError:
            raise ParameterError(f"no ledger at {path}; create one with `userdp ledger init`") from None
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ParameterError(f"{path} is not a valid userdp ledger: {exc}") from None

    def run(self, guarantee: Guarantee, fn: Callable[..., Any], *args: Any, label: str = "", **kwargs: Any) -> Any:
        """Check that ``guarantee`` fits, run ``fn(*args, **kwargs)``, then record it.

        ``fn`` must return a :class:`userdp.release.Release` whose guarantee fits within ``guarantee``;
        nothing is recorded (and the value is not returned) if it does not.
        """
        if not self.can_spend(guarantee):
            self.charge(guarantee, label)  # raises with the explanation
        result = fn(*args, **kwargs)
        got = getattr(result, "guarantee", None)
        if got is None or not got.fits_within(guarantee):
            raise BudgetExceededError(f"the mechanism returned {got!r}, which does not fit the declared {guarantee!r}")
        self.charge(got, label, getattr(result, "mechanism", ""))
        return result
