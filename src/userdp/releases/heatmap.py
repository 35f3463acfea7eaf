"""The DP heatmap release (Ghazi et al., AAAI 2023): a table of user locations -> a heatmap.

The engine computes ``s = sum_i p_i`` on the grid of a public box (each user's points as a distribution);
the mechanism -- sparse EMD aggregation (Algorithms 1 and 2, :func:`userdp.heatmaps.dp_sparse_emd_agg`) or
a baseline -- adds noise, selects and reconstructs on the driver, once. Guarantee: ``epsilon``-DP under
adding or removing one user.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..data import BoxDomain
from ..engines import Columns, Engine, get_engine
from ..engines.base import GridShape, check_grid
from ..errors import ParameterError
from ..heatmaps import (
    adaptive_grid_heatmap,
    auto_heatmap,
    dense_emd_agg,
    dp_sparse_emd_agg,
    hierarchical_heatmap,
    laplace_heatmap,
    privtree_emd_heatmap,
    privtree_heatmap,
)
from ..heatmaps.baselines import user_count_estimate
from ..heatmaps.sparse import padded_levels
from ..noise import RngLike, laplace_mechanism, resolve_rng
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release

__all__ = ["heatmap", "heatmap_of_grid", "grid_of", "check_heatmap_parameters", "users_inside", "box_check",
           "ALGORITHMS", "OUTSIDE_NOTE"]

OUTSIDE_NOTE = (
    "points outside the public box are dropped, user by user (a user with no point inside contributes nothing); "
    "how many were dropped is not reported"
)

ALGORITHMS = (
    "auto",
    "sparse",
    "dense",
    "laplace",
    "threshold",
    "privtree",
    "privtree-emd",
    "adaptive-grid",
    "hierarchy",
)


def grid_of(box: BoxDomain, resolution: int | tuple[int, int], cells: str = "square") -> tuple[BoxDomain, GridShape]:
    """The public grid of a heatmap: ``(box, (rows, cols))``.

    * ``resolution`` an ``int`` and ``cells="square"`` (the default): cells square on the ground,
      ``resolution`` of them along the box's longer side; the box is widened along its shorter side to a whole
      number of cells (:meth:`~userdp.data.BoxDomain.square_cells`), so a map keeps its true aspect;
    * ``resolution`` an ``int`` and ``cells="box"``: a ``resolution x resolution`` grid over the box as given
      (cells square only if the box is);
    * ``resolution`` a ``(rows, cols)`` pair: that grid over the box as given.

    Everything here is public arithmetic on public parameters; nothing is read from the data.
    """
    if cells not in ("square", "box"):
        raise ParameterError(f"cells must be 'square' or 'box', got {cells!r}")
    if isinstance(resolution, tuple | list):
        return box, check_grid(box, tuple(resolution))
    check_grid(box, resolution)
    if cells == "box":
        return box, (int(resolution), int(resolution))
    wide, shape = box.square_cells(int(resolution))
    return wide, check_grid(wide, shape)


def heatmap_of_grid(
    s: Any,
    epsilon: float,
    algorithm: str = "auto",
    *,
    w: int = 20,
    top_percent: float = 1.0,
    coarse_side: int | None = None,
    n_public: float | None = None,
    rng: RngLike = None,
) -> Release:
    """The mechanism step of :func:`heatmap` on the grid sum ``s`` of the users' distributions (what the
    engines compute): the same algorithms and parameters. :mod:`userdp.plan` simulates releases with it."""
    if algorithm not in ALGORITHMS:
        raise ParameterError(f"unknown heatmap algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    src = resolve_rng(rng)
    shape = s.shape
    if algorithm == "auto":
        rel = auto_heatmap(s, epsilon, n_public=n_public, rng=src)
    elif algorithm == "sparse":
        rel = dp_sparse_emd_agg(s, epsilon, w=w, rng=src)
    elif algorithm == "laplace":
        rel = laplace_heatmap(s, epsilon, rng=src)
    elif algorithm == "threshold":
        rel = laplace_heatmap(s, epsilon, top_percent=top_percent, rng=src)
    elif algorithm == "privtree":
        rel = privtree_heatmap(s, epsilon, rng=src)
    elif algorithm == "privtree-emd":
        rel = privtree_emd_heatmap(s, epsilon, rng=src)
    elif algorithm == "adaptive-grid":
        rel = adaptive_grid_heatmap(s, epsilon, n_public=n_public, rng=src)
    elif algorithm == "hierarchy":
        rel = hierarchical_heatmap(s, epsilon, rng=src)
    else:
        padded = 2 ** padded_levels(shape)
        rel = dense_emd_agg(s, epsilon, coarse_side or max(1, padded // 8), rng=src)
    return rel


def check_heatmap_parameters(
    epsilon: float,
    algorithm: str,
    shape: GridShape,
    *,
    w: int = 20,
    top_percent: float = 1.0,
    coarse_side: int | None = None,
    n_public: float | None = None,
    drop_outside: bool = True,
) -> float:
    """Refuse bad public parameters of :func:`heatmap` before any data is read (so that a refusal never
    depends on the data); returns ``epsilon`` as a float."""
    if algorithm not in ALGORITHMS:
        raise ParameterError(f"unknown heatmap algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"epsilon must be a positive finite number, got {epsilon!r}") from None
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if n_public is not None and algorithm not in ("auto", "adaptive-grid"):
        raise ParameterError(f"n_public applies to the auto and adaptive-grid algorithms only, not {algorithm!r}")
    if n_public is not None:
        user_count_estimate(None, 0.0, n_public)  # checks the public estimate; reads nothing
    if isinstance(w, bool) or not isinstance(w, int | np.integer) or w < 1:
        raise ParameterError(f"w (cells kept per level) must be a whole number of at least 1, got {w!r}")
    try:
        top = float(top_percent)
    except (TypeError, ValueError):
        raise ParameterError(f"top_percent must lie in (0, 100], got {top_percent!r}") from None
    if not 0 < top <= 100:
        raise ParameterError(f"top_percent must lie in (0, 100], got {top_percent!r}")
    if coarse_side is not None:
        side = 2 ** padded_levels(shape)
        ok = not isinstance(coarse_side, bool) and isinstance(coarse_side, int | np.integer) and coarse_side >= 1
        if not ok or coarse_side & (coarse_side - 1) or coarse_side > side:
            raise ParameterError(
                f"coarse_side must be a power of two no larger than the enclosing square's side {side}, "
                f"got {coarse_side!r}"
            )
    if drop_outside is not True:
        raise ParameterError(
            "points outside the box are always dropped, user by user: refusing a table because one of its points "
            "lies outside would make the refusal depend on the data (drop_outside=False is no longer offered)"
        )
    return eps


def heatmap(
    source: Any,
    box: BoxDomain,
    resolution: int | tuple[int, int],
    epsilon: float,
    algorithm: str = "auto",
    *,
    cells: str = "square",
    user: str = "user",
    lat: str = "lat",
    lon: str = "lon",
    drop_outside: bool = True,
    w: int = 20,
    top_percent: float = 1.0,
    coarse_side: int | None = None,
    n_public: float | None = None,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """A DP heatmap of the ``(lat, lon)`` points of a table.

    Parameters
    ----------
    source:
        A path (CSV, TSV, Parquet, JSON lines), a :class:`~userdp.data.FileSource` (a headerless file, another
        delimiter), an Arrow table, a pandas or polars frame, a Spark DataFrame
        (``engine="spark"``) or a :class:`~userdp.data.UserDataset` of points.
    box, resolution, cells:
        The public box and grid (:func:`grid_of`): by default ``resolution`` cells along the box's longer side,
        cells square on the ground; a ``(rows, cols)`` pair for an exact grid over the box. Any sizes work:
        the sparse and dense mechanisms run their pyramid over the enclosing power-of-two square, whose extra
        cells are public and empty. The grid actually used is in ``params["box"]`` and ``params["shape"]``.
    epsilon:
        The privacy parameter (add/remove one user).
    algorithm:
        ``"auto"`` (the default, :func:`userdp.heatmaps.auto_heatmap`: the appendix-D coarse grid with
        post-processing when ``epsilon n`` is below 40, userdp's PrivTree-EMD above; measured better than the
        paper's and appendix D's algorithms at every epsilon on the paper's construction), ``"sparse"`` (the
        paper's sparse EMD aggregation, keeping ``w`` cells per level), ``"dense"`` (appendix D's dense EMD
        aggregation on a public coarse grid of ``coarse_side`` cells a side of the enclosing power-of-two
        square, default an eighth of it), ``"laplace"`` (Laplace noise on every cell), ``"threshold"``
        (Laplace, the ``top_percent``% largest cells kept), ``"privtree"`` (Zhang et al.), ``"privtree-emd"``
        (userdp's PrivTree variant), ``"adaptive-grid"`` (Qardaji et al.) or ``"hierarchy"`` (Hay et al.).
    n_public:
        ``"auto"`` and ``"adaptive-grid"`` only: a public estimate of the number of users (never read from the
        data). ``None`` (default): 5% of ``epsilon`` buys a noisy count instead.
    drop_outside:
        Points outside the box are always dropped, user by user (a user with none inside contributes nothing;
        how many were dropped is not reported): ``True``, the only value (a refusal when a point lies outside
        would depend on the data). The release says so in ``params["outside"]``.
    engine:
        ``"auto"`` (default), ``"memory"``, ``"duckdb"``, ``"chunked"``, ``"spark"`` or an
        :class:`~userdp.engines.Engine`.
    rng:
        ``None`` (the OS CSPRNG) or a seed (reproducible: demonstrations only, no privacy).
    """
    if algorithm not in ALGORITHMS:
        raise ParameterError(f"unknown heatmap algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    # public parameters first: nothing is read for a release that cannot be made
    grid_box, shape = grid_of(box, resolution, cells)
    check_heatmap_parameters(epsilon, algorithm, shape, w=w, top_percent=top_percent, coarse_side=coarse_side,
                             n_public=n_public, drop_outside=drop_outside)  # fmt: skip
    eng = get_engine(engine, source)
    data = eng.load(source, Columns(user, points=(lat, lon)))
    s = eng.grid_sum(data, grid_box, shape, drop_outside=True)
    rel = heatmap_of_grid(s, epsilon, algorithm, w=w, top_percent=top_percent, coarse_side=coarse_side,
                          n_public=n_public, rng=resolve_rng(rng))  # fmt: skip
    rel.params.update(box={"low": list(grid_box.low), "high": list(grid_box.high)}, shape=list(shape),
                      outside=OUTSIDE_NOTE)  # fmt: skip
    if algorithm == "auto" and n_public is None:  # the auto heatmap's noisy count of the users inside
        rel.params["box_check"] = box_check(rel.params["n_estimate"], rel.params["epsilon_total"])
    return rel


def box_check(estimate: float, epsilon_count: float) -> str | None:
    """A warning when a DP count of the users with a point inside the box (``estimate``, Laplace noise of scale
    ``1 / epsilon_count``) says few or none are: below ``max(10, 2 sd)`` of its noise. Post-processing of a
    released count, so it costs no privacy; ``None`` when the count is clearly above that. (A box over another
    city, or latitude and longitude swapped, gives a uniform map that looks like a result.)"""
    sd = math.sqrt(2.0) / float(epsilon_count)
    if estimate >= max(10.0, 2.0 * sd):
        return None
    return (
        f"the DP estimate of users with a point inside the box is {estimate:.0f} (noise sd {sd:.0f}), too few to "
        "tell this box from an empty one: check --bbox and --lat/--lon (userdp heatmap --check-box spends a "
        "small epsilon on this question alone)"
    )


def users_inside(
    source: Any,
    box: BoxDomain,
    epsilon: float,
    *,
    user: str = "user",
    lat: str = "lat",
    lon: str = "lon",
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """The number of users with at least one ``(lat, lon)`` point inside the public ``box``, with Laplace
    noise of scale ``1 / epsilon`` (the lattice Laplace mechanism; one user changes the count by at most 1):
    ``epsilon``-DP for adding or removing one user. A check of the box before a heatmap (``userdp heatmap
    --check-box``) that spends a small, stated epsilon on this question alone. ``params["box_check"]`` holds
    :func:`box_check`'s warning, or ``None``."""
    eps = check_heatmap_parameters(epsilon, "auto", (1, 1))  # (the same check of epsilon, before any read)
    if not isinstance(box, BoxDomain) or box.dim != 2:
        raise ParameterError("the box must be a two-dimensional BoxDomain (latitude, longitude)")
    eng = get_engine(engine, source)
    data = eng.load(source, Columns(user, points=(lat, lon)))
    inside = float(np.sum(eng.grid_sum(data, box, (1, 1), drop_outside=True)))  # each user inside: mass 1
    noisy = float(laplace_mechanism(np.array([inside]), 1.0, eps, resolve_rng(rng))[0])
    half = math.log(10.0) / eps  # P(|Lap(1/eps)| > t) = exp(-eps t)
    return Release(
        noisy,
        PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        "Laplace count of the users with a point inside the box",
        {"epsilon": eps, "scale": 1.0 / eps, "box": {"low": list(box.low), "high": list(box.high)},
         "box_check": box_check(noisy, eps), "outside": OUTSIDE_NOTE},  # fmt: skip
        ErrorStatement(f"with probability 0.9, within ±{half:.3g} of the true number of users inside", half, 0.9),
    )
