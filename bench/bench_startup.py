"""What starting the CLI costs, in CPU seconds (user + sys of the child) and wall, medians of runs interleaved.

    .venv/bin/python bench/bench_startup.py [--repeat 5] [--tree .cache/bench/tree-120-200/build]

Rows: bare Python (the floor), ``import kernel_symbol_map`` (the package's face), ``--version``, ``--help``,
``select --help``, and, when a mapped build tree is given (gen_tree's, built once by bench_build_times.py), a
no-op ``build`` on it. Issue 29's targets: ``--version`` at most 0.05 s CPU over bare Python; a no-op
``build`` at most 0.15 s CPU on ~2,000 objects. Every row is run once per round, rounds interleaved, so a
load that comes and goes hits all rows alike; the machine's load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python")


def measure(command: list[str]) -> tuple[float, float]:
    """(CPU seconds of the child, user + sys; wall seconds) of one run, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"bench_startup: {' '.join(command)} exited {proc.returncode}: {proc.stderr[-300:]!r}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tree", type=Path, default=ROOT / ".cache" / "bench" / "tree-120-200" / "build",
                    help="a build tree that `build` has mapped already (its no-op run is measured)")
    args = ap.parse_args()
    rows: dict[str, list[str]] = {
        "bare python": [PYTHON, "-c", "pass"],
        "import kernel_symbol_map": [PYTHON, "-c", "import kernel_symbol_map"],
        "--version": [PYTHON, "-m", "kernel_symbol_map", "--version"],
        "--help": [PYTHON, "-m", "kernel_symbol_map", "--help"],
        "select --help": [PYTHON, "-m", "kernel_symbol_map", "select", "--help"],
    }
    if (args.tree / "build.ninja").exists() or (args.tree / "Makefile").exists():
        out = args.tree / ".kernel_symbol_map" / "bench_startup.json.gz"
        build = [PYTHON, "-m", "kernel_symbol_map", "build", "--build-dir", str(args.tree), "--out", str(out)]
        measure(build)  # the first run maps (or finds its cache warm); the rows measure the no-op
        rows["no-op build"] = build
    else:
        print(f"(no mapped tree at {args.tree}: the no-op build row is left out)")
    cpu: dict[str, list[float]] = {name: [] for name in rows}
    wall: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeat):
        for name, command in rows.items():
            c, w = measure(command)
            cpu[name].append(c)
            wall[name].append(w)
    floor = statistics.median(cpu["bare python"])
    print(f"load average {os.getloadavg()[0]:.2f}; {args.repeat} interleaved rounds; Python {sys.version.split()[0]}")
    print(f"  {'row':26} {'CPU s med':>10} {'CPU s min':>10} {'over bare':>10} {'wall s med':>11}")
    for name in rows:
        med = statistics.median(cpu[name])
        print(f"  {name:26} {med:10.3f} {min(cpu[name]):10.3f} {med - floor:+10.3f} {statistics.median(wall[name]):11.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
