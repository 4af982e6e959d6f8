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
