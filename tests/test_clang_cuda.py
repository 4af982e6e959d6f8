"""clang-19 as the CUDA compiler (PyPI's CUDA 12): every driver mode read natively, checked against cuobjdump."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CLANG_CUDA_MODES

from kernel_symbol_map import read_kernels
from kernel_symbol_map.readers.crosscheck import compare
from kernel_symbol_map.readers.cuobjdump import Cuobjdump

# k.cu's kernels as clang names them: the internal ones mangled as clang does (and, under -fgpu-rdc,
# made unique per translation unit with an __intern__ suffix).
PUBLIC = {"_ZN2ns2tkIfEEvPT_", "_ZN2ns2tkIiEEvPT_", "ck"}


@pytest.mark.parametrize("case", sorted(CLANG_CUDA_MODES))
def test_clang_cuda_objects_are_read(clang_cuda_corpus: dict[str, Path], case: str) -> None:
    r = read_kernels(clang_cuda_corpus[case])
    assert r.error is None, r.error
    assert r.archs == ("sm_80",) and PUBLIC <= set(r.symbols) and len(r.symbols) == 5


@pytest.mark.parametrize("case", ["clang_default.o", "clang_new_driver.o", "clang_rdc.o"])
def test_clang_cuda_native_equals_cuobjdump(clang_cuda_corpus: dict[str, Path], cuobjdumps: dict[str, str],
                                            case: str) -> None:
    path = clang_cuda_corpus[case]
    for exe in cuobjdumps.values():
        assert compare(read_kernels(path), Cuobjdump(exe).read_kernels(path)) == []


def test_llvm_offloading_cubin_image_matches_the_default_driver(clang_cuda_corpus: dict[str, Path]) -> None:
    """cuobjdump cannot read .llvm.offloading; the same source's rdc fatbin, which it can, is the reference."""
    offloading = read_kernels(clang_cuda_corpus["clang_new_driver_rdc.o"])
    reference = read_kernels(clang_cuda_corpus["clang_rdc.o"])
    # Internal kernels carry a per-compilation hash (`__intern__<hash>`): the same kernels, other suffixes.
    unhashed = lambda r: {s.split("__intern__")[0] for s in r.symbols}  # noqa: E731
    assert unhashed(offloading) == unhashed(reference) and PUBLIC <= set(offloading.symbols)
    assert any("__intern__" in s for s in offloading.symbols)


@pytest.fixture(scope="module")
def clang_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/projects/selection with CMAKE_CUDA_COMPILER=clang++-19 on the newest CMake; its build folder."""
    import shutil

    import projects
    import toolchains

    cmake = next((c for c in projects.cmakes() if c.label == "newest"), None)
    toolchains.require(cmake and cmake.cmake, "PyPI's cmake")
    clang = toolchains.require(shutil.which("clang++-19"), "clang++-19 (Debian package clang-19)")
    where = tmp_path_factory.mktemp("clang-project")
    root = toolchains.clang_cuda_root(where)
    shutil.copytree(projects.PROJECTS / "selection", where / "src")
    (where / "src" / "include" / "alias.cuh").symlink_to("shared.cuh")
    b = projects.configure_and_build_at(
        where / "src", where / "build", cmake, "Ninja", f"-DCMAKE_CUDA_COMPILER={clang}", f"-DCUDAToolkit_ROOT={root}",
        "-DCMAKE_CUDA_FLAGS=-Wno-unknown-cuda-version", "-DCMAKE_CUDA_RUNTIME_LIBRARY=Shared",
        f"-DCMAKE_SHARED_LINKER_FLAGS=-L{root / 'lib64'}")
    return b.build


def test_a_clang_cuda_cmake_project_is_mapped(clang_project: Path, tmp_path: Path) -> None:
    import gzip
    import json

    from kernel_symbol_map.cli import main

    out = tmp_path / "map.json.gz"
    assert main(["build", "--build-dir", str(clang_project), "--out", str(out), "--commit", "c1"]) == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert "reason" not in doc and doc["cuda"] == "12.8"  # the toolkit's version, not clang's
    found = {o["source"]: set(o["symbols"]) for o in doc["objects"]}
    assert found["csrc/a.cu"] == {"_Z8a_kernelPf", "_Z13shared_kernelIfEvPT_"}
    assert found["csrc/b.cu"] == {"_Z8b_kernelPi", "_Z13shared_kernelIiEvPT_"} and found["csrc/host.cpp"] == set()
    assert "include/alias.cuh" in next(o for o in doc["objects"] if o["source"] == "csrc/b.cu")["deps"]


def test_clang_cuda_project_objects_native_equals_cuobjdump(clang_project: Path, cuobjdumps: dict[str, str]) -> None:
    objects = sorted(p for p in clang_project.rglob("*.cu.o"))
    assert len(objects) == 4
    for obj in objects:
        for exe in cuobjdumps.values():
            assert compare(read_kernels(obj), Cuobjdump(exe).read_kernels(obj)) == [], obj
