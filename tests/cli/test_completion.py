"""``userdp completion``: shell completion generated from the parser (issue 15, defect 13)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from userdp.cli import main


def _script(capsys, shell: str) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def _complete(script: str, tmp_path, words: list[str]) -> list[str]:
    """What bash offers after ``words`` (the last one is being typed), by the generated completion function."""
    path = tmp_path / "userdp.bash"
    path.write_text(script)
    line = " ".join(words)
    words_sh = " ".join(f"'{w}'" for w in words)
    prog = (
        f"source {path}; COMP_WORDS=({words_sh}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; "
        f"COMP_POINT={len(line)}; _shtab_userdp userdp '{words[-1]}' '{words[-2]}'; "
        "printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    out = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    return out.split()


def test_bash_completes_commands_options_choices_and_files(capsys, tmp_path):
    script = _script(capsys, "bash")
    assert _complete(script, tmp_path, ["userdp", "fr"]) == ["freq"]
    assert set(_complete(script, tmp_path, ["userdp", ""])) >= {"heatmap", "distinct", "linear", "freq", "ledger"}
    assert "--top" in _complete(script, tmp_path, ["userdp", "freq", "--to"])
    assert set(_complete(script, tmp_path, ["userdp", "heatmap", "--engine", ""])) == {
        "auto", "memory", "duckdb", "chunked", "spark"
    }
    (tmp_path / "checkins.csv").write_text("user\n")
    assert "checkins.csv" in _complete(script, tmp_path, ["userdp", "distinct", "check"])


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_other_shells(capsys, shell):
    script = _script(capsys, shell)
    assert "heatmap" in script and ("--bbox" in script or shell == "tcsh")  # tcsh: subcommands and positionals
    if shell == "zsh" and shutil.which("zsh"):
        subprocess.run(["zsh", "-n"], input=script, text=True, check=True)


def test_unknown_shell_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["completion", "fish"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
