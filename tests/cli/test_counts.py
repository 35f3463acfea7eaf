"""``userdp counts``: records per key with GEM-chosen bounds, public keys from a file, refusals (exit 2,
nothing written or charged), and the ledger charge."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from userdp.cli import main


@pytest.fixture
def records(tmp_path):
    """600 persons: each checks in 3 times at "cafe", odd ones twice at "gym", person 0 once at "home"."""
    users, keys = [], []
    for u in range(600):
        users += [u] * 3
        keys += ["cafe"] * 3
        if u % 2:
            users += [u] * 2
            keys += ["gym"] * 2
    users.append(0), keys.append("home")
    path = tmp_path / "c.csv"
    pacsv.write_csv(pa.table({"person": users, "place": keys}), path)
    return path


def _argv(path, *extra):
    return ["counts", str(path), "--user", "person", "--key", "place", "--epsilon", "2", *extra]


def test_counts_of_public_keys_from_a_file(records, tmp_path, capsys):
    kf = tmp_path / "keys.txt"
    kf.write_text("cafe\ngym\nlibrary\n")
    out = tmp_path / "c.csv.out.csv"
    assert main(_argv(records, "--keys", str(kf), "--json", "--out", str(out), "--seed", "1")) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["keys_released"] == 3 and got["guarantee"].startswith("2-DP") and "auto" in got["bounds"]
    rows = [r.split(",") for r in out.read_text().splitlines()]
    assert rows[0] == ["key", "count"] and [r[0] for r in rows[1:]] == ["cafe", "gym", "library"]
    assert abs(float(rows[1][1]) - 1800) < 250 and abs(float(rows[3][1])) < 250
    shown = got["top 3 keys by released count"]  # printed largest first (the file keeps the keys' order)
    values = [float(x.rsplit("(", 1)[1].rstrip(")")) for x in shown]
    assert values == sorted(values, reverse=True) and shown[0].startswith("cafe")


def test_counts_with_selected_keys_and_given_bounds(records, capsys):
    assert main(_argv(records, "--delta", "1e-6", "--bounds", "2,3", "--json", "--seed", "2")) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["bounds"].startswith("L0 = 2 keys per person, Linf = 3") and "given" in got["bounds"]
    assert got["keys_released"] == 2 and "home" not in json.dumps(got)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "delta > 0"),
        (["--delta", "1e-6", "--bounds", "0,2"], "bounds"),
        (["--delta", "1e-6", "--bounds", "lots"], "L0,LINF"),
        (["--delta", "1e-6", "--keys", "/nonexistent/keys.txt"], "cannot read --keys"),
        (["--delta", "1e-6", "--out", "c.txt"], ".csv"),
        (["--delta", "1e-6", "--max-keys", "0"], "--max-keys"),
        (["--delta", "1e-6", "--max-keys", "lots"], "auto or a whole number"),
    ],
)
def test_counts_refusals_write_and_charge_nothing(records, tmp_path, capsys, extra, message):
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:5:1e-3"]) == 0
    before = ledger.read_text()
    capsys.readouterr()
    try:
        code = main(_argv(records, "--ledger", str(ledger), *extra))
    except SystemExit as exc:  # argparse's own refusals exit directly, with status 2
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err and "Traceback" not in err
    assert ledger.read_text() == before and not list(tmp_path.glob("*.txt"))


def test_counts_are_charged_to_the_ledger(records, tmp_path, capsys):
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:3:1e-5"]) == 0
    assert main(_argv(records, "--delta", "1e-6", "--ledger", str(ledger), "--json")) == 0
    assert main(_argv(records, "--delta", "1e-6", "--ledger", str(ledger), "--json")) == 2  # 4 > 3
    assert "budget" in capsys.readouterr().err


def test_max_keys_is_auto_by_default_and_stated(records, capsys):
    """Without --max-keys the bound on keys per person for the selection is chosen privately, and the output
    says which bound and what the choice spent (2% of the selection's half of epsilon); --max-keys 3 is
    given and spends nothing on it. --help says both."""
    assert main(_argv(records, "--delta", "1e-6", "--json", "--seed", "2")) == 0
    got = json.loads(capsys.readouterr().out)
    assert "chosen privately with epsilon 0.02)" in got["max_keys"] and got["keys_released"] == 2
    assert main(_argv(records, "--delta", "1e-6", "--max-keys", "3", "--json", "--seed", "2")) == 0
    assert json.loads(capsys.readouterr().out)["max_keys"] == "3 keys per person for the selection (given)"
    with pytest.raises(SystemExit):
        main(["counts", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--max-keys" in text and "auto (the default): chosen privately" in text
