"""``userdp aggregate``: per-key statistics to a CSV file and JSON, refusals (exit 2, nothing written or
charged), the ledger charge."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from userdp.cli import main


@pytest.fixture
def ratings(tmp_path):
    """3,000 reviewers, 2 ratings each of products "a" (about 4) and "b" (about 2)."""
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(3000), 2)
    keys = np.tile(["a", "b"], 3000)
    values = np.clip(np.round(np.where(keys == "a", 4, 2) + rng.normal(0, 0.7, users.size)), 1, 5)
    path = tmp_path / "r.csv"
    pacsv.write_csv(pa.table({"reviewer": users, "product": keys, "rating": values}), path)
    return path


def _argv(path, *extra):
    dom: list[str] = []
    return ["aggregate", str(path), "--user", "reviewer", "--key", "product", "--value", "rating", "--epsilon", "1",
            *dom, *extra]  # fmt: skip


def test_without_a_range_or_domain_the_default_grid_is_searched(ratings, capsys):
    """Neither --range nor --domain: the range is chosen privately over the default grid (ratings 1-5: the
    ends land on their own grid points)."""
    assert main(_argv(ratings, "--keys", "/dev/null", "--json", "--seed", "3", "--epsilon", "2")) in (0, 2)
    capsys.readouterr()
    kf = ratings.parent / "k.txt"
    kf.write_text("a\nb\n")
    assert main(_argv(ratings, "--keys", str(kf), "--json", "--seed", "3")) == 0
    got = json.loads(capsys.readouterr().out)
    assert "chosen privately" in got["value range"] and "value range" in got["budget split"]


def test_a_bad_domain_is_refused_before_anything_is_read(tmp_path, capsys):
    out = tmp_path / "out.csv"
    argv = ["aggregate", str(tmp_path / "missing.csv"), "--user", "u", "--key", "k", "--value", "v", "--epsilon", "1",
            "--delta", "1e-6", "--domain", "5,1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("userdp: error:") and "value_domain" in err and "missing" not in err
    assert not out.exists()


def test_aggregate_writes_every_statistic(ratings, tmp_path, capsys):
    kf = tmp_path / "keys.txt"
    kf.write_text("a\nb\nc\n")
    out = tmp_path / "means.csv"
    argv = _argv(ratings, "--keys", str(kf), "--stat", "mean", "--stat", "count", "--stat", "quantile:0.5",
                 "--range", "1,5", "--json", "--out", str(out), "--seed", "1")  # fmt: skip
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["keys_released"] == 3 and got["guarantee"].startswith("1-DP") and "given" in got["value range"]
    assert "value range" not in got["budget split"] and "noisy N" in got["budget split"]
    rows = [r.split(",") for r in out.read_text().splitlines()]
    assert rows[0] == ["key", "count", "mean", "quantile_0.5"] and [r[0] for r in rows[1:]] == ["a", "b", "c"]
    assert abs(float(rows[1][2]) - 4) < 0.3 and abs(float(rows[2][2]) - 2) < 0.3
    assert float(rows[1][3]) == pytest.approx(4, abs=0.5)


def test_aggregate_with_selected_keys_and_a_private_range(ratings, capsys):
    assert (
        main(_argv(ratings, "--delta", "1e-6", "--domain", "0,10", "--stat", "variance", "--json", "--seed", "2")) == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert got["keys_released"] == 2 and "chosen privately" in got["value range"]
    assert set(got["budget split"]) >= {"keys", "bounds", "value range", "noisy N", "noisy S1", "noisy S2"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "delta > 0"),
        (["--delta", "1e-6", "--stat", "mode"], "unknown statistic"),
        (["--delta", "1e-6", "--stat", "quantile:2"], "quantile"),
        (["--delta", "1e-6", "--range", "5,1"], "value_range"),
        (["--delta", "1e-6", "--range", "1,5", "--domain", "0,9"], "not both"),
        (["--delta", "1e-6", "--range", "lots"], "LO,HI"),
        (["--delta", "1e-6", "--bounds", "0,2"], "bounds"),
        (["--delta", "1e-6", "--out", "r.txt"], ".csv"),
        (["--delta", "1e-6", "--keys", "/nonexistent/keys.txt"], "cannot read --keys"),
    ],
)
def test_aggregate_refusals_write_and_charge_nothing(ratings, tmp_path, capsys, extra, message):
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:5:1e-3"]) == 0
    before = ledger.read_text()
    capsys.readouterr()
    try:
        code = main(_argv(ratings, "--ledger", str(ledger), *extra))
    except SystemExit as exc:  # argparse's own refusals exit directly, with status 2
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err and "Traceback" not in err
    assert ledger.read_text() == before and not list(tmp_path.glob("*.txt"))


def test_a_bad_value_column_is_refused_without_a_charge(tmp_path, capsys):
    path = tmp_path / "t.csv"
    pacsv.write_csv(pa.table({"reviewer": [1, 2], "product": ["a", "b"], "rating": ["good", "bad"]}), path)
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:5:1e-3"]) == 0
    before = ledger.read_text()
    for engine in ("memory", "duckdb"):
        assert main(_argv(path, "--delta", "1e-6", "--engine", engine, "--ledger", str(ledger))) == 2
        assert "numeric" in capsys.readouterr().err
    assert ledger.read_text() == before


def test_aggregate_is_charged_to_the_ledger(ratings, tmp_path, capsys):
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:1.5:1e-5"]) == 0
    assert main(_argv(ratings, "--delta", "1e-6", "--ledger", str(ledger), "--json")) == 0
    assert main(_argv(ratings, "--delta", "1e-6", "--ledger", str(ledger), "--json")) == 2  # 2 > 1.5
    assert "budget" in capsys.readouterr().err
