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


_LITERALS = r"""
import gc, io
from numba.core.registry import CPUDispatcher
from rich.console import Console
from userdp.report import demo
demo.run_demo({out!r}, console=Console(file=io.StringIO()))
bad = []
for o in gc.get_objects():
    if isinstance(o, CPUDispatcher) and o.py_func.__module__.startswith("userdp"):
        for sig in o.signatures:
            if any("Literal" in str(t) for t in sig):
                bad.append(f"{{o.py_func.__module__}}.{{o.py_func.__qualname__}}{{sig}}")
print("LITERAL:" + repr(sorted(bad)))
"""


@pytest.mark.slow
def test_no_kernel_compiles_for_literal_arguments(tmp_path):
    """A kernel called with a literal ``0`` (``pos = 0``, then ``sort_range(out, pos, ...)``) is compiled once for
    the literal type and again for ``int64``: seconds of a first run each (issue 34). On a cold cache, no userdp
    kernel the demo runs has a signature with a literal argument."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    code = _LITERALS.format(out=str(tmp_path / "out"))
    run = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert "LITERAL:[]" in run.stdout, run.stdout[-2000:]
