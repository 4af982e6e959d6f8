"""Generate and build a vLLM-shaped CMake CUDA project once, cached in ``.cache/bench``.

    .venv/bin/python bench/gen_tree.py [--sources 500] [--headers 200]

Shape: ``--sources`` .cu files of varied size (most with 1-8 template
instantiations, every 20th with 48, as vLLM's heavy kernel files) in 10 targets (shared, static and
object libraries; two with separable compilation, so ``-rdc`` and device-link
objects; two built with ``--compress-mode=speed``, so LZ4 beside zstd and plain
payloads), template kernels, 3 GPU architectures, and ``--headers`` shared
headers with realistic fan-in (each source includes 10-40 of them, and headers
include each other). Built with Ninja; Ninja is what the deps log bench needs. ``--hip`` makes the
same tree in HIP for CMake's HIP language and clang-15 (gfx90a and gfx1030;
no separable compilation or compress modes, which are nvcc's), where ``build``
also preprocesses each object's device side.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
ARCHS = "80;90;100"
TARGETS = [  # name, type, separable, compress speed
    ("attention", "SHARED", False, False), ("quant", "SHARED", False, True), ("moe", "STATIC", False, False),
    ("cache_ops", "OBJECT", False, False), ("activation", "SHARED", False, False),
    ("layernorm", "STATIC", False, True), ("rdc_a", "SHARED", True, False), ("rdc_b", "SHARED", True, False),
    ("sampling", "SHARED", False, False), ("misc", "STATIC", False, False),
]


def header(i: int, count: int, rng: random.Random) -> str:
    deps = sorted(rng.sample(range(i), min(i, 3))) if i else []
    lines = ["#pragma once", *[f'#include "common/h{d:03d}.cuh"' for d in deps], f"namespace h{i} {{"]
    lines += [f"__device__ __forceinline__ float f{j}(float x) {{ return x * {j + 1}.0f + {i}.0f; }}" for j in range(3)]
    lines += [f"constexpr int kValue = {i};", "}"]
    return "\n".join(lines) + "\n"


HEAVY_EVERY, HEAVY_AT, HEAVY_KERNELS = 20, 9, 48  # every 20th source (in "misc") is a heavy one


def source(i: int, headers: int, rng: random.Random, hip: bool = False) -> str:
    includes = sorted(rng.sample(range(headers), rng.randint(10, 40)))
    n = HEAVY_KERNELS if i % HEAVY_EVERY == HEAVY_AT else 1 + i % 8
    lines = ["#include <hip/hip_runtime.h>"] if hip else []
    lines += [f'#include "common/h{h:03d}.cuh"' for h in includes]
    lines += [
        f"namespace k{i} {{",
        "template <typename T, int N>",
        "__global__ void kernel(T* out, const T* in, int n) {",
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "  T acc = 0;",
        "  #pragma unroll",
        "  for (int j = 0; j < N; ++j) if (i + j < n) acc += in[i + j] * T(j + 1);",
        f"  if (i < n) out[i] = acc + T(h{includes[0]}::f0(1.0f));",
        "}",
    ]
    lines += [f"template __global__ void kernel<float, {4 * (j + 1)}>(float*, const float*, int);" for j in range(n)]
    lines += [f"template __global__ void kernel<double, {j + 2}>(double*, const double*, int);" for j in range(n // 3)]
    lines += [f'extern "C" __global__ void entry_{i}(int* p) {{ p[threadIdx.x] = h{includes[-1]}::kValue; }}', "}"]
    return "\n".join(lines) + "\n"


def generate(folder: Path, sources: int, headers: int, hip: bool = False) -> None:
    rng = random.Random(1234)
    (folder / "include" / "common").mkdir(parents=True, exist_ok=True)
    for h in range(headers):
        (folder / "include" / "common" / f"h{h:03d}.cuh").write_text(header(h, headers, rng))
    per_target: dict[str, list[str]] = {t[0]: [] for t in TARGETS}
    for i in range(sources):
        name = TARGETS[i % len(TARGETS)][0]
        path = Path("csrc") / name / f"k{i:04d}.{'hip' if hip else 'cu'}"
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(source(i, headers, rng, hip))
        per_target[name].append(path.as_posix())
    (folder / "CMakeLists.txt").write_text(cmake_lists(per_target, hip))


def cmake_lists(per_target: dict[str, list[str]], hip: bool = False) -> str:
    cmake = [
        "cmake_minimum_required(VERSION 3.25)",
        f"project(bench_tree LANGUAGES CXX {'HIP' if hip else 'CUDA'})",
        "set(CMAKE_POSITION_INDEPENDENT_CODE ON)",
        "option(WITH_KERNEL_SYMBOL_MAP \"map kernels after every build (bench_overhead.py)\" OFF)",
        "if(WITH_KERNEL_SYMBOL_MAP)",
        "  find_package(KernelSymbolMap CONFIG REQUIRED)",
        "  kernel_symbol_map()",
        "endif()",
    ]
    for name, kind, separable, speed in TARGETS:
        cmake.append(f"add_library({name} {kind} {' '.join(per_target[name])})")
        cmake.append(f"target_include_directories({name} PRIVATE include)")
        if separable and not hip:
            cmake.append(f"set_target_properties({name} PROPERTIES CUDA_SEPARABLE_COMPILATION ON)")
        if speed and not hip:
            cmake.append(f"target_compile_options({name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--compress-mode=speed>)")
    return "\n".join(cmake) + "\n"


def update_sources(src: Path, sources: int, headers: int) -> None:
    """Rewrite only the sources whose generated text changed (ninja then rebuilds just those)."""
    rng = random.Random(1234)
    for h in range(headers):
        header(h, headers, rng)  # keep the random stream where generate() had it
    for i in range(sources):
        name = TARGETS[i % len(TARGETS)][0]
        path = src / "csrc" / name / f"k{i:04d}.cu"
        text = source(i, headers, rng)
        if path.read_text() != text:
            path.write_text(text)
            (src.parent / "build" / ".built").unlink(missing_ok=True)


def update_cmake_lists(src: Path, sources: int) -> None:
    """Bring an already generated tree's CMakeLists.txt up to date without touching its sources."""
    per_target = {t[0]: [] for t in TARGETS}
    for i in range(sources):
        name = TARGETS[i % len(TARGETS)][0]
        per_target[name].append(f"csrc/{name}/k{i:04d}.cu")
    text = cmake_lists(per_target)
    if (src / "CMakeLists.txt").read_text() != text:
        (src / "CMakeLists.txt").write_text(text)


HIP_ARCHS = "gfx90a;gfx1030"
HIP_DEFINES = ["-DCMAKE_HIP_COMPILER=clang++-15", "-DCMAKE_HIP_PLATFORM=amd", f"-DCMAKE_HIP_ARCHITECTURES={HIP_ARCHS}",
               "-DCMAKE_HIP_FLAGS=--rocm-path=/usr --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"]


def build_tree(sources: int = 500, headers: int = 200, cmake: str = "cmake", ninja: str = "ninja",
               hip: bool = False) -> tuple[Path, Path]:
    """(source dir, build dir) of the generated tree, built (once) with Ninja.

    HIP trees need CMake 4 (``cmake`` from the venv, PyPI's) and Debian's clang-15 (facts.md).
    """
    folder = CACHE / f"tree-{sources}-{headers}{'-hip' if hip else ''}"
    src, build = folder / "src", folder / "build"
    if (src / "CMakeLists.txt").exists() and not hip:
        update_cmake_lists(src, sources)
        update_sources(src, sources, headers)
    if not (build / ".built").exists():
        if not (src / "CMakeLists.txt").exists():
            generate(src, sources, headers, hip)
        nvcc = os.environ.get("CUDACXX", "/usr/local/cuda/bin/nvcc")
        languages = HIP_DEFINES if hip else [f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DCMAKE_CUDA_ARCHITECTURES={ARCHS}"]
        subprocess.run([cmake, "-S", str(src), "-B", str(build), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
                        *languages, "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
        what = f"HIP sources for {HIP_ARCHS}" if hip else f"CUDA sources for {ARCHS}"
        print(f"building {sources} {what} (once; cached in {build})", file=sys.stderr)
        subprocess.run([ninja, "-C", str(build)], check=True, capture_output=True)
        (build / ".built").touch()
    return src, build


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=500)
    ap.add_argument("--headers", type=int, default=200)
    ap.add_argument("--hip", action="store_true", help="a HIP tree (CMake's HIP language, clang-15)")
    a = ap.parse_args()
    venv = Path(sys.executable).parent  # HIP needs CMake 4: PyPI's, beside this interpreter
    tools = {"cmake": str(venv / "cmake"), "ninja": str(venv / "ninja")} if a.hip else {}
    print(build_tree(a.sources, a.headers, hip=a.hip, **tools))
