"""Figures (matplotlib, Agg backend). Reporting helpers only: no mechanism calls these."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_privacy_curve(bound, path: str | Path) -> Path:
    """Plot the per-distance privacy curve ``eps(d)`` of a :class:`userdp.privacy.accounting.ShuffleBound`
    against the linear guarantee ``alpha d`` and plain composition ``m alpha_0 d``."""
    plt = _pyplot()
    d = np.linspace(1e-4, 1.0, 400)
    eps, dl = bound.curve(d)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(d, eps, label="eps(d) = h(M; m, m d)  (Theorem 4.3)", lw=2)
    ax.plot(d, bound.alpha * d, "--", label=f"alpha d, alpha = {bound.alpha:.3g}  (Theorem 4.4)")
    ax.plot(
        d,
        bound.m * bound.alpha0 * d,
        ":",
        label=f"composition at this alpha_0: m alpha_0 d = {bound.m * bound.alpha0:.3g} d",
    )
    ax.set_xlabel("d_EM between the two datasets")
    ax.set_ylabel("privacy loss epsilon")
    model = f"central, n = {bound.n}" if bound.n else "local"
    ax.set_title(
        f"PrivEMDItemWise, alpha_0 = {bound.alpha0:.3g}, m = {bound.m} ({model})\n"
        f"delta' = {bound.delta_prime:.2g} at d = 1"
    )
    ax.set_ylim(0, max(bound.alpha, 1e-9) * 1.05)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
