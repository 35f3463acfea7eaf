"""A refusal is a release: every release refuses a bad public parameter before it reads any data, so the
refusal is the same on a dataset D, on D plus one person, and on a file that does not exist (which a release
that read first would report instead). One table of bad parameters per release."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from userdp import releases
from userdp.data import BoxDomain, FiniteDomain
from userdp.errors import UserDPError
from userdp.metrics import ClusteredMetric

BOX = BoxDomain((0.0, 0.0), (1.0, 1.0))
LABELS = np.array(["a0", "a1", "b0", "b1"], dtype=object)
DOMAIN = FiniteDomain(LABELS)
SPACE = ClusteredMetric(2, 2, 0.3)


def _tables() -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(3)
    n = 60
    base = {
        "user": np.repeat(np.arange(20), 3),
        "item": rng.choice(LABELS, n),
        "lat": rng.random(n),
        "lon": rng.random(n),
    }
    more = {k: np.concatenate([v, v[-3:] if k != "user" else np.full(3, 99)]) for k, v in base.items()}
    return pa.table(base), pa.table(more)


def _heatmap(src, **kw):
    args = {"resolution": 8, "epsilon": 1.0, "algorithm": "auto", **kw}
    return releases.heatmap(src, BOX, args.pop("resolution"), args.pop("epsilon"), args.pop("algorithm"), rng=1, **args)


def _linear(src, **kw):
    args = {"lipschitz": 1.0, "alpha": 2.0, **kw}
    return releases.linear(src, _first, args.pop("lipschitz"), args.pop("alpha"), points=("lat", "lon"), rng=1, **args)


def _first(x: np.ndarray) -> np.ndarray:
    return x[:, 0]


def _randomized(release):
    def run(src, **kw):
        args = {"alpha": 20.0, "delta": 1e-6, **kw}
        return release(src, SPACE, DOMAIN, args.pop("alpha"), rng=1, **args)

    return run


CASES = {
    "heatmap": (
        _heatmap,
        [
            {"epsilon": -1.0}, {"epsilon": float("nan")}, {"epsilon": "x"}, {"algorithm": "nope"}, {"resolution": 0},
            {"algorithm": "sparse", "w": 0}, {"algorithm": "threshold", "top_percent": 0.0},
            {"algorithm": "threshold", "top_percent": 150.0}, {"algorithm": "dense", "coarse_side": 3},
            {"algorithm": "dense", "coarse_side": 64}, {"n_public": -5.0}, {"algorithm": "laplace", "n_public": 10.0},
            {"drop_outside": False}, {"cells": "round"},
        ],
    ),
    "histogram": (
        lambda src, **kw: releases.histogram(src, DOMAIN, kw.pop("epsilon", 1.0), rng=1, **kw),
        [{"epsilon": 0.0}, {"epsilon": float("inf")}, {"neighbours": "nope"}, {"neighbours": "item"}],
    ),
    "distinct": (
        lambda src, **kw: releases.distinct(src, kw.pop("epsilon", 1.0), rng=1, **kw),
        [{"epsilon": -1.0}, {"beta": 0.7}, {"l_max": 0}, {"method": "guess"}, {"method": "bucketed", "n_buckets": 0}],
    ),
    "vocabulary": (
        lambda src, **kw: releases.vocabulary(src, kw.pop("epsilon", 1.0), kw.pop("delta", 1e-6), rng=1, **kw),
        [{"epsilon": 0.0}, {"delta": 0.0}, {"delta": 1.5}, {"max_items": 0}, {"noise": "cauchy"},
         {"count_fraction": 1.5}],
    ),
    "key_counts": (
        lambda src, **kw: releases.key_counts(src, kw.pop("epsilon", 1.0), kw.pop("delta", 1e-6), key="item",
                                              rng=1, **kw),
        [{"epsilon": -1.0}, {"bounds": "guess"}, {"bounds": (0, 1)}, {"noise": "cauchy"}, {"keys": []},
         {"select_fraction": 0.0}, {"delta": 0.0}],
    ),
    "linear": (
        _linear,
        [{"alpha": 0.0}, {"delta": 2.0}, {"model": "global"}, {"norm": "l7"}, {"lipschitz": -1.0},
         {"samples": 0, "delta": 1e-6}, {"samples": 5, "delta": 1e-6}, {"samples": 5, "model": "central"}],
    ),
    "itemwise": (
        _randomized(releases.itemwise),
        [{"alpha": -1.0}, {"beta": 2.0}, {"model": "global"}, {"randomizer": "guess"}, {"samples": 5, "delta": None},
         {"delta": 1.5}],
    ),
    "frequency": (
        _randomized(releases.frequency),
        [{"alpha": 0.0}, {"beta": 0.0}, {"model": "global"}, {"randomizer": "guess"}, {"r": 2.0, "samples": 5}],
    ),
}  # fmt: skip


def _outcome(fn, src, kw) -> tuple[str, str]:
    with pytest.raises(UserDPError) as exc:
        fn(src, **dict(kw))
    return type(exc.value).__name__, str(exc.value)


@pytest.mark.parametrize(
    "name, kw", [(name, kw) for name, (_, cases) in CASES.items() for kw in cases], ids=lambda v: str(v)
)
def test_a_bad_parameter_is_refused_alike_on_d_on_d_plus_one_person_and_before_any_read(name, kw, tmp_path):
    fn = CASES[name][0]
    d, d_plus = _tables()
    missing = tmp_path / "no-such-file.parquet"
    outcomes = {_outcome(fn, src, kw) for src in (d, d_plus, missing)}
    assert len(outcomes) == 1, outcomes  # the same refusal, whatever the data (and without reading it)
    ((kind, message),) = outcomes
    assert "no such file" not in message


def test_the_good_parameters_release_on_d_and_on_d_plus_one_person():
    """The tables above are refused for their parameters only: with good ones every release goes ahead."""
    d, d_plus = _tables()
    for fn, _ in CASES.values():
        for src in (d, d_plus):
            assert fn(src).guarantee is not None
