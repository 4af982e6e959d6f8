"""Compilers and reference tools the tests build with, found once per session.

Missing tools skip the tests that need them on a developer's machine, and fail
them under CI (``CI`` set), where ``scripts/test`` installs everything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernel_symbol_map.buildtree.toolchain import find_cuobjdump, find_nvcc

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
VENV_OPT = Path(sys.prefix) / "opt"


def require(tool: str | None, what: str) -> str:
    if tool:
        return tool
    message = f"{what} not found; scripts/test installs it"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def nvcc() -> str | None:
    return find_nvcc()


def cuobjdumps() -> dict[str, str]:
    """Version label -> executable: PyPI's 13.5 (the test extra) and 13.4 installed beside it."""
    found = {}
    default = find_cuobjdump()
    if default:
        found[_version(default)] = default
    for folder in sorted(VENV_OPT.glob("cuobjdump-*")):
        exe = next(folder.rglob("bin/cuobjdump"), None)
        if exe:
            found[_version(str(exe))] = str(exe)
    return found


def _version(exe: str) -> str:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False).stdout
    for word in out.replace(",", " ").split():
        if word[:1].isdigit() and word.count(".") >= 1:
            return ".".join(word.split(".")[:2])
    return "unknown"


def hipcc() -> str | None:
    return shutil.which("hipcc")


def clang_hip() -> str | None:
    """A clang new enough for --offload-compress (LLVM 19, Debian's clang-19)."""
    return shutil.which("clang-19")


def run(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")


def run_all(commands: list[list[str]], cwd: Path, env: dict[str, str] | None = None) -> None:
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda c: run(c, cwd, env), commands))


# CMake's HIP language with Debian's ROCm 5.2 packages (../shared/reference/facts.md, "CMake's HIP
# language"): clang-15 from the hipcc package, the AMD platform forced (this machine has nvcc, so
# hipconfig says "nvidia"), and on CMake 3.25 a fake ROCm root holding only hip-lang's package.
HIP_ARCHS = "gfx90a;gfx1030"
HIP_DEVICE_LIBS = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
HIP_LANG_PACKAGE = "/usr/lib/x86_64-linux-gnu/cmake/hip-lang"


def hip_cmake_args(cmake_label: str, scratch: Path, clang: str = "15") -> list[str]:
    """-D flags that configure CMake's HIP language here; ``scratch`` holds CMake 3.25's fake ROCm root.

    ``clang``: "15" (Debian's hipcc package) or "19", which needs CMake 4 (facts.md) and the
    compiler's full path, and takes the device libraries' path alone.
    """
    if clang == "19":
        assert cmake_label != "3.25", "CMake 3.25's HIP language fails with clang-19"
        compiler = require(shutil.which("clang++", path="/usr/lib/llvm-19/bin"), "clang-19 (Debian package clang-19)")
        return [f"-DCMAKE_HIP_COMPILER={compiler}", f"-DCMAKE_HIP_ARCHITECTURES={HIP_ARCHS}",
                f"-DCMAKE_HIP_FLAGS=--rocm-device-lib-path={HIP_DEVICE_LIBS}", "-DCMAKE_HIP_PLATFORM=amd"]
    clang = require(shutil.which("clang++-15"), "clang++-15 (Debian package hipcc)")
    args = [f"-DCMAKE_HIP_COMPILER={clang}", f"-DCMAKE_HIP_ARCHITECTURES={HIP_ARCHS}",
            f"-DCMAKE_HIP_FLAGS=--rocm-path=/usr --rocm-device-lib-path={HIP_DEVICE_LIBS}"]
    if cmake_label == "3.25":
        root = scratch / "fake-rocm"
        (root / "lib" / "cmake").mkdir(parents=True, exist_ok=True)
        link = root / "lib" / "cmake" / "hip-lang"
        if not link.exists():
            link.symlink_to(HIP_LANG_PACKAGE, target_is_directory=True)
        comgr = "/usr/lib/x86_64-linux-gnu/cmake/amd_comgr"
        args += [f"-DCMAKE_HIP_COMPILER_ROCM_ROOT={root}", f"-Damd_comgr_DIR={comgr}",
                 "-DCMAKE_TRY_COMPILE_PLATFORM_VARIABLES=amd_comgr_DIR"]
    else:
        args.append("-DCMAKE_HIP_PLATFORM=amd")
    return args


# clang-19 as the CUDA compiler. It supports CUDA up to 12.x, and PyPI's cu12 wheels (installed by
# scripts/setup into .venv/opt/cuda12-wheels) give headers, ptxas and libdevice, but no fatbinary;
# CUDA 13's fatbinary takes --image3 where clang-19 passes CUDA 12's --image, so the fake toolkit
# root gets a small adapter. clang's CUDA wrapper also includes curand_mtgp32_kernel.h: a stub. CMake
# needs an nvcc to locate the toolkit (a stub that prints the version banner) and links cudadevrt
# (an empty archive: no test launches kernels from the device).
FATBINARY_ADAPTER = """#!{python}
import os, re, sys
args = []
for a in sys.argv[1:]:
    m = re.fullmatch(r"--image=profile=(sm|compute)_(\\w+),file=(.+)", a)
    args.append(f"--image3=kind={{'elf' if m.group(1) == 'sm' else 'ptx'}},sm={{m.group(2)}},file={{m.group(3)}}" if m else a)
os.execv({fatbinary!r}, [{fatbinary!r}, *args])
"""


def clang_cuda_root(scratch: Path) -> Path:
    """A CUDA 12 toolkit root clang-19 accepts (--cuda-path), assembled in ``scratch`` from PyPI's cu12 wheels."""
    from kernel_symbol_map.buildtree.toolchain import find_tool

    wheels = VENV_OPT / "cuda12-wheels" / "nvidia"
    require(str(wheels) if (wheels / "cuda_nvcc" / "bin" / "ptxas").is_file() else None, "PyPI's CUDA 12 wheels")
    fatbinary = require(find_tool("fatbinary"), "fatbinary (CUDA 13)")
    root = scratch / "cuda12"
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "nvvm").mkdir(exist_ok=True)
    (root / "include").mkdir(exist_ok=True)
    (root / "bin" / "ptxas").symlink_to(wheels / "cuda_nvcc" / "bin" / "ptxas")
    (root / "nvvm" / "libdevice").symlink_to(wheels / "cuda_nvcc" / "nvvm" / "libdevice")
    for folder in (wheels / "cuda_runtime" / "include", wheels / "cuda_nvcc" / "include"):
        for item in folder.iterdir():
            if not (root / "include" / item.name).exists():
                (root / "include" / item.name).symlink_to(item)
    (root / "include" / "curand_mtgp32_kernel.h").write_text("// stub: clang's CUDA wrapper includes it\n")
    adapter = root / "bin" / "fatbinary"
    adapter.write_text(FATBINARY_ADAPTER.format(python=sys.executable, fatbinary=fatbinary))
    adapter.chmod(0o755)
    # CMake finds a clang CUDA toolkit through its nvcc: the root is nvcc's parent, the version its banner.
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    nvcc.chmod(0o755)
    (root / "lib64").mkdir(exist_ok=True)
    (root / "lib64" / "libcudart.so").symlink_to(wheels / "cuda_runtime" / "lib" / "libcudart.so.12")
    (root / "lib64" / "libcudadevrt.a").write_bytes(b"!<arch>\n")  # CMake links it; nothing here uses it
    return root
