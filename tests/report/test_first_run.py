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
    """No second process from a process with threads (a pytest worker: forking it could deadlock the child);
    without one, the predictions are computed in place."""
    monkeypatch.setattr("threading.active_count", lambda: 2)
    assert demo._start_helper(None) is None
    assert demo._received_predictions(None) is None


def test_cache_probe_reads_numba_index():
    """The probe answers (a bool) on this numba: its private interface is still there."""
    assert isinstance(demo._numba_cache_cold(), bool)
