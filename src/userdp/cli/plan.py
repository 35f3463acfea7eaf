"""``userdp plan``: the predicted error of a release from its public parameters, or the smallest epsilon
for a target (:mod:`userdp.plan`). Reads no data."""

from __future__ import annotations

import argparse

from .. import plan
from ..errors import ParameterError
from ..plan.aggregate import DELTA_METHOD_LIMIT
from .aggregate import domain_arg, range_pair
from .common import DELTA, EPSILON, MAX_ITEMS, PROBABILITY, number, report
from .counts import _bounds


def _parameter(args: argparse.Namespace, name: str) -> None:
    """Exactly one of ``--<name>`` (predict the error at it) and ``--target`` (the smallest one reaching it)."""
    given = getattr(args, name) is not None
    if given and args.target is not None:
        raise ParameterError(f"pass --{name} (the error it gives) or --target (the {name} it needs), not both")
    if not given and args.target is None:
        raise ParameterError(f"pass --{name} (the error it gives) or --target (the {name} it needs)")


def _need(args: argparse.Namespace, *names: str) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is None]
    if missing:
        raise ParameterError(f"plan {args.release} needs {', '.join(missing)} (public estimates)")


def _errors(p: plan.Prediction, conf: float, at: str, unit: float = 1.0, suffix: str = "") -> dict:
    return {
        "median error": f"{p.median * unit:.4g}{suffix}",
        f"error at confidence {conf:g}": f"{p.quantiles[conf] * unit:.4g}{suffix}",
        "in words": f"at {at}: {p.quantity} is at most {p.quantiles[conf] * unit:.4g}{suffix} "
        f"with probability {conf:g}",
        "basis": p.basis,
    }


def _predict(
    args, name: str, forward, inverse, kw: dict, conf: float, unit: float = 1.0
) -> tuple[float, plan.Prediction, dict]:
    """The prediction at ``--<name>``, or at the smallest value reaching ``--target`` (then reported too;
    ``--target`` is in ``unit``s of the prediction's own)."""
    _parameter(args, name)
    out: dict = {}
    at = getattr(args, name)
    if args.target is not None:
        at = out[f"smallest {name}"] = inverse(args.target / unit, conf, **kw)
    return at, forward(at, confidence=conf, **kw), out


def _counts(args, conf, delta) -> dict:
    _parameter(args, "epsilon")
    if args.bounds == "auto":
        raise ParameterError("plan counts needs the bounds the counts will use: --bounds L0,LINF (e.g. 8,4)")
    l0, linf = args.bounds
    kw = {"l0": l0, "linf": linf, "n_keys": args.keys, "noise": args.noise}
    out: dict = {}
    eps = args.epsilon
    if args.target is not None:
        eps = out["smallest epsilon"] = plan.key_counts_epsilon(args.target, conf, delta, **kw)
    p = plan.key_counts(eps, delta, confidence=conf, **kw)
    out.update({
        "at epsilon": eps,
        "median error": p.median,
        f"error at confidence {conf:g}": p.quantiles[conf],
        "in words": f"at epsilon {eps:.3g}: {p.sentence(conf)}",
        "basis": p.basis + "; records beyond the bounds are dropped too (a bias the data decide)",
    })  # fmt: skip
    return out


def _held_by(weight: float) -> str:
    if weight == float("inf"):
        return "never, however many persons hold it (the policy stops an item's weight at its cutoff)"
    return f"an item held by {weight:.3g} persons (one item each)"


def _vocabulary(args, conf, delta) -> dict:
    _parameter(args, "epsilon")
    kw = {"max_items": args.max_items, "noise": args.noise, "count_fraction": args.count_fraction,
          "algorithm": args.algorithm, "rounds": args.rounds, "ratio": args.ratio}  # fmt: skip
    if not delta:
        raise ParameterError("a vocabulary needs --delta (e.g. 1e-6)")
    out: dict = {}
    eps = args.epsilon
    if args.target is not None:
        eps = out["smallest epsilon"] = plan.vocabulary_epsilon(int(args.target), conf, delta, **kw)
    p = plan.vocabulary(eps, delta, persons=args.persons, confidence=conf, **kw)
    need = p.extra["weight needed"]
    new = p.extra["new item released at most"]
    held = {}
    if args.persons:
        held[f"an item held by {args.persons} persons"] = (
            f"released with probability {p.extra['release probability']:.3g}"
        )
    rounds = {}
    if p.extra["algorithm"] == "sips":
        rounds["rounds"] = (f"{p.extra['rounds']} (ratio {p.extra['ratio']:g}): thresholds "
                            + ", ".join(f"{t:.4g}" for t in p.extra["threshold"]) + " persons' weight, noise sd "
                            + ", ".join(f"{x:.3g}" for x in p.extra["noise_sd"]))  # fmt: skip
    out.update({
        "at epsilon": eps,
        "algorithm": p.extra["algorithm"],
        **rounds,
        "released with probability 1/2": _held_by(need[0.5]),
        f"released with probability {conf:g}": _held_by(need[conf]),
        "an item only one person holds": f"released with probability at most {new:.3g}",
        **held,
        **({f"count error at confidence {conf:g}": p.quantiles[conf]} if p.quantiles else {}),
        **({"max_items": p.extra["max_items"]} if args.max_items == "auto" else {}),
        "basis": p.basis,
    })  # fmt: skip
    return out


def _distinct(args, conf, delta) -> dict:
    _need(args, "persons", "distinct", "items_per_person")
    kw = {"beta": args.beta, "l_max": args.l_max, "persons": args.persons, "distinct": args.distinct,
          "items_per_person": args.items_per_person, "zipf": args.zipf, "spread": args.spread,
          "max_items": args.max_items_bound, "selection": args.selection}  # fmt: skip
    eps, p, out = _predict(args, "epsilon", plan.distinct, plan.distinct_epsilon, kw, conf)
    rel = p.extra["relative"]
    out.update({"at epsilon": eps, **_errors(p, conf, f"epsilon {eps:.3g}")})
    out["relative error"] = f"median {100 * rel[0.5]:.2f}%, {100 * rel[conf]:.2f}% with probability {conf:g}"
    if "theorem bound" in p.extra:
        out["Theorem 1.1 / Eq. (8) bound"] = (
            f"{p.extra['theorem bound']:.4g} with probability {p.extra['theorem confidence']:g} (any data with at "
            f"most {args.max_items_bound} elements per person)"
        )
        out["Theorem 1.2 / Eq. (10) bound, --method greedy"] = (
            f"{p.extra['greedy bound']:.4g} with probability {p.extra['theorem confidence']:g} (DC(D) / 2 plus "
            "the Eq. (8) bound: the greedy count's worst case)"
        )
    out["Theorem 1.1 / Eq. (7) bound"] = (
        f"{p.extra['general bound']:.4g} with probability {p.extra['general confidence']:g} (on the simulated count "
        "curves: the largest)"
    )
    return out


def _linear(args, conf, delta) -> dict:
    _need(args, "persons")
    kw = {"persons": args.persons, "lipschitz": args.lipschitz, "dim": args.dim, "model": args.model,
          "delta": args.delta, "samples": args.samples, "r": args.r}  # fmt: skip
    alpha, p, out = _predict(args, "alpha", plan.linear, plan.linear_alpha, kw, conf, args.unit)
    suffix = f" {args.unit_name}" if args.unit_name else ""
    out.update({"at alpha": alpha, **_errors(p, conf, f"alpha {alpha:.3g}", args.unit, suffix)})
    return out


def _frequency(args, conf, delta) -> dict:
    kw = {"persons": args.persons, "items_per_person": args.items_per_person, "delta": args.delta,
          "model": args.model}  # fmt: skip
    if args.distances is not None:  # any finite metric: the exponential randomizer
        from ..releases import metric_domain_from_table

        _need(args, "persons", "items_per_person")
        kw["space"] = metric_domain_from_table(args.distances)[0]
    else:
        _need(args, "persons", "items_per_person", "clusters", "cluster_size")
        kw.update(clusters=args.clusters, cluster_size=args.cluster_size, r=args.r)
    kw["items_per_person"] = int(kw["items_per_person"])
    alpha, p, out = _predict(args, "alpha", plan.frequency, plan.frequency_alpha, kw, conf)
    out.update({"at alpha": alpha, **_errors(p, conf, f"alpha {alpha:.3g}")})
    if p.extra["theorem eq8"] is not None:
        out["Theorem 6.5, Eq. (8) (expectation bound, this randomizer)"] = f"{p.extra['theorem eq8']:.4g}"
    if p.extra["theorem"] is not None:
        out["Theorem 6.6 / Corollary 6.8, Eq. (9) (expectation bound, GKRR)"] = f"{p.extra['theorem']:.4g}"
    return out


def _heatmap(args, conf, delta) -> dict:
    _need(args, "persons", "points_per_person")
    kw = {"shape": args.shape, "persons": args.persons, "points_per_person": args.points_per_person,
          "algorithm": args.algorithm, "clusters": args.clusters, "places": args.places}  # fmt: skip
    eps, p, out = _predict(args, "epsilon", plan.heatmap, plan.heatmap_epsilon, kw, conf)
    out.update({"at epsilon": eps, **_errors(p, conf, f"epsilon {eps:.3g}")})
    out["Theorem 3.1 (order only)"] = f"sqrt(w) / (epsilon n) = {p.extra['theorem order']:.3g}"
    return out


def _aggregate(args, conf, delta) -> dict:
    if args.target is not None:
        raise ParameterError("plan aggregate predicts the error at --epsilon; --target is not supported for it")
    if args.epsilon is None:
        raise ParameterError("plan aggregate needs --epsilon (the error it gives)")
    _need(args, "persons")
    stats = args.stat or ["mean"]
    p = plan.aggregate(args.epsilon, delta, persons=args.persons, records_per_person=args.records_per_person,
                       keys_per_person=args.keys_per_person, stats=stats, n_keys=args.keys,
                       public_keys=not args.selected_keys, value_range=args.range, value_domain=args.domain,
                       bounds=args.bounds, value_mean=args.value_mean, value_sd=args.value_sd, beta=args.beta,
                       confidence=conf)  # fmt: skip
    lo, hi = p.value_range
    out: dict = {
        "at epsilon": args.epsilon,
        "budget split": {k: float(f"{v:.4g}") for k, v in p.budget.items() if k not in ("epsilon", "delta") and v},
        "bounds": f"L0 = {p.bounds[0]} keys per person, Linf = {p.bounds[1]} records per key ({p.bounds_basis})",
        "value range": f"[{lo:g}, {hi:g}] ({p.range_basis})",
        "records per key": f"{p.records:g} kept ({args.persons:g} persons x "
        f"{min(args.records_per_person, p.bounds[1]):g} records each)",
    }
    for name, pred in p.stats.items():
        if name.startswith("quantile:"):
            rank, frac = pred.quantiles[1 - args.beta], pred.extra["rank fraction"]
            out[name] = (f"within {rank:.4g} records ({frac:.3g} of the key's) of a true {name[9:]}-quantile with "
                         f"probability {1 - args.beta:g} ({pred.basis})")  # fmt: skip
        else:
            out[name] = (f"noise sd {pred.extra['sd']:.4g}; |noise| median {pred.median:.4g}, at most "
                         f"{pred.quantiles[conf]:.4g} with probability {conf:g} ({pred.basis})")  # fmt: skip
    limit = f"{100 * DELTA_METHOD_LIMIT:g}%"
    out["noise sd per key"] = {n: float(f"{x.extra['sd']:.4g}") for n, x in p.stats.items() if "sd" in x.extra}
    out["delta method"] = (
        f"valid: the count's noise sd is at most {limit} of the records per key" if p.valid else
        f"NOT valid: the count's noise sd exceeds {limit} of the records per key; the mean and the variance are "
        "mostly noise and the release's clamps (the quantiles include them)")  # fmt: skip
    out["not predicted"] = "; ".join(p.notes) + (
        "; the error above is the noise alone: the clipping and bounding bias is zero only when the given bounds "
        "and range hold every record (--bounds L0,LINF and --range LO,HI)"
    )
    return out


_PLANS = {"aggregate": _aggregate, "counts": _counts, "vocabulary": _vocabulary, "distinct": _distinct,
          "linear": _linear, "frequency": _frequency, "heatmap": _heatmap}  # fmt: skip


def cmd_plan(args: argparse.Namespace) -> int:
    out = _PLANS[args.release](args, args.confidence, args.delta or 0.0)
    report(args, f"plan: {args.release} (predicted from public parameters; no data read)", out)
    return 0


def _shape(text: str) -> tuple[int, int]:
    """``ROWSxCOLS`` as ``userdp heatmap --grid`` takes it (``ROWS,COLS`` and ``N`` for N x N are kept)."""
    parts = text.lower().replace(" ", "").replace("x", ",").split(",")
    if len(parts) == 1:
        parts = parts * 2
    try:
        rows, cols = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a grid is ROWSxCOLS such as 300x200 (or N), got {text!r}") from None
    if len(parts) != 2 or not (1 <= rows <= 4096 and 1 <= cols <= 4096):
        raise argparse.ArgumentTypeError(f"a grid is ROWSxCOLS (each 1..4096) or N, got {text!r}")
    return rows, cols


def add_parser(sub) -> None:
    pl = sub.add_parser(
        "plan",
        help="the predicted error of a release, or the epsilon a target needs (reads no data)",
        epilog="examples:\n  userdp plan counts --epsilon 1 --bounds 8,4 --keys 251\n"
        "  userdp plan counts --target 50 --confidence 0.9 --bounds 8,4\n"
        "  userdp plan aggregate --epsilon 1 --stat mean --persons 100 --records-per-person 1 --keys 31 --range 1,5\n"
        "  userdp plan vocabulary --epsilon 1 --delta 1e-6 --persons 40\n"
        "  userdp plan vocabulary --epsilon 1 --delta 1e-6 --persons 40 --algorithm sips --rounds 3 --ratio 4\n"
        "  userdp plan distinct --epsilon 1 --persons 50000 --distinct 100000 --items-per-person 130\n"
        "  userdp plan linear --alpha 25 --persons 1083 --unit 52.4 --unit-name km\n"
        "  userdp plan frequency --alpha 100 --delta 1e-6 --persons 1083 --items-per-person 100 \\\n"
        "      --clusters 16 --cluster-size 9 --r 0.25\n"
        "  userdp plan heatmap --epsilon 1 --grid 247x256 --persons 1000 --points-per-person 37",
    )
    pl.add_argument("release", choices=list(_PLANS), help="which release")
    pl.add_argument("--epsilon", type=EPSILON, default=None, help="the epsilon to predict the error at")
    pl.add_argument("--alpha", type=EPSILON, default=None, help="linear, frequency: the alpha to predict at")
    pl.add_argument("--target", type=number(float, 1e-9, 1e12), default=None,
                    help="the error to reach (counts: records; vocabulary: persons holding an item; distinct: "
                    "elements, or a fraction below 1; linear: query units times --unit; frequency, heatmap: "
                    "d_EM / EMD)")  # fmt: skip
    pl.add_argument("--confidence", type=number(float, 0.01, 0.999999), default=0.9, help="the confidence")
    pl.add_argument("--delta", type=DELTA, default=None, help="delta (vocabulary; Gaussian noise; frequency)")
    pl.add_argument("--noise", choices=["laplace", "gaussian"], default=None, help="counts, vocabulary: the noise")
    pl.add_argument("--bounds", type=_bounds, default=None,
                    help="counts: L0,LINF (default 8,4); aggregate: L0,LINF or auto (the default: the prediction is "
                    "made at the bounds that keep a typical person whole)")  # fmt: skip
    pl.add_argument("--stat", action="append", default=None,
                    help="aggregate: a statistic as userdp aggregate takes it (count, users, sum, mean, variance, "
                    "quantile:Q); repeat for several (default: mean)")  # fmt: skip
    pl.add_argument(
        "--range",
        type=range_pair,
        default=None,
        help="aggregate: the PUBLIC value range LO,HI the release is given (a negative LO as --range=-5,5)",
    )
    pl.add_argument("--domain", type=domain_arg, default=None,
                    help="aggregate: the PUBLIC domain LO,HI the release chooses the range in (predicted at its "
                    "whole width)")  # fmt: skip
    pl.add_argument("--records-per-person", type=number(float, 1, 10**9), default=1.0,
                    help="aggregate: the records a typical person holds on a key (default 1)")  # fmt: skip
    pl.add_argument("--keys-per-person", type=number(float, 1, 10**9), default=1.0,
                    help="aggregate: the keys a typical person holds (default 1; used with --bounds auto)")  # fmt: skip
    pl.add_argument(
        "--selected-keys",
        action="store_true",
        help="aggregate: the keys are selected privately (userdp aggregate without --keys; needs --delta)",
    )
    pl.add_argument("--value-mean", type=number(float, -1e300, 1e300), default=None,
                    help="aggregate: a key's typical mean value (default: the range's midpoint)")  # fmt: skip
    pl.add_argument(
        "--value-sd",
        type=number(float, 0.0, 1e300),
        default=None,
        help="aggregate: a key's typical standard deviation of the values (default: (HI - LO) / sqrt 12)",
    )
    pl.add_argument("--keys", type=number(int, 1, 10**9), default=1,
                    help="counts, aggregate: the number of keys released")  # fmt: skip
    pl.add_argument("--max-items", type=MAX_ITEMS, default="auto",
                    help="vocabulary: items per person (auto, the default: chosen from the data; the plan then "
                         "gives the figures of the largest candidate, 8192, which bound the chosen one's)")  # fmt: skip
    pl.add_argument("--count-fraction", type=number(float, 0.0, 0.99), default=0.5, help="vocabulary")
    pl.add_argument("--persons", type=number(int, 1, 10**9), default=None,
                    help="the number of persons (a public estimate); vocabulary: persons holding an item")  # fmt: skip
    pl.add_argument("--distinct", type=number(int, 1, 10**10), default=None, help="distinct: distinct elements")
    pl.add_argument("--items-per-person", type=number(float, 1, 10**7), default=None,
                    help="distinct, frequency: items per person (mean; frequency: the equal number)")  # fmt: skip
    pl.add_argument("--beta", type=PROBABILITY, default=None,
                    help="distinct: the lower bound's failure probability (default 0.05); aggregate: the quantile's "
                    "rank bound's (default 0.1)")  # fmt: skip
    pl.add_argument("--l-max", type=number(int, 1, 10_000), default=100, help="distinct: the largest bound tried")
    pl.add_argument("--max-items-bound", type=number(int, 1, 10_000), default=None,
                    help="distinct: a public bound on elements per person (adds Theorem 1.1's bound)")  # fmt: skip
    pl.add_argument("--zipf", type=number(float, 0.0, 3.0), default=1.35,
                    help="distinct: the elements' Zipf popularity exponent (1.35: words, venues, n-grams; 0: a "
                    "catalogue whose elements every person picks about equally)")  # fmt: skip
    pl.add_argument("--spread", type=number(float, 0.0, 3.0), default=None,
                    help="distinct: how unequal persons' sizes are, the log-standard deviation of the number of "
                    "distinct elements each holds: about ln(p90 / median) / 1.28 (one person in ten holding 3x the "
                    "typical person's: 0.86; reviews and check-ins about 0.5, authors and reviewers 1 to 1.3). "
                    "Default: unknown, a wider bound mixed over 0.5-1.4")  # fmt: skip
    pl.add_argument("--selection", choices=["exponential", "permute-and-flip"], default="exponential",
                    help="distinct: GEM's draw of the bound, as in `userdp distinct --selection`")  # fmt: skip
    pl.add_argument("--lipschitz", type=number(float, 1e-12, 1e12), default=1.0, help="linear: the Lipschitz bound")
    pl.add_argument("--dim", type=number(int, 1, 10_000), default=1, help="linear: the query's dimension")
    pl.add_argument("--model", choices=["local", "central"], default="local", help="linear, frequency")
    pl.add_argument("--samples", type=number(int, 1, 10**7), default=None, help="linear: BoundedEMDReduction's s")
    pl.add_argument("--r", type=number(float, 1e-9, 1.0), default=0.05,
                    help="frequency: the within-cluster distance; linear: BoundedEMDReduction's r")  # fmt: skip
    pl.add_argument("--unit", type=number(float, 1e-12, 1e12), default=1.0,
                    help="linear: multiply the error by this (e.g. the metric's scale in km)")  # fmt: skip
    pl.add_argument("--unit-name", default="", help="linear: the unit's name (e.g. km)")
    pl.add_argument("--clusters", type=number(int, 1, 10**5), default=None,
                    help="frequency: clusters; heatmap: the map's hot spots (5: a few landmarks, 80: a dense city; "
                    "default: unknown, mixed over 5, 20 and 80)")  # fmt: skip
    pl.add_argument("--places", type=number(int, 1, 10**5), default=None,
                    help="heatmap: the cells a typical user visits (1: a home location, 10: someone who roams; "
                    "default: unknown, mixed over 1, 3 and 10)")  # fmt: skip
    pl.add_argument("--cluster-size", type=number(int, 1, 10**5), default=None, help="frequency: items a cluster")
    pl.add_argument(
        "--distances",
        default=None,
        help="frequency: a public distance matrix file (a column item, then one column per item): any finite "
        "metric, the exponential randomizer (instead of --clusters, --cluster-size, --r)",
    )
    pl.add_argument("--grid", dest="shape", type=_shape, default=(256, 256),
                    help="heatmap: ROWSxCOLS as userdp heatmap --grid (or N); default 256x256, as the heatmap's "
                    "default of 256 cells along the longer side")  # fmt: skip
    pl.add_argument("--points-per-person", type=number(float, 1, 10**7), default=None, help="heatmap: mean points")
    pl.add_argument("--algorithm", default=None,
                    help="heatmap: the algorithm (as userdp heatmap; default auto); vocabulary: the selection, "
                    "weighted (the default, as userdp vocabulary), policy or policy-greedy (Laplace noise, the "
                    "default with them) or sips (DP-SIPS: --rounds, --ratio), each planned from its own "
                    "calibration")  # fmt: skip
    pl.add_argument("--rounds", type=number(int, 1, 10), default=None,
                    help="vocabulary --algorithm sips: DP-SIPS's rounds (default 3)")  # fmt: skip
    pl.add_argument("--ratio", type=number(float, 0.1, 10.0), default=None,
                    help="vocabulary --algorithm sips: round i gets ratio^(i-1) / sum_j ratio^(j-1) of the set's "
                    "budget (default 4)")  # fmt: skip
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.set_defaults(func=_run)


_AGGREGATE_ONLY = ("stat", "range", "domain", "selected_keys", "value_mean", "value_sd")


def _run(args: argparse.Namespace) -> int:
    if args.release != "aggregate":
        given = [f"--{n.replace('_', '-')}" for n in _AGGREGATE_ONLY if getattr(args, n) not in (None, False)]
        if given:
            raise ParameterError(f"{', '.join(given)}: for plan aggregate only")
    if args.bounds is None:
        args.bounds = "auto" if args.release == "aggregate" else (8, 4)
    if args.beta is None:
        args.beta = 0.1 if args.release == "aggregate" else 0.05
    if args.release != "vocabulary" and (args.rounds is not None or args.ratio is not None):
        raise ParameterError("--rounds and --ratio plan DP-SIPS: plan vocabulary --algorithm sips")
    if args.release == "heatmap" and args.algorithm is None:
        args.algorithm = "auto"
    elif args.release not in ("heatmap", "vocabulary") and args.algorithm is not None:
        raise ParameterError("--algorithm is for plan vocabulary and plan heatmap")
    if args.noise is None:
        policy = args.release == "vocabulary" and args.algorithm in ("policy", "policy-greedy")
        args.noise = "laplace" if args.release == "counts" or policy else "gaussian"
    return cmd_plan(args)
