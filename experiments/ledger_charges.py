"""How many releases fit a ledger's budget, charged by basic composition (before issue 37) and by the tight total
(now: pessimistic privacy loss distributions, and zCDP for the releases that state it).

    python experiments/ledger_charges.py

Writes ``results/ledger_charges.csv`` and ``results/ledger_charges.md``. Each count is the largest ``k`` whose
total fits (found by bisection on :func:`userdp.privacy.composition.tight_epsilon`, which is what
``Session.charge`` checks, with every release stated as the library states it: the Gaussian vocabulary release
by the :class:`~userdp.privacy.composition.ZCDPLoss` of :func:`userdp.vocabulary.union.stated_losses`, a pure
release by its ``DPLoss``).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from userdp.privacy.composition import DPLoss, tight_epsilon
from userdp.vocabulary.union import plan_vocabulary, stated_losses

OUT = Path(__file__).resolve().parent / "results"
BUDGETS = [(1.0, 1e-5), (4.0, 1e-5), (10.0, 1e-5), (4.0, 1e-8)]


def releases() -> list[tuple[str, list, float, float]]:
    """(name, stated losses of one release, its epsilon, its delta)."""
    out = []
    for eps in (0.25, 0.5, 1.0):
        delta = 1e-7 if eps < 1 else 1e-6
        (loss,) = stated_losses(plan_vocabulary(eps, delta))
        out.append((f"Gaussian vocabulary ({eps:g}, {delta:g})", [loss], eps, delta))
    for eps in (0.1, 0.5):
        out.append((f"pure {eps:g}-DP", [DPLoss(eps)], eps, 0.0))
    out.append(("(1, 1e-6) stated by its (epsilon, delta)", [DPLoss(1.0, 1e-6)], 1.0, 1e-6))
    return out


def fits_basic(eps: float, delta: float, b_eps: float, b_delta: float) -> int:
    k = math.floor(b_eps / eps * (1 + 1e-12))
    return min(k, math.floor(b_delta / delta * (1 + 1e-12))) if delta else k


def fits_tight(losses: list, b_eps: float, b_delta: float, start: int) -> tuple[int, float]:
    def ok(k: int) -> bool:
        return tight_epsilon(losses * k, b_delta) <= b_eps * (1 + 1e-12)

    lo, hi = max(start, 0), max(2 * start, 2)
    while ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo, (tight_epsilon(losses * lo, b_delta) if lo else 0.0)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    rows = []
    for name, losses, eps, delta in releases():
        for b_eps, b_delta in BUDGETS:
            basic = fits_basic(eps, delta, b_eps, b_delta)
            tight, total = fits_tight(losses, b_eps, b_delta, basic)
            rows.append({"release": name, "budget_epsilon": b_eps, "budget_delta": b_delta, "basic": basic,
                         "tight": tight, "tight_total_epsilon": round(total, 4)})  # fmt: skip
            print(rows[-1], flush=True)
    with open(OUT / "ledger_charges.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = ["| release | budget | basic composition | tight total (its epsilon) |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['release']} | ({r['budget_epsilon']:g}, {r['budget_delta']:g}) | {r['basic']} | "
                     f"{r['tight']} ({r['tight_total_epsilon']:g}) |")  # fmt: skip
    (OUT / "ledger_charges.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
