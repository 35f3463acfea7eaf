"""The bundled real data and its loaders (documented counts)."""

from __future__ import annotations

import json
import lzma

import numpy as np
import pytest

from tests.conftest import SHARED
from userdp import datasets as D
from userdp.errors import DataError


def test_foursquare_counts_and_box():
    ds = D.foursquare_nyc()
    assert ds.n_users == 1083 and ds.n_items == 227_428
    assert ds.is_points and ds.domain is D.NYC_BOX
    c = ds.counts()
    assert c.min() == 100 and c.max() == 2697 and np.median(c) == 153
    cats = D.foursquare_nyc("category")
    assert len(cats.domain) == 251 and not cats.domain.public
    assert len(D.foursquare_nyc("venue").domain) == 38_333
    with pytest.raises(DataError):
        D.foursquare_nyc("time")


def test_amazon_fashion_counts():
    ds = D.amazon_fashion()
    assert ds.n_users == 404
    assert len(ds.domain) == 1492
    assert ds.n_items == 8808  # person-word pairs (sets)
    assert ds.n_items == ds.dedupe().n_items
    assert D.amazon_fashion(dedupe=False).n_items > ds.n_items


def test_tokenizer():
    assert D.tokenize("Great FIT, isn't it? 10/10") == ["great", "fit", "isn", "t", "it", "10", "10"]


def test_imdb_loader_on_small_file(tmp_path):
    path = tmp_path / "imdb.jsonl.xz"
    recs = [
        {"split": "train", "label": "pos", "id": i, "rating": 9, "movie": None, "text": t}
        for i, t in enumerate(["A good film", "a BAD film, bad"])
    ]
    with lzma.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    ds = D.imdb_reviews(path)
    assert ds.n_users == 2 and list(ds.counts()) == [3, 3]
    with pytest.raises(DataError):
        D.imdb_reviews(tmp_path / "missing.jsonl")


@pytest.mark.skipif(not (SHARED / "imdb_reviews.jsonl.xz").exists(), reason="shared IMDB file not present")
def test_imdb_real_file_prefix():
    ds = D.imdb_reviews(SHARED / "imdb_reviews.jsonl.xz", limit=2000)
    assert ds.n_users == 2000 and ds.n_items > 100_000


def test_attribution_present():
    assert set(D.ATTRIBUTION) == {"foursquare_nyc", "amazon_fashion", "imdb"}
