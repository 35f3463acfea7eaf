"""Progress output: a transient spinner on a terminal's standard error while a command works (never in a pipe
or in the JSON), and the engines' own progress output (DuckDB's bar, Spark's stage bars) only with --verbose."""

import argparse
import os
import subprocess
import sys

import pytest

from userdp.cli import common
from userdp.cli.main import main
from userdp.engines import engine_progress
from userdp.engines.base import progress_default
from userdp.engines.duckdb import DuckDBEngine


def _tty_stderr(monkeypatch, stdout_tty=False):
    monkeypatch.setattr(common, "_isatty", lambda s: s is sys.stderr or (stdout_tty and s is sys.stdout))


def test_spinner_on_a_terminal_and_stdout_untouched(monkeypatch, capsys):
    _tty_stderr(monkeypatch)
    with common.working(argparse.Namespace(command="heatmap")):
        print('{"json": 1}')
    out, err = capsys.readouterr()
    assert out == '{"json": 1}\n'  # standard output is not the terminal: nothing of the spinner goes there
    assert "userdp heatmap: reading the data and releasing" in err


def test_no_spinner_in_a_pipe_or_for_quiet_commands(monkeypatch, capsys):
    with common.working(argparse.Namespace(command="heatmap")):
        pass
    assert capsys.readouterr().err == ""
    _tty_stderr(monkeypatch)
    for command in common.QUIET_COMMANDS:
        with common.working(argparse.Namespace(command=command)):
            pass
    assert capsys.readouterr().err == ""


def test_verbose_opens_the_engines_progress(monkeypatch, tmp_path):
    """--verbose on a release command is what the engines see as their default; without it, silence."""
    seen = []
    monkeypatch.setattr("userdp.cli.distinct.cmd_distinct", lambda args: seen.append(progress_default(None)))
    f = tmp_path / "w.csv"
    f.write_text("user,item\n1,a\n")
    argv = ["distinct", str(f), "--user", "user", "--item", "item", "--epsilon", "1"]
    assert main(argv) == 0 and main([*argv, "--verbose"]) == 0
    assert seen == [False, True]


def test_duckdb_progress_bar_off_by_default():
    def setting(engine):
        return engine.con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0]

    assert setting(DuckDBEngine()) is False
    assert setting(DuckDBEngine(progress=True)) is True
    with engine_progress(True):
        assert setting(DuckDBEngine()) is True
    assert progress_default(None) is False


@pytest.mark.slow
def test_spark_session_silent_unless_asked():
    pytest.importorskip("pyspark")
    code = (
        "import sys; from userdp.engines.spark import SparkEngine; e = SparkEngine(progress=sys.argv[1] == '1'); "
        "print(e.spark.sparkContext.getConf().get('spark.ui.showConsoleProgress')); e.spark.stop()"
    )
    for flag, want in (("0", "false"), ("1", "true")):
        r = subprocess.run([sys.executable, "-c", code, flag], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ))  # fmt: skip
        assert r.stdout.strip().splitlines()[-1] == want
