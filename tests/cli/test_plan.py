"""``userdp plan``: predictions from public parameters, both ways, and refusals (exit 2)."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "counts"], "--epsilon"),
        (["plan", "counts", "--epsilon", "1", "--target", "3"], "not both"),
        (["plan", "vocabulary", "--epsilon", "1"], "--delta"),
        (["plan", "counts", "--target", "1e-9"], "no epsilon"),
    ],
)
def test_plan_refusals(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err and "Traceback" not in err
