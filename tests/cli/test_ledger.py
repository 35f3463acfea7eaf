"""``userdp ledger`` and ``--ledger``: one relation per ledger, every release converted into it, refusals that
change nothing, and old multi-budget ledgers refused with instructions (issue 13, findings 4 and 5)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import ledger as cli_ledger
from userdp.cli import main
from userdp.errors import BudgetExceededError
from userdp.privacy import ApproxDP, EMDMetricDP, Neighbours, PureDP

AR, REPLACE, LOCAL = Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER, Neighbours.ANY_TWO_INPUTS


def _init(capsys, path: Path, *budgets: str) -> int:
    code = main(["ledger", "init", str(path)] + [a for b in budgets for a in ("--budget", b)])
    capsys.readouterr()
    return code


def test_init_takes_exactly_one_budget(tmp_path, capsys):
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:1", "--budget", "replace:1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("userdp: error: a ledger protects one neighbour relation")
    assert "pass --budget or --budget-rho once" in err and not ledger.exists()
    assert _init(capsys, ledger, "replace:4:1e-6") == 0
    assert json.loads(ledger.read_text())["budget"] == {
        "kind": "ApproxDP",
        "epsilon": 4.0,
        "delta": 1e-6,
        "neighbours": REPLACE.value,
    }
    assert _init(capsys, ledger, "replace:1") == 2  # exists, no --force


def test_the_issue_example_and_ledger_show(tmp_path, capsys):
    """A replace-one-user ledger of 4 takes add/remove 1 (costs 2) + replace 1 + local 1, then nothing;
    `ledger show` prints the relation, spent, left and each release's original and converted cost."""
    ledger = tmp_path / "ledger.json"
    assert _init(capsys, ledger, "replace:4") == 0
    for command, nb in [("distinct", AR), ("linear", REPLACE), ("itemwise", LOCAL)]:
        cli_ledger.charge(argparse.Namespace(ledger=str(ledger), command=command), PureDP(1.0, neighbours=nb), "m")
    before = ledger.read_text()
    for nb in (AR, REPLACE, LOCAL):
        with pytest.raises(BudgetExceededError, match="over the budget"):
            cli_ledger.charge(argparse.Namespace(ledger=str(ledger), command="x"), PureDP(0.01, neighbours=nb), "m")
    assert ledger.read_text() == before
    assert main(["ledger", "show", str(ledger)]) == 0
    text = capsys.readouterr().out
    assert "protects user-level DP for replace one user's data: budget epsilon 4; spent epsilon 4; left nothing" in text
    assert "3 release(s) charged" in text
    assert "distinct (m): delivers 1-DP for add or remove one user; costs epsilon 2" in text
    assert "linear (m): delivers 1-DP for replace one user's data; costs epsilon 1" in text
    assert "itemwise (m): delivers 1-DP for any two inputs of one user (local model); costs epsilon 1" in text
    assert main(["ledger", "show", str(ledger), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["protects"] == "user-level DP for replace one user's data"
    assert (shown["budget"], shown["spent"], shown["left"]) == ("epsilon 4", "epsilon 4", "nothing")
    assert [r["costs"] for r in shown["releases"]] == ["epsilon 2", "epsilon 1", "epsilon 1"]
    assert shown["releases"][0]["guarantee"]["neighbours"] == AR.value
    assert shown["releases"][0]["cost"]["neighbours"] == REPLACE.value


@pytest.fixture
def reviews(tmp_path) -> Path:
    path = tmp_path / "reviews.csv"
    rows = ["reviewer,text"] + [f"p{i % 40},word{i % 97} other{i % 13}" for i in range(400)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_cli_release_is_charged_at_its_converted_cost(tmp_path, capsys, reviews):
    """`userdp distinct` is 1-DP for add/remove one user: a replace-one-user ledger of 3 pays 2 for it, and
    refuses a second run (4 > 3) before printing anything."""
    ledger = tmp_path / "ledger.json"
    assert _init(capsys, ledger, "replace:3") == 0
    argv = cli_argv.distinct(reviews, "reviewer", "text", "--tokenize", "--epsilon", "1", "--json")
    assert main(argv + ["--ledger", str(ledger)]) == 0
    # Algorithm 1's lower bound is noisy and, on 40 persons, may fall below 0 (a valid, vacuous bound)
    assert np.isfinite(json.loads(capsys.readouterr().out)["lower_bound"])
    entries = json.loads(ledger.read_text())["entries"]
    assert [(e["guarantee"]["epsilon"], e["cost"]["epsilon"]) for e in entries] == [(1.0, 2.0)]
    before = ledger.read_text()
    assert main(argv + ["--ledger", str(ledger)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "costs 2-DP for replace one user's data" in err and "over the budget" in err
    assert ledger.read_text() == before


def test_an_add_remove_ledger_refuses_a_local_release(tmp_path, capsys):
    """`userdp linear` (local model) is d_EM-DP for one user's inputs: it implies nothing about adding or
    removing a user, so an add/remove ledger refuses it with the reason, whatever its size."""
    rng = np.random.default_rng(0)
    rows = ["user,lat,lon"] + [
        f"u{u},{40.6 + 0.3 * rng.random():.5f},{-74.1 + 0.3 * rng.random():.5f}" for u in range(50)
    ]
    data = tmp_path / "data.csv"
    data.write_text("\n".join(rows) + "\n")
    ledger = tmp_path / "ledger.json"
    assert _init(capsys, ledger, "add-remove:1000") == 0
    before = ledger.read_text()
    assert main(cli_argv.greatcircle(data, "--alpha", "2", "--json", "--ledger", str(ledger))) == 2
    out, err = capsys.readouterr()
    assert out == "" and "cannot be charged to a budget of user-level DP for add or remove one user" in err
    assert "not whether the user took part" in err and "replace one user's data accepts every" in err
    assert "<Neighbours" not in err and "kind (" not in err  # issue 15, defect 6: no Python internals
    assert ledger.read_text() == before
    assert _init(capsys, tmp_path / "replace.json", "replace:5") == 0  # the same release under replace: costs 2
    assert main(cli_argv.greatcircle(data, "--alpha", "2", "--json", "--ledger", str(tmp_path / "replace.json"))) == 0
    capsys.readouterr()
    (entry,) = json.loads((tmp_path / "replace.json").read_text())["entries"]
    assert entry["guarantee"]["kind"] == "EMDMetricDP" and entry["cost"]["epsilon"] == 2.0


def test_an_old_multi_budget_ledger_is_refused_with_how_to_recreate_it(tmp_path, capsys, reviews):
    old = {
        "format": "userdp-ledger/1",
        "budgets": [
            {"kind": "PureDP", "epsilon": 1.0, "delta": 0.0, "neighbours": nb} for nb in (AR.value, REPLACE.value)
        ],
        "entries": [],
    }
    ledger = tmp_path / "old.json"
    ledger.write_text(json.dumps(old))
    before = ledger.read_text()
    for argv in (
        ["ledger", "show", str(ledger)],
        cli_argv.distinct(reviews, "reviewer", "text", "--epsilon", "1", "--ledger", str(ledger)),
    ):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"userdp: error: {ledger}: this ledger was written by an older userdp")
        assert "userdp ledger init FILE --force --budget replace:EPSILON[:DELTA]" in err
    assert ledger.read_text() == before


def test_charge_converts_demd_releases_to_the_ledger_relation(tmp_path, capsys):
    """A bounded local d_EM-DP release (users of equal sizes) costs its guarantee at d_EM = 1 under a ledger for
    two inputs of one user of the same size; a ledger for any two inputs refuses it (the qualifier is kept)."""
    ledger = tmp_path / "ledger.json"
    assert _init(capsys, ledger, "local-same-size:3:1e-6") == 0
    cli_ledger.charge(argparse.Namespace(ledger=str(ledger), command="itemwise"), EMDMetricDP(2.0, 1e-8), "gkrr")
    (entry,) = json.loads(ledger.read_text())["entries"]
    assert entry["cost"] == {"kind": "ApproxDP", "epsilon": 2.0, "delta": 1e-8,
                             "neighbours": Neighbours.TWO_INPUTS_SAME_SIZE.value}  # fmt: skip
    assert _init(capsys, tmp_path / "any.json", "local:3:1e-6") == 0
    with pytest.raises(BudgetExceededError, match="same number of items"):
        cli_ledger.charge(argparse.Namespace(ledger=str(tmp_path / "any.json"), command="itemwise"),
                          EMDMetricDP(2.0, 1e-8), "gkrr")  # fmt: skip


def test_the_ledger_records_command_input_time_and_parameters(tmp_path, capsys, reviews):
    """Issue 15, defect 11: each charged entry records the command as typed, the input file's name and SHA-256,
    the time (UTC) and the parameters; `ledger show` prints them and a reloaded ledger keeps them."""
    import hashlib
    from datetime import UTC, datetime, timedelta

    ledger = tmp_path / "ledger.json"
    assert _init(capsys, ledger, "add-remove:5") == 0
    argv = cli_argv.distinct(
        reviews, "reviewer", "text", "--tokenize", "--epsilon", "1", "--seed", "3", "--ledger", str(ledger)
    )
    assert main(argv) == 0
    capsys.readouterr()
    (entry,) = json.loads(ledger.read_text())["entries"]
    meta = entry["metadata"]
    assert meta["command"] == "userdp " + " ".join(argv)
    assert meta["input"] == {"name": str(reviews), "sha256": hashlib.sha256(reviews.read_bytes()).hexdigest()}
    assert abs(datetime.fromisoformat(meta["time"]) - datetime.now(UTC)) < timedelta(minutes=5)
    assert meta["parameters"]["epsilon"] == 1.0 and meta["parameters"]["tokenize"] is True
    assert "ledger" not in meta["parameters"] and "func" not in meta["parameters"]
    assert main(["ledger", "show", str(ledger)]) == 0
    text = capsys.readouterr().out
    assert f"input {reviews} (sha256 {meta['input']['sha256']})" in text and meta["time"] in text
    assert main(["ledger", "show", str(ledger), "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["releases"]
    assert shown["input"] == meta["input"] and shown["command"] == meta["command"]
    # a second charge keeps the first entry's record (the reloaded ledger carries metadata through)
    assert main(argv) == 0
    capsys.readouterr()
    first, second = json.loads(ledger.read_text())["entries"]
    assert first["metadata"] == meta and second["metadata"]["input"] == meta["input"]


def test_a_folder_input_is_fingerprinted_by_its_files(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text("user,item\n1,x\n")
    one = cli_ledger.file_fingerprint(folder)
    (folder / "b.csv").write_text("user,item\n2,y\n")
    two = cli_ledger.file_fingerprint(folder)
    assert one["name"] == str(folder) and one["sha256"] != two["sha256"]


def test_a_file_that_is_not_a_ledger_is_named_plainly(tmp_path, capsys):
    bad = tmp_path / "notes.json"
    bad.write_text("not json at all")
    assert main(["ledger", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "is not a userdp ledger (not JSON)" in err and "line 1 column" not in err


@pytest.fixture
def table(tmp_path) -> tuple[Path, Path]:
    """One file every releasing command can read (user, item, lat, lon, text) and a clustered domain file."""
    rng = np.random.default_rng(5)
    labels = [f"{b}{c}" for b in "AB" for c in range(3)]
    (tmp_path / "domain.csv").write_text("item,cluster\n" + "".join(f"{x},{x[0]}\n" for x in labels))
    rows = ["user,item,lat,lon,text"]
    for u in range(60):
        for _ in range(6):
            lat, lon = 40.70 + 0.05 * rng.random(), -74.0 + 0.05 * rng.random()
            rows.append(f"u{u},{labels[rng.integers(0, 6)]},{lat:.5f},{lon:.5f},word{rng.integers(0, 9)} the")
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    return tmp_path / "data.csv", tmp_path / "domain.csv"


_E = 0.5
_RELEASES = {  # command line (without the data file's flags) and the guarantee it must deliver (None: d_EM-DP)
    "distinct": (["--epsilon", str(_E)], PureDP(_E, neighbours=AR)),
    "vocabulary": (["--tokenize", "--epsilon", str(_E), "--delta", "1e-6"], ApproxDP(_E, 1e-6, AR)),
    "counts": (["--tokenize", "--epsilon", str(_E)], ApproxDP(_E, 1e-6, AR)),
    "heatmap": (["--epsilon", str(_E), "--resolution", "16"], PureDP(_E, neighbours=AR)),
    "linear": (["--alpha", "3"], None),
    "itemwise": (["--alpha", "20", "--delta", "1e-6"], None),
    "freq": (["--alpha", "20", "--delta", "1e-6"], None),
}


def _argv(command: str, data: Path, domain: Path, out: Path) -> list[str]:
    flags, _ = _RELEASES[command]
    if command in ("distinct", "vocabulary", "counts"):
        base = [command, str(data), "--user", "user", "--item" if command != "counts" else "--key", "text"]
        base = base if command != "distinct" else [command, str(data), "--user", "user", "--item", "item"]
        if command != "distinct":
            base += ["--out", str(out / f"{command}.csv")]
        if command == "counts":  # keys selected from the data: needs delta
            base += ["--delta", "1e-6"]
        return base + flags
    if command == "heatmap":
        return cli_argv.heatmap(data, "--bbox", cli_argv.BBOX, "--out", str(out / "h.png"), *flags)
    if command == "linear":
        return cli_argv.greatcircle(data, *flags)
    return cli_argv.clustered(command, data, domain, *flags)


@pytest.mark.parametrize("command", sorted(_RELEASES))
def test_every_releasing_command_charges_what_it_released(command, tmp_path, capsys, table):
    """Every command that releases data charges the ledger exactly once, with the guarantee it printed (the
    release's own), at that guarantee's cost under the ledger's relation: for add/remove ``(e, d)`` under
    replacing one user's data by data of the same size, ``(2 e, (1 + e^e) d)`` (group privacy of two steps,
    computed here); a command that skipped its charge, or charged another guarantee than it released, fails."""
    from userdp.privacy import guarantee_from_dict

    data, domain = table
    ledger = tmp_path / "ledger.json"
    assert _init(capsys, ledger, "replace-same-size:100:0.01") == 0  # (accepts bounded d_EM releases too)
    assert main(_argv(command, data, domain, tmp_path) + ["--json", "--seed", "2", "--ledger", str(ledger)]) == 0
    printed = json.loads(capsys.readouterr().out)["guarantee"]
    (entry,) = json.loads(ledger.read_text())["entries"]
    delivered, cost = guarantee_from_dict(entry["guarantee"]), guarantee_from_dict(entry["cost"])
    assert delivered.describe() == printed and entry["label"] == command
    assert cost.neighbours == Neighbours.REPLACE_USER_SAME_SIZE
    expected = _RELEASES[command][1]
    if expected is not None:  # user-level DP for add/remove: the guarantee asked for, at its group-privacy cost
        assert delivered == expected
        assert cost.epsilon == pytest.approx(2 * _E, rel=1e-12)
        assert cost.delta == pytest.approx((1 + np.exp(_E)) * expected.delta, rel=1e-12)
    else:  # d_EM-DP, read at d_EM = 1: the user-level cost is at least alpha's share, never below the release's
        assert isinstance(delivered, EMDMetricDP) or type(delivered).__name__ == "DiscreteEMDDP"
        assert cost.epsilon > 0


def _vocabulary(reviews: Path, *flags: str) -> list[str]:
    return ["vocabulary", str(reviews), "--user", "reviewer", "--item", "text", "--tokenize", "--epsilon", "1",
            "--delta", "1e-6", "--show", "0", *flags]  # fmt: skip


def test_an_epsilon_delta_ledger_charges_the_tight_total(tmp_path, capsys, reviews):
    """Three (1, 1e-6) Gaussian vocabulary runs fit a (2.5, 1e-5) ledger: their stated zCDP guarantee composes to
    about 1.09 at 1e-5, where basic composition (3 > 2.5) would refuse the third; `ledger show` prints the tight
    (charged) total, the basic one and the zCDP one."""
    ledger = tmp_path / "ledger.json"
    assert _init(capsys, ledger, "add-remove:2.5:1e-5") == 0
    for _ in range(3):
        assert main(_vocabulary(reviews, "--ledger", str(ledger))) == 0
    capsys.readouterr()
    entries = json.loads(ledger.read_text())["entries"]
    assert len(entries) == 3 and all(e["losses"][0]["kind"] == "ZCDPLoss" for e in entries)
    assert main(["ledger", "show", str(ledger)]) == 0
    text = capsys.readouterr().out
    assert "budget epsilon 2.5, delta 1e-05; spent epsilon 1.08977 at delta 1e-05 (tight composition)" in text
    assert "(tight composition); left epsilon 1.41023 at delta 1e-05" in text
    assert "basic composition epsilon 3, delta 3e-06" in text and "zCDP rho 0.0354831, delta 7.5e-07" in text
    assert "charged by the tight total" in text
    assert main(["ledger", "show", str(ledger), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["spent, basic composition"] == "epsilon 3, delta 3e-06"
    assert shown["spent"].startswith("epsilon 1.08977")
    assert shown["spent, tight composition"].startswith("epsilon 1.08977")


def test_a_rho_ledger_takes_what_states_zcdp_and_refuses_the_rest_before_reading(tmp_path, capsys, reviews):
    """`--budget-rho add-remove:0.02:1e-5` takes one Gaussian vocabulary run (rho 0.0118) and refuses the second
    (0.0237 > 0.02); a release that states no zCDP guarantee (distinct, Laplace vocabulary) is refused before
    its input is read (a missing file is not reached), and so is a ledger of another relation; the ledger is
    unchanged by each refusal."""
    ledger = tmp_path / "rho.json"
    assert main(["ledger", "init", str(ledger), "--budget-rho", "add-remove:0.02:1e-5"]) == 0
    capsys.readouterr()
    assert main(_vocabulary(reviews, "--ledger", str(ledger))) == 0
    capsys.readouterr()
    (entry,) = json.loads(ledger.read_text())["entries"]
    assert entry["cost"]["kind"] == "ZCDP" and entry["cost"]["rho"] == pytest.approx(0.0118277, rel=1e-5)
    before = ledger.read_text()
    assert main(_vocabulary(reviews, "--ledger", str(ledger))) == 2
    out, err = capsys.readouterr()
    assert "over the budget" in err and ledger.read_text() == before
    missing = tmp_path / "missing.csv"
    for argv in (
        cli_argv.distinct(missing, "reviewer", "text", "--epsilon", "1"),
        _vocabulary(missing, "--noise", "laplace"),
        _vocabulary(missing, "--algorithm", "sips"),
    ):
        assert main(argv + ["--ledger", str(ledger)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("userdp: error:") and "states no zCDP guarantee" in err
        assert "missing.csv" not in err.split("is a zCDP budget")[1] and ledger.read_text() == before
    assert main(["ledger", "show", str(ledger)]) == 0
    text = capsys.readouterr().out
    assert "budget rho 0.02, delta 1e-05; spent rho 0.0118277, delta 2.5e-07; left rho 0.00817" in text
    assert "basic composition epsilon 1, delta 1e-06" in text and "charged by rho (zCDP composition)" in text
    counts = ["counts", str(missing), "--user", "reviewer", "--key", "text", "--epsilon", "1", "--delta", "1e-6"]
    assert main(counts + ["--ledger", str(ledger)]) == 2  # Laplace counts (the default): refused before reading
    assert "`userdp counts` with --noise laplace states no zCDP guarantee" in capsys.readouterr().err
    assert main(counts + ["--noise", "gaussian", "--ledger", str(ledger)]) == 2  # accepted: then the file is missing
    assert "missing.csv" in capsys.readouterr().err and ledger.read_text() == before
    replace = tmp_path / "replace.json"
    assert main(["ledger", "init", str(replace), "--budget-rho", "replace:1"]) == 0
    assert main(_vocabulary(missing, "--ledger", str(replace))) == 2
    assert "zCDP is not converted between relations" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags",
    [
        ["--budget-rho", "add-remove:0"],
        ["--budget-rho", "add-remove:x"],
        ["--budget-rho", "sideways:1"],
        ["--budget-rho", "add-remove:1:1.5"],
        ["--budget-rho", "add-remove:1", "--budget", "add-remove:1"],
        [],
    ],
)
def test_a_bad_rho_budget_is_refused_and_creates_nothing(tmp_path, capsys, flags):
    ledger = tmp_path / "rho.json"
    assert main(["ledger", "init", str(ledger), *flags]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("userdp: error:") and "Traceback" not in err and not ledger.exists()
