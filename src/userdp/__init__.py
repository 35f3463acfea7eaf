"""userdp: differential privacy at the level of users.

Each person contributes many items (check-ins, words, ratings) and the whole contribution is
protected. userdp implements, on one shared core:

* d_EM metric DP (Imola, Roy Chowdhury & Chaudhuri, CCS 2024),
* person-level DP distinct count (Knop & Steinke, NeurIPS 2023),
* DP heatmaps by sparse EMD aggregation (Ghazi et al., AAAI 2023).

Layers, bottom to top (a module imports only from its own layer or below):

* :mod:`userdp.errors`, :mod:`userdp.noise` (all randomness, exact on a lattice), :mod:`userdp.privacy`
  (typed guarantees, budgets, accounting, the :class:`Release` result);
* :mod:`userdp.data` (the user data model) and :mod:`userdp.metrics` (metric spaces and the EMD);
* :mod:`userdp.engines` (the data plane: in memory, DuckDB, chunked, Spark);
* the mechanisms, one package per paper: :mod:`userdp.dem`, :mod:`userdp.distinct`, :mod:`userdp.heatmaps`;
* :mod:`userdp.releases` (one function per release: table + columns + parameters + engine -> Release)
  and :mod:`userdp.audit`;
* :mod:`userdp.cli` and :mod:`userdp.report` (the demo) on top; :mod:`userdp.datasets` holds bundled data.
"""

from __future__ import annotations

from .data import BoxDomain, FiniteDomain, UserDataset
from .errors import BudgetExceededError, DataError, ParameterError, UserDPError
from .privacy.result import ErrorStatement, Release

__version__ = "0.1.0"

__all__ = [
    "BoxDomain",
    "BudgetExceededError",
    "DataError",
    "ErrorStatement",
    "FiniteDomain",
    "ParameterError",
    "Release",
    "UserDPError",
    "UserDataset",
    "__version__",
]
