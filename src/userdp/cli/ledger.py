"""``userdp ledger`` and the ``--ledger`` option of the releasing subcommands: a privacy budget that persists
across command-line runs.

A ledger file protects ONE user-level neighbour relation with one budget ``(epsilon, delta)``. Every release
made with ``--ledger FILE`` is converted into that relation (:func:`userdp.privacy.convert_to_budget`) and
charged *before anything is printed or written*; a release that does not fit, or that implies nothing under
the ledger's relation, is refused (exit 2) and the ledger is unchanged. Under "replace one user's data":
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
from ..privacy import ApproxDP, Guarantee, Neighbours, PureDP, Session, guarantee_kind, guarantee_to_dict, ledger_lock
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
    """Fail early (before reading data) if ``--ledger`` names no valid ledger."""
    if getattr(args, "ledger", None):
        Session.load(args.ledger)


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


def charge(args: argparse.Namespace, guarantee: Guarantee, mechanism: str) -> None:
    """Charge a computed release to ``--ledger`` (if given): under the ledger's lock, re-read it, convert the
    guarantee into its relation, check, record (with :func:`entry_metadata`) and save atomically. Raises
    BudgetExceededError, writing nothing, if it does not fit. Call this before printing or writing any
    released value."""
    if not getattr(args, "ledger", None):
        return
    meta = entry_metadata(args)  # the input is hashed before the lock is taken
    with Session.locked(args.ledger) as s:
        s.charge(guarantee, label=args.command, mechanism=mechanism, metadata=meta)


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


def cmd_ledger_init(args: argparse.Namespace) -> int:
    if len(args.budget) != 1:
        raise ParameterError(
            f"a ledger protects one neighbour relation: pass --budget once (got {len(args.budget)}). Releases under "
            "other relations are converted into it; `replace` accepts every user-level release (an add/remove "
            "epsilon costs 2 epsilon, a local epsilon costs epsilon)"
        )
    budget = _budget(args.budget[0])
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
    summary = {
        "protects": guarantee_kind(s.budget),
        "budget": _short(s.budget),
        "spent": _short(s.spent()),
        "left": _short(s.remaining()),
    }
    tight = s.tight_spent() if s.ledger else None
    if tight is not None:
        summary["spent, tight composition"] = f"epsilon {tight[0]:.6g} at delta {tight[1]:.3g}"
    if args.json:
        print(json.dumps({**summary, "releases": releases}, indent=1))
    else:
        print(f"protects {summary['protects']}: budget {summary['budget']}; spent {summary['spent']}; "
              f"left {summary['left']}")  # fmt: skip
        if tight is not None:
            print(f"by tight composition (privacy loss distributions, dp-accounting): epsilon {tight[0]:.6g} at "
                  f"delta {tight[1]:.3g}; the budget is charged by basic composition")  # fmt: skip
        print(f"{len(releases)} release(s) charged")
        for r in releases:
            name = r["label"] + (f" ({r['mechanism']})" if r["mechanism"] else "")
            print(f"  {name}: delivers {r['delivers']}; costs {r['costs']}")
            if "time" in r:
                print(f"    at {r['time']}: {r['command']}")
            if "input" in r:
                print(f"    input {r['input']['name']} (sha256 {r['input']['sha256']})")
    return 0


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
        required=True,
        help="RELATION:EPSILON[:DELTA], RELATION one of add-remove, replace, replace-same-size, local, "
        "local-same-size; exactly one: every release is converted into this relation (replace-same-size accepts all "
        "of them, replace all but bounded d_EM-DP releases, which protect only data of the same size)",
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
