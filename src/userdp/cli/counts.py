"""``userdp counts``: noisy records per key, with the contribution bounds chosen privately by GEM
(:func:`userdp.releases.key_counts`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import releases
from ..errors import ParameterError
from .common import (
    DELTA,
    EPSILON,
    MAX_ITEMS,
    add_input,
    add_release_options,
    charge_and_write_csv,
    engine_of,
    number,
    report,
    source_of,
    warn_seed,
)
from .vocabulary import _by_count, _check_out


def bounds_pair(text: str) -> tuple[int, int]:
    """``L0,LINF`` (or ``L0xLINF``) as two whole numbers, for argparse."""
    try:
        l0, linf = (int(p) for p in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected L0,LINF (e.g. 8,4), got {text!r}") from None
    return l0, linf


def _bounds(text: str) -> str | tuple[int, int]:
    return "auto" if text == "auto" else bounds_pair(text)


def _public_keys(path: str | None) -> list[str] | None:
    if path is None:
        return None
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ParameterError(f"cannot read --keys {path} ({exc.strerror or type(exc).__name__})") from None
    keys = [k.strip() for k in lines if k.strip()]
    if not keys:
        raise ParameterError(f"--keys {path} lists no key (one per line)")
    return keys


def cmd_counts(args: argparse.Namespace) -> int:
    out = _check_out(args)  # before the data is read: a bad --out spends nothing
    keys = _public_keys(args.keys)
    rel = releases.key_counts(
        source_of(args),
        args.epsilon,
        args.delta or 0.0,
        user=args.user,
        key=args.key,
        tokenize=args.tokenize,
        keys=keys,
        bounds=args.bounds,
        noise=args.noise,
        max_keys=args.max_keys,
        engine=engine_of(args),
        rng=args.seed,
    )
    labels, counts = rel.value["keys"], rel.value["counts"]
    rows = ([label, f"{counts[i]:.6g}"] for i, label in enumerate(labels))
    charge_and_write_csv(args, rel, out, ["key", "count"], rows)  # written under a temporary name, charged, moved
    shown = min(len(labels), args.show)
    result = {
        "keys_released": int(len(labels)),
        "keys": rel.params["keys"],
        "bounds": f"L0 = {rel.value['l0']} keys per person, Linf = {rel.value['linf']} records per key "
        f"({rel.params['bounds']})",
        **({"max_keys": f"{rel.params['max_keys']} keys per person for the selection ("
            + (f"chosen privately with epsilon {rel.params['epsilon_max_keys']:.4g})" if rel.params["max_keys_chosen"]
               else "given)")} if rel.params["max_keys"] is not None else {}),
        "epsilon": args.epsilon,
        "delta": args.delta or 0.0,
        "noise": args.noise,
        "engine": args.engine,
        "guarantee": rel.guarantee.describe(),
        "error": rel.error.description,
        f"top {shown} keys by released count": [f"{labels[i]} ({counts[i]:.0f})" for i in _by_count(counts, shown)],
        **({"written": str(out)} if out is not None else {}),
    }
    warn_seed(args, result)
    report(args, "person-level DP records per key (contribution bounds by GEM)", result)
    return 0


def add_parser(sub) -> None:
    co = sub.add_parser(
        "counts",
        help="noisy records per key, each person's contribution bounded by privately chosen bounds",
        epilog="example:\n  userdp counts checkins.csv --user user --key venue_id --epsilon 1 --delta 1e-6 "
        "--bounds auto --out venues.csv",
    )
    add_input(co)
    co.add_argument("--user", required=True, help="person column")
    co.add_argument("--key", required=True, help="key column (venue, category, word)")
    co.add_argument("--tokenize", action="store_true", help="split the key column into lower-cased words")
    co.add_argument("--epsilon", type=EPSILON, required=True, help="the privacy parameter (add or remove one person)")
    co.add_argument(
        "--delta",
        type=DELTA,
        default=None,
        help="needed when the keys come from the data (no --keys) or with --noise gaussian (e.g. 1e-6; less than 1; "
        "above 1e-3 it warns)",
    )
    co.add_argument(
        "--keys", default=None, help="a text file of the PUBLIC keys to count, one per line (else: selected privately)"
    )
    co.add_argument(
        "--bounds",
        type=_bounds,
        default="auto",
        help="'auto' (GEM over L0, Linf in 1, 2, 4, ..., 256) or L0,LINF: keys per person, records per key",
    )
    co.add_argument("--noise", choices=["laplace", "gaussian"], default="laplace", help="the counts' noise")
    co.add_argument(
        "--max-keys",
        type=MAX_ITEMS,
        default="auto",
        help="without --keys: the most keys one person contributes to the key selection. auto (the default): "
        "chosen privately from the persons' numbers of distinct keys (a 90%% quantile on the grid 1, 2, 4, ..., "
        "8192, with 2%% of the selection's epsilon, stated in the output); or a whole number in [1, 10000], "
        "spending nothing on the choice",
    )
    co.add_argument("--show", type=number(int, 0, 10**6), default=20, help="how many keys to print")
    co.add_argument("--out", default=None, help="write every key and its count to this CSV file")
    co.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    add_release_options(co)
    co.set_defaults(func=cmd_counts)
