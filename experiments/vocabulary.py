"""Private vocabularies: items released by userdp's set unions against PipelineDP's partition selection, side
by side on the same data, at the same (epsilon, delta) and the same contribution bound Delta_0 (issue 18).

Datasets: Amazon Fashion reviewers' words, IMDB reviews as persons (words), Foursquare NYC venues and
categories (persons = users). For each, every person keeps a uniformly random subset of at most Delta_0
items (the same subsets for every method), then:

* userdp weighted Gaussian and weighted Laplace set union (:mod:`userdp.vocabulary`): the expected number of
  items released, ``sum_i P[h_i + Z >= T]`` with the samplers' tails (the Gaussian's through its normal
  bound, which is tight to 1e-6 at these scales), ``h_i`` the item's integer weight;
* userdp policy Laplace (:mod:`userdp.vocabulary.policy`, Gopi et al.'s Algorithm 7 on the lattice, cutoff
  ``T + 3 t``): the same expectation given the policy histogram of one random order of the persons;
* PipelineDP 0.3 (through Google's C++ library, ``pydp.algorithms.partition_selection``): truncated
  geometric ("magic" partition selection, Desfontaines et al. 2022), Laplace thresholding and Gaussian
  thresholding, each with its exact ``probability_of_keep(n_i)`` for an item held by ``n_i`` persons;
* OpenDP 0.16's ``make_laplace_threshold`` (counts of persons, l0 = Delta_0, scale Delta_0 / epsilon, the
  smallest threshold its privacy map allows at delta; integer discrete Laplace noise, so the keep
  probability is exact), and its ``make_gaussian_threshold`` (discrete Gaussian noise, zCDP plus the
  threshold's delta, turned into (epsilon, delta) by OpenDP's ``make_zCDP_to_approxDP`` and
  ``make_fix_delta``; of noise scales sqrt(Delta_0)/epsilon x 2^(j/4), j = 4..40, the one whose smallest
  allowed threshold is smallest, which reads no data; keep probabilities summed from the discrete Gaussian's
  mass function).

PipelineDP runs in its own environment (its pins clash with userdp's): pass its Python with --peers-python
(``python -m venv /tmp/pdpenv && /tmp/pdpenv/bin/pip install pipeline-dp opendp``). Writes
experiments/results/vocabulary.csv, vocabulary_table.md and vocabulary.png.

Run: python experiments/vocabulary.py --peers-python /tmp/pdpenv/bin/python [--imdb PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from userdp.datasets import amazon_fashion, foursquare_nyc_table, imdb_reviews
from userdp.engines.base import Columns
from userdp.engines.memory import MemoryEngine
from userdp.vocabulary import bound_contributions, calibrate_union, policy_histogram, union_histogram

OUT = Path(__file__).parent / "results"
EPSILONS = (0.5, 1.0, 2.0, 4.0)
DELTA = 1e-6
BOUNDS = (1, 10, 100)

PEERS = r"""
import json, sys
from pydp.algorithms import partition_selection as ps
req = json.loads(sys.stdin.read())
out = {}
for eps, d0 in req["cases"]:
    for name, make in (("PipelineDP truncated geometric", ps.create_truncated_geometric_partition_strategy),
                       ("PipelineDP Laplace thresholding", ps.create_laplace_partition_strategy),
                       ("PipelineDP Gaussian thresholding", ps.create_gaussian_partition_strategy)):
        s = make(eps, req["delta"], d0)
        out[f"{name}|{eps}|{d0}"] = [s.probability_of_keep(n) for n in range(req["n_max"] + 1)]
    try:  # OpenDP's Laplace threshold: scale l1 / epsilon, the smallest threshold its map allows at delta
        import math
        import opendp.prelude as dp

        dp.enable_features("contrib")
        dom = dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T=int))
        met = dp.l01inf_distance(dp.absolute_distance(T=int))
        scale = d0 / eps

        def fits(t):
            e, d = dp.m.make_laplace_threshold(dom, met, scale=scale, threshold=t).map((d0, d0, 1))
            return e <= eps * (1 + 1e-9) and d <= req["delta"]

        lo, hi = 1, 2
        while not fits(hi):
            lo, hi = hi, 2 * hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(mid) else (mid, hi)
        q = math.exp(-1.0 / scale)
        keep = []
        for n in range(req["n_max"] + 1):
            m = hi - n  # kept when n + Z >= threshold
            keep.append(math.exp(-m / scale) / (1 + q) if m >= 1 else 1 - math.exp(-(1 - m) / scale) / (1 + q))
        out[f"OpenDP Laplace threshold|{eps}|{d0}"] = keep
        # OpenDP's Gaussian threshold: zCDP (and the threshold's delta) turned into (eps, delta) by OpenDP's own
        # conversion at the total delta; for each noise scale on a grid, the smallest threshold it allows, and
        # of those the scale with the smallest threshold (a choice that reads no data)
        met2 = dp.l02inf_distance(dp.absolute_distance(T=int))
        d_in = (d0, math.isqrt(d0 - 1) + 1, 1)  # l2 bound >= sqrt(d0): OpenDP uses min(l2^2, l0 linf^2) = d0

        def fits_g(sigma, t):
            try:
                m = dp.m.make_gaussian_threshold(dom, met2, scale=sigma, threshold=t)
                e, d = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(m), req["delta"]).map(d_in)
            except Exception:  # the threshold's own delta is above the total
                return False
            return e <= eps * (1 + 1e-9) and d <= req["delta"] * (1 + 1e-9)

        best = None
        for j in range(4, 41):
            sigma = math.sqrt(d0) / eps * 2 ** (j / 4)
            if not fits_g(sigma, 2**30):  # (counts are 32-bit integers)
                continue
            lo, hi = 0, 1
            while not fits_g(sigma, hi):
                lo, hi = hi, 2 * hi
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if fits_g(sigma, mid) else (mid, hi)
            if best is None or hi < best[1]:
                best = (sigma, hi)
        if best is not None:
            sigma, t = best
            L = int(math.ceil(14 * sigma)) + 1  # the discrete Gaussian's mass beyond 14 sigma is below 1e-44
            z = list(range(-L, L + 1))
            w = [math.exp(-x * x / (2 * sigma * sigma)) for x in z]
            tot = math.fsum(w)
            tail = [0.0] * (2 * L + 2)  # tail[i] = P[Z >= z[i]]
            for i in range(2 * L, -1, -1):
                tail[i] = tail[i + 1] + w[i] / tot
            keep = []
            for n in range(req["n_max"] + 1):
                m = t - n  # kept when n + Z >= threshold
                keep.append(1.0 if m <= -L else 0.0 if m > L else min(1.0, tail[m + L]))
            out[f"OpenDP Gaussian threshold|{eps}|{d0}"] = keep
            out[f"_params OpenDP Gaussian threshold|{eps}|{d0}"] = [sigma, t]
    except ImportError:
        pass
print(json.dumps(out))
"""


def _sets(name: str, imdb: Path | None):
    if name == "Amazon Fashion (words)":
        ds = amazon_fashion()
        return ds.offsets, ds.items, len(ds.domain)
    if name == "IMDB reviews (words)":
        ds = imdb_reviews(imdb)
        return ds.offsets, ds.items, len(ds.domain)
    item = "venue_id" if "venues" in name else "category_name"
    sets = MemoryEngine().edges(MemoryEngine().load(foursquare_nyc_table(), Columns("user", item)))
    return sets.offsets, sets.items, len(sets.domain)


def _expected_userdp(hist: np.ndarray, cal, candidates: np.ndarray | None = None) -> float:
    from scipy.special import ndtr

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers-python", default=None, help="a Python with pipeline-dp installed")
    imdb = Path(__file__).resolve().parents[2] / "shared/datasets/imdb_reviews.jsonl.xz"
    ap.add_argument("--imdb", default=str(imdb), help="the IMDB reviews (JSON lines); skipped when absent")
    args = ap.parse_args()
    names = ["Amazon Fashion (words)", "Foursquare venues", "Foursquare categories"]
    if Path(args.imdb).exists():
        names.insert(1, "IMDB reviews (words)")
    rows = []
    for name in names:
        offsets, items, n_items = _sets(name, Path(args.imdb))
        print(f"{name}: {offsets.size - 1} persons, {items.size} person-item pairs, {n_items} items")
        bounded = {d0: bound_contributions(offsets, items, d0, rng=1) for d0 in BOUNDS}
        n_held = {d0: np.bincount(bounded[d0][1], minlength=n_items) for d0 in BOUNDS}
        peers = {}
        if args.peers_python:
            req = {"delta": DELTA, "n_max": int(max(v.max() for v in n_held.values())),
                   "cases": [[e, d0] for e in EPSILONS for d0 in BOUNDS]}  # fmt: skip
            done = subprocess.run([args.peers_python, "-c", PEERS], input=json.dumps(req), capture_output=True,
                                  text=True, check=True)  # fmt: skip
            peers = json.loads(done.stdout)
            for key, (sigma, t) in sorted((k, v) for k, v in peers.items() if k.startswith("_params")):
                print(f"  {key[8:]}: noise sigma {sigma:.2f}, threshold {t}")
        for eps in EPSILONS:
            for d0 in BOUNDS:
                off, its = bounded[d0]
                for noise in ("gaussian", "laplace"):
                    cal = calibrate_union(eps, DELTA, d0, noise)
                    hist = union_histogram(off, its, n_items, noise)
                    rows.append((name, eps, d0, f"userdp weighted {noise}", _expected_userdp(hist, cal)))
                cal = calibrate_union(eps, DELTA, d0, "laplace", policy=True)
                hist = policy_histogram(off, its, n_items, cal.cutoff, cal.unit, rng=2)
                rows.append((name, eps, d0, "userdp policy laplace", _expected_userdp(hist, cal, n_held[d0] > 0)))
                for key, probs in peers.items():
                    if key.startswith("_"):
                        continue  # a peer's parameters, printed below
                    method, e, b = key.split("|")
                    if float(e) == eps and int(b) == d0:
                        p = np.asarray(probs)
                        held = n_held[d0][n_held[d0] > 0]
                        rows.append((name, eps, d0, method, float(p[held].sum())))
    df = pd.DataFrame(rows, columns=["dataset", "epsilon", "max_items", "method", "expected_items_released"])
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "vocabulary.csv", index=False)
    best = df.groupby(["dataset", "epsilon", "method"]).expected_items_released.max().unstack("method")
    lines = ["| dataset | ε | " + " | ".join(best.columns) + " |", "|---|---|" + "---|" * len(best.columns)]
    for (ds, eps), r in best.iterrows():
        top = r.max()
        cells = [f"**{v:,.0f}**" if v == top else f"{v:,.0f}" for v in r]
        lines.append(f"| {ds} | {eps:g} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    (OUT / "vocabulary_table.md").write_text(
        f"Expected items released at δ = {DELTA:g}, each method at its best Δ₀ of {BOUNDS}:\n\n{table}\n"
    )
    print(table)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        sub = best.loc[name]
        for method in sub.columns:
            ax.plot(sub.index, sub[method], marker="o", label=method)
        ax.set_xscale("log", base=2)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("ε (δ = 1e-6)")
        ax.set_ylabel("items released (expected, best Δ₀)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "vocabulary.png", dpi=110)


if __name__ == "__main__":
    main()
