"""Benchmark inputs, generated and built once into ``.cache/bench`` (never committed)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
ARCHS = ["80", "90", "100"]
# Mixed as in real trees: nvcc's default, -rdc (zstd cubins) and --compress-mode=speed (LZ4).
MODES = [[], ["-rdc=true"], ["--compress-mode=speed"]]


def small_source(i: int) -> str:
    """A translation unit with a few template instantiations; sizes vary with ``i``."""
    n = 1 + i % 7
    lines = [
        f"namespace bench{i} {{",
        "template <typename T, int N>",
        "__global__ void k(T* out, const T* in, int n) {",
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "  T acc = 0;",
        "  #pragma unroll",
        "  for (int j = 0; j < N; ++j) if (i + j < n) acc += in[i + j] * T(j + 1);",
        "  if (i < n) out[i] = acc;",
        "}",
    ]
    lines += [f"template __global__ void k<float, {4 * (j + 1)}>(float*, const float*, int);" for j in range(n)]
    lines += [f"template __global__ void k<double, {j + 2}>(double*, const double*, int);" for j in range(n // 2)]
    lines += [f'extern "C" __global__ void entry_{i}(int* p) {{ p[threadIdx.x] = {i}; }}', "}"]
    return "\n".join(lines) + "\n"


def build_small(count: int, nvcc: str) -> list[Path]:
    folder = CACHE / f"small-{count}"
    folder.mkdir(parents=True, exist_ok=True)
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS]
    jobs = []
    for i in range(count):
        src, obj = folder / f"k{i:04d}.cu", folder / f"k{i:04d}.cu.o"
        if not obj.exists():
            src.write_text(small_source(i))
            jobs.append([nvcc, "-c", str(src), "-o", str(obj), *gencode, *MODES[i % len(MODES)]])
    if jobs:
        print(f"building {len(jobs)} objects with nvcc (once; cached in {folder})", file=sys.stderr)
        with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            for proc in pool.map(lambda c: subprocess.run(c, capture_output=True, check=False), jobs):
                if proc.returncode:
                    raise SystemExit(proc.stderr.decode())
    return sorted(folder.glob("*.o"))


def large_library(package: str = "nvidia-cublas==13.0.2.14", member: str = "libcublasLt.so") -> Path:
    """libcublasLt from PyPI's nvidia-cublas wheel: a few hundred MB of fatbins."""
    folder = CACHE / "large"
    found = sorted(folder.glob(f"{member}*"))
    if found:
        return found[0]
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(wheels.glob("nvidia_cublas-*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", package, "-d", str(wheels)], check=True)
    wheel = next(wheels.glob("nvidia_cublas-*.whl"))
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if Path(n).name.startswith(member))
        target = folder / Path(name).name
        with z.open(name) as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 24):
                dst.write(chunk)
    return target
