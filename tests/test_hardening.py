"""The hardening table of docs/reference/hardening.md, cell by cell.

Every public entry point (rows) meets every kind of bad or extreme input (columns). A cell is either the
error class that must be raised (for the command line: exit status 2 with that error's message), ``released``
(it must work and return a Release whose value is finite and whose guarantee is the one the call asked for),
or ``n/a`` (the input cannot reach that entry point; the docs page says why). On every error, nothing is
released: no value is returned, the command line prints nothing on stdout, writes no output file and leaves
its ledger unchanged, and a budgeted run never calls the entry point (``Session.run`` with the entry point
itself: the first run releases and charges, the second is refused before the entry point runs).

An empty input (no rows) is a dataset of no users. Releases under add/remove-one-user neighbours treat it
like any other input (it contributes nothing; refusing it would reveal it); releases whose neighbour
relation fixes the number of users (local, replace-one-user, bounded d_EM-DP) may refuse it, since the
number of users is public for them. No error message names a count read off the data.

``python -m tests.test_hardening`` prints the table; ``test_docs_table_matches`` keeps docs/reference/hardening.md in
step.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from userdp.data import BoxDomain, FiniteDomain, UserDataset
from userdp.errors import BudgetExceededError, DataError, ParameterError
from userdp.noise import RandomSource
from userdp.privacy import Session
from userdp.privacy.guarantees import ApproxDP, DiscreteEMDDP, EMDMetricDP, Guarantee, Model, Neighbours, PureDP

COLUMNS = [
    "NaN",
    "inf",
    "empty input",
    "one user",
    "user with 10^6 items",
    "unknown columns",
    "wrong dtypes",
    "out-of-box / unknown items",
    "params out of range",
    "budget spent",
]
BIG = 10**6
DOMAIN = FiniteDomain(np.arange(4))
BOX = BoxDomain((0.0, 0.0), (1.0, 1.0))
_RNG = RandomSource(7)


def _space():
    from userdp.metrics import ClusteredMetric

    return ClusteredMetric(2, 2, 0.3)


# --------------------------------------------------------------------------------------------
# Inputs: each column's input for finite-item rows, point rows and grid rows
# --------------------------------------------------------------------------------------------


def _finite(col: str, bounded: bool) -> UserDataset:
    table = {"user": [1, 1, 2, 2], "item": [0, 1, 2, 3]}
    if col == "NaN":
        return UserDataset.from_table({**table, "item": [0.0, math.nan, 2.0, 3.0]}, "user", "item", domain=DOMAIN)
    if col == "inf":
        return UserDataset.from_table({**table, "item": [0.0, math.inf, 2.0, 3.0]}, "user", "item", domain=DOMAIN)
    if col == "empty input":
        return UserDataset.from_table({"user": [], "item": []}, "user", "item", domain=DOMAIN)
    if col == "one user":
        return UserDataset.from_lists([[0, 1, 3]], domain=DOMAIN)
    if col == "user with 10^6 items":
        sizes = [BIG, BIG] if bounded else [BIG, 3]
        return UserDataset(np.concatenate([[0], np.cumsum(sizes)]), np.arange(sum(sizes)) % 4, None, DOMAIN)
    if col == "unknown columns":
        return UserDataset.from_table(table, "user", "nope", domain=DOMAIN)
    if col == "wrong dtypes":
        return _points("one user")
    if col == "out-of-box / unknown items":
        return UserDataset.from_lists([[0, 9], [1, 2]], domain=DOMAIN)
    return UserDataset.from_lists([[0, 1], [2, 3], [1, 1]], domain=DOMAIN)  # valid


def _points(col: str, bounded: bool = False) -> UserDataset:
    table = {"user": [1, 1, 2], "lat": [0.1, 0.2, 0.3], "lon": [0.4, 0.5, 0.6]}
    if col in ("NaN", "inf"):
        bad = math.nan if col == "NaN" else math.inf
        return UserDataset.from_table({**table, "lat": [0.1, bad, 0.3]}, "user", items=["lat", "lon"], domain=BOX)
    if col == "empty input":
        return UserDataset.from_table({"user": [], "lat": [], "lon": []}, "user", items=["lat", "lon"], domain=BOX)
    if col == "one user":
        return UserDataset.from_lists([[(0.1, 0.2), (0.3, 0.4)]], domain=BOX)
    if col == "user with 10^6 items":
        sizes = [BIG, BIG] if bounded else [BIG, 2]
        pts = np.random.default_rng(0).random((sum(sizes), 2))
        return UserDataset(np.concatenate([[0], np.cumsum(sizes)]), pts, None, BOX)
    if col == "unknown columns":
        return UserDataset.from_table(table, "user", items=["lat", "nope"], domain=BOX)
    if col == "wrong dtypes":
        return _finite("one user", False)
    if col == "out-of-box / unknown items":
        return UserDataset.from_lists([[(0.1, 0.2)], [(2.0, 0.5)]], domain=BOX)
    return UserDataset.from_lists([[(0.1, 0.2), (0.3, 0.4)], [(0.5, 0.6), (0.7, 0.8)]], domain=BOX)


def _grid(col: str) -> np.ndarray:
    from userdp.heatmaps import user_grid_sum

    if col in ("NaN", "inf"):
        s = np.zeros((8, 8))
        s[0, 0] = math.nan if col == "NaN" else math.inf
        return s
    if col == "wrong dtypes":
        return np.full((8, 8), "a")
    return user_grid_sum(_points(col), 8, BOX)


# --------------------------------------------------------------------------------------------
# Rows: entry point, input kind, the release on an input, a call with parameters out of range
# --------------------------------------------------------------------------------------------


def _gkrr(a0=0.5):
    from userdp.dem import GKRR

    return GKRR(_space(), a0)


def _metric() -> str:
    return repr(_space())


def _m(ds: UserDataset) -> int:
    """The public per-user size of a bounded input (any, for a dataset of no users)."""
    return int(ds.counts()[0]) if ds.n_users else 2


def _reduction(ds, epsilon=1.0):
    from userdp.dem import BoundedEMDReduction, priv_emd_itemwise

    red = BoundedEMDReduction(s=5, epsilon=epsilon, r=0.1, delta=1e-6)
    return red.run(ds, lambda d, a: priv_emd_itemwise(d, _gkrr(a / 5), delta=1e-6, rng=_RNG), rng=_RNG)


def _heatmap(ds, side=8, algorithm="sparse"):
    from userdp.releases import heatmap

    return heatmap(ds, BOX, side, 1.0, algorithm=algorithm, rng=_RNG)


class Row(NamedTuple):
    """An API row: its input kind, whether users need equal sizes, the entry points it calls on an input
    (each returns one Release), a call with parameters out of range, and the guarantee the calls ask for.
    ``exact``: the release must state that guarantee (up to 1e-6 relative: integer weights, calibration);
    otherwise (an accountant's route) one at least as strong."""

    kind: str
    bounded: bool
    runs: tuple[Callable, ...]
    run_bad: Callable
    asked: Callable[[object], Guarantee]
    exact: bool = True


def _api_rows() -> dict[str, Row]:
    from userdp import releases
    from userdp.dem import (
        freq_est_gkrr,
        freq_est_hadamard,
        freq_laplace_central,
        linear_baseline,
        priv_emd_itemwise,
        priv_emd_linear,
        user_histogram,
    )
    from userdp.distinct import distinct_count
    from userdp.heatmaps import dense_emd_agg, dp_sparse_emd_agg, laplace_heatmap

    def lin(ds, alpha=1.0):
        return priv_emd_linear(ds, 1.0, alpha, f_points=lambda x: x, rng=_RNG)

    def itemwise_asked(ds):  # composition's (m alpha_0, 0); an amplified route may only be stronger
        return EMDMetricDP(_m(ds) * 0.5, 1e-6, Model.CENTRAL, True, _metric())

    def chunked_itemwise(ds, alpha):  # the central release on the chunked engine, asked for composition's alpha
        return releases.itemwise(
            ds, _space(), ds.domain, alpha, delta=1e-6, model="central", engine="chunked", rng=_RNG
        )

    add_remove = PureDP(1.0, neighbours=Neighbours.ADD_REMOVE_USER)
    return {
        "priv_emd_linear": Row(
            "points",
            False,
            (lin,),
            lambda ds: lin(ds, alpha=-1.0),
            lambda ds: EMDMetricDP(1.0, 0.0, Model.LOCAL, False),
        ),
        "linear_baseline": Row(
            "points",
            False,
            (lambda ds: linear_baseline(ds, 1.0, f_points=lambda x: x, f_bound=2.0, rng=_RNG),),
            lambda ds: linear_baseline(ds, math.nan, f_points=lambda x: x, f_bound=2.0, rng=_RNG),
            lambda ds: PureDP(1.0, neighbours=Neighbours.ANY_TWO_INPUTS),
        ),
        "priv_emd_itemwise": Row(
            "finite",
            True,
            (lambda ds: priv_emd_itemwise(ds, _gkrr(), "central", 1e-6, rng=_RNG),),
            lambda ds: priv_emd_itemwise(ds, _gkrr(0.0), "central", 1e-6, rng=_RNG),
            itemwise_asked,
            exact=False,
        ),
        "BoundedEMDReduction.run": Row(
            "finite",
            False,
            (_reduction,),
            lambda ds: _reduction(ds, epsilon=-1.0),
            lambda ds: DiscreteEMDDP(1.0, 2e-6, 0.1, Model.LOCAL, _metric()),
        ),
        "freq_est_gkrr": Row(
            "finite",
            True,
            (lambda ds: freq_est_gkrr(ds, _space(), 5.0, 1e-6, rng=_RNG),),
            lambda ds: freq_est_gkrr(ds, _space(), math.nan, 1e-6, rng=_RNG),
            lambda ds: EMDMetricDP(5.0, 1e-6, Model.LOCAL, True, _metric()),
        ),
        "freq_est_hadamard": Row(
            "finite",
            True,
            (lambda ds: freq_est_hadamard(ds, 1.0, 1e-6, rng=_RNG),),
            lambda ds: freq_est_hadamard(ds, 1.0, 1.5, rng=_RNG),
            lambda ds: ApproxDP(1.0, 1e-6, Neighbours.ANY_TWO_INPUTS),
        ),
        "freq_laplace_central": Row(
            "finite",
            True,
            (lambda ds: freq_laplace_central(ds, 1.0, rng=_RNG),),
            lambda ds: freq_laplace_central(ds, 0.0, rng=_RNG),
            lambda ds: PureDP(1.0, neighbours=Neighbours.REPLACE_USER),
        ),
        "user_histogram": Row(
            "finite",
            False,
            (lambda ds: user_histogram(ds, 1.0, rng=_RNG),),
            lambda ds: user_histogram(ds, math.inf, rng=_RNG),
            lambda ds: add_remove,
        ),
        "distinct_count": Row(
            "finite",
            False,
            (lambda ds: distinct_count(ds, 1.0, rng=_RNG),),
            lambda ds: distinct_count(ds, 1.0, beta=0.7, rng=_RNG),
            lambda ds: add_remove,
        ),
        "releases.heatmap": Row("points", False, (_heatmap,), lambda ds: _heatmap(ds, side=0), lambda ds: add_remove),
        "releases.itemwise (chunked engine)": Row(
            "finite",
            True,
            (lambda ds: chunked_itemwise(ds, _m(ds) * 0.5),),
            lambda ds: chunked_itemwise(ds, -1.0),
            itemwise_asked,
            exact=False,
        ),
        "dp_sparse_emd_agg, laplace_heatmap, dense_emd_agg": Row(
            "grid",
            False,
            (
                lambda s: dp_sparse_emd_agg(s, 1.0, rng=_RNG),
                lambda s: laplace_heatmap(s, 1.0, rng=_RNG),
                lambda s: dense_emd_agg(s, 1.0, 2, rng=_RNG),
            ),
            lambda s: (
                [f(s, -1.0, rng=_RNG) for f in (dp_sparse_emd_agg, laplace_heatmap)]
                + [dense_emd_agg(s, -1.0, 2, rng=_RNG)]
            ),
            lambda s: add_remove,
        ),
    }


def _other_rows() -> dict[str, dict[str, Callable]]:
    """Rows whose inputs are not user datasets: column -> thunk."""
    from userdp.metrics import ClusteredMetric, emd
    from userdp.noise import gaussian_mechanism, laplace_mechanism
    from userdp.privacy.accounting import calibrate, shuffle_guarantee

    sp = ClusteredMetric(2, 2, 0.3)
    u = np.full(4, 0.25)
    return {
        "emd": {
            "NaN": lambda: emd(np.array([math.nan, 0, 0, 1.0]), u, sp),
            "inf": lambda: emd(np.array([math.inf, 0, 0, 1.0]), u, sp),
            "empty input": lambda: emd(np.zeros(0), np.zeros(0), sp),
            "wrong dtypes": lambda: emd(np.array(["a"] * 4), u, sp),
            "out-of-box / unknown items": lambda: emd(np.ones(5) / 5, u, sp),
        },
        "laplace_mechanism, gaussian_mechanism": {
            "NaN": lambda: laplace_mechanism(np.array([math.nan]), 1.0, 1.0, _RNG),
            "inf": lambda: gaussian_mechanism(np.array([math.inf]), 1.0, 1.0, 1e-6, _RNG),
            "empty input": lambda: laplace_mechanism(np.zeros(0), 1.0, 1.0, _RNG),
            "wrong dtypes": lambda: laplace_mechanism(np.array(["a"]), 1.0, 1.0, _RNG),
            "params out of range": lambda: gaussian_mechanism(np.zeros(1), 1.0, 1.0, 0.0, _RNG),
        },
        "shuffle_guarantee, calibrate": {
            "NaN": lambda: shuffle_guarantee(math.nan, 10, 1e-6, n=1000),
            "inf": lambda: calibrate(math.inf, 1e-6, 10, n=1000),
            "params out of range": lambda: shuffle_guarantee(50.0, 1000, 1e-12, n=100_000),
        },
    }


# --------------------------------------------------------------------------------------------
# The table (expected outcome of every cell)
# --------------------------------------------------------------------------------------------

D, P, B, OK, NA = "DataError", "ParameterError", "BudgetExceededError", "released", "n/a"
_DATA_ROW = {
    "NaN": D,
    "inf": D,
    "empty input": D,
    "one user": OK,
    "user with 10^6 items": OK,
    "unknown columns": D,
    "wrong dtypes": D,
    "out-of-box / unknown items": D,
    "params out of range": P,
    "budget spent": B,
}
_ADD_REMOVE_ROW = {**_DATA_ROW, "empty input": OK}  # no users contribute nothing: released like any input
_ADD_REMOVE = {"user_histogram", "distinct_count", "releases.heatmap"}
_DROPS_OUTSIDE = {"user_histogram", "distinct_count", "BoundedEMDReduction.run"}
_GRID_ROW = {**_ADD_REMOVE_ROW, "unknown columns": NA, "out-of-box / unknown items": NA}
_VALUES_ROW = {c: NA for c in COLUMNS}
TABLE: dict[str, dict[str, str]] = {
    "UserDataset.from_table / from_file": {**_ADD_REMOVE_ROW, "params out of range": NA, "budget spent": NA},
    **{
        name: {
            **(_ADD_REMOVE_ROW if name in _ADD_REMOVE else _DATA_ROW),
            # an item outside the declared domain is dropped, person by person (a refusal would depend on the
            # data); the bounded releases then refuse the persons' unequal sizes, public under their relation
            **({"out-of-box / unknown items": OK} if name in _DROPS_OUTSIDE else {}),
        }
        for name in _api_rows()
        if name != "dp_sparse_emd_agg, laplace_heatmap, dense_emd_agg"
    },
    "dp_sparse_emd_agg, laplace_heatmap, dense_emd_agg": _GRID_ROW,
    "emd": {**_VALUES_ROW, "NaN": D, "inf": D, "empty input": D, "wrong dtypes": D, "out-of-box / unknown items": D},
    "laplace_mechanism, gaussian_mechanism": {
        **_VALUES_ROW,
        "NaN": D,
        "inf": D,
        "empty input": D,
        "wrong dtypes": D,
        "params out of range": P,
    },
    "shuffle_guarantee, calibrate": {**_VALUES_ROW, "NaN": P, "inf": P, "params out of range": P},
    "userdp distinct": {**_ADD_REMOVE_ROW, "out-of-box / unknown items": NA},
    # points outside the box are dropped user by user: a refusal would depend on the data (issue 33)
    "userdp heatmap": {**_ADD_REMOVE_ROW, "out-of-box / unknown items": OK},
    # the local PrivEMDLinear drops points outside the box user by user: a refusal would depend on the data
    "userdp linear": {**_DATA_ROW, "out-of-box / unknown items": OK},
    "userdp itemwise, userdp freq": dict(_DATA_ROW),
    "userdp account": {**_VALUES_ROW, "NaN": P, "inf": P, "params out of range": P},
}
ERRORS = {D: DataError, P: ParameterError, B: BudgetExceededError}


def markdown_table() -> str:
    short = {D: "DataError", P: "ParameterError", B: "refused (budget)", OK: "released", NA: "n/a"}
    lines = ["| entry point | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for row, cells in TABLE.items():
        lines.append(f"| `{row}` | " + " | ".join(short[cells[c]] for c in COLUMNS) + " |")
    return "\n".join(lines)


def test_docs_table_matches():
    page = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "hardening.md").read_text()
    assert markdown_table() in page, "docs/reference/hardening.md's table is stale: python -m tests.test_hardening"


# --------------------------------------------------------------------------------------------
# Python API rows
# --------------------------------------------------------------------------------------------

_INPUT = {"finite": _finite, "points": _points}


def _api_cases():
    for row, spec in _api_rows().items():
        for col in COLUMNS:
            if TABLE[row][col] != NA:
                yield pytest.param(row, spec.kind, spec.bounded, col, id=f"{row}|{col}")


def _make_input(kind: str, bounded: bool, col: str):
    if kind == "grid":
        return _grid(col)
    return _INPUT[kind](col, bounded)


def _main(g: Guarantee) -> float:
    return g.epsilon if hasattr(g, "epsilon") else g.alpha


def _check_release(rel, asked: Guarantee, exact: bool) -> None:
    """A released cell: a finite value and the guarantee the call asked for (never a weaker one; with
    ``exact``, not another, stronger-looking one either)."""
    from userdp.privacy.result import Release

    assert isinstance(rel, Release)
    value = rel.value.items if isinstance(rel.value, UserDataset) else rel.value
    assert np.all(np.isfinite(np.asarray(value, dtype=np.float64))), "the released value is not finite"
    g = rel.guarantee
    assert g.fits_within(asked), f"released {g!r}, weaker than the {asked!r} asked for"
    if exact:
        assert _main(g) >= _main(asked) * (1 - 1e-6), f"released {g!r}, not the {asked!r} asked for"


def _expect(outcome: str, thunk: Callable) -> None:
    """An error cell: ``thunk`` (input construction included) raises the table's error, with a message."""
    with pytest.raises(ERRORS[outcome]) as info:
        thunk()
    assert str(info.value)  # a message for the user


@pytest.mark.parametrize("row,kind,bounded,col", list(_api_cases()))
def test_api_cell(row, kind, bounded, col):
    spec = _api_rows()[row]
    outcome = TABLE[row][col]
    if col == "params out of range":
        _expect(outcome, lambda: spec.run_bad(_make_input(kind, bounded, "valid")))
    elif col == "budget spent":
        valid = _make_input(kind, bounded, "valid")
        asked = spec.asked(valid)
        for run in spec.runs:
            calls = []

            def entry_point(x, run=run, calls=calls):
                calls.append(1)
                return run(x)

            session = Session(asked)
            first = session.run(asked, entry_point, valid, label="first")  # the entry point ran and was charged
            _check_release(first, asked, spec.exact)
            assert len(calls) == 1 and len(session.ledger) == 1
            _expect(outcome, lambda s=session, e=entry_point: s.run(asked, e, valid, label="again"))
            assert len(calls) == 1, "the entry point ran although the budget was spent"
            assert len(session.ledger) == 1
    else:
        for run in spec.runs:
            if outcome == OK:
                data = _make_input(kind, bounded, col)
                _check_release(run(data), spec.asked(data), spec.exact)
            else:
                _expect(outcome, lambda run=run: run(_make_input(kind, bounded, col)))


@pytest.mark.parametrize("col", [c for c in COLUMNS if TABLE["UserDataset.from_table / from_file"][c] != NA])
def test_loader_cell(col, tmp_path):
    """The loaders, from tables and from files (CSV and Parquet)."""
    outcome = TABLE["UserDataset.from_table / from_file"][col]
    if col == "wrong dtypes":
        thunks = [
            lambda: UserDataset.from_table({"user": [1, 2], "item": [0.5, 1.5]}, "user", "item"),
            lambda: UserDataset.from_table(
                {"user": [1, 2], "lat": ["a", "b"], "lon": [0.1, 0.2]}, "user", ["lat", "lon"]
            ),
        ]
    elif col == "out-of-box / unknown items":  # (points; an item outside the declared domain is dropped)
        dropped = _make_input("finite", False, col)
        assert dropped.offsets.tolist() == [0, 1, 3] and dropped.items.tolist() == [0, 1, 2]
        thunks = [lambda: _make_input("points", False, col)]
    else:
        thunks = [lambda kind=kind: _make_input(kind, False, col) for kind in ("finite", "points")]
    if col not in ("one user", "user with 10^6 items"):  # the same through files
        for kind in ("items", "points"):
            if kind == "items" and col == "out-of-box / unknown items":
                continue  # a file's labels are only unknown against a declared domain, as above
            (tmp_path / kind).mkdir()
            path = _cli_input(tmp_path / kind, col, kind)
            cols = ["lat", "lon"] if kind == "points" else None
            item = None if kind == "points" else "item"
            if col == "unknown columns":
                cols, item = (["lat", "nope"], None) if kind == "points" else (None, "nope")
            dom = BoxDomain((40.0, -75.0), (41.0, -73.0)) if kind == "points" else None
            thunks.append(
                lambda p=path, c=cols, i=item, d=dom: UserDataset.from_file(p, user="user", item=i, items=c, domain=d)
            )
    for thunk in thunks:
        if outcome == OK:
            assert isinstance(thunk(), UserDataset)
        else:
            _expect(outcome, thunk)


@pytest.mark.parametrize(
    "row,col",
    [
        (r, c)
        for r in ("emd", "laplace_mechanism, gaussian_mechanism", "shuffle_guarantee, calibrate")
        for c in COLUMNS
        if TABLE[r][c] != NA
    ],
)
def test_other_cell(row, col):
    outcome = TABLE[row][col]
    _expect(outcome, _other_rows()[row][col])


# --------------------------------------------------------------------------------------------
# Command-line rows: exit 2, nothing on stdout, no output file, ledger unchanged
# --------------------------------------------------------------------------------------------


def _write(path: Path, columns: dict) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(pa.table(columns), path)
    else:
        keys = list(columns)
        rows = zip(*(columns[k] for k in keys), strict=True)
        path.write_text(",".join(keys) + "\n" + "".join(",".join(str(v) for v in r) + "\n" for r in rows))
    return path


def _cli_input(tmp: Path, col: str, kind: str) -> Path:
    """A data file for the column's case; ``kind`` is 'items' (user,item) or 'points' (user,lat,lon)."""
    n = 40
    users = [i // 2 for i in range(n)]
    if kind == "items":
        base = {"user": users, "item": [f"w{i % 4}" for i in range(n)]}
        key = "item"
    else:
        rng = np.random.default_rng(1)
        base = {
            "user": users,
            "lat": (40.70 + 0.05 * rng.random(n)).tolist(),
            "lon": (-74.0 + 0.05 * rng.random(n)).tolist(),
        }
        key = "lat"
    if kind == "items" and col in ("inf", "wrong dtypes"):  # a float item column (with inf, or plain floats)
        floats = [math.inf] + [1.0] * (n - 1) if col == "inf" else [float(i) for i in range(n)]
        return _write(tmp / "in.parquet", {**base, "item": floats})
    if col in ("NaN", "inf"):
        base[key][3] = "" if col == "NaN" else "inf"
    elif col == "empty input":
        base = {k: [] for k in base}
        (tmp / "in.csv").write_text(",".join(base) + "\n")
        return tmp / "in.csv"
    elif col == "one user":
        base = {k: v[:2] for k, v in base.items()}
    elif col == "user with 10^6 items":
        rows = BIG
        cols = {"user": np.r_[np.zeros(rows, dtype=np.int64), np.arange(1, 20)]}
        for k, v in base.items():
            if k != "user":
                cols[k] = np.r_[np.resize(np.asarray(v), rows), np.asarray(v)[:19]]
        if kind == "items":  # every user needs m items in the bounded model: 2 users x 10^6
            cols = {"user": np.repeat([0, 1], rows), "item": np.resize(np.array(["w0", "w1", "w2", "w3"]), 2 * rows)}
        return _write(tmp / "in.parquet", cols)
    elif col == "wrong dtypes":
        base["lat"][5] = "x"
    elif col == "out-of-box / unknown items":
        if kind == "points":
            base["lat"][0] = 45.0
        else:
            base["item"][0] = "not-in-domain"
    return _write(tmp / "in.csv", base)


def _cli_argv(row: str, path: Path, tmp: Path, col: str) -> list[str]:
    bad = col == "params out of range"
    unknown = col == "unknown columns"
    if row == "userdp distinct":
        return ["distinct", str(path), "--user", "user", "--item", "nope" if unknown else "item", "--epsilon"] + [
            "-1" if bad else "1.0"
        ]
    if row == "userdp heatmap":
        return ["heatmap", str(path), "--user", "user", "--lat", "nope" if unknown else "lat", "--lon", "lon"] + [
            "--bbox", "40.69,-74.01,40.76,-73.94", "--resolution", "0" if bad else "16", "--epsilon", "1",
            "--out", str(tmp / "out.png"),
        ]  # fmt: skip
    if row == "userdp linear":
        return ["linear", str(path), "--user", "user", "--items", "nope,lon" if unknown else "lat,lon"] + [
            "--metric", "greatcircle", "--bbox", "40.69,-74.01,40.76,-73.94", "--point", "40.72,-73.98",
            "--alpha", "0" if bad else "2",
        ]  # fmt: skip
    if row == "userdp itemwise, userdp freq":
        dom = _write(tmp / "domain.csv", {"item": ["w0", "w1", "w2", "w3"], "cluster": ["a", "a", "b", "b"]})
        return ["itemwise", str(path), "--user", "user", "--item", "nope" if unknown else "item"] + [
            "--metric", "clustered", "--domain", str(dom), "--alpha", "-3" if bad else "3", "--model", "central",
        ]  # fmt: skip
    raise AssertionError(row)


_CLI_ROWS = ["userdp distinct", "userdp heatmap", "userdp linear", "userdp itemwise, userdp freq"]


def _cli_cases():
    for r in _CLI_ROWS:
        for c in COLUMNS:
            if TABLE[r][c] != NA:
                yield pytest.param(r, c)


@pytest.mark.parametrize("row,col", list(_cli_cases()))
def test_cli_cell(row, col, tmp_path, capsys):
    from userdp.cli import build_parser, main
    from userdp.cli import ledger as cli_ledger

    outcome = TABLE[row][col]
    kind = "points" if row in ("userdp heatmap", "userdp linear") else "items"
    path = _cli_input(tmp_path, "valid" if col in ("params out of range", "budget spent") else col, kind)
    argv = _cli_argv(row, path, tmp_path, col)
    ledger = tmp_path / "ledger.json"
    eps = "0.01" if col == "budget spent" else "100"
    # one relation per ledger: replacing one user's data by data of the same size accepts every release (an
    # add/remove epsilon costs 2 epsilon; bounded d_EM releases protect only data of the same size)
    assert main(["ledger", "init", str(ledger), "--budget", f"replace-same-size:{eps}:0.5"]) == 0
    capsys.readouterr()
    before = ledger.read_text()
    code = main(argv + ["--json", "--ledger", str(ledger)])
    out, err = capsys.readouterr()
    if outcome == OK:
        assert code == 0 and json.loads(out)
        assert ledger.read_text() != before  # charged
        return
    assert code == 2, (code, out, err)
    assert out == "" and err.startswith("userdp: error:")
    assert not (tmp_path / "out.png").exists() and not (tmp_path / "out.npy").exists()
    assert ledger.read_text() == before
    # the error is the table's kind: the same command, run without main's reporting
    with pytest.raises(ERRORS[outcome]):  # a number out of its option's range is refused by the parser
        args = build_parser().parse_args(argv + ["--json", "--ledger", str(ledger)])
        cli_ledger.check(args)
        args.func(args)
    assert ledger.read_text() == before


@pytest.mark.parametrize(
    "argv",
    [
        ["account", "shuffle", "--alpha0", "nan", "--m", "10", "--n", "1000", "--delta", "1e-6"],
        ["account", "calibrate", "--alpha", "inf", "--m", "10", "--n", "1000", "--delta", "1e-6"],
        ["account", "shuffle", "--alpha0", "50", "--m", "1000", "--n", "100000", "--delta", "1e-12"],
        ["account", "reduction", "--epsilon", "1", "--r", "2", "--delta", "1e-6"],
    ],
)
def test_cli_account_refusals(argv, capsys):
    from userdp.cli import main

    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "error" in err


if __name__ == "__main__":  # pragma: no cover
    print(markdown_table())
