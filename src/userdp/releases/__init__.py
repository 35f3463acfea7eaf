"""One function per release: a table source, its columns, public parameters, privacy parameters and an engine
in; a :class:`~userdp.privacy.result.Release` (value + guarantee) out. The command line, the demo and the
experiments call these.

* :func:`heatmap` -- DP heatmaps (Ghazi et al.);
* :func:`distinct` -- person-level DP distinct count (Knop & Steinke);
* :func:`linear`, :func:`itemwise`, :func:`frequency` -- d_EM-DP (Imola et al.), with BoundedEMDReduction;
* :func:`histogram` -- the user-level DP histogram;
* :func:`vocabulary` -- which items many persons hold, with noisy counts (private set union).
* :func:`key_counts` -- records per key, with contribution bounds chosen privately (GEM).
* :func:`aggregate` -- per-key count, users, sum, mean, variance and quantiles of a numeric column.

A source is a path, a :class:`~userdp.data.FileSource` (a file's delimiter, header line and field names: every
engine reads it alike), a table or frame, or a :class:`~userdp.data.UserDataset`. The engine (``engine="auto"``
(default), ``"memory"``, ``"duckdb"``, ``"chunked"``, ``"spark"`` or an
instance) computes the exact aggregates; the mechanism adds noise, selects and reconstructs on the driver,
once. The same parameters and seed give the same release on every engine.
"""

from __future__ import annotations

from .aggregate import aggregate  # (the module stays importable by its path: userdp.releases.aggregate)
from .counts import key_counts
from .dem import (
    clustered_domain_from_table,
    distance_query,
    frequency,
    itemwise,
    linear,
    mean_query,
    metric_domain_from_table,
)
from .distinct import distinct
from .heatmap import ALGORITHMS, grid_of, heatmap, users_inside
from .histogram import histogram
from .request import Request, deliver, plan_request
from .vocabulary import vocabulary

# every release command of the command line has its function of the same name here
counts = key_counts  # ``userdp counts`` (the module userdp.releases.counts stays importable by its path)
freq = frequency  # ``userdp freq``

__all__ = [
    "aggregate",
    "counts",
    "freq",
    "ALGORITHMS",
    "Request",
    "clustered_domain_from_table",
    "metric_domain_from_table",
    "deliver",
    "distance_query",
    "distinct",
    "frequency",
    "grid_of",
    "heatmap",
    "users_inside",
    "histogram",
    "itemwise",
    "linear",
    "mean_query",
    "plan_request",
    "key_counts",
    "vocabulary",
]
