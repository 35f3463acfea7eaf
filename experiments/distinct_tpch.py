"""Knop & Steinke (NeurIPS 2023), Table 2 on TPC-H, and the accuracy-against-epsilon sweep (the reference code's
``dependency_on_epsilon``) with the two baselines: R2T (Dong et al. 2022) and the (approximate) shifted inverse
mechanism (Fang, Dong, Yi 2022), beside userdp's distinct count (GEM + matching, the default, and greedy).

Queries (the shifted inverse authors' ``Query/TPCH/Q_{aq,ep,od,rd}.txt``; person = supplier or customer of
nation 24, the filter ``nationkey >= 24``; value = the attribute):
PS.AQ ps_availqty by s_suppkey, L.EP l_extendedprice by s_suppkey, O.OD o_orderdate by c_custkey,
L.RD l_receiptdate by c_custkey (via orders). At scale factor 1 their distinct counts are 9566, 194159, 2406
and 2539, the authors' ``answers``.

Metric (the authors' scripts, whose outputs divided by the true count are Table 2's numbers): 100 runs, the
20 largest and 20 smallest absolute errors dropped, the mean of the other 60, divided by the true count.
Parameters as the authors': epsilon 1, beta 0.1; shifted inverse on a log10 grid of step 0.001 up to
log10 D = 7, 7, 4, 4; R2T's GS = 10000, 10000, 3000, 3000. userdp's release: beta 0.05 (its default),
l_max = 128, 1024, 128, 256: public powers of two above what the TPC-H schema lets one person hold at sf 1
(80 partsupp rows per supplier; about 600 lineitems per supplier; at most 36 orders and 151 lineitems per
customer in the data).

Producing the data (not committed): DuckDB's TPC-H extension generates it offline. Make a side venv (the shared
duckdb cannot load the 1.5.x extension), then let this script call it::

    python3 -m venv /tmp/tpchenv && /tmp/tpchenv/bin/pip install 'duckdb==1.5.*' duckdb-extension-tpch
    python experiments/distinct_tpch.py --generate 1 --data /tmp/tpch_sf1   # ~30 s; 0.1 for a quick run

which writes ``{PS_AQ,L_EP,O_OD,L_RD}.parquet`` (columns person, value; ``*_all.parquet`` without the nation
filter). Then::

    python experiments/distinct_tpch.py --data /tmp/tpch_sf1 --si-data /tmp/tpch_sf01
    python experiments/distinct_tpch.py --mode epsilon --data /tmp/tpch_sf1 --si-data /tmp/tpch_sf01

``--si-data`` runs the shifted inverse (2 tau + 1 LPs per query) on another scale factor when sf 1 is too slow
for the machine. Writes experiments/results/distinct_tpch.csv, distinct_tpch_table.md, distinct_tpch.png
(``--mode table``) or distinct_epsilon.csv, distinct_epsilon.png (``--mode epsilon``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from userdp.distinct import (
    PersonElementGraph,
    dc_greedy,
    dc_matching,
    distinct_count,
    person_element_graph,
    r2t_distinct_count,
    shifted_inverse_distinct_count,
    shifted_inverse_grid,
    shifted_inverse_removals,
)
from userdp.noise import RandomSource

OUT = Path(__file__).resolve().parent / "results"
QUERIES = {  # name: (log10 upper bound for the shifted inverse, R2T's GS) as in the authors' scripts, userdp's l_max
    "PS_AQ": (7, 10000, 128),
    "L_EP": (7, 10000, 1024),
    "O_OD": (4, 3000, 128),
    "L_RD": (4, 3000, 256),
}
TEXT = {  # the vocabularies of the reference code's dependency_on_epsilon: public D = 10^4 / 10^6, GS 1024, l_max 100
    "amazon_fashion": (4, 1024, 100),
    "imdb": (6, 1024, 100),
}
PAPER = {  # Knop & Steinke Table 2 (eps = 1): R2T, (Approx)ShiftedInverse, their two rows
    "PS_AQ": (0.0658, 0.0553, 0.0140, 0.0100),
    "L_EP": (0.1759, 0.0584, 0.0110, 0.0096),
    "O_OD": (0.0061, 0.005, 0.0008, 0.0008),
    "L_RD": (0.150, 0.0061, 0.0037, 0.0001),
}
BETA_BASELINES, BETA_USERDP, STEP = 0.1, 0.05, 0.001

GENERATE = r"""
import glob, os, sys, duckdb
sf, out = float(sys.argv[1]), sys.argv[2]
root = os.path.dirname(os.path.dirname(duckdb.__file__))
ext = glob.glob(os.path.join(root, "duckdb_extension_tpch", "extensions", "*", "tpch.duckdb_extension"))[0]
con = duckdb.connect()
con.execute(f"LOAD '{ext}'")
con.execute(f"CALL dbgen(sf={sf})")
Q = {
 "PS_AQ": "select s_suppkey as person, ps_availqty::BIGINT as value from supplier, partsupp "
          "where s_suppkey = ps_suppkey{s}",
 "L_EP": "select s_suppkey as person, (l_extendedprice * 100)::BIGINT as value from supplier, lineitem "
         "where s_suppkey = l_suppkey{s}",
 "O_OD": "select c_custkey as person, (o_orderdate - DATE '1970-01-01')::BIGINT as value from customer, orders "
         "where c_custkey = o_custkey{c}",
 "L_RD": "select c_custkey as person, (l_receiptdate - DATE '1970-01-01')::BIGINT as value "
         "from customer, orders, lineitem where c_custkey = o_custkey and o_orderkey = l_orderkey{c}",
}
os.makedirs(out, exist_ok=True)
for name, q in Q.items():
    for tag, s, c in (("", " and s_nationkey >= 24", " and c_nationkey >= 24"), ("_all", "", "")):
        con.execute(f"COPY ({q.format(s=s, c=c)}) TO '{os.path.join(out, name + tag)}.parquet' (FORMAT PARQUET)")
        print(name + tag, "written")
"""


def generate(sf: float, out: Path, python: str) -> None:
    subprocess.run([python, "-c", GENERATE, str(sf), str(out)], check=True)


def load_graph(path: Path) -> PersonElementGraph:
    """The deduplicated person-value graph of one query's Parquet file (values ranked by value)."""
    import pandas as pd

    df = pd.read_parquet(path)
    vals, vcode = np.unique(df["value"].to_numpy(), return_inverse=True)
    pers, pcode = np.unique(df["person"].to_numpy(), return_inverse=True)
    pairs = np.unique(pcode.astype(np.int64) * vals.size + vcode)
    p, v = pairs // vals.size, pairs % vals.size
    off = np.r_[0, np.cumsum(np.bincount(p, minlength=pers.size))].astype(np.int64)
    return PersonElementGraph(off, v.astype(np.int64), int(vals.size), vals)


def trimmed_rel(values: list[float], true: int) -> float:
    """The authors' metric: mean of the middle 60% of absolute errors, over the true count."""
    err = np.sort(np.abs(np.asarray(values) - true))
    lo, hi = int(0.2 * err.size), int(0.8 * err.size)
    return float(err[lo:hi].mean() / true)


class Methods:
    """The four methods on one graph, with their data-dependent precomputation done once (and timed)."""

    def __init__(self, graph: PersonElementGraph, log_d: int, gs: int, lmax: int, si_graph: PersonElementGraph, si_eps):
        self.true = graph.distinct_count()
        self.si_true = si_graph.distinct_count()
        self.log_d, self.gs, self.lmax = log_d, gs, lmax
        top = int(graph.degrees().max())
        t = time.time()
        self.matching = dc_matching(graph, lmax)
        self.t_matching = time.time() - t
        t = time.time()
        self.greedy = dc_greedy(graph, lmax)
        self.t_greedy = time.time() - t
        t = time.time()
        self.r2t_counts = dc_matching(graph, max(1, min(top, 2 ** int(np.ceil(np.log2(gs))))))
        self.t_r2t = time.time() - t
        k_max = max(2 * shifted_inverse_grid(10**log_d, STEP, e, BETA_BASELINES)[1] for e in si_eps) if si_eps else 0
        t = time.time()
        self.removals = shifted_inverse_removals(si_graph, k_max) if si_eps else None
        self.t_si = time.time() - t
        self.si_graph = si_graph

    def run(self, method: str, eps: float, src: RandomSource) -> float:
        if method == "userdp matching":
            return distinct_count(None, eps, BETA_USERDP, self.lmax, "matching", rng=src, counts=self.matching).value
        if method == "userdp greedy":
            return distinct_count(None, eps, BETA_USERDP, self.lmax, "greedy", rng=src, counts=self.greedy).value
        if method == "R2T":
            return r2t_distinct_count(None, eps, BETA_BASELINES, self.gs, src, counts=self.r2t_counts).value
        return shifted_inverse_distinct_count(
            None, eps, BETA_BASELINES, 10**self.log_d, STEP, src, removals=self.removals, distinct=self.si_true
        ).value


METHODS = ("R2T", "shifted inverse", "userdp matching", "userdp greedy")


def sweep(name: str, m: Methods, eps_list, si_eps, runs: int, seed: int, si_label: str, methods) -> list[dict]:
    rows = []
    for eps in eps_list:
        for method in methods:
            if method == "shifted inverse" and eps not in si_eps:
                continue
            true = m.si_true if method == "shifted inverse" else m.true
            for rep in range(3):  # three seeds, each `runs` runs
                src = RandomSource(seed + 1000 * rep)
                t = time.time()
                vals = [m.run(method, eps, src) for _ in range(runs)]
                per_run = (time.time() - t) / runs
                pre = {"R2T": m.t_r2t, "shifted inverse": m.t_si, "userdp matching": m.t_matching}.get(
                    method, m.t_greedy
                )
                rows.append(
                    dict(
                        query=name,
                        data=si_label if method == "shifted inverse" else "main",
                        method=method,
                        epsilon=eps,
                        seed=seed + 1000 * rep,
                        true=true,
                        trimmed_rel_error=trimmed_rel(vals, true),
                        median_rel_error=float(np.median(np.abs(np.asarray(vals) - true)) / true),
                        median_value=float(np.median(vals)),
                        precompute_s=pre,
                        per_release_s=per_run,
                    )
                )
                print(name, method, eps, rows[-1]["trimmed_rel_error"], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("/tmp/tpch_sf1"))
    ap.add_argument("--si-data", type=Path, default=None, help="data for the shifted inverse (default: --data)")
    ap.add_argument("--generate", type=float, default=None, help="generate TPC-H at this scale factor into --data")
    ap.add_argument("--python", default="/tmp/tpchenv/bin/python", help="the side venv's python (duckdb 1.5)")
    ap.add_argument("--mode", choices=("table", "epsilon"), default="table")
    ap.add_argument("--runs", type=int, default=100, help="runs per seed (three seeds)")
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--queries", nargs="*", default=list(QUERIES))
    ap.add_argument("--methods", nargs="*", default=list(METHODS), help="a subset of the methods")
    ap.add_argument("--append", action="store_true", help="replace only these methods' rows in the CSV")
    ap.add_argument(
        "--imdb", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/imdb_reviews.jsonl.xz"
    )
    args = ap.parse_args()
    if args.generate is not None:
        generate(args.generate, args.data, args.python)
        return
    import pandas as pd

    si_dir = args.si_data or args.data
    si_label = "main" if args.si_data is None else si_dir.name
    if args.mode == "table":
        eps_list, si_eps = (0.5, 1.0, 2.0, 4.0), (1.0, 2.0, 4.0)
    else:
        eps_list, si_eps = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0), (1.0, 2.0, 4.0, 8.0)
    if "shifted inverse" not in args.methods:
        si_eps = ()
    rows = []
    # the epsilon sweep runs the shifted inverse on TPC-H only when --si-data names where (its LPs are slow)
    si_tpch = args.mode == "table" or args.si_data is not None
    graphs = {
        q: (load_graph(args.data / f"{q}.parquet"), load_graph(si_dir / f"{q}.parquet") if si_tpch else None)
        for q in args.queries
    }
    if args.mode == "epsilon":
        from userdp.datasets import amazon_fashion, imdb_reviews

        g = person_element_graph(amazon_fashion())
        text = {"amazon_fashion": (g, g)}
        if args.imdb is not None and args.imdb.exists():
            text["imdb"] = (person_element_graph(imdb_reviews(args.imdb)), None)  # no shifted inverse: LP too big
        graphs = {**text, **graphs}
    for name, (g, sg) in graphs.items():
        log_d, gs, lmax = QUERIES.get(name, TEXT.get(name))
        m = Methods(g, log_d, gs, lmax, sg if sg is not None else g, si_eps if sg is not None else ())
        label = si_label if name in QUERIES else "main"
        rows += sweep(name, m, eps_list, si_eps if sg is not None else (), args.runs, args.seed, label, args.methods)
    df = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    stem = "distinct_tpch" if args.mode == "table" else "distinct_epsilon"
    if args.append and (OUT / f"{stem}.csv").exists():
        old = pd.read_csv(OUT / f"{stem}.csv")
        old = old[~(old["method"].isin(args.methods) & old["query"].isin(list(graphs)))]
        df = pd.concat([old, df], ignore_index=True)
    df.to_csv(OUT / f"{stem}.csv", index=False)
    summary = df.groupby(["query", "method", "epsilon"]).agg(
        trimmed=("trimmed_rel_error", "mean"),
        trimmed_sd=("trimmed_rel_error", "std"),
        median=("median_rel_error", "mean"),
        pre=("precompute_s", "first"),
        per=("per_release_s", "mean"),
    )
    if args.mode == "table":
        write_table(summary, df.groupby(["query", "method"])["data"].first().to_dict())
    plot(summary, stem)


def write_table(summary, data: dict) -> None:
    lines = [
        "| query | method | paper (eps 1) | measured eps 1 (sd over 3 seeds) | eps 0.5 | eps 2 | eps 4 | "
        "precompute s | per release s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    paper_col = {"R2T": 0, "shifted inverse": 1, "userdp matching": 2, "userdp greedy": 3}
    for q in [q for q in QUERIES if (q, "R2T", 1.0) in summary.index]:
        for method in METHODS:
            cells = []
            for e in (1.0, 0.5, 2.0, 4.0):
                key = (q, method, e)
                if key in summary.index:
                    r = summary.loc[key]
                    cells.append(f"{r.trimmed:.4f} ({r.trimmed_sd:.4f})" if e == 1.0 else f"{r.trimmed:.4f}")
                else:
                    cells.append("-")
            if (q, method, 1.0) not in summary.index:
                continue
            r = summary.loc[(q, method, 1.0)]
            where = data.get((q, method), "main")
            label = method + (f" ({where})" if where != "main" else "")
            lines.append(
                f"| {q} | {label} | {PAPER[q][paper_col[method]]} | "
                + " | ".join(cells)
                + f" | {r.pre:.2f} | {r.per:.4f} |"
            )
    (OUT / "distinct_tpch_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def plot(summary, stem: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queries = sorted({k[0] for k in summary.index})
    fig, axes = plt.subplots(1, len(queries), figsize=(4 * len(queries), 3.4), squeeze=False)
    for ax, q in zip(axes[0], queries, strict=True):
        for method in METHODS:
            sub = summary.loc[[k for k in summary.index if k[0] == q and k[1] == method]]
            if len(sub):
                ax.plot([k[2] for k in sub.index], np.maximum(sub["trimmed"].to_numpy(), 1e-6), "o-", label=method)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(q)
        ax.set_xlabel("epsilon")
    axes[0][0].set_ylabel("relative error (trimmed mean)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / f"{stem}.png", dpi=110)


if __name__ == "__main__":
    sys.exit(main())
