"""Run userdp's mutation suite: apply every mutant of ``tools/mutation`` to a private copy of the sources, run
the tests of its area, and report the mutants that survive.

    python3 tools/mutate.py                    # every mutant, two at a time; exit 1 if one survives
    python3 tools/mutate.py --list             # the mutants, a line each
    python3 tools/mutate.py --check            # each mutant still applies (its text occurs once) and compiles
    python3 tools/mutate.py --only ID [ID ...] # some mutants (ids or areas)
    python3 tools/mutate.py --baseline         # first run every mutant's tests unmutated (they must pass)

The sources are copied (``src/userdp`` with its ``__pycache__``, so numba's compiled kernels are reused) once
per job into a temporary folder and put first on ``PYTHONPATH``; the repository itself is never modified, so
an interrupted run leaves nothing behind. A mutant is *killed* when its tests fail (pytest exit status 1) or
time out; it *survives* when they pass. Any other exit status (no test collected, a collection error) is an
error in the mutant's description and fails the run too.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "userdp"
sys.path.insert(0, str(ROOT / "tools"))

from mutation import AREAS, CLASSES, KINDS, Mutant, all_mutants  # noqa: E402


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | error
    seconds: float
    detail: str = ""


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


def _pytest(tests: tuple[str, ...], pythonpath: Path, timeout: float, mutant_id: str) -> tuple[int | None, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    env["USERDP_MUTANT"] = mutant_id
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "--no-header", "-p", "no:cacheprovider", "-m", ""]
    if not _uses_hypothesis(tests):  # its pytest plugin costs about 1 s of start-up per mutant
        cmd += ["-p", "no:hypothesispytest"]
    cmd += ["-n", "0", *tests]  # one process: the runner runs mutants side by side itself
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    return p.returncode, p.stdout + p.stderr


def _killer(output: str) -> str:
    m = re.search(r"^FAILED (\S+)", output, re.MULTILINE)
    return m.group(1) if m else ""


def run_one(m: Mutant, workdir: Path, timeout: float) -> Outcome:
    """Apply ``m`` in ``workdir`` (a copy of ``src``), run its tests, restore the file."""
    target = workdir / "userdp" / m.path
    original = (SRC / m.path).read_text()
    st = (SRC / m.path).stat()
    t0 = time.perf_counter()
    try:
        target.write_text(original.replace(m.old, m.new))
        rc, out = _pytest(m.tests, workdir, timeout, m.id)
    finally:
        target.write_text(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # the compiled kernels' caches stay valid
    dt = time.perf_counter() - t0
    if rc is None:
        return Outcome(m, "killed", dt, out)
    if rc == 1:
        return Outcome(m, "killed", dt, _killer(out))
    if rc == 0:
        return Outcome(m, "survived", dt, "its tests pass")
    tail = "\n".join(out.strip().splitlines()[-15:])
    return Outcome(m, "error", dt, f"pytest exit status {rc}:\n{tail}")


def baseline(m: Mutant, workdir: Path, timeout: float) -> Outcome:
    t0 = time.perf_counter()
    rc, out = _pytest(m.tests, workdir, timeout, "")
    dt = time.perf_counter() - t0
    if rc == 0:
        return Outcome(m, "passes", dt)
    tail = "\n".join(out.strip().splitlines()[-15:])
    return Outcome(m, "error", dt, f"unmutated, its tests fail (exit status {rc}):\n{tail}")


def _copy_sources(dest: Path) -> Path:
    work = dest / "src"
    shutil.copytree(SRC, work / "userdp", copy_function=shutil.copy2)  # mtimes kept: numba's caches hold
    return work


def run(mutants: list[Mutant], jobs: int, timeout: float, do_baseline: bool) -> list[Outcome]:
    tmp = Path(tempfile.mkdtemp(prefix="userdp-mutation-"))
    try:
        workdirs = [_copy_sources(tmp / f"job{j}") for j in range(jobs)]
        todo: queue.Queue[Mutant] = queue.Queue()
        for m in mutants:
            todo.put(m)
        results: list[Outcome] = []
        lock = threading.Lock()
        width = max(len(m.id) for m in mutants)

        def work(wd: Path) -> None:
            while True:
                try:
                    m = todo.get_nowait()
                except queue.Empty:
                    return
                o = baseline(m, wd, timeout) if do_baseline else run_one(m, wd, timeout)
                if do_baseline and o.status == "passes":
                    o = run_one(m, wd, timeout)
                with lock:
                    results.append(o)
                    first = o.detail.splitlines()[0] if o.detail else ""
                    print(f"[{len(results):3d}/{len(mutants)}] {o.status:8s} {m.id:{width}s} {o.seconds:6.1f} s  "
                          f"{first}", flush=True)  # fmt: skip
                    if o.status == "error":
                        print("\n".join("      " + line for line in o.detail.splitlines()[1:]), flush=True)

        threads = [threading.Thread(target=work, args=(wd,)) for wd in workdirs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check", action="store_true", help="check that every mutant applies and compiles; no tests")
    ap.add_argument("--only", nargs="+", metavar="ID", help="mutant ids or areas to run")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="mutants run at once")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a mutant's tests may take")
    ap.add_argument("--baseline", action="store_true", help="run each mutant's tests unmutated first")
    a = ap.parse_args(argv)
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
    results = run(mutants, max(1, a.jobs), a.timeout, a.baseline)
    killed = [o for o in results if o.status == "killed"]
    survived = [o for o in results if o.status == "survived"]
    errors = [o for o in results if o.status == "error"]
    print()
    for o in survived:
        print(f"SURVIVED {o.mutant.id} ({o.mutant.kind}, src/userdp/{o.mutant.path}): {o.mutant.why}")
    for o in errors:
        print(f"ERROR    {o.mutant.id}: {o.detail.splitlines()[0]}")
    kinds = sorted({o.mutant.kind for o in killed})
    classes = sorted({c for o in killed for c in o.mutant.classes})
    print(
        f"mutation suite: {len(killed)} of {len(mutants)} mutants killed, {len(survived)} survived, "
        f"{len(errors)} errors, in {time.perf_counter() - t0:.0f} s ({max(1, a.jobs)} at a time); "
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
