"""Knop & Steinke (NeurIPS 2023), Tables 3-8 and Figure 1, reproduced on Amazon Fashion and IMDB.

For selection of the contribution bound l in {max contribution, 90th percentile, non-private max utility,
DP max utility (GEM)} x counting in {sampling, greedy, matching} x {non-private, DP}: the 10th/50th/90th
percentiles over 100 runs of the chosen bound and of the count, at eps = 1 and eps = 2, beta = 0.05,
l_max = 100 (the non-private selections may exceed l_max: max contribution is the largest degree).
The DP count is Algorithm 1's release (budget split eps/2 + eps/2); non-private counts are DC_method(l).
Persons: Amazon reviewers; IMDB reviews (each review a person). Words: lower-cased \\w+ tokens.

Writes experiments/results/distinct_count.csv, distinct_count_table.md and distinct_count_dc_vs_l.png.
Run: python experiments/distinct_count.py [--imdb PATH] [--runs 100]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from userdp.datasets import amazon_fashion, imdb_reviews
from userdp.distinct import dc_greedy, dc_matching, dc_sampling, gem_select, laplace_lower_bound, person_element_graph
from userdp.noise import RandomSource

OUT = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imdb_reviews.jsonl.xz"
BETA, LMAX = 0.05, 100
PAPER = {  # Tables 4 and 7: DP max utility (GEM) + DP matching, 10th/50th/90th percentiles
    "amazon_fashion": dict(true=1450, bound=(6.9, 9, 13.1), count=(1220.6, 1319.1, 1394.2)),
    "imdb": dict(true=98726, bound=(12, 16, 21), count=(98555.6, 98670.4, 98726.8)),
}


def run_dataset(name: str, graph, runs: int, src: RandomSource) -> list[dict]:
    deg = graph.degrees()
    L = max(LMAX, int(deg.max()))
    exact = {"matching": dc_matching(graph, L), "greedy": dc_greedy(graph, L)}
    true = graph.distinct_count()
    p90 = int(np.ceil(np.percentile(deg, 90)))
    rows = []
    t0 = time.time()
    for run in range(runs):
        counts = dict(exact)
        counts["sampling"] = dc_sampling(graph, L, src)
        for eps in (1.0, 2.0):
            e_sel = e_cnt = eps / 2
            for method, dc in counts.items():
                ls = np.arange(1, LMAX + 1, dtype=float)
                q = dc[:LMAX] - ls / e_cnt * math.log(1 / (2 * BETA))
                choices = {
                    "max contribution": int(deg.max()),
                    "90th percentile": p90,
                    "non-private max utility": int(np.argmax(q)) + 1,
                    "DP max utility (GEM)": gem_select(q, ls, e_sel, BETA, src)[0] + 1,
                }
                for sel, l in choices.items():
                    npv = int(dc[l - 1])
                    dpv = laplace_lower_bound(float(npv), float(l), e_cnt, BETA, src)[0]
                    rows.append(
                        dict(
                            dataset=name,
                            run=run,
                            epsilon=eps,
                            selection=sel,
                            counting=method,
                            bound=l,
                            count_nonprivate=npv,
                            count_dp=dpv,
                            true=true,
                        )
                    )
        if run == 0:
            print(f"  {name}: one run in {time.time() - t0:.1f} s")
    return rows


def _pct(s) -> str:
    a, b, c = np.percentile(s, [10, 50, 90])
    return f"{a:.1f} / {b:.1f} / {c:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--imdb", default=str(SHARED))
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    src = RandomSource(2023)  # experiments: seeded
    t0 = time.time()
    graphs = {"amazon_fashion": person_element_graph(amazon_fashion())}
    if Path(args.imdb).exists():
        graphs["imdb"] = person_element_graph(imdb_reviews(args.imdb))
    rows = []
    for name, g in graphs.items():
        print(f"{name}: {g.n_persons} persons, {g.n_edges} pairs, {g.distinct_count()} words")
        rows += run_dataset(name, g, args.runs, src)
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(OUT / "distinct_count.csv", index=False)
    header = "| dataset | ε | selection | counting | bound (10/50/90%) | non-private count | DP count (10/50/90%) |"
    lines = [header + " DP rel. error (median) |", "|---|---|---|---|---|---|---|---|"]
    for key, g in df.groupby(["dataset", "epsilon", "selection", "counting"], sort=False):
        ds, eps, sel, cnt = key
        rel = np.median(np.abs(g.count_dp - g.true) / g.true)
        lines.append(
            f"| {ds} | {eps:g} | {sel} | {cnt} | {_pct(g.bound)} | {_pct(g.count_nonprivate)} | "
            f"{_pct(g.count_dp)} | {100 * rel:.2f}% |"
        )
    (OUT / "distinct_count_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(ln for ln in lines if "DP max utility" in ln and "matching" in ln))
    for name, p in PAPER.items():
        if name not in graphs:
            continue
        sub = df[(df.dataset == name) & (df.selection == "DP max utility (GEM)") & (df.counting == "matching")]
        for eps, g in sub.groupby("epsilon"):
            b = np.percentile(g.bound, [10, 50, 90])
            c = np.percentile(g.count_dp, [10, 50, 90])
            t = g.true.iloc[0]
            print(
                f"{name} eps={eps:g}: bound {b.round(1)} (paper {p['bound']}), count {c.round(1)} of {t} "
                f"(paper {p['count']} of {p['true']}); median relative error {100 * (t - c[1]) / t:.2f}% "
                f"(paper {100 * (p['true'] - p['count'][1]) / p['true']:.2f}%)"
            )
    _figure(graphs)
    print(f"done in {time.time() - t0:.0f} s")


def _figure(graphs) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(graphs), figsize=(5.5 * len(graphs), 4))
    axes = np.atleast_1d(axes)
    for ax, (name, g) in zip(axes, graphs.items(), strict=True):
        ls = np.arange(1, LMAX + 1)
        ax.plot(ls, dc_matching(g, LMAX), label="matching (exact DC(D; l))")
        ax.plot(ls, dc_greedy(g, LMAX), label="greedy (Algorithm 2)")
        ax.plot(ls, dc_sampling(g, LMAX, RandomSource(1)), label="sampling")
        ax.axhline(g.distinct_count(), color="k", ls=":", label="true distinct count")
        ax.set_xscale("log")
        ax.set_xlabel("contribution bound l")
        ax.set_ylabel("count")
        ax.set_title(name)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "distinct_count_dc_vs_l.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
