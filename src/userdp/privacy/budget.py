"""A privacy budget that records releases, composes them and refuses overspending."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BudgetExceededError
from .guarantees import ApproxDP, Guarantee, PureDP

__all__ = ["Session", "LedgerEntry"]


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
