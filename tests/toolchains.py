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


def hip_cmake_args(cmake_label: str, scratch: Path) -> list[str]:
    """-D flags that configure CMake's HIP language here; ``scratch`` holds CMake 3.25's fake ROCm root."""
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
