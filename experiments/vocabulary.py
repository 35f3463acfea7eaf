"""Private vocabularies against PipelineDP and OpenDP (issues 18, 35): items released, and the error of their
counts, at epsilon in {0.5, 1, 2, 4} and delta in {1e-5, 1e-8}, on IMDB reviews (words), Amazon Fashion (words),
Foursquare NYC venues and the Reddit sample (authors' words).

Items released (the set alone, ``count_fraction = 0``):

* every userdp algorithm of :data:`ALGORITHMS` (weighted Gaussian, weighted Laplace, policy Laplace, DP-SIPS;
  one more is one entry) **at its defaults**: the library's own default path
  (:func:`userdp.vocabulary.private_vocabulary` / :func:`~userdp.vocabulary.sips_vocabulary` with
  ``max_items="auto"``, which spends 2% of epsilon on a private bound), the median over ``--seeds`` seeds
  (``--imdb-seeds`` on IMDB);
* the same algorithms **at their best fixed bound** ``max_items`` of :data:`BOUNDS`: for the weighted unions the
  expected number released, ``sum_i P[h_i + Z >= T]`` with the samplers' tails (the Gaussian's through its normal
  bound, tight to 1e-6 here), ``h_i`` the item's integer weight on one random bounding (the same subsets for the
  peers); for the policy Laplace the same expectation given one random order of the persons; for an algorithm
  with no exact expectation (DP-SIPS) the mean over the seeds of its release at that bound;
* PipelineDP 0.3 (Google's C++ partition selection, ``pydp.algorithms.partition_selection``): truncated geometric,
  Laplace thresholding and Gaussian thresholding (its weighted Gaussian is miscalibrated, issue 35, and is left
  out), each with its exact ``probability_of_keep(n_i)``; OpenDP 0.16's ``make_laplace_threshold`` (scale
  ``Delta_0 / epsilon``) and ``make_gaussian_threshold`` (discrete Gaussian, zCDP and the threshold's delta turned
  into (epsilon, delta) by OpenDP's ``make_zCDP_to_approxDP`` and ``make_fix_delta``; of the scales
  ``sqrt(Delta_0)/epsilon x 2^(j/4)`` the one with the smallest threshold, a choice that reads no data). OpenDP
  releases a key when ``count + Z >= threshold`` but its privacy map counts only ``count + Z > threshold``
  (OpenDP issue #2922): the smallest threshold its map allows is raised by one, which makes its stated delta
  true. Each peer at its best bound of :data:`BOUNDS`, expected counts.

Counts of the released items (``--counts``): userdp's default release (``count_fraction = 0.5``, the bound
chosen privately) against PipelineDP's ``PRIVACY_ID_COUNT`` with private partition selection at the same total
(epsilon, delta), split as PipelineDP's own engine splits it (read off its ``NaiveBudgetAccountant``: half of
epsilon each; with Laplace noise all of delta to the selection, with Gaussian half each), with PipelineDP's
count noise (Laplace of scale ``l0 linf / epsilon``, its analytic Gaussian at ``l2 = sqrt(l0) linf``). Error:
the mean absolute error of the released counts against the true number of persons holding the item (the
bounding's bias included), and the items released; for userdp the medians over the seeds of real releases, for
PipelineDP the exact expectations (``sum_i p_i E|b_i + N| / sum_i p_i``, ``b_i`` the bounding's bias).

PipelineDP and OpenDP run in their own environment (their pins clash with userdp's): pass its Python with
--peers-python (``python -m venv /tmp/pdpenv && /tmp/pdpenv/bin/pip install pipeline-dp opendp``).
Writes experiments/results/vocabulary.csv, vocabulary_counts.csv, vocabulary_table.md and vocabulary.png.

Run: python experiments/vocabulary.py --peers-python /tmp/pdpenv/bin/python [--seeds 3] [--imdb-seeds 2] [--counts]
(about 20 min on a loaded 2-core machine), or --tables-only to redraw the table and figure from the CSV files.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtr

from userdp import datasets
from userdp.datasets import amazon_fashion, foursquare_nyc_table, imdb_reviews
from userdp.engines.base import Columns
from userdp.engines.memory import MemoryEngine
from userdp.vocabulary import (
    bound_contributions,
    calibrate_union,
    policy_histogram,
    private_vocabulary,
    sips_vocabulary,
    union_histogram,
)

OUT = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared/datasets"
EPSILONS = (0.5, 1.0, 2.0, 4.0)
DELTAS = (1e-5, 1e-8)
BOUNDS = (1, 3, 10, 30, 100, 300)

PEERS = r"""
import json, math, sys
from pydp.algorithms import partition_selection as ps

req = json.loads(sys.stdin.read())
ns = req["ns"]
STRATEGIES = (("PipelineDP truncated geometric", ps.create_truncated_geometric_partition_strategy),
              ("PipelineDP Laplace thresholding", ps.create_laplace_partition_strategy),
              ("PipelineDP Gaussian thresholding", ps.create_gaussian_partition_strategy))
out = {"keep": {}, "params": {}, "checks": {}, "counts": {}}


def pipeline_keep(eps, delta, d0, prefix, tag):
    for name, make in STRATEGIES:
        s = make(eps, delta, d0)
        out["keep"][f"{prefix}{name}|{tag}"] = [s.probability_of_keep(n) for n in ns]
        p1 = s.probability_of_keep(1)  # a person's d0 items that nobody else holds: some kept w.p. 1-(1-p1)^d0
        out["checks"][f"{prefix}{name}|{tag}"] = 1 - (1 - p1) ** d0


try:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    dom = dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T=int))
    met1 = dp.l01inf_distance(dp.absolute_distance(T=int))
    met2 = dp.l02inf_distance(dp.absolute_distance(T=int))
except ImportError:
    dp = None


def smallest(fits):
    lo, hi = 0, 1
    while not fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def opendp_keep(eps, delta, d0):
    # OpenDP releases a key when count + Z >= threshold, but its privacy map counts only P[count + Z > threshold]
    # (OpenDP issue #2922, for both thresholds): the smallest threshold its map allows, raised by one, makes the
    # stated delta true
    scale = d0 / eps

    def fits(t):
        e, d = dp.m.make_laplace_threshold(dom, met1, scale=scale, threshold=t).map((d0, d0, 1))
        return e <= eps * (1 + 1e-9) and d <= delta

    t = smallest(fits) + 1
    q = math.exp(-1.0 / scale)
    keep = []
    for n in ns:
        m = t - n  # kept when n + Z >= t
        keep.append(math.exp(-m / scale) / (1 + q) if m >= 1 else 1 - math.exp(-(1 - m) / scale) / (1 + q))
    out["keep"][f"OpenDP Laplace threshold|{eps!r}|{delta!r}|{d0}"] = keep
    out["params"][f"OpenDP Laplace threshold|{eps!r}|{delta!r}|{d0}"] = [scale, t]
    p1 = math.exp(-(t - 1) / scale) / (1 + q)  # P[1 + Z >= t]
    out["checks"][f"OpenDP Laplace threshold|{eps!r}|{delta!r}|{d0}"] = 1 - (1 - p1) ** d0
    # Gaussian: zCDP (and the threshold's delta) turned into (eps, delta) by OpenDP's own conversion at the total
    # delta; for each noise scale on a grid the smallest threshold it allows, plus one, and of those the scale with
    # the smallest threshold (a choice that reads no data)
    d_in = (d0, math.isqrt(d0 - 1) + 1, 1)  # l2 bound >= sqrt(d0): OpenDP uses min(l2^2, l0 linf^2) = d0

    def fits_g(sigma, t):
        try:
            m = dp.m.make_gaussian_threshold(dom, met2, scale=sigma, threshold=t)
            e, d = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(m), delta).map(d_in)
        except Exception:  # the threshold's own delta is above the total
            return False
        return e <= eps * (1 + 1e-9) and d <= delta * (1 + 1e-9)

    best, rises = None, 0
    for j in range(4, 41):
        sigma = math.sqrt(d0) / eps * 2 ** (j / 4)
        if not fits_g(sigma, 2**30):  # (counts are 32-bit integers)
            continue
        t = smallest(lambda x: fits_g(sigma, x)) + 1
        if best is None or t < best[1]:
            best, rises = (sigma, t), 0
        else:
            rises += 1
            if rises == 3:  # the smallest threshold is unimodal in the scale: past the minimum
                break
    if best is None:
        return
    sigma, t = best
    L = int(math.ceil(14 * sigma)) + 1  # the discrete Gaussian's mass beyond 14 sigma is below 1e-44
    w = [math.exp(-x * x / (2 * sigma * sigma)) for x in range(-L, L + 1)]
    tot = math.fsum(w)
    tail = [0.0] * (2 * L + 2)  # tail[i] = P[Z >= i - L]
    for i in range(2 * L, -1, -1):
        tail[i] = tail[i + 1] + w[i] / tot
    keep = []
    for n in ns:
        m = t - n  # kept when n + Z >= t
        keep.append(1.0 if m <= -L else 0.0 if m > L else min(1.0, tail[m + L]))
    out["keep"][f"OpenDP Gaussian threshold|{eps!r}|{delta!r}|{d0}"] = keep
    out["params"][f"OpenDP Gaussian threshold|{eps!r}|{delta!r}|{d0}"] = [sigma, t]
    m1 = t - 1
    out["checks"][f"OpenDP Gaussian threshold|{eps!r}|{delta!r}|{d0}"] = (
        1 - (1 - (tail[m1 + L] if -L <= m1 <= L else 0.0)) ** d0)


def pipeline_split(eps, delta, noise):
    # the budget split PipelineDP's engine makes for PRIVACY_ID_COUNT with private partition selection: read off
    # its own accountant after a run on a small made-up data set
    import pipeline_dp

    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    eng = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    kind = pipeline_dp.NoiseKind.LAPLACE if noise == "laplace" else pipeline_dp.NoiseKind.GAUSSIAN
    params = pipeline_dp.AggregateParams(noise_kind=kind, metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT],
                                         max_partitions_contributed=2, max_contributions_per_partition=1)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: 0)
    res = eng.aggregate([(p, p % 3) for p in range(300)], params, ex)
    acc.compute_budgets()
    list(res)
    split = {}
    for m in acc._mechanisms:
        s = m.mechanism_spec
        split["count" if s.mechanism_type.name in ("LAPLACE", "GAUSSIAN") else "select"] = (s.eps, s.delta)
    return split


for eps, delta, d0 in req["cases"]:
    pipeline_keep(eps, delta, d0, "", f"{eps!r}|{delta!r}|{d0}")
    if dp is not None:
        opendp_keep(eps, delta, d0)

if req.get("counts"):
    from pipeline_dp import dp_computations as dc

    for eps, delta in {(e, d) for e, d, _ in req["cases"]}:
        for noise in ("laplace", "gaussian"):
            split = pipeline_split(eps, delta, noise)
            (es, ds), (ec, dcnt) = split["select"], split["count"]
            out["counts"][f"{noise}|{eps!r}|{delta!r}"] = [es, ds, ec, dcnt]
            for d0 in sorted({b for e, d, b in req["cases"] if (e, d) == (eps, delta)}):
                pipeline_keep(es, ds, d0, f"counts {noise}|", f"{eps!r}|{delta!r}|{d0}")
                if noise == "laplace":  # the count's noise: l1 = l0 * linf = d0; Laplace scale l1 / eps
                    b = dc.compute_l1_sensitivity(d0, 1) / ec
                else:  # PipelineDP's analytic Gaussian at l2 = sqrt(l0) * linf
                    b = dc.compute_sigma(ec, dcnt, dc.compute_l2_sensitivity(d0, 1))
                out["params"][f"counts {noise}|{eps!r}|{delta!r}|{d0}"] = [float(b)]
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Algorithm:
    """One userdp vocabulary algorithm: ``release(offsets, items, labels, epsilon, delta, *, max_items,
    count_fraction, rng) -> Release`` (the library's function, its defaults otherwise), and optionally
    ``expected(state, epsilon, delta, max_items)``, the exact expected number of items released at a fixed
    bound (without it, the mean of ``--seeds`` releases at that bound)."""

    release: Callable
    expected: Callable | None = None


def _expected_weighted(state: dict, epsilon: float, delta: float, d0: int, noise: str) -> float:
    cal = calibrate_union(epsilon, delta, d0, noise)
    key = (d0, noise)
    if key not in state["hists"]:
        state["hists"][key] = union_histogram(*state["bounded"][d0], state["n_items"], noise)
    return _expected(state["hists"][key], cal)


def _expected_policy(state: dict, epsilon: float, delta: float, d0: int) -> float:
    cal = calibrate_union(epsilon, delta, d0, "laplace", policy=True)
    hist = policy_histogram(*state["bounded"][d0], state["n_items"], cal.cutoff, cal.unit, rng=2)
    return _expected(hist, cal, state["held"][d0] > 0)


def _expected(hist: np.ndarray, cal, candidates: np.ndarray | None = None) -> float:
    h = hist[hist > 0 if candidates is None else candidates].astype(np.float64)
    m = cal.threshold - h  # released when Z >= m
    if cal.noise == "laplace":
        q = math.exp(-1.0 / cal.scale)
        up = np.exp(-np.maximum(m, 1) / cal.scale) / (1 + q)  # P[Z >= m], m >= 1
        down = 1 - np.exp(-np.maximum(1 - m, 0) / cal.scale) / (1 + q)  # 1 - P[Z <= m - 1], m <= 0
        p = np.where(m >= 1, up, down)
    else:
        p = ndtr(-(m - 0.5) / cal.scale)
    return float(p.sum())


ALGORITHMS = {
    "userdp weighted gaussian": Algorithm(partial(private_vocabulary, noise="gaussian"),
                                          partial(_expected_weighted, noise="gaussian")),
    "userdp weighted laplace": Algorithm(partial(private_vocabulary, noise="laplace"),
                                         partial(_expected_weighted, noise="laplace")),
    "userdp policy laplace": Algorithm(partial(private_vocabulary, noise="laplace", policy=True), _expected_policy),
    "userdp DP-SIPS": Algorithm(sips_vocabulary),
}  # fmt: skip


def _sets(name: str, imdb: Path, reddit: Path):
    """(offsets, items, number of items) of one data set, each person's items distinct."""
    if name == "Amazon Fashion (words)":
        ds = amazon_fashion()
    elif name == "IMDB reviews (words)":
        ds = imdb_reviews(imdb)
    elif name == "Reddit sample (words)":  # as experiments/planning.py's reddit_graphs
        import pyarrow.csv as pc

        with lzma.open(reddit) as fh:
            t = pc.read_csv(fh)
        words = [n.strip("()").replace("'", " ").replace(",", " ") for n in t.column("ngram").to_pylist()]
        ds = datasets.words_dataset(t.column("author").to_pylist(), words)
    else:
        ds = MemoryEngine().edges(MemoryEngine().load(foursquare_nyc_table(), Columns("user", "venue_id")))
    return ds.offsets, np.asarray(ds.items, dtype=np.int64), len(ds.domain)


def _abs_error(bias: np.ndarray, noise: str, b: float) -> np.ndarray:
    """E|bias + N|, N Laplace of scale b or normal of standard deviation b."""
    x = np.abs(bias)
    if noise == "laplace":
        return x + b * np.exp(-x / b)
    return b * math.sqrt(2 / math.pi) * np.exp(-(x**2) / (2 * b * b)) + x * (1 - 2 * ndtr(-x / b))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers-python", default=None, help="a Python with pipeline-dp and opendp installed")
    ap.add_argument("--imdb", default=str(SHARED / "imdb_reviews.jsonl.xz"), help="skipped when absent")
    ap.add_argument("--reddit", default=str(SHARED / "reddit_ngrams.csv.xz"), help="skipped when absent")
    ap.add_argument("--seeds", type=int, default=3, help="releases per case (median at defaults, mean at a bound)")
    ap.add_argument("--imdb-seeds", type=int, default=2, help="releases per case on IMDB (the largest)")
    ap.add_argument("--tables-only", action="store_true", help="redraw the table and figure from the CSV files")
    ap.add_argument("--counts", action="store_true", help="also the counts' error (userdp against PipelineDP)")
    args = ap.parse_args()
    names = ["Amazon Fashion (words)", "Foursquare venues"]
    if Path(args.reddit).exists():
        names.append("Reddit sample (words)")
    if Path(args.imdb).exists():
        names.append("IMDB reviews (words)")
    if args.tables_only:
        counts = OUT / "vocabulary_counts.csv"
        df = pd.read_csv(OUT / "vocabulary.csv", dtype={"max_items": str})
        cdf = pd.read_csv(counts, dtype={"max_items": str}) if counts.exists() else pd.DataFrame()
        _tables(df, cdf, [n for n in names if n in set(df.dataset)])
        return
    data = {}
    for name in names:  # every data set's bounded subsets first: the peers need the persons' counts
        offsets, items, n_items = _sets(name, Path(args.imdb), Path(args.reddit))
        bounded = {d0: bound_contributions(offsets, items, d0, rng=1) for d0 in BOUNDS}
        held = {d0: np.bincount(bounded[d0][1], minlength=n_items) for d0 in BOUNDS}
        true = np.bincount(items, minlength=n_items)
        data[name] = {"offsets": offsets, "items": items, "n_items": n_items, "bounded": bounded, "held": held,
                      "true": true, "hists": {}}  # fmt: skip
        print(f"{name}: {offsets.size - 1} persons, {items.size} pairs, {n_items} items", flush=True)
    cases = [[e, d, b] for e in EPSILONS for d in DELTAS for b in BOUNDS]
    peers_job = None
    if args.peers_python:
        ns = sorted({int(v) for s in data.values() for h in s["held"].values() for v in np.unique(h)})
        peers_job = subprocess.Popen([args.peers_python, "-c", PEERS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)  # fmt: skip
        peers_job.stdin.write(json.dumps({"ns": ns, "cases": cases, "counts": args.counts}))
        peers_job.stdin.close()
    rows, count_rows = [], []
    for name, state in data.items():
        off, its, n_items = state["offsets"], state["items"], state["n_items"]
        labels = np.arange(n_items)
        seeds = range(args.imdb_seeds if name.startswith("IMDB") else args.seeds)
        for eps in EPSILONS:
            for delta in DELTAS:
                for method, algo in ALGORITHMS.items():
                    got = [algo.release(off, its, labels, eps, delta, count_fraction=0.0, rng=s) for s in seeds]
                    sizes = [len(r.value["items"]) for r in got]
                    chosen = [r.params["max_items"] for r in got]
                    rows.append((name, eps, delta, "auto", method, float(np.median(sizes)), float(np.median(chosen))))
                    for d0 in BOUNDS:
                        if algo.expected is not None:
                            v = algo.expected(state, eps, delta, d0)
                        else:
                            v = float(np.mean([len(algo.release(off, its, labels, eps, delta, max_items=d0,
                                                                count_fraction=0.0, rng=s).value["items"])
                                               for s in seeds]))  # fmt: skip
                        rows.append((name, eps, delta, d0, method, v, d0))
                    if args.counts:
                        errs, sizes = [], []
                        for s in seeds:
                            r = algo.release(off, its, labels, eps, delta, rng=s)  # the default count_fraction
                            codes = np.asarray(r.value["items"], dtype=np.int64)
                            sizes.append(codes.size)
                            cnt = np.asarray(r.value["counts"], dtype=np.float64)
                            errs.append(float(np.abs(cnt - state["true"][codes]).mean()) if codes.size else np.nan)
                        count_rows.append(
                            (
                                name,
                                eps,
                                delta,
                                "auto",
                                method,
                                float(np.median(sizes)),
                                float(np.nanmedian(errs)) if not np.all(np.isnan(errs)) else np.nan,
                            )
                        )
                done = [r for r in rows if r[:3] == (name, eps, delta) and r[3] == "auto"]
                print(
                    f"  {name} eps {eps:g} delta {delta:g}: " + ", ".join(f"{r[4]} {r[5]:.1f}" for r in done),
                    flush=True,
                )
    peers = {"keep": {}, "params": {}, "checks": {}, "counts": {}}
    if peers_job is not None:
        peers = json.loads(peers_job.stdout.read())
        if peers_job.wait() != 0:
            raise SystemExit("the peers' script failed")
        ns = sorted({int(v) for s in data.values() for h in s["held"].values() for v in np.unique(h)})
        index = np.zeros(max(ns) + 1, dtype=np.int64)
        index[ns] = np.arange(len(ns))
        for key, tail in sorted(peers["checks"].items()):
            method, eps, delta = key.split("|")[-4], float(key.split("|")[-3]), float(key.split("|")[-2])
            if tail > delta * (1 + 1e-6):
                print(f"  warning: {key}: a person's new items kept w.p. {tail:.3g} > delta")
        for name, state in data.items():
            for key, probs in peers["keep"].items():
                if key.startswith("counts "):
                    continue
                method, e, dl, b = key.split("|")
                held = state["held"][int(b)]
                p = np.asarray(probs)[index[held[held > 0]]]
                rows.append((name, float(e), float(dl), int(b), method, float(p.sum()), int(b)))
            if args.counts:
                for key, probs in peers["keep"].items():
                    if not key.startswith("counts "):
                        continue
                    head, method, e, dl, b = key.split("|")
                    noise = head.split()[1]
                    held = state["held"][int(b)]
                    mask = held > 0
                    p = np.asarray(probs)[index[held[mask]]]
                    scale = peers["params"][f"counts {noise}|{e}|{dl}|{b}"][0]
                    err = _abs_error((held - state["true"])[mask].astype(np.float64), noise, scale)
                    m = float(p.sum())
                    count_rows.append((name, float(e), float(dl), int(b), f"{method} + {noise} count", m,
                                       float((p * err).sum() / m) if m > 0 else np.nan))  # fmt: skip
    for key, par in sorted(peers["params"].items()):
        if not key.startswith("counts"):
            print(f"  {key}: noise scale {par[0]:.2f}, threshold {par[1]} (OpenDP's smallest + 1)")
    cols = ["dataset", "epsilon", "delta", "max_items", "method", "items_released", "bound_used"]
    df = pd.DataFrame(rows, columns=cols)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "vocabulary.csv", index=False)
    if args.counts:
        cdf = pd.DataFrame(count_rows, columns=["dataset", "epsilon", "delta", "max_items", "method",
                                                "items_released", "mean_abs_error"])  # fmt: skip
        cdf.to_csv(OUT / "vocabulary_counts.csv", index=False)
    _tables(df, pd.DataFrame(count_rows, columns=["dataset", "epsilon", "delta", "max_items", "method",
                                                  "items_released", "mean_abs_error"]), names)  # fmt: skip


def _fmt(v: float) -> str:
    return "–" if v != v else f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def _tables(df: pd.DataFrame, cdf: pd.DataFrame, names: list[str]) -> None:
    fixed = df[df.max_items != "auto"].copy()
    fixed["max_items"] = fixed.max_items.astype(int)
    idx = fixed.groupby(["dataset", "epsilon", "delta", "method"]).items_released.idxmax()
    best = fixed.loc[idx].set_index(["dataset", "epsilon", "delta", "method"])
    auto = df[df.max_items == "auto"].set_index(["dataset", "epsilon", "delta", "method"])
    methods = list(ALGORITHMS) + sorted(
        m for m in best.index.get_level_values("method").unique() if m not in ALGORITHMS
    )
    lines = [f"Items released, each method at its best fixed max_items of {BOUNDS} (expected; DP-SIPS: mean of the "
             "runs), the best of each row in bold:", "",
             "| dataset | ε | δ | " + " | ".join(methods) + " |", "|---|---|---|" + "---|" * len(methods)]  # fmt: skip
    keys = [(n, e, d) for n in names for e in EPSILONS for d in DELTAS]
    for k in keys:
        vals = [best.items_released.get(k + (m,), np.nan) for m in methods]
        top = np.nanmax(vals)
        cells = [f"**{_fmt(v)}** ({best.bound_used[k + (m,)]:.0f})" if v == top else
                 f"{_fmt(v)} ({best.bound_used[k + (m,)]:.0f})" if v == v else "–"
                 for m, v in zip(methods, vals, strict=True)]  # fmt: skip
        lines.append(f"| {k[0]} | {k[1]:g} | {k[2]:g} | " + " | ".join(cells) + " |")
    peers = [m for m in methods if m not in ALGORITHMS]
    lines += ["", "userdp at its defaults (max_items='auto', 2% of ε on the bound; median of the runs, the median "
              "chosen bound in brackets) against the best peer at its best fixed bound:", "",
              "| dataset | ε | δ | " + " | ".join(f"{m} (default)" for m in ALGORITHMS)
              + " | best peer at its best bound | weighted gaussian default / best peer "
              "| best userdp default / best peer |",
              "|---|---|---|" + "---|" * (len(ALGORITHMS) + 3)]  # fmt: skip
    for k in keys:
        vals = [auto.items_released.get(k + (m,), np.nan) for m in ALGORITHMS]
        pv = {m: best.items_released.get(k + (m,), np.nan) for m in peers}
        bp = max(pv, key=lambda m: pv[m]) if pv else None
        pbest = pv[bp] if bp else np.nan
        top = np.nanmax(vals + [pbest])
        cells = [(f"**{_fmt(v)}**" if v == top else _fmt(v)) + f" ({auto.bound_used[k + (m,)]:.0f})"
                 for m, v in zip(ALGORITHMS, vals, strict=False)]  # fmt: skip
        peer = (
            (f"**{_fmt(pbest)}**" if pbest == top else _fmt(pbest)) + f" ({bp}, {best.bound_used[k + (bp,)]:.0f})"
            if bp
            else "–"
        )
        r1 = vals[0] / pbest if pbest > 0 else np.nan
        r2 = np.nanmax(vals) / pbest if pbest > 0 else np.nan
        lines.append(f"| {k[0]} | {k[1]:g} | {k[2]:g} | " + " | ".join(cells) + f" | {peer} | {r1:.2f} | {r2:.2f} |")
    if len(cdf):
        us = cdf[cdf.max_items == "auto"].set_index(["dataset", "epsilon", "delta", "method"])
        pc = cdf[cdf.max_items != "auto"]
        lines += ["", "Counts of the released items: userdp at its defaults (count_fraction 0.5, max_items 'auto'; "
                  "median of the runs) against PipelineDP's PRIVACY_ID_COUNT with private partition selection at the "
                  "same total (ε, δ) (expected): items released, and the mean absolute error of their counts against "
                  "the true number of persons holding each item:", "",
                  "| dataset | ε | δ | " + " | ".join(f"{m}: items, error" for m in ALGORITHMS)
                  + " | PipelineDP, most items (selection + count noise, bound): items, error "
                  "| PipelineDP, least error of those releasing at least a third as many: items, error |",
                  "|---|---|---|" + "---|" * (len(ALGORITHMS) + 2)]  # fmt: skip
        for k in keys:
            cells = [f"{_fmt(us.items_released.get(k + (m,), np.nan))}, {_fmt(us.mean_abs_error.get(k + (m,), np.nan))}"
                     for m in ALGORITHMS]  # fmt: skip
            sub = pc[(pc.dataset == k[0]) & (pc.epsilon == k[1]) & (pc.delta == k[2])]
            if len(sub):
                a = sub.loc[sub.items_released.idxmax()]
                ok = sub[sub.items_released >= a.items_released / 3].dropna(subset=["mean_abs_error"])
                b = ok.loc[ok.mean_abs_error.idxmin()] if len(ok) else a
                cells += [
                    f"{_fmt(a.items_released)}, {_fmt(a.mean_abs_error)} ({a.method}, {a.max_items})",
                    f"{_fmt(b.items_released)}, {_fmt(b.mean_abs_error)} ({b.method}, {b.max_items})",
                ]
            else:
                cells += ["–", "–"]
            lines.append(f"| {k[0]} | {k[1]:g} | {k[2]:g} | " + " | ".join(cells) + " |")
    (OUT / "vocabulary_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(DELTAS), len(names), figsize=(4.2 * len(names), 3.4 * len(DELTAS)), squeeze=False)
    for i, delta in enumerate(DELTAS):
        for ax, name in zip(axes[i], names, strict=True):
            for j, m in enumerate(methods):
                y = [best.items_released.get((name, e, delta, m), np.nan) for e in EPSILONS]
                ax.plot(EPSILONS, y, marker="o", ms=3, lw=1, color=f"C{j}", ls="-" if m in ALGORITHMS else ":",
                        label=f"{m} (best bound)")  # fmt: skip
            for j, m in enumerate(ALGORITHMS):
                y = [auto.items_released.get((name, e, delta, m), np.nan) for e in EPSILONS]
                ax.plot(EPSILONS, y, marker="x", lw=1.5, color=f"C{j}", ls="--", label=f"{m} (defaults)")
            ax.set_xscale("log", base=2)
            ax.set_yscale("symlog", linthresh=1)
            ax.set_ylim(bottom=0)
            ax.set_title(f"{name}, δ = {delta:g}", fontsize=9)
            ax.set_xlabel("ε")
            ax.set_ylabel("items released")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(OUT / "vocabulary.png", dpi=100)


if __name__ == "__main__":
    main()
