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


# Every architecture's device side, with no HIP installation: clang's own driver, -nogpuinc -nogpulib.
PER_ARCH = """#ifdef __HIP_DEVICE_COMPILE__
#include "device_only.h"
#endif
#if defined(__gfx90a__)
#include "gfx90a_only.h"
#endif
#if defined(__gfx1030__)
#include "gfx1030_only.h"
#endif
#ifdef EXTRA
#include "extra.h"
#endif
__attribute__((global)) void k(int* x) { x[0] = 1; }
"""
HEADERS = ("device_only.h", "gfx90a_only.h", "gfx1030_only.h", "extra.h", "added.h")


def _clang(version: str) -> str:
    return require(shutil.which("clang++", path=f"/usr/lib/llvm-{version}/bin"),
                   f"clang-{version} (Debian package clang-{version})")


def _project(where: Path) -> tuple[Path, Path]:
    source = where / "k.hip"
    source.write_text(PER_ARCH)
    for name in HEADERS:
        (where / name).write_text("#pragma once\n")
    obj = where / "k.o"
    obj.write_bytes(b"object")
    return source, obj


def _command(where: Path, exe: str, source: Path, obj: Path, *flags: str) -> Command:
    return Command(where, (exe, "-x", "hip", "-nogpuinc", "-nogpulib", *flags, "-MD", "-MF", f"{obj}.d", "-c",
                           str(source), "-o", str(obj)))


def test_a_comma_list_of_architectures_is_kept_whole() -> None:
    """clang takes ``--offload-arch=a,b`` (and ``--cuda-gpu-arch=a,b``) as both: the device run must too."""
    command = Command(Path("/b"), ("/usr/bin/clang++-19", "-x", "hip", "--offload-arch=gfx90a,gfx1030",
                                   "--cuda-gpu-arch=sm_80,sm_90", "-c", "k.hip", "-o", "k.o"))
    assert device_command(command) == ["/usr/bin/clang++-19", "-x", "hip", "--offload-arch=gfx90a,gfx1030",
                                       "--cuda-gpu-arch=sm_80,sm_90", "k.hip", "--cuda-device-only", "-M"]
    assert [a for _, a in archs(command.arguments)] == ["gfx90a", "gfx1030", "sm_80", "sm_90"]


@pytest.mark.parametrize("version", ["15", "19"])
@pytest.mark.parametrize("spelled", [("--offload-arch=gfx90a,gfx1030",), ("--offload-arch=gfx1030,gfx90a",),
                                     ("--offload-arch=gfx90a", "--offload-arch=gfx1030")])
def test_every_architecture_of_the_command_is_preprocessed(tmp_path: Path, version: str,
                                                           spelled: tuple[str, ...]) -> None:
    """A header taken for one architecture only is found whichever place that architecture has in the list."""
    source, obj = _project(tmp_path)
    command = _command(tmp_path, _clang(version), source, obj, *spelled)
    assert is_clang_offload(command)
    (deps, error), = device_deps(tmp_path, {obj: command}, "test", use_cache=False).values()
    assert error is None, error
    found = {Path(d).name for d in deps if Path(d).parent == tmp_path}
    assert found == {"k.hip", "device_only.h", "gfx90a_only.h", "gfx1030_only.h"}


def test_the_cache_is_used_only_while_its_key_holds(tmp_path: Path) -> None:
    """Cached includes stand for an object only while its stat key and its command are what they were."""
    source, obj = _project(tmp_path)
    exe = _clang("19")
    command = _command(tmp_path, exe, source, obj, "--offload-arch=gfx90a")

    def deps(cmd: Command = command) -> tuple[set[str], str | None]:
        (found, error), = device_deps(tmp_path, {obj: cmd}, "test").values()
        return {Path(d).name for d in found if Path(d).parent == tmp_path}, error

    assert deps() == ({"k.hip", "device_only.h", "gfx90a_only.h"}, None)
    # The source now includes another header under device compilation, and the object was not rebuilt:
    # its key holds, so the cache answers (the model fails closed on an object older than its deps).
    source.write_text('#ifdef __HIP_DEVICE_COMPILE__\n#include "added.h"\n#endif\n' + PER_ARCH)
    assert deps() == ({"k.hip", "device_only.h", "gfx90a_only.h"}, None)
    # Rebuilt: a new stat key, so the cached includes are stale and the preprocessor runs again.
    obj.unlink()
    obj.write_bytes(b"rebuilt object")
    assert deps() == ({"k.hip", "added.h", "device_only.h", "gfx90a_only.h"}, None)
    # The same object under another command (a define that takes extra.h): run again too.
    extra = _command(tmp_path, exe, source, obj, "--offload-arch=gfx90a", "-DEXTRA")
    everything = {"k.hip", "added.h", "device_only.h", "gfx90a_only.h", "extra.h"}
    assert deps(extra) == (everything, None)
    # A missing source behind an unchanged key is never looked at: the cache answers...
    source.unlink()
    assert deps(extra) == (everything, None)
    # ... until the key changes (here the command), and then the preprocessor's failure is the answer.
    found, error = deps()
    assert found == set() and error and error.startswith("device-side includes unknown: the preprocessor failed")
    # A failure is never cached: asked again, the preprocessor runs again, and fails again.
    assert deps() == (set(), error)


@pytest.mark.parametrize("flags", [("-x", "hip"), ()])
def test_a_clang_offload_compile_with_no_architecture_named_is_preprocessed(tmp_path: Path,
                                                                           flags: tuple[str, ...]) -> None:
    """No ``--offload-arch``: clang compiles for its default architecture, and its device side still takes
    headers the host job does not. ``-x hip`` or a ``.hip`` source says it is an offload compile."""
    source, obj = _project(tmp_path)
    if flags:  # the language given, the source named as a C++ file
        source = source.rename(tmp_path / "k.cpp")
    command = Command(tmp_path, (_clang("19"), *flags, "-nogpuinc", "-nogpulib", "-c", str(source), "-o", str(obj)))
    assert archs(command.arguments) == [] and is_clang_offload(command)
    (deps, error), = device_deps(tmp_path, {obj: command}, "test", use_cache=False).values()
    assert error is None, error
    assert {Path(d).name for d in deps if Path(d).parent == tmp_path} == {source.name, "device_only.h"}
    assert not is_clang_offload(Command(tmp_path, (_clang("19"), "-c", "host.cpp", "-o", "host.o")))


def test_hipcc_is_clang_whatever_the_source_is_called() -> None:
    """hipcc as CMake's C++ compiler (kernels in ``.cpp``) drives clang: its depfile is the host job's too."""
    command = Command(Path("/b"), ("ccache", "/opt/rocm/bin/hipcc", "--offload-arch=gfx90a", "-c", "k.cpp",
                                   "-o", "k.o"))
    assert is_clang_offload(command)
    assert device_command(command) == ["/opt/rocm/bin/hipcc", "--offload-arch=gfx90a", "k.cpp",
                                       "--cuda-device-only", "-M"]
