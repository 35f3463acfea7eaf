"""Draw docs/assets/midtown-heatmaps.png, the picture at the top of README.md and of the documentation's home
page: Foursquare check-ins in Midtown Manhattan, non-private next to three DP heatmaps at epsilon = 1 (userdp's
default, the paper's sparse EMD aggregation and the Laplace baseline), on the grid `userdp heatmap` uses (256
cells along the longer side, cells square on the ground).

Run from the repository root: ``python tools/make_readme_figure.py``. The noise is seeded so that the picture
only changes when the code does (seeded noise is for demonstrations: a real release leaves ``rng`` unset).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import PowerNorm  # noqa: E402

from userdp import datasets, releases  # noqa: E402
from userdp.data import BoxDomain  # noqa: E402
from userdp.heatmaps import gaussian_heatmap, user_grid_sum  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "assets" / "midtown-heatmaps.png"


def main() -> None:
    checkins = datasets.foursquare_nyc()
    midtown = BoxDomain.latlon(40.745, 40.770, -73.999, -73.965)
    grid_box, shape = releases.grid_of(midtown, 256)  # the release's grid: square cells
    rels = {
        name: releases.heatmap(checkins, midtown, 256, 1.0, algorithm, drop_outside=True, rng=2024)
        for name, algorithm in (("auto", "auto"), ("sparse", "sparse"), ("laplace", "laplace"))
    }
    s = user_grid_sum(checkins, shape, grid_box, drop_outside=True)
    panels = {
        "non-private (for comparison only)": s / s.sum(),
        "DP: userdp's default, ε = 1": rels["auto"].value,
        "DP: paper's sparse EMD aggregation, ε = 1": rels["sparse"].value,
        "DP: Laplace on every cell, ε = 1": rels["laplace"].value,
    }
    midtown = grid_box
    (lat0, lon0), (lat1, lon1) = midtown.low, midtown.high
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.6), constrained_layout=True)
    for ax, (title, p) in zip(axes, panels.items(), strict=True):
        h = gaussian_heatmap(p, sigma=2)
        ax.imshow(
            h,
            origin="lower",
            extent=(lon0, lon1, lat0, lat1),
            cmap="magma",
            norm=PowerNorm(0.5, vmin=0, vmax=h.max()),
            aspect=1 / np.cos(np.radians((lat0 + lat1) / 2)),
        )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("longitude (°)")
        ax.set_xticks([-73.99, -73.98, -73.97])
    axes[0].set_ylabel("latitude (°)")
    fig.suptitle(f"Foursquare check-ins of 1,008 users in Midtown Manhattan, {shape[0]} × {shape[1]} cells")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=90)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
