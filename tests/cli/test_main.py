"""The command line: the demo writes its report; errors are reported without a traceback."""

from __future__ import annotations

import json

import pytest

from tests import cli_argv
from userdp.cli import main


def test_demo_writes_report(tmp_path, capsys):
    """The main job: every release is in the JSON and the self-contained HTML report."""
    assert main(["demo", "--seed", "3", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["seeded"] is True and report["seconds"] < 60
    names = [r["name"] for r in report["releases"]]
    for key in ("heatmap", "distinct count", "frequency", "PrivEMDLinear", "accountant"):
        assert any(key in n for n in names), key
    for r in report["releases"]:
        assert r["guarantee"] and r["result"] and r["error"]
    accountant = next(r for r in report["releases"] if "accountant" in r["name"])  # each note names its model
    assert accountant["error"].startswith("local model") and "; central model" in accountant["error"]
    html = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in html and all(n.split(" (")[0] in html for n in names)
    assert (tmp_path / "heatmap.png").stat().st_size > 10_000
    captured = capsys.readouterr()
    assert "warning" in captured.err and "warning" not in captured.out  # the seed warning, on stderr as everywhere


def test_datasets_command(capsys):
    assert main(["datasets"]) == 0
    assert "foursquare_nyc" in capsys.readouterr().out


def test_account_calibrate_json(capsys):
    assert (
        main(["account", "calibrate", "--alpha", "25", "--m", "1000", "--n", "100000", "--delta", "1e-5", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert {"alpha", "alpha0", "delta", "delta_prime", "route", "model"} <= set(out)
    assert out["route"] == "theorem 4.4" and out["model"] == "central" and 2.6 < out["alpha0"] < 3.1


def test_account_shuffle_json_and_plot(tmp_path, capsys):
    png = tmp_path / "curve.png"
    argv = ["account", "shuffle", "--alpha0", "2.7", "--m", "1000", "--n", "100000", "--delta", "1e-12"]
    assert main([*argv, "--json", "--plot", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["alpha"] == pytest.approx(25, abs=0.5) and 1e-6 < out["delta_prime"] < 1e-4
    assert png.stat().st_size > 1000
    # a --plot name without an image suffix (the fuzz test's 40.7,-74.0,40.8,-73.9) is refused before anything
    assert main([*argv, "--json", "--plot", str(tmp_path / "40.7,-74.0,40.8,-73.9")]) == 2
    captured = capsys.readouterr()
    assert "--plot 40.7,-74.0,40.8,-73.9 needs an image suffix" in captured.err and captured.out == ""


def test_account_reduction_json(capsys):
    assert main(["account", "reduction", "--epsilon", "1", "--r", "0.05", "--delta", "1e-6", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["s"] == out["min_samples"] == 553


@pytest.mark.parametrize(
    "argv,msg",
    [
        (["account", "shuffle", "--alpha0", "3", "--m", "100", "--delta", "1e-6"], "Theorem 4.3 needs"),
        (["account", "shuffle", "--alpha0", "0.1", "--m", "0", "--delta", "1e-6"], "--m must lie in [1, "),
        (["account", "calibrate", "--alpha", "5", "--m", "100", "--delta", "1.5"], "--delta must lie in"),
        (["account", "shuffle", "--alpha0", "0.1", "--m", "10", "--n", "0", "--delta", "1e-6"], "--n must lie in"),
        (["account", "calibrate", "--alpha", "5", "--m", "100", "--delta", "1e-6", "--model", "central"], "needs n"),
    ],
)
def test_account_bad_input(argv, msg, capsys):
    assert main(argv) == 2
    assert msg in capsys.readouterr().err


def test_account_shuffle_numerical_json(capsys):
    argv = [
        "account",
        "shuffle",
        "--alpha0",
        "1.0",
        "--m",
        "20",
        "--n",
        "200",
        "--delta",
        "1e-4",
        "--numerical",
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"] == "numerical" and out["alpha"] < 2.0


def test_distinct_json(tmp_path, capsys):
    path = tmp_path / "reviews.csv"
    rows = ["reviewer,text"] + [f"p{i % 40},word{i % 97} other{i % 13} Word{i % 97}" for i in range(400)]
    path.write_text("\n".join(rows) + "\n")
    argv = cli_argv.distinct(path, "reviewer", "text", "--tokenize", "--epsilon", "1", "--json", "--seed", "1")
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"lower_bound", "bound", "epsilon", "beta", "method"} <= set(out)
    assert out["lower_bound"] < 97 + 13 and out["method"] == "matching"


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--user", "nope", "--item", "text", "--epsilon", "1"], "not found"),
        (["--user", "reviewer", "--item", "text", "--epsilon", "0"], "epsilon"),
        (["--user", "reviewer", "--item", "text", "--epsilon", "1", "--beta", "0.6"], "beta"),
        (["--user", "reviewer", "--item", "text", "--epsilon", "1", "--max-bound", "0"], "--max-bound must lie in"),
    ],
)
def test_distinct_bad_input(tmp_path, capsys, extra, msg):
    path = tmp_path / "r.csv"
    path.write_text("reviewer,text\na,x y\nb,y z\n")
    assert main(["distinct", str(path), *extra]) == 2
    assert msg in capsys.readouterr().err


def test_distinct_empty(tmp_path, capsys):
    """No rows is a dataset of no persons: under add/remove-one-person neighbours it is released (a refusal
    would reveal that the data are empty)."""
    path = tmp_path / "empty.csv"
    path.write_text("reviewer,text\n")
    assert main(cli_argv.distinct(path, "reviewer", "text", "--epsilon", "1") + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["epsilon"] == 1.0


def test_every_option_has_help_and_every_release_command_an_example():
    import argparse

    from userdp.cli import build_parser

    def walk(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub_parser in action.choices.items():
                    yield from walk(sub_parser, f"{name} {sub_name}")
            elif action.dest != "help":
                yield name, action

    for name, action in walk(build_parser(), "userdp"):  # nested commands (account, ledger) included
        assert action.help, f"{name} {(action.option_strings or [action.dest])[0]} has no help"
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        if name in ("heatmap", "distinct", "linear", "itemwise", "freq", "audit"):
            assert "example:" in parser.format_help() and f"userdp {name} " in parser.epilog
    for group, names in (("account", ("shuffle", "calibrate", "reduction")), ("ledger", ("init", "show"))):
        nested = next(a for a in sub.choices[group]._actions if isinstance(a, argparse._SubParsersAction))
        for name in names:
            assert f"userdp {group} {name} " in nested.choices[name].epilog
    help_text = sub.choices["distinct"].format_help()
    assert "(default: 0.05)" in help_text and "(default: None)" not in help_text


@pytest.mark.parametrize("argv", [["--eps", "1"], ["--epsilon", "1", "--bet", "0.1"]])
def test_option_abbreviations_are_refused(tmp_path, capsys, argv):
    """No prefix of an option is taken for it (argparse's abbreviations are off): ``--eps 1`` is no
    ``--epsilon 1`` and ``--bet`` no ``--beta`` (nor ``linear --r`` a silent ``--r-discrete``): exit 2, nothing
    released."""
    path = tmp_path / "r.csv"
    path.write_text("reviewer,text\na,x y\nb,y z\n")
    with pytest.raises(SystemExit) as info:
        main(["distinct", str(path), "--user", "reviewer", "--item", "text", *argv])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert ("required: --epsilon" if argv[0] == "--eps" else "unrecognized arguments: --bet") in captured.err
    assert captured.out == ""


def test_ctrl_c_says_interrupted_and_exits_130_without_a_traceback(tmp_path, capsys, monkeypatch):
    """Ctrl-C during a release: ``userdp: interrupted`` on stderr, exit 130, no traceback, nothing on stdout,
    and the ledger untouched (a release is charged and written only when it is complete)."""
    import userdp.releases as rel

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rel, "distinct", interrupted)
    path, book = tmp_path / "r.csv", tmp_path / "ledger.json"
    path.write_text("reviewer,text\na,x y\nb,y z\n")
    assert main(["ledger", "init", str(book), "--budget", "add-remove:5"]) == 0
    before = book.read_bytes()
    capsys.readouterr()
    argv = ["distinct", str(path), "--user", "reviewer", "--item", "text", "--epsilon", "1", "--ledger", str(book)]
    assert main(argv) == 130
    captured = capsys.readouterr()
    assert captured.err == "userdp: interrupted\n" and captured.out == "" and book.read_bytes() == before


def test_every_release_command_has_its_release_function_of_the_same_name():
    """``userdp X`` and ``userdp.releases.X`` name the same release, for every release command (``counts``
    was the module of ``key_counts``; ``freq`` was ``frequency``): the old names stay."""
    import argparse

    from userdp import releases
    from userdp.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    releasing = ("--epsilon", "--alpha")
    commands = [name for name, p in sub.choices.items()
                if any(o in p._option_string_actions for o in releasing) and name not in ("account", "plan")]
    assert sorted(commands) == [
        "aggregate", "counts", "distinct", "freq", "heatmap", "itemwise", "linear", "vocabulary"
    ]  # fmt: skip
    for name in commands:
        assert callable(getattr(releases, name)) and name in releases.__all__, name
    assert releases.counts is releases.key_counts and releases.freq is releases.frequency
