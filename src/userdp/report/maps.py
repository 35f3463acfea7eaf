"""Maps of heatmaps that people can read (matplotlib, headless: the Agg canvas, no pyplot state).

A map shows one or more panels (released heatmaps, or the truth in a demonstration) over a public box:

* **geographic aspect**: for a latitude/longitude box the axes' aspect is ``1 / cos(mean latitude)``, so
  that a kilometre is as long east-west as north-south; other boxes draw square cells;
* axis labels (``longitude (°)``, ``latitude (°)``), few longitude ticks (they never overlap), full titles
  (long ones are wrapped, and the layout is constrained, so nothing is clipped);
* **every panel its own colour scale and colourbar**, with units: a released heatmap is a distribution over
  the cells (it sums to 1), so a cell's value is its share of the users' mass. Non-negative panels use a
  square-root scale from 0 to the panel's own maximum (faint mass stays visible, and a noisy baseline is not
  drowned by another panel's peak); a panel with negative values uses a symmetric diverging scale, so
  negatives are shown, not hidden;
* cells with exactly zero mass (what the algorithm did not release: a cell left out by the sparse
  selection, a noisy count clipped to 0, a cell below the threshold) are drawn in a neutral grey, and a
  legend says what that grey means;
* a resolution high enough for a report (``dpi`` 160: a one-panel map is about 1,300 px wide).

Reporting only: no mechanism imports this module.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DEFAULT_LEFT_OUT",
    "LEFT_OUT",
    "MapPanel",
    "geo_aspect",
    "left_out_label",
    "map_figure",
    "render_maps",
    "UNITS",
    "UNITS_SIGNED",
    "ZERO_COLOUR",
]

#: The colourbar's label: the released heatmap is a distribution over the cells (it sums to 1).
UNITS = "share of users' mass per cell (%)"
UNITS_SIGNED = "noisy share of users' mass per cell (%), can be < 0"
#: Neutral grey for cells with no mass.
ZERO_COLOUR = "#b8b8b8"
DEFAULT_LEFT_OUT = "no mass released (cell left out or suppressed)"

#: What an exactly-zero cell means for each algorithm of :func:`userdp.releases.heatmap` (and for the truth).
LEFT_OUT = {
    "sparse": "no mass released: cell left out by the sparse selection (Reconstruct put none there)",
    "dense": "no mass released: its coarse cell got none after the non-negative projection",
    "laplace": "no mass released: noisy count <= 0, set to 0",
    "threshold": "no mass released: below the top {top}% threshold (suppressed) or noisy count <= 0",
    "privtree": "no mass released: its leaf's noisy count <= 0, set to 0",
    "privtree-emd": "no mass released",  # never happens: a 1% uniform floor covers every cell
    "auto": "no mass released",  # never happens: both branches end with a 1% uniform floor
    "adaptive-grid": "no mass released: its grid cell's estimate <= 0, set to 0",
    "hierarchy": "no mass released: its consistent estimate <= 0, set to 0",
    "truth": "no points in the data",
}


def left_out_label(algorithm: str, top_percent: float | None = None) -> str:
    """The legend text for exactly-zero cells of a heatmap released by ``algorithm`` (:data:`LEFT_OUT`)."""
    text = LEFT_OUT.get(algorithm, DEFAULT_LEFT_OUT)
    return text.replace("{top}", f"{top_percent:g}" if top_percent is not None else "t")


@dataclass
class MapPanel:
    """One panel of a map.

    ``data`` is a ``rows x cols`` grid (row 0 at the box's low latitude); ``title`` its title; ``left_out``
    the legend text for cells with exactly zero mass (``None``: zeros are not singled out); ``mask``
    optionally marks the left-out cells explicitly (default: the cells equal to 0).
    """

    data: np.ndarray
    title: str = ""
    left_out: str | None = DEFAULT_LEFT_OUT
    mask: np.ndarray | None = None


def geo_aspect(box) -> float | None:
    """``1 / cos(mean latitude)`` for a latitude/longitude box (the data aspect that makes a km as long
    both ways with longitude across and latitude up), ``None`` for any other box."""
    if box is None or getattr(box, "names", None) != ("lat", "lon"):
        return None
    lat = 0.5 * (box.low[0] + box.high[0])
    c = math.cos(math.radians(lat))
    return 1.0 / max(c, 1e-3)  # a box at a pole is drawn as if at 89.94 degrees


def _panels(panels: Sequence[MapPanel] | Mapping[str, np.ndarray]) -> list[MapPanel]:
    if isinstance(panels, Mapping):
        out = [MapPanel(np.asarray(v), str(k)) for k, v in panels.items()]
    else:
        out = [p if isinstance(p, MapPanel) else MapPanel(np.asarray(p)) for p in panels]
    if not out:
        raise ValueError("a map needs at least one panel")
    for p in out:
        p.data = np.asarray(p.data, dtype=np.float64)
        if p.data.ndim != 2 or p.data.size == 0:
            raise ValueError(f"panel {p.title!r}: a map panel must be a non-empty 2-D grid")
    return out


def _wrap(text: str, width_in: float, fontsize: float) -> str:
    """Wrap ``text`` to lines that fit ``width_in`` inches at ``fontsize`` points (kept line breaks)."""
    chars = max(12, int(width_in * 72 / (0.56 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) if line else "" for line in text.split("\n"))


def _geometry(box, shape: tuple[int, int]) -> tuple[tuple[float, float, float, float], float, str, str]:
    """``(extent, data aspect, xlabel, ylabel)`` for a grid of ``shape`` over ``box``."""
    rows, cols = shape
    if box is None or len(box.low) != 2:
        return (0.0, float(cols), 0.0, float(rows)), 1.0, "cell (column)", "cell (row)"
    extent = (box.low[1], box.high[1], box.low[0], box.high[0])
    aspect = geo_aspect(box)
    if aspect is not None:
        return extent, aspect, "longitude (°)", "latitude (°)"
    names = box.names or ("y", "x")
    cell_x, cell_y = (extent[1] - extent[0]) / cols, (extent[3] - extent[2]) / rows
    return extent, cell_x / cell_y, str(names[1]), str(names[0])  # square cells


def map_figure(
    panels: Sequence[MapPanel] | Mapping[str, np.ndarray],
    box=None,
    title: str = "",
    *,
    ncols: int | None = None,
    panel_width: float | None = None,
    units: str = UNITS,
    units_signed: str = UNITS_SIGNED,
    cmap: str = "magma",
    diverging_cmap: str = "RdBu_r",
):
    """The map as a :class:`matplotlib.figure.Figure` on an Agg canvas (see the module docstring).

    ``panels``: :class:`MapPanel` objects, or a mapping ``title -> grid`` (zeros then read as
    :data:`DEFAULT_LEFT_OUT`). ``box``: the public :class:`~userdp.data.BoxDomain` (latitude along the
    rows), or ``None`` for cell coordinates. ``ncols`` panels per row (default up to 3).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import Normalize, PowerNorm
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ps = _panels(panels)
    k = len(ps)
    ncols = max(1, min(ncols or min(k, 3), k))
    nrows = math.ceil(k / ncols)
    extent, aspect, xlabel, ylabel = _geometry(box, ps[0].data.shape)
    # the map's shape on the page: height / width of the drawn box
    ratio = (extent[3] - extent[2]) * aspect / (extent[1] - extent[0])
    ratio = min(max(ratio, 0.25), 4.0)
    map_w = panel_width or (7.0 if k == 1 else 5.2)
    if map_w * ratio > 8.0:  # a tall box: keep the page height reasonable
        map_w = 8.0 / ratio
    fig_w = ncols * (map_w + 2.0) + 0.3
    title_fs, panel_fs = 13.0, 11.0
    sup = _wrap(title, fig_w - 0.4, title_fs) if title else ""
    titles = [_wrap(p.title, map_w + 1.6, panel_fs) for p in ps]
    title_lines = max(t.count("\n") + 1 for t in titles) if any(titles) else 0
    has_left_out = [bool(p.left_out) and bool(np.any(_left_out(p))) for p in ps]
    row_h = map_w * ratio + 1.0 + 0.25 * title_lines + (0.4 if any(has_left_out) else 0.0)
    head = 0.3 * (sup.count("\n") + 1) + 0.2 if sup else 0.1
    fig = Figure(figsize=(fig_w, nrows * row_h + head + 0.2), layout="constrained")
    FigureCanvasAgg(fig)
    fig.get_layout_engine().set(w_pad=0.08, h_pad=0.08, wspace=0.04, hspace=0.04)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    for ax, p, t, show_lo in zip(axes.ravel(), ps, titles, has_left_out, strict=False):
        data = p.data
        signed = bool(np.nanmin(data) < 0)
        lo = _left_out(p) if p.left_out else np.zeros(data.shape, dtype=bool)
        shown = np.ma.masked_array(data, mask=lo | ~np.isfinite(data))
        if signed:  # symmetric diverging scale: negatives visible, 0 in the middle
            m = float(np.nanmax(np.abs(data))) or 1.0
            norm = Normalize(vmin=-m, vmax=m)
            cm = _colormap(diverging_cmap)
            label = units_signed
        else:  # the panel's own scale, square root so that faint mass stays visible
            top = float(np.nanmax(data)) if np.any(data > 0) else 1.0
            norm = PowerNorm(0.5, vmin=0.0, vmax=top)
            cm = _colormap(cmap)
            label = units
        im = ax.imshow(
            shown,
            origin="lower",
            cmap=cm,
            norm=norm,
            extent=extent,
            interpolation="nearest" if max(data.shape) <= 512 else "antialiased",
        )
        ax.set_aspect(aspect)
        ax.set_title(t, fontsize=panel_fs)
        ax.set_xlabel(xlabel, fontsize=10)
        ax.set_ylabel(ylabel, fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        ax.tick_params(labelsize=9)
        ax.ticklabel_format(useOffset=False)  # plain coordinates, never "+4.07e1" in a corner
        cax = ax.inset_axes((1.04, 0.0, 0.045, 1.0))
        cb = fig.colorbar(im, cax=cax)
        cb.set_label(label, fontsize=9)
        cb.ax.tick_params(labelsize=8)
        cb.ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
        cb.ax.yaxis.set_major_formatter(FuncFormatter(_percent))
        if show_lo:  # under the panel: what its grey cells mean
            patch = Patch(facecolor=ZERO_COLOUR, edgecolor="#555555", label=_wrap(p.left_out, map_w + 1.0, 10))
            ax.legend(handles=[patch], loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=10, frameon=False)
    if sup:
        fig.suptitle(sup, fontsize=title_fs)
    _fit_height(fig, axes.ravel()[:k])
    return fig


def _percent(x: float, _pos=None) -> str:
    """A share as a percentage with two significant digits (``0.0016%``)."""
    return "0%" if x == 0 else f"{100 * x:.2g}%"


def _fit_height(fig, axes) -> None:
    """Remove the empty bands above and below the maps: the axes keep their aspect inside the layout's
    cells, so a cell taller than its map leaves slack. One layout pass measures it; the figure is then
    shortened by the smallest slack of a row and laid out again."""
    fig.draw_without_rendering()
    w, h = fig.get_size_inches()
    slack = min(a.get_position(original=True).height - a.get_position(original=False).height for a in axes)
    if slack * h > 0.05:
        fig.set_size_inches(w, h - slack * h * 0.98 * _rows(axes))


def _rows(axes) -> int:
    return len({round(a.get_position(original=True).y0, 4) for a in axes})


def _left_out(p: MapPanel) -> np.ndarray:
    if p.mask is not None:
        m = np.asarray(p.mask, dtype=bool)
        if m.shape != p.data.shape:
            raise ValueError(f"panel {p.title!r}: the mask's shape {m.shape} differs from the grid's {p.data.shape}")
        return m
    return p.data == 0


def _colormap(name: str):
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad=ZERO_COLOUR)


def render_maps(
    panels: Sequence[MapPanel] | Mapping[str, np.ndarray],
    path: str | Path,
    box=None,
    title: str = "",
    *,
    dpi: int = 160,
    **kwargs,
) -> Path:
    """Write the map of :func:`map_figure` to ``path`` (PNG unless the suffix says otherwise); returns the
    path. ``dpi`` 160 makes a one-panel map about 1,300 px wide."""
    fig = map_figure(panels, box, title, **kwargs)
    path = Path(path)
    fig.savefig(path, dpi=dpi, facecolor="white")
    return path
