"""The CMake package: real wheels with pip, a vLLM-style setup.py flow, the target, and misuse."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import toolchains
from conftest import BUILD_IDS, example_wheel
from fatbin_patch import patched
from projects import Build, cmakes

from kernel_symbol_map.cmakedir import cmake_dir

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cuda_ext"
EXAMPLE_KERNELS = {
    "csrc/activation.cu": ("_ops", {"_ZN4demo11silu_kernelEPfPKfi", "_ZN4demo12scale_kernelIfEEvPT_PKS1_S1_i"}),
    "csrc/attention.cu": ("_ops", {"_ZN4demo12scale_kernelIfEEvPT_PKS1_S1_i", "_ZN4demo16attention_kernelILi64EEEvPfPKfi",
                                   "_ZN4demo16attention_kernelILi128EEEvPfPKfi"}),
    "csrc/host_only.cpp": ("_ops", set()),
    "csrc/reduce.cu": ("_reduce", {"_ZN4demo12scale_kernelIdEEvPT_PKS1_S1_i", "sum_kernel"}),
}


def run(command: list[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False, **kwargs)
    assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    return proc


def assert_example_map(doc: dict[str, Any]) -> None:
    assert "reason" not in doc, doc.get("reason")
    found = {o["source"]: (o["target"], set(o["symbols"])) for o in doc["objects"]}
    assert found == EXAMPLE_KERNELS


def test_wheel_ships_the_cmake_package(our_wheel: Path) -> None:
    with zipfile.ZipFile(our_wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    share = "kernel_symbol_map/share/cmake/KernelSymbolMap/"
    assert {share + "KernelSymbolMapConfig.cmake", share + "KernelSymbolMapConfigVersion.cmake",
            share + "KernelSymbolMapTopLevelInclude.cmake"} <= names
    assert "[cmake.prefix]\nKernelSymbolMap = kernel_symbol_map" in entry_points


def _example_wheel(pip: Path, our_wheel: Path, out: Path, *config: str) -> dict[str, Any]:
    wheel = example_wheel(pip, our_wheel, EXAMPLE, out, *config)
    with zipfile.ZipFile(wheel) as z:
        return json.loads(gzip.decompress(z.read("cuda_ext/kernel_symbol_map.json.gz")))


def test_pip_wheel_emits_the_map(our_wheel: Path, clean_pip: Path, tmp_path: Path) -> None:
    doc = _example_wheel(clean_pip, our_wheel, tmp_path)
    assert_example_map(doc)
    assert doc["backend"] == "cuda" and doc["generator"] == "Ninja"


def test_two_wheel_builds_in_different_folders_ship_identical_maps(
    our_wheel: Path, clean_pip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    maps = []
    for name in ("first", "second"):
        out = tmp_path / name
        _example_wheel(clean_pip, our_wheel, out)
        (wheel,) = out.glob("cuda_ext-*.whl")
        with zipfile.ZipFile(wheel) as z:
            maps.append(z.read("cuda_ext/kernel_symbol_map.json.gz"))
    assert maps[0] == maps[1]
    doc = json.loads(gzip.decompress(maps[0]))
    assert doc["build_dirs"] == ["$BUILD"] and str(tmp_path) not in json.dumps(doc)


def test_pip_wheel_with_one_build_target_still_maps_every_target(
    our_wheel: Path, clean_pip: Path, tmp_path: Path
) -> None:
    assert_example_map(_example_wheel(clean_pip, our_wheel, tmp_path, "-C", "build.targets=_reduce"))


def _configure(source: Path, build: Path, cmake: str, generator: str, *extra: str, ninja: str = "ninja") -> None:
    nvcc = toolchains.require(toolchains.nvcc(), "nvcc")
    command = [cmake, "-S", source, "-B", build, "-G", generator, "-DCMAKE_CUDA_ARCHITECTURES=80",
               f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DKernelSymbolMap_DIR={cmake_dir()}",
               f"-DPython_EXECUTABLE={sys.executable}", *extra]
    if generator == "Ninja":
        command.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
    run(command)


def test_setuptools_style_flow(tmp_path: Path) -> None:
    """vLLM: cmake -G Ninja; cmake --build --target <ext>; cmake --install --component <ext>."""
    dir_from_cli = run([sys.executable, "-m", "kernel_symbol_map", "--cmake-dir"]).stdout.strip()
    assert Path(dir_from_cli) == cmake_dir()
    build, prefix, ci = tmp_path / "build", tmp_path / "prefix", tmp_path / "ci"
    _configure(EXAMPLE, build, "cmake", "Ninja")
    run(["cmake", "--build", build, "--target", "_reduce"])
    assert not (build / "kernel_symbol_map.json.gz").exists()  # no ALL target ran
    run(["cmake", "--install", build, "--component", "_ops", "--prefix", prefix],
        env={**os.environ, "KERNEL_SYMBOL_MAP_OUT": str(ci)})
    installed = prefix / "cuda_ext" / "kernel_symbol_map.json.gz"
    assert_example_map(json.loads(gzip.decompress(installed.read_bytes())))
    assert (ci / "kernel_symbol_map.json.gz").read_bytes() == installed.read_bytes()


@pytest.mark.parametrize("config", BUILD_IDS)
def test_target_runs_only_when_objects_change(config: str, tmp_path: Path) -> None:
    label, generator = config.split("-")
    cmake = next(c for c in cmakes() if c.label == label)
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source)
    build = tmp_path / "build"
    _configure(source, build, cmake.cmake, "Ninja" if generator == "ninja" else "Unix Makefiles", ninja=cmake.ninja)
    b = Build(cmake, "Ninja" if generator == "ninja" else "Unix Makefiles", source, build)
    first = b.run_build("kernel_symbol_map")
    out = build / "kernel_symbol_map.json.gz"
    assert "Writing the kernel symbol map" in first
    before = json.loads(gzip.decompress(out.read_bytes()))
    assert_example_map(before)
    stamp = out.stat().st_mtime_ns

    again = b.run_build()
    assert "Writing the kernel symbol map" not in again and out.stat().st_mtime_ns == stamp

    cu = source / "csrc" / "reduce.cu"
    cu.write_text(cu.read_text() + '\nextern "C" __global__ void added_kernel(int* p) { p[0] = 1; }\n')
    third = b.run_build()
    assert "Writing the kernel symbol map" in third
    after = json.loads(gzip.decompress(out.read_bytes()))
    changed = {o["source"]: o["symbols"] for o in after["objects"]}
    unchanged = {o["source"]: o["symbols"] for o in before["objects"]}
    assert {s for s in changed if changed[s] != unchanged[s]} == {"csrc/reduce.cu"}
    assert "added_kernel" in changed["csrc/reduce.cu"]


def test_strict_fails_the_build_and_default_does_not(tmp_path: Path) -> None:
    for strict in ("", "STRICT"):
        source = tmp_path / f"src{strict}"
        shutil.copytree(EXAMPLE, source)
        cml = source / "CMakeLists.txt"
        cml.write_text(cml.read_text().replace("COMPONENT _ops ${mirrors})", f"COMPONENT _ops ${{mirrors}} {strict})"))
        build = tmp_path / f"build{strict}"
        _configure(source, build, "cmake", "Ninja")
        run(["cmake", "--build", build])
        # Corrupt the object's device code (the host linker never reads it), keep its
        # mtime so that nothing recompiles, and drop the map so that the extractor runs.
        obj = build / "CMakeFiles" / "_reduce.dir" / "csrc" / "reduce.cu.o"
        stat = obj.stat()
        obj.write_bytes(patched(obj.read_bytes(), "container.size", 1 << 40))
        os.utime(obj, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        (build / "kernel_symbol_map.json.gz").unlink()
        proc = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, check=False)
        doc = json.loads(gzip.decompress((build / "kernel_symbol_map.json.gz").read_bytes()))
        assert doc["objects"] == [] and "runs past the end" in doc["reason"]
        assert (proc.returncode != 0) == bool(strict), proc.stdout


MISUSE = {
    "unknown target": ("kernel_symbol_map(TARGETS nope)", "kernel_symbol_map(): unknown target nope"),
    "called twice": ("kernel_symbol_map()\nkernel_symbol_map()", "kernel_symbol_map(): called twice"),
    "unknown argument": ("kernel_symbol_map(TARGETZ x)", "kernel_symbol_map(): unknown arguments: TARGETZ"),
    "no python": ("kernel_symbol_map()", "kernel_symbol_map(): no usable Python"),
}


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_misuse_is_a_clear_configure_error(case: str, tmp_path: Path) -> None:
    call, message = MISUSE[case]
    (tmp_path / "host.cpp").write_text("int f() { return 1; }\n")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.25)\nproject(misuse LANGUAGES CXX)\n"
        f"find_package(KernelSymbolMap CONFIG REQUIRED)\nadd_library(host STATIC host.cpp)\n{call}\n"
    )
    python = "/nonexistent/python" if case == "no python" else sys.executable
    proc = subprocess.run(
        ["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), f"-DKernelSymbolMap_DIR={cmake_dir()}",
         f"-DPython_EXECUTABLE={python}"], capture_output=True, text=True, check=False,
    )
    assert proc.returncode != 0
    assert message in " ".join(proc.stderr.split())


def test_a_listed_target_without_device_code_is_mapped_as_host_code(tmp_path: Path) -> None:
    (tmp_path / "host.cpp").write_text("int f() { return 1; }\n")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.25)\nproject(warn LANGUAGES CXX)\n"
        "find_package(KernelSymbolMap CONFIG REQUIRED)\nadd_library(host STATIC host.cpp)\n"
        "kernel_symbol_map(TARGETS host)\n"
    )
    proc = run(["cmake", "-S", tmp_path, "-B", tmp_path / "b", f"-DKernelSymbolMap_DIR={cmake_dir()}",
                f"-DPython_EXECUTABLE={sys.executable}"])
    assert "kernel_symbol_map(): target host has no CUDA or HIP sources; its objects are mapped as host code" \
        in " ".join(proc.stdout.split())


# Retrofit: CMAKE_PROJECT_TOP_LEVEL_INCLUDES maps a project that was never edited.

PLAIN = ROOT / "tests" / "projects" / "plain_skbuild"
PLAIN_KERNELS = {"csrc/plain.cu": ("plain_kernels", {"_Z12plain_kernelPf"}),
                 "csrc/host.cpp": ("plain_host", set())}  # a host-only target is mapped too (issue 18, 1)


def _include() -> str:
    path = run([sys.executable, "-m", "kernel_symbol_map", "--cmake-include"]).stdout.strip()
    assert Path(path).name == "KernelSymbolMapTopLevelInclude.cmake" and Path(path).is_file()
    return path


def test_top_level_include_maps_an_unmodified_project(tmp_path: Path) -> None:
    nvcc = toolchains.require(toolchains.nvcc(), "nvcc")
    build = tmp_path / "build"
    build.mkdir()
    (build / "keep.txt").write_text("the user's")  # the retrofit removes nothing it did not write
    run(["/usr/bin/cmake", "-S", PLAIN, "-B", build, "-G", "Ninja", "-DCMAKE_CUDA_ARCHITECTURES=80",
         f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DSKBUILD_PROJECT_NAME=plain_ext",
         f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={_include()}"])
    assert (build / "keep.txt").read_text() == "the user's"
    assert (build / ".cmake" / "api" / "v1" / "query" / "client-kernel_symbol_map" / "query.json").is_file()
    run(["/usr/bin/cmake", "--build", build])
    doc = json.loads(gzip.decompress((build / "kernel_symbol_map.json.gz").read_bytes()))
    assert "reason" not in doc and "only_targets" not in doc  # the whole build: no --targets
    assert {o["source"]: (o["target"], set(o["symbols"])) for o in doc["objects"]} == PLAIN_KERNELS
    from kernel_symbol_map.consumer.maps.kernelmap import KernelMap

    assert KernelMap(doc).kernels_for("csrc/plain.h").status == "host"  # shared with the host-only target


def test_top_level_include_through_pip_wheel(tmp_path: Path) -> None:
    nvcc = toolchains.require(toolchains.nvcc(), "nvcc")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", PLAIN, "-w", tmp_path,
         "-C", "cmake.define.CMAKE_CUDA_ARCHITECTURES=80", "-C", f"cmake.define.CMAKE_CUDA_COMPILER={nvcc}",
         "-C", f"cmake.define.CMAKE_PROJECT_TOP_LEVEL_INCLUDES={_include()}"])
    (wheel,) = tmp_path.glob("plain_ext-*.whl")
    with zipfile.ZipFile(wheel) as z:
        doc = json.loads(gzip.decompress(z.read("plain_ext/kernel_symbol_map.json.gz")))
    assert "reason" not in doc
    assert {o["source"]: (o["target"], set(o["symbols"])) for o in doc["objects"]} == PLAIN_KERNELS


# ROCm: the same example, hipified into the build tree (-DCUDA_EXT_GPU=ROCM), mapped to the original .cu files.


def _rocm_defines(tmp: Path) -> list[str]:
    """CMake's HIP language here, whichever CMake builds (3.25 ignores the platform, 4.x the fake root)."""
    return [*toolchains.hip_cmake_args("3.25", tmp), "-DCMAKE_HIP_PLATFORM=amd", "-DCUDA_EXT_GPU=ROCM"]


def assert_rocm_example_map(doc: dict[str, Any]) -> None:
    from kernel_symbol_map import mapformat

    assert_example_map(doc)  # the same kernels, on the same original sources
    assert doc["backend"] == "rocm" and mapformat.schema_problems(doc) == []
    for o in doc["objects"]:
        assert o["compiled_from"].endswith("hipified/" + o["source"].replace(".cu", ".hip"))
        assert all("common_hip.cuh" not in d for d in o["deps"])
    assert {"csrc/common.cuh"} <= {d for o in doc["objects"] for d in o["deps"]}
    assert any("hip_compat.h" in n and "no original" in n for n in doc["notes"])
    for o in doc["objects"]:  # issue 21: each code object's kernels sized, per gfx architecture
        if o["symbols"]:
            assert o["sizes"] and all(a.startswith("gfx") for a in o["sizes"])
            # packed in the order of symbols (mapformat.sizes): every kernel has code in every architecture
            assert all(len(r["code"]) == len(o["symbols"]) and all(r["code"]) for r in o["sizes"].values())


def test_rocm_example_maps_the_sources_people_edit(tmp_path: Path) -> None:
    build = tmp_path / "build"
    _configure(EXAMPLE, build, str(cmakes()[-1].cmake), "Ninja", *_rocm_defines(tmp_path),
               ninja=str(cmakes()[-1].ninja))
    run([cmakes()[-1].cmake, "--build", build])
    map_file = build / "kernel_symbol_map.json.gz"
    assert_rocm_example_map(json.loads(gzip.decompress(map_file.read_bytes())))
    recs = tmp_path / "r.jsonl"
    recs.write_text("".join(json.dumps({"test": t, "kernels": sorted(k), "complete": True}) + "\n" for t, k in {
        "test_silu": {"_ZN4demo11silu_kernelEPfPKfi"}, "test_reduce": {"sum_kernel"}}.items()))
    commit = json.loads(gzip.decompress(map_file.read_bytes()))["commit"]
    assert commit  # the example is in this repository: git knows its commit
    select = [sys.executable, "-m", "kernel_symbol_map", "select", "--map", map_file, "--recordings", recs,
              "--recordings-commit", commit, "--json"]
    chosen = json.loads(run([*select, "--changed", "csrc/activation.cu"]).stdout)
    assert chosen["fallback"] is None and chosen["run"] == ["test_silu"] and chosen["skip"] == ["test_reduce"]
    answer = json.loads(run([sys.executable, "-m", "kernel_symbol_map", "query", map_file, "csrc/attention.cu",
                             "--json"]).stdout)
    assert "_ZN4demo16attention_kernelILi64EEEvPfPKfi" in json.dumps(answer)
    copy_only = json.loads(run([*select, "--changed", "csrc/common_hip.cuh"]).stdout)  # only the copy has it
    assert copy_only["fallback"] == "file-not-in-map" and len(copy_only["run"]) == 2


def test_rocm_example_wheel(our_wheel: Path, clean_pip: Path, tmp_path: Path) -> None:
    defines = [a for d in _rocm_defines(tmp_path) for a in ("-C", "cmake.define." + d[2:])]
    assert_rocm_example_map(_example_wheel(clean_pip, our_wheel, tmp_path, *defines))
