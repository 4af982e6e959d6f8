"""Issue 27's precision figure: the tests a change runs, by sources (today's select) and by what the build emitted.

    .venv/bin/python bench/bench_emitted.py [--kernels 22] [--configs plain lineinfo pinned]

The bench writes a small CUDA project into ``.cache/bench/emitted/project`` (a
git repository of its own, so that the map's sources are tracked): one
``csrc/many.cu`` of ``--kernels`` kernels, one of which (``k_pick``) calls a
device function of ``include/pick.cuh``, the header no other kernel uses. It
is built with CMake and Ninja (nvcc, ``CMAKE_CUDA_ARCHITECTURES=80``: SASS for
sm_80 and PTX for compute_80) in three configurations, each in a build folder
of its own, the project's sources at one path throughout: ``plain`` (default
flags), ``lineinfo`` (``-lineinfo`` in ``CMAKE_CUDA_FLAGS``) and ``pinned``
(``-lineinfo``, every source's mtime set to one value before each compile).
Each build is mapped with ``kernel-symbol-map build``: the base map (the
recordings' commit), then one map per change, rebuilt in the same folder with
the change applied (the file is restored and rebuilt afterwards). Every kernel
has one recorded test that launched it alone.

The changes, and the goal (the tests a perfect selection runs):

* ``body``: one kernel's body edited in place (same lines): goal 1;
* ``body+line``: one kernel's body edited, one line added: goal 1;
* ``comment``: a comment line added above that kernel, nothing else: goal 0;
* ``header``: the header's function changed (same lines): goal 1;
* ``rebuild``: no edit at all, the object rebuilt (nvcc's determinism): goal 0.

For each: the tests today's ``select`` runs (source mode: ``--map BASE
--changed FILE``, the file reaches all the object's kernels) and output
mode's (``--map NEW --base-map BASE --changed FILE``), and what output mode
saw (kernels whose device code differs, objects whose host code differs).

What ``-lineinfo`` does (nvcc 13.0, measured section by section): the cubin
gains ``.debug_line``, whose file table holds each source's path, *mtime and
size*, and ``.nv_debug_ptx_txt``, the whole module's PTX text; both are
module-level sections, which the digest folds into every kernel. So any edit
changes every kernel of the file (``body``: ``.nv_debug_ptx_txt``;
``comment``: ``.debug_line``, and the PTX ``.loc`` lines of every kernel below
it; ``header``: both), and so does a mere rebuild of an unchanged file from a
fresh checkout (a new mtime in ``.debug_line``): with ``-lineinfo``, output
mode runs every test of the file, as source mode does (safe, nothing saved).
``pinned`` shows the mtime alone: the rebuild then changes nothing. Figures,
not a test: nothing here is timed against a limit.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import CACHE  # noqa: E402

KSM = [sys.executable, "-m", "kernel_symbol_map"]
BASE, NEW = "ba" * 20, "c0" * 20  # full SHAs: the recordings' commit and the change's
EDITED, PICK = "k_body", "k_pick"
SOURCE, HEADER = "csrc/many.cu", "include/pick.cuh"
PINNED = 1_700_000_000  # the pinned mtime of the third configuration
CONFIGS = {"plain": ("", False), "lineinfo": ("-lineinfo", False), "pinned": ("-lineinfo", True)}

CMAKE = """cmake_minimum_required(VERSION 3.25)
project(emitted_bench LANGUAGES CXX CUDA)
add_library(many SHARED csrc/many.cu)
target_include_directories(many PRIVATE include)
"""
PICK_H = """#pragma once
// Used by k_pick only (csrc/many.cu).
__device__ inline float pick(float v) { return v * 0.5f + 6.0f; }
"""
BODY = "  if (i < n) x[i] = x[i] * 2.0f + 1.0f;\n"


def kernel(name: str, j: int) -> str:
    body = {EDITED: BODY, PICK: "  if (i < n) x[i] = pick(x[i]);\n"}.get(name)
    if body is None:
        body = f"  if (i < n) x[i] = x[i] * {j + 2}.0f + {j}.0f;\n"
    return (f"__global__ void {name}(float* x, int n) {{\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n" + body + "}\n")


def many_cu(kernels: int) -> str:
    names = [f"k_{j:02d}" for j in range(kernels - 2)]
    middle = len(names) // 2  # the edited kernels sit in the middle: kernels follow them in the file
    names[middle:middle] = [EDITED, PICK]
    parts = ["// Output mode's precision bench (bench/bench_emitted.py): many kernels in one file.\n",
             '#include "pick.cuh"\n\n']
    for j, name in enumerate(names):
        parts.append(kernel(name, j) + "\n")
    parts.append("// Host code: a launcher for each kernel would live here.\nint many_count() { return %d; }\n" % kernels)
    return "".join(parts)


CHANGES = {  # name -> (file, edit of its text, goal)
    "body": (SOURCE, lambda t: t.replace(BODY, "  if (i < n) x[i] = x[i] * 3.0f - 7.0f;\n"), 1),
    "body+line": (SOURCE, lambda t: t.replace(BODY, "  float y = x[i] * 3.0f;\n  if (i < n) x[i] = y * y + 1.0f;\n"),
                  1),
    "comment": (SOURCE, lambda t: t.replace(f"__global__ void {EDITED}(",
                                            f"// {EDITED}: doubles and adds one.\n__global__ void {EDITED}("), 0),
    "header": (HEADER, lambda t: t.replace("v * 0.5f + 6.0f", "v * 0.25f + 7.0f"), 1),
    "rebuild": (SOURCE, lambda t: t, 0),
}


def run(command: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def write_project(src: Path, kernels: int) -> None:
    if src.exists():
        shutil.rmtree(src)
    (src / "csrc").mkdir(parents=True)
    (src / "include").mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE)
    (src / SOURCE).write_text(many_cu(kernels))
    (src / HEADER).write_text(PICK_H)
    git = ["git", "-C", str(src), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    run([*git, "init", "-q"])
    run([*git, "add", "."])  # tracked: the map's sources are the project's, not the configure's
    run([*git, "commit", "-q", "-m", "base"])


def ninja(build: Path) -> float:
    t0 = time.perf_counter()
    run(["ninja", "-C", str(build)])
    return time.perf_counter() - t0


def mapped(build: Path, out: Path, commit: str) -> dict:
    run([*KSM, "build", "--build-dir", str(build), "--out", str(out), "--commit", commit, "--strict"])
    return json.loads(gzip.decompress(out.read_bytes()))


def selected(recordings: Path, changed: str, new: Path, base: Path | None) -> dict:
    maps = ["--map", str(new)] + (["--base-map", str(base)] if base else [])
    return json.loads(run([*KSM, "select", *maps, "--recordings", str(recordings), "--changed", changed, "--json"]))


def seen(selection: dict) -> str:
    """What output mode saw: the kernels whose device code differs, and hosts; or why it ran everything."""
    if selection.get("fallback"):
        return f"fallback {selection['fallback']}: {selection['fallback_why'][:90]}"
    found = selection.get("emitted") or {}
    kernels = found.get("kernels") or {}
    names = ", ".join(sorted(kernels)[:3]) + (" ..." if len(kernels) > 3 else "")
    hosts = len(found.get("hosts") or [])
    return f"{len(kernels)} kernels' code differs ({names or 'none'}); {hosts} hosts differ"


def configuration(root: Path, src: Path, flags: str, pinned: bool, kernels: int) -> list[tuple]:
    name = "build" + ("-lineinfo" if flags else "") + ("-pinned" if pinned else "")
    build = root / name
    shutil.rmtree(build, ignore_errors=True)
    nvcc = os.environ.get("CUDACXX", "/usr/local/cuda/bin/nvcc")
    run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja", f"-DCMAKE_CUDA_COMPILER={nvcc}",
         "-DCMAKE_CUDA_ARCHITECTURES=80", "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_CUDA_FLAGS={flags}"])

    def rebuild() -> float:
        if pinned:  # every source at one mtime, as if each build had the same checkout; the object
            for path in (SOURCE, HEADER):  # removed, so that ninja still compiles it
                os.utime(src / path, (PINNED, PINNED))
            for obj in build.glob("CMakeFiles/many.dir/**/*.o"):
                obj.unlink()
        return ninja(build)

    rebuild()
    maps = root / name.replace("build", "maps", 1)
    maps.mkdir(exist_ok=True)
    base = maps / "base.json.gz"
    doc = mapped(build, base, BASE)
    (obj,) = [o for o in doc["objects"] if o["symbols"]]
    assert len(obj["symbols"]) == kernels and obj.get("digests"), obj
    recordings = maps / "recordings.jsonl"
    recordings.write_text("".join(json.dumps({"test": f"test_{k}", "kernels": [k], "complete": True, "commit": BASE})
                                  + "\n" for k in obj["symbols"]))
    rows = []
    for change, (path, edit, goal) in CHANGES.items():
        original = (src / path).read_text()
        changed = edit(original)
        assert changed != original or change == "rebuild", change
        (src / path).write_text(changed)
        if change == "rebuild":
            os.utime(src / path)  # ninja rebuilds the object from the same text
        seconds = rebuild()
        new = maps / f"{change}.json.gz"
        mapped(build, new, NEW)
        (src / path).write_text(original)
        rebuild()  # back to the base's text, for the next change
        source = selected(recordings, path, base, None)
        output = selected(recordings, path, new, base)
        assert output["mode"] == "output" and not output["mode_why"], output["mode_why"]
        rows.append((change, goal, len(source["run"]), len(output["run"]), seen(output), seconds))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=22, help="kernels in csrc/many.cu (at least 20)")
    ap.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS),
                    help="default flags, -lineinfo, -lineinfo with every source's mtime pinned (default: all)")
    args = ap.parse_args()
    if args.kernels < 4:
        raise SystemExit("--kernels: at least 4")
    root = CACHE / "emitted"
    root.mkdir(parents=True, exist_ok=True)
    src = root / "project"
    write_project(src, args.kernels)
    print(f"project: {SOURCE} with {args.kernels} kernels ({PICK} alone uses {HEADER}); nvcc, sm_80 + compute_80 "
          f"PTX; one recorded test per kernel ({args.kernels} tests)")
    for flags, pinned in (CONFIGS[c] for c in args.configs):
        rows = configuration(root, src, flags, pinned, args.kernels)
        print(f"\nCMAKE_CUDA_FLAGS={flags or '(none)'}"
              + (", every source's mtime pinned (as no two checkouts have it)" if pinned else ""))
        print(f"  {'change':10} {'goal':>4} {'source mode':>11} {'output mode':>11}  rebuild  what output mode saw")
        for name, goal, by_source, by_output, what, seconds in rows:
            print(f"  {name:10} {goal:4} {by_source:11} {by_output:11}  {seconds:5.1f} s  {what}")
        total_source = sum(r[2] for r in rows)
        total_output = sum(r[3] for r in rows)
        print(f"  all changes: source mode runs {total_source} tests, output mode {total_output} "
              f"({total_source / max(total_output, 1):.1f}x fewer), goal {sum(r[1] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
