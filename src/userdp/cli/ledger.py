"""``userdp ledger`` and the ``--ledger`` option of the releasing subcommands: a privacy budget that persists
across command-line runs.

A ledger file protects ONE user-level neighbour relation with one budget: ``(epsilon, delta)`` (``--budget``),
or ``rho``-zCDP (``--budget-rho``). Every release made with ``--ledger FILE`` is converted into that relation
(:func:`userdp.privacy.convert_to_budget`) and charged *before anything is printed or written*; a release that
does not fit, or that implies nothing under the ledger's relation, is refused (exit 2) and the ledger is
unchanged. An ``(epsilon, delta)`` ledger with ``delta > 0`` charges the tight total (privacy loss
distributions, and zCDP for the releases that state it: :class:`userdp.privacy.Session`); a zCDP ledger adds
the ``rho`` the releases state, and refuses, before the data are read, a release that states none. Under
"replace one user's data":
an add/remove ``epsilon`` costs ``2 epsilon`` (and ``delta`` becomes ``(1 + e^epsilon) delta``), a local
``(epsilon, delta)`` costs the same, and a d_EM-DP release costs the user-level guarantee it implies at
``d_EM = 1`` (Imola et al., section 8). Concurrent runs are serialized by an exclusive lock on
``FILE.lock`` (:meth:`userdp.privacy.Session.locked`), so together they cannot overspend.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ParameterError
from ..privacy import (
    ZCDP,
    ZCDP_TV_ALLOWANCE,
    ApproxDP,
    Guarantee,
    Neighbours,
    PureDP,
    Session,
    guarantee_kind,
    guarantee_to_dict,
    ledger_lock,
)
from ..privacy.params import delta_warning
from .messages import warn

_NB = {
    "add-remove": Neighbours.ADD_REMOVE_USER,
    "replace": Neighbours.REPLACE_USER,
    "replace-same-size": Neighbours.REPLACE_USER_SAME_SIZE,
    "local": Neighbours.ANY_TWO_INPUTS,
    "local-same-size": Neighbours.TWO_INPUTS_SAME_SIZE,
}


def add_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ledger",
        default=None,
        help="charge the release to this privacy ledger (see `userdp ledger init`); refused if it does not fit",
    )


def check(args: argparse.Namespace) -> None:
    """Fail early (before reading data) if ``--ledger`` names no valid ledger, or a zCDP ledger that the release
    cannot be charged to (it states no zCDP guarantee, or is of another relation)."""
    if getattr(args, "ledger", None):
        s = Session.load(args.ledger)
        if isinstance(s.budget, ZCDP):
            _check_zcdp(args, s.budget)


def _check_zcdp(args: argparse.Namespace, budget: ZCDP) -> None:
    """Refuse, from the parameters alone, a release a zCDP ledger cannot take: only the Gaussian weighted
    vocabulary release (:func:`userdp.vocabulary.union.stated_losses`) and the Gaussian per-key counts
    (:func:`userdp.vocabulary.counts.stated_key_count_losses`) state a zCDP guarantee, for adding or removing
    one person."""
    from ..vocabulary.union import plan_vocabulary, stated_losses

    what = f"`userdp {args.command}`"
    states = False
    if args.command == "counts":
        from ..vocabulary.counts import plan_key_counts, stated_key_count_losses

        what += f" with --noise {args.noise}"
        if args.noise == "gaussian":
            plan = plan_key_counts(args.epsilon, args.delta or 0.0, bounds=args.bounds, noise=args.noise,
                                   public_keys=args.keys is not None, max_keys=args.max_keys)  # fmt: skip
            states = bool(stated_key_count_losses(plan))
    if args.command == "vocabulary":
        what += f" with --noise {args.noise}" + (f" --algorithm {args.algorithm}" if args.algorithm else "")
        if args.noise == "gaussian" and not args.policy and (args.algorithm or "weighted") == "weighted":
            plan = plan_vocabulary(args.epsilon, args.delta, args.max_items, args.noise, False, args.count_fraction)
            states = bool(stated_losses(plan))
    if not states:
        raise ParameterError(
            f"{args.ledger} is a zCDP budget, and {what} states no zCDP guarantee: only the Gaussian releases do "
            "(`userdp vocabulary` with its default Gaussian weighted union, `userdp counts --noise gaussian`); "
            "charge the others to an (epsilon, delta) ledger (`userdp ledger init FILE --budget "
            "RELATION:EPSILON:DELTA`)"
        )
    if budget.neighbours is not Neighbours.ADD_REMOVE_USER:
        raise ParameterError(
            f"{args.ledger} is a zCDP budget for {budget.neighbours.value}, and {what}'s zCDP "
            "guarantee is for adding or removing one person (zCDP is not converted between relations): use a "
            "ledger made with --budget-rho add-remove:RHO[:DELTA]"
        )


_NOT_PARAMETERS = {"func", "argv", "ledger", "command"}


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """The name and SHA-256 of an input file; of a folder (a partitioned dataset), the SHA-256 over its files'
    relative paths and contents in sorted order. The digest identifies the exact data read: it is the
    curator's record, not a private release."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(q for q in p.rglob("*") if q.is_file()):
            h.update(str(f.relative_to(p)).encode() + b"\0")
            with open(f, "rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    h.update(block)
    else:
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return {"name": str(p), "sha256": h.hexdigest()}


def entry_metadata(args: argparse.Namespace) -> dict[str, Any]:
    """What the ledger records about a command-line release besides its guarantee: the command as typed, the
    input file (name and SHA-256), the time (UTC) and the parameters."""
    params = {
        k: (v if isinstance(v, (str, int, float, bool)) or v is None else str(v))
        for k, v in sorted(vars(args).items())
        if k not in _NOT_PARAMETERS
    }
    meta: dict[str, Any] = {
        "command": shlex.join(["userdp", *getattr(args, "argv", [])]),
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "parameters": params,
    }
    source = getattr(args, "input", None) or getattr(args, "file", None)
    if source is not None:
        try:
            meta["input"] = file_fingerprint(source)
        except OSError as exc:
            raise ParameterError(f"cannot read {source} to record it in the ledger ({exc.strerror})") from None
    return meta


def charge(args: argparse.Namespace, guarantee: Guarantee, mechanism: str, losses: tuple = ()) -> None:
    """Charge a computed release to ``--ledger`` (if given): under the ledger's lock, re-read it, convert the
    guarantee into its relation, check, record (with :func:`entry_metadata`) and save atomically. Raises
    BudgetExceededError, writing nothing, if it does not fit. Call this before printing or writing any
    released value. ``losses`` are the privacy losses the release states (``Release.losses``)."""
    if not getattr(args, "ledger", None):
        return
    meta = entry_metadata(args)  # the input is hashed before the lock is taken
    with Session.locked(args.ledger) as s:
        s.charge(guarantee, label=args.command, mechanism=mechanism, metadata=meta, losses=losses)


def _budget(text: str) -> ApproxDP:
    parts = text.split(":")
    if len(parts) not in (2, 3) or parts[0] not in _NB:
        raise ParameterError(f"--budget needs RELATION:EPSILON[:DELTA] with RELATION in {sorted(_NB)}, got {text!r}")
    try:
        eps = float(parts[1])
        delta = float(parts[2]) if len(parts) == 3 else 0.0
    except ValueError:
        raise ParameterError(f"--budget needs numbers, got {text!r}") from None
    nb = _NB[parts[0]]
    budget = ApproxDP(eps, delta, nb) if delta else PureDP(eps, neighbours=nb)  # checks delta in [0, 1)
    note = delta_warning(delta)
    if note is not None:  # a budget's delta above 1/1,000 is as meaningless as a release's
        warn(f"the budget's {note}")
    return budget


def _budget_rho(text: str) -> ZCDP:
    parts = text.split(":")
    if len(parts) not in (2, 3) or parts[0] not in _NB:
        raise ParameterError(f"--budget-rho needs RELATION:RHO[:DELTA] with RELATION in {sorted(_NB)}, got {text!r}")
    try:
        rho = float(parts[1])
        delta = float(parts[2]) if len(parts) == 3 else 0.0
    except ValueError:
        raise ParameterError(f"--budget-rho needs numbers, got {text!r}") from None
    budget = ZCDP(rho, delta, _NB[parts[0]], ZCDP_TV_ALLOWANCE)  # checks rho > 0 and delta in [0, 1)
    note = delta_warning(delta)
    if note is not None:
        warn(f"the budget's {note}")
    return budget


def cmd_ledger_init(args: argparse.Namespace) -> int:
    budgets = list(args.budget or []) + list(args.budget_rho or [])
    if not budgets:
        raise ParameterError(
            "a ledger needs a budget: --budget RELATION:EPSILON[:DELTA] (or a zCDP budget, --budget-rho "
            "RELATION:RHO[:DELTA])"
        )
    if len(budgets) != 1:
        raise ParameterError(
            f"a ledger protects one neighbour relation: pass --budget or --budget-rho once (got {len(budgets)}). "
            "Releases under "
            "other relations are converted into it; `replace` accepts every user-level release (an add/remove "
            "epsilon costs 2 epsilon, a local epsilon costs epsilon)"
        )
    budget = _budget(args.budget[0]) if args.budget else _budget_rho(args.budget_rho[0])
    path = Path(args.path)
    with ledger_lock(path):  # not while another run is charging the ledger this replaces
        if path.exists() and not args.force:
            raise ParameterError(f"{path} exists; pass --force to replace it (its spending would be lost)")
        Session(budget).save(path)
    print(f"created ledger {path}")
    return 0


def _short(g: Guarantee | None) -> str:
    if g is None:
        return "nothing"
    if isinstance(g, ZCDP):
        return f"rho {g.rho:.6g}" + (f", delta {g.delta:.3g}" if g.delta else "")
    main = f"epsilon {g.epsilon:.6g}" if hasattr(g, "epsilon") else f"alpha {g.alpha:.6g}"  # type: ignore[attr-defined]
    delta = g.delta  # type: ignore[attr-defined]
    return main + (f", delta {delta:.3g}" if delta else "")


def cmd_ledger_show(args: argparse.Namespace) -> int:
    s = Session.load(args.path)
    releases = [
        {
            "label": e.label,
            "mechanism": e.mechanism,
            "guarantee": guarantee_to_dict(e.guarantee),
            "delivers": e.guarantee.describe().split(":")[0],
            "cost": guarantee_to_dict(e.cost),
            "costs": _short(e.cost),
            **e.metadata,
        }
        for e in s.ledger
    ]
    tight = s.tight_spent() if s.ledger else None
    basic = s.basic_spent() if s.ledger else None
    rho = _stated_rho(s)
    tight_budget = isinstance(s.budget, ApproxDP) and s.budget.delta > 0
    if tight_budget and tight is not None:  # what is charged: the tight total
        spent = f"epsilon {tight[0]:.6g} at delta {tight[1]:.3g} (tight composition)"
        room = s.budget.epsilon - tight[0]  # type: ignore[attr-defined]
        left = f"epsilon {room:.6g} at delta {tight[1]:.3g}" if room > 1e-12 * s.budget.epsilon else "nothing"  # type: ignore[attr-defined]
    else:
        spent, left = _short(s.spent()), _short(s.remaining())
    summary = {
        "protects": guarantee_kind(s.budget),
        "budget": _short(s.budget),
        "charged by": "the tight total (privacy loss distributions; zCDP where stated)"
        if tight_budget
        else "rho (zCDP composition)"
        if isinstance(s.budget, ZCDP)
        else "basic composition",
        "spent": spent,
        "left": left,
    }
    if tight is not None:
        summary["spent, tight composition"] = f"epsilon {tight[0]:.6g} at delta {tight[1]:.3g}"
    if basic is not None:
        summary["spent, basic composition"] = f"epsilon {basic[0]:.6g}, delta {basic[1]:.3g}"
    if rho is not None:
        summary["spent, zCDP"] = rho
    if args.json:
        print(json.dumps({**summary, "releases": releases}, indent=1))
    else:
        print(f"protects {summary['protects']}: budget {summary['budget']}; spent {summary['spent']}; "
              f"left {summary['left']}")  # fmt: skip
        totals = [f"{k.split(', ')[1]} {v}" for k, v in summary.items() if k.startswith("spent, ")]
        if totals:
            print(f"totals: {'; '.join(totals)}; the budget is charged by {summary['charged by']}")
        print(f"{len(releases)} release(s) charged")
        for r in releases:
            name = r["label"] + (f" ({r['mechanism']})" if r["mechanism"] else "")
            print(f"  {name}: delivers {r['delivers']}; costs {r['costs']}")
            if "time" in r:
                print(f"    at {r['time']}: {r['command']}")
            if "input" in r:
                print(f"    input {r['input']['name']} (sha256 {r['input']['sha256']})")
    return 0


def _stated_rho(s: Session) -> str | None:
    """The zCDP total in words, where every release states a zCDP guarantee in the ledger's relation: ``rho``,
    the approximate ``delta``, and the ``(epsilon, delta)`` it implies (Canonne, Kamath & Steinke 2020, Corollary
    13) at the budget's delta (a zCDP budget: its spent delta plus 1e-6)."""
    from ..privacy.composition import ZCDPLoss, _pure_epsilon, _zcdp_group_epsilon

    if not s.ledger:
        return None
    rho = delta = tv = 0.0
    for e in s.ledger:
        if not (e.losses and (e.cost == e.guarantee or isinstance(e.cost, ZCDP))):
            return None
        if not any(isinstance(x, ZCDPLoss) for x in e.losses):
            return None
        for x in e.losses:
            if isinstance(x, ZCDPLoss):
                rho, delta, tv = rho + x.rho, delta + x.delta, tv + x.tv
            elif _pure_epsilon(x) is not None:
                rho += _pure_epsilon(x) ** 2 / 2
            else:
                return None
    at = float(s.budget.delta) if isinstance(s.budget, ApproxDP) and s.budget.delta > 0 else delta + 1e-6  # type: ignore[attr-defined]
    eps = _zcdp_group_epsilon(rho, delta, tv, at)
    return f"rho {rho:.6g}" + (f", delta {delta:.3g}" if delta else "") + f": epsilon {eps:.6g} at delta {at:.3g}"


def add_parser(sub) -> None:
    le = sub.add_parser("ledger", help="a privacy budget that persists across runs (--ledger FILE)")
    lsub = le.add_subparsers(dest="ledger_command", required=True)
    ini = lsub.add_parser(
        "init",
        help="create a ledger with one user-level budget",
        epilog="example:\n  userdp ledger init budget.json --budget replace:4:1e-6",
    )
    ini.add_argument("path", help="the ledger file to create (JSON)")
    ini.add_argument(
        "--budget",
        action="append",
        default=None,
        help="RELATION:EPSILON[:DELTA], RELATION one of add-remove, replace, replace-same-size, local, "
        "local-same-size; exactly one: every release is converted into this relation (replace-same-size accepts all "
        "of them, replace all but bounded d_EM-DP releases, which protect only data of the same size)",
    )
    ini.add_argument(
        "--budget-rho",
        action="append",
        default=None,
        help="RELATION:RHO[:DELTA], a zCDP budget instead of --budget (DELTA-approximately RHO-zCDP): it accepts "
        "only releases that state a zCDP guarantee of that relation (add-remove: vocabulary with Gaussian noise, "
        "counts --noise gaussian), and charges the sum of their rho (and of their deltas)",
    )
    ini.add_argument("--force", action="store_true", help="replace an existing ledger")
    ini.set_defaults(func=cmd_ledger_init)
    sh = lsub.add_parser(
        "show",
        help="the budget, spending, what is left, and each release's cost",
        epilog="example:\n  userdp ledger show budget.json",
    )
    sh.add_argument("path", help="the ledger file")
    sh.add_argument("--json", action="store_true", help="print the ledger as one JSON object")
    sh.set_defaults(func=cmd_ledger_show)
