"""A privacy budget that records releases, composes them and refuses overspending.

A :class:`Session` protects ONE kind of guarantee (for example ``(epsilon, delta)``-DP for replace one
user's data). Every release is converted into that kind by
:func:`~userdp.privacy.guarantees.convert_to_budget` before it is charged. An ``(epsilon, delta)`` budget with
``delta > 0`` is charged by the tight total (:func:`userdp.privacy.composition.tight_epsilon`: privacy loss
distributions, and zCDP for the releases that state it); a zCDP budget (:class:`~userdp.privacy.ZCDP`) by
adding the ``rho`` the releases state; the other budgets by basic composition. A ledger file shared by
several processes (the CLI's ``--ledger``) is updated under an exclusive lock (:meth:`Session.locked`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ..errors import BudgetExceededError, ParameterError
from .guarantees import (
    ZCDP,
    ApproxDP,
    DiscreteEMDDP,
    EMDMetricDP,
    Guarantee,
    ItemMetricDP,
    Neighbours,
    PureDP,
    ShuffleDP,
    convert_to_budget,
    guarantee_kind,
)

__all__ = ["Session", "LedgerEntry", "guarantee_to_dict", "guarantee_from_dict", "ledger_lock"]

LEDGER_FORMAT = "userdp-ledger/3"
"""Format 3 (userdp 2026-11): the same fields as format 2; an ``(epsilon, delta)`` ledger is charged by the
tight total, so format 2's readers (which replay it by basic composition) must not read it. Formats 2 and 1
are read: their entries were charged by basic composition, which the tight total never exceeds."""

_KINDS: dict[str, type] = {
    c.__name__: c for c in (PureDP, ApproxDP, ShuffleDP, ItemMetricDP, EMDMetricDP, DiscreteEMDDP, ZCDP)
}


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
    """One recorded release: the guarantee it delivered, what it cost in the session's budget, and what the
    caller recorded about it (``metadata``: for the command line, the command, the input file's name and
    SHA-256, the time and the parameters; see :func:`userdp.cli.ledger.charge`).

    The ledger is the data curator's own record, not a release: an input file's SHA-256 identifies the exact
    data and is not differentially private, so a ledger must not be published.
    """

    label: str
    guarantee: Guarantee
    mechanism: str
    cost: Guarantee
    metadata: dict = dataclasses.field(default_factory=dict)
    losses: tuple = ()  # the release's privacy loss, stated exactly (:mod:`userdp.privacy.composition`)


def _lock_path(path: Path) -> Path:
    if not path.name or path.name in (".", ".."):
        raise ParameterError(f"a ledger needs a file name, got {str(path)!r}")
    return path.with_name(path.name + ".lock")


@contextmanager
def ledger_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the ledger file ``path`` (blocking until it is free).

    The lock is ``fcntl.flock`` on ``PATH.lock``, a file next to the ledger that is created once and
    never replaced or removed: the ledger itself is replaced by an atomic rename on every save, so a
    lock on the ledger's own inode would not exclude a process that opened the previous version. The
    lock is released when the block ends, also on an error or if the process dies. It works between
    processes on one machine (flock over network file systems depends on the file system). A child
    process forked while the lock is held shares it until the child exits.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        raise ParameterError("a ledger file needs POSIX file locks (fcntl), which this system lacks") from None
    lock = _lock_path(Path(path))
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ParameterError(f"cannot open the ledger's lock file {lock}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _head(g: Guarantee) -> str:
    """The first clause of ``g.describe()``, such as ``2-DP for replace one user's data``."""
    return g.describe().split(":")[0]


def _entry_losses(g: Guarantee, cost: Guarantee, losses: tuple) -> list:
    """A release's privacy loss in the budget's relation: its stated ``losses`` when its cost needs no
    conversion (``cost == g``), else the worst-case loss of its cost (a ``DPLoss``); nothing for a cost that
    is not ``(epsilon, delta)``-DP or zCDP."""
    from .composition import DPLoss

    if losses and cost == g:
        return list(losses)
    if isinstance(cost, ZCDP):
        return list(losses)
    if isinstance(cost, ApproxDP):
        return [DPLoss(float(cost.epsilon), float(cost.delta))]
    return []


def _zcdp_cost(g: Guarantee, losses: tuple, budget: ZCDP) -> ZCDP:
    """What a release costs in a zCDP budget: the sum of the zCDP parts it states (a pure part ``epsilon`` is
    ``epsilon^2 / 2``-zCDP, Bun & Steinke 2016, Proposition 1.4); refused when it states none, states a part
    that is not zCDP, or is of another neighbour relation."""
    from .composition import ZCDPLoss, _pure_epsilon

    head = _head(g)
    if not isinstance(g, ApproxDP) or g.neighbours is not budget.neighbours:
        raise BudgetExceededError(
            f"a release with {head} cannot be charged to a zCDP budget for {budget.neighbours.value}: only "
            "releases of that relation that state a zCDP guarantee can (zCDP is not converted between relations)"
        )
    if not any(isinstance(x, ZCDPLoss) for x in losses):
        raise BudgetExceededError(
            f"a release with {head} cannot be charged to a zCDP budget: it states no zCDP guarantee (only "
            "releases whose noise is Gaussian do: the Gaussian weighted vocabulary and the Gaussian per-key "
            "counts; charge the others to an (epsilon, delta) ledger)"
        )
    rho = delta = tv = 0.0
    for x in losses:
        if isinstance(x, ZCDPLoss):
            rho, delta, tv = rho + x.rho, delta + x.delta, tv + x.tv
        elif _pure_epsilon(x) is not None:
            rho += _pure_epsilon(x) ** 2 / 2
        else:
            raise BudgetExceededError(f"a release with {head} states a part that is not zCDP ({x})")
    return ZCDP(rho, delta, budget.neighbours, tv)


def _main(g: Guarantee) -> float:
    """The main parameter of a guarantee: epsilon or alpha."""
    return g.epsilon if hasattr(g, "epsilon") else g.alpha  # type: ignore[attr-defined]


class Session:
    """Tracks privacy spending against ONE budget: one kind of guarantee, such as ``(epsilon, delta)``-DP
    for one neighbour relation, or ``(alpha, delta)``-d_EM-DP of one model and metric.

    Every release is first converted into the budget's kind by
    :func:`~userdp.privacy.guarantees.convert_to_budget` (for a budget for replace one user's data, an
    add/remove ``epsilon`` costs ``2 epsilon``, a local ``epsilon`` costs ``epsilon``, a d_EM-DP release
    costs its user-level guarantee at ``d_EM = 1``); a release that implies nothing of the budget's kind
    is refused with the reason. A release that would overspend is refused *before* it is computed
    (:meth:`run`), and a refused release records nothing.

    **What is charged.** For an ``(epsilon, delta)``-DP budget with ``delta > 0``, a release is admitted iff
    the *tight total* of every entry and the new one, :func:`userdp.privacy.composition.tight_epsilon` at the
    budget's ``delta``, is at most the budget's ``epsilon``: each entry enters as the loss it states
    (``losses``, used when its cost needs no conversion) or as the worst-case PLD of its ``(epsilon, delta)``
    cost (the optimal composition of such mechanisms, Kairouz, Oh & Viswanath 2015), through ``dp-accounting``'s
    pessimistic PLDs, and the releases stating zCDP (:class:`~userdp.privacy.composition.ZCDPLoss`) also by
    adding their ``rho``. The tight total never exceeds basic composition's, so a ledger charged by basic
    composition stays valid. A pure budget (``delta = 0``) and the d_EM-DP and item-level budgets are charged
    by basic composition (epsilons or alphas add, deltas add). A zCDP budget (:class:`ZCDP`) is charged the
    ``rho`` (and approximate ``delta``) the release states, and refuses a release that states none.

    Parameters
    ----------
    budget : Guarantee
        The budget. A sequence holding exactly one guarantee is accepted too; several budgets (for
        several relations) are refused, because budgets that never cross-charge do not bound the loss.

    Examples
    --------
    >>> from userdp.privacy import Session, PureDP, Neighbours
    >>> s = Session(PureDP(4.0, neighbours=Neighbours.REPLACE_USER))
    >>> s.charge(PureDP(1.0), "histogram")  # add/remove one user: costs 2 under replace
    >>> s.remaining().epsilon
    2.0
    """

    def __init__(self, budget: Guarantee | Sequence[Guarantee]):
        budgets = [budget] if isinstance(budget, Guarantee) else list(budget)
        if len(budgets) != 1:
            kinds = ", ".join(guarantee_kind(b) for b in budgets) or "none"
            raise ParameterError(
                f"a session protects one kind of guarantee (one neighbour relation), got {len(budgets)} budgets "
                f"({kinds}); pass one budget: releases of other kinds are converted into it (for replace one "
                "user's data, an add/remove epsilon costs 2 epsilon and a local epsilon costs epsilon)"
            )
        (b,) = budgets
        if not isinstance(b, Guarantee):
            raise ParameterError(f"a budget must be a privacy guarantee, got {b!r}")
        self.budget: Guarantee = b
        self._spent: Guarantee | None = None
        self.ledger: list[LedgerEntry] = []

    def cost(self, g: Guarantee, losses: Sequence[Any] = ()) -> Guarantee:
        """What a release with guarantee ``g`` (and stated ``losses``) costs in this session's budget (raises
        :class:`BudgetExceededError` if it cannot be charged to it at all)."""
        if isinstance(self.budget, ZCDP):
            return _zcdp_cost(g, tuple(losses), self.budget)
        return convert_to_budget(g, self.budget)

    def spent(self) -> Guarantee | None:
        """Total spent so far by *basic* composition, in the budget's kind (``None`` if nothing; for a zCDP
        budget, the zCDP total, which is what it charges). :meth:`tight_spent` is what an ``(epsilon, delta)``
        budget charges."""
        return self._spent

    def remaining(self) -> Guarantee | None:
        """What is left of the budget by basic composition (``None`` if it is used up there). Any release whose
        cost fits in it is admitted (the charged total never exceeds basic composition's); with the tight
        total, more may be (:meth:`can_spend` says)."""
        budget, spent = self.budget, self._spent
        if spent is None:
            return budget if not self.ledger else None
        if isinstance(budget, ZCDP):
            rho = budget.rho - spent.rho  # type: ignore[attr-defined]
            if rho <= 1e-12 * budget.rho:
                return None
            return ZCDP(rho, max(budget.delta - spent.delta, 0.0), budget.neighbours, budget.tv - spent.tv)  # type: ignore[attr-defined]
        main = _main(budget) - _main(spent)
        if main <= 1e-12 * _main(budget):
            return None
        delta = max(budget.delta - spent.delta, 0.0)  # type: ignore[attr-defined]
        if isinstance(budget, ApproxDP):
            return ApproxDP(main, delta, budget.neighbours) if delta else PureDP(main, neighbours=budget.neighbours)
        field = "epsilon" if hasattr(budget, "epsilon") else "alpha"
        extra = {"curve": None} if isinstance(budget, EMDMetricDP) else {}
        return dataclasses.replace(budget, **{field: main, "delta": delta}, **extra)

    def _tight(self) -> bool:
        """True if this budget is charged by the tight total: ``(epsilon, delta)``-DP with ``delta > 0``."""
        return isinstance(self.budget, ApproxDP) and self.budget.delta > 0

    def _losses(self, extra: tuple = ()) -> list:
        """Every entry's privacy loss in the budget's relation, then ``extra`` (the new release's)."""
        out: list = []
        for e in self.ledger:
            out += _entry_losses(e.guarantee, e.cost, e.losses)
        return out + list(extra)

    def _fits(self, cost: Guarantee, new_losses: tuple) -> tuple[bool, str]:
        """Whether the entries and a new release of cost ``cost`` (and losses ``new_losses``) fit the budget,
        and the total it was judged by (in words)."""
        if self._tight():
            from .composition import tight_epsilon

            d = float(self.budget.delta)  # type: ignore[attr-defined]
            eps = tight_epsilon(self._losses(new_losses), d)
            ok = eps <= self.budget.epsilon * (1 + 1e-12)  # type: ignore[attr-defined]
            return ok, f"epsilon {eps:.6g} at delta {d:.3g} by tight composition"
        total = cost if self._spent is None else self._spent.compose(cost)
        return total.fits_within(self.budget), _head(total)

    def can_spend(self, g: Guarantee, losses: Sequence[Any] = ()) -> bool:
        """True if a release with guarantee ``g`` (and stated ``losses``) fits in what is left."""
        try:
            cost = self.cost(g, losses)
            return self._fits(cost, tuple(_entry_losses(g, cost, tuple(losses))))[0]
        except BudgetExceededError:
            return False

    def charge(
        self,
        g: Guarantee,
        label: str = "",
        mechanism: str = "",
        metadata: dict | None = None,
        losses: Sequence[Any] = (),
    ) -> None:
        """Record a release of guarantee ``g`` at its converted cost, with JSON-able ``metadata`` (kept in the
        ledger file); raise :class:`BudgetExceededError` (and record nothing) if it cannot be charged or does
        not fit. ``losses`` (:class:`~userdp.privacy.composition.PrivacyLoss` parts) state the release's
        privacy loss more exactly than ``g``; they must imply ``g``, and are composed when ``g`` needs no
        conversion into the budget's relation (a zCDP budget needs a stated zCDP loss)."""
        losses = tuple(losses)
        if losses:
            from .composition import basic_epsilon

            eps, delta = basic_epsilon(losses)
            if eps > g.epsilon * (1 + 1e-12) or delta > getattr(g, "delta", 0.0) * (1 + 1e-12):  # type: ignore[attr-defined]
                raise ParameterError("the stated privacy losses imply more than the release's guarantee")
        self._record(g, self.cost(g, losses), label, mechanism, metadata, losses)

    def tight_spent(self, delta: float | None = None) -> tuple[float, float] | None:
        """The epsilon spent by tight composition (:func:`userdp.privacy.composition.tight_epsilon`) at
        ``delta`` (default: the budget's delta; for a zCDP budget, its spent approximate delta plus ``1e-6``),
        never more than basic composition's. Returns ``(tight epsilon, delta)``; ``None`` for a d_EM-DP or
        item-level budget, or one with ``delta = 0`` and no ``delta`` given (pure releases then compose exactly
        additively). At the budget's delta, this is what an ``(epsilon, delta)`` budget charges."""
        from .composition import tight_epsilon

        if isinstance(self.budget, ZCDP):
            spent_delta = self._spent.delta if self._spent is not None else 0.0  # type: ignore[attr-defined]
            d = spent_delta + 1e-6 if delta is None else float(delta)
        elif isinstance(self.budget, PureDP | ApproxDP):
            d = float(getattr(self.budget, "delta", 0.0)) if delta is None else float(delta)
        else:
            return None
        if d <= 0:
            return None
        return tight_epsilon(self._losses(), d), d

    def basic_spent(self) -> tuple[float, float] | None:
        """The entries' costs by basic composition, ``(epsilon, delta)``, for an ``(epsilon, delta)`` or zCDP
        budget (a zCDP budget's entries by their guarantees); ``(inf, 1)`` once the deltas add to 1 or more
        (basic composition then protects nothing); ``None`` for the other budgets."""
        if not isinstance(self.budget, ApproxDP | ZCDP):
            return None
        eps = delta = 0.0
        for e in self.ledger:
            g = e.cost if isinstance(e.cost, ApproxDP) else e.guarantee
            if not isinstance(g, ApproxDP):
                return None
            eps, delta = eps + g.epsilon, delta + g.delta
        return (eps, delta) if delta < 1 else (math.inf, 1.0)

    def _record(
        self,
        g: Guarantee,
        cost: Guarantee,
        label: str,
        mechanism: str,
        metadata: dict | None = None,
        losses: tuple = (),
        check: bool = True,
    ) -> None:
        if check:
            ok, total = self._fits(cost, tuple(_entry_losses(g, cost, tuple(losses))))
            if not ok:
                converted = "" if cost is g else f" (it delivers {_head(g)})"
                raise BudgetExceededError(
                    f"release {label!r} costs {_head(cost)}{converted}; with what is already spent "
                    f"the total would be {total}, over the budget {_head(self.budget)}"
                )
        try:
            spent = cost if self._spent is None else self._spent.compose(cost)
        except BudgetExceededError:
            if not self._tight():
                raise
            spent = None  # basic composition's deltas reached 1: the tight total is what is charged
        self._spent = spent
        self.ledger.append(LedgerEntry(label, g, mechanism, cost, dict(metadata or {}), tuple(losses)))

    # ---------------------------------------------------------------- persistence (the CLI's --ledger)

    def to_dict(self) -> dict:
        return {
            "format": LEDGER_FORMAT,
            "budget": guarantee_to_dict(self.budget),
            "entries": [
                {
                    "label": e.label,
                    "mechanism": e.mechanism,
                    "guarantee": guarantee_to_dict(e.guarantee),
                    "cost": guarantee_to_dict(e.cost),
                    **({"metadata": e.metadata} if e.metadata else {}),
                    **({"losses": [loss.to_dict() for loss in e.losses]} if e.losses else {}),
                }
                for e in self.ledger
            ],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Session:
        """Inverse of :meth:`to_dict`. The recorded costs are replayed (a per-distance curve is not stored,
        so a cost is not recomputed from the stored guarantee). A ledger of the first format with one budget
        is read as is; one with several budgets is refused with instructions."""
        if not isinstance(d, dict):
            raise ParameterError("not a userdp ledger (the file holds no JSON object)")
        fmt = d.get("format")
        if fmt == "userdp-ledger/1":
            return cls._from_v1(d)
        if fmt not in (LEDGER_FORMAT, "userdp-ledger/2"):
            raise ParameterError(f"not a userdp ledger (format {LEDGER_FORMAT})")
        s = cls(guarantee_from_dict(d["budget"]))
        for e in d.get("entries", []):
            g = guarantee_from_dict(e["guarantee"])
            cost = guarantee_from_dict(e["cost"])
            if cost.budget_key() != s.budget.budget_key():
                raise ParameterError(f"entry {e.get('label', '')!r} records a cost of another kind than the budget")
            meta = e.get("metadata", {})
            if not isinstance(meta, dict):
                raise ParameterError(f"entry {e.get('label', '')!r} has metadata that is not an object")
            from .composition import loss_from_dict

            losses = tuple(loss_from_dict(x) for x in e.get("losses", []))
            s._record(g, cost, e.get("label", ""), e.get("mechanism", ""), meta, losses, check=False)
        s._check_total()
        return s

    def _check_total(self) -> None:
        """Refuse a loaded ledger whose total exceeds its budget (each entry was checked when it was charged;
        the total is checked once, not at every entry)."""
        if not self.ledger:
            return
        if self._tight():
            from .composition import tight_epsilon

            eps = tight_epsilon(self._losses(), float(self.budget.delta))  # type: ignore[attr-defined]
            if eps > self.budget.epsilon * (1 + 1e-12):  # type: ignore[attr-defined]
                raise ParameterError(f"its releases total epsilon {eps:.6g}, over its budget {_head(self.budget)}")
        elif self._spent is None or not self._spent.fits_within(self.budget):
            raise ParameterError(f"its releases total more than its budget {_head(self.budget)}")

    @classmethod
    def _from_v1(cls, d: dict) -> Session:
        budgets = [guarantee_from_dict(b) for b in d["budgets"]]
        entries = [
            (guarantee_from_dict(e["guarantee"]), e.get("label", ""), e.get("mechanism", ""))
            for e in d.get("entries", [])
        ]
        if len(budgets) == 1:  # one budget: every entry was charged to it as is
            s = cls(budgets[0])
            for g, label, mechanism in entries:
                if g.budget_key() != s.budget.budget_key():
                    raise ParameterError(f"entry {label!r} is of another kind than the ledger's budget")
                s._record(g, g, label, mechanism)
            return s
        kinds = "; ".join(_head(b) for b in budgets)
        replace = PureDP(1.0, neighbours=Neighbours.REPLACE_USER)
        spent: Guarantee | None = None
        for g, _, _ in entries:
            try:
                cost = convert_to_budget(g, replace)
                spent = cost if spent is None else spent.compose(cost)
            except BudgetExceededError:
                spent = None
                break
        past = (
            f" The {len(entries)} release(s) it records cost {_head(spent)} in total under replace "
            "one user's data; subtract that from the budget you choose."
            if spent is not None
            else ""
        )
        raise ParameterError(
            f"this ledger was written by an older userdp and keeps separate budgets for {len(budgets)} kinds "
            f"({kinds}). Budgets that never cross-charge do not bound the total privacy loss, so a ledger now "
            "protects one neighbour relation and converts every release into it (add/remove epsilon costs "
            "2 epsilon under replace one user's data). Re-create it with `userdp ledger init FILE --force "
            "--budget replace:EPSILON[:DELTA]` (or add-remove: or local: if every release is of that relation)." + past
        )

    def save(self, path: str | Path) -> None:
        """Write the budget and the ledger to ``path`` atomically (a temporary file, then a rename).

        This does not take the ledger's lock: to update a ledger that other processes may use, call
        :meth:`locked` instead (a plain load, charge and save can lose a concurrent charge).
        """
        path = Path(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=".ledger-")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(self.to_dict(), fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | Path) -> Session:
        """Read a ledger written by :meth:`save` (or ``userdp ledger init``)."""
        try:
            with open(path) as fh:
                return cls.from_dict(json.load(fh))
        except FileNotFoundError:
            raise ParameterError(f"no ledger at {path}; create one with `userdp ledger init`") from None
        except IsADirectoryError:
            raise ParameterError(f"{path} is a folder, not a ledger file") from None
        except UnicodeDecodeError:
            raise ParameterError(f"{path} is not a valid userdp ledger (not text)") from None
        except OSError as exc:
            raise ParameterError(f"cannot read the ledger {path} ({exc.strerror or type(exc).__name__})") from None
        except ParameterError as exc:
            raise ParameterError(f"{path}: {exc}") from None
        except json.JSONDecodeError:
            hint = "create one with `userdp ledger init`"
            raise ParameterError(f"{path} is not a userdp ledger (not JSON); {hint}") from None
        except (AttributeError, KeyError, TypeError, ValueError, BudgetExceededError) as exc:
            raise ParameterError(f"{path} is not a valid userdp ledger: {exc}") from None

    @classmethod
    @contextmanager
    def locked(cls, path: str | Path) -> Iterator[Session]:
        """Update the ledger file ``path`` under an exclusive lock (:func:`ledger_lock`).

        The ledger is re-read once the lock is held, the block charges it, and on a normal exit the
        ledger is saved atomically (only if it changed) before the lock is released. If the block
        raises (for example :class:`BudgetExceededError`), nothing is written. Concurrent processes
        are therefore serialized: each one checks its charge against everything charged before it,
        so together they can never spend more than the budget.

        Examples
        --------
        >>> with Session.locked("budget.json") as s:  # doctest: +SKIP
        ...     s.charge(release.guarantee, "histogram", release.mechanism)
        """
        path = Path(path)
        with ledger_lock(path):
            session = cls.load(path)
            before = session.to_dict()
            yield session
            if session.to_dict() != before:
                session.save(path)

    def run(
        self,
        guarantee: Guarantee,
        fn: Callable[..., Any],
        *args: Any,
        label: str = "",
        losses: Sequence[Any] = (),
        **kwargs: Any,
    ) -> Any:
        """Check that ``guarantee`` (with the stated ``losses``, if any) fits, run ``fn(*args, **kwargs)``, then
        record it with the losses the release states (``Release.losses``).

        ``fn`` must return a :class:`userdp.release.Release` whose guarantee fits within ``guarantee``;
        nothing is recorded (and the value is not returned) if it does not.
        """
        if not self.can_spend(guarantee, losses):
            self.charge(guarantee, label, losses=losses)  # raises with the explanation
        result = fn(*args, **kwargs)
        got = getattr(result, "guarantee", None)
        if got is None or not got.fits_within(guarantee):
            raise BudgetExceededError(f"the mechanism returned {got!r}, which does not fit the declared {guarantee!r}")
        self.charge(got, label, getattr(result, "mechanism", ""), losses=getattr(result, "losses", ()))
        return result
