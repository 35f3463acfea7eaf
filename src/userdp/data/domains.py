"""The public domains of items: a finite, ordered set of labels (:class:`FiniteDomain`, items coded by their
index) and an axis-aligned box of points (:class:`BoxDomain`); and the encoding of values to codes that they
and the dataset use (:func:`unique_inverse`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DataError
from ..text import encode_strings

__all__ = ["FiniteDomain", "BoxDomain", "unique_inverse", "sorted_text", "OUTSIDE_DOMAIN"]

OUTSIDE_DOMAIN = (
    "items outside the declared domain are dropped, person by person (a person with none inside contributes "
    "nothing); how many were dropped is not reported"
)


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``, bit for bit, but fast on text.

    NumPy sorts all ``N`` strings (an object-array sort: 50 s for IMDB's 12 million words). Arrow's hash
    dictionary encoding finds the distinct strings in one pass; only those are sorted (code-point order, as
    NumPy's), and the codes are renumbered into that order. Integers spanning at most ``2N`` values are marked
    in a table of that span (10x faster than the sort). Other numbers, and text Arrow cannot take as one
    string column (mixed types), go to ``np.unique``.
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "OU" and arr.size > 1024:
        try:
            text = pa.array(arr.reshape(-1), type=pa.large_string())
        except (pa.ArrowException, TypeError, ValueError):
            text = None
        if text is not None:
            uniq, codes = encode_strings(text)
            if arr.dtype.kind == "U":
                uniq = uniq.astype(arr.dtype)
            return uniq, codes
    if arr.dtype.kind in "iu" and arr.size > 1024:
        lo, hi = arr.min(), arr.max()
        span = int(hi) - int(lo) + 1
        if span <= 2 * arr.size:  # integers in a narrow range: mark them in a table (no sort), same result
            wide = np.uint64 if arr.dtype.kind == "u" else np.int64  # no overflow while shifting
            base = wide(lo)
            shifted = (arr.reshape(-1).astype(wide, copy=False) - base).astype(np.intp, copy=False)
            present = np.zeros(span, dtype=bool)
            present[shifted] = True
            rank = np.cumsum(present, dtype=np.int64) - 1
            return (np.flatnonzero(present).astype(wide) + base).astype(arr.dtype), rank[shifted]
    uniq, inverse = np.unique(arr, return_inverse=True)
    return uniq, inverse.reshape(-1).astype(np.int64, copy=False)


def sorted_text(labels: np.ndarray) -> bool:
    """Whether ``labels`` is an object array of Python strings in strictly increasing order."""
    if labels.dtype != object or labels.size < 2:
        return False
    try:
        if not pa.types.is_string(pa.array(labels, from_pandas=False).type):
            return False
    except (pa.ArrowException, TypeError, ValueError):
        return False
    return bool(np.all(labels[:-1] < labels[1:]))


# --------------------------------------------------------------------------------------------
# Domains
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FiniteDomain:
    """A finite, ordered set of item labels (item ``j`` has code ``j``).

    Parameters
    ----------
    labels:
        The public list of possible items. Labels must be unique strings or integers. A public domain
        needs at least one label; a domain read off the data (``public=False``) may be empty (the data
        held no items).
    public:
        ``True`` when the labels were given by the caller; ``False`` when they were read off the
        data (:meth:`from_data`), in which case releases that reveal the domain refuse the dataset.
    """

    labels: np.ndarray
    public: bool = True
    _index: dict | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        labels = np.asarray(self.labels)
        if labels.ndim != 1 or (labels.size == 0 and self.public):
            raise DataError("a finite domain needs a non-empty 1-D list of labels")
        if labels.size == 0:
            labels = np.empty(0, dtype=object)
        if labels.dtype.kind not in "iuUO":
            raise DataError(f"domain labels must be strings or integers, not {labels.dtype}")
        text = None
        if labels.dtype.kind == "O" and labels.size:
            try:  # all Python strings: Arrow checks them in C (a vocabulary of 100,000 words in 10 ms)
                text = pa.array(labels, from_pandas=False)
            except (pa.ArrowException, TypeError, ValueError):
                text = None
            if text is not None and not (pa.types.is_string(text.type) and text.null_count == 0):
                text = None  # bytes, None, floats...: the element-wise check below refuses them
            if text is None and not all(
                isinstance(x, (str, int, np.integer)) and not isinstance(x, bool) for x in labels
            ):
                raise DataError("domain labels must be strings or integers")
        object.__setattr__(self, "labels", labels)
        if text is not None:
            unique = pc.count_distinct(text).as_py() == labels.size
        elif labels.dtype.kind == "O":
            unique = len({(x.item() if hasattr(x, "item") else x) for x in labels}) == labels.size
            if unique and self.public and len(self._lookup()) != labels.size:  # values match labels as text
                raise DataError("public domain labels must differ as text (1 and '1' print alike)")
        else:
            unique = np.unique(labels).size == labels.size
        if not unique:
            raise DataError("domain labels must be unique")

    def _lookup(self) -> dict:
        """Label as text -> code (built on first use: only encoding values needs it). Values match labels as
        text, so a file's column read as text (``7``) finds the label ``7`` whether it was given as a string or
        an integer; two labels that print alike are one label, refused as not unique."""
        if self._index is None:
            index = {str(x): i for i, x in enumerate(self.labels)}
            object.__setattr__(self, "_index", index)
        return self._index

    def __len__(self) -> int:
        return int(self.labels.size)

    def __repr__(self) -> str:
        return f"FiniteDomain(size={len(self)}, public={self.public})"

    @classmethod
    def from_data(cls, values: Sequence[Any] | np.ndarray) -> FiniteDomain:
        """The set of distinct values seen in the data, sorted. Marked ``public=False``."""
        return cls(unique_inverse(np.asarray(values))[0], public=False)

    def encode(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """Codes of ``values`` (a value is the label that prints alike: ``"7"`` and ``7`` match, ``"007"`` and
        ``7`` do not), ``-1`` for a value that is not in the domain.

        The dataset constructors drop the items coded ``-1``, person by person (:data:`OUTSIDE_DOMAIN`):
        refusing a table because one of its values lies outside the public domain would make the refusal
        depend on one person's data."""
        arr = np.asarray(values)
        uniq, inv = unique_inverse(arr)
        index = self._lookup()
        codes_u = np.fromiter(
            (index.get(str(u), -1) for u in uniq),
            dtype=np.int64,
            count=uniq.size,
        )
        return codes_u[inv.reshape(-1)]


@dataclass(frozen=True)
class BoxDomain:
    """A public axis-aligned box ``[low_j, high_j]`` for point items (for example a lat/lon bounding box)."""

    low: tuple[float, ...]
    high: tuple[float, ...]
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        low = tuple(float(x) for x in self.low)
        high = tuple(float(x) for x in self.high)
        if len(low) != len(high) or not low:
            raise DataError("box low and high must have the same, positive length")
        if not all(np.isfinite(low + high)) or any(a >= b for a, b in zip(low, high, strict=True)):
            raise DataError(f"box must be finite with low < high in every coordinate, got {low} .. {high}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        if self.names is not None and len(self.names) != len(low):
            raise DataError("box names must match its dimension")

    @property
    def dim(self) -> int:
        return len(self.low)

    @classmethod
    def latlon(cls, lat_min: float, lat_max: float, lon_min: float, lon_max: float) -> BoxDomain:
        """A latitude/longitude box in degrees."""
        problems = []
        if not (-90 <= lat_min <= 90 and -90 <= lat_max <= 90):
            problems.append("latitudes must lie in [-90, 90]")
        if not (-180 <= lon_min <= 180 and -180 <= lon_max <= 180):
            problems.append("longitudes must lie in [-180, 180]")
        if not lat_min < lat_max:
            problems.append(f"the smallest latitude ({lat_min:g}) must come below the largest ({lat_max:g})")
        if not lon_min < lon_max:
            problems.append(f"the smallest longitude ({lon_min:g}) must come below the largest ({lon_max:g})")
        if problems:
            raise DataError(
                "not a latitude/longitude box: " + "; ".join(problems) + " (public parameters; check the order)"
            )
        return cls((lat_min, lon_min), (lat_max, lon_max), ("lat", "lon"))

    def square_cells(self, cells: int) -> tuple[BoxDomain, tuple[int, int]]:
        """A grid of cells that are square on the ground: ``cells`` cells along the box's longer side, and
        the box widened (evenly on both ends, public arithmetic only) along its shorter side to a whole
        number of the same cells. Returns ``(box, (rows, cols))`` -- rows along the first coordinate.

        For a latitude/longitude box the sides are measured in kilometres on the equirectangular projection
        at the box's middle latitude (one degree of latitude is 110.574 km, one of longitude 111.320 km times
        the cosine of the latitude): exact enough for city- and region-sized boxes, where the cosine varies
        little across the box. For any other 2-D box the coordinates' own units are used.
        """
        if self.dim != 2:
            raise DataError("a grid needs a 2-D box")
        if isinstance(cells, bool) or int(cells) != cells or cells < 1:
            raise DataError(f"the number of cells along the longer side must be a positive integer, got {cells!r}")
        cells = int(cells)
        (a0, b0), (a1, b1) = self.low, self.high
        ka, kb = 1.0, 1.0  # kilometres per unit of each coordinate
        if self.names == ("lat", "lon"):
            ka, kb = 110.574, 111.320 * math.cos(math.radians((a0 + a1) / 2))
        ha, wb = (a1 - a0) * ka, (b1 - b0) * kb
        cell = max(ha, wb) / cells
        rows = cells if ha >= wb else max(1, math.ceil(ha / cell - 1e-9))
        cols = cells if wb > ha else max(1, math.ceil(wb / cell - 1e-9))
        pad_a = (rows * cell - ha) / ka / 2
        pad_b = (cols * cell - wb) / kb / 2
        box = BoxDomain((a0 - pad_a, b0 - pad_b), (a1 + pad_a, b1 + pad_b), self.names)
        return box, (rows, cols)

    def contains(self, points: np.ndarray) -> np.ndarray:
        """Boolean mask of the rows of ``points`` inside the (closed) box."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, self.dim)
        return np.all((p >= np.asarray(self.low)) & (p <= np.asarray(self.high)), axis=1)

    def check(self, points: np.ndarray) -> None:
        """Raise :class:`DataError` if any point lies outside the box (how many is not reported)."""
        if not np.all(self.contains(points)):
            raise DataError(
                f"some points lie outside the declared box {self.low} .. {self.high}; "
                "pass a larger public box or drop them explicitly"
            )
