"""Per-key counts with privately chosen contribution bounds (issue 18, part 2): the error of the counts
against epsilon, with the bounds chosen by GEM against fixed bounds read off the data non-privately.

Data: Foursquare NYC check-ins (1,083 persons, 227,428 check-ins). Two tasks:

* check-ins per venue category, the 251 categories taken as public keys (Foursquare's category list is
  public);
* check-ins per venue, the venues selected privately (weighted Gaussian set union, half of epsilon).

Methods, all at the same total (epsilon, delta = 1e-6):

* userdp ``bounds="auto"``: GEM over L0, Linf in {1, 2, 4, ..., 256} with 20% of the counts' budget, Laplace
  and Gaussian noise on the counts;
* fixed bounds (L0, Linf) at the maximum, the 99th and the 90th percentile of the persons' numbers of keys
  and of records per (person, key), read off the data without privacy (as the distinct-count experiment
  does), with the whole budget on the counts;
* the same fixed bounds at the median, a common hand choice (Laplace noise for all fixed bounds);
* with ``--peers-python`` (a Python with pipeline-dp 0.3, as for experiments/vocabulary.py), on the
  categories: PipelineDP's per-key COUNT with public partitions at the 90th-percentile bounds (Laplace and
  Gaussian), at the median bounds, and with ``L0`` chosen by its own ``PrivateL0Calculator`` (20% of epsilon,
  its candidate grid 1..251, ``Linf`` fixed at the 90th percentile, as it needs one).

Error: the mean absolute error of the released counts against the true (unbounded) counts, over the keys
released, averaged over 20 runs. Writes experiments/results/key_counts.csv, key_counts_table.md and
key_counts.png.

Run: python experiments/key_counts.py [--peers-python /tmp/pdpenv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from userdp.datasets import foursquare_nyc_table
from userdp.engines.base import Columns
from userdp.engines.memory import MemoryEngine
from userdp.vocabulary import private_key_counts

OUT = Path(__file__).resolve().parent / "results"
EPSILONS = (0.5, 1.0, 2.0, 4.0)
DELTA = 1e-6
RUNS = 20


PEERS = r"""
import json, sys
import numpy as np
import pandas as pd
import pipeline_dp
from pipeline_dp.dataset_histograms import computing_histograms
from pipeline_dp.private_contribution_bounds import PrivateL0Calculator

req = json.loads(sys.stdin.read())
df = pd.read_csv(req["path"], compression="xz", usecols=["user", "category_name"])
rows = list(zip(df["user"].tolist(), df["category_name"].tolist()))
cats = sorted(df["category_name"].unique().tolist())
true = df.groupby("category_name").size().reindex(cats).to_numpy(dtype=float)
ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                 value_extractor=lambda r: 1)
backend = pipeline_dp.LocalBackend()
hist = list(computing_histograms.compute_dataset_histograms(rows, ext, backend))
LAP, GAU = pipeline_dp.NoiseKind.LAPLACE, pipeline_dp.NoiseKind.GAUSSIAN


def count(eps, l0, linf, noise):
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=req["delta"])
    params = pipeline_dp.AggregateParams(noise_kind=noise, metrics=[pipeline_dp.Metrics.COUNT],
                                         max_partitions_contributed=int(l0), max_contributions_per_partition=int(linf))
    res = pipeline_dp.DPEngine(acc, backend).aggregate(rows, params, ext, public_partitions=cats)
    acc.compute_budgets()
    got = dict((k, v.count) for k, v in res)
    return float(np.mean(np.abs(np.array([got[c] for c in cats]) - true)))


def private_l0(eps):
    p = pipeline_dp.CalculatePrivateContributionBoundsParams(
        aggregation_noise_kind=LAP, aggregation_eps=0.8 * eps, aggregation_delta=req["delta"],
        calculation_eps=0.2 * eps, max_partitions_contributed_upper_bound=len(cats))
    return int(list(PrivateL0Calculator(p, cats, hist, backend).calculate())[0])


(l0_90, linf_90), (l0_50, linf_50) = req["p90"], req["p50"]
out = []
for eps in req["epsilons"]:
    errs = {f"PipelineDP Laplace p90 ({l0_90}, {linf_90})": [], f"PipelineDP Gaussian p90 ({l0_90}, {linf_90})": [],
            f"PipelineDP Laplace p50 ({l0_50}, {linf_50})": [], "PipelineDP PrivateL0Calculator": []}
    for _ in range(req["runs"]):
        errs[f"PipelineDP Laplace p90 ({l0_90}, {linf_90})"].append(count(eps, l0_90, linf_90, LAP))
        errs[f"PipelineDP Gaussian p90 ({l0_90}, {linf_90})"].append(count(eps, l0_90, linf_90, GAU))
        errs[f"PipelineDP Laplace p50 ({l0_50}, {linf_50})"].append(count(eps, l0_50, linf_50, LAP))
        errs["PipelineDP PrivateL0Calculator"].append(count(0.8 * eps, private_l0(eps), linf_90, LAP))
    out += [[eps, m, float(np.mean(v))] for m, v in errs.items()]
print(json.dumps(out))
"""


def _records(key: str):
    eng = MemoryEngine()
    sets, mult = eng.key_records(eng.load(foursquare_nyc_table(), Columns("user", key)))
    labels = np.asarray(sets.domain.labels, dtype=object)
    return sets.offsets, sets.items, mult, labels


def _fixed(offsets, mult, q):
    deg = np.diff(offsets)
    pick = (lambda v: int(v.max())) if q == "max" else (lambda v: max(1, int(np.ceil(np.percentile(v, q)))))
    return pick(deg[deg > 0]), pick(mult)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers-python", default=None, help="a Python with pipeline-dp installed")
    data = Path(__file__).resolve().parents[2] / "shared/datasets/foursquare_nyc_checkins.csv.xz"
    ap.add_argument("--checkins", default=str(data), help="the Foursquare check-ins (for PipelineDP)")
    args = ap.parse_args()
    rows = []
    tasks = (("categories (public keys)", "category_name", True), ("venues (selected)", "venue_id", False))
    for task, key, public in tasks:
        offsets, keys, mult, labels = _records(key)
        truth = dict(zip(labels, np.bincount(keys, weights=mult, minlength=labels.size), strict=True))
        methods = {
            "userdp auto (GEM), Laplace": ("auto", "laplace"),
            "userdp auto (GEM), Gaussian": ("auto", "gaussian"),
        }
        for q in ("max", 99, 90, 50):
            l0, linf = _fixed(offsets, mult, q)
            methods[f"fixed {q if q == 'max' else f'p{q}'} ({l0}, {linf})"] = ((l0, linf), "laplace")
        for eps in EPSILONS:
            for name, (bounds, noise) in methods.items():
                errs, n_keys, chosen = [], [], []
                for run in range(RUNS):
                    rel = private_key_counts(offsets, keys, mult, labels, eps, DELTA,
                                             public_keys=labels if public else None, bounds=bounds, noise=noise,
                                             select_fraction=0.2, max_keys=100,  # the results' setting
                                             rng=1000 * run + 7)  # fmt: skip
                    got = rel.value["keys"]
                    if got.size:
                        t = np.array([truth[k] for k in got])
                        errs.append(float(np.mean(np.abs(rel.value["counts"] - t))))
                    n_keys.append(got.size)
                    chosen.append(f"{rel.value['l0']}x{rel.value['linf']}")
                mode = pd.Series(chosen).mode().iloc[0]
                rows.append((task, eps, name, float(np.mean(errs)) if errs else np.nan, float(np.mean(n_keys)), mode))
                print(rows[-1], flush=True)
        if public and args.peers_python and Path(args.checkins).exists():
            req = {"path": args.checkins, "delta": DELTA, "epsilons": list(EPSILONS), "runs": RUNS,
                   "p90": _fixed(offsets, mult, 90), "p50": _fixed(offsets, mult, 50)}  # fmt: skip
            done = subprocess.run([args.peers_python, "-c", PEERS], input=json.dumps(req), capture_output=True,
                                  text=True, check=True)  # fmt: skip
            for eps, method, err in json.loads(done.stdout):
                rows.append((task, eps, method, err, float(labels.size), ""))
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows, columns=["task", "epsilon", "method", "mean_abs_error", "keys_released", "bounds"])
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "key_counts.csv", index=False)
    lines = []
    for task, sub in df.groupby("task", sort=False):
        piv = sub.pivot(index="epsilon", columns="method", values="mean_abs_error")
        piv = piv[[m for m in sub.method.unique()]]
        lines += [f"**{task}**: mean absolute error per released key (records), average of {RUNS} runs", "",
                  "| ε | " + " | ".join(piv.columns) + " |", "|---|" + "---|" * len(piv.columns)]  # fmt: skip
        for eps, r in piv.iterrows():
            best = r.min()
            cells = [
                "none released" if not np.isfinite(v) else f"**{v:,.0f}**" if v == best else f"{v:,.0f}" for v in r
            ]
            lines.append(f"| {eps:g} | " + " | ".join(cells) + " |")
        lines.append("")
    (OUT / "key_counts_table.md").write_text("\n".join(lines))
    print("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(df.task.unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 3.8), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        sub = df[df.task == task]
        for m in sub.method.unique():
            s = sub[sub.method == m]
            ax.plot(s.epsilon, s.mean_abs_error, marker="o", label=m)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"Foursquare check-ins per {task}", fontsize=10)
        ax.set_xlabel("ε (δ = 1e-6)")
        ax.set_ylabel("mean |error| per key")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "key_counts.png", dpi=110)


if __name__ == "__main__":
    main()
