"""``userdp ledger`` and the ``--ledger`` option of the releasing subcommands: a privacy budget that persists
across command-line runs.

A ledger file holds one or more user-level budgets (``(epsilon, delta)`` under a neighbour relation). Every
release made with ``--ledger FILE`` is charged to it *before anything is printed or written*; a release that
does not fit is refused (exit 2) and the ledger is unchanged. d_EM-DP releases are charged by the user-level
guarantee they imply at the largest distance ``d_EM = 1`` (Imola et al., section 8): the local model under
"any two inputs of one user", the central model under "replace one user's data".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .errors import ParameterError
from .privacy import (
    ApproxDP,
    DiscreteEMDDP,
    EMDMetricDP,
    Guarantee,
    Model,
    Neighbours,
    PureDP,
    Session,
    guarantee_from_dict,
)

_NB = {"add-remove": Neighbours.ADD_REMOVE_USER, "replace": Neighbours.REPLACE_USER, "local": Neighbours.ANY_TWO_INPUTS}


def user_level(g: Guarantee) -> ApproxDP:
    """The user-level DP guarantee a release is charged with."""
    if isinstance(g, ApproxDP):
        return g
    if isinstance(g, EMDMetricDP):
        return g.user_level_dp(1.0)
    if isinstance(g, DiscreteEMDDP):
        eps, delta = g.at_distance(1.0)
        nb = Neighbours.ANY_TWO_INPUTS if g.model is Model.LOCAL else Neighbours.REPLACE_USER
        return ApproxDP(eps, min(delta, 1 - 1e-16), nb) if delta else PureDP(eps, neighbours=nb)
    raise ParameterError(f"cannot charge a guarantee of type {type(g).__name__} to a user-level ledger")


def add_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ledger",
        default=None,
        help="charge the release to this privacy ledger (see `userdp ledger init`); refused if it does not fit",
    )


def check(args: argparse.Namespace) -> None:
    """Fail early (before reading data) if ``--ledger`` names no valid ledger."""
    if getattr(args, "ledger", None):
        Session.load(args.ledger)


def charge(args: argparse.Namespace, guarantee: Guarantee, mechanism: str) -> None:
    """Charge a computed release to ``--ledger`` (if given); raises BudgetExceededError, writing nothing,
    if it does not fit. Call this before printing or writing any released value."""
    if not getattr(args, "ledger", None):
        return
    s = Session.load(args.ledger)
    s.charge(user_level(guarantee), label=args.command, mechanism=mechanism)
    s.save(args.ledger)


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
    return ApproxDP(eps, delta, nb) if delta else PureDP(eps, neighbours=nb)


def cmd_ledger_init(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.exists() and not args.force:
        raise ParameterError(f"{path} exists; pass --force to replace it (its spending would be lost)")
    Session([_budget(b) for b in args.budget]).save(path)
    print(f"created ledger {path}")
    return 0


def _short(g: ApproxDP | None) -> str:
    if g is None:
        return "nothing"
    return f"epsilon {g.epsilon:.6g}" + (f", delta {g.delta:.3g}" if g.delta else "")


def cmd_ledger_show(args: argparse.Namespace) -> int:
    s = Session.load(args.path)
    rows = []
    for b in s.to_dict()["budgets"]:
        g = guarantee_from_dict(b)
        rows.append(
            {
                "neighbours": g.neighbours.value,
                "budget": _short(g),
                "spent": _short(s.spent(g)),
                "left": _short(s.remaining(g)),
            }
        )
    if args.json:
        print(json.dumps({"budgets": rows, "releases": s.to_dict()["entries"]}, indent=1))
    else:
        for r in rows:
            print(f"{r['neighbours']}: budget {r['budget']}; spent {r['spent']}; left {r['left']}")
        print(f"{len(s.ledger)} release(s) charged")
    return 0


def add_parser(sub) -> None:
    le = sub.add_parser("ledger", help="a privacy budget that persists across runs (--ledger FILE)")
    lsub = le.add_subparsers(dest="ledger_command", required=True)
    ini = lsub.add_parser("init", help="create a ledger with one or more user-level budgets")
    ini.add_argument("path")
    ini.add_argument(
        "--budget",
        action="append",
        required=True,
        help="RELATION:EPSILON[:DELTA], RELATION one of add-remove, replace, local (repeatable)",
    )
    ini.add_argument("--force", action="store_true", help="replace an existing ledger")
    ini.set_defaults(func=cmd_ledger_init)
    sh = lsub.add_parser("show", help="budgets, spending and what is left")
    sh.add_argument("path")
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=cmd_ledger_show)
