"""Privacy guarantees, their conversions, and budget accounting."""

from .budget import LedgerEntry, Session, guarantee_from_dict, guarantee_to_dict, ledger_lock
from .guarantees import (
    ApproxDP,
    DiscreteEMDDP,
    EMDMetricDP,
    Guarantee,
    ItemMetricDP,
    Model,
    Neighbours,
    PureDP,
    ShuffleDP,
    alpha_from_targets,
    compose,
    convert_to_budget,
    group_privacy,
    guarantee_kind,
    metric_from_dp,
)
from .params import DELTA_CEILING, AcknowledgedDelta, LargeDeltaWarning, check_delta, warn_large_delta

__all__ = [
    "DELTA_CEILING",
    "AcknowledgedDelta",
    "LargeDeltaWarning",
    "check_delta",
    "ApproxDP",
    "ShuffleDP",
    "DiscreteEMDDP",
    "EMDMetricDP",
    "Guarantee",
    "ItemMetricDP",
    "LedgerEntry",
    "Model",
    "Neighbours",
    "PureDP",
    "Session",
    "alpha_from_targets",
    "compose",
    "convert_to_budget",
    "group_privacy",
    "guarantee_from_dict",
    "guarantee_kind",
    "guarantee_to_dict",
    "ledger_lock",
    "metric_from_dp",
    "warn_large_delta",
]
