"""userdp: differential privacy at the level of users.

Each person contributes many items (check-ins, words, ratings) and the whole contribution is
protected. userdp implements, on one shared core:

* d_EM metric DP (Imola, Roy Chowdhury & Chaudhuri, CCS 2024),
* person-level DP distinct count (Knop & Steinke, NeurIPS 2023),
* DP heatmaps by sparse EMD aggregation (Ghazi et al., AAAI 2023).

The core: :mod:`userdp.data` (the user data model), :mod:`userdp.metrics` (metric spaces and the EMD),
:mod:`userdp.noise` (all randomness, floating-point safe), :mod:`userdp.privacy` (typed guarantees
and budgets), :mod:`userdp.engines` (the data plane), :mod:`userdp.datasets` (bundled real data).
"""

from __future__ import annotations

from .data import BoxDomain, FiniteDomain, UserDataset
from .errors import BudgetExceededError, DataError, ParameterError, UserDPError
from .release import ErrorStatement, Release

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
