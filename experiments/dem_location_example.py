"""The d_EM paper's concrete location example (section 4.1), measured.

n = 1e5 users, m = 1e3 points each, alpha = 25, metric = great-circle distance normalized by the largest
surface distance (half the Earth's circumference, 12,437 miles, a public constant). Query: each user's
average distance to a city (1-Lipschitz by the triangle inequality). The paper's estimate: noise of
expected magnitude 1/alpha = 0.04 per user, 0.04/sqrt(n) = 1.26e-4 overall, "an error of just 1.6 miles".

Data: the Foursquare NYC users, resampled with replacement to a population of 1e5 users, each holding
1e3 check-ins sampled with replacement from the resampled user's own check-ins. Query point: Times Square.
Writes experiments/results/dem_location_example.csv and .png. Run: python experiments/dem_location_example.py
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from userdp import datasets as D
from userdp import releases
from userdp.metrics import EARTH_RADIUS_KM, haversine_km
from userdp.noise import RandomSource, knorm_mechanism

OUT = Path(__file__).resolve().parent / "results"
KM_PER_MILE = 1.609344
DIAMETER_KM = math.pi * EARTH_RADIUS_KM  # largest great-circle distance
TIMES_SQUARE = (40.7580, -73.9855)


def main(n: int = 100_000, m: int = 1_000, alpha: float = 25.0, reps: int = 400) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    src = RandomSource(25)  # experiment: seeded
    t0 = time.time()
    fs = D.foursquare_nyc()
    users = src.integers(fs.n_users, size=n)
    pop = fs.subset_users(users).sample(m, replace=True, rng=src)

    def f(x: np.ndarray) -> np.ndarray:
        return haversine_km(x[:, 0], x[:, 1], *TIMES_SQUARE) / DIAMETER_KM  # 1-Lipschitz

    # one full release through the library (checks the guarantee and the code path) ...
    rel = releases.linear(pop, f, 1.0, alpha, model="local", rng=src)
    per_user = np.add.reduceat(f(pop.items), pop.offsets[:-1]) / m
    truth = per_user.mean()
    # ... then repetitions of the same noise (the per-user values do not change between repetitions)
    rows = []
    for model in ("local", "central"):
        for rep in range(reps):
            if model == "local":
                est = knorm_mechanism(per_user[:, None], 1.0, alpha, "l2", src).mean()
            else:
                est = knorm_mechanism(np.array([truth]), 1.0 / n, alpha, "l2", src)[0]
            rows.append(dict(model=model, rep=rep, error_miles=abs(est - truth) * DIAMETER_KM / KM_PER_MILE))
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(OUT / "dem_location_example.csv", index=False)
    summ = df.groupby("model").error_miles.agg(["mean", "median", lambda s: float(np.sqrt((s**2).mean()))])
    summ.columns = ["mean_abs_miles", "median_abs_miles", "rmse_miles"]
    print(
        f"true average distance to Times Square: {truth * DIAMETER_KM / KM_PER_MILE:.2f} miles; "
        f"guarantee: {rel.guarantee.describe()}"
    )
    print(summ.round(4).to_string())
    expected_local = math.sqrt(2) / alpha / math.sqrt(n) * DIAMETER_KM / KM_PER_MILE
    print(f"theory: RMSE sqrt(2)/(alpha sqrt(n)) = {expected_local:.2f} miles (local); the paper says 1.6 miles")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.hist(df[df.model == "local"].error_miles, bins=40, color="C0", alpha=0.8, label="local (measured)")
    ax.axvline(1.6, color="k", ls="--", label="paper: 1.6 miles")
    ax.set_xlabel("|released - true| average distance (miles)")
    ax.set_ylabel("repetitions")
    ax.set_title(f"PrivEMDLinear, alpha = {alpha:g}, n = {n:,}, m = {m:,}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "dem_location_example.png", dpi=110)
    plt.close(fig)
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
