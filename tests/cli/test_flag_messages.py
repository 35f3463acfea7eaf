"""Refusals reachable from the command line name what to do with its flags, and the keyword for a library
user (issue 34 item 11): "use --model central (model='central')", not only a class or keyword of the library.
Each command is run with a wrong or unsupported combination of options."""

from __future__ import annotations

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import main
from userdp.errors import ParameterError
from userdp.privacy import ApproxDP, EMDMetricDP
from userdp.privacy.accounting import reduction_guarantee_of
from userdp.releases import deliver, plan_request


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(2)
    rows = ["user,item,lat,lon"] + [
        f"u{u},k{rng.integers(0, 5)},{40.7 + 0.05 * rng.random():.5f},{-74.0 + 0.05 * rng.random():.5f}"
        for u in range(60)
        for _ in range(1 + u % 3)
    ]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    return tmp_path / "data.csv"


def _refusal(capsys, argv) -> str:
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and "Traceback" not in out.err
    return out.err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["account", "shuffle", "--alpha0", "0.5", "--m", "10", "--delta", "1e-6", "--model", "central"],
         ["--n N (n=N)"]),
        (["account", "shuffle", "--alpha0", "0.5", "--m", "10", "--n", "100", "--delta", "1e-6", "--model", "local"],
         ["leave out --n", "--model central (model='central')"]),
        (["account", "shuffle", "--alpha0", "20", "--m", "10", "--n", "100", "--delta", "1e-6"],
         ["(--m, --n)", "(--delta)", "(--alpha0)"]),
        (["account", "calibrate", "--alpha", "20", "--m", "10", "--delta", "1e-6", "--route", "eq7"],
         ["--route (route=) must be one of: best, theorem 4.4"]),
        (["account", "calibrate", "--alpha", "20", "--m", "10", "--delta", "1e-6", "--route", "eq6"],
         ["--route best (route='best')"]),
        (["account", "reduction", "--epsilon", "1", "--r", "0.05", "--delta", "0.5"],
         ["2 delta = 1", "smaller delta (--delta)"]),
    ],
)  # fmt: skip
def test_the_accountant_names_its_flags(capsys, argv, says):
    err = _refusal(capsys, argv)
    assert all(s in err for s in says), err


def test_key_counts_without_delta_name_the_flags(data, capsys):
    err = _refusal(capsys, ["counts", str(data), "--user", "user", "--key", "item", "--epsilon", "1"])
    assert "needs delta > 0 (--delta, e.g. 1e-6)" in err and "(no --keys; keys=None)" in err
    err = _refusal(capsys, ["counts", str(data), "--user", "user", "--key", "item", "--epsilon", "1",
                            "--keys", str(data), "--noise", "gaussian"])  # fmt: skip
    assert "--delta" in err


def test_the_policy_set_union_names_its_flags(data, capsys):
    argv = ["vocabulary", str(data), "--user", "user", "--item", "item", "--epsilon", "1", "--delta", "1e-6",
            "--noise", "gaussian", "--policy"]  # fmt: skip
    err = _refusal(capsys, argv)
    assert "use --noise laplace with --policy (noise='laplace', policy=True), or --noise gaussian without it" in err


def test_linear_samples_in_the_local_model_names_model_central(data, capsys):
    err = _refusal(capsys, cli_argv.greatcircle(data, "--alpha", "2", "--samples", "4", "--delta", "1e-6"))
    assert "use --model central (model='central')" in err


def test_the_reduction_around_an_unbounded_release_names_model_central():
    """BoundedEMDReduction around a guarantee that is not bounded d_EM-DP (the accountant's and the request's
    check): the message says which flag and which keyword make it bounded."""
    req = plan_request(2.0, 1e-6, samples=5, r=0.1)
    for call in (
        lambda: reduction_guarantee_of(EMDMetricDP(2.0, 0.0, bounded=False), 0.1, 5, 1e-6),
        lambda: deliver(req, ApproxDP(1.0, 1e-9)),
    ):
        with pytest.raises(ParameterError) as exc:
            call()
        assert "--samples S; samples=S" in str(exc.value) and "--model central (model='central')" in str(exc.value)
