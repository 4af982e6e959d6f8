"""HIP objects from real compilers: plain and compressed bundles, rdc bitcode, .llvm.offloading."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernel_symbol_map import read_kernels

KERNELS = {"_ZN2ns2tkIfEEvPT_", "_ZN2ns2tkIiEEvPT_", "ck"}
TWO_ARCHS = ("gfx1030", "gfx90a")


@pytest.mark.parametrize(
    "case", ["hipcc.o", "clang.o", "clang_zstd.o", "clang_zlib.o", "raw.hipfb", "zstd.hipfb", "zlib.hipfb"]
)
def test_bundles_plain_and_compressed(hip_corpus: dict[str, Path], case: str) -> None:
    r = read_kernels(hip_corpus[case])
    assert r.error is None
    assert r.archs == TWO_ARCHS
    assert {a: set(s) for a, s in r.kernels.items()} == {a: KERNELS for a in TWO_ARCHS}


def test_linked_library_holds_both_translation_units(hip_corpus: dict[str, Path]) -> None:
    r = read_kernels(hip_corpus["hipcc.so"])
    assert r.archs == ("gfx90a",)
    assert set(r.symbols) == KERNELS | {"_Z13second_kernelPf"}


@pytest.mark.parametrize("case", ["clang_rdc.o", "clang_new_driver_rdc.o"])
def test_rdc_bitcode_names_its_kernels(hip_corpus: dict[str, Path], case: str) -> None:
    """-fgpu-rdc: the kernels the module defines, from its bitcode, before any device link."""
    r = read_kernels(hip_corpus[case])
    assert r.error is None, r.error
    assert {a: set(s) for a, s in r.kernels.items()} == {a: KERNELS for a in TWO_ARCHS}


def test_rdc_bitcode_agrees_with_llvm_dis(hip_corpus: dict[str, Path], tmp_path: Path) -> None:
    """An independent reference: the `define ... amdgpu_kernel` functions llvm-dis prints."""
    bin_dir = Path(shutil.which("clang-19") or "").resolve().parent
    section = "__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a"
    bc = tmp_path / "gfx90a.bc"
    subprocess.run(["objcopy", f"--dump-section={section}={bc}", str(hip_corpus["clang_rdc.o"]), str(tmp_path / "x.o")],
                   check=True)
    text = subprocess.run([str(bin_dir / "llvm-dis"), "-o", "-", str(bc)], capture_output=True, text=True,
                          check=True).stdout
    reference = {line.split("@", 1)[1].split("(", 1)[0].strip('"') for line in text.splitlines()
                 if line.startswith("define ") and "amdgpu_kernel" in line}
    assert set(read_kernels(hip_corpus["clang_rdc.o"]).kernels["gfx90a"]) == reference == KERNELS


def test_llvm_offloading_code_object(hip_corpus: dict[str, Path]) -> None:
    r = read_kernels(hip_corpus["offloading.o"])
    assert r.error is None
    assert {a: set(s) for a, s in r.kernels.items()} == {"gfx90a": KERNELS}


def test_code_object_agrees_with_llvm_nm(hip_corpus: dict[str, Path]) -> None:
    """An independent reference: the `.kd` descriptors llvm-nm lists in the code object."""
    nm = shutil.which("llvm-nm-19") or str(Path(shutil.which("clang-19") or "").resolve().parent / "llvm-nm")
    out = subprocess.run([nm, "--defined-only", str(hip_corpus["gfx90a.o"])], capture_output=True, text=True, check=True)
    reference = {line.split()[-1][: -len(".kd")] for line in out.stdout.splitlines() if line.endswith(".kd")}
    assert set(read_kernels(hip_corpus["gfx90a.o"]).symbols) == reference == KERNELS
