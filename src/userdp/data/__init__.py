"""The user data model: n users, each a multiset of items.

A :class:`UserDataset` stores all users' items in compressed sparse row (CSR) form: ``offsets``
(length ``n + 1``) and one ``items`` array, so that user ``i`` holds
``items[offsets[i]:offsets[i + 1]]``. Items are either

* **ids in a finite domain** (words, venues, categories): ``items`` is an ``int64`` array of codes
  into a :class:`FiniteDomain`, or
* **points** (latitude/longitude, embedding vectors): ``items`` is a ``float64`` array of shape
  ``(N, dim)``, optionally inside a :class:`BoxDomain`.

Domains and boxes are *public* parameters: userdp never reads them off the data for a release. A
domain built with :meth:`FiniteDomain.from_data` is marked ``public=False``, and every mechanism whose
output reveals the domain refuses such a dataset.

Notation follows Imola et al. (CCS 2024), section 2.2: ``K_i`` is user ``i``'s multiset, ``K~_i`` its
normalized histogram and ``K_G`` the global dataset (the union of all ``K_i``).

The package's modules: :mod:`userdp.data.domains` (the public domains and the encoding of labels to codes) and
:mod:`userdp.data.io` (reading tables and files, checking their columns) import nothing of each other;
:mod:`userdp.data.dataset` (:class:`UserDataset` and the grouping of records by user) imports both. Every name
is importable from ``userdp.data`` itself.
"""

# (the names importable from userdp.data before it became a package are all importable from it still)
from ..errors import DataError as DataError
from ..noise import RngLike as RngLike
from ..noise import resolve_rng as resolve_rng
from ..text import encode_strings as encode_strings
from ..text import tokenize
from .dataset import UserDataset, group_by_user
from .dataset import _copy_runs as _copy_runs
from .dataset import _dedupe_runs as _dedupe_runs
from .dataset import _user_keys as _user_keys
from .domains import OUTSIDE_DOMAIN, BoxDomain, FiniteDomain
from .domains import sorted_text as sorted_text
from .domains import unique_inverse as unique_inverse
from .io import READ_ERRORS as READ_ERRORS
from .io import FileLayout as FileLayout
from .io import FileSource, file_layout, read_table, table_of, to_arrow
from .io import _column_numpy as _column_numpy
from .io import _open as _open
from .io import _require_columns as _require_columns
from .io import check_columns as check_columns

__all__ = [
    "FiniteDomain",
    "BoxDomain",
    "OUTSIDE_DOMAIN",
    "UserDataset",
    "tokenize",
    "unique_inverse",
    "sorted_text",
    "group_by_user",
    "to_arrow",
    "FileSource",
    "file_layout",
    "read_table",
    "table_of",
    "check_columns",
]
