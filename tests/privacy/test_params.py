"""One delta validator (:func:`userdp.privacy.check_delta`, issue 34 item 10): ``delta >= 1`` (and negative,
NaN, not a number) is refused with one message by every release, accountant entry and guarantee, before any
data is read; a requested delta above the public ceiling ``1e-3`` is released with a
:class:`~userdp.privacy.LargeDeltaWarning` that depends on the parameter alone."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pyarrow as pa
import pytest

from userdp import releases
from userdp.data import FiniteDomain
from userdp.errors import DataError, ParameterError
from userdp.metrics import ClusteredMetric
from userdp.privacy import (
    DELTA_CEILING,
    AcknowledgedDelta,
    ApproxDP,
    EMDMetricDP,
    LargeDeltaWarning,
    check_delta,
)
from userdp.privacy import accounting as acc
from userdp.privacy.composition import DPLoss, tight_epsilon
from userdp.releases import plan_request

PROMISES_NOTHING = "(delta is the probability that the guarantee fails, and at delta >= 1 it promises nothing)"
LABELS = np.array(["a0", "a1", "b0", "b1"], dtype=object)
DOMAIN = FiniteDomain(LABELS)
SPACE = ClusteredMetric(2, 2, 0.3)
MISSING = "/nonexistent/userdp-never-read.csv"  # a release that read its input first would fail on it instead


@pytest.mark.parametrize(
    ("delta", "message"),
    [
        (1, f"delta must lie in [0, 1), got 1.0 {PROMISES_NOTHING}"),
        (1.5, f"delta must lie in [0, 1), got 1.5 {PROMISES_NOTHING}"),
        (math.inf, f"delta must lie in [0, 1), got inf {PROMISES_NOTHING}"),
        (math.nan, "delta must lie in [0, 1), got nan"),
        (-1e-9, "delta must lie in [0, 1), got -1e-09"),
        ("1e-6", "delta must be a number in [0, 1), got '1e-6'"),
        (True, "delta must be a number in [0, 1), got True"),
        (None, "delta must be a number in [0, 1), got None"),
    ],
)
def test_check_delta_refuses_what_promises_nothing(delta, message):
    with pytest.raises(ParameterError) as exc:
        check_delta(delta)
    assert str(exc.value) == message


def test_check_delta_accepts_zero_where_pure_is_offered_and_keeps_the_range_otherwise():
    assert check_delta(0) == 0.0 and check_delta(np.float64(0.999)) == 0.999
    with pytest.raises(ParameterError, match=r"^delta' must lie in \(0, 1\), got 0 \(delta = 0, a pure"):
        check_delta(0.0, "delta'", allow_zero=False)
    with pytest.raises(ParameterError, match=r"must lie in \[1e-300, 1\), got 1e-310"):
        check_delta(1e-310, allow_zero=False, floor=1e-300)


def test_the_warning_fires_above_the_public_ceiling_only_and_names_the_caller():
    assert DELTA_CEILING == 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for d in (0.0, 1e-6, 1e-3, 0.5):
            check_delta(d)  # no warning without warn=True (a guarantee, an accountant's inner delta)
        for d in (0.0, 1e-6, DELTA_CEILING):
            check_delta(d, warn=True)
        check_delta(AcknowledgedDelta(0.5), warn=True)  # the command line has already said it
    with pytest.warns(LargeDeltaWarning, match=r"delta = 0\.0011 is above 0\.001 .*well below 1/n") as rec:
        assert check_delta(0.0011, warn=True) == 0.0011
    assert rec[0].filename == __file__  # attributed to the caller outside userdp


def _table(n_persons: int) -> pa.Table:
    rng = np.random.default_rng(n_persons)
    return pa.table({"user": np.repeat(np.arange(n_persons), 2), "item": rng.choice(LABELS, 2 * n_persons)})


_RELEASES = {
    "vocabulary": lambda src, d: releases.vocabulary(src, 1.0, d, rng=1),
    "key_counts": lambda src, d: releases.key_counts(src, 1.0, d, key="item", rng=1),
    "itemwise": lambda src, d: releases.itemwise(src, SPACE, DOMAIN, 20.0, delta=d, rng=1),
    "frequency": lambda src, d: releases.frequency(src, SPACE, DOMAIN, 20.0, delta=d, rng=1),
    "itemwise, samples": lambda src, d: releases.itemwise(src, SPACE, DOMAIN, 20.0, delta=d, samples=3, rng=1),
    "linear": lambda src, d: releases.linear(src, lambda x: x[:, :1], 1.0, 2.0, points=("lat",), delta=d, rng=1),
}


@pytest.mark.parametrize("name", list(_RELEASES))
@pytest.mark.parametrize("delta", [1.0, 1.5, math.nan, -0.5])
def test_every_release_refuses_delta_outside_0_1_before_reading_its_input(name, delta):
    with pytest.raises(ParameterError, match=r"delta( \(--delta\))? must lie in \[0, 1\), got") as exc:
        _RELEASES[name](MISSING, delta)
    if delta >= 1:
        assert str(exc.value).endswith(PROMISES_NOTHING)


@pytest.mark.parametrize("name", list(_RELEASES))
def test_every_release_warns_on_a_large_delta_before_reading_whatever_the_data(name):
    """The warning is emitted on the parameter alone: for a file that does not exist (before the read fails)
    as for tables of 30 and 31 persons."""
    with pytest.warns(LargeDeltaWarning, match="delta = 0.99 is above 0.001"), pytest.raises((DataError, OSError)):
        _RELEASES[name](MISSING, 0.99)
    if name == "linear":
        return  # (needs coordinates; its warning is the request's, as itemwise's)
    for n in (30, 31):
        with pytest.warns(LargeDeltaWarning, match="delta = 0.99 is above 0.001"):
            _RELEASES[name](_table(n), 0.99)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _RELEASES[name](_table(30), 1e-6)


def test_the_accountant_and_the_guarantees_refuse_delta_1_with_the_same_message():
    calls = [
        lambda: acc.shuffle_guarantee(0.1, 100, 1.0),
        lambda: acc.calibrate(20.0, 1.0, 10),
        lambda: acc.itemwise_bound(0.5, 10, 1.0),
        lambda: acc.reduction_distance(0.05, 10, 1.0),
        lambda: acc.min_samples(0.05, 1.0),
        lambda: acc.reduction_guarantee(1.0, 0.05, 1.0),
        lambda: plan_request(2.0, 1.0),
        lambda: ApproxDP(1.0, 1.0),
        lambda: EMDMetricDP(1.0, 1.0),
        lambda: DPLoss(1.0, 1.0),
        lambda: tight_epsilon([DPLoss(1.0, 1e-6)], 1.0),
    ]
    for call in calls:
        with pytest.raises(ParameterError) as exc:
            call()
        assert f"got 1.0 {PROMISES_NOTHING}" in str(exc.value)


def test_the_reduction_refuses_a_delta_whose_guarantee_reaches_1():
    """Theorem 5.3's guarantee carries 2 delta: at delta = 0.5 it promises nothing, said as such (not as a
    guarantee "got 1.0" the caller never passed)."""
    with pytest.raises(ParameterError, match=r"2 delta = 1, not below 1.*smaller delta \(--delta\)"):
        acc.reduction_guarantee(1.0, 0.05, 0.5)
    assert acc.reduction_guarantee(1.0, 0.05, 0.49).delta == 0.98
