"""Bundled real data and loaders.

Bundled with the package (``userdp/datasets/data``), unchanged copies of public research data:

* **Foursquare NYC check-ins** -- Dingqi Yang, Daqing Zhang, Vincent W. Zheng, Zhiyong Yu, "Modeling
  User Activity Preference by Leveraging User Spatial Temporal Characteristics in LBSNs", IEEE Trans.
  on Systems, Man, and Cybernetics: Systems, 2015. 227,428 check-ins of 1,083 users, April 2012 to
  February 2013.
* **Amazon Fashion 5-core reviews** -- Jianmo Ni, Jiacheng Li, Julian McAuley, "Justifying
  Recommendations using Distantly-Labeled Reviews and Fine-Grained Aspects", EMNLP 2019. 3,176 reviews;
  404 reviewers wrote review text.

Not bundled (17.6 MB): the 50,000 IMDB reviews of Andrew L. Maas et al., "Learning Word Vectors for
Sentiment Analysis", ACL 2011; :func:`imdb_reviews` loads the JSON-lines file from a path.

Nothing is downloaded at run time.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..data import BoxDomain, FiniteDomain, UserDataset, read_table, tokenize
from ..errors import DataError
from ..text import tokenize_codes

__all__ = [
    "ATTRIBUTION",
    "NYC_BOX",
    "foursquare_nyc",
    "foursquare_nyc_table",
    "amazon_fashion",
    "imdb_reviews",
    "tokenize",
    "words_dataset",
]

ATTRIBUTION = {
    "foursquare_nyc": (
        "Foursquare NYC check-ins: D. Yang, D. Zhang, V. W. Zheng, Z. Yu, 'Modeling User Activity Preference by "
        "Leveraging User Spatial Temporal Characteristics in LBSNs', IEEE Trans. SMC: Systems, 2015."
    ),
    "amazon_fashion": (
        "Amazon Fashion 5-core reviews: J. Ni, J. Li, J. McAuley, 'Justifying Recommendations using "
        "Distantly-Labeled Reviews and Fine-Grained Aspects', EMNLP 2019."
    ),
    "imdb": ("IMDB reviews: A. L. Maas et al., 'Learning Word Vectors for Sentiment Analysis', ACL 2011."),
}

#: A public bounding box for New York City (round numbers chosen from a map, not from the data):
#: latitude 40.5 to 41.0, longitude -74.3 to -73.65.
NYC_BOX = BoxDomain.latlon(40.5, 41.0, -74.3, -73.65)


def _data_path(name: str) -> Path:
    return Path(str(resources.files(__package__).joinpath("data", name)))


def foursquare_nyc_table() -> pa.Table:
    """The raw check-in table: ``user, venue_id, category_id, category_name, lat, lon, utc_offset_min,
    utc_date_time``."""
    return read_table(_data_path("foursquare_nyc_checkins.csv.xz"))


def foursquare_nyc(items: str = "points", box: BoxDomain = NYC_BOX) -> UserDataset:
    """Foursquare NYC check-ins as a :class:`UserDataset`.

    Parameters
    ----------
    items:
        ``"points"`` -- (lat, lon) points inside the public ``box``;
        ``"venue"`` / ``"category"`` -- ids (venue ids or category names). Their domain is the set seen
        in the file (``public=False``): a release that must not reveal the domain needs the caller's
        own public list.
    """
    t = foursquare_nyc_table()
    if items == "points":
        return UserDataset.from_table(t, user="user", items=["lat", "lon"], domain=box)
    col = {"venue": "venue_id", "category": "category_name"}.get(items)
    if col is None:
        raise DataError(f"items must be 'points', 'venue' or 'category', got {items!r}")
    return UserDataset.from_table(t, user="user", item=col)


def words_dataset(users: Any, texts: Any, dedupe: bool = True) -> UserDataset:
    """One user per entry of ``users`` (repeats merge), items = tokens of their ``texts`` (a list of strings or
    an Arrow string column)
    (:func:`userdp.text.tokenize_codes`: :func:`tokenize` on every text, in one compiled pass).

    With ``dedupe`` each user holds each word once (the person-word sets of Knop & Steinke); without, a
    user's words stay in text order. A user whose texts hold no word is kept, with no items. The vocabulary
    is read off the data (sorted), so the domain is marked ``public=False``.
    """
    if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pa.array(texts, type=pa.large_string())
    counts, codes, vocabulary = tokenize_codes(texts)
    keys = np.asarray(users)
    if keys.size == 0:
        keys = np.empty(0, dtype=np.int64)
    ds = UserDataset.from_rows(keys, counts, codes, FiniteDomain(vocabulary, public=False), keep_empty=True)
    return ds.dedupe() if dedupe else ds


def amazon_fashion(dedupe: bool = True) -> UserDataset:
    """Amazon Fashion 5-core: each reviewer is a person, items are the words of their reviews.

    404 reviewers have review text; 1,492 distinct words and 8,808 person-word pairs with the
    lower-cased ``\\w+`` tokenizer (the paper reports 1,450 and 8,533 with its own tokenizer).
    """
    users, texts = [], []
    with gzip.open(_data_path("amazon_fashion_5.json.gz"), "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            text = rec.get("reviewText")
            if text:
                users.append(rec["reviewerID"])
                texts.append(text)
    return words_dataset(users, texts, dedupe=dedupe)


def imdb_reviews(path: str | Path, dedupe: bool = True, limit: int | None = None) -> UserDataset:
    """The IMDB reviews (JSON lines, ``.xz`` allowed): each review is one person, as in Knop & Steinke.

    50,000 persons; 7,028,655 person-word pairs and 101,944 words with the lower-cased ``\\w+`` tokenizer.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"IMDB reviews file not found: {path}")
    table = read_table(path, columns=None, format="jsonl")
    if "text" not in table.column_names or table.num_rows == 0:
        raise DataError(f"no reviews in {path}")
    texts = table.column("text")
    if limit is not None:
        texts = texts.slice(0, limit)
    if texts.null_count:
        raise DataError(f"some reviews in {path} have no text")
    return words_dataset(np.arange(len(texts)), texts, dedupe=dedupe)
