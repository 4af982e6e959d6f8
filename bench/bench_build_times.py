"""``build``'s cold and no-op times on a generated tree, CUDA (nvcc) or HIP (clang: device-side preprocessing).

    .venv/bin/python bench/bench_build_times.py [--sources 120] [--hip] [--runs 3]

Cold: no cache in the tree (``.kernel_symbol_map/`` emptied), so every object
is read and, for clang-driven objects, every device side preprocessed. No-op:
the same command again, answered by the last run's fingerprint. Each in a
fresh process with bytecode cached, as an installed wheel runs; prints each
run and the range, in wall seconds and in CPU seconds (user and system time of
the run and every process it waited for: the preprocessor runs are processes,
and on a loaded machine wall time says little about what they cost).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tree  # noqa: E402
from _corpus import CACHE  # noqa: E402
from _run import KSM, timed  # noqa: E402


def _children_cpu() -> float:
    """User and system seconds of every child process waited for so far (grandchildren included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_timed(command: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS, stdout) of one run of ``command``."""
    before = _children_cpu()
    seconds, peak, said = timed(command)
    return seconds, _children_cpu() - before, peak, said


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=120)
    ap.add_argument("--hip", action="store_true", help="the HIP tree (CMake 4 from the venv, clang-15)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    venv_bin = Path(sys.executable).parent
    cmake = str(venv_bin / "cmake") if args.hip else "cmake"
    ninja = str(venv_bin / "ninja") if args.hip else "ninja"
    _, build = gen_tree.build_tree(args.sources, cmake=cmake, ninja=ninja, hip=args.hip)
    out = CACHE / "maps" / f"times-{args.sources}{'-hip' if args.hip else ''}.json.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [*KSM, "build", "--build-dir", str(build), "--out", str(out)]
    timed(command)  # warm: bytecode, page cache
    cold, noop, cold_cpu, noop_cpu, peaks = [], [], [], [], []
    for _ in range(args.runs):
        shutil.rmtree(build / ".kernel_symbol_map", ignore_errors=True)
        seconds, cpu, peak, said = _cpu_timed(command)
        cold.append(seconds)
        cold_cpu.append(cpu)
        peaks.append(peak)
        seconds, cpu, _, again = _cpu_timed(command)
        assert "(up to date)" in again, again
        noop.append(seconds)
        noop_cpu.append(cpu)
    kind = "HIP (clang-15, 2 archs)" if args.hip else "CUDA (nvcc, 3 archs)"
    print(f"{args.sources}-source {kind} tree: {said.strip()}")
    print(f"  cold   {' '.join(f'{s:.2f}' for s in cold)} s  (range {min(cold):.2f}-{max(cold):.2f} s)")
    print(f"  no-op  {' '.join(f'{s:.3f}' for s in noop)} s  (range {min(noop):.3f}-{max(noop):.3f} s)")
    print(f"  cold   CPU {' '.join(f'{s:.2f}' for s in cold_cpu)} s  (median {statistics.median(cold_cpu):.2f} s)")
    print(f"  no-op  CPU {' '.join(f'{s:.3f}' for s in noop_cpu)} s  (median {statistics.median(noop_cpu):.3f} s)")
    print(f"  peak memory {max(peaks) / 2**20:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
