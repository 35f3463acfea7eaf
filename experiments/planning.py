"""Issue 19: every release's predicted error (``userdp.plan``, from public sizes only) against its measured
error on real data.

Releases, data and what is measured (the median and 90% quantile of the error over repeated releases):

* distinct count (Knop & Steinke): Amazon Fashion (bundled), Foursquare venues and IMDB (reviews as persons), ``|DC(D) -
  release|``, 300 releases from the exact count curve. Predicted from (persons, distinct words, mean words
  per person), rounded as a planner would know them, by the synthetic curve; and by the exact law of the
  true curve (what a planner with a public sample of the same data would get);
* PrivEMDLinear (local): the average distance to Times Square on Foursquare NYC, 400 releases;
* frequency estimation with GKRR (local, ``delta' = 1e-6``): Foursquare check-in regions (16 public clusters
  of 9 cells, 100 check-ins sampled per user), ``d_EM`` to the truth, 20 releases; and with the exponential
  randomizer on a synthetic 50-point line metric (2,000 users of 20 items), 20 releases;
* heatmaps (``auto`` and ``laplace``): Midtown Manhattan, 64 cells a side, the EMD between the normalized true
  and released heatmaps, 8 releases.

Issue 34: the plans' 90% bounds must cover on data nobody tuned them to. Every row also states the coverage
(the fraction of the measured releases whose error is at most the predicted 90% quantile) and whether its data
set was held out of the fit: the distinct count's constants (Zipf exponent 1.35, the spreads it mixes over)
were chosen on Amazon Fashion, Foursquare venues and IMDB; Reddit (3,486 authors, words and bigrams), TPC-H
(customers' parts and suppliers, generated offline by DuckDB's ``tpch`` extension) and Foursquare categories
are new material. The heatmap's stand-in shapes were chosen on Midtown at 256 cells; the other boxes and grids
are held out. The distinct count is planned twice from public sizes: with the spread unknown (the default)
and with the spread given (the data's log-standard deviation of persons' sizes to one decimal, what a planner
would know from public knowledge of similar data).

Leave one source out (``planning_refit.{csv,md}``): the constants are refitted with each source's data sets
removed and scored on them. The distinct count's spread windows (which offsets from the given spread the
90% bound and the median mix over) are chosen among the windows of :data:`REFIT_OFFSETS` on the other
sources, Reddit's words and bigrams held out together (the same authors), as are TPC-H's and Foursquare's;
the heatmap's and frequency estimation's multipliers of the upper quantiles (``MARGIN``) are refitted with
each box or data set held out. Each fitted constant is then widened by one step of its grid (the window by one
offset on each side, :func:`widen`; a multiplier by 0.05), the fit's own uncertainty, and scored held out
both ways; ``userdp.plan.distinct.SPREAD_OFFSETS`` ships the widened window fitted on all sources.

Writes experiments/results/planning.csv, planning_table.md, planning_coverage.csv, planning_coverage.md,
planning_refit.csv, planning_refit_margins.csv, planning_refit.md and planning.png.

Run: python experiments/planning.py [--imdb PATH] [--tpch PARQUET] [--quick]
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import numpy as np
import pandas as pd

from userdp import datasets, plan, releases
from userdp.data import BoxDomain, UserDataset
from userdp.dem.frequency import demd_error
from userdp.dem.itemwise import BoundedEMDReduction
from userdp.dem.linear import linear_release
from userdp.distinct import dc_matching, person_element_graph
from userdp.distinct.release import distinct_count
from userdp.heatmaps import heatmap_emd, user_grid_sum
from userdp.metrics import GreatCircleMetric
from userdp.report.demo import MIDTOWN, TIMES_SQUARE, _regions

plan_dem = importlib.import_module("userdp.plan.dem")  # (``userdp.plan.heatmap`` is also a function)
plan_heatmap = importlib.import_module("userdp.plan.heatmap")
OUT = Path(__file__).resolve().parent / "results"
SHARED_DIR = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SHARED = SHARED_DIR / "imdb_reviews.jsonl.xz"
#: The data sets whose errors chose the distinct count's constants (the rest are held out of the fit).
DISTINCT_FIT = {"amazon fashion", "foursquare venues", "imdb"}
DOWNTOWN = BoxDomain.latlon(40.700, 40.735, -74.020, -73.975)
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)


def _row(release, data, param, value, pred, errs, basis, held_out=True):
    errs = np.asarray(errs, dtype=np.float64)
    return {
        "release": release,
        "data": data,
        "held_out": held_out,
        "parameter": param,
        "value": value,
        "predicted_median": pred.median,
        "predicted_q90": pred.quantiles[0.9],
        "measured_median": float(np.median(errs)),
        "measured_q90": float(np.quantile(errs, 0.9)),
        "ratio_median": pred.median / float(np.median(errs)),
        "coverage_q90": float(np.mean(errs <= pred.quantiles[0.9])),
        "runs": int(errs.size),
        "basis": basis,
    }


def _round(x: float) -> float:
    """A public estimate: two significant digits."""
    return float(f"{x:.2g}")


def distinct_rows(name, graph, runs, measured=None):
    """The rows of one data set; ``measured`` (a dict), when given, receives what :func:`refit_distinct`
    needs: the public sizes, the spread, the Zipf exponent, the truth and the errors per epsilon."""
    curve = dc_matching(graph, 100)
    truth = graph.distinct_count()
    deg = graph.degrees()
    deg = deg[deg > 0]
    sizes = {"persons": int(_round(deg.size)), "distinct": int(_round(truth)),
             "items_per_person": _round(float(deg.mean()))}  # fmt: skip
    spread = round(float(np.log(deg).std()), 1)  # the public estimate of the spread (one decimal)
    fit = name in DISTINCT_FIT
    # what public knowledge says of the elements: TPC-H's parts and suppliers are a catalogue (Zipf 0)
    zipf, note = (0.0, ", Zipf 0") if name.startswith("tpch") else (1.35, "")
    if measured is not None:
        measured.update(sizes=sizes, spread=spread, zipf=zipf, truth=float(truth), errors={})
    rows = []
    for eps in EPSILONS:
        errs = np.abs([truth - distinct_count(None, eps, 0.05, 100, counts=curve, rng=s).value for s in range(runs)])
        if measured is not None:
            measured["errors"][eps] = errs
        rows.append(_row("distinct count", name, "epsilon", eps, plan.distinct(eps, **sizes), errs,
                         "synthetic curves, spread unknown", not fit))  # fmt: skip
        given = plan.distinct(eps, spread=spread, zipf=zipf, **sizes)
        rows.append(_row("distinct count", name, "epsilon", eps, given, errs,
                         f"synthetic curves, spread {spread:g}{note} given", not fit))  # fmt: skip
        exact = plan.distinct(eps, curve=curve, distinct=truth)
        rows.append(_row("distinct count", name, "epsilon", eps, exact, errs, "exact law, true curve", not fit))
    return rows


#: The offsets (added to a data set's spread) among which the refit chooses the plan's windows.
REFIT_OFFSETS = (-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0)
#: Data sets of one source are held out together (Reddit's words and bigrams are the same authors).
SOURCE = {"amazon fashion": "amazon", "foursquare venues": "foursquare", "foursquare categories": "foursquare",
          "reddit words": "reddit", "reddit bigrams": "reddit", "tpch parts": "tpch", "tpch suppliers": "tpch",
          "imdb": "imdb"}  # fmt: skip


def _windows() -> list[tuple[float, ...]]:
    n = len(REFIT_OFFSETS)
    return [REFIT_OFFSETS[i:j] for i in range(n) for j in range(i + 1, n + 1)]


def window_stats(m: dict) -> dict:
    """Per window of :data:`REFIT_OFFSETS`: the plan's median and 90% quantile per epsilon for the release's
    exact law mixed over the synthetic curves at ``spread + offset`` (what ``plan.distinct`` computes for
    one window), the coverage of the measured errors (pooled over epsilon) and predicted / measured medians."""
    from userdp.plan.distinct import _abs_shortfall_quantile, _release_law, synthetic_curve

    sz = m["sizes"]
    def spread(o: float) -> float:
        return round(max(0.0, m["spread"] + o), 6)

    curves = {spread(o): synthetic_curve(sz["persons"], sz["distinct"], sz["items_per_person"], 100, m["zipf"],
                                         spread(o)) for o in REFIT_OFFSETS}  # fmt: skip
    laws = {(eps, s): _release_law(c, eps, 0.05, 0.5) for eps in EPSILONS for s, c in curves.items()}
    out = {}
    for w in _windows():
        q90, ratio, covered, total = [], [], 0, 0
        for eps in EPSILONS:  # the spreads of the window, each once (as ``plan.distinct`` mixes them)
            parts = [laws[eps, s] for s in dict.fromkeys(spread(o) for o in w)]
            law = tuple(np.concatenate([x[i] / (len(parts) if i == 0 else 1) for x in parts]) for i in range(4))
            q = _abs_shortfall_quantile(float(sz["distinct"]), law, 0.9)
            med = _abs_shortfall_quantile(float(sz["distinct"]), law, 0.5)
            errs = m["errors"][eps]
            q90.append(q)
            ratio.append(med / max(float(np.median(errs)), 1e-12))
            covered += int(np.sum(errs <= q))
            total += errs.size
        out[w] = {"coverage": covered / total, "q90": np.array(q90), "ratio": np.array(ratio)}
    return out


def widen(w: tuple[float, ...]) -> tuple[float, ...]:
    """The window ``w`` widened by one offset on each side (within :data:`REFIT_OFFSETS`): the uncertainty of
    the fitted window itself. Fitted with one source left out, the window moves by one offset (IMDB out:
    -0.25..+0.25; any other out: -0.5..+0.5), so a window fitted on a handful of data sets is uncertain by
    about that much; the rule is fixed before scoring, not tuned on the held-out source."""
    i, j = REFIT_OFFSETS.index(w[0]), REFIT_OFFSETS.index(w[-1])
    return REFIT_OFFSETS[max(0, i - 1) : min(len(REFIT_OFFSETS), j + 2)]


def choose_windows(stats: dict, names: list[str]) -> tuple[tuple, tuple]:
    """The windows fitted on ``names``: for the 90% bound, the tightest (smallest mean log quantile) whose
    pooled coverage is at least 90% on every data set (or the best any window reaches there, for data sets
    whose error no window moves); for the median, the one with the smallest worst ``|log(predicted /
    measured)|``."""
    ws = _windows()
    need = {d: min(0.9, max(stats[d][w]["coverage"] for w in ws)) - 1e-9 for d in names}
    ok = [w for w in ws if all(stats[d][w]["coverage"] >= need[d] for d in names)]
    bound = min(ok, key=lambda w: float(np.mean([np.log(stats[d][w]["q90"]).mean() for d in names])))
    median = min(ws, key=lambda w: max(float(np.abs(np.log(stats[d][w]["ratio"])).max()) for d in names))
    return bound, median


def _scored(stats: dict, n: str, bound: tuple, median: tuple) -> dict:
    wide = widen(bound)
    return {"bound window": bound, "coverage_q90": stats[n][bound]["coverage"], "widened window": wide,
            "widened coverage_q90": stats[n][wide]["coverage"],
            "widened ratio_min": float(stats[n][wide]["ratio"].min()),
            "widened ratio_max": float(stats[n][wide]["ratio"].max()), "median window": median,
            "ratio_min": float(stats[n][median]["ratio"].min()),
            "ratio_max": float(stats[n][median]["ratio"].max())}  # fmt: skip


def refit_distinct(measured: dict[str, dict]) -> pd.DataFrame:
    """Leave one source out: the windows are chosen on the other sources' data sets and scored on the held-out
    ones; the last rows choose on all (what ``userdp.plan.distinct`` ships: compare ``SPREAD_OFFSETS``)."""
    stats = {}
    for name, m in measured.items():
        stats[name] = window_stats(m)
        print(f"refit: {name} windows done", flush=True)
    names = list(stats)
    rows = []
    for src in dict.fromkeys(SOURCE.get(n, n) for n in names):
        held = [n for n in names if SOURCE.get(n, n) == src]
        bound, median = choose_windows(stats, [n for n in names if n not in held])
        for n in held:
            rows.append({"held out": src, "data": n, **_scored(stats, n, bound, median)})
    bound, median = choose_windows(stats, names)
    for n in names:
        rows.append({"held out": "none (all)", "data": n, **_scored(stats, n, bound, median)})
    df = pd.DataFrame(rows)
    for col in ("bound window", "widened window", "median window"):
        df[col] = df[col].map(lambda w: f"{w[0]:+g}..{w[-1]:+g}")
    return df


#: The multipliers :func:`refit_margin` chooses from.
MARGINS = tuple(np.round(np.arange(1.0, 2.01, 0.05), 2))


def refit_margin(entries: list[dict], grid=MARGINS) -> pd.DataFrame:
    """Leave one data set out for a multiplier of the quantiles above the median (``plan.heatmap.MARGIN``,
    ``plan.dem.MARGIN``): each entry holds ``data``, the simulated 90% quantile without the multiplier
    (``raw_q90``) and the measured ``errors``; the multiplier fitted on the others is the smallest on the grid
    whose coverage reaches 90% on each of them."""

    def coverage(data: str, m: float) -> float:
        es = [e for e in entries if e["data"] == data]
        return float(np.mean(np.concatenate([e["errors"] <= m * e["raw_q90"] for e in es])))

    def fitted(names: list[str]) -> float:
        for m in grid:
            if all(coverage(d, m) >= 0.9 for d in names):
                return float(m)
        return float(grid[-1])

    names = list(dict.fromkeys(e["data"] for e in entries))
    step = float(grid[1] - grid[0])
    rows = []
    for d in names:
        m = fitted([n for n in names if n != d]) if len(names) > 1 else float("nan")
        rows.append({"release": entries[0]["release"], "held out": d, "fitted margin": m,
                     "coverage_q90": coverage(d, m) if np.isfinite(m) else float("nan"),
                     "widened margin": round(m + step, 2),  # one step of the grid: the fit's uncertainty
                     "widened coverage_q90": coverage(d, m + step) if np.isfinite(m) else float("nan"),
                     "margin fitted on all": fitted(names)})  # fmt: skip
    return pd.DataFrame(rows)


def _pairs_graph(users, items):
    import pyarrow as pa

    return person_element_graph(UserDataset.from_table(pa.table({"u": users, "i": items}), user="u", item="i"))


def reddit_graphs(path: Path) -> dict:
    """Reddit authors (the SmartNoise sample): their words, and their bigrams."""
    import lzma

    import pyarrow.csv as pc

    with lzma.open(path) as fh:
        t = pc.read_csv(fh)
    authors, ngrams = t.column("author").to_pylist(), t.column("ngram").to_pylist()
    words = [n.strip("()").replace("'", " ").replace(",", " ") for n in ngrams]
    return {"reddit words": person_element_graph(datasets.words_dataset(authors, words)),
            "reddit bigrams": _pairs_graph(authors, ngrams)}  # fmt: skip


def tpch_graphs(parquet: str | None, sf: float = 0.1) -> dict:
    """TPC-H customers (persons) and the parts and suppliers of their line items: generated offline by DuckDB's
    ``tpch`` extension (the ``duckdb-extension-tpch`` package, when it matches the installed DuckDB), or read
    from a parquet file of ``person, part, supplier`` columns made by it, e.g. in a virtual environment with
    ``pip install duckdb==1.5.5 duckdb-extension-tpch==1.5.5``::

        LOAD '<package dir>/extensions/v1.5.5/tpch.duckdb_extension'; CALL dbgen(sf=0.1);
        COPY (SELECT o_custkey AS person, l_partkey AS part, l_suppkey AS supplier FROM lineitem
              JOIN orders ON l_orderkey = o_orderkey) TO 'tpch.parquet' (FORMAT parquet);
    """
    import duckdb

    con = duckdb.connect()
    query = ("SELECT o_custkey AS person, l_partkey AS part, l_suppkey AS supplier FROM lineitem "
             "JOIN orders ON l_orderkey = o_orderkey")  # fmt: skip
    if parquet:
        t = con.sql(f"SELECT * FROM read_parquet('{parquet}')").arrow()
    else:
        try:
            import duckdb_extension_tpch

            ext = Path(duckdb_extension_tpch.__file__).parent / "extensions" / f"v{duckdb.__version__}"
            con.sql(f"LOAD '{ext / 'tpch.duckdb_extension'}'")
            con.sql(f"CALL dbgen(sf={sf})")
            t = con.sql(query).arrow()
        except Exception as exc:  # noqa: BLE001 (no matching extension: skipped, said)
            print(f"TPC-H skipped ({type(exc).__name__}: {str(exc)[:120]}); pass --tpch PARQUET")
            return {}
    if hasattr(t, "read_all"):
        t = t.read_all()
    person = t.column("person").to_numpy()
    return {"tpch parts": _pairs_graph(person, t.column("part").to_numpy()),
            "tpch suppliers": _pairs_graph(person, t.column("supplier").to_numpy())}  # fmt: skip


def linear_rows(fs, runs):
    space = GreatCircleMetric(datasets.NYC_BOX)
    f, ell, _ = releases.distance_query(space, TIMES_SQUARE)
    per_user = np.add.reduceat(f(fs.items), fs.offsets[:-1]) / fs.counts()
    truth = per_user.mean()
    rows = []
    for alpha in (5.0, 10.0, 25.0, 50.0, 100.0):
        errs = np.abs([linear_release(per_user, ell, alpha, "local", rng=s).value[0] - truth for s in range(runs)])
        pred = plan.linear(alpha, persons=1100)
        rows.append(_row("PrivEMDLinear (local)", "foursquare", "alpha", alpha, pred, errs, "sampler draws", False))
    return rows


def frequency_rows(fs, runs, measured=None):
    """Each release on its own sample of 100 check-ins per user (BoundedEMDReduction's projection, as the
    demo draws it), measured against that sample's histogram."""
    ds, space = _regions(fs)
    red = BoundedEMDReduction(s=100, epsilon=1.0, r=0.01, delta=1e-6)
    projs = [red.project(ds, 1000 + s) for s in range(runs)]
    rows = []
    for alpha in (25.0, 50.0, 100.0, 200.0):
        errs = [demd_error(releases.frequency(p, space, ds.domain, alpha, delta=1e-6, rng=s).value,
                           p.global_histogram(), space) for s, p in enumerate(projs)]  # fmt: skip
        pred = plan.frequency(alpha, persons=1083, items_per_person=100, clusters=16, cluster_size=9, r=0.25,
                              delta=1e-6)  # fmt: skip
        _measure(measured, "frequency", "foursquare regions", pred, errs, plan_dem.MARGIN)
        rows.append(_row("frequency (GKRR, local)", "foursquare regions", "alpha", alpha, pred, errs,
                         "simulation, stand-in histograms", False))  # fmt: skip
    return rows


def exponential_rows(runs, measured=None):
    """FreqEstLocal with the exponential randomizer on a synthetic 50-point line (2,000 users of 20 items
    from two bumps), predicted from the uniform stand-in."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.dem import freq_est_local
    from userdp.metrics import FiniteMetric

    x = np.arange(50.0)
    line = FiniteMetric(np.abs(x[:, None] - x[None, :]))
    p = np.exp(-((x - 12) ** 2) / 18) + 0.6 * np.exp(-((x - 36) ** 2) / 8)
    items = np.random.default_rng(7).choice(50, size=40_000, p=p / p.sum())
    ds = UserDataset(np.arange(2001) * 20, items, None, FiniteDomain(np.arange(50)))
    truth = ds.global_histogram()
    rows = []
    for alpha in (25.0, 50.0, 100.0, 200.0):
        errs = [demd_error(freq_est_local(ds, line, alpha, 1e-6, rng=s).value, truth, line) for s in range(runs)]
        pred = plan.frequency(alpha, persons=2000, items_per_person=20, space=line, delta=1e-6)
        _measure(measured, "frequency", "synthetic line, k = 50", pred, errs, plan_dem.MARGIN)
        rows.append(_row("frequency (exponential, local)", "synthetic line, k = 50", "alpha", alpha, pred, errs,
                         "simulation, stand-in histograms"))  # fmt: skip
    return rows


HEATMAPS = (  # (data, box, cells along the longer side, algorithms, the stand-ins' fit was chosen on it)
    ("foursquare midtown, 256 cells", MIDTOWN, 256, ("auto",), True),
    ("foursquare midtown, 64 cells", MIDTOWN, 64, ("auto", "laplace"), False),
    ("foursquare downtown, 128 cells", DOWNTOWN, 128, ("auto",), False),
    ("foursquare nyc, 64 cells", datasets.NYC_BOX, 64, ("auto",), False),
)


def heatmap_rows(fs, runs, quick=False, measured=None):
    rows = []
    for name, area, side, algorithms, fit in HEATMAPS[:2] if quick else HEATMAPS:
        box, shape = releases.grid_of(area, side)
        s = user_grid_sum(fs, shape, box, drop_outside=True)
        persons, points = _heatmap_sizes(fs, box)
        for algorithm in algorithms:
            for eps in (0.5, 1.0, 2.0, 4.0):
                errs = [heatmap_emd(s, releases.heatmap(fs, area, side, eps, algorithm, drop_outside=True,
                                                        rng=i).value) for i in range(runs)]  # fmt: skip
                pred = plan.heatmap(eps, shape=shape, persons=persons, points_per_person=points, algorithm=algorithm)
                _measure(measured, "heatmap", name, pred, errs, plan_heatmap.MARGIN)
                rows.append(_row(f"heatmap ({algorithm})", name, "epsilon", eps, pred, errs,
                                 "simulation, stand-in shapes", not fit))  # fmt: skip
    return rows


def _measure(measured, release, data, pred, errs, margin) -> None:
    """Keep what :func:`refit_margin` needs: the 90% quantile without the plan's multiplier, and the errors."""
    if measured is not None:
        measured.append({"release": release, "data": data, "raw_q90": pred.quantiles[0.9] / margin,
                         "errors": np.asarray(errs, dtype=np.float64)})  # fmt: skip


def _heatmap_sizes(fs, box) -> tuple[int, float]:
    """The users with check-ins in the box and their mean number there, rounded (public estimates)."""
    lo, hi = np.array(box.low), np.array(box.high)
    ok = np.all((fs.items >= lo) & (fs.items <= hi), axis=1)
    per_user = np.add.reduceat(ok.astype(np.int64), fs.offsets[:-1])
    users = per_user[per_user > 0]
    return int(_round(users.size)), _round(float(users.mean()))


def _markdown(df: pd.DataFrame) -> str:
    def cell(v) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def coverage_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per release, data set and predictor: held out of the fit, the coverage of the 90% bound over all the
    releases measured, and the range of predicted / measured medians."""
    df = df.assign(covered=df["coverage_q90"] * df["runs"])
    g = df.groupby(["release", "data", "basis"], sort=False)
    out = g.agg(held_out=("held_out", "first"), settings=("value", "size"), releases=("runs", "sum"),
                covered=("covered", "sum"), ratio_min=("ratio_median", "min"),
                ratio_max=("ratio_median", "max")).reset_index()  # fmt: skip
    out.insert(4, "coverage_q90", out.pop("covered") / out["releases"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--imdb", default=str(SHARED))
    ap.add_argument("--reddit", default=str(SHARED_DIR / "reddit_ngrams.csv.xz"))
    ap.add_argument("--tpch", default=None, help="a parquet of TPC-H person, part, supplier (else generated)")
    ap.add_argument("--quick", action="store_true", help="fewer runs and data sets (a smoke test)")
    ap.add_argument("--out", default=str(OUT), help="the results folder")
    args = ap.parse_args()
    q = args.quick
    out = Path(args.out)
    fs = datasets.foursquare_nyc()
    runs = 60 if q else 300
    graphs = {"amazon fashion": person_element_graph(datasets.amazon_fashion()),
              "foursquare venues": person_element_graph(datasets.foursquare_nyc("venue")),
              "foursquare categories": person_element_graph(datasets.foursquare_nyc("category"))}  # fmt: skip
    if Path(args.reddit).exists():
        graphs.update(reddit_graphs(Path(args.reddit)))
    graphs.update(tpch_graphs(args.tpch))
    if Path(args.imdb).exists() and not q:
        graphs["imdb"] = person_element_graph(datasets.imdb_reviews(args.imdb))
    rows, measured, sims = [], {}, []
    for name, graph in graphs.items():
        rows += distinct_rows(name, graph, runs, measured.setdefault(name, {}))
        print(f"distinct count: {name} done", flush=True)
    rows += linear_rows(fs, 100 if q else 400)
    rows += frequency_rows(fs, 10 if q else 40, sims)
    rows += exponential_rows(5 if q else 20, sims)
    rows += heatmap_rows(fs, 4 if q else 10, quick=q, measured=sims)
    refit = refit_distinct(measured)
    margins = pd.concat([refit_margin([e for e in sims if e["release"] == r]) for r in ("heatmap", "frequency")])
    df = pd.DataFrame(rows)
    out.mkdir(exist_ok=True)
    df.to_csv(out / "planning.csv", index=False)
    table = df[["release", "data", "held_out", "parameter", "value", "predicted_median", "measured_median",
                "ratio_median", "predicted_q90", "measured_q90", "coverage_q90", "basis"]]  # fmt: skip
    (out / "planning_table.md").write_text(_markdown(table))
    cov = coverage_table(df)
    cov.to_csv(out / "planning_coverage.csv", index=False)
    (out / "planning_coverage.md").write_text(_markdown(cov))
    print(cov.to_string(index=False))
    refit.to_csv(out / "planning_refit.csv", index=False)
    margins.to_csv(out / "planning_refit_margins.csv", index=False)
    (out / "planning_refit.md").write_text(_markdown(refit) + "\n" + _markdown(margins))
    print(refit.to_string(index=False))
    print(margins.to_string(index=False))
    inside = df["ratio_median"].between(0.5, 2.0)
    print(f"\npredicted median within 2x of the measured median: {inside.sum()} of {len(df)} rows")
    low = cov[cov["coverage_q90"] < 0.85]
    print(f"90% bound covering under 85% of releases: {len(low)} of {len(cov)} (release, data, predictor)")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6))
    for (release, basis), g in df.groupby(["release", "basis"]):
        ax.scatter(g["measured_median"], g["predicted_median"], label=f"{release} ({basis})", s=22)
    lo = min(df["measured_median"].min(), df["predicted_median"].min()) / 2
    hi = max(df["measured_median"].max(), df["predicted_median"].max()) * 2
    xs = np.array([lo, hi])
    ax.plot(xs, xs, "k-", lw=0.8, label="predicted = measured")
    ax.fill_between(xs, xs / 2, xs * 2, color="grey", alpha=0.15, label="within 2x")
    ax.set(xscale="log", yscale="log", xlabel="measured median error", ylabel="predicted median error (userdp.plan)",
           title="Planned against measured error, every release")  # fmt: skip
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "planning.png", dpi=130)


if __name__ == "__main__":
    main()
