"""Knop & Steinke (NeurIPS 2023), Tables 1, 3, 4, 6, 7 and Figure 1: Amazon Fashion, IMDB, a Reddit sample.

The paper's Tables 4-7 are the bound-selection results on Amazon Fashion, Amazon Industrial and Scientific,
Reddit and IMDB; Table 1 collects their DP max utility + DP matching rows; Table 3 is the data sets' statistics.
For selection of the contribution bound l in {max contribution, 90th percentile (Reddit: also 99th),
non-private max utility, DP max utility (GEM)} x counting in {sampling, greedy, matching} x {non-private, DP}:
the 10th/50th/90th percentiles over 100 runs of the chosen bound and of the count, at eps = 1 and eps = 2,
beta = 0.05, l_max = 100 (the non-private selections may exceed l_max: max contribution is the largest degree).
The DP count is Algorithm 1's release (budget split eps/2 + eps/2); non-private counts are DC_method(l).
Persons: Amazon reviewers; IMDB reviews (each review a person); Reddit authors of the 3,486-author sample
reddit_ngrams.csv.xz (bigrams split into words, as experiments/vocabulary.py loads it). Words: lower-cased
\\w+ tokens.

Writes experiments/results/distinct_count.csv, distinct_count_table.md, distinct_count_datasets.md (Table 3),
distinct_count_reddit.md (Table 6's shape, the paper's numbers beside) and distinct_count_dc_vs_l.png.
Run: python experiments/distinct_count.py [--imdb PATH] [--reddit PATH] [--runs 100]
"""

from __future__ import annotations

import argparse
import lzma
import math
import time
from pathlib import Path

import numpy as np

from userdp.datasets import amazon_fashion, imdb_reviews, words_dataset
from userdp.distinct import dc_greedy, dc_matching, dc_sampling, gem_select, laplace_lower_bound, person_element_graph
from userdp.noise import RandomSource

OUT = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imdb_reviews.jsonl.xz"
REDDIT = SHARED.with_name("reddit_ngrams.csv.xz")
BETA, LMAX = 0.05, 100
PAPER = {  # Tables 4, 7 and 6 (= Table 1's rows): DP max utility (GEM) + DP matching, 10th/50th/90th percentiles
    "amazon_fashion": dict(true=1450, bound=(6.9, 9, 13.1), count=(1220.6, 1319.1, 1394.2)),
    "imdb": dict(true=98726, bound=(12, 16, 21), count=(98555.6, 98670.4, 98726.8)),
    "reddit": dict(true=102835, bound=(14.9, 18.5, 28.0), count=(102379.7, 102512.6, 102643.9)),
}
#: Table 3: people, records (person-word pairs), words per person min / median / max, vocabulary size.
PAPER_STATS = {
    "amazon_fashion": (404, 8533, 1, 14.0, 139, 1450),
    "imdb": (50000, 6688844, 5, 110.0, 925, 98726),
    "reddit": (223388, 7117494, 0, 18.0, 1724, 102835),
}
#: Percentile selections per data set: the paper's tables use the 90th; its text (section 4.3) the 99th.
PERCENTILES = {"reddit": (90, 99)}
#: Table 6 (Reddit): (selection, counting) -> (bound 10/50/90, count 10/50/90); None where the paper shows "-".
#: "DP ..." counting is the DP count, plain counting the non-private DC_method(l) at the selected bound.
PAPER_TABLE6 = {
    ("90th percentile", "DP sampling"): ((None, 75, None), (92480.7, 92654.8, 92812.1)),
    ("90th percentile", "DP greedy"): ((None, 75, None), (102544.8, 102665.7, 102817.7)),
    ("90th percentile", "DP matching"): ((None, 75, None), (102651.1, 102784.1, 102907.8)),
    ("non-private max utility", "sampling"): ((None, 99, None), (95606.9, 95692.0, 95750.3)),
    ("non-private max utility", "greedy"): ((None, 52, None), (None, 102543, None)),
    ("non-private max utility", "matching"): ((None, 32, None), (None, 102685, None)),
    ("DP max utility (GEM)", "sampling"): ((89.0, 96.0, 99.0), (94549.9, 95394.5, 95656.5)),
    ("DP max utility (GEM)", "greedy"): ((26.0, 33.0, 50.0), (102015.0, 102253.0, 102527.0)),
    ("DP max utility (GEM)", "matching"): ((14.0, 18.5, 30.0), (102357.0, 102501.5, 102671.0)),
    ("DP max utility (GEM)", "DP sampling"): ((88.8, 96.0, 99.0), (94665.2, 95375.5, 95693.5)),
    ("DP max utility (GEM)", "DP greedy"): ((27.0, 34.0, 53.0), (102053.2, 102289.6, 102531.2)),
    ("DP max utility (GEM)", "DP matching"): ((14.9, 18.5, 28.0), (102379.7, 102512.6, 102643.9)),
}
REDDIT_SEED = 6  # Reddit's own noise stream (Table 6): the Amazon and IMDB rows keep seed 2023's draws


def reddit_graph(path: Path):
    """Authors of the Reddit sample, each with the words of their bigrams (as experiments/vocabulary.py)."""
    import pyarrow.csv as pc

    with lzma.open(path) as fh:
        t = pc.read_csv(fh)
    words = [n.strip("()").replace("'", " ").replace(",", " ") for n in t.column("ngram").to_pylist()]
    return person_element_graph(words_dataset(t.column("author").to_pylist(), words))


def dataset_stats(graph) -> tuple:
    """Table 3's row: people, records (person-word pairs), words per person min / median / max, vocabulary."""
    deg = graph.degrees()
    return (graph.n_persons, graph.n_edges, int(deg.min()), float(np.median(deg)), int(deg.max()),
            graph.distinct_count())  # fmt: skip


def run_dataset(name: str, graph, runs: int, src: RandomSource, percentiles: tuple[int, ...] = (90,)) -> list[dict]:
    deg = graph.degrees()
    L = max(LMAX, int(deg.max()))
    exact = {"matching": dc_matching(graph, L), "greedy": dc_greedy(graph, L)}
    true = graph.distinct_count()
    fixed = {f"{p}th percentile": int(np.ceil(np.percentile(deg, p))) for p in percentiles}
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
                    **fixed,
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
    ap.add_argument("--reddit", default=str(REDDIT))
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    src = RandomSource(2023)  # experiments: seeded
    t0 = time.time()
    graphs = {"amazon_fashion": person_element_graph(amazon_fashion())}
    if Path(args.imdb).exists():
        graphs["imdb"] = person_element_graph(imdb_reviews(args.imdb))
    if Path(args.reddit).exists():
        graphs["reddit"] = reddit_graph(Path(args.reddit))
    rows = []
    for name, g in graphs.items():
        print(f"{name}: {g.n_persons} persons, {g.n_edges} pairs, {g.distinct_count()} words")
        rs = RandomSource(REDDIT_SEED) if name == "reddit" else src
        rows += run_dataset(name, g, args.runs, rs, PERCENTILES.get(name, (90,)))
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
    _stats_table(graphs)
    if "reddit" in graphs:
        _table6(df[df.dataset == "reddit"])
    _figure(graphs)
    print(f"done in {time.time() - t0:.0f} s")


def _stats_table(graphs) -> None:
    """Table 3: the data sets' statistics, the paper's row under each of ours."""
    lines = ["| data set | source | people | records | words per person min / median / max | vocabulary |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, g in graphs.items():
        for source, st in (("userdp", dataset_stats(g)), ("paper", PAPER_STATS[name])):
            p, r, lo, med, hi, v = st
            lines.append(f"| {name} | {source} | {p:,} | {r:,} | {lo} / {med:g} / {hi} | {v:,} |")
    (OUT / "distinct_count_datasets.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _num(x: float) -> str:
    return f"{int(x)}" if float(x).is_integer() else f"{x:.1f}"


def _cell(v) -> str:
    a, b, c = v
    if a is None or a == c:
        return "—" if b is None else _num(b)
    return f"{_num(a)} / {_num(b)} / {_num(c)}"


def _table6(df) -> None:
    """Table 6's shape on the Reddit sample at eps = 1, the paper's numbers beside (10th / 50th / 90th
    percentiles over the runs; one number where the paper's row is deterministic)."""
    lines = ["| selection | counting | bound (userdp) | bound (paper) | count (userdp) | count (paper) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    d1 = df[df.epsilon == 1.0]
    for sel in d1.selection.unique():
        # as the paper: fixed bounds with DP counts only, the non-private selection with non-private counts only
        for dp in {"non-private max utility": (False,), "DP max utility (GEM)": (False, True)}.get(sel, (True,)):
            for cnt in ("sampling", "greedy", "matching"):
                g = d1[(d1.selection == sel) & (d1.counting == cnt)]
                label = f"DP {cnt}" if dp else cnt
                pct = [np.percentile(g.bound, [10, 50, 90]),
                       np.percentile(g.count_dp if dp else g.count_nonprivate, [10, 50, 90])]  # fmt: skip
                ours = [_cell(tuple(round(float(x), 1) for x in p)) for p in pct]
                paper = PAPER_TABLE6.get((sel, label), ((None, None, None), (None, None, None)))
                lines.append(f"| {sel} | {label} | {ours[0]} | {_cell(paper[0])} | {ours[1]} | {_cell(paper[1])} |")
    t = int(df.true.iloc[0])
    lines.append(f"| true distinct count | | | | {t:,} | {PAPER['reddit']['true']:,} |")
    (OUT / "distinct_count_reddit.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


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
