"""The command line: the demo writes its report; errors are reported without a traceback."""

from __future__ import annotations

import json

from userdp.cli import main


def test_demo_writes_report(tmp_path, capsys):
    assert main(["demo", "--seed", "3", "--out", str(tmp_path), "--side", "32"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["seeded"] is True
    rel = report["releases"][0]
    assert rel["guarantee"].startswith("1-DP") and 0 <= rel["emd_to_truth"] <= 1
    assert (tmp_path / rel["image"]).stat().st_size > 1000
    assert "warning" in capsys.readouterr().out


def test_demo_refuses_bad_epsilon(tmp_path, capsys):
    assert main(["demo", "--epsilon", "0", "--out", str(tmp_path)]) == 2
    assert "epsilon" in capsys.readouterr().err


def test_datasets_command(capsys):
    assert main(["datasets"]) == 0
    assert "foursquare_nyc" in capsys.readouterr().out
