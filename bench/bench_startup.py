"""What starting the CLI costs, in CPU seconds (user + sys of the child) and wall, medians of runs interleaved.

    .venv/bin/python bench/bench_startup.py [--repeat 5] [--tree .cache/bench/tree-120-200/build]
                                            [--old NAME=PYTHON ...]

Rows: bare Python (the floor), ``import kernel_symbol_map`` (the package's face), ``--version``, ``--help``,
``select --help``, and, when a mapped build tree is given (gen_tree's, built once by bench_build_times.py), a
no-op ``build`` on it. Issue 29's targets: ``--version`` at most 0.05 s CPU over bare Python; a no-op
``build`` at most 0.15 s CPU on ~2,000 objects. Every row is run once per round, rounds interleaved, so a
load that comes and goes hits all rows alike; the machine's load average is printed beside the figures. ``--old`` adds the same rows for another install (a venv's
python with an older commit installed as a wheel), in the same rounds.
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
    ap.add_argument("--old", action="append", default=[], metavar="NAME=PYTHON",
                    help="the same rows for another install, side by side")
    args = ap.parse_args()
    rows: dict[str, list[str]] = {}
    no_ops: dict[str, list[str]] = {}  # one tree keeps one last run: each install's no-ops in a block of their own
    mapped = (args.tree / "build.ninja").exists() or (args.tree / "Makefile").exists()
    for who, python in [("", PYTHON), *((f" [{n}]", p) for n, p in (o.split("=", 1) for o in args.old))]:
        rows |= {
            f"bare python{who}": [python, "-c", "pass"],
            f"import kernel_symbol_map{who}": [python, "-c", "import kernel_symbol_map"],
            f"--version{who}": [python, "-m", "kernel_symbol_map", "--version"],
            f"--help{who}": [python, "-m", "kernel_symbol_map", "--help"],
            f"select --help{who}": [python, "-m", "kernel_symbol_map", "select", "--help"],
        }
        if mapped:
            name = who.strip(" []") or "this"
            out = args.tree / ".kernel_symbol_map" / f"bench_startup-{name}.json.gz"
            no_ops[f"no-op build{who}"] = [python, "-m", "kernel_symbol_map", "build", "--build-dir", str(args.tree),
                                           "--out", str(out)]
    if not mapped:
        print(f"(no mapped tree at {args.tree}: the no-op build row is left out)")
    cpu: dict[str, list[float]] = {name: [] for name in rows}
    wall: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeat):
        for name, command in rows.items():
            c, w = measure(command)
            cpu[name].append(c)
            wall[name].append(w)
    for name, command in no_ops.items():
        measure(command)  # the first run maps (or finds its cache warm); the rows measure the no-op
        rows[name] = command
        cpu[name], wall[name] = map(list, zip(*(measure(command) for _ in range(args.repeat))))
    floor = statistics.median(cpu["bare python"])  # every install's rows over this checkout's bare Python
    print(f"load average {os.getloadavg()[0]:.2f}; {args.repeat} interleaved rounds; Python {sys.version.split()[0]}")
    print(f"  {'row':36} {'CPU s med':>10} {'CPU s min':>10} {'over bare':>10} {'wall s med':>11}")
    for name in rows:
        med = statistics.median(cpu[name])
        print(f"  {name:36} {med:10.3f} {min(cpu[name]):10.3f} {med - floor:+10.3f} {statistics.median(wall[name]):11.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
