"""The device side's includes of clang-driven objects: commands rewritten, and real preprocessor runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import toolchains
from toolchains import require

from kernel_symbol_map.buildtree.compdb import Command
from kernel_symbol_map.buildtree.devicedeps import archs, device_command, device_deps, is_clang_offload

SOURCE = """#include <hip/hip_runtime.h>
#ifdef __HIP_DEVICE_COMPILE__
#include "device_only.h"
#endif
#if defined(__gfx90a__)
#include "gfx90a_only.h"
#endif
__global__ void k(int* x) { x[0] = 1; }
"""


def test_a_compile_command_becomes_one_device_preprocessing_run() -> None:
    command = Command(Path("/b"), ("ccache", "/usr/bin/clang++-15", "-DX", "-Iinc", "--offload-arch=gfx90a",
                                   "--offload-arch", "gfx1030", "-MD", "-MT", "o.o", "-MF", "o.o.d", "-x", "hip",
                                   "-c", "/s/k.hip", "-o", "o.o", "-MFjoined.d"))
    assert is_clang_offload(command)
    assert archs(command.arguments) == [("--offload-arch", "gfx90a"), ("--offload-arch", "gfx1030")]
    assert device_command(command) == ["/usr/bin/clang++-15", "-DX", "-Iinc", "--offload-arch=gfx90a",
                                       "--offload-arch", "gfx1030", "-x", "hip", "/s/k.hip", "--cuda-device-only", "-M"]
    assert archs(["--cuda-gpu-arch=sm_80,sm_90"]) == [("--cuda-gpu-arch", "sm_80"), ("--cuda-gpu-arch", "sm_90")]
    assert not is_clang_offload(Command(Path("/b"), ("/usr/local/cuda/bin/nvcc", "-c", "k.cu", "-o", "k.o")))
    assert not is_clang_offload(Command(Path("/b"), ("/usr/bin/clang++", "-c", "host.cpp", "-o", "host.o")))


@pytest.mark.hip
@pytest.mark.parametrize("compiler", ["hipcc", "clang-19"])
def test_device_only_and_one_architecture_includes_are_found(tmp_path: Path, compiler: str) -> None:
    """The host job's depfile misses both headers; the device side's runs find each where it is taken."""
    source = tmp_path / "k.hip"
    source.write_text(SOURCE)
    for name in ("device_only.h", "gfx90a_only.h"):
        (tmp_path / name).write_text("#pragma once\n")
    if compiler == "hipcc":
        exe = require(toolchains.hipcc(), "hipcc (Debian package hipcc)")
        args = [exe]
    else:
        exe = require(shutil.which("clang++", path="/usr/lib/llvm-19/bin"), "clang-19 (Debian package clang-19)")
        args = [exe, "-x", "hip", f"--rocm-device-lib-path={toolchains.HIP_DEVICE_LIBS}"]
    obj = tmp_path / "k.o"
    obj.write_bytes(b"")  # only its stat key is used: the cache's key
    command = Command(tmp_path, (*args, "--offload-arch=gfx90a", "--offload-arch=gfx1030", "-MD", "-c", str(source),
                                 "-o", str(obj)))
    assert is_clang_offload(command)
    (deps, error), = device_deps(tmp_path, {obj: command}, "test", use_cache=False).values()
    assert error is None, error
    assert {str(tmp_path / "device_only.h"), str(tmp_path / "gfx90a_only.h"), str(source)} <= set(deps)
    broken = Command(tmp_path, (*args, "--offload-arch=gfx90a", "-c", str(tmp_path / "missing.hip"), "-o", str(obj)))
    (_, error), = device_deps(tmp_path, {obj: broken}, "test", use_cache=False).values()
    assert error and error.startswith("device-side includes unknown: the preprocessor failed")
