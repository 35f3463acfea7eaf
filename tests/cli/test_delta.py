"""``--delta`` on every command that takes it (issue 34 item 10): ``1``, ``1.5``, NaN and negatives are refused
with the library's message (exit 2, nothing printed on standard output, nothing written or charged); ``0.99``
is released and charged, with ``userdp: warning: ...`` on standard error, once, and no Python warning."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import main

PROMISES_NOTHING = "(delta is the probability that the guarantee fails, and at delta >= 1 it promises nothing)"
WARNING = "userdp: warning: delta = 0.99 is above 0.001"


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    labels = [f"{b}{c}" for b in "AB" for c in range(3)]
    (tmp_path / "domain.csv").write_text("item,cluster\n" + "".join(f"{x},{x[0]}\n" for x in labels))
    rows = ["user,item,lat,lon"]
    for u in range(120):
        for _ in range(4):
            rows.append(f"u{u},{labels[rng.integers(0, 6)]},{40.7 + 0.05 * rng.random():.5f},"
                        f"{-74.0 + 0.05 * rng.random():.5f}")  # fmt: skip
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def _releases(d):
    data, domain = str(d / "data.csv"), d / "domain.csv"
    return {
        "vocabulary": ["vocabulary", data, "--user", "user", "--item", "item", "--epsilon", "1"],
        "counts": ["counts", data, "--user", "user", "--key", "item", "--epsilon", "1"],
        "itemwise": cli_argv.clustered("itemwise", d / "data.csv", domain, "--alpha", "20"),
        "freq": cli_argv.clustered("freq", d / "data.csv", domain, "--alpha", "20", "--model", "central"),
        "linear": cli_argv.greatcircle(d / "data.csv", "--alpha", "2"),
    }


ACCOUNTANT = {
    "account shuffle": ["account", "shuffle", "--alpha0", "0.5", "--m", "100", "--n", "1000"],
    "account calibrate": ["account", "calibrate", "--alpha", "20", "--m", "10", "--n", "1000"],
    "account reduction": ["account", "reduction", "--epsilon", "1", "--r", "0.05"],
    "plan vocabulary": ["plan", "vocabulary", "--epsilon", "1", "--persons", "40"],
}


def _ledger(tmp_path, capsys, command):
    """A ledger whose relation takes the command's release (add/remove for vocabulary and counts, whose delta
    near 1 could not be converted to replacement; the same-size replacement for the d_EM releases)."""
    relation = "add-remove" if command in ("vocabulary", "counts") else "replace-same-size"
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", f"{relation}:1000:0.999999"]) == 0
    capsys.readouterr()
    return ledger


@pytest.mark.parametrize("command", ["vocabulary", "counts", "itemwise", "freq", "linear"])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1", f"--delta must lie in (0, 1), got 1.0 {PROMISES_NOTHING}"),
        ("1.5", f"--delta must lie in (0, 1), got 1.5 {PROMISES_NOTHING}"),
        ("nan", "--delta must lie in (0, 1), got nan"),
        ("-0.1", "--delta must lie in (0, 1), got -0.1"),
    ],
)
def test_a_delta_that_promises_nothing_is_refused_and_charges_nothing(files, capsys, command, value, message):
    ledger = _ledger(files, capsys, command)
    before = ledger.read_text()
    argv = [*_releases(files)[command], "--delta", value, "--ledger", str(ledger), "--json"]
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.err.strip() == f"userdp: error: {message}" and out.out == ""
    assert ledger.read_text() == before


@pytest.mark.parametrize("command", list(ACCOUNTANT))
def test_the_accountant_and_the_planner_refuse_delta_1_with_the_same_message(capsys, command):
    assert main([*ACCOUNTANT[command], "--delta", "1"]) == 2
    assert capsys.readouterr().err.strip() == f"userdp: error: --delta must lie in (0, 1), got 1.0 {PROMISES_NOTHING}"


@pytest.mark.parametrize("command", ["vocabulary", "counts", "itemwise", "freq", "linear"])
def test_a_large_delta_is_released_and_charged_with_one_warning_on_stderr(files, capsys, command):
    ledger = _ledger(files, capsys, command)
    argv = [*_releases(files)[command], "--delta", "0.99", "--ledger", str(ledger), "--json", "--seed", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the library's LargeDeltaWarning is not raised again
        assert main(argv) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)  # the release is printed
    warned = [line for line in out.err.splitlines() if line.startswith("userdp: warning: delta")]
    assert len(warned) == 1 and warned[0].startswith(WARNING) and "1/n" in warned[0]
    assert len(json.loads(ledger.read_text())["entries"]) == 1
    # the JSON output carries the warning too (a pipeline that reads only standard output sees it)
    assert [w for w in json.loads(out.out)["warnings"] if w.startswith("delta = 0.99")] == [warned[0][17:]]


@pytest.mark.parametrize("command", list(ACCOUNTANT))
def test_the_accountant_and_the_planner_warn_on_a_large_delta(capsys, command):
    # (the reduction's guarantee holds 2 delta; the shuffle bound's delta' is delta e^h)
    value = {"account reduction": "0.4", "account shuffle": "0.002"}.get(command, "0.99")
    assert main([*ACCOUNTANT[command], "--delta", value, "--json"]) == 0
    assert f"userdp: warning: delta = {value} is above 0.001" in capsys.readouterr().err


def test_a_vacuous_shuffle_bound_names_its_flags(capsys):
    assert main([*ACCOUNTANT["account shuffle"], "--delta", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "vacuous" in err and "--delta" in err and "--alpha0" in err


def test_a_small_delta_gives_no_warning(files, capsys):
    assert main([*_releases(files)["vocabulary"], "--delta", "1e-3", "--json", "--seed", "1"]) == 0
    out = capsys.readouterr()
    assert "warning: delta" not in out.err and "warnings" not in json.loads(out.out)


def test_a_ledger_budget_with_a_large_delta_is_created_with_a_warning(tmp_path, capsys):
    assert main(["ledger", "init", str(tmp_path / "l.json"), "--budget", "replace:1:0.5"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("userdp: warning: the budget's delta = 0.5 is above 0.001") and "1/n" in err
    assert main(["ledger", "init", str(tmp_path / "m.json"), "--budget", "replace:1:1e-6"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_the_planner_s_json_lists_the_warning(capsys):
    argv = ["plan", "counts", "--epsilon", "1", "--noise", "gaussian", "--delta", "0.5", "--json"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["warnings"] == [out.err.strip().removeprefix("userdp: warning: ")]


def test_the_ledger_budget_refuses_delta_1_with_the_same_message(tmp_path, capsys):
    assert main(["ledger", "init", str(tmp_path / "l.json"), "--budget", "add-remove:1:1"]) == 2
    assert f"got 1.0 {PROMISES_NOTHING}" in capsys.readouterr().err
    assert not (tmp_path / "l.json").exists()
