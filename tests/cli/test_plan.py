"""``userdp plan``: predictions from public parameters, both ways, and refusals (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from userdp import plan
from userdp.cli import main


def test_plan_counts_both_ways(capsys):
    assert main(["plan", "counts", "--epsilon", "1", "--bounds", "8,4", "--keys", "300", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = plan.key_counts(1.0, l0=8, linf=4, n_keys=300).quantiles[0.9]
    assert got["error at confidence 0.9"] == pytest.approx(want)
    assert main(["plan", "counts", "--target", "20", "--bounds", "8,4", "--keys", "300", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["smallest epsilon"] == pytest.approx(plan.key_counts_epsilon(20, 0.9, l0=8, linf=4, n_keys=300))


def test_plan_vocabulary(capsys):
    assert main(["plan", "vocabulary", "--epsilon", "1", "--delta", "1e-6", "--persons", "40", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert "an item held by 40 persons" in got and "released with probability 0.9" in got
    # the default max_items auto: no plan knows the chosen bound; the figures are the largest candidate's
    assert got["max_items"].startswith("auto: chosen from the data") and "8192" in got["max_items"]
    new = plan.vocabulary(1.0, 1e-6, persons=40, max_items="auto").extra["new item released at most"]
    assert got["an item only one person holds"] == f"released with probability at most {new:.3g}"
    assert main(["plan", "vocabulary", "--epsilon", "1", "--delta", "1e-6", "--max-items", "100", "--json"]) == 0
    assert "max_items" not in json.loads(capsys.readouterr().out)
    # the largest candidate's threshold is above a fixed 100's: the auto figures bound the chosen bound's
    auto, fixed = plan.vocabulary(1.0, 1e-6), plan.vocabulary(1.0, 1e-6, max_items=100)
    assert auto.extra["threshold"] > fixed.extra["threshold"]


def test_plan_distinct_linear_frequency_heatmap(capsys):
    """Every release has a plan on the command line; the figures are the library's."""
    sizes = ["--persons", "404", "--distinct", "1492", "--items-per-person", "21.8"]
    assert main(["plan", "distinct", "--epsilon", "1", *sizes, "--max-items-bound", "100", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = plan.distinct(1.0, persons=404, distinct=1492, items_per_person=21.8, max_items=100)
    assert got["median error"] == f"{want.median:.4g}" and "Theorem 1.1 / Eq. (8) bound" in got
    assert main(["plan", "distinct", "--target", "0.05", *sizes, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["smallest epsilon"] > 1
    assert main(["plan", "linear", "--alpha", "25", "--persons", "1083", "--unit", "52.4", "--unit-name", "km",
                 "--json"]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    assert got["median error"] == f"{plan.linear(25.0, persons=1083).median * 52.4:.4g} km"
    assert main(["plan", "frequency", "--alpha", "100", "--delta", "1e-6", "--persons", "500", "--items-per-person",
                 "20", "--clusters", "4", "--cluster-size", "3", "--r", "0.25", "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert "Theorem 6.6 / Corollary 6.8, Eq. (9) (expectation bound, GKRR)" in out
    assert float(out["Theorem 6.5, Eq. (8) (expectation bound, this randomizer)"]) > 0
    assert main(["plan", "heatmap", "--epsilon", "1", "--grid", "16", "--persons", "300", "--points-per-person",
                 "5", "--json"]) == 0  # fmt: skip
    assert "Theorem 3.1 (order only)" in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "counts"], "--epsilon"),
        (["plan", "distinct", "--epsilon", "1", "--persons", "10"], "--distinct, --items-per-person"),
        (["plan", "linear", "--epsilon", "1", "--persons", "10"], "--alpha"),
        (["plan", "heatmap", "--epsilon", "1", "--persons", "10", "--points-per-person", "3", "--algorithm", "x"],
         "unknown heatmap algorithm"),
        (["plan", "distinct", "--epsilon", "1", "--persons", "10", "--distinct", "1000", "--items-per-person", "2"],
         "cannot hold"),
        (["plan", "counts", "--epsilon", "1", "--target", "3"], "not both"),
        (["plan", "vocabulary", "--epsilon", "1"], "--delta"),
        (["plan", "counts", "--target", "1e-9"], "no epsilon"),
        (["plan", "vocabulary", "--epsilon", "1", "--delta", "1e-6", "--algorithm", "greedy"], "algorithm must be one"),
        (["plan", "vocabulary", "--epsilon", "1", "--delta", "1e-6", "--rounds", "2"], "rounds and ratio"),
        (["plan", "vocabulary", "--epsilon", "1", "--delta", "1e-6", "--algorithm", "sips", "--noise", "laplace"],
         "Gaussian"),
        (["plan", "vocabulary", "--epsilon", "1", "--delta", "1e-6", "--algorithm", "policy", "--noise", "gaussian"],
         "Laplace"),
        (["plan", "counts", "--epsilon", "1", "--algorithm", "sips"], "--algorithm is for"),
        (["plan", "counts", "--epsilon", "1", "--ratio", "2"], "--algorithm sips"),
    ],
)
def test_plan_refusals(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err and "Traceback" not in err


def test_plan_frequency_on_a_distance_matrix(tmp_path, capsys):
    """--distances: the exponential randomizer on any finite metric; the figure is the library's."""
    from userdp.metrics import FiniteMetric

    x = np.arange(6.0)
    labels = [f"i{j}" for j in range(6)]
    rows = ["item," + ",".join(labels)] + [f"{a}," + ",".join(f"{abs(x[i] - x[j]):g}" for j in range(6))
                                           for i, a in enumerate(labels)]  # fmt: skip
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    argv = ["plan", "frequency", "--alpha", "50", "--delta", "1e-6", "--persons", "300", "--items-per-person", "10",
            "--distances", str(tmp_path / "d.csv"), "--json"]  # fmt: skip
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    space = FiniteMetric(np.abs(x[:, None] - x[None, :]))
    want = plan.frequency(50.0, persons=300, items_per_person=10, space=space, delta=1e-6)
    assert got["median error"] == f"{want.median:.4g}" and "exponential" in got["basis"]
    assert not any(k.startswith("Theorem") for k in got)


def test_plan_heatmap_takes_the_heatmap_s_grid_syntax_and_default(capsys):
    """``plan heatmap --grid`` reads ``ROWSxCOLS`` as ``userdp heatmap --grid`` does (``ROWS,COLS`` still
    works) and defaults to 256 x 256, the heatmap's 256 cells along the longer side."""
    import argparse

    from userdp.cli.main import build_parser

    base = ["plan", "heatmap", "--epsilon", "1", "--persons", "300", "--points-per-person", "5", "--json"]
    outs = []
    for grid in (["--grid", "30x20"], ["--grid", "30,20"], ["--grid", "20x30"]):
        assert main([*base, *grid]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1] and outs[0] != outs[2]
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices["plan"].get_default("shape") == (256, 256)


def test_plan_takes_the_shape_parameters_or_says_they_are_unknown(capsys):
    """Issue 34: ``--spread`` defaults to unknown (a wider bound, said in the basis); given, it is the
    library's; ``plan heatmap --clusters/--places`` narrow the stand-in shapes; bad values exit 2."""
    sizes = ["--persons", "404", "--distinct", "1492", "--items-per-person", "21.8"]
    assert main(["plan", "distinct", "--epsilon", "1", *sizes, "--json"]) == 0
    assert "spread unknown" in json.loads(capsys.readouterr().out)["basis"]
    assert main(["plan", "distinct", "--epsilon", "1", *sizes, "--spread", "1.2", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = plan.distinct(1.0, persons=404, distinct=1492, items_per_person=21.8, spread=1.2)
    assert got["error at confidence 0.9"] == f"{want.quantiles[0.9]:.4g}" and "spread 1.2 given" in got["basis"]
    heat = ["plan", "heatmap", "--epsilon", "1", "--grid", "16", "--persons", "300", "--points-per-person", "5"]
    assert main([*heat, "--clusters", "5", "--places", "1", "--json"]) == 0
    assert "(5 blobs, 1 places)" in json.loads(capsys.readouterr().out)["basis"]
    for bad in (["--spread", "-1"], ["--zipf", "-0.5"]):
        assert main(["plan", "distinct", "--epsilon", "1", *sizes, *bad]) == 2
        assert "error:" in capsys.readouterr().err


def test_plan_vocabulary_per_algorithm(capsys):
    """``--algorithm sips --rounds --ratio`` and ``--algorithm policy`` (Laplace noise by default, as the policy
    runs only with it) print the library's figures for that algorithm, its rounds' thresholds, and a basis
    saying what the probability is; the default is the weighted union, as ``userdp vocabulary``'s."""
    base = ["plan", "vocabulary", "--epsilon", "2", "--delta", "1e-6", "--persons", "40", "--max-items", "8", "--json"]
    assert main([*base, "--algorithm", "sips", "--rounds", "2", "--ratio", "3"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = plan.vocabulary(2.0, 1e-6, algorithm="sips", rounds=2, ratio=3.0, max_items=8, persons=40)
    assert got["algorithm"] == "sips" and got["rounds"].startswith("2 (ratio 3): thresholds ")
    assert got["an item held by 40 persons"] == f"released with probability {want.extra['release probability']:.3g}"
    assert "by some round" in got["basis"] and got["basis"] == want.basis
    assert main([*base, "--algorithm", "policy"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = plan.vocabulary(2.0, 1e-6, algorithm="policy", noise="laplace", max_items=8, persons=40)
    assert got["algorithm"] == "policy" and got["basis"] == want.basis and "not modelled" in got["basis"]
    assert got["an item held by 40 persons"] == f"released with probability {want.extra['release probability']:.3g}"
    assert main([*base, "--algorithm", "policy-greedy"]) == 0  # Laplace noise by default, as the policy's
    got = json.loads(capsys.readouterr().out)
    want = plan.vocabulary(2.0, 1e-6, algorithm="policy-greedy", noise="laplace", max_items=8, persons=40)
    assert got["algorithm"] == "policy-greedy" and got["basis"] == want.basis and "not a bound" in got["basis"]
    assert main(base) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["algorithm"] == "weighted" and "rounds" not in got
    assert main(["plan", "vocabulary", "--delta", "1e-6", "--algorithm", "sips", "--target", "40", "--max-items", "8",
                 "--json"]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    want = plan.vocabulary_epsilon(40, 0.9, 1e-6, max_items=8, algorithm="sips")
    assert got["smallest epsilon"] == pytest.approx(want) and got["algorithm"] == "sips"
