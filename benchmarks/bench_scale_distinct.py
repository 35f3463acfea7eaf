"""Benchmark: the person-level distinct count at scale on a synthetic person-element graph (issue 17).

Target (issue 17): a graph of 10^8 pairs (10^7 persons, Zipf element popularity with exponent about 1.1,
Zipf person degrees): the exact DC(D; l) for all l = 1..100 (``dc_matching``) in at most 60 s with at
most 8 GB peak memory, and the greedy (``dc_greedy``, Algorithm 2) in at most 5 s.

The graph (generated with NumPy, seeded; its generation is timed but is not part of the target):

* persons = pairs / 10; each person gets a target degree from a discrete power law (a bounded Pareto density
  ``x^-a`` on [0.5, U + 0.5], rounded) whose exponent ``a`` is solved so that the mean target degree is
  pairs / persons = 10 (``a`` is 1.91-1.98 as U goes from 10^5 to 10^7: Zipf person degrees), capped at U;
* elements: the universe has U = persons elements by default (``--universe``); draws follow Zipf with
  exponent 1.1 over the popularity ranks 1..U (the same bounded-Pareto rounding), and ranks are mapped to
  element ids by a fixed affine bijection mod U, so that the element order (which the greedy and the sorted
  per-person lists use) is unrelated to popularity, as with the labels of real data. U grows with the pairs,
  so every size has the same shape: about 70-90 % of the universe occurs (7.2 million elements at 10^8);
* a person's draws are deduplicated (one sort of person * U + element keys); a person left short of its
  target degree draws its shortfall again, for up to ``--rounds`` rounds. Persons whose target is a large part
  of the universe stay short (a Zipf draw of them keeps repeating the popular elements), so the graph holds
  about 84-93 % of ``--pairs`` distinct pairs (83.8 million at the default; ``--pairs 1.2e8 --persons 1e7``
  gives about 10^8). Elements that never occur are dropped and the rest renumbered in order; the CSR
  (``PersonElementGraph``: offsets, each person's distinct elements ascending, int64) is built directly from
  the sorted keys, not through a ``UserDataset``, which is much slower (``--dataset`` times that path).

Each step runs in a fresh interpreter started from this small one (ru_maxrss survives exec, so the parent
never holds the graph): the generation, writing the graph to .npy files in a temporary folder; the counts,
after a warm-up on a tiny graph so that numba's compilation or cache load is not counted (reported apart),
with that interpreter's peak RSS next to its baseline (imports, warm-up) and to its size with the graph
loaded; with ``--dataset``, ``UserDataset.from_arrays`` of the pairs as records in a random order (no
duplicates) and ``person_element_graph`` of that dataset, checked to give the generated graph.

Measured on the shared 2-core machine (another engineer's processes on the other core, so +-30 %; the
dc_matching of 8bbf9b1); numba's warm-up is 0.4-1.4 s from its cache, about 7 s when it compiles:

  | --pairs | distinct pairs | elements  | exact     | phases (persons/elements) | greedy | peak RSS     |
  |---------|----------------|-----------|-----------|---------------------------|--------|--------------|
  | 1e6     | 0.93 M         | 89,555    | 1.3-1.6 s | 178 / 61                  | 0.02 s | 0.21-0.25 GB |
  | 3e6     | 2.66 M         | 249,902   | 4.5-6.9 s | 200 / 52                  | 0.08 s | 0.26-0.28 GB |
  | 1e7     | 8.48 M         | 792,661   | 32 s      | 225 / 50                  | 0.29 s | 0.42 GB      |
  | 3e7     | 26.9 M         | 2,393,049 | 176 s     | 306 / 0                   | 0.89 s | 0.81 GB      |

The exact count grows as pairs^1.4-1.5 here: each phase searches from every person with spare capacity,
nearly all of them, so it reads about the whole graph (0.11 s a phase at 1e7, 1.3-2 s at the default size),
and there are about 300 phases. At the default size that is about 10-12 minutes (not run); memory (about
2.5 GB) and the greedy (3.3 s, measured at the default size) are within their targets.

Run: python benchmarks/bench_scale_distinct.py [--pairs 1e8] [--lmax 100] [--dataset] [--seed 0] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TARGET_EXACT_S = 60.0
TARGET_GREEDY_S = 5.0
TARGET_PEAK_GB = 8.0
TARGET_PAIRS = 10**8
AFFINE_A, AFFINE_B = 1_000_000_007, 12_345  # rank -> element id: (A * rank + B) mod U (A is prime)


# --------------------------------------------------------------------------------------------
# The synthetic graph
# --------------------------------------------------------------------------------------------


def _pareto_mean(a: float, lo: float, hi: float) -> float:
    """Mean of the density proportional to x^-a on [lo, hi]."""

    def integral(k: float) -> float:  # the integral of x^(k - a) over [lo, hi]
        e = k + 1 - a
        return math.log(hi / lo) if abs(e) < 1e-12 else (hi**e - lo**e) / e

    return integral(1) / integral(0)


def _solve_exponent(mean: float, lo: float, hi: float) -> float:
    a, b = 1.0 + 1e-6, 8.0
    for _ in range(200):  # the mean decreases in the exponent
        mid = (a + b) / 2
        a, b = (mid, b) if _pareto_mean(mid, lo, hi) > mean else (a, mid)
    return (a + b) / 2


def _power_law_ints(rng: np.random.Generator, a: float, n_max: int, size: int) -> np.ndarray:
    """``size`` integers in 1..n_max with P(k) about proportional to k^-a (bounded Pareto, rounded)."""
    lo, hi = 0.5 ** (1 - a), (n_max + 0.5) ** (1 - a)
    x = rng.random(size)
    x *= hi - lo
    x += lo
    np.power(x, 1 / (1 - a), out=x)
    x += 0.5
    k = x.astype(np.int64)  # floor (x > 0)
    del x
    np.clip(k, 1, n_max, out=k)
    return k


def _draw_keys(rng: np.random.Generator, persons: np.ndarray, counts: np.ndarray, universe: int, s: float):
    """Sorted keys person * U + element for ``counts[i]`` Zipf draws by ``persons[i]``."""
    total = int(counts.sum())
    e = _power_law_ints(rng, s, universe, total)
    e -= 1
    e *= AFFINE_A
    e += AFFINE_B
    e %= universe
    keys = np.repeat(persons * np.int64(universe), counts)
    keys += e
    del e
    keys.sort()
    return keys


def _unique_sorted(keys: np.ndarray) -> np.ndarray:
    keep = np.empty(keys.size, np.bool_)
    keep[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def synthetic_graph(pairs: int, persons: int, universe: int, zipf: float, seed: int, rounds: int):
    """The CSR (offsets, adj, n_elements) and a dict describing the generation."""
    rng = np.random.default_rng(seed)
    mean = pairs / persons
    a = _solve_exponent(mean, 0.5, universe + 0.5)
    target = _power_law_ints(rng, a, universe, persons)
    ids = np.arange(persons, dtype=np.int64)
    keys = _draw_keys(rng, ids, target, universe, zipf)
    draws = keys.size
    keys = _unique_sorted(keys)
    have = np.bincount(keys // universe, minlength=persons)
    done_rounds = 1
    for _ in range(rounds - 1):
        short = target - have
        if short.sum() <= 1e-3 * target.sum():
            break
        who = np.flatnonzero(short > 0)
        new = _draw_keys(rng, who, short[who], universe, zipf)
        draws += new.size
        keys = np.concatenate([keys, new])
        del new
        keys.sort()
        keys = _unique_sorted(keys)
        have = np.bincount(keys // universe, minlength=persons)
        done_rounds += 1
    elements = keys % universe
    del keys
    present = np.bincount(elements, minlength=universe) > 0
    code = np.cumsum(present) - 1  # increasing, so each person's list stays sorted
    adj = code[elements]
    del elements, code
    offsets = np.zeros(persons + 1, np.int64)
    np.cumsum(have, out=offsets[1:])
    info = {
        "degree_exponent": a,
        "target_degree_sum": int(target.sum()),
        "draws": int(draws),
        "rounds": done_rounds,
        "max_degree": int(have.max()),
    }
    return offsets, adj, int(present.sum()), info


# --------------------------------------------------------------------------------------------
# The measurements, each in a fresh interpreter
# --------------------------------------------------------------------------------------------


def _rss_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # kB on Linux


def child_count(folder: str, l_max: str) -> None:
    l_max = int(l_max)
    t = time.perf_counter()
    from userdp.distinct import PersonElementGraph, counting, dc_greedy, dc_matching

    phases = []
    kernel = counting._dc_all

    def recording(*args):  # dc_matching as it is, keeping the phase counts its kernel returns
        out, ph = kernel(*args)
        phases.append(ph.tolist())
        return out, ph

    counting._dc_all = recording
    t_import = time.perf_counter() - t
    t = time.perf_counter()
    tiny = PersonElementGraph(np.array([0, 2, 3, 5], np.int64), np.array([0, 1, 1, 0, 2], np.int64), 3)
    dc_matching(tiny, 3), dc_greedy(tiny, 3)
    t_warm = time.perf_counter() - t
    rss_base = _rss_gb()
    d = Path(folder)
    offsets, adj = np.load(d / "offsets.npy"), np.load(d / "adj.npy")
    g = PersonElementGraph(offsets, adj, int(np.load(d / "n_elements.npy")))
    rss_graph = _rss_gb()
    t = time.perf_counter()
    exact = dc_matching(g, l_max)
    t_exact = time.perf_counter() - t
    rss_exact = _rss_gb()
    t = time.perf_counter()
    greedy = dc_greedy(g, l_max)
    t_greedy = time.perf_counter() - t
    assert np.all(greedy <= exact) and np.all(2 * greedy >= exact)
    print(
        json.dumps(
            {
                "import_s": t_import,
                "warmup_s": t_warm,
                "exact_s": t_exact,
                "greedy_s": t_greedy,
                "phases": phases[-1],
                "dc_last": int(exact[-1]),
                "greedy_last": int(greedy[-1]),
                "dc_1": int(exact[0]),
                "rss_base_gb": rss_base,
                "rss_graph_gb": rss_graph,
                "rss_exact_gb": rss_exact,
                "rss_peak_gb": _rss_gb(),
            }
        )
    )


def child_dataset(folder: str, seed: str) -> None:
    seed = int(seed)
    from userdp.data import UserDataset
    from userdp.distinct import person_element_graph

    d = Path(folder)
    offsets, adj = np.load(d / "offsets.npy"), np.load(d / "adj.npy")
    person_element_graph(UserDataset.from_arrays([0, 0, 1], [1, 0, 1]))  # warm-up (numba cache load)
    perm = np.random.default_rng(seed).permutation(adj.size)  # the records in a random order
    users = np.repeat(np.arange(offsets.size - 1, dtype=np.int64), np.diff(offsets))[perm]
    items = adj[perm]
    del perm
    rss_records = _rss_gb()
    t = time.perf_counter()
    ds = UserDataset.from_arrays(users, items)
    t_ds = time.perf_counter() - t
    del users, items
    t = time.perf_counter()
    g = person_element_graph(ds)
    t_graph = time.perf_counter() - t
    # persons with no pairs have no record; compare on the persons that have pairs
    nonempty = np.flatnonzero(np.diff(offsets) > 0)
    same = bool(
        np.array_equal(ds.user_ids, nonempty)
        and np.array_equal(g.offsets, np.concatenate([[0], np.cumsum(np.diff(offsets)[nonempty])]))
        and np.array_equal(g.adj, adj)
    )
    print(
        json.dumps(
            {
                "from_arrays_s": t_ds,
                "graph_s": t_graph,
                "same": same,
                "rss_records_gb": rss_records,
                "rss_peak_gb": _rss_gb(),
            }
        )
    )


def child_generate(folder: str, opts: str) -> None:
    o = json.loads(opts)
    t = time.perf_counter()
    offsets, adj, n_elements, info = synthetic_graph(
        o["pairs"], o["persons"], o["universe"], o["zipf"], o["seed"], o["rounds"]
    )
    info["generate_s"] = time.perf_counter() - t
    deg = np.diff(offsets)
    info.update(
        pairs=int(adj.size),
        n_elements=n_elements,
        mean_degree=float(deg.mean()),
        over_lmax=int((deg > o["lmax"]).sum()),
        capped_sum=int(np.minimum(deg, o["lmax"]).sum()),
        rss_peak_gb=_rss_gb(),
    )
    d = Path(folder)
    np.save(d / "offsets.npy", offsets)
    np.save(d / "adj.npy", adj)
    np.save(d / "n_elements.npy", np.int64(n_elements))
    print(json.dumps(info))


def _run_child(args: list[str], timeout: float | None) -> dict:
    """One measurement in a fresh interpreter, started from this small one (ru_maxrss keeps, across exec, the
    resident size of the process that forked, so the parent never holds the graph)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", *args]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"child {args[0]} failed (exit {out.returncode})")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t
    return res


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, folder, arg = sys.argv[2:5]
        {"generate": child_generate, "count": child_count, "dataset": child_dataset}[kind](folder, arg)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=float, default=1e8, help="distinct person-element pairs aimed at")
    ap.add_argument("--persons", type=float, default=None, help="default pairs / 10")
    ap.add_argument("--universe", type=float, default=None, help="element universe U, default = persons")
    ap.add_argument("--zipf", type=float, default=1.1, help="element popularity exponent")
    ap.add_argument("--lmax", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=6, help="draw rounds topping up short persons")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dataset", action="store_true", help="also time UserDataset -> person_element_graph")
    ap.add_argument("--timeout", type=float, default=None, help="seconds allowed to each child")
    args = ap.parse_args()
    pairs = int(args.pairs)
    persons = int(args.persons) if args.persons else pairs // 10
    universe = int(args.universe) if args.universe else persons
    assert math.gcd(AFFINE_A, universe) == 1
    opts = dict(
        pairs=pairs,
        persons=persons,
        universe=universe,
        zipf=args.zipf,
        seed=args.seed,
        rounds=args.rounds,
        lmax=args.lmax,
    )
    with tempfile.TemporaryDirectory(prefix="bench_scale_distinct_") as tmp:
        info = _run_child(["generate", tmp, json.dumps(opts)], args.timeout)
        print(
            f"graph: {info['pairs']:,} pairs (aimed at {pairs:,}), {persons:,} persons, {info['n_elements']:,} "
            f"distinct elements (universe {universe:,}, Zipf {args.zipf})"
        )
        print(
            f"  degrees: power-law exponent {info['degree_exponent']:.3f}, mean {info['mean_degree']:.2f}, max "
            f"{info['max_degree']:,}, persons with degree > {args.lmax}: {info['over_lmax']:,}, "
            f"sum min(deg, {args.lmax}) = {info['capped_sum']:,}"
        )
        print(
            f"  generated in {info['generate_s']:.1f} s, peak RSS {info['rss_peak_gb']:.2f} GB ({info['draws']:,} "
            f"draws in {info['rounds']} rounds, target degree sum {info['target_degree_sum']:,}; not part of the "
            f"target)"
        )
        r = _run_child(["count", tmp, str(args.lmax)], args.timeout)
        ds = _run_child(["dataset", tmp, str(args.seed)], args.timeout) if args.dataset else None
    scale = info["pairs"] / TARGET_PAIRS
    warm = f"imports {r['import_s']:.2f} s, warm-up (numba compile or cache load) {r['warmup_s']:.2f} s"
    print(f"fresh interpreter: {warm}")
    print(f"{'':34} {'measured':>10} {'target':>10}   (targets are for 10^8 pairs; this graph is {scale:.3g} of that)")
    print(
        f"{'exact dc_matching, l = 1..' + str(args.lmax):34} {r['exact_s']:>8.2f} s {TARGET_EXACT_S:>8.0f} s"
        f"   phases: {r['phases'][0]} from persons, {r['phases'][1]} from elements"
    )
    print(f"{'greedy dc_greedy, l = 1..' + str(args.lmax):34} {r['greedy_s']:>8.2f} s {TARGET_GREEDY_S:>8.0f} s")
    print(
        f"{'peak RSS of the counting process':34} {r['rss_peak_gb']:>7.2f} GB {TARGET_PEAK_GB:>7.0f} GB"
        f"   (baseline {r['rss_base_gb']:.2f} GB, with the graph {r['rss_graph_gb']:.2f} GB, "
        f"after the exact count {r['rss_exact_gb']:.2f} GB)"
    )
    print(f"  DC(1) = {r['dc_1']:,}, DC({args.lmax}) = {r['dc_last']:,}, greedy({args.lmax}) = {r['greedy_last']:,}")
    if ds is not None:
        print(f"{'UserDataset.from_arrays (records)':34} {ds['from_arrays_s']:>8.2f} s")
        print(
            f"{'person_element_graph (dataset)':34} {ds['graph_s']:>8.2f} s   same graph: {ds['same']}, "
            f"peak RSS {ds['rss_peak_gb']:.2f} GB (records alone {ds['rss_records_gb']:.2f} GB)"
        )


if __name__ == "__main__":
    main()
