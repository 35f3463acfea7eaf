"""The documentation's Python examples run as written (except the one that reads a user's own file, and the
Spark example that needs a cluster), and what their comments say they return is what they return, wherever
that is deterministic.

The examples are the plain ```` ```python ```` blocks of ``docs/**/*.md`` (the reference pages and the
guides). The ```` ```python exec="on" ```` blocks of the quick start and the tutorials are run by
``mkdocs build --strict`` instead, which fails on any error.

Every bare expression in a snippet that returns a value (the page shows it in a comment) must have a check
in ``_outputs`` or a reason in ``UNCHECKED`` (noise, timing); the comments on assignments and on calls made
for their effect are checked per snippet in ``BLOCK_CHECKS``.

README.md itself keeps only the two commands, what userdp does, a picture and links into the docs: see
``test_readme_starts_with_the_two_commands``.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_COMMANDS = [
    "python3 -m pip install -e . && userdp demo                        # main job",
    'python3 -m pip install -e ".[test]" && python3 -m pytest -n auto  # tests',
]


def _blocks() -> list[tuple[str, str]]:
    """(page, code) for every plain ```python block of the docs, in page order."""
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        for code in re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M):
            if "s3://" not in code:  # blocks that need a cluster (s3:// paths) are documentation, not runnable here
                out.append((page.relative_to(DOCS).as_posix(), code))
    return out


PAGE_BLOCKS = _blocks()
BLOCKS = [code for _, code in PAGE_BLOCKS]


def test_readme_starts_with_the_two_commands():
    """README.md opens with the title, one line and the block of the two commands (CI runs the "# tests" line
    exactly as written), and stays short: the rest lives in docs/."""
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < 150, f"README.md has {len(lines)} lines; move material into docs/"
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block and text.index(first_block.group(0)) < 400, "the two commands come first"
    assert first_block.group(1).splitlines() == README_COMMANDS
    assert re.search(r"pytest -n auto\s+# tests$", first_block.group(1), re.M)


def test_readme_links_resolve():
    """Every relative link and image of README.md names a file of the repository."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert any(t.endswith(".png") for t in local), "README shows a picture"
    for t in local:
        assert (ROOT / t).exists(), t


def test_docs_have_the_examples():
    assert len(BLOCKS) >= 8, [p for p, _ in PAGE_BLOCKS]


# --------------------------------------------------------------------------------------------
# What the comments show
# --------------------------------------------------------------------------------------------


def _counts(ds) -> list[int]:
    return [int(c) for c in ds.counts()]


def _dc_by_maxflow(g, l: int) -> int:
    """DC(D; l) by SciPy's max flow (source -> person, capacity l -> element, capacity 1 -> sink)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_flow

    n, k = g.n_persons, g.n_elements
    person = np.repeat(np.arange(n), g.degrees())
    rows = np.r_[np.zeros(n, dtype=np.int64), 1 + person, 1 + n + np.arange(k)]
    cols = np.r_[1 + np.arange(n), 1 + n + g.adj, np.full(k, n + k + 1)]
    caps = np.r_[np.full(n, l), np.ones(g.n_edges + k)].astype(np.int32)
    G = sp.csr_matrix((caps, (rows, cols)), shape=(n + k + 2, n + k + 2))
    return int(maximum_flow(G, 0, n + k + 1).flow_value)


def _check_dc_matching(v, env) -> None:  # "exact DC(D; l) for l = 1..100, one incremental pass"
    assert v.shape == (100,) and np.all(np.diff(v) >= 0)
    for l in (1, 2, 100):
        assert v[l - 1] == _dc_by_maxflow(env["g"], l)


def _check_gaussian_seeded(v, env) -> None:  # "seeded: tests only": the same seed, the same release
    again = env["gaussian_mechanism"]([10.0], l2_sensitivity=1.0, epsilon=4.0, delta=1e-9, rng=7)
    assert v.shape == (1,) and np.array_equal(v, again)


def _check_release_triple(v, env) -> None:  # lower bound, l_hat, "holds with probability >= 0.95"
    value, bound, error = v
    assert math.isfinite(value) and bound in range(1, 101)
    assert error.confidence == pytest.approx(0.95) and "0.95" in error.description


def _check_sample_with_replacement(v, env) -> None:  # every user -> exactly 100 items
    assert _counts(v) == [100, 100]
    for i in range(2):
        assert set(v.user_items(i)) <= set(env["ds"].user_items(i))


def _check_vocabulary(v, env) -> None:
    from userdp.privacy.guarantees import ApproxDP

    items, counts, guarantee, error = v
    assert len(items) == 3 and len(counts) == 3 and list(items) == sorted(items)
    assert guarantee == ApproxDP(2.0, 1e-6) and "released with probability" in error.description


def _check_aggregate(v, env) -> None:
    keys, means, eps_q, parts = v
    assert list(keys) == ["x", "y"] and len(means) == 2 and all(1 <= m <= 5 for m in means)
    assert eps_q == 0.4 and set(parts) == {"bounds", "N", "S1"}  # bounds 20%, then N and S1 half each


def _check_key_counts(v, env) -> None:
    from userdp.privacy.guarantees import PureDP

    keys, counts, bounds, guarantee = v
    assert list(keys) == ["Afghan Restaurant", "African Restaurant"] and len(counts) == 2
    assert bounds[0] in (1, 2, 4, 8, 16, 32, 64, 128, 256) and bounds[1] in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert guarantee == PureDP(1.0)


def _outputs() -> dict[str, Callable]:
    from userdp.privacy import Neighbours, PureDP
    from userdp.privacy.guarantees import ApproxDP

    return {
        # data model: users u1 = {cat, dog}, u2 = {cat} over the domain (cat, dog, emu)
        "ds.histograms()": lambda v, env: np.testing.assert_allclose(v.toarray(), [[0.5, 0.5, 0], [1, 0, 0]]),
        "ds.global_histogram()": lambda v, env: np.testing.assert_allclose(v, [2 / 3, 1 / 3, 0]),
        "ds.sample(100, replace=True, rng=1)": _check_sample_with_replacement,
        "ds.sample(5, replace=False)": lambda v, env: _counts(v) == [2, 1] or pytest.fail(str(_counts(v))),
        "ds.dedupe()": lambda v, env: _counts(v) == [2, 1] or pytest.fail(str(_counts(v))),
        # metrics
        "emd(np.eye(20)[0], np.eye(20)[1], space)": lambda v, env: v == pytest.approx(0.2) or pytest.fail(str(v)),
        "emd_assignment([0, 1, 7], [1, 0, 12], space)": lambda v, env: (
            (v[0] == pytest.approx(1 / 3) and sorted(v[1]) == [0, 1, 2]) or pytest.fail(str(v))
        ),
        # noise
        "gaussian_mechanism([10.0], l2_sensitivity=1.0, epsilon=4.0, delta=1e-9, rng=7)": _check_gaussian_seeded,
        # guarantees
        "g.at_distance(0.008)": lambda v, env: v == pytest.approx((0.2, 1e-9)) or pytest.fail(str(v)),
        "g.user_level_dp()": lambda v, env: v == ApproxDP(25.0, 1e-9, Neighbours.REPLACE_USER_SAME_SIZE)
        or pytest.fail(repr(v)),
        # three steps of group privacy: (3 eps, delta (1 + e^eps + e^(2 eps)))
        # "0.5-DP for replace one user's data"
        "s.remaining()": lambda v, env: v == PureDP(0.5, neighbours=Neighbours.REPLACE_USER) or pytest.fail(repr(v)),
        "DiscreteEMDDP(0.5, 1e-8, r=0.1).at_distance(0.25)": lambda v, env: (
            v == pytest.approx((1.5, 1e-8 * (1 + math.exp(0.5) + math.exp(1.0)))) or pytest.fail(str(v))
        ),
        # distinct count
        "dc_matching(g, 100)": _check_dc_matching,
        'rel.value, rel.extras["bound"], rel.error': _check_release_triple,
        # private vocabulary: Foursquare categories at (2, 1e-6)
        'rel.value["items"][:3], rel.value["counts"][:3], rel.guarantee, rel.error': _check_vocabulary,
        'rel.value["keys"][:2], rel.value["counts"][:2], (rel.value["l0"], rel.value["linf"]), rel.guarantee': (
            _check_key_counts
        ),
        # per-key aggregates: public keys and range, bounds by GEM
        'rel.value["keys"], rel.value["mean"], rel.params["epsilon_quantity"], rel.extras["composed_of"]': (
            _check_aggregate
        ),
    }


UNCHECKED = {
    "grid_emd(np.random.rand(256, 256), np.random.rand(256, 256))": "random input; 'about 0.5 s' is indicative",
    "laplace_mechanism([10.0, 3.0], l1_sensitivity=1.0, epsilon=0.5)": "fresh noise from the OS CSPRNG",
}


def _check_session(env) -> None:  # "ONE relation; refuses overspending", "costs 1.0 under replace"
    from userdp.errors import BudgetExceededError
    from userdp.privacy import Neighbours, PureDP

    s = env["s"]
    assert len(s.ledger) == 1 and s.ledger[0].guarantee == PureDP(0.5)
    assert s.ledger[0].cost == PureDP(1.0, neighbours=Neighbours.REPLACE_USER)
    called = []
    with pytest.raises(BudgetExceededError):
        s.run(PureDP(0.3), lambda: called.append(1))  # costs 0.6 under replace, 0.5 is left
    assert not called and len(s.ledger) == 1


def _check_person_element_graph(env) -> None:  # "deduplicated person-word bipartite graph"
    g = env["g"]
    for u in range(g.n_persons):
        assert np.all(np.diff(g.adj[g.offsets[u] : g.offsets[u + 1]]) > 0)


def _check_heatmap_block(env) -> None:
    s, rel, paper, heat = env["s"], env["rel"], env["paper"], env["heat"]
    data = env["D"].foursquare_nyc()
    inside = env["box"].contains(data.items)
    users_inside = np.unique(data.user_index()[inside]).size
    assert s.shape == (256, 256) and np.all(s >= 0)  # "sum of per-user distributions": mass 1 per user inside
    assert s.sum() == pytest.approx(users_inside) and users_inside < data.n_users
    assert rel.params["branch"] == "privtree-emd" and rel.params["epsilon_total"] == pytest.approx(0.05)  # default
    assert paper.params["w"] == 20 and paper.params["gamma"] == pytest.approx(1 / math.sqrt(2))  # "w = 20, gamma"
    assert heat.shape == (256, 256) and heat.sum() == pytest.approx(1.0)  # a filter of the normalized estimate


def _check_duckdb_block(env) -> None:
    import pyarrow.parquet as pq

    from userdp.privacy import PureDP

    users = pq.read_table("checkins.parquet").column("user").to_numpy()
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    assert starts.size > 10 * np.unique(users).size  # "users in any order": far from one run per user
    assert env["eng"].memory_limit == "2GB"
    assert np.array_equal(env["rel"].value, env["same"].value)  # the same release in memory
    # 256 cells along the box's longer side, square on the ground
    assert env["rel"].guarantee == PureDP(1.0) and env["rel"].value.shape == tuple(env["rel"].params["shape"])
    assert max(env["rel"].value.shape) == 256


def _check_file_source_block(env) -> None:  # "2 rows; columns user, lat, lon, venue", "any engine reads it alike"
    from userdp.releases import distinct

    assert env["table"].num_rows == 2 and env["table"].column_names == ["user", "lat", "lon", "venue"]
    same = distinct(env["source"], 1.0, user="user", item="venue", engine="memory", rng=1)
    assert env["rel"].guarantee == same.guarantee and env["rel"].params["method"] == same.params["method"]


def _check_shuffle_block(env) -> None:
    from userdp.privacy import ShuffleDP

    g, rel = env["g"], env["rel"]
    assert isinstance(g, ShuffleDP) and (g.epsilon, g.delta, g.parties, g.scaling) == (5.0, 1e-5, 20, 16)
    assert rel.value.shape == (24, 32) and rel.params["simulate"] == "messages"  # the default: every message
    assert env["sent"]["messages_per_user"] == g.messages_per_coordinate * g.coordinates
    assert round(env["mb"], 1) == 8.3


BLOCK_CHECKS: dict[str, Callable] = {
    "rel = shuffle_sparse_emd_agg(users,": _check_shuffle_block,
    "s = Session(PureDP(1.5, neighbours=Neighbours.REPLACE_USER))": _check_session,
    "g = person_element_graph(amazon_fashion())": _check_person_element_graph,
    "paper = dp_sparse_emd_agg(s, epsilon=1.0)": _check_heatmap_block,
    'eng = DuckDBEngine(memory_limit="2GB")': _check_duckdb_block,
    'source = FileSource("checkins.txt"': _check_file_source_block,
}


# --------------------------------------------------------------------------------------------
# Running the snippets
# --------------------------------------------------------------------------------------------


def _run(code: str, env: dict) -> dict[str, object]:
    """Execute ``code`` in ``env``; return the value of every top-level bare expression, by its source."""
    tree = ast.parse(code)
    values: dict[str, object] = {}
    env["_doc_values"] = values
    body = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            keep = ast.parse(f"_doc_values[{ast.get_source_segment(code, node.value)!r}] = None").body[0]
            keep.value = node.value
            body.append(ast.copy_location(keep, node))
        else:
            body.append(node)
    tree.body = body
    exec(compile(ast.fix_missing_locations(tree), "docs", "exec"), env)
    return values


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{page}:{i}" for i, (page, _) in enumerate(PAGE_BLOCKS)])
def test_docs_example_runs_and_returns_what_its_comments_say(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples may write files
    code = re.sub(r"pts = UserDataset\.from_file\(.*?\)\)\n", "", block, flags=re.S)
    env: dict = {}
    if "Session" in code:  # the budget example continues the data-model example (another page)
        data_block = next(b for b in BLOCKS if "UserDataset.from_table" in b)
        exec(data_block.split("pts =")[0], env)
    values = _run(code, env)
    outputs = _outputs()
    for src, value in values.items():
        if value is None:  # a call for its effect (e.g. writing a file): its block's check covers it
            continue
        assert src in outputs or src in UNCHECKED, f"the docs show {src!r} with no check here: add one to _outputs"
        if src in outputs:
            outputs[src](value, env)
    for marker, check in BLOCK_CHECKS.items():
        if marker in block:
            check(env)


def test_every_check_meets_its_snippet():
    """The checks above stay attached to the docs: each one's expression or marker occurs in one snippet."""
    for key in [*_outputs(), *UNCHECKED, *BLOCK_CHECKS]:
        assert sum(key in b for b in BLOCKS) == 1, key


def test_the_quick_start_needs_nothing_but_the_plain_install():
    """The quick start follows ``pip install -e .`` (no extras): its Python imports only userdp's own
    dependencies (not pandas, which only the test, docs and Spark extras bring)."""
    text = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python[^\n]*\n(.*?)^```", text, re.S | re.M)
    core = {"numpy", "pyarrow", "userdp", "pathlib", "base64", "json", "math"}
    imported = set()
    for code in blocks:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    assert blocks and imported <= core, sorted(imported - core)
