"""``userdp demo``: every kind of release userdp makes, on the bundled real data, with the truth beside it.

This is a demonstration on public research data, so it shows the non-private values next to the private
ones; a real release would publish only the private ones.
"""

from __future__ import annotations

import base64
import html
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import datasets as D
from .. import releases
from ..data import BoxDomain, FiniteDomain
from ..errors import BudgetExceededError
from ..noise import RandomSource
from ..privacy import (
    ApproxDP,
    DiscreteEMDDP,
    EMDMetricDP,
    Guarantee,
    Model,
    Neighbours,
    PureDP,
    compose,
    convert_to_budget,
    guarantee_kind,
    guarantee_to_dict,
)

MIDTOWN = BoxDomain.latlon(40.745, 40.770, -73.999, -73.965)
TIMES_SQUARE = (40.7580, -73.9855)
FOURSQUARE, AMAZON = "foursquare_nyc", "amazon_fashion"
DATA_NAMES = {FOURSQUARE: "Foursquare check-ins (NYC)", AMAZON: "Amazon Fashion reviews"}
#: The relation the total is composed under: every user-level guarantee implies one for replacing one user's
#: data by data of the same size (an add/remove epsilon costs 2 epsilon, a local or d_EM guarantee at d_EM = 1
#: costs its epsilon). The demo's central d_EM releases are bounded: they protect only same-size replacements.
TOTAL_RELATION = Neighbours.REPLACE_USER_SAME_SIZE


# --------------------------------------------------------------------------------------------
# Privacy accounting: every release of the demo, its user-level equivalent, and what they compose to
# --------------------------------------------------------------------------------------------


def _head(g: Guarantee) -> str:
    """The first clause of ``g.describe()``, such as ``2-DP for replace one user's data``."""
    return g.describe().split(":")[0]


def _dp(g: ApproxDP) -> dict[str, Any]:
    return {"epsilon": g.epsilon, "delta": g.delta, "relation": g.neighbours.value, "guarantee": _head(g)}


def _user_level(g: Guarantee) -> dict[str, Any] | None:
    """For a d_EM-DP guarantee, the user-level DP it implies, by the library's conversion
    (:func:`~userdp.privacy.convert_to_budget`, which reads a d_EM guarantee at the largest distance
    ``d_EM = 1``: :meth:`~userdp.privacy.EMDMetricDP.user_level_dp`); ``None`` for other guarantees."""
    if not isinstance(g, (EMDMetricDP, DiscreteEMDDP)):
        return None
    relation = g.user_level_dp(1.0).neighbours if isinstance(g, EMDMetricDP) else (
        Neighbours.ANY_TWO_INPUTS if g.model is Model.LOCAL else Neighbours.REPLACE_USER
    )
    try:
        ul = convert_to_budget(g, PureDP(1.0, neighbours=relation))
    except BudgetExceededError as exc:
        return {"relation": relation.value, "convertible": False, "reason": str(exc)}
    if isinstance(g, EMDMetricDP):
        how = (
            f"two datasets at d_EM = d are protected by ε = {g.alpha:.4g} d; a user's data can change at most "
            f"to d_EM = 1 (normalized units), so the release is {_head(ul)} (Imola et al., section 8)"
        )
    else:
        how = (
            f"datasets at d_EM <= {g.r:.4g} are ({g.epsilon:.4g}, {g.delta:.3g})-indistinguishable; d_EM = 1 is "
            f"{math.ceil(1 / g.r - 1e-12)} steps of group privacy, so the release is {_head(ul)}"
        )
    return {**_dp(ul), "convertible": True, "at": "d_EM = 1 (the largest, normalized units)", "how": how}


def _entry(label: str, rel, dataset: str, note: str = "") -> dict[str, Any]:
    """One private release for the accounting (the guarantee object is kept until :func:`_budget`)."""
    return {
        "label": label,
        "mechanism": rel.mechanism,
        "dataset": dataset,
        "guarantee": rel.guarantee,
        "user_level_equivalent": _user_level(rel.guarantee),
        "note": note,
    }


def _compose_under(entries: list[dict[str, Any]], budget: Guarantee) -> dict[str, Any]:
    """Charge every entry to a budget of the kind of ``budget`` and compose: the total, or the refusals."""
    costs, refused = [], []
    for e in entries:
        try:
            costs.append(convert_to_budget(e["guarantee"], budget))
        except BudgetExceededError as exc:
            refused.append({"release": e["label"], "reason": str(exc)})
    if refused:
        return {"composable": False, "refused": refused}
    try:
        total = compose(costs)
    except BudgetExceededError as exc:
        return {"composable": False, "refused": [{"release": "all", "reason": str(exc)}]}
    out: dict[str, Any] = {"composable": True, "guarantee": _head(total), "describe": total.describe()}
    out.update({k: getattr(total, k) for k in ("epsilon", "alpha", "delta") if hasattr(total, k)})
    if isinstance(total, PureDP | ApproxDP) and len(costs) > 1:
        # tight composition (privacy loss distributions, dp-accounting) of the same costs, at the total's delta
        # (or 1e-6 when every release is pure): the epsilon basic composition overstates
        from ..privacy.composition import DPLoss, tight_epsilon

        at = float(getattr(total, "delta", 0.0)) or 1e-6
        losses = [DPLoss(float(c.epsilon), float(getattr(c, "delta", 0.0))) for c in costs]
        out["tight"] = {"epsilon": tight_epsilon(losses, at), "delta": at}
    return out


def _budget(ledger: list[dict[str, Any]]) -> dict[str, Any]:
    """What the demo's private releases compose to.

    The releases are computed on the same people, so their guarantees compose. They are of different kinds
    (add/remove-one-user DP, local DP, local d_EM-DP), so each is first converted by
    :func:`~userdp.privacy.convert_to_budget` into one relation -- replacing one user's data, the only one
    that every user-level guarantee implies -- and the costs are composed by :func:`~userdp.privacy.compose`
    (basic composition: epsilons add, deltas add). The other relations are tried too and their refusals are
    reported, not papered over."""
    unit = PureDP(1.0, neighbours=TOTAL_RELATION)
    rows = []
    for e in ledger:
        g = e["guarantee"]
        try:
            cost: dict[str, Any] | None = _dp(convert_to_budget(g, unit))
            why = ""
        except BudgetExceededError as exc:
            cost, why = None, str(exc)
        rows.append(
            {
                "release": e["label"],
                "mechanism": e["mechanism"],
                "dataset": e["dataset"],
                "guarantee": _head(g),
                "guarantee_kind": guarantee_kind(g),
                "guarantee_params": guarantee_to_dict(g),
                "d_em": isinstance(g, (EMDMetricDP, DiscreteEMDDP)),
                "user_level_equivalent": e["user_level_equivalent"],
                "cost": cost,
                "cost_refused": why,
                "note": e["note"],
            }
        )
    total = _compose_under(ledger, unit)
    by_dataset = {
        d: _compose_under([e for e in ledger if e["dataset"] == d], unit)
        for d in dict.fromkeys(e["dataset"] for e in ledger)
    }
    others = {
        nb.value: _compose_under(ledger, PureDP(1.0, neighbours=nb))
        for nb in (Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER, Neighbours.ANY_TWO_INPUTS)
    }
    dem = [e for e in ledger if isinstance(e["guarantee"], (EMDMetricDP, DiscreteEMDDP))]
    if len(dem) > 1:
        others["d_EM-DP (alpha, one metric)"] = _compose_under(dem, dem[0]["guarantee"])
    return {
        "relation": TOTAL_RELATION.value,
        "method": "each release converted to DP for replacing one user's data by data of the same size by "
        "userdp.privacy.convert_to_budget (an add/remove epsilon costs 2 epsilon; a local epsilon costs epsilon; a "
        "d_EM-DP release costs its user-level equivalent at d_EM = 1, which for a bounded release protects only "
        "data of the same size), then basic composition (userdp.privacy.compose)",
        "releases": rows,
        "total": total,
        "by_dataset": by_dataset,
        "other_relations": others,
        "not_counted": "the accountant step reads no data (it releases nothing); the true values the demo shows "
        "next to the releases are not private at all (a real release publishes only the private values)",
    }


def _heatmap(fs, src: RandomSource, out: Path, ledger: list) -> dict[str, Any]:
    from ..heatmaps import all_metrics, gaussian_heatmap, heatmap_emd, user_grid_sum
    from .maps import MapPanel, left_out_label, render_maps

    side, eps, sigma = 256, 1.0, 2.0
    grid_box, (rows, cols) = releases.grid_of(MIDTOWN, side)  # cells square on the ground
    s = user_grid_sum(fs, (rows, cols), grid_box, drop_outside=True)  # the truth, for the demo only
    truth = gaussian_heatmap(s / s.sum(), sigma)
    ours = releases.heatmap(fs, MIDTOWN, side, eps, "auto", drop_outside=True, rng=src)  # userdp's default
    base = releases.heatmap(fs, MIDTOWN, side, eps, "laplace", drop_outside=True, rng=src)
    ledger.append(_entry("DP heatmap: userdp's default (auto)", ours, FOURSQUARE))
    ledger.append(_entry("DP heatmap: Laplace baseline", base, FOURSQUARE))
    h_ours, h_base = gaussian_heatmap(ours.value, sigma), gaussian_heatmap(base.value, sigma)
    png = render_maps(
        [
            MapPanel(truth, "non-private truth (demo only)", left_out=left_out_label("truth")),
            MapPanel(h_ours, f"DP heatmap (userdp's default), ε = {eps:g}", left_out=left_out_label("auto")),
            MapPanel(h_base, f"DP Laplace baseline, ε = {eps:g}", left_out=left_out_label("laplace")),
            # the fourth panel of the 2 x 2 figure: where the default's released mass is off (signed scale)
            MapPanel(h_ours - truth, "userdp's default minus the truth (demo only)", left_out=None),
        ],
        out / "heatmap.png",
        grid_box,
        title=f"Foursquare check-ins in Midtown Manhattan: ε = {eps:g} for adding or removing one user, "
        f"{rows} x {cols} cells, Gaussian filter σ = {sigma:g} cells. Each map has its own colour scale.",
        ncols=2,
        units_signed="released minus true share per cell (%)",  # the fourth panel's scale
    )
    m_ours, m_base = all_metrics(truth, h_ours), all_metrics(truth, h_base)
    raw = {"auto": heatmap_emd(s, ours.value), "laplace": heatmap_emd(s, base.value)}  # unsmoothed, as planned
    return {
        "name": "DP heatmap of check-ins (Ghazi et al.)",
        "mechanism": ours.mechanism,
        "guarantee": ours.guarantee.describe(),
        "params": {
            "epsilon": eps,
            "resolution": side,
            "algorithm": f"auto ({ours.params['branch']} branch)",
            "box": "Midtown Manhattan (public)",
            "sigma_cells": sigma,
        },
        "result": "heatmap.png",
        "error": f"EMD to the true heatmap {m_ours['EMD']:.4f} (Laplace baseline {m_base['EMD']:.4f}); "
        f"SIM {m_ours['SIM']:.3f} (baseline {m_base['SIM']:.3f})",
        "metrics": {"ours": m_ours, "laplace_baseline": m_base},
        "emd_raw": raw,
        "shape": [rows, cols],
        "image": png.name,
        "image_alt": "Four maps of Midtown Manhattan: the true check-in heatmap, userdp's default DP heatmap, "
        "the DP Laplace baseline, and the default minus the truth on a diverging scale, each with its own "
        "colourbar; grey cells received no mass.",
    }


def _distinct(src: RandomSource, ledger: list) -> dict[str, Any]:
    from ..distinct import person_element_graph

    words = D.amazon_fashion()
    eps, beta = 1.0, 0.05
    rel = releases.distinct(words, eps, beta=beta, l_max=100, method="matching", rng=src)
    true = person_element_graph(words).distinct_count()  # the truth, for the demo only
    ledger.append(_entry("distinct count of the vocabulary", rel, AMAZON))
    return {
        "name": "person-level DP distinct count of the Amazon Fashion vocabulary (Knop & Steinke)",
        "mechanism": rel.mechanism,
        "guarantee": rel.guarantee.describe().replace("user", "person"),
        "params": {"epsilon": eps, "beta": beta, "l_max": 100, "chosen bound l": int(rel.extras["bound"])},
        "result": f"{rel.value:.1f} distinct words (a lower bound with probability >= {1 - beta:g})",
        "error": f"true vocabulary {true} (demo only): the bound is {100 * (true - rel.value) / true:.1f}% below it",
        "value": rel.value,
        "truth": true,
    }


def _regions(fs):
    from ..metrics import ClusteredMetric

    box = D.NYC_BOX
    p = (fs.items - np.array(box.low)) / (np.array(box.high) - np.array(box.low))
    fine = np.minimum((p * 12).astype(np.int64), 11)  # public 12 x 12 grid over the NYC box
    coarse = fine // 3  # public 4 x 4 grid: the clusters
    codes = (coarse[:, 0] * 4 + coarse[:, 1]) * 9 + (fine[:, 0] % 3) * 3 + fine[:, 1] % 3
    return fs.with_items(codes, FiniteDomain(np.arange(144))), ClusteredMetric(16, 9, 0.25)


def _frequency(fs, src: RandomSource, ledger: list) -> dict[str, Any]:
    from ..dem.frequency import demd_error, freq_est_hadamard
    from ..dem.itemwise import BoundedEMDReduction

    ds, space = _regions(fs)
    alpha, eps, delta = 100.0, 1.0, 1e-6
    red = BoundedEMDReduction(s=100, epsilon=1.0, r=0.01, delta=delta)
    proj = red.project(ds, src)
    truth = proj.global_histogram()
    g = releases.frequency(proj, space, ds.domain, alpha, delta=delta, model="local", rng=src)
    h = freq_est_hadamard(proj, eps, delta, rng=src)
    e_g, e_h = demd_error(g.value, truth, space), demd_error(h.value, truth, space)
    note = (
        "stated for each user's 100 sampled check-ins (the projection); its user-level equivalent at d_EM = 1 "
        "holds for the user's own data too, since any two samples are at d_EM <= 1"
    )
    ledger.append(_entry("d_EM frequency of check-in regions (GKRR)", g, FOURSQUARE, note))
    ledger.append(_entry("frequency of check-in regions, user-level LDP baseline (Hadamard)", h, FOURSQUARE))
    return {
        "name": "d_EM-DP frequency of check-in regions vs user-level DP (Imola et al.)",
        "mechanism": g.mechanism + " (local model)",
        "guarantee": g.guarantee.describe() + f". Here d_EM = 0.01 (one check-in in 100 moved to another region) "
        f"costs e^{alpha * 0.01:g}; moving it inside its region (distance r = 0.25) costs e^{alpha * 0.0025:g}",
        "params": {
            "alpha": alpha,
            "delta'": delta,
            "regions": "16 public clusters x 9 cells",
            "m (sampled per user)": 100,
            "alpha_0": round(g.params["alpha0"], 4),
            "route": g.params["route"],
        },
        "result": "estimated distribution over 144 map cells",
        "error": f"d_EM to the truth {e_g:.4f}; user-level Hadamard response at eps = {eps:g}: {e_h:.4f}",
        "baseline": {"mechanism": h.mechanism, "guarantee": h.guarantee.describe(), "demd_error": e_h},
        "demd_error": e_g,
        "user_level_equivalent": ledger[-2]["user_level_equivalent"],
    }


def _linear(fs, src: RandomSource, ledger: list) -> dict[str, Any]:
    from ..metrics import GreatCircleMetric

    space = GreatCircleMetric(D.NYC_BOX)
    alpha = 25.0
    f, ell, _ = releases.distance_query(space, TIMES_SQUARE)
    rel = releases.linear(fs, f, ell, alpha, model="local", rng=src)
    truth = float(np.mean(np.add.reduceat(f(fs.items), fs.offsets[:-1]) / fs.counts()))
    km = space.scale
    ledger.append(_entry("PrivEMDLinear: average distance to Times Square", rel, FOURSQUARE))
    return {
        "name": "PrivEMDLinear: average distance to Times Square (Imola et al.)",
        "mechanism": rel.mechanism + " (local model: every user adds their own noise)",
        "guarantee": rel.guarantee.describe() + f" (distances normalized by the NYC box diameter, {km:.1f} km; "
        f"moving all of a user's check-ins by 3 km is d_EM = {3 / km:.3f}, protected at e^{alpha * 3 / km:.2f})",
        "params": {"alpha": alpha, "Lipschitz bound": 1.0, "norm": "l2 (Laplace in 1-D)"},
        "result": f"{rel.value[0] * km:.2f} km",
        "error": f"true average {truth * km:.2f} km (demo only); error {abs(rel.value[0] - truth) * km:.3f} km",
        "value_km": float(rel.value[0] * km),
        "km": km,
        "truth_km": truth * km,
        "user_level_equivalent": ledger[-1]["user_level_equivalent"],
    }


def _accountant() -> dict[str, Any]:
    from ..privacy.accounting import calibrate

    local = calibrate(100.0, 1e-6, 100)
    central = calibrate(25.0, 1e-6, 100, n=1083)
    return {
        "name": "accountant: alpha_0 for the item-wise release (Imola et al., Theorem 4.4)",
        "mechanism": "calibrate(alpha, delta', m, n)",
        "guarantee": "the item-level alpha_0 at which PrivEMDItemWise is (alpha, delta')-bounded d_EM-DP",
        "params": {"local": "alpha 100, delta' 1e-6, m 100", "central": "alpha 25, delta' 1e-6, m 100, n 1083"},
        "result": f"local: alpha_0 = {local.alpha0:.4g} ({local.route}); central: alpha_0 = {central.alpha0:.4g} "
        f"({central.route}, inner delta {central.best.delta:.3g})",
        # each model's note names its model: the local one may not beat composition where the central one does
        "error": f"local model (alpha 100): {local.note()}; central model (alpha 25, n 1083): {central.note()}",
        "routes": {"local": local.as_dict()["routes"], "central": central.as_dict()["routes"]},
    }


def _predictions() -> list:
    """What :mod:`userdp.plan` predicts for the demo's four releases from public sizes only (rounded estimates
    a planner would have; no data read): heatmap, distinct count, frequency, PrivEMDLinear."""
    from .. import plan

    shape = releases.grid_of(MIDTOWN, 256)[1]  # the heatmap's grid (public: the box and the resolution)
    return [
        # one simulated release per stand-in shape (the data's shape is not public): the bound covers it
        plan.heatmap(1.0, shape=tuple(shape), persons=1000, points_per_person=40, reps=9),
        plan.distinct(1.0, persons=400, distinct=1500, items_per_person=22),  # the spread unknown: a mixture
        plan.frequency(100.0, persons=1083, items_per_person=100, clusters=16, cluster_size=9, r=0.25, delta=1e-6),
        plan.linear(25.0, persons=1100),
    ]


def _planning(results: list[dict[str, Any]], predictions: list | None = None) -> dict[str, Any]:
    """What :mod:`userdp.plan` predicted for each release from public sizes (:func:`_predictions`, or
    ``predictions`` computed beforehand), next to what this run measured."""

    heat, dist, freq, lin = results[0], results[1], results[2], results[3]
    p_heat, p_dist, p_freq, p_lin = predictions if predictions is not None else _predictions()
    rows = []
    rows.append(("DP heatmap (auto)", "epsilon 1; about 1,000 users with about 40 check-ins each in the box",
                 p_heat, heat["emd_raw"]["auto"], 1.0, ""))  # fmt: skip
    rows.append(("distinct count", "epsilon 1; about 400 persons, 1,500 distinct words, 22 words each",
                 p_dist, dist["truth"] - dist["value"], 1.0, ""))  # fmt: skip
    rows.append(("d_EM frequency (GKRR)", "alpha 100, delta' 1e-6; 1,083 users of 100 sampled check-ins",
                 p_freq, freq["demd_error"], 1.0, ""))  # fmt: skip
    rows.append(("PrivEMDLinear", "alpha 25; about 1,100 users", p_lin, abs(lin["value_km"] - lin["truth_km"]),
                 lin["km"], " km"))  # fmt: skip
    table = []
    for name, at, pred, measured, unit, suffix in rows:
        q = pred.quantiles[0.9] * unit
        table.append({
            "release": name,
            "planned at": at,
            "predicted median": pred.median * unit,
            "predicted 90%": q,
            "measured (this run)": float(measured),
            "unit": suffix.strip(),
            "quantity": pred.quantity,
            "sentence": f"{name}: {pred.quantity} is at most {q:.3g}{suffix} with probability 0.9",
            "basis": pred.basis,
        })  # fmt: skip
    return {
        "method": "userdp.plan from public sizes only (no data read); the measured errors use the truth, shown "
        "for the demonstration",
        "rows": table,
    }


def _planning_html(planning: dict[str, Any]) -> list[str]:
    e = html.escape
    parts = [
        "<h2 id='planning'>Planning: the error predicted before the release</h2>",
        f"<p>{e(planning['method'])}. With <code>userdp plan</code> the same numbers come from the command line "
        "(for example <code>userdp plan linear --alpha 25 --persons 1100 --unit 52.4 --unit-name km</code>).</p>",
        "<ul>" + "".join(f"<li>{e(r['sentence'])}</li>" for r in planning["rows"]) + "</ul>",
        "<table id='planning-table'><tr><th>release</th><th>planned at</th><th>predicted median</th>"
        "<th>predicted 90%</th><th>measured (this run)</th><th>how</th></tr>",
    ]
    for r in planning["rows"]:
        u = f" {r['unit']}" if r["unit"] else ""
        parts.append(
            f"<tr><td>{e(r['release'])}</td><td>{e(r['planned at'])}</td><td>{r['predicted median']:.3g}{u}</td>"
            f"<td>{r['predicted 90%']:.3g}{u}</td><td>{r['measured (this run)']:.3g}{u}</td><td><small>"
            f"{e(r['basis'])}</small></td></tr>"
        )
    parts.append("</table>")
    return parts


def _short(t: dict[str, Any]) -> str:
    """``epsilon = 2`` or ``epsilon = 130, delta = 1e-06`` of a cost or a total."""
    return f"ε = {t['epsilon']:.4g}" + (f", δ = {t['delta']:.3g}" if t.get("delta") else "")


def _total_sentence(budget: dict[str, Any]) -> str:
    """The total in one paragraph of plain text."""
    rows, total = budget["releases"], budget["total"]
    if not total["composable"]:
        why = "; ".join(f"{r['release']}: {r['reason']}" for r in total["refused"])
        return (
            f"The {len(rows)} private releases do not compose under {budget['relation']}, so no total is given: {why}"
        )
    n_base = sum("baseline" in r["release"].lower() for r in rows)
    parts = [
        f"Total privacy budget of the {len(rows)} private releases (the table's {len(rows) - n_base} and their "
        f"{n_base} baselines), composed under {budget['relation']}: "
        f"{total['guarantee']} ({_short(total)})."
    ]
    if "tight" in total:
        t = total["tight"]
        parts.append(
            f"By tight composition (privacy loss distributions, Google's dp-accounting) the same releases are "
            f"(ε = {t['epsilon']:.4g}, δ = {t['delta']:.3g})-DP: basic composition overstates ε by "
            f"{100 * (1 - t['epsilon'] / total['epsilon']):.1f}% here."
        )
    subs = []
    for d, t in budget["by_dataset"].items():
        n = sum(r["dataset"] == d for r in rows)
        what = _short(t) if t["composable"] else "not composable"
        subs.append(
            f"{DATA_NAMES.get(d, d)}, " + (f"{n} releases on the same users" if n > 1 else "1 release") + f": {what}"
        )
    if len(subs) > 1:
        parts.append("Per data set: " + "; ".join(subs) + ". The total is what a person in both data sets spends.")
    dem = [r for r in rows if r["d_em"] and r["cost"]]
    if dem:
        share = sum(r["cost"]["epsilon"] for r in dem)
        parts.append(
            f"The {len(dem)} d_EM-DP release{'s' if len(dem) > 1 else ''} contribute ε = {share:.4g} of it: d_EM-DP "
            "protects small changes of a user's data (e^(α d) at d_EM = d) and costs its full α at the user level "
            "(d_EM = 1)."
        )
    return " ".join(parts)


def _budget_html(budget: dict[str, Any]) -> list[str]:
    e = html.escape
    rel = e(budget["relation"])
    parts = [
        "<h2 id='budget'>Privacy budget: what the releases add up to</h2>",
        f"<p>{e(_total_sentence(budget))}</p>",
        f"<p>How: {e(budget['method'])}. A d_EM-DP release protects a small change of a user's data (d_EM = d) "
        "by e^(alpha d); its <b>user-level equivalent</b> is the guarantee for the largest change of the user's "
        "data, d_EM = 1 in normalized units.</p>",
        "<table id='budget-table'><tr><th>release</th><th>data</th><th>guarantee as released</th>"
        f"<th>user-level equivalent (d_EM releases)</th><th>cost in the total ({rel})</th></tr>",
    ]
    for r in budget["releases"]:
        ul = r["user_level_equivalent"]
        if ul is None:
            ul_text = "&mdash; (already user-level)"
        elif ul["convertible"]:
            ul_text = f"<b>{e(ul['guarantee'])}</b><br><small>{e(ul['how'])}</small>"
        else:
            ul_text = f"none: {e(ul['reason'])}"
        note = f"<br><small>{e(r['note'])}</small>" if r["note"] else ""
        cost = e(_short(r["cost"])) if r["cost"] else f"cannot be charged: {e(r['cost_refused'])}"
        parts.append(
            f"<tr><td>{e(r['release'])}<br><small>{e(r['mechanism'])}</small></td>"
            f"<td>{e(DATA_NAMES.get(r['dataset'], r['dataset']))}</td><td>{e(r['guarantee'])}{note}</td>"
            f"<td>{ul_text}</td><td>{cost}</td></tr>"
        )
    total = budget["total"]
    total_text = e(_short(total)) if total["composable"] else "none: the releases do not compose (see below)"
    parts.append(f"<tr class='total'><th colspan='4'>total of all releases</th><th>{total_text}</th></tr>")
    for d, t in budget["by_dataset"].items():
        sub = e(_short(t)) if t["composable"] else "not composable"
        parts.append(f"<tr><td colspan='4'>of which on {e(DATA_NAMES.get(d, d))}</td><td>{sub}</td></tr>")
    parts.append("</table>")
    items = []
    for name, t in budget["other_relations"].items():
        if t["composable"]:
            items.append(f"<li>Under {e(name)}: {e(t['guarantee'])}.</li>")
        else:
            why = "".join(f"<li>{e(r['release'])}: {e(r['reason'])}</li>" for r in t["refused"])
            items.append(
                f"<li>Under {e(name)}: <b>no total</b>; these releases cannot be composed in it:<ul>{why}</ul></li>"
            )
    parts.append("<p>The other relations:</p><ul>" + "".join(items) + "</ul>")
    parts.append(f"<p><small>Not counted: {e(budget['not_counted'])}.</small></p>")
    return parts


def _html(report: dict[str, Any], out: Path) -> Path:
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>userdp demo</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'><link rel='icon' href='data:,'>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}"
        "tr.total th{background:#eef3ff}small{color:#444}#budget-table td:last-child{white-space:nowrap}"
        ".note{background:#fff6d6;padding:.6em}</style></head><body>",
        "<h1>userdp demo</h1>",
        "<p class='note'>A demonstration on public research data: the true (non-private) values are shown next "
        "to the private releases. A real release publishes only the private values.</p>",
    ]
    if report["seeded"]:
        parts.append(
            "<p class='note'><b>Seeded noise</b>: reproducible, for demonstrations only; it gives no privacy.</p>"
        )
    parts += _budget_html(report["budget"])
    parts += _planning_html(report["planning"])
    for r in report["releases"]:
        parts.append(f"<h2>{html.escape(r['name'])}</h2><table>")
        for k in ("mechanism", "guarantee", "result", "error"):
            parts.append(f"<tr><th>{k}</th><td>{html.escape(str(r[k]))}</td></tr>")
        ul = r.get("user_level_equivalent")
        if ul:
            text = ul["how"] if ul["convertible"] else ul["reason"]
            parts.append(f"<tr><th>user-level equivalent</th><td>{html.escape(text)}</td></tr>")
        parts.append(f"<tr><th>parameters</th><td>{html.escape(json.dumps(r['params']))}</td></tr></table>")
        if r.get("image"):
            data = base64.b64encode((out / r["image"]).read_bytes()).decode()
            alt = html.escape(r.get("image_alt", r["name"]))
            parts.append(
                f"<p><img alt='{alt}' style='max-width:100%;height:auto' src='data:image/png;base64,{data}'></p>"
            )
    parts.append("<h2>Data</h2><ul>" + "".join(f"<li>{html.escape(v)}</li>" for v in D.ATTRIBUTION.values()) + "</ul>")
    parts.append(f"<p>Finished in {report['seconds']:.1f} s.</p></body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _steps(src: RandomSource, out: Path, ledger: list) -> list:
    """The demo's steps in order: (progress label, function of the Foursquare check-ins)."""
    return [
        ("DP heatmap", lambda fs: _heatmap(fs, src, out, ledger)),
        ("distinct count", lambda fs: _distinct(src, ledger)),
        ("d_EM frequency estimate", lambda fs: _frequency(fs, src, ledger)),
        ("PrivEMDLinear", lambda fs: _linear(fs, src, ledger)),
        ("accountant", lambda fs: _accountant()),
    ]


def _numba_cache_cold() -> bool:
    """Whether numba's on-disk cache lacks the kernels of the demo's later steps (a first run: about 30 s of
    compiling in one process). It reads numba's cache index of the distinct count's kernel, a private interface:
    anything unexpected counts as cold."""
    try:
        from ..distinct.counting import _dc_all

        return not _dc_all._cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - numba internals changed: compile ahead, which is only a speed-up
        return True


def _helper(fs, main_at, conn, cold: bool) -> None:
    """The body of the demo's second process. On a cold numba cache (``cold``) it first runs the steps from the
    last one back, results discarded (written nowhere, noise from the OS), until it reaches the step the main
    process is on: that compiles their kernels into numba's on-disk cache, which the main process reads when it
    gets there, so the two meet in the middle and a first demo takes about half the compile time. Then it
    computes the plan's predictions (:func:`_predictions`, public sizes only) and sends them to the main
    process. Silent; never raises."""
    import os
    import tempfile

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        if cold:
            from ..heatmaps import heatmap_emd

            one, other = np.zeros((4, 4)), np.zeros((4, 4))  # the heatmap's error metric: its solver compiles
            one[0, 0] = other[3, 3] = 1.0  # longest (the main process needs it last in the heatmap step)
            heatmap_emd(one, other)
            with tempfile.TemporaryDirectory() as tmp:
                steps = _steps(RandomSource(None), Path(tmp), [])
                for i in range(len(steps) - 1, 0, -1):
                    if main_at.value >= i:
                        break
                    if i == 1:  # the distinct count's matching (its longest compile), then its step
                        from ..data import UserDataset
                        from ..distinct import dc_matching, person_element_graph

                        dc_matching(person_element_graph(UserDataset.from_lists([[0, 1], [1, 2]])), 2)
                    steps[i][1](fs)
        conn.send(_predictions())
    except BaseException:  # noqa: BLE001 - Ctrl-C, or anything: the main process does the work regardless
        pass
    finally:
        os._exit(0)


def _start_helper(fs):
    """The demo's second process (:func:`_helper`): ``(process, shared step counter, pipe end, cold)``, or
    ``None`` where it cannot run (one core).

    The process is started with ``spawn``, a fresh interpreter that receives the loaded data by pickle: by
    the time the data are loaded, PyArrow's and numba's thread pools are running (7 threads in ``userdp demo``,
    dozens in a test worker), and a ``fork`` of a process with threads can crash or deadlock its child (a
    forked helper was seen to crash in numba's compiler under the test suite's workers)."""
    import multiprocessing as mp
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 2:
        return None
    cold = _numba_cache_cold()
    ctx = mp.get_context("spawn")
    at = ctx.Value("i", 0, lock=False)
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_helper, args=(fs, at, send, cold), daemon=True)
    proc.start()
    send.close()
    return proc, at, receive, cold


def _received_predictions(helper) -> list | None:
    """The helper's predictions (it has had the whole demo to compute them), or ``None`` (computed here)."""
    if helper is None:
        return None
    proc, _, receive, _ = helper
    try:
        if receive.poll(300):
            return receive.recv()
    except (EOFError, OSError):  # the helper ended without them
        pass
    finally:
        proc.kill()
        proc.join()
    return None


def run_demo(
    out: str | Path = "userdp-demo", seed: int | None = None, console=None, compile_ahead: bool = False
) -> dict[str, Any]:
    """Run every release on the bundled data; write ``report.html``, ``report.json`` and PNGs into ``out``.

    With ``compile_ahead`` (``userdp demo`` sets it) a second process (:func:`_helper`) computes the plan's
    predictions while this one runs the releases, and on a cold numba cache (the first run after installing)
    first runs the later steps, results discarded, so that their kernels compile on a second core."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table

    con = console or Console()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if seed is not None:  # on standard error, as every command prints it
        Console(stderr=True).print(
            "[bold yellow]warning:[/] --seed makes the noise reproducible; seeded noise is for "
            "demonstrations only and gives no privacy."
        )
    src = RandomSource(seed)
    t0 = time.time()
    con.print("userdp demo on public research data: the true values are shown next to the private ones.")
    ledger: list[dict[str, Any]] = []  # every private release, for the total budget
    steps = _steps(src, out, ledger)
    results = []
    fs = D.foursquare_nyc()
    helper = _start_helper(fs) if compile_ahead else None
    at, cold = (helper[1], helper[3]) if helper is not None else (None, False)
    try:
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=con, transient=True
        ) as progress:
            note = " (first run: compiling)" if cold else ""
            task = progress.add_task("", total=len(steps))
            for i, (label, fn) in enumerate(steps):
                if at is not None:
                    at.value = i
                progress.update(task, description=label + note)
                results.append(fn(fs))
                progress.advance(task)
        predictions = _received_predictions(helper)
    finally:
        if helper is not None and helper[0].is_alive():  # (an error or Ctrl-C in a step)
            helper[0].kill()
            helper[0].join()
    report = {
        "releases": results,
        "budget": _budget(ledger),
        "planning": _planning(results, predictions),
        "seeded": seed is not None,
        "compiled_ahead": cold,  # a first run: a second process compiled the later steps' kernels
        "seconds": time.time() - t0,
        "data": {"foursquare_nyc": D.ATTRIBUTION["foursquare_nyc"], "amazon_fashion": D.ATTRIBUTION["amazon_fashion"]},
    }
    html_path = _html(report, out)
    report["seconds"] = time.time() - t0
    (out / "report.json").write_text(json.dumps(report, indent=2, default=_jsonable))
    t = Table(title="userdp demo (public data; truth shown for demonstration)", show_lines=True)
    for c in ("release", "guarantee", "result", "error vs truth"):
        t.add_column(c, overflow="fold")
    for r in results:
        t.add_row(r["name"], r["guarantee"], str(r["result"]), r["error"])
    con.print(t)
    con.print(_total_sentence(report["budget"]))
    con.print(f"wrote {html_path}, {out / 'report.json'} and {out / 'heatmap.png'} in {report['seconds']:.1f} s")
    return report


def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    return str(o)
