"""Run userdp's mutation suite: apply every mutant of ``tools/mutation`` to a private copy of the sources, run
the tests of its area, and report the mutants that survive.

    python3 tools/mutate.py                    # every mutant, two at a time; exit 1 if one survives
    python3 tools/mutate.py --list             # the mutants, a line each
    python3 tools/mutate.py --check            # each mutant still applies (its text occurs once) and compiles
    python3 tools/mutate.py --only ID [ID ...] # some mutants (ids or areas)
    python3 tools/mutate.py --baseline         # first run every mutant's tests unmutated (they must pass)
    python3 tools/mutate.py --no-fork          # a fresh ``python -m pytest`` per mutant (no fork server)
    python3 tools/mutate.py --record-timings   # also write each mutant's seconds to tools/mutation/timings.json

The sources are copied (``src/userdp`` with its ``__pycache__``, so numba's compiled kernels are reused) once
per job into a temporary folder and put first on ``PYTHONPATH``; the repository itself is never modified, so
an interrupted run leaves nothing behind. A mutant is *killed* when its tests fail (pytest exit status 1) or
time out; it *survives* when they pass. Any other exit status (no test collected, a collection error) is an
error in the mutant's description and fails the run too.

Fork server (the default; ``--no-fork`` turns it off). Most of a trivial mutant's time used to be start-up:
the interpreter and the third-party imports (numpy, scipy, pyarrow, duckdb, pandas, numba, pyspark, pytest:
about 2 s), not its tests. So each job starts one long-lived worker (this file with ``--serve``) that imports
those modules once (``_PRELOAD``) and freezes them out of the garbage collector's sight (``gc.freeze``: a
child's collections would walk them all, and copy every page they touch), then forks a child per mutant.
The child puts the job's mutated copy first on ``sys.path`` and in ``PYTHONPATH`` (tests start
subprocesses: the command line, Spark's JVM and its Python workers), takes exactly the environment the
subprocess of ``--no-fork`` would get, sends its output to pipes, runs ``pytest.main`` with the same
arguments in the repository root, runs the exit handlers and ``os._exit``s with pytest's status. The worker
reads the output until every process holding it has exited (as ``subprocess.run`` does), kills the child's
whole process group at the timeout, and returns the same status and output, so killed, survived and error
mean what they mean without the fork server.

What the worker may hold is what makes a fork safe, and it checks it before every fork: no ``userdp``
module, no ``tests`` module, nothing of hypothesis (a mutant whose tests never mention it runs without its
pytest plugin) nor of a pytest plugin (pytest could not rewrite its asserts), and a single thread (BLAS,
OpenMP and Arrow's jemalloc are told to start none in the worker), so that no child inherits a lock
held by a thread the fork left behind. Where a check fails the job says why on stderr and goes on without
the fork server. The worker's own settings never reach the tests: a child's environment is the runner's.

Mutants run longest first (their seconds in ``tools/mutation/timings.json``, which ``--record-timings``
rewrites; a mutant not in it is estimated from its tests, Spark's first), so that no long mutant starts
last.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import importlib.util
import json
import os
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_BASE_PATH = list(sys.path)  # before the line below: what the fork server's children start from
ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "userdp"
TIMINGS = ROOT / "tools" / "mutation" / "timings.json"
sys.path.insert(0, str(ROOT / "tools"))

from mutation import AREAS, CLASSES, KINDS, Mutant, all_mutants  # noqa: E402

_PRELOAD = (
    "numpy",
    "scipy.constants",
    "scipy.fft",
    "scipy.integrate",
    "scipy.interpolate",
    "scipy.linalg",
    "scipy.ndimage",
    "scipy.optimize",
    "scipy.sparse",
    "scipy.spatial",
    "scipy.special",
    "scipy.stats",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.csv",
    "pyarrow.dataset",
    "pyarrow.fs",
    "pyarrow.ipc",
    "pyarrow.json",
    "pyarrow.parquet",
    "pandas",
    "pandas.testing",
    "duckdb",
    "numba",
    "numba.typed",
    "cryptography",
    "yaml",
    "rich",
    "pyspark",
    "pyspark.sql",
    "pytest",
)
"""What the fork server imports once (those missing on a machine are left out): everything heavy that userdp
and its tests import, and nothing that imports userdp, hypothesis or a pytest plugin (``_unsafe_modules``)."""

_WORKER_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}
"""The fork server's own environment on top of the runner's: no thread started by an import (numpy's and
scipy's OpenBLAS, Arrow's jemalloc; numba starts its threads at the first parallel kernel, and polars at
import, so it is not preloaded). Its children get the runner's environment back."""


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | error
    seconds: float
    detail: str = ""
    baseline_seconds: float = 0.0  # with --baseline: its tests' seconds unmutated


def check(m: Mutant) -> str | None:
    """Why ``m`` cannot be applied (its text missing or ambiguous, the result not Python), or None."""
    path = SRC / m.path
    if not path.is_file():
        return f"no file src/userdp/{m.path}"
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        return f"its text occurs {n} times in src/userdp/{m.path} (must be once)"
    try:
        compile(text.replace(m.old, m.new), str(path), "exec")
    except SyntaxError as exc:
        return f"the mutated file does not compile ({exc.msg}, line {exc.lineno})"
    for t in m.tests:
        file, _, name = t.partition("::")
        if not (ROOT / file).is_file():
            return f"no test file {file}"
        func = name.split("::")[-1].split("[")[0]
        if func and not re.search(rf"^\s*(async )?def {re.escape(func)}\(", (ROOT / file).read_text(), re.MULTILINE):
            return f"no test {func} in {file}"
    return None


def _uses_hypothesis(tests: tuple[str, ...]) -> bool:
    """Whether any of these tests' files (or the conftest files above them) mentions hypothesis."""
    files = {ROOT / t.partition("::")[0] for t in tests}
    tests_dir = ROOT / "tests"
    files |= {d / "conftest.py" for f in list(files) for d in f.parents if d == tests_dir or tests_dir in d.parents}
    return any(f.is_file() and "hypothesis" in f.read_text() for f in files)


def _pytest_args(tests: tuple[str, ...]) -> list[str]:
    """pytest's arguments for a mutant's tests (both with and without the fork server)."""
    args = ["-x", "-q", "-rf", "--no-header", "-p", "no:cacheprovider", "-m", ""]
    if not _uses_hypothesis(tests):  # its pytest plugin costs about 1 s of start-up per mutant
        args += ["-p", "no:hypothesispytest"]
    return [*args, "-n", "0", *tests]  # one process: the runner runs mutants side by side itself


def _pytest_env(pythonpath: Path, mutant_id: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    env["USERDP_MUTANT"] = mutant_id
    return env


def _pytest(tests: tuple[str, ...], pythonpath: Path, timeout: float, mutant_id: str) -> tuple[int | None, str]:
    """Run the tests in a fresh ``python -m pytest`` (``--no-fork``): (exit status or None on timeout, output)."""
    cmd = [sys.executable, "-m", "pytest", *_pytest_args(tests)]
    env = _pytest_env(pythonpath, mutant_id)
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    return p.returncode, p.stdout + p.stderr


# The fork server: the runner's side.


class ForkServer:
    """One job's fork server (``tools/mutate.py --serve``), started on first use; :meth:`pytest` runs a
    mutant's tests in a child forked from it and answers as :func:`_pytest` does. Where the server cannot
    fork safely (see ``_unsafe_modules`` and ``_threads``), it says why once on stderr and the job runs
    :func:`_pytest` instead."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.unsafe = ""

    def _start(self) -> None:
        env = {**os.environ, **_WORKER_ENV}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve"]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def _ask(self, request: dict) -> dict | None:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            self.close()
            return None
        return json.loads(line)

    def pytest(
        self, tests: tuple[str, ...], pythonpath: Path, timeout: float, mutant_id: str
    ) -> tuple[int | None, str]:
        if self.unsafe:
            return _pytest(tests, pythonpath, timeout, mutant_id)
        request = {
            "args": _pytest_args(tests),
            "env": _pytest_env(pythonpath, mutant_id),
            "pythonpath": str(pythonpath),
            "timeout": timeout,
        }
        reply = self._ask(request)
        if reply is None:
            return -1, "the fork server died"
        if "unsafe" in reply:
            self.unsafe = reply["unsafe"]
            print(f"mutate: the fork server cannot fork safely ({self.unsafe}); this job goes on without it",
                  file=sys.stderr, flush=True)  # fmt: skip
            self.close()
            return _pytest(tests, pythonpath, timeout, mutant_id)
        if reply["rc"] is None:
            return None, f"timed out after {timeout:.0f} s"
        return reply["rc"], reply["stdout"] + reply["stderr"]

    def close(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the end of its requests: the server returns
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()


# The fork server: the worker's side.


@functools.cache
def _never() -> frozenset[str]:
    from importlib.metadata import entry_points

    never = {"userdp", "tests", "hypothesis", "_hypothesis_pytestplugin", "_hypothesis_globals"}
    return frozenset(never | {ep.value.split(":")[0].split(".")[0] for ep in entry_points(group="pytest11")})


def _unsafe_modules() -> list[str]:
    """Modules the fork server holds and must not: userdp and the tests (a child must import the mutant),
    hypothesis (a mutant may run without its plugin), and pytest's plugins (pytest marks them for assertion
    rewriting, and warns, an error here, when one is already imported)."""
    never = _never()
    return sorted(n for n in sys.modules if n.split(".")[0] in never)


def _threads() -> int:
    """The worker's threads, native ones included where Linux tells them."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _serve() -> int:
    """The fork server's loop: a request per line on stdin (JSON), a reply per line on stdout."""
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # what an import prints goes to the runner's stderr, never into the replies
    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    gc.freeze()  # the preloaded objects out of the collector's sight: a child's collections neither walk
    # them (about 1 s of a small mutant) nor write to their pages (which the fork would then copy)
    base_path = _BASE_PATH if sys.flags.safe_path else _BASE_PATH[1:]  # without this file's folder
    for line in requests:
        request = json.loads(line)
        if unsafe := _unsafe_modules():
            reply = {"unsafe": f"it has imported {', '.join(unsafe[:5])}"}
        elif (n := _threads()) != 1:
            reply = {"unsafe": f"it runs {n} threads"}
        else:
            reply = _fork_and_run(request, base_path, (requests.fileno(), replies.fileno()))
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


def _fork_and_run(request: dict, base_path: list[str], private: tuple[int, ...]) -> dict:
    """Fork a child that runs pytest; collect its output until every process holding it has exited."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        status = 70
        try:
            os.setpgid(0, 0)  # its own process group: the timeout kills everything it started
            for fd in (*private, out_r, err_r):
                os.close(fd)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.close(out_w)
            os.close(err_w)
            status = _child(request, base_path)
        except BaseException:  # noqa: B036 -- the child must reach os._exit whatever happens
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)
    os.close(out_w)
    os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    try:
        wait_status = _collect(pid, chunks, time.monotonic() + request["timeout"])
    except BaseException:  # interrupted (^C): the child and what it started go too
        _kill_group(pid)
        raise
    finally:
        for fd in chunks:
            os.close(fd)
    if wait_status is None:
        return {"rc": None}
    text = {fd: b"".join(c).decode(errors="replace") for fd, c in chunks.items()}
    return {"rc": os.waitstatus_to_exitcode(wait_status), "stdout": text[out_r], "stderr": text[err_r]}


def _collect(pid: int, chunks: dict[int, list[bytes]], deadline: float) -> int | None:
    """Read the child's output until it closes (every process holding it has exited, as ``subprocess.run``
    waits), then reap the child: its wait status, or None (the child's group killed) at the deadline."""
    open_fds = list(chunks)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            _kill_group(pid)
            return None
        ready, _, _ = select.select(open_fds, [], [], left)
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if data:
                chunks[fd].append(data)
            else:
                open_fds.remove(fd)
    while True:  # the output closed: the child itself exits
        wpid, status = os.waitpid(pid, os.WNOHANG)
        if wpid == pid:
            return status
        if time.monotonic() >= deadline:
            _kill_group(pid)
            return None
        time.sleep(0.01)


def _kill_group(pid: int) -> None:
    """Kill the child's process group (the child and all it started) and reap the child."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _child(request: dict, base_path: list[str]) -> int:
    """In the forked child: become what ``python -m pytest ARGS`` run by :func:`_pytest` would be, run it."""
    os.environ.clear()
    os.environ.update(request["env"])  # the runner's environment, the mutated copy first on PYTHONPATH
    first = [request["pythonpath"]] if sys.flags.safe_path else [str(ROOT), request["pythonpath"]]
    sys.path[:] = [*first, *base_path]  # the repository root (as ``-m`` puts it), then PYTHONPATH's order
    for name in [n for n in sys.modules if n == "mutation" or n.startswith("mutation.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("pytest.__main__")
    main = types.ModuleType("__main__")  # as under ``-m pytest`` (what multiprocessing's spawn re-imports)
    main.__spec__, main.__file__ = spec, spec.origin if spec else None
    sys.modules["__main__"] = main
    sys.argv = [main.__file__ or "pytest", *request["args"]]
    os.chdir(ROOT)
    import pytest

    status = int(pytest.main(request["args"]))
    threading._shutdown()  # what the interpreter's exit does: wait for threads, run the exit handlers
    import atexit

    atexit._run_exitfuncs()
    return status


def _killer(output: str) -> str:
    m = re.search(r"^FAILED (\S+)", output, re.MULTILINE)
    return m.group(1) if m else ""


Runner = Callable[[tuple[str, ...], Path, float, str], tuple[int | None, str]]


def _forget_bytecode(target: Path) -> None:
    """Remove the module's compiled bytecode in the copy: its header holds the source's mtime to the second
    and its size, so a mutant written within a second of another of the same size would run its bytecode."""
    for pyc in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def run_one(m: Mutant, workdir: Path, timeout: float, pytest: Runner = _pytest) -> Outcome:
    """Apply ``m`` in ``workdir`` (a copy of ``src``), run its tests (with ``pytest``: :func:`_pytest` or a
    :class:`ForkServer`'s), restore the file."""
    target = workdir / "userdp" / m.path
    original = (SRC / m.path).read_text()
    st = (SRC / m.path).stat()
    t0 = time.perf_counter()
    try:
        target.write_text(original.replace(m.old, m.new))
        _forget_bytecode(target)
        rc, out = pytest(m.tests, workdir, timeout, m.id)
    finally:
        target.write_text(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # the compiled kernels' caches stay valid
        _forget_bytecode(target)
    dt = time.perf_counter() - t0
    if rc is None:
        return Outcome(m, "killed", dt, out)
    if rc == 1:
        return Outcome(m, "killed", dt, _killer(out))
    if rc == 0:
        return Outcome(m, "survived", dt, "its tests pass")
    tail = "\n".join(out.strip().splitlines()[-15:])
    return Outcome(m, "error", dt, f"pytest exit status {rc}:\n{tail}")


def baseline(m: Mutant, workdir: Path, timeout: float, pytest: Runner = _pytest) -> Outcome:
    t0 = time.perf_counter()
    rc, out = pytest(m.tests, workdir, timeout, "")
    dt = time.perf_counter() - t0
    if rc == 0:
        return Outcome(m, "passes", dt)
    tail = "\n".join(out.strip().splitlines()[-15:])
    return Outcome(m, "error", dt, f"unmutated, its tests fail (exit status {rc}):\n{tail}")


def _copy_sources(dest: Path) -> Path:
    work = dest / "src"
    shutil.copytree(SRC, work / "userdp", copy_function=shutil.copy2)  # mtimes kept: numba's caches hold
    return work


def _recorded() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(TIMINGS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _estimate(m: Mutant) -> float:
    """A mutant's seconds where none are recorded: a Spark test starts a JVM; more tests take longer."""
    spark = m.path.startswith("engines/spark") or any("spark" in t for t in m.tests)
    return (60.0 if spark else 0.0) + 10.0 * len(m.tests)


def longest_first(mutants: list[Mutant]) -> list[Mutant]:
    """The order the mutants start in: longest first (recorded seconds, else :func:`_estimate`), so that the
    last to start are short and the jobs finish together."""
    recorded = _recorded()
    return sorted(mutants, key=lambda m: -recorded.get(m.id, _estimate(m)))


def record_timings(results: list[Outcome]) -> None:
    """Merge these mutants' seconds into ``tools/mutation/timings.json`` (mutants that no longer exist
    dropped)."""
    ids = {m.id for m in all_mutants()}
    times = {k: v for k, v in _recorded().items() if k in ids}
    times |= {o.mutant.id: round(o.seconds, 1) for o in results}
    TIMINGS.write_text(json.dumps(dict(sorted(times.items())), indent=0) + "\n")


def run(mutants: list[Mutant], jobs: int, timeout: float, do_baseline: bool, fork: bool = True) -> list[Outcome]:
    tmp = Path(tempfile.mkdtemp(prefix="userdp-mutation-"))
    servers = [ForkServer() for _ in range(jobs)] if fork else []
    stop = threading.Event()
    try:
        workdirs = [_copy_sources(tmp / f"job{j}") for j in range(jobs)]
        todo: queue.Queue[Mutant] = queue.Queue()
        for m in longest_first(mutants):
            todo.put(m)
        results: list[Outcome] = []
        lock = threading.Lock()
        width = max(len(m.id) for m in mutants)

        def work(j: int) -> None:
            wd = workdirs[j]
            pytest = servers[j].pytest if fork else _pytest
            while not stop.is_set():
                try:
                    m = todo.get_nowait()
                except queue.Empty:
                    return
                o = baseline(m, wd, timeout, pytest) if do_baseline else run_one(m, wd, timeout, pytest)
                if do_baseline and o.status == "passes":
                    seconds = o.seconds
                    o = run_one(m, wd, timeout, pytest)
                    o.baseline_seconds = seconds
                with lock:
                    results.append(o)
                    first = o.detail.splitlines()[0] if o.detail else ""
                    print(f"[{len(results):3d}/{len(mutants)}] {o.status:8s} {m.id:{width}s} {o.seconds:6.1f} s  "
                          f"{first}", flush=True)  # fmt: skip
                    if o.status == "error":
                        print("\n".join("      " + line for line in o.detail.splitlines()[1:]), flush=True)

        threads = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(jobs)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        finally:
            stop.set()
        return results
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check", action="store_true", help="check that every mutant applies and compiles; no tests")
    ap.add_argument("--only", nargs="+", metavar="ID", help="mutant ids or areas to run")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="mutants run at once")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a mutant's tests may take")
    ap.add_argument("--baseline", action="store_true", help="run each mutant's tests unmutated first")
    ap.add_argument("--no-fork", action="store_true", help="a fresh python -m pytest per mutant (no fork server)")
    ap.add_argument("--record-timings", action="store_true", help=f"write the mutants' seconds to {TIMINGS.name}")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # a job's fork server
    a = ap.parse_args(argv)
    if a.serve:
        return _serve()
    mutants = all_mutants()
    if a.only:
        wanted = set(a.only)
        unknown = wanted - {m.id for m in mutants} - set(AREAS)
        if unknown:
            print(f"mutate: error: no mutant or area {sorted(unknown)}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.id in wanted or _area(m) in wanted]
    if a.list:
        for m in mutants:
            print(f"{m.id:40s} {m.kind:18s} {m.path:32s} {','.join(map(str, m.classes))}")
        print(f"{len(mutants)} mutants")
        return 0
    bad = [(m, why) for m in mutants if (why := check(m))]
    for m, why in bad:
        print(f"mutate: mutant {m.id}: {why}", file=sys.stderr)
    if bad:
        return 1
    if a.check:
        print(f"{len(mutants)} mutants apply and compile")
        return 0
    t0 = time.perf_counter()
    results = run(mutants, max(1, a.jobs), a.timeout, a.baseline, fork=not a.no_fork)
    killed = [o for o in results if o.status == "killed"]
    survived = [o for o in results if o.status == "survived"]
    errors = [o for o in results if o.status == "error"]
    if a.record_timings:
        record_timings(results)
    print()
    for o in survived:
        print(f"SURVIVED {o.mutant.id} ({o.mutant.kind}, src/userdp/{o.mutant.path}): {o.mutant.why}")
    for o in errors:
        print(f"ERROR    {o.mutant.id}: {o.detail.splitlines()[0]}")
    kinds = sorted({o.mutant.kind for o in killed})
    classes = sorted({c for o in killed for c in o.mutant.classes})
    print(
        f"mutation suite: {len(killed)} of {len(mutants)} mutants killed, {len(survived)} survived, "
        f"{len(errors)} errors, in {time.perf_counter() - t0:.0f} s ({max(1, a.jobs)} at a time, "
        f"{'no fork server' if a.no_fork else 'fork servers'}; {sum(o.seconds for o in results):.0f} s of mutants"
        f"{f', {sum(o.baseline_seconds for o in results):.0f} s of baselines' if a.baseline else ''}); "
        f"kinds killed: {len(kinds)} of {len(KINDS)}; classes guarded: {classes} of {sorted(CLASSES)}"
    )
    return 0 if len(killed) == len(mutants) else 1


def _area(m: Mutant) -> str:
    for area in AREAS:
        mod = sys.modules.get(f"mutation.{area}")
        if mod is not None and m in mod.MUTANTS:
            return area
    return ""


if __name__ == "__main__":
    sys.exit(main())
