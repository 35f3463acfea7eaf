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
    """--samples with --delta: the discrete guarantee delivered is the one asked for, (alpha r, delta, r), and
    the route of the inner release is the one the accountant must choose for the inner target."""
    import math

    from userdp.privacy.accounting import calibrate

    base = ["--alpha", "20", "--delta", "1e-6", "--json", "--seed", "1"]
    data, domain = files / "data.csv", files / "domain.csv"
    out = _run(capsys, cli_argv.clustered("freq", data, domain, *base, "--samples", "20"))
    assert {"mechanism", "guarantee", "estimate", "requested", "delivered"} <= set(out)
    assert "discrete" in out["guarantee"] and len(out["estimate"]) == 12
    assert sum(out["estimate"].values()) == pytest.approx(1.0)
    assert out["outside"].startswith("items outside the declared domain are dropped, person by person")
    out2 = _run(capsys, cli_argv.clustered("itemwise", data, domain, *base, "--samples", "20", "--model", "central"))
    # 20 samples: Lemma 5.2's distance (computed here, at the projection's delta/2) exceeds 1, so the inner
    # release gets alpha r = 1 and all of delta
    assert (1 + math.sqrt(2)) * 0.05 + 3 / 20 * math.log(1 / 5e-7) > 1
    assert out2["inner_alpha"] == 1.0 and out2["inner_delta"] == 1e-6
    assert calibrate(1.0, 1e-6, 20, n=200).route == "theorem 4.4"
    assert out2["route"] == "theorem 4.4"
    d = out2["delivered"]
    assert d["kind"] == "DiscreteEMDDP" and d["r"] == 0.05 and d["epsilon"] <= 1.0 and 0 < d["delta"] <= 1e-6
    assert out2["outside"] == out["outside"]


def test_samples_need_delta(files, capsys):
    """BoundedEMDReduction needs delta > 0: --samples without --delta is refused (it used to compute with
    1e-300 and print "(416.9, 0, r=0.05)" for freq/itemwise and e^521 for linear)."""
    data, domain = files / "data.csv", files / "domain.csv"
    for cmd in ("freq", "itemwise"):
        assert main(cli_argv.clustered(cmd, data, domain, "--alpha", "20", "--samples", "100")) == 2
        assert "--delta" in capsys.readouterr().err
    assert main(cli_argv.greatcircle(data, "--model", "central", "--samples", "100", "--alpha", "25")) == 2
    assert "--delta" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["freq", "itemwise", "linear"])
def test_samples_deliver_what_was_asked(files, capsys, command):
    """--alpha A --delta D --samples S asks for A-d_EM-DP at resolution r: (A r, D, r)-discrete d_EM-DP. The
    delivered guarantee meets it, and its delta is the delta used (the projection's D/2 plus the inner
    release's delta', not 0)."""
    data, domain = files / "data.csv", files / "domain.csv"
    flags = ["--delta", "1e-6", "--samples", "100", "--json", "--seed", "3"]
    if command == "linear":
        argv = cli_argv.greatcircle(data, "--alpha", "25", "--model", "central", *flags)
        alpha = 25.0
    else:
        argv = cli_argv.clustered(command, data, domain, "--alpha", "20", *flags)
        alpha = 20.0
    out = _run(capsys, argv)
    d, req = out["delivered"], out["requested"]
    assert req == {"alpha": alpha, "delta": 1e-6, "r": 0.05, "epsilon": alpha * 0.05}
    assert d["kind"] == "DiscreteEMDDP" and d["r"] == 0.05
    assert d["epsilon"] <= alpha * 0.05 * (1 + 1e-9) and d["delta"] <= 1e-6
    assert d["delta"] == pytest.approx(5e-7 + out["inner_delta_prime"], rel=1e-12)
    assert "weaker" not in json.dumps(out)


@pytest.mark.parametrize("command", ["freq", "itemwise"])
def test_no_delta_means_pure(files, capsys, command):
    """Without --delta the request is pure: the bounded central release uses composition (delta' = 0), not an
    amplified route at a delta' the user never asked for."""
    tmp = files / "equal.csv"
    rows = ["user,item"] + [f"u{u},{'ABC'[(u + j) % 3]}{j % 4}" for u in range(300) for j in range(20)]
    tmp.write_text("\n".join(rows) + "\n")
    out = _run(capsys, cli_argv.clustered(command, tmp, files / "domain.csv", "--alpha", "4", "--model", "central",
                                          "--json", "--seed", "1"))  # fmt: skip
    assert out["route"] == "composition" and out["delivered"]["delta"] == 0.0 and out["delivered"]["alpha"] <= 4.0
    out = _run(capsys, cli_argv.clustered(command, tmp, files / "domain.csv", "--alpha", "4", "--model", "central",
                                          "--delta", "1e-6", "--json", "--seed", "1"))  # fmt: skip
    assert out["route"] == "theorem 4.4" and 0 < out["delivered"]["delta"] <= 1e-6


def test_weaker_release_needs_opt_in(files, capsys, monkeypatch):
    """A release whose realized guarantee is weaker than the request is refused (exit 2, nothing printed,
    message naming --alpha and --allow-weaker); with --allow-weaker it is released and reports the weaker
    guarantee and both sides."""
    import dataclasses

    import userdp.releases.dem as dem

    real = dem.linear_release  # the mechanism step the release calls

    def weaker(*args, **kwargs):
        rel = real(*args, **kwargs)
        g = rel.guarantee
        return dataclasses.replace(rel, guarantee=dataclasses.replace(g, alpha=1.5 * g.alpha))

    monkeypatch.setattr(dem, "linear_release", weaker)
    argv = cli_argv.greatcircle(files / "data.csv", "--alpha", "25", "--json", "--seed", "2")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--alpha" in err and "--allow-weaker" in err
    res = _run(capsys, argv + ["--allow-weaker"])
    assert res["delivered"]["alpha"] == pytest.approx(37.5) and res["requested"]["alpha"] == 25.0
    assert "weaker than requested" in res["guarantee_warning"]


def test_linear_json(files, capsys):
    out = _run(capsys, cli_argv.greatcircle(files / "data.csv", "--alpha", "25", "--json", "--seed", "2"))
    assert out["unit"] == "km" and 0 < out["estimate"][0] < 60
    assert "unbounded local" in out["guarantee"]


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--metric", "greatcircle", "--items", "lat,lon"], "needs --bbox"),
        (["--metric", "euclidean", "--items", "lat,lon"], "needs --diameter"),
        (["--metric", "greatcircle", "--items", "lat", "--bbox", "40.5,-74.3,41,-73.65"], "two coordinate columns"),
        (
            ["--metric", "greatcircle", "--items", "lat,lon", "--bbox", "40.7,-74.3,41,-73.65", "--drop-outside",
             "--model", "central"],
            "--drop-outside applies to --model local",
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


def test_one_bbox_form_on_every_command(files, capsys):
    """linear takes the heatmap's --bbox MINLAT,MINLON,MAXLAT,MAXLON; the old --box LAT0,LAT1,LON0,LON1 is gone."""
    import argparse

    from userdp.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    forms = {
        name: next(a.metavar for a in sub.choices[name]._actions if "--bbox" in a.option_strings)
        for name in ("heatmap", "linear")
    }
    assert set(forms.values()) == {"MINLAT,MINLON,MAXLAT,MAXLON"}
    argv = ["linear", str(files / "data.csv"), "--user", "user", "--items", "lat,lon", "--metric", "greatcircle"]
    argv += ["--point", "40.75,-73.98", "--alpha", "25", "--json", "--seed", "1"]
    assert main([*argv, "--bbox", "40.5,-74.3,41,-73.65"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*argv, "--box", "40.5,41,-74.3,-73.65"])


@pytest.mark.parametrize(
    "argv_tail,flag",
    [
        (
            ["--metric", "euclidean", "--items", "lat,lon", "--diameter", "2", "--bbox", "40.5,-74.3,41,-73.65"],
            "--bbox",
        ),
        (
            ["--metric", "greatcircle", "--items", "lat,lon", "--bbox", "40.5,-74.3,41,-73.65", "--diameter", "2"],
            "--diameter",
        ),
        (["--metric", "euclidean", "--items", "lat,lon", "--diameter", "2", "--query", "mean"], "--point"),
        (
            ["--metric", "greatcircle", "--items", "lat,lon", "--bbox", "40.5,-74.3,41,-73.65", "--r-discrete", "0.1"],
            "--r-discrete",
        ),
    ],
)
def test_linear_refuses_options_that_do_not_apply(files, capsys, argv_tail, flag):
    """Issue 15, defect 9: an option that does nothing in the chosen combination is refused, not ignored."""
    argv = ["linear", str(files / "data.csv"), "--user", "user", "--alpha", "5", "--point", "40.7,-74", *argv_tail]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"userdp: error: {flag} does not apply to ") and "leave it out" in err


@pytest.mark.parametrize("command", ["itemwise", "freq"])
def test_clustered_commands_take_no_point_options(files, capsys, command):
    """--items, --bbox, --diameter, --point belong to linear; itemwise and freq do not accept them."""
    base = cli_argv.clustered(command, files / "data.csv", files / "domain.csv", "--alpha", "20", "--samples", "5")
    for extra in (["--items", "lat,lon"], ["--bbox", "40.5,-74.3,41,-73.65"], ["--diameter", "1"], ["--point", "1,2"]):
        with pytest.raises(SystemExit) as exc:
            main([*base, "--delta", "1e-6", *extra])
        assert exc.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
    assert main([*base, "--delta", "1e-6", "--r-discrete", "0.1", "--samples", "5", "--json"]) == 0
    capsys.readouterr()
    assert main([*cli_argv.clustered(command, files / "data.csv", files / "domain.csv", "--alpha", "20"),
                 "--r-discrete", "0.1"]) == 2  # fmt: skip
    assert "--r-discrete" in capsys.readouterr().err


def test_unequal_clusters_are_refused_from_the_domain_file_before_the_data(files, capsys):
    """Issue 15, defect 9: the clustered metric's equal-size rule is said in --help and checked on the public
    domain file before any data is read (the data file here does not even exist)."""
    bad = files / "bad_domain.csv"
    bad.write_text("item,cluster\nA0,A\nA1,A\nB0,B\n")
    argv = cli_argv.clustered("freq", files / "missing.csv", bad, "--alpha", "20", "--samples", "5", "--delta", "1e-6")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "clusters of equal size" in err and "[1, 2]" in err and "pad" in err and "missing.csv" not in err
    from userdp.cli import build_parser

    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    assert "same number of items" in sub.choices["freq"].format_help()


@pytest.mark.parametrize("command", ["itemwise", "freq"])
def test_top_items_with_intervals(files, capsys, command):
    """Issue 15, defect 8: the top K by the unbiased estimate, each with its simultaneous interval; itemwise's
    estimate is the unbiased one (the raw randomized histogram is reported as released_histogram)."""
    base = cli_argv.clustered(command, files / "data.csv", files / "domain.csv", "--alpha", "60", "--samples", "20")
    out = _run(capsys, [*base, "--delta", "1e-6", "--json", "--seed", "4", "--top", "3", "--beta", "0.1"])
    top, w = out["top"], out["interval_halfwidth"]
    assert len(top) == 3 and out["interval_confidence"] == pytest.approx(0.9) and w > 0
    unbiased = out["unbiased"]  # both commands; itemwise's estimate is this one too
    assert out["informative"] == (w < 0.5)
    if command == "itemwise":
        assert out["estimate"] == unbiased
    assert [t["item"] for t in top] == sorted(unbiased, key=lambda k: -unbiased[k])[:3]
    for t in top:
        assert t["unbiased"] == pytest.approx(unbiased[t["item"]])
        assert t["low"] == pytest.approx(max(t["unbiased"] - w, 0)) and t["high"] == pytest.approx(
            min(t["unbiased"] + w, 1)
        )
        assert t["distinguishable_from_zero"] == (t["unbiased"] - w > 0)
    if command == "itemwise":
        assert sum(out["released_histogram"].values()) == pytest.approx(1.0)
        assert out["released_histogram"] != out["estimate"]
    assert main([*base, "--delta", "1e-6", "--seed", "4", "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "95% interval" in text and "largest of 12 items" in text and "noise" in text
    assert "r_discrete = 0.05" in text  # --samples: the discrete guarantee's r is part of the request
    # a noise wider than any share says so plainly; shares are shown clipped to [0, 1] like their intervals
    weak = cli_argv.clustered(command, files / "data.csv", files / "domain.csv", "--alpha", "2", "--samples", "20")
    assert main([*weak, "--delta", "1e-6", "--seed", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["informative"] is False
    assert main([*weak, "--delta", "1e-6", "--seed", "4"]) == 0
    text = capsys.readouterr().out
    assert "note:" in text and "says almost nothing about single items" in text
    for bad, msg in ((["--top", "0"], "--top"), (["--beta", "1"], "--beta"), (["--beta", "0"], "--beta")):
        assert main([*base, "--delta", "1e-6", *bad]) == 2
        assert capsys.readouterr().err.startswith(f"userdp: error: {msg} must lie in")


def test_freq_on_a_distance_matrix(files, capsys):
    """--metric matrix: any public finite metric from a distance file (labels, then one column per label); the
    exponential randomizer; the top items without GKRR's intervals; malformed matrices and --r refused before
    the data (exit 2)."""
    labels = [f"{b}{c}" for b in "ABC" for c in range(4)]
    x = np.arange(12.0)
    rows = ["item," + ",".join(labels)] + [f"{a}," + ",".join(f"{abs(x[i] - x[j]):g}" for j in range(12))
                                           for i, a in enumerate(labels)]  # fmt: skip
    (files / "dist.csv").write_text("\n".join(rows) + "\n")
    argv = ["freq", str(files / "data.csv"), "--user", "user", "--item", "item", "--metric", "matrix",
            "--domain", str(files / "dist.csv"), "--alpha", "100", "--delta", "1e-6", "--samples", "10", "--json",
            "--seed", "1"]  # fmt: skip
    out = _run(capsys, argv)
    assert "exponential randomizer" in out["mechanism"] and len(out["estimate"]) == 12
    assert sum(out["estimate"].values()) == pytest.approx(1.0)
    assert out["top"] and "low" not in out["top"][0]
    (files / "bad.csv").write_text("item,A0,A1\nA0,0,1\nA1,2,0\n")  # not symmetric
    for bad in (["--domain", str(files / "bad.csv")], ["--r", "0.2"]):
        a = list(argv)
        if bad[0] == "--domain":
            a[a.index("--domain") + 1] = bad[1]
        else:
            a += bad
        assert main(a) == 2
        err = capsys.readouterr().err
        assert "error:" in err and "Traceback" not in err


def test_distance_matrix_refusals_and_its_unit(files, capsys):
    """Review 21: a repeated label gave a traceback; booleans passed as distances; distances far below the
    largest were refused only after the data was read. Now each is `userdp: error:` (exit 2) before the data,
    and the release says what a unit of d_EM is in the file's distances."""
    data = str(files / "data.csv")
    bad = {
        "dup.csv": "item,A0,A0\nA0,0,1\nA0,1,0\n",
        "bool.csv": "item,A0,A1\nA0,false,true\nA1,true,false\n",
        "tiny.csv": "item,A0,A1,A2\nA0,0,1e-12,1\nA1,1e-12,0,1\nA2,1,1,0\n",
    }
    for name, text in bad.items():
        (files / name).write_text(text)
        missing = str(files / "no-such-data.csv")  # refused on the matrix, before the data is looked for
        argv = ["freq", missing, "--user", "user", "--item", "item", "--metric", "matrix", "--domain",
                str(files / name), "--alpha", "10", "--delta", "1e-6", "--samples", "5"]  # fmt: skip
        assert main(argv) == 2, name
        err = capsys.readouterr().err
        assert "userdp: error:" in err and "Traceback" not in err and "no-such-data" not in err, (name, err)
    labels = [f"{b}{c}" for b in "ABC" for c in range(4)]
    rows = ["item," + ",".join(labels)] + [f"{a}," + ",".join(f"{0.5 * (i != j):g}" for j in range(12))
                                           for i, a in enumerate(labels)]  # fmt: skip
    (files / "half.csv").write_text("\n".join(rows) + "\n")
    argv = ["freq", data, "--user", "user", "--item", "item", "--metric", "matrix", "--domain",
            str(files / "half.csv"), "--alpha", "10", "--delta", "1e-6", "--samples", "5", "--json"]  # fmt: skip
    out = _run(capsys, argv)
    assert "0.5" in out["distance_unit"]


def test_the_two_rs_have_distinct_names_in_the_printed_request(files, capsys):
    """``--r`` (the clustered metric's in-cluster distance) and ``--r-discrete`` (BoundedEMDReduction's r) are
    two parameters: the printed request names the reduction's ``r_discrete``, so ``--r 0.25`` is not shown as
    ``r = 0.05``."""
    argv = cli_argv.clustered("freq", files / "data.csv", files / "domain.csv", "--alpha", "20", "--delta", "1e-6",
                              "--samples", "20", "--r", "0.25", "--seed", "1")  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "r_discrete = 0.05" in out and "r = 0.05" not in out.replace("r_discrete = 0.05", "")


def test_printed_numbers_are_rounded(tmp_path, capsys):
    """The text output shows released numbers to four significant digits, not 16 (issue 34); --json keeps
    every digit."""
    import re

    from userdp.cli.main import main as cli_main

    f = tmp_path / "pts.csv"
    rows = [f"{u},{40.70 + 0.0137 * ((u * 7 + j) % 11)},{-74.0 + 0.0173 * ((u * 5 + j) % 13)}" for u in range(40)
            for j in range(3)]  # fmt: skip
    f.write_text("user,lat,lon\n" + "\n".join(rows) + "\n")
    argv = ["linear", str(f), "--user", "user", "--items", "lat,lon", "--metric", "greatcircle", "--bbox",
            "40.6,-74.1,40.9,-73.7", "--query", "distance", "--point", "40.758,-73.9855", "--alpha", "25",
            "--seed", "3"]  # fmt: skip
    assert cli_main(argv) == 0
    text = capsys.readouterr().out
    assert "estimate: [" in text and not re.search(r"\d\.\d{5,}", text), text
    assert cli_main([*argv, "--json"]) == 0
    assert re.search(r"\d\.\d{8,}", capsys.readouterr().out)
