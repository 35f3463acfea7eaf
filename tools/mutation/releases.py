"""Mutants of the release layer's refusals: every public parameter is checked before any data is read, so a
refusal never depends on the data (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

_T = (
    "tests/releases/test_validation.py::"
    "test_a_bad_parameter_is_refused_alike_on_d_on_d_plus_one_person_and_before_any_read"
)

MUTANTS: list[Mutant] = [
    Mutant(
        "heatmap-epsilon-checked-after-the-read",
        "refusal",
        "releases/heatmap.py",
        "    if not (math.isfinite(eps) and eps > 0):\n        raise ParameterError(f\"epsilon must be a positive",
        "    if not math.isfinite(eps):\n        raise ParameterError(f\"epsilon must be a positive",
        (_T,),
        "a negative epsilon is refused by the mechanism after the table is read: a missing or malformed file "
        "is reported instead, and the refusal's place depends on the data",
        (1,),
    ),
    Mutant(
        "heatmap-coarse-side-checked-after-the-read",
        "refusal",
        "releases/heatmap.py",
        "if not ok or coarse_side & (coarse_side - 1) or coarse_side > side:",
        "if not ok:",
        (_T,),
        "a coarse side that is no power of two, or larger than the grid, is refused only after the data is read",
    ),
    Mutant(
        "histogram-calibration-after-the-read",
        "refusal",
        "releases/histogram.py",
        "    calibrate_laplace(1.0 if nb is Neighbours.ADD_REMOVE_USER else 2.0, epsilon, dim=len(domain))\n",
        "    pass\n",
        (_T,),
        "the histogram's epsilon is checked by its calibration after the data is read",
    ),
    Mutant(
        "linear-local-samples-refused-after-the-noise",
        "refusal",
        "releases/dem.py",
        "    if req.samples is not None and mdl is Model.LOCAL:",
        "    if False:",
        (_T,),
        "PrivEMDLinear in the local model with samples is refused only after the data is read, sampled and noised",
    ),
    Mutant(
        "users-inside-half-sensitivity",
        "sensitivity",
        "releases/heatmap.py",
        "noisy = float(laplace_mechanism(np.array([inside]), 1.0, eps, resolve_rng(rng))[0])",
        "noisy = float(laplace_mechanism(np.array([inside]), 0.5, eps, resolve_rng(rng))[0])",
        ("tests/releases/test_heatmap.py::test_users_inside_counts_users_not_points_with_laplace_one_over_epsilon",),
        "the box check's count of users inside gets half the noise its sensitivity needs: 2 epsilon spent where "
        "epsilon is charged",
        (3,),
    ),
    Mutant(
        "release-records-the-engine-auto-chose",
        "refusal",
        "releases/dem.py",
        '              "engine": requested_engine(engine),',
        '              "engine": eng.name,',
        ("tests/releases/test_engines_agree.py::test_items_outside_the_domain_are_dropped_alike_on_every_engine_and_never_refused",),
        "the release's parameters name the engine auto chose, which tells whether the input is past 32 MB: a "
        "bit of every person's data in a released field",
    ),
]
