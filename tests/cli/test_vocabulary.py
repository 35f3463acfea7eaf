"""``userdp vocabulary``: the released items and counts, its refusals (exit 2, nothing written or charged),
and the ledger charge."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from userdp.cli import main


@pytest.fixture
def records(tmp_path):
    """400 persons: everyone holds "common", half hold "half", one holds "rare"."""
    users, items = [], []
    for u in range(400):
        users.append(u), items.append("common")
        if u % 2:
            users.append(u), items.append("half")
    users.append(0), items.append("rare")
    path = tmp_path / "r.csv"
    pacsv.write_csv(pa.table({"person": users, "item": items}), path)
    return path


def _argv(path, *extra):
    return ["vocabulary", str(path), "--user", "person", "--item", "item", "--epsilon", "1", "--delta", "1e-6", *extra]


def test_vocabulary_json_and_csv(records, tmp_path, capsys):
    out = tmp_path / "v.csv"
    assert main(_argv(records, "--json", "--out", str(out), "--max-items", "2")) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["items_released"] == 2 and got["guarantee"].startswith("(1, 1e-06)-DP")
    rows = out.read_text().splitlines()
    assert rows[0] == "item,count" and [r.split(",")[0] for r in rows[1:]] == ["common", "half"]
    assert abs(float(rows[1].split(",")[1]) - 400) < 60
    shown = got["top 2 items by released count"]  # printed largest first
    values = [float(x.rsplit("(", 1)[1].rstrip(")")) for x in shown]
    assert values == sorted(values, reverse=True) and shown[0].startswith("common")
    assert main(_argv(records, "--out", str(out))) == 2  # exists: refused before reading
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--delta", "0"], "delta"),
        (["--max-items", "0"], "max-items"),
        (["--max-items", "many"], "auto or a whole number"),
        (["--noise", "uniform"], "noise"),
        (["--out", "v.txt"], ".csv"),
        (["--noise", "laplace", "--count-fraction", "1e-15"], "count"),
        (["--noise", "gaussian", "--policy"], "Laplace noise only"),
        (["--algorithm", "sips", "--noise", "laplace"], "Gaussian"),
        (["--algorithm", "sips", "--policy", "--noise", "laplace"], "policy"),
        (["--rounds", "3"], "DP-SIPS"),
        (["--algorithm", "sips", "--rounds", "11"], "rounds"),
        (["--algorithm", "sips", "--ratio", "0"], "ratio"),
    ],
)
def test_vocabulary_refusals_write_and_charge_nothing(records, tmp_path, capsys, extra, message):
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:5:1e-3"]) == 0
    before = ledger.read_text()
    capsys.readouterr()
    argv = _argv(records, "--ledger", str(ledger))
    argv += extra  # the later option wins in argparse
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals (a choice not offered) exit directly, with status 2
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err and "Traceback" not in err
    assert ledger.read_text() == before and not list(tmp_path.glob("*.txt"))


def test_vocabulary_is_charged_to_the_ledger(records, tmp_path, capsys):
    """Charged by the tight total of the zCDP guarantee the release states: two (1, 1e-6) runs compose to
    epsilon 0.87 at 1e-5 (basic composition: 2), three to 1.09, over a budget of 1."""
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:1:1e-5"]) == 0
    assert main(_argv(records, "--ledger", str(ledger), "--json")) == 0
    assert main(_argv(records, "--ledger", str(ledger), "--json")) == 0
    assert main(_argv(records, "--ledger", str(ledger), "--json")) == 2
    assert "over the budget" in capsys.readouterr().err.lower()
    entries = json.loads(ledger.read_text())["entries"]
    assert len(entries) == 2 and entries[0]["label"] == "vocabulary"
    assert entries[0]["cost"]["epsilon"] == 1.0 and entries[0]["cost"]["delta"] == 1e-6
    assert entries[0]["losses"][0]["kind"] == "ZCDPLoss"


def test_vocabulary_with_the_policy_histogram(records, capsys):
    assert main(_argv(records, "--json", "--noise", "laplace", "--policy", "--max-items", "2", "--seed", "3")) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["selection"] == "policy" and got["items_released"] == 2
    assert "lowest first" not in got["error"] and "none past" in got["error"]


def test_vocabulary_with_dp_sips(records, tmp_path, capsys):
    """``--algorithm sips``: DP-SIPS's rounds release the common items; the report names it; --help lists it.
    With the default ``--max-items auto`` the bound is chosen first (2% of epsilon, said in the output) and
    the ledger charges the whole epsilon and delta; a given bound spends nothing on a choice."""
    from userdp.vocabulary import MAX_ITEMS_GRID

    out, ledger = tmp_path / "v.csv", tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:5:1e-3"]) == 0
    capsys.readouterr()
    argv = _argv(records, "--json", "--out", str(out), "--algorithm", "sips", "--rounds", "2", "--ratio", "1")
    assert main([*argv[:7], "4", *argv[8:], "--ledger", str(ledger)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["selection"] == "sips" and got["items_released"] == 2 and "rounds" in got["error"]
    assert (
        got["max_items"] in MAX_ITEMS_GRID and got["max_items chosen"] == "privately from the data (epsilon 0.08 of 4)"
    )
    (entry,) = json.loads(ledger.read_text())["entries"]
    assert entry["cost"]["epsilon"] == 4.0 and entry["cost"]["delta"] == 1e-6
    assert main([*argv[:7], "4", *argv[8:], "--max-items", "3", "--force"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["max_items"] == 3 and "max_items chosen" not in got and got["items_released"] == 2
    assert [r.split(",")[0] for r in out.read_text().splitlines()[1:]] == ["common", "half"]
    with pytest.raises(SystemExit):
        main(["vocabulary", "--help"])
    assert "--algorithm" in capsys.readouterr().out


def test_the_default_max_items_is_chosen_privately_and_the_whole_epsilon_charged(records, tmp_path, capsys):
    """Without ``--max-items`` the bound is chosen from the data (2% of epsilon, said in the output), a bound of
    the public grid; the ledger charges the release's whole epsilon and delta. A given bound spends nothing
    on a choice."""
    from userdp.vocabulary import MAX_ITEMS_GRID

    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:5:1e-3"]) == 0
    capsys.readouterr()
    assert main(_argv(records, "--json", "--ledger", str(ledger), "--seed", "2")) == 0
    got = json.loads(capsys.readouterr().out)
    assert (
        got["max_items"] in MAX_ITEMS_GRID and got["max_items chosen"] == "privately from the data (epsilon 0.02 of 1)"
    )
    assert "chosen privately" in got["error"]
    (entry,) = json.loads(ledger.read_text())["entries"]
    assert entry["cost"]["epsilon"] == 1.0 and entry["cost"]["delta"] == 1e-6
    assert main(_argv(records, "--json", "--max-items", "3", "--seed", "2")) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["max_items"] == 3 and "max_items chosen" not in got
    assert main(_argv(records, "--json", "--max-items", "AUTO", "--seed", "2")) == 0
    assert json.loads(capsys.readouterr().out)["max_items"] in MAX_ITEMS_GRID


def test_the_help_explains_the_default(capsys):
    with pytest.raises(SystemExit):
        main(["vocabulary", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "auto (default) chooses it privately from the data" in text and "2% of epsilon" in text
