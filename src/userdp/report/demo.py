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
from ..noise import RandomSource

MIDTOWN = BoxDomain.latlon(40.745, 40.770, -73.999, -73.965)
TIMES_SQUARE = (40.7580, -73.9855)


def _heatmap(fs, src: RandomSource, out: Path) -> dict[str, Any]:
    from ..heatmaps import all_metrics, gaussian_heatmap, render, user_grid_sum

    side, eps, sigma = 256, 1.0, 2.0
    s = user_grid_sum(fs, side, MIDTOWN, drop_outside=True)  # the truth, for the demo only
    truth = gaussian_heatmap(s / s.sum(), sigma)
    ours = releases.heatmap(fs, MIDTOWN, side, eps, "sparse", drop_outside=True, rng=src)
    base = releases.heatmap(fs, MIDTOWN, side, eps, "laplace", drop_outside=True, rng=src)
    h_ours, h_base = gaussian_heatmap(ours.value, sigma), gaussian_heatmap(base.value, sigma)
    png = render(
        {"non-private (demo only)": truth, "DP sparse EMD aggregation": h_ours, "DP Laplace baseline": h_base},
        out / "heatmap.png",
        MIDTOWN,
        title=f"Foursquare check-ins, Midtown Manhattan, eps = {eps:g}, 256 x 256",
    )
    m_ours, m_base = all_metrics(truth, h_ours), all_metrics(truth, h_base)
    return {
        "name": "DP heatmap of check-ins (Ghazi et al.)",
        "mechanism": ours.mechanism,
        "guarantee": ours.guarantee.describe(),
        "params": {
            "epsilon": eps,
            "resolution": side,
            "w": 20,
            "box": "Midtown Manhattan (public)",
            "sigma_cells": sigma,
        },
        "result": "heatmap.png",
        "error": f"EMD to the true heatmap {m_ours['EMD']:.4f} (Laplace baseline {m_base['EMD']:.4f}); "
        f"SIM {m_ours['SIM']:.3f} (baseline {m_base['SIM']:.3f})",
        "metrics": {"ours": m_ours, "laplace_baseline": m_base},
        "image": png.name,
    }


def _distinct(src: RandomSource) -> dict[str, Any]:
    from ..distinct import person_element_graph

    words = D.amazon_fashion()
    eps, beta = 1.0, 0.05
    rel = releases.distinct(words, eps, beta=beta, l_max=100, method="matching", rng=src)
    true = person_element_graph(words).distinct_count()  # the truth, for the demo only
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


def _frequency(fs, src: RandomSource) -> dict[str, Any]:
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
    }


def _linear(fs, src: RandomSource) -> dict[str, Any]:
    from ..metrics import GreatCircleMetric

    space = GreatCircleMetric(D.NYC_BOX)
    alpha = 25.0
    f, ell, _ = releases.distance_query(space, TIMES_SQUARE)
    rel = releases.linear(fs, f, ell, alpha, model="local", rng=src)
    truth = float(np.mean(np.add.reduceat(f(fs.items), fs.offsets[:-1]) / fs.counts()))
    km = space.scale
    return {
        "name": "PrivEMDLinear: average distance to Times Square (Imola et al.)",
        "mechanism": rel.mechanism + " (local model: every user adds their own noise)",
        "guarantee": rel.guarantee.describe() + f" (distances normalized by the NYC box diameter, {km:.1f} km; "
        f"moving all of a user's check-ins by 3 km is d_EM = {3 / km:.3f}, protected at e^{alpha * 3 / km:.2f})",
        "params": {"alpha": alpha, "Lipschitz bound": 1.0, "norm": "l2 (Laplace in 1-D)"},
        "result": f"{rel.value[0] * km:.2f} km",
        "error": f"true average {truth * km:.2f} km (demo only); error {abs(rel.value[0] - truth) * km:.3f} km",
        "value_km": float(rel.value[0] * km),
        "truth_km": truth * km,
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
        "error": f"{local.note()}; {central.note()}",
        "routes": {"local": local.as_dict()["routes"], "central": central.as_dict()["routes"]},
    }


def _html(report: dict[str, Any], out: Path) -> Path:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>userdp demo</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}"
        ".note{background:#fff6d6;padding:.6em}</style></head><body>",
        "<h1>userdp demo</h1>",
        "<p class='note'>A demonstration on public research data: the true (non-private) values are shown next "
        "to the private releases. A real release publishes only the private values.</p>",
    ]
    if report["seeded"]:
        parts.append(
            "<p class='note'><b>Seeded noise</b>: reproducible, for demonstrations only; it gives no privacy.</p>"
        )
    for r in report["releases"]:
        parts.append(f"<h2>{html.escape(r['name'])}</h2><table>")
        for k in ("mechanism", "guarantee", "result", "error"):
            parts.append(f"<tr><th>{k}</th><td>{html.escape(str(r[k]))}</td></tr>")
        parts.append(f"<tr><th>parameters</th><td>{html.escape(json.dumps(r['params']))}</td></tr></table>")
        if r.get("image"):
            data = base64.b64encode((out / r["image"]).read_bytes()).decode()
            parts.append(
                f"<p><img alt='{html.escape(r['name'])}' style='max-width:100%' src='data:image/png;base64,{data}'></p>"
            )
    parts.append("<h2>Data</h2><ul>" + "".join(f"<li>{html.escape(v)}</li>" for v in D.ATTRIBUTION.values()) + "</ul>")
    parts.append(f"<p>Finished in {report['seconds']:.1f} s.</p></body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def run_demo(out: str | Path = "userdp-demo", seed: int | None = None, console=None) -> dict[str, Any]:
    """Run every release on the bundled data; write ``report.html``, ``report.json`` and PNGs into ``out``."""
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
    steps = [
        ("DP heatmap", lambda fs: _heatmap(fs, src, out)),
        ("distinct count", lambda fs: _distinct(src)),
        ("d_EM frequency estimate", lambda fs: _frequency(fs, src)),
        ("PrivEMDLinear", lambda fs: _linear(fs, src)),
        ("accountant", lambda fs: _accountant()),
    ]
    results = []
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=con, transient=True
    ) as progress:
        task = progress.add_task("loading the bundled Foursquare check-ins", total=len(steps) + 1)
        fs = D.foursquare_nyc()
        progress.advance(task)
        for label, fn in steps:
            progress.update(task, description=label)
            results.append(fn(fs))
            progress.advance(task)
    report = {
        "releases": results,
        "seeded": seed is not None,
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
