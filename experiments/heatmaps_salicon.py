"""Ghazi et al. (AAAI 2023), appendix E.2: Figures 8 and 9 on the SALICON 10-image sample.

Data: ``../shared/datasets/salicon_fixations_examples.json.xz``, the 10-image example file of the NUS-VIP
``salicon-api`` repository (Jiang, Huang, Duan & Zhao, "SALICON: Saliency in Context", CVPR 2015): 640 x 480
images, 55-67 workers each; a worker is a user and the worker's fixations (``[row, column]`` pixels, 1-based)
are the user's points, each user's points weighted ``1 / count`` (the user's distribution, as in section 4).
**Licence: Creative Commons Attribution-NonCommercial.** The data are read from the shared datasets folder for
this experiment only; no copy of them goes into the package or its data.

Setup (appendix E.2): the images downsized to Delta_1 x Delta_2 = 320 x 240 (every fixation snapped to a
2 x 2-pixel cell), epsilon in {1, 2, 5, 8, 10, 20}, n = 50 users sampled per trial, every algorithm of
``heatmaps_paper.ALGOS`` on the same sum (given the public n = 50 where it needs one). The paper used 38 images
with >= 50 users and 2 trials each (76 runs per epsilon); this sample has 10 images, so ``--trials`` (default
4) trials per image give 40 runs. Sampling 50 of 55-67 workers, the trials of one image share most of their
users, so the 95% intervals are given over the runs (as the paper's) and, for the paired comparisons, over
the 10 image means (the conservative one). Metrics: SIM, CC, KL and exact EMD (section 4) between the
heatmaps of the true and released sums, filtered with the untruncated Gaussian of section 2.3 at
sigma = Delta_1 / 128 = 2.5 cells (5 px; the paper does not state sigma); SIM, CC and KL also at 9.5 cells
(19 px, the blur of salicon-api's ``buildFixMap``).

Figure 9: two images (the two with most workers), 50 users, epsilon = 10: the truth, the Laplace baseline,
its top-0.01% variant, the paper's algorithm (as in the paper) and userdp's default. The paper overlays the
maps on the photographs; the photographs are not in the shared data, so the maps are drawn alone.

Outputs (experiments/results/): ``heatmaps_salicon_fig8.csv`` (one row per run, algorithm and sigma),
``heatmaps_salicon_fig8.png``, ``heatmaps_salicon_fig8.md`` (means with 95% intervals, paired comparisons of
the default), ``heatmaps_salicon_fig9.png``. Epsilons already in the CSV are skipped (an interrupted run
resumes).

Run: nice -n 10 python experiments/heatmaps_salicon.py [--trials T] [--workers W] [--summary-only]
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heatmaps_paper as P  # noqa: E402  (the algorithms, metrics, intervals and plots of figures 1, 4-7, 11)

from userdp.heatmaps import gaussian_heatmap  # noqa: E402
from userdp.noise import RandomSource  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "salicon_fixations_examples.json.xz"
OUT = P.OUT
ROWS, COLS = 240, 320  # Delta_2 x Delta_1 of appendix E.2: the 480 x 640 images at half resolution
N_USERS = 50
EPSILONS = (1.0, 2.0, 5.0, 8.0, 10.0, 20.0)
SIGMAS = (COLS / 128, 9.5)  # 2.5 cells (Delta_1 / 128, as figure 1's Delta / 128); 9.5 cells = salicon-api's 19 px
CSV = OUT / "heatmaps_salicon_fig8.csv"


def load_images(path: Path = DATA) -> list[dict]:
    """Per image (most workers first): its id, and per worker the fixations' cells on the 240 x 320 grid."""
    with lzma.open(path, "rt") as f:
        d = json.load(f)
    by_image: dict[int, dict[int, np.ndarray]] = {}
    for a in d["annotations"]:
        fx = np.asarray(a["fixations"], dtype=np.int64).reshape(-1, 2) - 1  # 1-based [row, column] pixels
        if fx.size == 0:
            continue
        cells = np.column_stack([np.clip(fx[:, 0] // 2, 0, ROWS - 1), np.clip(fx[:, 1] // 2, 0, COLS - 1)])
        by_image.setdefault(a["image_id"], {})[a["worker_id"]] = cells
    images = [dict(image=k, workers=v) for k, v in by_image.items()]
    return sorted(images, key=lambda im: (-len(im["workers"]), im["image"]))


def image_sum(workers: dict[int, np.ndarray], pick) -> np.ndarray:
    """``s = sum_i p_i`` over the picked workers: each worker's fixations as a distribution on the grid."""
    s = np.zeros((ROWS, COLS))
    for w in pick:
        c = workers[w]
        np.add.at(s, (c[:, 0], c[:, 1]), 1.0 / len(c))
    return s


def sample_sums(images: list[dict], trials: int) -> list[tuple[int, int, np.ndarray]]:
    """``trials`` samples of 50 workers per image (the same at every epsilon)."""
    out = []
    for im in images:
        ids = np.array(sorted(im["workers"]))
        for t in range(trials):
            gen = np.random.default_rng(zlib.crc32(f"salicon/{im['image']}/{t}".encode()))
            out.append((im["image"], t, image_sum(im["workers"], gen.choice(ids, size=N_USERS, replace=False))))
    return out


def fig8(images: list[dict], trials: int, workers: int) -> None:
    done = P._done(CSV, "epsilon")
    sums = sample_sums(images, trials)
    for eps in EPSILONS:
        if eps in done:
            continue
        tasks = [("salicon", dict(image=img, trial=t, repeat=0), s, eps, N_USERS,
                  zlib.crc32(f"salicon/{img}/{t}/{eps}".encode()), SIGMAS[:1], SIGMAS)
                 for img, t, s in sums]  # fmt: skip
        P._run(tasks, CSV, workers, f"figure 8, epsilon = {eps:g}")


def fig9(images: list[dict]) -> None:
    from userdp.data.domains import BoxDomain
    from userdp.report.maps import MapPanel, render_maps

    sg, eps = SIGMAS[0], 10.0
    names = ("Laplace", "Laplace top 0.01%", "sparse EMD (paper)", P.OURS)
    panels = []
    for im in images[:2]:
        ids = np.array(sorted(im["workers"]))
        gen = np.random.default_rng(zlib.crc32(f"salicon/fig9/{im['image']}".encode()))
        s = image_sum(im["workers"], gen.choice(ids, size=N_USERS, replace=False))
        # maps draw row 0 at the bottom: flip, so that the image's top is at the top
        panels.append(MapPanel(np.flipud(gaussian_heatmap(s / s.sum(), sg)), f"image {im['image']}: true",
                               left_out=None))  # fmt: skip
        for name in names:
            est = P.ALGOS[name](s, eps, RandomSource(im["image"]), N_USERS)  # experiments: seeded
            panels.append(MapPanel(np.flipud(gaussian_heatmap(est, sg)), name, left_out=None))
    box = BoxDomain((-480.0, 0.0), (0.0, 640.0), names=("pixel row (down)", "pixel column"))
    render_maps(panels, OUT / "heatmaps_salicon_fig9.png", box, ncols=len(names) + 1, dpi=90,
                title=f"SALICON, {N_USERS} users, ε = {eps:g}, 320 × 240 cells, σ = {sg:g} cells")  # fmt: skip
    print("figure 9: written", flush=True)


def markdown(df: pd.DataFrame) -> str:
    """A pipe table (no tabulate needed)."""
    cells = [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row] for row in df.itertuples(index=False)]
    head = [str(c) for c in df.columns]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(rows + ["| " + " | ".join(r) + " |" for r in cells])


def summarize() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not CSV.exists():
        return
    df = pd.read_csv(CSV)
    sg0 = df.sigma.min()
    d0 = df[df.sigma == sg0]
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.2))
    for ax, metric in zip(axes, ("SIM", "CC", "KL", "EMD"), strict=True):
        P.curves(ax, d0, "epsilon", metric)
        ax.set_title(f"{metric} ({'higher' if P.HIGHER_IS_BETTER[metric] else 'lower'} is better), σ = {sg0:g}")
    axes[0].legend(fontsize=7)
    runs = d0.groupby("epsilon").size().max() // d0.algorithm.nunique()
    fig.suptitle(f"SALICON (10 images, n = {N_USERS}, 320 × 240): mean and 95% interval over {runs} runs")
    fig.tight_layout()
    fig.savefig(OUT / "heatmaps_salicon_fig8.png", dpi=90)
    plt.close(fig)

    lines = [f"# SALICON, appendix E.2 (Figure 8): {runs} runs per ε (10 images), n = {N_USERS}, 320 × 240", ""]
    lines += ["Data: SALICON (Jiang et al., CVPR 2015), CC BY-NC: non-commercial, used for experiments only.", ""]
    for metric in ("SIM", "CC", "KL", "EMD"):  # the means at sigma = 2.5 cells (those at 9.5: in the CSV)
        cell = d0.groupby(["algorithm", "epsilon"])[metric].agg(lambda x: "{:.3g} ± {:.2g}".format(*P.ci95(x)))
        tab = cell.unstack().reindex([a for a in P.ALGOS if a in cell.index.get_level_values(0)])
        tab.columns = [f"ε = {e:g}" for e in tab.columns]
        better = "higher" if P.HIGHER_IS_BETTER[metric] else "lower"
        lines += [f"## {metric} ({better} is better), σ = {sg0:g} cells, mean ± 95% interval over the runs", ""]
        lines += [markdown(tab.reset_index()), ""]
    tab = pd.concat([P.paired(df, m, sg0, unit="image") for m in ("SIM", "CC", "KL", "EMD")])
    tab = tab.rename(columns={"ci95_cell_months": "ci95_images"})
    tab = tab[tab.versus.isin(["sparse EMD (paper)", "dense EMD (app. D)", "adaptive grid"])]
    lines += [f"## userdp's default against the others, paired on the same runs (σ = {sg0:g} cells)", "",
              "advantage: how much better the default is (positive = better); ci95 over the runs, ci95_images "
              "over the 10 image means.", ""]  # fmt: skip
    cols = ["metric", "versus", "epsilon", "runs", "advantage", "ci95", "ci95_images", "win_rate"]
    lines += [markdown(tab[cols]), ""]
    (OUT / "heatmaps_salicon_fig8.md").write_text("\n".join(lines))
    print(d0.groupby(["epsilon", "algorithm"])[["SIM", "CC", "KL", "EMD"]].mean().round(3).to_string(), flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4, help="samples of 50 workers per image (the paper: 2 on 38)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        images = load_images()
        print(f"{len(images)} images, {min(len(i['workers']) for i in images)}-"
              f"{max(len(i['workers']) for i in images)} workers each", flush=True)  # fmt: skip
        fig9(images)
        fig8(images, args.trials, args.workers)
    summarize()


if __name__ == "__main__":
    main()
