"""``userdp plan aggregate``: the library's prediction on the command line, and its refusals (``userdp: error:``,
or argparse's ``userdp plan: error:`` for a flag's syntax; exit 2, nothing on stdout, no traceback)."""

from __future__ import annotations

import json

import pytest

from userdp import plan
from userdp.cli import main


def _refused(argv, capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals (a flag's syntax) exit directly, with status 2
        code = exc.code
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and "Traceback" not in out.err
    assert out.err.startswith(("userdp: error:", "usage: userdp plan")) and "error:" in out.err
    return out.err


def test_plan_aggregate_prints_the_library_s_prediction(capsys):
    argv = ["plan", "aggregate", "--epsilon", "2", "--stat", "mean", "--stat", "sum", "--stat", "quantile:0.5",
            "--persons", "120", "--records-per-person", "3", "--keys-per-person", "2", "--keys", "31",
            "--range", "1,5", "--value-mean", "4.2", "--json"]  # fmt: skip
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    want = plan.aggregate(2.0, persons=120, records_per_person=3, keys_per_person=2, stats=["mean", "sum",
                          "quantile:0.5"], n_keys=31, value_range=(1, 5), value_mean=4.2)  # fmt: skip
    assert got["noise sd per key"] == {s: float(f"{want.sd(s):.4g}") for s in ("sum", "mean")}
    assert got["budget split"] == {k: float(f"{v:.4g}") for k, v in want.budget.items()
                                   if k not in ("epsilon", "delta") and v}  # fmt: skip
    assert "L0 = 2" in got["bounds"] and "Linf = 4" in got["bounds"] and "GEM" in got["bounds"]
    assert "0.5-quantile" in got["quantile:0.5"] and "clipping" in got["not predicted"]
    assert got["records per key"].startswith("360 kept")


def test_plan_aggregate_with_a_domain_and_given_bounds(capsys):
    assert main(["plan", "aggregate", "--epsilon", "1", "--persons", "50", "--domain", "0,10", "--bounds", "1,2",
                 "--json"]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    assert "widest range" in got["value range"] and got["budget split"]["value range"] > 0
    assert "(given)" in got["bounds"] and "bounds" not in got["budget split"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--epsilon", "1", "--range", "1,5"], "--persons"),
        (["--target", "0.1", "--persons", "10", "--range", "1,5"], "--target"),
        (["--persons", "10", "--range", "1,5"], "--epsilon"),
        (["--epsilon", "1", "--persons", "10"], "value range"),
        (["--epsilon", "1", "--persons", "10", "--range", "5,1"], "LO < HI"),
        (["--epsilon", "1", "--persons", "10", "--range", "1"], "LO,HI"),
        (["--epsilon", "1", "--persons", "10", "--domain", "geometric"], "geometric"),
        (["--epsilon", "1", "--persons", "10", "--range", "1,5", "--domain", "0,10"], "not both"),
        (["--epsilon", "1", "--persons", "10", "--range", "1,5", "--stat", "median"], "unknown statistic"),
        (["--epsilon", "1", "--persons", "10", "--range", "1,5", "--selected-keys"], "delta"),
        (["--epsilon", "1", "--persons", "10", "--range", "1,5", "--bounds", "0,4"], "bound"),
        (["--epsilon", "1", "--persons", "10", "--range", "1,5", "--value-sd", "-1"], "--value-sd"),
        (["--epsilon", "1", "--persons", "10", "--range", "1,5", "--records-per-person", "0"], "--records-per-person"),
    ],
)  # fmt: skip
def test_plan_aggregate_refusals(argv, message, capsys):
    assert message in _refused(["plan", "aggregate", *argv], capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "counts", "--epsilon", "1", "--range", "1,5"],
        ["plan", "counts", "--epsilon", "1", "--stat", "mean"],
        ["plan", "counts", "--epsilon", "1", "--bounds", "auto"],
        ["plan", "distinct", "--epsilon", "1", "--persons", "10", "--distinct", "100", "--items-per-person", "2",
         "--selected-keys"],
    ],
)  # fmt: skip
def test_the_aggregate_flags_are_refused_by_the_other_plans(argv, capsys):
    assert _refused(argv, capsys).startswith("userdp: error:")


def test_plan_counts_keeps_its_default_bounds(capsys):
    assert main(["plan", "counts", "--epsilon", "1", "--keys", "300", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = plan.key_counts(1.0, l0=8, linf=4, n_keys=300).quantiles[0.9]
    assert got["error at confidence 0.9"] == pytest.approx(want)
