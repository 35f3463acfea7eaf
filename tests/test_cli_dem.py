"""CLI: userdp linear / itemwise / freq on files, JSON output, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import main


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    labels = [f"{b}{c}" for b in "ABC" for c in range(4)]
    (tmp_path / "domain.csv").write_text("item,cluster\n" + "".join(f"{x},{x[0]}\n" for x in labels))
    rows = ["user,item,lat,lon"]
    for u in range(200):
        for _ in range(20 if u % 2 else 10):
            rows.append(
                f"u{u},{labels[rng.integers(0, 12)]},{40.6 + 0.3 * rng.random():.5f},{-74.1 + 0.3 * rng.random():.5f}"
            )
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def _run(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_freq_json(files, capsys):
    base = ["--alpha", "20", "--delta", "1e-6", "--json", "--seed", "1"]
    data, domain = files / "data.csv", files / "domain.csv"
    out = _run(capsys, cli_argv.clustered("freq", data, domain, *base, "--samples", "20"))
    assert {"mechanism", "guarantee", "estimate"} <= set(out)
    assert "discrete" in out["guarantee"] and len(out["estimate"]) == 12
    assert sum(out["estimate"].values()) == pytest.approx(1.0)
    out2 = _run(capsys, cli_argv.clustered("itemwise", data, domain, *base, "--samples", "20", "--model", "central"))
    assert out2["route"] == "theorem 4.4" or out2["route"] == "composition"


def test_linear_json(files, capsys):
    out = _run(capsys, cli_argv.greatcircle(files / "data.csv", "--alpha", "25", "--json", "--seed", "2"))
    assert out["unit"] == "km" and 0 < out["estimate"][0] < 60
    assert "unbounded local" in out["guarantee"]


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--metric", "clustered", "--item", "item"], "needs --domain"),
        (["--metric", "greatcircle", "--items", "lat,lon"], "needs --box"),
        (
            ["--metric", "greatcircle", "--items", "lat,lon", "--box", "40.7,41,-74.3,-73.65"],
            "outside the declared box",
        ),
    ],
)
def test_refusals(files, capsys, extra, msg):
    argv = ["linear", str(files / "data.csv"), "--user", "user", "--alpha", "5", "--point", "40.7,-74", *extra]
    assert main(argv) == 2
    assert msg in capsys.readouterr().err


def test_unequal_sizes_need_samples(files, capsys):
    assert main(cli_argv.clustered("freq", files / "data.csv", files / "domain.csv", "--alpha", "20")) == 2
    assert "--samples" in capsys.readouterr().err
