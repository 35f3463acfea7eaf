"""The first ``userdp demo`` after installing (a cold numba cache): a second process compiles the later steps'
kernels while the first runs the steps in order, and the releases are those of a warm run with the same seed."""

import json
import os
import subprocess
import sys

import pytest

from userdp.report import demo


def _demo(tmp_path, name, cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    out = tmp_path / name
    subprocess.run(
        [sys.executable, "-m", "userdp.cli.main", "demo", "--seed", "7", "--out", str(out)],
        env=env, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_cold_demo_compiles_ahead_and_releases_the_same(tmp_path):
    cache = tmp_path / "numba-cache"
    cold = _demo(tmp_path, "cold", cache)
    warm = _demo(tmp_path, "warm", cache)
    assert cold["compiled_ahead"] is True and warm["compiled_ahead"] is False
    for a, b in zip(cold["releases"], warm["releases"], strict=True):
        assert a["result"] == b["result"] and a["error"] == b["error"]


def test_helper_only_where_it_can_run(monkeypatch):
    """No second process on one core; without one, the predictions are computed in place."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert demo._start_helper(None) is None
    assert demo._received_predictions(None) is None


def test_the_helper_is_spawned_not_forked(monkeypatch):
    """The helper starts in a fresh interpreter: forking a process whose thread pools are running (PyArrow's,
    numba's: there are by the time the data are loaded) can crash its child, and did under the test workers.
    Its predictions (public sizes only) arrive, one per release."""
    import multiprocessing as mp

    contexts = []
    real = mp.get_context
    monkeypatch.setattr(mp, "get_context", lambda method=None: contexts.append(method) or real(method))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(demo, "_numba_cache_cold", lambda: False)  # (passed to the child: no compile-ahead)
    helper = demo._start_helper(None)
    assert contexts == ["spawn"] and helper is not None
    got = demo._received_predictions(helper)
    assert got is not None and len(got) == 4


def test_cache_probe_reads_numba_index():
    """The probe answers (a bool) on this numba: its private interface is still there."""
    assert isinstance(demo._numba_cache_cold(), bool)
