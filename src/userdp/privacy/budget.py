"""A privacy budget that records releases, composes them and refuses overspending.

A :class:`Session` protects ONE kind of guarantee (for example ``(epsilon, delta)``-DP for replace one
user's data). Every release is converted into that kind by
:func:`~userdp.privacy.guarantees.convert_to_budget` before it is charged. A ledger file shared by
several processes (the CLI's ``--ledger``) is updated under an exclusive lock (:meth:`Session.locked`).
"""

from __future__ import annotations

import dataclasses
import json
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

LEDGER_FORMAT = "userdp-ledger/2"

_KINDS: dict[str, type] = {
    c.__name__: c for c in (PureDP, ApproxDP, ShuffleDP, ItemMetricDP, EMDMetricDP, DiscreteEMDDP)
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
    is refused with the reason. Costs compose by basic composition (epsilons or alphas add, deltas add).
    A release that would overspend is refused *before* it is computed (:meth:`run`).

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

    def cost(self, g: Guarantee) -> Guarantee:
        """What a release with guarantee ``g`` costs in this session's budget (raises
        :class:`BudgetExceededError` if it cannot be charged to it at all)."""
        return convert_to_budget(g, self.budget)

    def spent(self) -> Guarantee | None:
        """Total spent so far, in the budget's kind (``None`` if nothing)."""
        return self._spent

    def remaining(self) -> Guarantee | None:
        """What is left of the budget (``None`` if it is used up)."""
        budget, spent = self.budget, self._spent
        if spent is None:
            return budget
        main = _main(budget) - _main(spent)
        if main <= 1e-12 * _main(budget):
            return None
        delta = max(budget.delta - spent.delta, 0.0)  # type: ignore[attr-defined]
        if isinstance(budget, ApproxDP):
            return ApproxDP(main, delta, budget.neighbours) if delta else PureDP(main, neighbours=budget.neighbours)
        field = "epsilon" if hasattr(budget, "epsilon") else "alpha"
        extra = {"curve": None} if isinstance(budget, EMDMetricDP) else {}
        return dataclasses.replace(budget, **{field: main, "delta": delta}, **extra)

    def _total_with(self, cost: Guarantee) -> Guarantee:
        return cost if self._spent is None else self._spent.compose(cost)

    def can_spend(self, g: Guarantee) -> bool:
        """True if a release with guarantee ``g`` fits in what is left."""
        try:
            return self._total_with(self.cost(g)).fits_within(self.budget)
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
        privacy loss more exactly than ``g``, for :meth:`tight_spent`; they are used only when ``g`` needs no
        conversion into the budget's relation and they imply ``g``."""
        losses = tuple(losses)
        if losses:
            from .composition import basic_epsilon

            eps, delta = basic_epsilon(losses)
            if eps > g.epsilon * (1 + 1e-12) or delta > getattr(g, "delta", 0.0) * (1 + 1e-12):  # type: ignore[attr-defined]
                raise ParameterError("the stated privacy losses imply more than the release's guarantee")
        self._record(g, self.cost(g), label, mechanism, metadata, losses)

    def tight_spent(self, delta: float | None = None) -> tuple[float, float] | None:
        """The epsilon spent by tight composition (privacy loss distributions,
        :func:`userdp.privacy.composition.tight_epsilon`) at ``delta`` (default: the budget's delta), never more
        than basic composition's. ``None`` for a budget that is
        not ``(epsilon, delta)``-DP, or one with ``delta = 0`` and no ``delta`` given (pure releases then
        compose exactly additively). Returns ``(tight epsilon, delta)``.

        Charging still uses basic composition: a release is refused when the epsilons add up past the budget,
        even where the tight total would admit it."""
        from .composition import DPLoss, tight_epsilon

        if not isinstance(self.budget, PureDP | ApproxDP):
            return None
        d = float(getattr(self.budget, "delta", 0.0)) if delta is None else float(delta)
        if d <= 0:
            return None
        losses = []
        for e in self.ledger:
            if e.losses and e.cost == e.guarantee:
                losses += list(e.losses)
            else:
                losses.append(DPLoss(float(e.cost.epsilon), float(getattr(e.cost, "delta", 0.0))))  # type: ignore[attr-defined]
        return tight_epsilon(losses, d), d

    def _record(
        self,
        g: Guarantee,
        cost: Guarantee,
        label: str,
        mechanism: str,
        metadata: dict | None = None,
        losses: tuple = (),
    ) -> None:
        total = self._total_with(cost)
        if not total.fits_within(self.budget):
            converted = "" if cost is g else f" (it delivers {_head(g)})"
            raise BudgetExceededError(
                f"release {label!r} costs {_head(cost)}{converted}; with what is already spent "
                f"the total would be {_head(total)}, over the budget {_head(self.budget)}"
            )
        self._spent = total
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
        if fmt != LEDGER_FORMAT:
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
            s._record(g, cost, e.get("label", ""), e.get("mechanism", ""), meta, losses)
        return s

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
