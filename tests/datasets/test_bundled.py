"""The bundled real data and its loaders (documented counts)."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

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


def test_the_package_bundles_no_salicon_data():
    """SALICON is CC BY-NC: experiments read it from the shared folder; nothing of it ships in the package."""
    src = Path(D.__file__).resolve().parents[1]
    names = [p.name.lower() for p in src.rglob("*") if p.is_file()]
    assert not [n for n in names if "salicon" in n or "fixation" in n]
    assert "salicon" not in " ".join(D.ATTRIBUTION).lower()


@pytest.mark.skipif(not (SHARED / "salicon_fixations_examples.json.xz").exists(), reason="shared SALICON file absent")
def test_salicon_experiment_reads_the_documented_sample():
    """experiments/heatmaps_salicon.py: 10 images, 55-67 workers each (610 records), every fixation on the
    320 x 240 grid of appendix E.2, each worker's points one unit of mass."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
    import heatmaps_salicon as S

    images = S.load_images(SHARED / "salicon_fixations_examples.json.xz")
    counts = [len(im["workers"]) for im in images]
    assert len(images) == 10 and sum(counts) == 610 and min(counts) == 55 and max(counts) == 67
    for im in images:
        for cells in im["workers"].values():
            assert cells.min() >= 0 and (cells[:, 0] < S.ROWS).all() and (cells[:, 1] < S.COLS).all()
    im = images[0]
    s = S.image_sum(im["workers"], sorted(im["workers"]))
    assert s.shape == (240, 320) and s.sum() == pytest.approx(len(im["workers"]))
    # a pixel's cell: rows 1-2 -> 0, 479-480 -> 239 (the 480 x 640 image halved)
    with lzma.open(SHARED / "salicon_fixations_examples.json.xz", "rt") as f:
        raw = json.load(f)
    fx = np.array([x for a in raw["annotations"] for x in a["fixations"]])
    assert fx.min() == 1 and fx[:, 0].max() == 480 and fx[:, 1].max() == 640
