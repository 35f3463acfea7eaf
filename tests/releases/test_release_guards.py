"""Guards of the release layer found by the review of the refactor: each release takes its public parameters
from the caller and its aggregates from one consistent read of the data."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from userdp import releases
from userdp.data import FiniteDomain, UserDataset
from userdp.engines import ChunkedEngine
from userdp.errors import DataError
from userdp.metrics import ClusteredMetric

SPACE = ClusteredMetric(2, 2, 0.3)
DOMAIN = FiniteDomain(np.array(["a", "b", "c", "d"], dtype=object))


def test_a_query_on_item_codes_needs_the_public_domain():
    """Codes read off the data shift when another user brings a new item: user 1's f-value would then depend
    on user 4's data. Without a public domain the release is refused; with one, it goes ahead."""
    table = pa.table({"user": [1, 2, 3], "item": ["b", "c", "d"]})
    f = np.array([0.0, 0.1, 0.2, 0.3]).__getitem__
    with pytest.raises(DataError, match="public item domain"):
        releases.linear(table, f, 1.0, 5.0, item="item", rng=1)
    with pytest.raises(DataError, match="public item domain"):
        releases.linear(table, f, 1.0, 5.0, item="item", domain=FiniteDomain.from_data(["b", "c", "d"]), rng=1)
    rel = releases.linear(table, f, 1.0, 5.0, item="item", domain=DOMAIN, rng=1)
    assert rel.extras["per_user"].shape == (3, 1)


class _Rewriting(ChunkedEngine):
    """The chunked engine over a file that is rewritten right after the sizes are counted (DuckDB reads a
    file again for every aggregate): the sizes see the first table, every later pass the second."""

    def __init__(self, path, first, second):
        super().__init__(1000)
        self.path, self.second = path, second
        pq.write_table(first, path)

    def user_sizes(self, data):
        sizes = super().user_sizes(data)
        pq.write_table(self.second, self.path)
        return sizes


def _table(n, per_user):
    return pa.table({"user": np.repeat(np.arange(n), per_user), "item": np.resize(["a", "b", "c"], n * per_user)})


def test_a_source_that_changes_between_passes_is_refused(tmp_path):
    """A file that gives 2 items per user when the sizes are counted and 40 when the items are randomized must
    not be released with m = 2's guarantee."""
    eng = _Rewriting(tmp_path / "t.parquet", _table(50, 2), _table(50, 40))
    with pytest.raises(DataError, match="public number of items"):
        releases.itemwise(eng.path, SPACE, DOMAIN, 4.0, model="central", delta=1e-6, engine=eng, rng=1)


def test_a_stream_is_read_once():
    """A stream (a callable giving Arrow tables) is read once, into DuckDB: the sizes and the randomized items
    come from the same rows, however the stream would change on a second call."""
    calls = []

    def stream():
        calls.append(1)
        yield _table(50, 2) if len(calls) == 1 else _table(60, 40)

    rel = releases.itemwise(stream, SPACE, DOMAIN, 4.0, model="central", delta=1e-6, engine=ChunkedEngine(1000), rng=1)
    assert len(calls) == 1 and rel.params["m"] == 2 and rel.extras["counts"].sum() == 100


def test_a_source_that_gains_persons_between_passes_is_refused(tmp_path):
    """Every person holds m = 2 items in both passes, but 50 persons when the sizes (and the public n of the
    central model) are read and 60 when the items are randomized: the counts then hold more persons than the
    guarantee was computed for, and the release refuses."""
    eng = _Rewriting(tmp_path / "t.parquet", _table(50, 2), _table(60, 2))
    with pytest.raises(DataError, match="changed while it was read"):
        releases.itemwise(eng.path, SPACE, DOMAIN, 4.0, model="central", delta=1e-6, engine=eng, rng=1)


def test_a_dataset_with_another_domain_is_refused():
    ds = UserDataset.from_lists([["a", "b"], ["c"]], domain=FiniteDomain(np.array(["a", "b", "c"], dtype=object)))
    with pytest.raises(DataError, match="not the declared one"):
        releases.histogram(ds, DOMAIN, 1.0, rng=1)  # the release would be labelled with DOMAIN's 4 items
    assert releases.histogram(ds, ds.domain, 1.0, rng=1).value.shape == (3,)


def test_a_source_whose_persons_grow_between_passes_is_refused(tmp_path):
    """The same total in both passes, so only the size check of the randomizing pass can see it: 60 persons of
    2 items when the sizes are counted (m = 2), 40 persons of 3 items when the items are randomized. Each
    person would contribute 3 items under m = 2's guarantee; the release must refuse (it checks that every
    person holds exactly m, not only at most or at least m)."""
    eng = _Rewriting(tmp_path / "t.parquet", _table(60, 2), _table(40, 3))
    with pytest.raises(DataError, match="public number of items"):
        releases.itemwise(eng.path, SPACE, DOMAIN, 4.0, model="central", delta=1e-6, engine=eng, rng=1)
