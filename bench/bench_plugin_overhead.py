"""Issue 28's cost figures: what the pytest plugin's recording adds to a suite of short tests, beside testmon.

    .venv/bin/python bench/bench_plugin_overhead.py [--tests 1000] [--files 20] [--modules 20] [--repeat 5]
                                                    [--long-lines 1000000] [--keep]

A temporary folder gets a generated project, made a git repository with
everything committed (the recorder measures Python code only inside a git
checkout, relative to its top level):

* ``pkg/``: ``--modules`` modules of 5 small functions each (a branch, an
  arithmetic line or two; some call a function of the next module), and
  ``pkg/hot.py``, one loop for the long test;
* ``tests/suite/``: ``--tests`` short tests over ``--files`` files; each
  calls two of the package's functions and checks the sum, and every
  fourth launches a fake kernel;
* ``tests/long/``: one test that executes about ``--long-lines`` lines of
  ``pkg/hot.py`` (counted with ``sys.settrace`` here) and writes the
  seconds its loop took;
* ``tests/conftest.py``: the fake CUPTI backend of tests/test_plugin_records.py
  (``KernelRecorder.backend_factory``) and a ``launch`` fixture that is a
  no-op when nothing records.

Each row is a whole ``python -m pytest -q -p no:cacheprovider`` run in a fresh
process (testmon's without ``-p no:cacheprovider``: it fails without the cache
plugin's options, KeyError 'lf') (bytecode cached by a warm-up run first), ``--repeat`` times, the rows
interleaved within each round so that a change of load hits all alike:

1. plain pytest (the installed plugins loaded, none active);
2. ``--kernel-record DIR --kernel-record-python off``: kernels only;
3. ``--kernel-record DIR``: kernels and Python coverage (the default);
4. pytest-testmon: ``--testmon`` on a fresh .testmondata (its recording run),
   then again with nothing changed (it deselects every test: its cheap path);
5. pytest-cov ``--cov=. --cov-context=test --cov-report=``: coverage.py
   with per-test contexts alone, for reference (skipped, and said, when
   pytest-cov is not installed).

Printed: median and min wall seconds and per-test milliseconds of each row,
the per-test overhead of (3) over (1) and over (2), (3)/(4), the
recording's bytes (pytest.jsonl) and bytes per test (.testmondata's and
.coverage's beside it), and for the long test its loop's own seconds under
each mode, so the tracing cost per executed line, free of start-up and
writing. The figures are printed, never asserted: they depend on the machine
and its load (the load average is printed before and after).

coverage.py's core here is its C tracer (``sys.settrace``): this machine has
Python 3.11 only (Debian bookworm ships no 3.12, and PyPI no CPython
interpreter), so ``sys.monitoring`` (Python 3.12+, which coverage.py uses with
``COVERAGE_CORE=sysmon``, and by default from 3.14) cannot be measured here.
Run the bench under a 3.12+ environment with ``--sysmon`` to add the rows
with ``COVERAGE_CORE=sysmon``; under 3.11 that option only says it cannot.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _run import ENV  # noqa: E402

FUNCTIONS = 5  # per module
PYTEST = [sys.executable, "-m", "pytest", "-q"]
NO_CACHE = ["-p", "no:cacheprovider"]  # every row but testmon's, which reads the cache plugin's options

CONFTEST = '''
from types import SimpleNamespace

import pytest

from kernel_symbol_map.recorder.process import ProcessRecorder
from kernel_symbol_map.recorder.pytest_plugin import KernelRecorder


class FakeCupti:
    """Stands in for CUPTI (as tests/test_plugin_records.py's): external ids, activity delivered to ``take``."""

    def __init__(self, take):
        self.take, self.stack, self.correlation = take, [], 0

    def start(self):
        pass

    def push(self, external_id):
        self.stack.append(external_id)
        return True

    def pop(self):
        self.stack.pop()

    def flush(self):
        return 0

    def launch(self, name):
        self.correlation += 1
        records = [SimpleNamespace(kind="CONCURRENT_KERNEL", name=name, correlation_id=self.correlation)]
        if self.stack:
            records.append(SimpleNamespace(kind="EXTERNAL_CORRELATION", correlation_id=self.correlation,
                                           external_id=self.stack[-1]))
        self.take(records)


KernelRecorder.backend_factory = FakeCupti


def _launch(name):
    recorder = ProcessRecorder.current
    if recorder is not None and recorder.backend is not None:
        recorder.backend.launch(name)


@pytest.fixture
def launch():
    return _launch
'''

LONG_TEST = '''
import os
import time

from pkg.hot import spin


def test_long():
    t0 = time.perf_counter()
    spin({n})
    seconds = time.perf_counter() - t0
    with open(os.environ["BENCH_LONG_OUT"], "a") as f:
        f.write(f"{{seconds}}\\n")
'''

HOT = '''
def spin(n):
    total = 0
    for i in range(n):
        total += i & 7
        if total > 1000:
            total -= 1000
    return total
'''


def module_source(m: int, modules: int) -> str:
    out = [f'"""Generated module {m}."""\n']
    if m + 1 < modules:
        out.append(f"from pkg import mod{m + 1:02d}\n")
    for j in range(FUNCTIONS):
        a, b, c = 3 + m + j, 7 * j + 1, m % 5 + 2
        out.append(f"\n\ndef f{j}(x):\n    y = x * {a} + {b}\n    if y % {c} == 0:\n        y //= {c}\n"
                   f"    else:\n        y -= {j + 1}\n")
        if j == FUNCTIONS - 1 and m + 1 < modules:
            out.append("    y += mod%02d.f0(x & 15)\n" % (m + 1))
        out.append("    return y\n")
    return "".join(out)


def write_project(root: Path, tests: int, files: int, modules: int, long_lines: int) -> tuple[int, int]:
    """The project under ``root``, committed; (the long test's loop count, the lines it executes)."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    for m in range(modules):
        (root / "pkg" / f"mod{m:02d}.py").write_text(module_source(m, modules))
    (root / "pkg" / "hot.py").write_text(HOT)
    (root / "tests" / "suite").mkdir(parents=True)
    (root / "tests" / "long").mkdir()
    (root / "tests" / "conftest.py").write_text(CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\nfilterwarnings =\n"
                                      "    ignore:Module already imported so cannot be rewritten\n")
    (root / ".gitignore").write_text("__pycache__/\n.testmondata*\n.coverage*\n.pytest_cache/\n")

    sys.path.insert(0, str(root))  # the expected sums, from the generated code itself
    try:
        mods = [importlib.import_module(f"pkg.mod{m:02d}") for m in range(modules)]
        per_file = [tests // files + (1 if f < tests % files else 0) for f in range(files)]
        t = 0
        for f, count in enumerate(per_file):
            lines = ["from pkg import " + ", ".join(f"mod{m:02d}" for m in range(modules)) + "\n"]
            for _ in range(count):
                (ma, fa), (mb, fb) = divmod(t * 7 % (modules * FUNCTIONS), FUNCTIONS), \
                    divmod((t * 13 + 5) % (modules * FUNCTIONS), FUNCTIONS)
                x = t % 97
                want = getattr(mods[ma], f"f{fa}")(x) + getattr(mods[mb], f"f{fb}")(x + 1)
                kernel = f'    launch("_Z6kernel{t}v")\n' if t % 4 == 0 else ""
                lines.append(f"\n\ndef test_{t:04d}(launch):\n{kernel}"
                             f"    assert mod{ma:02d}.f{fa}({x}) + mod{mb:02d}.f{fb}({x + 1}) == {want}\n")
                t += 1
            (root / "tests" / "suite" / f"test_{f:02d}.py").write_text("".join(lines))
        hot = importlib.import_module("pkg.hot")
        per_iteration = count_lines(hot.spin, 1000, root) / 1000
        n = max(1, round(long_lines / per_iteration))
        executed = count_lines(hot.spin, n, root)
    finally:
        sys.path.remove(str(root))
        for name in [k for k in sys.modules if k == "pkg" or k.startswith("pkg.")]:
            del sys.modules[name]
    (root / "tests" / "long" / "test_long.py").write_text(LONG_TEST.format(n=n))
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
           "-c", "commit.gpgsign=false"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "generated"]):
        subprocess.run(git + command, check=True, capture_output=True)
    return n, executed


def count_lines(fn: Callable[[int], int], n: int, root: Path) -> int:
    """Line events ``fn(n)`` raises in the project's files: what a line tracer sees."""
    count = 0
    prefix = str(root)

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202
        nonlocal count
        if not frame.f_code.co_filename.startswith(prefix):
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn(n)
    finally:
        sys.settrace(None)
    return count


class Bench:
    def __init__(self, root: Path, scratch: Path, env: dict[str, str]) -> None:
        self.root, self.scratch, self.env = root, scratch, env
        self.long_out = scratch / "long.txt"
        self.last = ""

    def run(self, args: list[str], expect: str = "passed", cache: bool = False) -> float:
        env = dict(self.env, BENCH_LONG_OUT=str(self.long_out))
        t0 = time.perf_counter()
        proc = subprocess.run(PYTEST + ([] if cache else NO_CACHE) + args, cwd=self.root, env=env,
                              capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - t0
        self.last = proc.stdout
        tail = proc.stdout.strip().splitlines()[-1:] or [""]
        if proc.returncode not in (0, 5) or expect not in proc.stdout:
            raise SystemExit(f"pytest {' '.join(args)} failed ({proc.returncode}), wanted {expect!r} in {tail}:\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return seconds

    def record_dir(self, name: str) -> Path:
        folder = self.scratch / name
        shutil.rmtree(folder, ignore_errors=True)
        return folder

    def reset(self, *names: str) -> None:
        for name in names:
            for path in self.root.glob(name):
                path.unlink()


def stats(seconds: list[float]) -> tuple[float, float]:
    return statistics.median(seconds), min(seconds)


def cov_installed() -> bool:
    return importlib.util.find_spec("pytest_cov") is not None


def testmon_installed() -> bool:
    return importlib.util.find_spec("testmon") is not None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=1000, help="short tests in the suite (default 1000)")
    ap.add_argument("--files", type=int, default=20, help="test files they are spread over (default 20)")
    ap.add_argument("--modules", type=int, default=20, help="modules of the generated package (default 20)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each row (default 5)")
    ap.add_argument("--long-lines", type=int, default=1_000_000,
                    help="lines the long test executes (default 1e6)")
    ap.add_argument("--sysmon", action="store_true",
                    help="also rows (3) and the long test with COVERAGE_CORE=sysmon (Python 3.12+ only)")
    ap.add_argument("--keep", action="store_true", help="keep the generated project and print where")
    args = ap.parse_args()

    import coverage

    top = Path(tempfile.mkdtemp(prefix="bench-plugin-"))
    root, scratch = top / "project", top / "scratch"
    scratch.mkdir()
    env = {k: v for k, v in ENV.items() if k not in ("PYTEST_ADDOPTS", "COVERAGE_CORE", "COVERAGE_PROCESS_START")}
    env["PYTHONHASHSEED"] = "0"
    load_before = os.getloadavg()
    started = time.perf_counter()
    try:
        n_loop, executed = write_project(root, args.tests, args.files, args.modules, args.long_lines)
        bench = Bench(root, scratch, env)
        suite, long = ["tests/suite"], ["tests/long"]
        have_cov, have_testmon = cov_installed(), testmon_installed()
        sysmon = args.sysmon and sys.version_info >= (3, 12)

        passed = f"{args.tests} passed"
        rows: dict[str, list[float]] = {}
        long_wall: dict[str, list[float]] = {}
        long_loop: dict[str, list[float]] = {}

        def suite_modes() -> list[tuple[str, Callable[[], float]]]:
            modes: list[tuple[str, Callable[[], float]]] = [
                ("1 plain", lambda: bench.run(suite, passed)),
                ("2 kernels only", lambda: bench.run(suite + ["--kernel-record", str(bench.record_dir("rec2")),
                                                              "--kernel-record-python", "off"], passed)),
                ("3 kernels + python", lambda: bench.run(suite + ["--kernel-record",
                                                                  str(bench.record_dir("rec3"))], passed)),
            ]
            if sysmon:
                modes.append(("3s kernels + python, sysmon", lambda: sysmon_run(suite, "rec3s", passed)))
            if have_testmon:
                modes.append(("4 testmon, recording run", testmon_first))
                modes.append(("4b testmon, nothing changed", testmon_again))
            if have_cov:
                modes.append(("5 pytest-cov --cov-context=test", lambda: cov_run(suite, passed)))
            return modes

        def testmon_first() -> float:
            bench.reset(".testmondata*")
            return bench.run(suite + ["--testmon"], passed, cache=True)

        def testmon_again() -> float:
            seconds = bench.run(suite + ["--testmon"], "", cache=True)
            if "passed" in bench.last:
                raise SystemExit(f"testmon ran tests with nothing changed: {bench.last[-2000:]}")
            return seconds

        def cov_run(paths: list[str], expect: str) -> float:
            bench.reset(".coverage*")
            return bench.run(paths + ["--cov=.", "--cov-context=test", "--cov-report="], expect)

        def sysmon_run(paths: list[str], folder: str, expect: str) -> float:
            saved = bench.env
            bench.env = dict(saved, COVERAGE_CORE="sysmon")
            try:
                return bench.run(paths + ["--kernel-record", str(bench.record_dir(folder))], expect)
            finally:
                bench.env = saved

        long_modes: list[tuple[str, Callable[[], float]]] = [
            ("1 plain", lambda: bench.run(long, "1 passed")),
            ("2 kernels only", lambda: bench.run(long + ["--kernel-record", str(bench.record_dir("long2")),
                                                         "--kernel-record-python", "off"], "1 passed")),
            ("3 kernels + python", lambda: bench.run(long + ["--kernel-record", str(bench.record_dir("long3"))],
                                                     "1 passed")),
        ]
        if sysmon:
            long_modes.append(("3s kernels + python, sysmon", lambda: sysmon_run(long, "long3s", "1 passed")))
        if have_cov:
            long_modes.append(("5 pytest-cov --cov-context=test", lambda: cov_run(long, "1 passed")))

        bench.run(suite, passed)  # warm-up: bytecode and assertion rewriting cached
        bench.run(long, "1 passed")
        for _ in range(args.repeat):
            for name, fn in suite_modes():
                rows.setdefault(name, []).append(fn())
            for name, fn in long_modes:
                bench.long_out.unlink(missing_ok=True)
                long_wall.setdefault(name, []).append(fn())
                long_loop.setdefault(name, []).append(float(bench.long_out.read_text().split()[-1]))

        recording = scratch / "rec3" / "pytest.jsonl"
        records = [json.loads(line) for line in recording.read_text().splitlines()]
        kernels_only = scratch / "rec2" / "pytest.jsonl"
        with_python = sum(1 for r in records if r.get("python"))
        with_kernels = sum(1 for r in records if r.get("kernels"))
        complete = sum(1 for r in records if r.get("complete"))
        sizes = {"pytest.jsonl, kernels + python (3)": recording.stat().st_size,
                 "pytest.jsonl, kernels only (2)": kernels_only.stat().st_size}
        testmon_data = root / ".testmondata"
        if have_testmon and testmon_data.exists():
            sizes[".testmondata (4)"] = testmon_data.stat().st_size
        if have_cov:
            bench.reset(".coverage*")
            cov_run(suite, passed)
            sizes[".coverage, per-test contexts (5)"] = sum(p.stat().st_size for p in root.glob(".coverage*"))
        elapsed = time.perf_counter() - started
        load_after = os.getloadavg()
    finally:
        if args.keep:
            print(f"project kept in {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)

    import pytest

    versions = [f"Python {sys.version.split()[0]}", f"pytest {pytest.__version__}", f"coverage {coverage.__version__}"]
    for dist in ("pytest-testmon", "pytest-cov"):
        try:
            from importlib.metadata import version
            versions.append(f"{dist} {version(dist)}")
        except Exception:  # noqa: BLE001 - not installed: said below
            pass
    print(f"suite: {args.tests} tests in {args.files} files over {args.modules} modules x {FUNCTIONS} functions "
          f"(every 4th test launches a fake kernel); {args.repeat} runs per row, rows interleaved")
    print(f"  {', '.join(versions)}; coverage core: C tracer (sys.settrace) unless a row says sysmon; "
          f"{os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
          f"bench took {elapsed:.0f} s")
    print(f"  recording check: {len(records)} records, {complete} complete, {with_kernels} with kernels, "
          f"{with_python} with python")
    if not have_testmon:
        print("  (pytest-testmon is not installed: rows 4 skipped; pip install pytest-testmon)")
    if not have_cov:
        print("  (pytest-cov is not installed: row 5 skipped; pip install pytest-cov)")
    if args.sysmon and not sysmon:
        print(f"  (--sysmon: sys.monitoring needs Python 3.12+, this is {sys.version.split()[0]}: not measured)")
    elif not args.sysmon:
        print("  (COVERAGE_CORE=sysmon not measured: Python 3.11 here has no sys.monitoring; --sysmon on 3.12+)")
    print()
    print(f"  {'row':36} {'median s':>9} {'min s':>8} {'ms/test med':>12} {'ms/test min':>12}")
    for name, seconds in rows.items():
        med, low = stats(seconds)
        print(f"  {name:36} {med:9.3f} {low:8.3f} {1000 * med / args.tests:12.3f} {1000 * low / args.tests:12.3f}")
    print()
    m1, m2, m3 = (statistics.median(rows[k]) for k in ("1 plain", "2 kernels only", "3 kernels + python"))
    n1, n2, n3 = (min(rows[k]) for k in ("1 plain", "2 kernels only", "3 kernels + python"))
    print("  per-test overhead (whole-run difference / tests; fixed start-up and writing costs included):")
    def per_test(a: float, b: float) -> float:
        return 1000 * (a - b) / args.tests

    print(f"    (2) over (1): {per_test(m2, m1):+.3f} ms/test median ({per_test(n2, n1):+.3f} min), x{m2 / m1:.2f}")
    print(f"    (3) over (1): {per_test(m3, m1):+.3f} ms/test median ({per_test(n3, n1):+.3f} min), x{m3 / m1:.2f}")
    print(f"    (3) over (2): {per_test(m3, m2):+.3f} ms/test median ({per_test(n3, n2):+.3f} min), x{m3 / m2:.2f}: "
          "the Python coverage's share")
    if have_testmon:
        m4, n4 = stats(rows["4 testmon, recording run"])
        print(f"    (3) / (4) testmon's recording run: {m3 / m4:.2f} median ({n3 / n4:.2f} min); "
              f"overheads over (1): (3) {per_test(m3, m1):+.3f}, (4) {per_test(m4, m1):+.3f} ms/test median")
    if have_cov:
        m5, _ = stats(rows["5 pytest-cov --cov-context=test"])
        print(f"    (3) / (5) pytest-cov per-test contexts: {m3 / m5:.2f} median; (5) over (1): "
              f"{per_test(m5, m1):+.3f} ms/test")
    print()
    print("  sizes:")
    for name, size in sizes.items():
        print(f"    {name:36} {size:9d} bytes, {size / args.tests:7.1f} bytes/test")
    print()
    print(f"long test: one test, spin({n_loop}) in pkg/hot.py: {executed} line events (sys.settrace count); "
          f"loop = the test's own perf_counter around the call")
    print(f"  {'row':36} {'loop med s':>10} {'loop min s':>10} {'ns/line':>8} {'whole run med s':>16}")
    base = min(long_loop["1 plain"])
    for name in long_loop:
        low = min(long_loop[name])
        print(f"  {name:36} {statistics.median(long_loop[name]):10.4f} {low:10.4f} {1e9 * low / executed:8.1f} "
              f"{statistics.median(long_wall[name]):16.3f}")
    py = min(long_loop["3 kernels + python"])
    ko = min(long_loop["2 kernels only"])
    print(f"  Python recording's tracing cost: {1e9 * (py - ko) / executed:.1f} ns per executed line "
          f"(min loop (3) - (2)); the loop runs x{py / base:.2f} as long as with no recording")
    if have_cov:
        cv = min(long_loop["5 pytest-cov --cov-context=test"])
        print(f"  pytest-cov's (same coverage.py core): {1e9 * (cv - base) / executed:.1f} ns per line over plain")
    return 0


if __name__ == "__main__":
    sys.exit(main())
