"""``userdp demo``'s report: the total budget its releases compose to (by the library's own accounting), the
user-level equivalent of every d_EM release, the new maps, and a self-contained HTML page."""

from __future__ import annotations

import base64
import html as htmlmod
import io
import json
import re
import shutil
import struct

import pytest
from rich.console import Console

from userdp.privacy import (
    EMDMetricDP,
    Neighbours,
    PureDP,
    compose,
    convert_to_budget,
    guarantee_from_dict,
)
from userdp.report.demo import run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    run_demo(out, seed=3, console=Console(file=io.StringIO(), width=120))
    report = json.loads((out / "report.json").read_text())
    page = (out / "report.html").read_text(encoding="utf-8")
    return out, report, page


def _text(page: str) -> str:
    """The HTML's visible text, entities decoded and whitespace collapsed."""
    body = re.sub(r"<[^>]+>", " ", re.sub(r"src='[^']*'", "", page))
    return " ".join(htmlmod.unescape(body).split())


def test_every_private_release_is_accounted(demo):
    _, report, _ = demo
    rows = report["budget"]["releases"]
    labels = [r["release"] for r in rows]
    # the baselines are releases on the same users too
    assert len(rows) == 6 and len(set(labels)) == 6
    assert any("Laplace baseline" in x for x in labels) and any("Hadamard" in x for x in labels)
    assert {r["dataset"] for r in rows} == {"foursquare_nyc", "amazon_fashion"}
    assert report["budget"]["relation"] == Neighbours.REPLACE_USER_SAME_SIZE.value  # (bounded d_EM releases)


def test_the_total_is_the_library_composition_of_the_converted_releases(demo):
    _, report, _ = demo
    budget = report["budget"]
    unit = PureDP(1.0, neighbours=Neighbours.REPLACE_USER_SAME_SIZE)
    guarantees = [guarantee_from_dict(r["guarantee_params"]) for r in budget["releases"]]
    costs = [convert_to_budget(g, unit) for g in guarantees]
    for r, c in zip(budget["releases"], costs, strict=True):
        assert r["cost"]["epsilon"] == pytest.approx(c.epsilon) and r["cost"]["delta"] == pytest.approx(c.delta)
    expected = compose(costs)
    total = budget["total"]
    assert total["composable"] is True
    assert total["epsilon"] == pytest.approx(expected.epsilon) and total["delta"] == pytest.approx(expected.delta)
    # 2 (heatmap) + 2 (Laplace baseline) + 2 (distinct count): add/remove epsilon 1 costs 2 under replace;
    # 100 (d_EM frequency at d_EM = 1) + 1 (Hadamard, local) + 25 (PrivEMDLinear at d_EM = 1)
    assert total["epsilon"] == pytest.approx(132.0, rel=1e-6) and total["delta"] == pytest.approx(1e-6)
    by = budget["by_dataset"]
    assert by["foursquare_nyc"]["epsilon"] == pytest.approx(130.0, rel=1e-6)
    assert by["amazon_fashion"]["epsilon"] == pytest.approx(2.0)


def test_every_d_em_release_has_its_user_level_equivalent(demo):
    _, report, _ = demo
    dem = [r for r in report["budget"]["releases"] if r["d_em"]]
    assert len(dem) == 2
    for r in dem:
        g = guarantee_from_dict(r["guarantee_params"])
        assert isinstance(g, EMDMetricDP)
        ul = r["user_level_equivalent"]
        expected = g.user_level_dp(1.0)  # the library's conversion at the largest d_EM
        assert ul["convertible"] is True
        assert ul["epsilon"] == pytest.approx(expected.epsilon) and ul["delta"] == pytest.approx(expected.delta)
        # the local frequency release is bounded (equal sizes): its user-level relation keeps the qualifier
        bounded = Neighbours.TWO_INPUTS_SAME_SIZE if g.bounded else Neighbours.ANY_TWO_INPUTS
        assert ul["relation"] == expected.neighbours.value == bounded.value
        assert "d_EM = 1" in ul["at"] and "d_EM = d" in ul["how"]
    assert sorted(round(r["user_level_equivalent"]["epsilon"]) for r in dem) == [25, 100]
    for r in report["budget"]["releases"]:
        if not r["d_em"]:
            assert r["user_level_equivalent"] is None
    # the d_EM releases' own sections carry it too (the accountant step releases nothing)
    sections = [r for r in report["releases"] if "frequency" in r["name"] or "PrivEMDLinear" in r["name"]]
    assert len(sections) == 2
    for rel in sections:
        assert rel["user_level_equivalent"]["convertible"] is True


def test_relations_that_do_not_compose_are_said_so(demo):
    _, report, _ = demo
    others = report["budget"]["other_relations"]
    ar = others[Neighbours.ADD_REMOVE_USER.value]
    assert ar["composable"] is False and "epsilon" not in ar  # no invented number
    assert {r["release"] for r in ar["refused"]} >= {"PrivEMDLinear: average distance to Times Square"}
    assert all("local" in r["reason"] for r in ar["refused"])
    local = others[Neighbours.ANY_TWO_INPUTS.value]
    assert local["composable"] is False and any("curator" in r["reason"] for r in local["refused"])
    replace = others[Neighbours.REPLACE_USER.value]  # the bounded frequency release protects only same sizes
    assert replace["composable"] is False and any("same number of items" in r["reason"] for r in replace["refused"])
    dem = others["d_EM-DP (alpha, one metric)"]
    assert dem["composable"] is False and any("metric" in r["reason"] for r in dem["refused"])


def test_the_html_shows_the_total_and_the_user_level_equivalents(demo):
    _, report, page = demo
    text = _text(page)
    assert "Privacy budget" in text
    assert "(132, 1e-06)-DP for replace one user's data by data of the same size" in text
    assert "total of all releases ε = 132, δ = 1e-06" in text
    for r in report["budget"]["releases"]:
        assert " ".join(r["release"].split()) in text
        ul = r["user_level_equivalent"]
        if ul:
            assert ul["guarantee"] in text and " ".join(ul["how"].split()) in text
    assert "no total" in text  # add/remove and local: said, not computed
    assert text.count("100-DP for any two inputs of one user of the same size (local model)") >= 1
    assert text.count("25-DP for any two inputs of one user (local model)") >= 1


def test_the_html_is_self_contained_with_no_broken_images(demo):
    out, report, page = demo
    srcs = re.findall(r"<img [^>]*src='([^']*)'", page)
    assert len(srcs) == sum(bool(r.get("image")) for r in report["releases"]) == 1
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == (out / "heatmap.png").read_bytes()
        w, h = struct.unpack(">II", png[16:24])
        assert w >= 1200 and h >= 800
    assert re.findall(r"<img [^>]*alt='[^']+'", page)
    # nothing loaded from elsewhere (an icon would be requested otherwise: it is an empty data: URI)
    for attr in re.findall(r"(?:src|href)='([^']*)'", page):
        assert attr.startswith("data:")
    assert "<script" not in page


def test_the_html_loads_in_headless_chromium_without_errors(demo):
    sync_api = pytest.importorskip("playwright.sync_api")
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    out, _, _ = demo
    with sync_api.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        except Exception as exc:  # no browser on this machine
            pytest.skip(f"no headless Chromium: {type(exc).__name__}")
        try:
            page = browser.new_page()
            problems = []
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("requestfailed", lambda r: problems.append(r.url[:60]))
            page.goto((out / "report.html").as_uri())
            page.wait_for_load_state("load")
            broken = page.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth)).length")
            assert page.evaluate("document.images.length") == 1 and broken == 0
            assert problems == []
        finally:
            browser.close()


def test_the_planning_section_predicts_every_release_within_2x_of_this_run(demo):
    """Issue 19: the demo states, before each release, the error userdp.plan predicts from public sizes, next
    to the error this run measured; on the bundled data every predicted median is within 2x of the measured
    error (the 90% quantile bounds it, with some slack for one run's noise) and the HTML says it in words."""
    _, report, page = demo
    rows = report["planning"]["rows"]
    assert [r["release"] for r in rows] == ["DP heatmap (auto)", "distinct count", "d_EM frequency (GKRR)",
                                            "PrivEMDLinear"]  # fmt: skip
    for r in rows:
        assert r["predicted median"] <= r["predicted 90%"]
        assert 0.25 <= r["measured (this run)"] / r["predicted median"] <= 2.5, r
    text = _text(page)
    assert "Planning: the error predicted before the release" in text
    assert "PrivEMDLinear: ||released average - true average|| is at most" in text
    assert " km with probability 0.9" in text


def test_heatmap_figure_fills_its_grid(monkeypatch, tmp_path):
    """The demo's map has no empty panel: its panels fill whole rows (issue 34: a 2 x 2 figure of three maps)."""
    from userdp import datasets
    from userdp.noise import RandomSource
    from userdp.report import demo, maps

    seen = {}

    def capture(panels, path, box=None, title="", **kwargs):
        seen["panels"], seen["ncols"] = list(panels), kwargs.get("ncols") or 3
        return maps.Path(path)

    monkeypatch.setattr(maps, "render_maps", capture)
    demo._heatmap(datasets.foursquare_nyc(), RandomSource(5), tmp_path, [])
    assert len(seen["panels"]) % seen["ncols"] == 0
    assert all(bool((p.data == p.data).all()) for p in seen["panels"])  # no NaN panel


def test_readme_counts_the_demo_releases(demo):
    """README and the docs' front page name as many releases as the demo prints and as its budget composes
    (issue 34: README said five, the report six)."""
    from pathlib import Path

    _, report, _ = demo
    words = {"four": 4, "five": 5, "six": 6, "seven": 7}
    root = Path(__file__).resolve().parents[2]
    for page in (root / "README.md", root / "docs" / "index.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        m = re.search(r"runs the demo on the bundled real data: (\w+) releases .*?; (\w+) private releases", text)
        assert m, page
        shown = sum("accountant" not in r["name"] for r in report["releases"])
        assert words[m.group(1)] == shown and words[m.group(2)] == len(report["budget"]["releases"])
