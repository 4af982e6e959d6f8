"""What host coverage costs: the example's suite on the CPU with and without it, the wheel, the recorder.

    .venv/bin/python bench/bench_host_coverage.py [--copies 10] [--repeat 3] [--archs 80] [--work DIR]

1. This checkout's wheel, then the bundled example (``examples/cuda_ext``) as two wheels, as a user builds it
   (``pip wheel``, build isolation on, this package through ``--find-links``): plain, and with
   ``-C cmake.define.KERNEL_SYMBOL_MAP_HOST_COVERAGE=ON``. Each is installed into a folder of its own.
2. The example's suite (``examples/cuda_ext/tests``), ``--copies`` times over in one run so that a
   per-test figure is more than pytest's start-up, run against each install: without the recorder, and
   with ``--kernel-record`` (CUPTI is not there on a CPU machine: the records are incomplete, and the
   recorder does all its work but CUPTI's). Each row is a fresh ``python -m pytest`` process,
   ``--repeat`` times, the rows interleaved within each round.

3. The floor of the instrumentation: a C++ loop of ``--calls`` calls of one small function that is never
   inlined, compiled with g++ -O2 plain and with ``-finstrument-functions`` and the runtime: what one
   function entry costs where host code is hot (the example's host code runs a few functions per test).

Printed: each row's median wall and CPU seconds (user + sys of the process and its children), the
instrumentation's cost (coverage over plain, without the recorder), the recorder's per-test overhead on
each build, both wheels' bytes and the libraries' bytes inside them, and what a record holds (host
functions per test). Figures only: no threshold, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _run import ENV, checked  # noqa: E402

EXAMPLE = ROOT / "examples" / "cuda_ext"
COVERAGE = "cmake.define.KERNEL_SYMBOL_MAP_HOST_COVERAGE=ON"


def log(message: str) -> None:
    print(f"bench_host_coverage: {message}", flush=True)


def wheels(work: Path, archs: str) -> dict[str, Path]:
    """label -> the example's wheel: plain and with host coverage."""
    from kernel_symbol_map.buildtree.toolchain import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        raise SystemExit("bench_host_coverage: nvcc not found")
    ours = work / "ours"
    checked("bench_host_coverage", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", ours, ROOT])
    found = {}
    for label, extra in (("plain", []), ("coverage", ["-C", COVERAGE])):
        out = work / f"dist-{label}"
        log(f"pip wheel the example ({label})")
        checked("bench_host_coverage", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", EXAMPLE,
                                        "--find-links", ours, "-w", out,
                                        "-C", f"cmake.define.CMAKE_CUDA_ARCHITECTURES={archs}",
                                        "-C", f"cmake.define.CMAKE_CUDA_COMPILER={nvcc}", *extra])
        found[label] = next(out.glob("cuda_ext-*.whl"))
    return found


def install(wheel: Path, where: Path) -> Path:
    checked("bench_host_coverage", [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", where,
                                    wheel])
    return where


def suite(work: Path, copies: int) -> tuple[Path, int]:
    """The example's tests, ``copies`` times over; and how many tests that is."""
    folder = work / "suite"
    folder.mkdir()
    source = (EXAMPLE / "tests" / "test_cuda_ext.py").read_text()
    for i in range(copies):
        (folder / f"test_cuda_ext_{i}.py").write_text(source)
    count = source.count("def test_") + source.count("[256, 1024, 4096]") * 2 + source.count("[64, 128]") + \
        source.count("[256, 1024]")
    return folder, count * copies


def run(site: Path, folder: Path, record: Path | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one pytest run of ``folder`` against the install in ``site``."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(folder)]
    if record is not None:
        shutil.rmtree(record, ignore_errors=True)
        command += ["--kernel-record", str(record)]
    env = {**ENV, "PYTHONPATH": str(site)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"bench_host_coverage: {' '.join(command)} failed:\n{proc.stdout[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


LOOP = r"""
#include <cstdio>
__attribute__((noinline)) unsigned step(unsigned x) { return x * 2654435761u + 1u; }
int main(int argc, char**) {
  unsigned a = argc;
  for (long i = 0; i < CALLS; i++) a = step(a);
  std::printf("%u\\n", a);
}
"""


def entry_cost(work: Path, calls: int, repeat: int) -> tuple[float, float]:
    """(plain, instrumented) nanoseconds per call of a small function in a hot loop, medians of ``repeat``."""
    (work / "loop.cpp").write_text(LOOP.replace("CALLS", str(calls)))
    runtime = ROOT / "native" / "kernel_symbol_map_coverage.c"
    checked("bench_host_coverage", ["g++", "-O2", "loop.cpp", "-o", "plain"], cwd=work)
    checked("bench_host_coverage", ["gcc", "-O2", "-c", runtime, "-o", "runtime.o"], cwd=work)
    checked("bench_host_coverage", ["g++", "-O2", "-finstrument-functions", "loop.cpp", "runtime.o", "-o",
                                    "covered"], cwd=work)
    found = []
    for exe in ("plain", "covered"):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            checked("bench_host_coverage", [work / exe], cwd=work)
            times.append(time.perf_counter() - t0)
        found.append(statistics.median(times) / calls * 1e9)
    return found[0], found[1]


def library_bytes(wheel: Path) -> int:
    with zipfile.ZipFile(wheel) as z:
        return sum(i.file_size for i in z.infolist() if ".so" in i.filename)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--archs", default="80")
    parser.add_argument("--work", type=Path, help="keep everything here (default: a temporary folder)")
    parser.add_argument("--calls", type=int, default=200_000_000, help="calls in the hot loop")
    parser.add_argument("--loop-only", action="store_true", help="measure the hot loop alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ksm-hostcov-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        plain_ns, covered_ns = entry_cost(work, args.calls, args.repeat)
        print(f"a hot loop of {args.calls:,} calls: {plain_ns:.2f} ns per call plain, {covered_ns:.2f} ns with host "
              f"coverage (+{covered_ns - plain_ns:.2f} ns per function entered, {covered_ns / plain_ns:.1f}x)")
        if args.loop_only:
            return 0
        built = wheels(work, args.archs)
        sites = {label: install(w, work / f"site-{label}") for label, w in built.items()}
        folder, tests = suite(work, args.copies)
        rows = {(label, rec): [] for label in sites for rec in (False, True)}  # type: ignore[var-annotated]
        for label in sites:  # warm: bytecode compiled, the page cache filled
            run(sites[label], folder, None)
        for r in range(args.repeat):
            log(f"round {r + 1} of {args.repeat}")
            for (label, rec), times in rows.items():
                times.append(run(sites[label], folder, work / f"rec-{label}" if rec else None))
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in rows.items()}
        print(f"\nThe example's suite on the CPU: {tests} tests ({args.copies} copies of examples/cuda_ext/tests), "
              f"median of {args.repeat}\n")
        print("| build | recorder | wall s | CPU s |\n| --- | --- | --- | --- |")
        for (label, rec), (wall, cpu) in med.items():
            print(f"| {label} | {'--kernel-record' if rec else 'off'} | {wall:.2f} | {cpu:.2f} |")
        plain, cov = med[("plain", False)], med[("coverage", False)]
        print(f"\ninstrumentation: {cov[0] / plain[0]:.2f}x wall, {cov[1] / plain[1]:.2f}x CPU (coverage over plain, "
              "no recorder)")
        for label in sites:
            off, on = med[(label, False)], med[(label, True)]
            print(f"recorder on the {label} build: {(on[0] - off[0]) / tests * 1000:.1f} ms wall, "
                  f"{(on[1] - off[1]) / tests * 1000:.1f} ms CPU per test")
        for label, w in built.items():
            print(f"{label} wheel: {w.stat().st_size:,} bytes, libraries {library_bytes(w):,} bytes uncompressed")
        records = [json.loads(line) for line in next((work / "rec-coverage").glob("*.jsonl")).read_text().splitlines()
                   if line.startswith("{")]
        counts = [sum(len(f) for f in r.get("host_functions", {}).values()) for r in records]
        print(f"records: {len(records)}, host functions per record {min(counts)}-{max(counts)} "
              f"(median {statistics.median(counts):.0f}); {os.path.getsize(next((work / 'rec-coverage').glob('*.jsonl'))):,} "
              "bytes of JSON Lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
