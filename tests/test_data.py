"""Tests of the user data model (userdp.data)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from userdp.data import BoxDomain, FiniteDomain, UserDataset, read_table, to_arrow
from userdp.errors import DataError

RECORDS = {"user": ["u2", "u1", "u2", "u3", "u1", "u1"], "word": ["b", "a", "a", "c", "a", "d"]}


def _check_basic(ds: UserDataset) -> None:
    assert ds.n_users == 3 and ds.n_items == 6
    assert list(ds.user_ids) == ["u1", "u2", "u3"]
    assert list(ds.counts()) == [3, 2, 1]
    labels = ds.domain.labels
    assert sorted(labels[ds.user_items(0)]) == ["a", "a", "d"]


@pytest.mark.parametrize("kind", ["dict", "pandas", "polars", "arrow"])
def test_from_table_all_frontends(kind):
    table = {
        "dict": RECORDS,
        "pandas": pd.DataFrame(RECORDS),
        "polars": pl.DataFrame(RECORDS),
        "arrow": pa.table(RECORDS),
    }[kind]
    ds = UserDataset.from_table(table, user="user", item="word")
    _check_basic(ds)
    assert not ds.domain.public


@pytest.mark.parametrize("fmt", ["csv", "csv.gz", "parquet", "jsonl", "jsonl.gz"])
def test_from_file_formats(tmp_path, fmt):
    path = tmp_path / f"data.{fmt}"
    rows = [dict(user=u, word=w) for u, w in zip(RECORDS["user"], RECORDS["word"], strict=True)]
    if fmt.startswith("csv"):
        text = "user,word\n" + "".join(f"{r['user']},{r['word']}\n" for r in rows)
    elif fmt.startswith("jsonl"):
        text = "".join(json.dumps(r) + "\n" for r in rows)
    if fmt == "parquet":
        pq.write_table(pa.table(RECORDS), path)
    elif fmt.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    _check_basic(UserDataset.from_file(path, user="user", item="word"))


def test_read_table_errors(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_table(tmp_path / "missing.csv")
    (tmp_path / "x.weird").write_text("a")
    with pytest.raises(DataError, match="format"):
        read_table(tmp_path / "x.weird")


def test_public_domain_and_unknown_items():
    dom = FiniteDomain(["a", "b", "c", "d"])
    ds = UserDataset.from_table(RECORDS, user="user", item="word", domain=dom)
    assert ds.domain.public and ds.domain_size == 4
    ds.require_public_domain()
    inferred = UserDataset.from_table(RECORDS, user="user", item="word")
    with pytest.raises(DataError, match="read off the data"):
        inferred.require_public_domain()


def test_items_outside_the_declared_domain_are_dropped_person_by_person():
    """No refusal: an item outside the public domain is dropped where its person's items are coded (a refusal
    would depend on one person's data). A person left with none is no person of the dataset, from records and
    from lists alike (as on DuckDB and Spark, where such a person has no row left)."""
    dom = FiniteDomain(["a", "b"])
    assert dom.encode(np.array(["b", "zz", "a", "7"], dtype=object)).tolist() == [1, -1, 0, -1]
    ds = UserDataset.from_arrays([1, 1, 2, 3, 3], ["a", "zz", "zz", "b", "b"], domain=dom)
    assert ds.user_ids.tolist() == [1, 3] and ds.offsets.tolist() == [0, 1, 3] and ds.items.tolist() == [0, 1, 1]
    lists = UserDataset.from_lists([["a", "x"], ["y"], ["b", "a"], []], domain=dom)  # (the last was empty)
    assert lists.offsets.tolist() == [0, 1, 3, 3] and lists.items.tolist() == [0, 1, 0]
    assert lists.user_ids.tolist() == [0, 2, 3]  # the persons keep their positions as keys
    table = UserDataset.from_table({"user": [5, 5, 6], "word": ["b", "q", "q"]}, "user", "word", domain=dom)
    assert table.user_ids.tolist() == [5] and table.items.tolist() == [1]


def test_domain_validation():
    with pytest.raises(DataError):
        FiniteDomain(["a", "a"])
    with pytest.raises(DataError):
        FiniteDomain([])
    assert len(FiniteDomain([], public=False)) == 0  # read off data that held no items
    with pytest.raises(DataError):
        FiniteDomain(np.array([1.5, 2.5]))


def test_bad_tables():
    with pytest.raises(DataError, match=r"not found.*columns"):
        UserDataset.from_table(RECORDS, user="person", item="word")
    with pytest.raises(DataError, match="missing"):
        UserDataset.from_table(pa.table({"user": ["a", None], "word": ["x", "y"]}), user="user", item="word")
    with pytest.raises(DataError, match="strings or integers"):
        UserDataset.from_table({"user": [1, 2], "word": [0.5, 1.5]}, user="user", item="word")
    with pytest.raises(DataError, match="strings or integers"):
        UserDataset.from_table({"user": [1, 2], "word": [True, False]}, user="user", item="word")
    with pytest.raises(DataError, match="exactly one"):
        UserDataset.from_table(RECORDS, user="user")
    with pytest.raises(DataError, match="unsupported table"):
        UserDataset.from_table([1, 2, 3], user="user", item="word")


def test_points_and_box():
    box = BoxDomain.latlon(40.0, 41.0, -75.0, -73.0)
    t = {"user": [1, 1, 2], "lat": [40.5, 40.7, 40.9], "lon": [-74.0, -73.5, -74.9]}
    ds = UserDataset.from_table(t, user="user", items=["lat", "lon"], domain=box)
    assert ds.is_points and ds.dim == 2 and ds.require_box() is box
    bad = dict(t, lat=[40.5, 42.0, 40.9])
    with pytest.raises(DataError, match="outside the declared box"):
        UserDataset.from_table(bad, user="user", items=["lat", "lon"], domain=box)
    with pytest.raises(DataError, match="NaN or inf"):
        UserDataset.from_table(dict(t, lat=[40.5, np.nan, 40.9]), user="user", items=["lat", "lon"])
    with pytest.raises(DataError, match="NaN or inf"):
        UserDataset.from_table(dict(t, lon=[np.inf, -74.0, -74.0]), user="user", items=["lat", "lon"])
    with pytest.raises(DataError, match="numeric"):
        UserDataset.from_table(dict(t, lat=["a", "b", "c"]), user="user", items=["lat", "lon"])
    no_box = UserDataset.from_table(t, user="user", items=["lat", "lon"])
    with pytest.raises(DataError, match="BoxDomain"):
        no_box.require_box()
    with pytest.raises(DataError):
        BoxDomain((0.0, 1.0), (0.0, 2.0))
    with pytest.raises(DataError):
        BoxDomain.latlon(40, 100, 0, 1)


def test_histograms_and_global():
    dom = FiniteDomain(["a", "b", "c", "d"])
    ds = UserDataset.from_table(RECORDS, user="user", item="word", domain=dom)
    H = ds.histograms().toarray()
    assert np.allclose(H.sum(axis=1), 1)
    assert np.allclose(H[0], [2 / 3, 0, 0, 1 / 3])
    assert np.allclose(ds.histograms(normalize=False).toarray().sum(), 6)
    assert np.allclose(ds.global_histogram(), np.array([3, 1, 1, 1]) / 6)
    assert np.allclose(ds.global_histogram(normalize=False), [3, 1, 1, 1])


def test_empty_users():
    """A user with no items contributes a zero histogram row; the d_EM releases' refusal names no count."""
    ds = UserDataset.from_lists([["a"], [], ["b", "a"], [], []], domain=FiniteDomain(["a", "b"]))
    assert list(ds.counts()) == [1, 0, 2, 0, 0]
    with pytest.raises(DataError, match="every user to hold at least one item") as info:
        ds.require_items()
    assert not any(ch.isdigit() for ch in str(info.value))  # never "3 user(s) have no items"
    H = ds.histograms().toarray()
    assert np.allclose(H, [[1, 0], [0, 0], [0.5, 0.5], [0, 0], [0, 0]])
    kept = ds.nonempty_users()
    assert list(kept.counts()) == [1, 2] and list(kept.user_ids) == [0, 2]
    assert np.allclose(kept.histograms().sum(axis=0), ds.histograms().sum(axis=0))


@pytest.mark.parametrize(
    "build",
    [
        lambda: UserDataset.from_lists([], domain=FiniteDomain(["a"])),
        lambda: UserDataset.from_lists([], domain=BoxDomain((0.0, 0.0), (1.0, 1.0))),
        lambda: UserDataset.from_table({"user": [], "word": []}, user="user", item="word"),
        lambda: UserDataset.from_table(pd.DataFrame({"user": [], "word": []}), user="user", item="word"),
        lambda: UserDataset.from_table({"u": [], "lat": [], "lon": []}, user="u", items=["lat", "lon"]),
        lambda: UserDataset.from_arrays([], np.empty(0, dtype=str)),
    ],
)
def test_no_rows_is_a_dataset_of_no_users(build):
    """No records load as a dataset of no users (it contributes nothing to a release), never an error: under
    add/remove-one-user neighbours a refusal would reveal that the data are empty."""
    ds = build()
    assert ds.n_users == 0 and ds.n_items == 0 and ds.counts().size == 0
    with pytest.raises(DataError, match="at least one user"):
        ds.require_items()  # releases that keep the number of users public may refuse it
    with pytest.raises(DataError, match="at least one user"):
        ds.require_equal_sizes()


def test_header_only_files_load(tmp_path):
    (tmp_path / "ids.csv").write_text("user,word\n")
    ids = UserDataset.from_file(tmp_path / "ids.csv", user="user", item="word", domain=FiniteDomain(["a"]))
    assert ids.n_users == 0 and ids.domain.public
    (tmp_path / "pts.csv").write_text("user,lat,lon\n")
    pts = UserDataset.from_file(tmp_path / "pts.csv", user="user", items=["lat", "lon"])
    assert pts.n_users == 0 and pts.is_points and pts.dim == 2


def test_unreadable_file_is_a_data_error_that_quotes_no_row(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("user,word\nalice,secret-word,extra\n")
    with pytest.raises(DataError, match="could not read bad.csv") as info:
        read_table(path)
    assert "alice" not in str(info.value) and "secret" not in str(info.value)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match=r"empty.csv is empty \(not even a header line\)"):  # not "ArrowInvalid"
        read_table(tmp_path / "empty.csv")


def test_data_error_messages_name_no_count():
    """Messages about the data never contain a count read off it (here: 3 of everything)."""
    dom = FiniteDomain(["a", "b"])
    cases = [
        lambda: UserDataset.from_lists([[(2.0, 2.0)], [(3.0, 3.0)], [(4.0, 4.0)]], domain=BoxDomain((0, 0), (1, 1))),
        lambda: UserDataset.from_table(pa.table({"user": ["a", None, None, None], "word": ["x"] * 4}), "user", "word"),
        lambda: UserDataset(np.array([0, 3]), np.array([0, 1, 0, 1]), domain=dom),
        lambda: UserDataset(np.array([0, 1, 2, 3]), np.array([0, 1, 0]), np.array([1, 2]), dom),
        lambda: UserDataset.from_arrays(["u"] * 3, ["a"] * 4, domain=dom),
        lambda: UserDataset.from_table({"user": [1, 2, 3], "word": ["a", "b"]}, "user", "word"),
        lambda: UserDataset.from_lists([[(0.1, 0.2)], [("3 secret", 0.4)]]),  # a value, not only a count
    ]
    for build in cases:
        with pytest.raises(DataError) as info:
            build()
        msg = str(info.value)
        assert "3" not in msg and "4" not in msg and "2" not in msg and "secret" not in msg, msg


def test_offsets_validation():
    with pytest.raises(DataError):
        UserDataset(np.array([0, 2, 1]), np.array([0, 1]))
    with pytest.raises(DataError):
        UserDataset(np.array([0, 3]), np.array([0, 1]))
    with pytest.raises(DataError):
        UserDataset(np.array([0, 2]), np.array([0, 5]), domain=FiniteDomain(["a", "b"]))


def test_sampling_with_replacement(rng):
    ds = UserDataset.from_lists([[0, 1, 2], [3], [4, 5]], domain=FiniteDomain(list(range(6))))
    s = ds.sample(2000, replace=True, rng=rng)
    assert list(s.counts()) == [2000, 2000, 2000]
    assert set(s.user_items(0)) == {0, 1, 2} and set(s.user_items(1)) == {3}
    from scipy import stats

    assert stats.chisquare(np.bincount(s.user_items(0), minlength=3)[:3]).pvalue > 1e-3


def test_sampling_without_replacement(rng):
    ds = UserDataset.from_lists([[0, 1, 2, 3], [4], [5, 6]], domain=FiniteDomain(list(range(7))))
    s = ds.sample(2, replace=False, rng=rng)
    assert list(s.counts()) == [2, 1, 2]
    assert len(set(s.user_items(0))) == 2 and set(s.user_items(0)) <= {0, 1, 2, 3}
    # each 2-subset of user 0 equally likely
    from collections import Counter

    from scipy import stats

    c = Counter(tuple(sorted(ds.sample(2, replace=False, rng=rng).user_items(0))) for _ in range(3000))
    assert len(c) == 6 and stats.chisquare(list(c.values())).pvalue > 1e-3
    with pytest.raises(DataError):
        ds.sample(0)


def test_dedupe_and_subset_and_roundtrip():
    ds = UserDataset.from_table(RECORDS, user="user", item="word")
    d = ds.dedupe()
    assert list(d.counts()) == [2, 2, 1]
    sub = ds.subset_users(np.array([2, 0]))
    assert list(sub.user_ids) == ["u3", "u1"] and list(sub.counts()) == [1, 3]
    back = ds.to_arrow()
    assert back.num_rows == 6 and set(back.column_names) == {"user", "item"}
    pts = UserDataset.from_lists([[(0.0, 1.0), (0.0, 1.0)], [(2.0, 3.0)]])
    assert list(pts.dedupe().counts()) == [1, 1]


def test_to_arrow_unsupported():
    with pytest.raises(DataError):
        to_arrow(42)


def test_unique_inverse_equals_numpys_on_text_and_numbers():
    """The Arrow hash path of :func:`userdp.data.unique_inverse` (issue 17: IMDB's words 58 s -> 14 s) returns
    exactly ``np.unique(..., return_inverse=True)``: the same sorted labels (code-point order, unicode and ""
    included) and the same codes; numbers and mixed types take NumPy's own path."""
    from userdp.data import unique_inverse

    rng = np.random.default_rng(3)
    alphabet = ["a", "b", "Z", "é", "ß", "日", "", "0", "a b", "\u00e9"]
    words = ["".join(rng.choice(alphabet, size=rng.integers(0, 4))) for _ in range(5000)]
    for arr in (np.array(words, dtype=object), np.array(words), rng.integers(-5, 50, 3000), np.array(words[:10])):
        want_u, want_i = np.unique(arr, return_inverse=True)
        got_u, got_i = unique_inverse(arr)
        assert got_u.dtype == want_u.dtype and list(got_u) == list(want_u)
        assert np.array_equal(got_i, want_i.reshape(-1))
    mixed = np.array(["a", 1, "b"] * 500, dtype=object)  # Arrow cannot take it as one string column
    with pytest.raises(TypeError):
        np.unique(mixed)
    with pytest.raises(TypeError):
        unique_inverse(mixed)


def test_unique_inverse_of_integers_in_a_narrow_range_equals_numpys():
    """The table path for integers spanning at most twice their count returns ``np.unique``'s labels (same
    dtype) and codes, at the ends of every integer type too (no overflow while shifting)."""
    from userdp.data import unique_inverse

    rng = np.random.default_rng(5)
    cases = [rng.integers(0, 20, 5000), rng.integers(-3000, 3000, 5000), rng.integers(0, 10**6, 5000)]
    for dt in (np.int8, np.uint8, np.int16, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dt)
        off = rng.integers(0, 256, 3000).astype(object)
        cases.append(np.array(int(info.min) + off, dtype=dt))
        cases.append(np.array(int(info.max) - off, dtype=dt))
    cases.append(np.tile(np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max]), 1000))  # wide: NumPy's path
    cases.append(rng.integers(0, 40, (30, 100)))
    for arr in cases:
        want_u, want_i = np.unique(arr, return_inverse=True)
        got_u, got_i = unique_inverse(arr)
        assert got_u.dtype == want_u.dtype and np.array_equal(got_u, want_u)
        assert got_i.dtype == np.int64 and np.array_equal(got_i, want_i.reshape(-1))


def test_dedupe_equals_the_unique_of_user_item_pairs():
    """dedupe sorts the (user, item) keys and keeps the first of each run (issue 17): the same sets, sorted
    within each user, as np.unique of the keys; a dataset of no items stays empty."""
    rng = np.random.default_rng(4)
    users = rng.integers(0, 50, 4000)
    ds = UserDataset.from_arrays(users, rng.integers(0, 30, 4000).astype(str))
    d = ds.dedupe()
    key = np.unique(ds.user_index() * np.int64(ds.domain_size) + ds.items)
    assert np.array_equal(d.items, key % ds.domain_size)
    assert np.array_equal(np.repeat(np.arange(d.n_users), d.counts()), key // ds.domain_size)
    empty = UserDataset.from_arrays(np.array([], dtype=np.int64), np.array([], dtype=object), FiniteDomain(["a"]))
    assert empty.dedupe().n_items == 0


def test_person_ids_never_depend_on_another_person_s_row(tmp_path):
    """Review 20: a column typed by all its rows lets one added person merge two others. A float person id
    (one JSON row holding 1.5 turns 9007199254740993 and ...992 into one double) is refused on every input
    path; a CSV read by UserDataset.from_file keeps 007 and 7 apart whether or not someone's id is abc; a
    DataFrame mixing types is refused without quoting anyone's key."""
    import pandas as pd

    from userdp.errors import DataError

    lines = '{"user": 9007199254740993, "item": "a"}\n{"user": 9007199254740992, "item": "b"}\n'
    (tmp_path / "d.jsonl").write_text(lines)
    (tmp_path / "d1.jsonl").write_text(lines + '{"user": 1.5, "item": "c"}\n')
    assert UserDataset.from_file(tmp_path / "d.jsonl", user="user", item="item").n_users == 2
    with pytest.raises(DataError, match="floating-point"):
        UserDataset.from_file(tmp_path / "d1.jsonl", user="user", item="item")
    with pytest.raises(DataError, match="floating-point"):
        UserDataset.from_arrays([9007199254740993, 9007199254740992, 1.5], ["a", "b", "c"])
    for extra in ("", "abc,c\n"):
        (tmp_path / "c.csv").write_text("user,item\n007,a\n7,b\n" + extra)
        assert UserDataset.from_file(tmp_path / "c.csv", user="user", item="item").n_users == 2 + bool(extra)
    frame = pd.DataFrame({"user": [7, 8, "alice.smith@example.com"], "item": ["a", "b", "c"]})
    with pytest.raises(DataError) as err:
        UserDataset.from_table(frame, user="user", item="item")
    assert "alice" not in str(err.value)


def test_person_ids_given_as_python_objects_are_typed_by_arrow_not_numpy():
    """Review 21: NumPy turns [True, 1] into [1, 1] (one added person merging two) and drops trailing NULs of
    strings; a float item among a finite domain's ids turned every item into a code. All refused or kept
    apart, with messages that quote no key."""
    from userdp.errors import DataError

    assert UserDataset.from_arrays(["a", "a\x00"], ["x", "y"]).n_users == 2
    assert UserDataset.from_arrays([1, 2, 2], ["x", "y", "z"]).n_users == 2
    for users in ([True, 1], ["a", 1], [1.5, 2], [None, "a"], [2**70, 1]):
        with pytest.raises(DataError) as err:
            UserDataset.from_arrays(users, ["x", "y"])
        assert "70" not in str(err.value) and "convert" not in str(err.value)
    with pytest.raises(DataError, match="floating-point"):
        UserDataset.from_arrays([1, 2, 3], [1, 0, 0.5], domain=FiniteDomain(np.array([0, 1])))
