"""Cold ``build`` against the seed itself and against older installs, on one build tree, in CPU seconds.

    .venv/bin/python bench/bench_cold.py [--sources 500 | --tree BUILD_DIR] [--runs 3]
                                         [--old NAME=PYTHON ...] [--no-seed] [--profile]

The figures: cold ``build`` against the seed on gen_tree's synthetic trees
(``--sources 480``, ``--sources 1920``) and on a real project's tree (ggml's
CUDA backend: ``--tree .cache/ggml/build``, built by ``bench_emitted_ggml.py``
with ``--archs 80``, so each object holds sm_80 code and its compute_80 PTX),
and against the floor; older installs with ``--old NAME=PYTHON`` (a virtual
environment with that commit installed, as a wheel, not editable).

Each round runs, one after the other: the seed (``../shared/reference/seed_ksm.py``,
run as it is, with cuobjdump 13.4: 13.5's output its parser cannot read), the
floor (a fresh process that opens every ``.o`` of the tree and decompresses
each device image in it: what any reader must do at least),
this checkout's ``build --no-cache``, and each ``--old`` install's
``build --no-cache``, every one in a fresh process with its bytecode cached,
writing its map to a temporary folder. Rounds are interleaved, so load that
comes and goes hits all alike. Prints each one's median CPU seconds (user + sys,
children included: cuobjdump and ninja count for the seed, git for us) and wall,
over ``--runs`` rounds, the ratios, and the machine's load average.
``--profile`` writes a cProfile of one cold run of this checkout beside the maps.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tree  # noqa: E402
from _run import ENV  # noqa: E402
from bench_build import old_cuobjdump  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT.parent / "shared" / "reference" / "seed_ksm.py"
PYTHON = str(ROOT / ".venv" / "bin" / "python")


def measure(command: list[str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds of the run and its children, wall seconds); a failed run ends the bench."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=ENV, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"bench_cold: {' '.join(command)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def source_of(build: Path) -> Path:
    for line in (build / "CMakeCache.txt").read_text(errors="replace").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.partition("=")[2])
    raise SystemExit(f"bench_cold: {build} is not a configured CMake build tree")


# The floor: what any reader of these objects' device code must do at least, in a fresh process: open every
# object the build wrote and decompress each device image in it (CUDA fatbin entries).
FLOOR = """
import os, sys
from kernel_symbol_map.readers import fatbin
from kernel_symbol_map.readers._blob import OpenFile
from kernel_symbol_map.readers.elf import ElfFile, is_elf
for folder, _dirs, files in os.walk(sys.argv[1]):
    for name in files:
        if not name.endswith('.o') or '/CMakeFiles/3.' in folder:
            continue
        with OpenFile(os.path.join(folder, name)) as blob:
            if not is_elf(blob):
                continue
            elf = ElfFile(blob)
            section = elf.section('.nv_fatbin') or elf.section('__nv_relfatbin')
            if section is not None:
                window = elf.window(section)
                for entry in fatbin.iter_entries(window):
                    entry.payload(window)
"""


def commands(build: Path, out: Path, olds: dict[str, str], seed: bool) -> dict[str, list[str]]:
    ours = ["-m", "kernel_symbol_map", "build", "--build-dir", str(build), "--no-cache", "--commit", "0" * 40]
    rows = {}
    if seed:
        rows["seed"] = [PYTHON, str(SEED), "--build-root", str(build), "--source-root", str(source_of(build)),
                        "--out", str(out / "seed.json.gz"), "--cuobjdump", old_cuobjdump(), "--commit", "0" * 40]
    rows["floor"] = [PYTHON, "-c", FLOOR, str(build)]
    rows["this checkout"] = [PYTHON, *ours, "--out", str(out / "ours.json.gz")]  # .venv: the editable install
    for name, python in olds.items():
        rows[name] = [python, *ours, "--out", str(out / f"{name}.json.gz")]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--sources", type=int, default=500, help="gen_tree's tree of N sources (built once, cached)")
    where.add_argument("--tree", type=Path, help="an existing build tree (Ninja), e.g. .cache/ggml/build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--old", action="append", default=[], metavar="NAME=PYTHON",
                    help="also time another install's build (a venv's python with that version installed)")
    ap.add_argument("--no-seed", action="store_true", help="leave the seed out (it takes 15-20 ms an object)")
    ap.add_argument("--profile", action="store_true", help="also write a cProfile of one cold run of ours")
    args = ap.parse_args()
    build = args.tree.resolve() if args.tree else gen_tree.build_tree(args.sources)[1]
    olds = dict(spec.split("=", 1) for spec in args.old)
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        out = Path(tmp)
        rows = commands(build, out, olds, not args.no_seed)
        for command in rows.values():  # warm-up: page cache, bytecode, the file-API reply
            measure(command, source_of(build))
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, command in rows.items():
                times[name].append(measure(command, source_of(build)))
        if args.profile:
            prof = ROOT / ".cache" / "bench" / f"cold-{build.parent.name}.prof"
            subprocess.run([PYTHON, "-m", "cProfile", "-o", str(prof), *rows["this checkout"][1:]], check=True,
                           capture_output=True, cwd=source_of(build))
            print(f"profile: {prof}")
        import gzip
        import json

        doc = json.loads(gzip.decompress((out / "ours.json.gz").read_bytes()))
    stats = doc["stats"]
    print(f"tree: {build}: {stats['objects']} objects ({stats['device_objects']} device), {stats['symbols']} symbols, "
          f"reason: {doc.get('reason')}; load average {os.getloadavg()[0]:.1f}")
    cpu = {name: statistics.median(c for c, _ in runs) for name, runs in times.items()}
    for name, runs in times.items():
        wall = statistics.median(w for _, w in runs)
        line = f"  {name:16} CPU {cpu[name]:7.3f} s  wall {wall:7.3f} s  (CPU of each run: " \
               f"{', '.join(f'{c:.3f}' for c, _ in runs)})"
        if name == "floor":
            line += f"  -> this checkout is {cpu['this checkout'] / cpu[name]:.2f}x the floor"
        elif name != "this checkout":
            line += f"  -> this checkout is {cpu[name] / cpu['this checkout']:.2f}x faster"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
