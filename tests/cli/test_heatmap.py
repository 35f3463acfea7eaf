"""CLI: userdp heatmap writes only the DP image and grid; bad input is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import main


@pytest.fixture
def points(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["user,lat,lon"] + [
        f"u{i % 50},{40.7 + 0.05 * rng.random():.5f},{-74.0 + 0.05 * rng.random():.5f}" for i in range(1000)
    ]
    path = tmp_path / "pts.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("algorithm", ["sparse", "dense", "laplace", "threshold"])
def test_heatmap_json(points, tmp_path, capsys, algorithm):
    out = tmp_path / f"{algorithm}.png"
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "64", "--epsilon", "1")
    assert main([*argv, "--algorithm", algorithm, "--out", str(out), "--json", "--seed", "1"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert {"epsilon", "algorithm", "resolution", "image", "grid"} <= set(res)
    grid = np.load(res["grid"])
    assert grid.shape == (64, 64) and grid.sum() == pytest.approx(1.0)
    assert "users" not in json.dumps(res)  # nothing non-private is reported


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--bbox", "40.72,-74.01,40.76,-73.94"], "outside"),
        (["--bbox", "40.69,-74.01"], "MINLAT"),
        (["--bbox", "40.69,-74.01,40.76,-73.94", "--resolution", "100"], "power of two"),
        (["--bbox", "40.69,-74.01,40.76,-73.94", "--epsilon", "-1"], "epsilon"),
    ],
)
def test_heatmap_refusals(points, tmp_path, capsys, extra, msg):
    assert main(cli_argv.heatmap(points, "--epsilon", "1", "--out", str(tmp_path / "x.png"), *extra)) == 2
    assert msg in capsys.readouterr().err
