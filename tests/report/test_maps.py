"""The maps people read (userdp.report.maps): one test per defect of issue 15 ("Maps"), each able to fail.

Clipped titles, small images, overlapping longitude ticks, no axis labels or colourbar, a distorted lat/lon
aspect, a noisy baseline drowned by another panel's scale, negatives hidden, unexplained left-out cells, slow
or non-headless rendering.
"""

from __future__ import annotations

import itertools
import math
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from userdp.data import BoxDomain
from userdp.heatmaps import gaussian_heatmap
from userdp.report.maps import (
    LEFT_OUT,
    UNITS,
    UNITS_SIGNED,
    ZERO_COLOUR,
    MapPanel,
    geo_aspect,
    left_out_label,
    map_figure,
    render_maps,
)

MIDTOWN = BoxDomain.latlon(40.745, 40.770, -73.999, -73.965)
WIDE = BoxDomain.latlon(40.40, 41.00, -74.30, -73.60)  # about the NYC box: many digits per longitude tick
MECHANISM = "DPSparseEMDAgg + Reconstruct (Ghazi et al., Algorithms 1-2)"


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def _blobs(side: int = 128, seed: int = 0, zeros: bool = True) -> np.ndarray:
    """A normalized heatmap with a few blobs (exact zeros far from them unless ``zeros`` is False)."""
    g = np.random.default_rng(seed)
    a = np.zeros((side, side))
    a[g.integers(0, side, 12), g.integers(0, side, 12)] = g.random(12) + 0.5
    h = gaussian_heatmap(a / a.sum(), side / 64, truncate=4.0)  # cut off: exact zeros far from the blobs
    return h if zeros else h + 1e-9


def _image(ax):
    (im,) = ax.images
    return im


def _map_axes(fig):
    return [ax for ax in fig.axes if ax.images and ax.get_xlabel()]


def _draw(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _inside(inner, outer, tol: float = 0.5) -> bool:
    return (
        inner.x0 >= outer.x0 - tol
        and inner.y0 >= outer.y0 - tol
        and inner.x1 <= outer.x1 + tol
        and inner.y1 <= outer.y1 + tol
    )


# ---------------------------------------------------------------- size, labels, colourbar


def test_one_panel_png_is_large_enough_for_a_report(tmp_path):
    path = render_maps([MapPanel(_blobs(), "one panel")], tmp_path / "m.png", MIDTOWN, title="t")
    w, h = _png_size(path)
    assert w >= 1200 and h >= 900, (w, h)


def test_axes_have_latitude_and_longitude_labels():
    fig = map_figure([MapPanel(_blobs(), "p")], MIDTOWN)
    (ax,) = _map_axes(fig)
    assert ax.get_xlabel() == "longitude (°)" and ax.get_ylabel() == "latitude (°)"
    assert ax.get_xlim() == pytest.approx((-73.999, -73.965)) and ax.get_ylim() == pytest.approx((40.745, 40.770))


def test_every_panel_has_a_colourbar_with_units():
    fig = map_figure({"a": _blobs(seed=1), "b": _blobs(seed=2)}, MIDTOWN)
    axes = _map_axes(fig)
    assert len(axes) == 2
    for ax in axes:
        cb = _image(ax).colorbar
        assert cb is not None and cb.ax.get_ylabel() == UNITS
        assert "share of users' mass per cell" in UNITS
    # the ticks are percentages of the map's total mass (which sums to 1)
    _draw(fig)
    labels = [t.get_text() for t in _image(axes[0]).colorbar.ax.get_yticklabels() if t.get_text()]
    assert labels and all(t.endswith("%") for t in labels)


# ---------------------------------------------------------------- titles


@pytest.mark.parametrize("panels", [1, 3])
def test_long_titles_are_wrapped_not_clipped(panels):
    title = f"{MECHANISM}, ε = 1 (add or remove one user), Foursquare check-ins, Midtown Manhattan, 256 x 256 cells"
    ps = [MapPanel(_blobs(seed=i), f"{MECHANISM}, ε = {i + 1}, 256 x 256 cells") for i in range(panels)]
    fig = map_figure(ps, MIDTOWN, title)
    renderer = _draw(fig)
    page = fig.bbox
    sup = fig._suptitle
    assert " ".join(sup.get_text().split()) == " ".join(title.split())  # every word is there
    assert _inside(sup.get_window_extent(renderer), page)
    for ax, p in zip(_map_axes(fig), ps, strict=True):
        assert " ".join(ax.title.get_text().split()) == " ".join(p.title.split())
        assert _inside(ax.title.get_window_extent(renderer), page)
        assert not ax.title.get_window_extent(renderer).overlaps(sup.get_window_extent(renderer))


def test_colourbar_and_legend_are_inside_the_page():
    fig = map_figure([MapPanel(_blobs(), "p", left_out=LEFT_OUT["sparse"])], MIDTOWN, "t")
    renderer = _draw(fig)
    (ax,) = _map_axes(fig)
    cb = _image(ax).colorbar
    assert _inside(cb.ax.get_tightbbox(renderer), fig.bbox)
    assert _inside(ax.get_legend().get_window_extent(renderer), fig.bbox)
    assert _inside(ax.get_tightbbox(renderer), fig.bbox)


# ---------------------------------------------------------------- aspect


@pytest.mark.parametrize("box", [MIDTOWN, WIDE, BoxDomain.latlon(59.0, 61.0, 10.0, 11.0)])
def test_aspect_makes_a_kilometre_the_same_length_both_ways(box):
    lat = 0.5 * (box.low[0] + box.high[0])
    fig = map_figure([MapPanel(_blobs(), "p")], box)
    (ax,) = _map_axes(fig)
    assert ax.get_aspect() == pytest.approx(1 / math.cos(math.radians(lat)), rel=1e-9)
    assert geo_aspect(box) == pytest.approx(ax.get_aspect())
    _draw(fig)
    pos = ax.get_window_extent()
    km_per_deg = 6371.0 * math.pi / 180
    px_per_km_x = pos.width / ((box.high[1] - box.low[1]) * km_per_deg * math.cos(math.radians(lat)))
    px_per_km_y = pos.height / ((box.high[0] - box.low[0]) * km_per_deg)
    assert px_per_km_x == pytest.approx(px_per_km_y, rel=0.01)


def test_a_box_that_is_not_lat_lon_draws_square_cells():
    box = BoxDomain((0.0, 0.0), (1.0, 4.0), ("y", "x"))
    fig = map_figure([MapPanel(_blobs(64), "p")], box)
    (ax,) = _map_axes(fig)
    _draw(fig)
    pos = ax.get_window_extent()
    assert pos.width / 64 == pytest.approx(pos.height / 64, rel=0.01)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "y")


# ---------------------------------------------------------------- ticks


def _disjoint(labels, renderer) -> bool:
    boxes = [t.get_window_extent(renderer) for t in labels if t.get_visible() and t.get_text()]
    return len(boxes) >= 2 and not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


@pytest.mark.parametrize("box", [MIDTOWN, WIDE, BoxDomain.latlon(40.7500, 40.7512, -73.9900, -73.9880)])
@pytest.mark.parametrize("panels", [1, 3, 7])
def test_tick_labels_do_not_overlap(box, panels):
    fig = map_figure([MapPanel(_blobs(seed=i), f"panel {i}") for i in range(panels)], box, "title")
    renderer = _draw(fig)
    for ax in _map_axes(fig):
        assert _disjoint(ax.get_xticklabels(), renderer), [t.get_text() for t in ax.get_xticklabels()]
        assert _disjoint(ax.get_yticklabels(), renderer)
        assert _disjoint(_image(ax).colorbar.ax.get_yticklabels(), renderer)
        assert all("e" not in t.get_text() for t in ax.get_xticklabels())  # plain degrees, no offset notation
        assert not ax.xaxis.get_offset_text().get_text()


# ---------------------------------------------------------------- scales


def test_every_panel_has_its_own_scale_so_a_faint_baseline_is_visible():
    """The old renderer put every panel on the truth's scale: a Laplace baseline (mass spread thin over every
    cell) was nearly black. Here its scale ends at its own maximum."""
    truth = _blobs(seed=3)
    g = np.random.default_rng(4)
    noisy = np.maximum(g.laplace(size=truth.shape), 0)
    noisy = gaussian_heatmap(noisy / noisy.sum(), 2.0)  # as the demo and the CLI draw it
    assert noisy.max() < truth.max() / 10
    fig = map_figure({"truth": truth, "Laplace baseline": noisy}, MIDTOWN)
    a, b = (_image(ax) for ax in _map_axes(fig))
    assert a.norm.vmax == pytest.approx(truth.max()) and b.norm.vmax == pytest.approx(noisy.max())
    assert a.norm.vmin == b.norm.vmin == 0
    assert a.colorbar is not b.colorbar
    # the baseline's median cell is drawn well above the bottom of its colour scale (not near-black)
    positive = noisy[noisy > 0]
    assert b.norm(np.median(positive)) > 0.2


def test_a_signed_panel_uses_a_symmetric_diverging_scale_and_shows_negatives():
    g = np.random.default_rng(5)
    signed = g.laplace(size=(64, 64)) * 1e-4
    fig = map_figure([MapPanel(signed, "Laplace, before clipping")], MIDTOWN)
    (ax,) = _map_axes(fig)
    im = _image(ax)
    assert im.norm.vmin < 0 and im.norm.vmin == pytest.approx(-im.norm.vmax)
    assert im.norm.vmax == pytest.approx(np.abs(signed).max())
    assert not np.ma.getmaskarray(im.get_array())[signed < 0].any()  # negatives are drawn, not hidden
    assert im.colorbar.ax.get_ylabel() == UNITS_SIGNED


# ---------------------------------------------------------------- left-out cells


@pytest.mark.parametrize("algorithm", ["sparse", "dense", "laplace", "threshold"])
def test_left_out_cells_are_grey_and_the_legend_says_what_they_are(algorithm):
    h = _blobs(seed=6)
    zero = h == 0
    assert zero.any() and not zero.all()
    label = left_out_label(algorithm, 1.0)
    fig = map_figure([MapPanel(h, "p", left_out=label)], MIDTOWN)
    (ax,) = _map_axes(fig)
    im = _image(ax)
    assert np.array_equal(np.ma.getmaskarray(im.get_array()), zero)
    assert im.cmap.get_bad() == pytest.approx(to_rgba(ZERO_COLOUR))
    legend = ax.get_legend()
    assert legend is not None
    text = " ".join(" ".join(t.get_text().split()) for t in legend.get_texts())
    assert text == label and "no mass released" in text
    (patch,) = legend.get_patches()
    assert patch.get_facecolor() == pytest.approx(to_rgba(ZERO_COLOUR))
    if algorithm == "threshold":
        assert "top 1%" in text and "suppressed" in text
    if algorithm == "sparse":
        assert "left out" in text


def test_the_grey_is_really_drawn_in_the_png(tmp_path):
    h = np.zeros((64, 64))
    h[32:, :] = 1.0 / (32 * 64)  # the lower half (south) has no mass
    path = render_maps([MapPanel(h, "half")], tmp_path / "half.png", MIDTOWN)
    import matplotlib.image as mpimg

    img = mpimg.imread(path)[..., :3]
    grey = np.array(to_rgba(ZERO_COLOUR)[:3])
    assert (np.abs(img - grey).max(axis=-1) < 0.02).sum() > 10_000


def test_no_legend_without_left_out_cells_or_when_zeros_are_not_special():
    fig = map_figure([MapPanel(_blobs(zeros=False), "p"), MapPanel(_blobs(), "q", left_out=None)], MIDTOWN)
    a, b = _map_axes(fig)
    assert a.get_legend() is None and b.get_legend() is None
    assert not np.ma.getmaskarray(_image(b).get_array()).any()


def test_an_explicit_mask_marks_the_left_out_cells():
    h = _blobs(zeros=False)
    mask = np.zeros(h.shape, dtype=bool)
    mask[:10, :10] = True
    fig = map_figure([MapPanel(h, "p", left_out="suppressed", mask=mask)], MIDTOWN)
    (ax,) = _map_axes(fig)
    assert np.array_equal(np.ma.getmaskarray(_image(ax).get_array()), mask)
    with pytest.raises(ValueError, match="mask"):
        map_figure([MapPanel(h, "p", mask=mask[:5])], MIDTOWN)


# ---------------------------------------------------------------- speed, headless


def test_a_1024_grid_renders_in_a_couple_of_seconds(tmp_path):
    h = _blobs(1024, seed=7)
    render_maps([MapPanel(h, "warm-up")], tmp_path / "w.png", MIDTOWN)  # imports, fonts
    t = time.process_time()  # CPU time (Agg draws on one thread): other processes' load is not counted
    path = render_maps([MapPanel(h, "1024 x 1024")], tmp_path / "big.png", MIDTOWN, title="speed")
    took = time.process_time() - t
    assert path.stat().st_size > 10_000
    assert took < 5.0, took


def test_rendering_is_headless_and_leaves_no_pyplot_state(tmp_path):
    code = (
        "import sys, numpy as np\n"
        "from userdp.report.maps import render_maps\n"
        f"render_maps({{'p': np.ones((8, 8)) / 64}}, {str(tmp_path / 'x.png')!r})\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    env = {**os.environ, "DISPLAY": "", "MPLBACKEND": ""}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "x.png").stat().st_size > 1000


def test_refusals():
    with pytest.raises(ValueError, match="at least one panel"):
        map_figure([], MIDTOWN)
    with pytest.raises(ValueError, match="2-D"):
        map_figure({"p": np.ones(5)}, MIDTOWN)
