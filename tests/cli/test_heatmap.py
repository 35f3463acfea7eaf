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


@pytest.mark.parametrize("algorithm", ["auto", "sparse", "dense", "laplace", "threshold"])
def test_heatmap_json(points, tmp_path, capsys, algorithm):
    out = tmp_path / f"{algorithm}.png"
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "64", "--epsilon", "1")
    assert main([*argv, "--algorithm", algorithm, "--out", str(out), "--json", "--seed", "1"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert {"epsilon", "algorithm", "resolution", "image", "grid"} <= set(res)
    grid = np.load(res["grid"])
    # 64 cells along the longer side, square on the ground (the box is 3.3 km north-south by 2.5 km east-west)
    assert grid.shape == tuple(res["shape"]) == (64, 49) and grid.sum() == pytest.approx(1.0)
    # nothing non-private is reported (the box check is post-processing of the released DP count)
    assert "users" not in json.dumps({k: v for k, v in res.items() if k != "box_check"})


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--bbox", "40.69,-74.01"], "MINLAT"),
        (["--bbox", "40.69,-74.01,40.76,-73.94", "--resolution", "0"], "--resolution"),
        (["--bbox", "40.69,-74.01,40.76,-73.94", "--grid", "3y4"], "ROWSxCOLS"),
        (["--bbox", "40.69,-74.01,40.76,-73.94", "--grid", "30x40", "--resolution", "64"], "give one of them"),
        (["--bbox", "40.69,-74.01,40.76,-73.94", "--epsilon", "-1"], "epsilon"),
    ],
)
def test_heatmap_refusals(points, tmp_path, capsys, extra, msg):
    assert main(cli_argv.heatmap(points, "--epsilon", "1", "--out", str(tmp_path / "x.png"), *extra)) == 2
    assert msg in capsys.readouterr().err


def test_points_outside_the_box_are_dropped_and_the_output_says_so(points, tmp_path, capsys):
    """A box that leaves some points out is released, not refused (a refusal would depend on the data): the
    points outside are dropped user by user, and the output says so, with no count."""
    argv = cli_argv.heatmap(points, "--bbox", "40.72,-74.01,40.76,-73.94", "--epsilon", "1", "--seed", "1")
    assert main([*argv, "--out", str(tmp_path / "x.png"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["outside"].startswith("points outside the public box are dropped")
    assert main([*argv, "--out", str(tmp_path / "y.png")]) == 0
    assert "points outside the public box are dropped" in capsys.readouterr().out


def test_unwritable_output_spends_no_budget_and_a_refused_charge_writes_nothing(points, tmp_path, capsys):
    """--out into a folder that does not exist: exit 2 before the ledger is charged (the files are written under
    temporary names first). A release the ledger refuses leaves no file, temporary or final."""
    ledger = tmp_path / "budget.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:1.5"]) == 0
    before = ledger.read_text()
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "32", "--epsilon", "1")
    assert main([*argv, "--out", str(tmp_path / "nowhere" / "h.png"), "--ledger", str(ledger)]) == 2
    assert "nothing was released or charged" in capsys.readouterr().err
    assert ledger.read_text() == before
    out = tmp_path / "maps"
    out.mkdir()
    assert main([*argv, "--out", str(out / "a.png"), "--ledger", str(ledger)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["a.npy", "a.png"]
    capsys.readouterr()
    assert main([*argv, "--out", str(out / "b.png"), "--ledger", str(ledger)]) == 2  # 1 + 1 > 1.5
    assert "over the budget" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["a.npy", "a.png"]


def test_resolution_is_capped_before_any_data_is_read(tmp_path, capsys):
    argv = cli_argv.heatmap(tmp_path / "missing.csv", "--bbox", cli_argv.BBOX, "--epsilon", "1")
    assert main([*argv, "--resolution", "65536"]) == 2
    assert "--resolution must lie in [1, 8192]" in capsys.readouterr().err  # not "no such file": never read


def test_docs_heatmap_command_runs_on_the_bundled_data(tmp_path, capsys, monkeypatch):
    """The `userdp heatmap checkins.csv ...` command docs/reference/heatmaps.md shows runs as written on the bundled
    check-ins."""
    import re
    import shlex
    from pathlib import Path

    import pyarrow.csv as pcsv

    from userdp.datasets import foursquare_nyc

    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "heatmaps.md").read_text()
    command = re.search(r"^userdp heatmap checkins\.csv .*?--json$", page, re.M | re.S).group(0)
    monkeypatch.chdir(tmp_path)
    pcsv.write_csv(foursquare_nyc().to_arrow(), "checkins.csv")
    assert main(shlex.split(command.replace("\\\n", " "))[1:]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["resolution"] == 256 and np.load(out["grid"]).sum() == pytest.approx(1.0)


def test_existing_outputs_are_not_overwritten_without_force(points, tmp_path, capsys):
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "32", "--epsilon", "1")
    out = str(tmp_path / "h.png")
    assert main([*argv, "--out", out]) == 0
    first = (tmp_path / "h.npy").read_bytes()
    capsys.readouterr()
    assert main([*argv, "--out", out]) == 2
    assert "--force" in capsys.readouterr().err and (tmp_path / "h.npy").read_bytes() == first
    assert main([*argv, "--out", out, "--force"]) == 0
    assert (tmp_path / "h.npy").read_bytes() != first  # a new release


def test_bbox_in_the_wrong_order_says_so(points, capsys):
    argv = cli_argv.heatmap(points, "--bbox", "40.76,-74.01,40.69,-73.94", "--epsilon", "1")  # min/max swapped
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "smallest latitude (40.76) must come below the largest (40.69)" in err and "[-90, 90]" not in err


def test_out_naming_a_folder_is_refused_before_anything_is_charged(points, tmp_path, capsys):
    ledger = tmp_path / "budget.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:5"]) == 0
    before = ledger.read_text()
    (tmp_path / "h.png").mkdir()
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "32", "--epsilon", "1")
    assert main([*argv, "--out", str(tmp_path / "h.png"), "--force", "--ledger", str(ledger)]) == 2
    assert "names a folder" in capsys.readouterr().err and ledger.read_text() == before


@pytest.mark.parametrize("algorithm", ["sparse", "threshold"])
def test_heatmap_image_is_a_readable_map(points, tmp_path, capsys, monkeypatch, algorithm):
    """The image is drawn by userdp.report.maps: large enough for a report, titled with the mechanism and
    epsilon, with the legend text for this algorithm's left-out cells."""
    import struct

    from userdp.report import maps

    seen = {}
    original = maps.render_maps

    def spy(panels, path, box=None, title="", **kw):
        seen.update(panels=panels, box=box, title=title)
        return original(panels, path, box, title, **kw)

    monkeypatch.setattr(maps, "render_maps", spy)
    out = tmp_path / "map.png"
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "64", "--epsilon", "0.5")
    own = ["--top-percent", "2"] if algorithm == "threshold" else []
    assert main([*argv, "--algorithm", algorithm, *own, "--out", str(out), "--seed", "1"]) == 0
    capsys.readouterr()
    w, h = struct.unpack(">II", out.read_bytes()[16:24])
    assert w >= 1200 and h >= 900
    assert "ε = 0.5" in seen["title"] and ("DPSparseEMDAgg" in seen["title"] or "Laplace" in seen["title"])
    assert "add or remove one user" in seen["title"]
    (panel,) = seen["panels"]
    assert panel.left_out == maps.left_out_label(algorithm, 2.0)
    assert seen["box"].names == ("lat", "lon")


@pytest.mark.parametrize(
    "algorithm,flag",
    [("dense", "--w"), ("laplace", "--w"), ("sparse", "--top-percent"), ("dense", "--top-percent"),
     ("sparse", "--dense-side"), ("threshold", "--dense-side"), ("sparse", "--users"), ("privtree", "--users")],
)  # fmt: skip
def test_an_option_of_another_algorithm_is_refused(points, tmp_path, capsys, algorithm, flag):
    """Issue 15, defect 9: --w, --top-percent and --dense-side each belong to one algorithm; given with another
    they are refused (exit 2, nothing written) instead of being ignored."""
    out = tmp_path / "map.png"
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "64", "--epsilon", "1", "--out", str(out))
    assert main([*argv, "--algorithm", algorithm, flag, "8"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"userdp: error: {flag} applies to --algorithm")
    assert list(tmp_path.iterdir()) == [points] or not out.exists()


def test_dense_side_is_checked_in_the_commands_terms(points, tmp_path, capsys):
    """--dense-side must be a power of two no larger than the grid's longer side, said with the flag's names (not the
    library's coarse_side), before any data is read."""
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "64", "--epsilon", "1")
    for side in ("7", "128"):
        assert main([*argv, "--algorithm", "dense", "--dense-side", side, "--out", str(tmp_path / "m.png")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("userdp: error: --dense-side must be a power of two no larger than the grid's longer")


def test_auto_is_the_default_and_takes_a_public_user_estimate(points, tmp_path, capsys, monkeypatch):
    """Without --algorithm the release is userdp's auto heatmap; --users (a public estimate) decides its branch
    without spending budget on a noisy count: 50 users at epsilon 0.5 is epsilon n = 25 < 40, the coarse grid;
    at epsilon 5 it is the tree. Read from the sampler: no count is drawn, and the map's draws spend the whole
    epsilon (the grid's counts Lap(1 / eps); the tree's leaf counts Lap(1 / (0.7 eps))). Without --users the
    first draw is the noisy count, Lap(1 / (0.05 eps)). --users is checked before any data is read."""
    from tests.heatmaps.spies import NoiseSpy, assert_law

    spy = NoiseSpy(monkeypatch)
    argv = cli_argv.heatmap(points, "--bbox", cli_argv.BBOX, "--resolution", "64", "--json", "--seed", "3")
    seen = {}
    for eps, branch in (("0.5", "dense"), ("5", "privtree-emd")):
        out = tmp_path / f"auto{eps}.png"
        assert main([*argv, "--epsilon", eps, "--users", "50", "--out", str(out)]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["algorithm"] == "auto" and res["branch"] == branch
        seen[branch] = np.load(res["grid"])
        draws = spy.take()
        assert_law(draws[-1:], 1 / float(eps) if branch == "dense" else 1 / (0.7 * float(eps)))
        assert branch == "privtree-emd" or len(draws) == 1
    assert main([*argv, "--epsilon", "1", "--out", str(tmp_path / "noisy.png")]) == 0
    capsys.readouterr()
    count = spy.take()[0]
    assert count.values.tolist() == [50.0]  # 50 users, each of mass 1
    assert_law([count], 1 / 0.05)
    assert all(g.min() > 0 and g.sum() == pytest.approx(1.0) for g in seen.values())
    out = tmp_path / "bad.png"
    assert main([*argv, "--epsilon", "1", "--users", "-3", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("userdp: error:") and not out.exists()


def test_a_box_that_misses_the_data_is_said_loudly_and_check_box_spends_only_its_epsilon(
    points, tmp_path, capsys, monkeypatch
):
    """A box over another city (or latitude and longitude swapped): the auto heatmap's released DP count of users
    inside says so on stderr and in the JSON (no privacy spent on it: post-processing). ``--check-box`` answers
    only that question with ``--epsilon``: it is charged to the ledger like any release and writes no map; a
    box that holds the data gets no warning."""
    london = "51.40,-0.30,51.60,0.10"
    argv = cli_argv.heatmap(points, "--bbox", london, "--epsilon", "1", "--seed", "1", "--json")
    assert main([*argv, "--out", str(tmp_path / "x.png")]) == 0
    captured = capsys.readouterr()
    assert "userdp: warning: the DP estimate of users with a point inside the box is" in captured.err
    assert "check --bbox and --lat/--lon" in json.loads(captured.out)["box_check"]
    book = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(book), "--budget", "add-remove:1"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # (where a map would go by default)
    files = set(tmp_path.iterdir())
    check = cli_argv.heatmap(points, "--epsilon", "0.5", "--check-box", "--json", "--ledger", str(book), "--seed", "2")
    assert main([*check, "--bbox", london]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["box_check"] and "check --bbox" in captured.err and out["epsilon"] == 0.5
    assert out["interval_90"] == pytest.approx(np.log(10) / 0.5)
    assert set(tmp_path.iterdir()) == files  # no map made, no file written but the ledger's entry
    assert main([*check, "--bbox", cli_argv.BBOX]) == 0  # the data's box: 50 users inside, no warning
    captured = capsys.readouterr()
    assert json.loads(captured.out)["box_check"] is None and "warning: the DP" not in captured.err
    assert main([*check, "--bbox", cli_argv.BBOX]) == 2  # two checks of 0.5 spent the ledger's 1
    assert "budget" in capsys.readouterr().err
