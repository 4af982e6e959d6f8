"""The native reader on real nvcc output: exact names, and equal to real cuobjdump on every case."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CUDA_OBJECTS

from kernel_symbol_map import read_kernels
from kernel_symbol_map.readers.crosscheck import compare
from kernel_symbol_map.readers.cuobjdump import Cuobjdump

K_KERNELS = {"_Z2skPi", "_ZN2ns2tkIfEEvPT_", "_ZN2ns2tkIiEEvPT_", "ck"}
K2_KERNELS = {"_Z4fillILi1EEvPi", "_Z4fillILi2EEvPi", "_Z5childPi"}
CASES = sorted([*CUDA_OBJECTS, "static.a", "host.o"])


def _k_kernels(symbols: tuple[str, ...]) -> set[str]:
    """k.cu's kernels, with the anonymous-namespace one's per-file hash masked."""
    return {"<anon>::ak" if "_GLOBAL__N_" in s and s.endswith("2akEPi") else s for s in symbols}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("version", ["13.4", "13.5"])
def test_native_equals_cuobjdump(cuda_corpus: dict[str, Path], cuobjdumps: dict[str, str], case: str, version: str) -> None:
    native = read_kernels(cuda_corpus[case])
    reference = Cuobjdump(cuobjdumps[version]).read_kernels(cuda_corpus[case])
    assert compare(native, reference) == []
    assert (native.error is None) == (reference.error is None)


def test_templates_extern_c_namespaces_static_and_anonymous(cuda_corpus: dict[str, Path]) -> None:
    r = read_kernels(cuda_corpus["gencode3.o"])
    assert r.error is None
    assert _k_kernels(r.symbols) == K_KERNELS | {"<anon>::ak"}
    assert r.archs == ("sm_100", "sm_80", "sm_90")
    assert all(set(names) == set(r.symbols) for names in r.kernels.values())


def test_ptx_only_uses_entry_directives(cuda_corpus: dict[str, Path]) -> None:
    r = read_kernels(cuda_corpus["ptx_only.o"])
    assert r.archs == ("compute_90",)
    assert _k_kernels(r.symbols) == K_KERNELS | {"<anon>::ak"}


def test_lto_ir_only_is_an_error_not_kernel_free(cuda_corpus: dict[str, Path]) -> None:
    r = read_kernels(cuda_corpus["lto_only.o"])
    assert r.error is not None and "before device link" in r.error
    assert r.symbols == ()


def test_rdc_renames_static_kernels(cuda_corpus: dict[str, Path]) -> None:
    symbols = read_kernels(cuda_corpus["rdc.o"]).symbols
    assert {"_ZN2ns2tkIfEEvPT_", "_ZN2ns2tkIiEEvPT_", "ck"} <= set(symbols)
    statics = [s for s in symbols if s.startswith("__nv_static_")]
    assert len(statics) == 2 and any(s.endswith("_Z2skPi") for s in statics)


def test_rdc_extern_kernel_launched_from_device_is_not_ours(cuda_corpus: dict[str, Path]) -> None:
    assert read_kernels(cuda_corpus["rdc_extern.o"]).symbols == ("_Z6parentPi",)


@pytest.mark.parametrize(
    "case", ["compress_default.o", "compress_size.o", "compress_speed.o", "compress_balance.o",
             "compress_none.o", "compress_all.o", "debug.o"]
)
def test_every_compression_gives_the_same_kernels(cuda_corpus: dict[str, Path], case: str) -> None:
    r = read_kernels(cuda_corpus[case])
    assert r.error is None
    assert r.archs == ("sm_80",)
    assert _k_kernels(r.symbols) == K_KERNELS | {"<anon>::ak"}


def test_static_archive_reports_members(cuda_corpus: dict[str, Path]) -> None:
    r = read_kernels(cuda_corpus["static.a"])
    names = [Path(m.path).name for m in r.members]
    assert names == ["static.a(gencode3.o)", "static.a(rdc.o)", "static.a(k2.o)", "static.a(host.o)"]
    assert set(r.members[2].symbols) == K2_KERNELS
    assert r.members[3].symbols == () and r.members[3].error is None and not r.members[3].device


@pytest.mark.parametrize("case", ["shared.so", "executable", "raw.fatbin"])
def test_linked_binaries_hold_every_translation_unit(cuda_corpus: dict[str, Path], case: str) -> None:
    expected = K_KERNELS | (K2_KERNELS if case == "shared.so" else set())
    assert _k_kernels(read_kernels(cuda_corpus[case]).symbols) == expected | {"<anon>::ak"}


def test_device_linked_shared_library(cuda_corpus: dict[str, Path]) -> None:
    r = read_kernels(cuda_corpus["shared_rdc.so"])
    assert r.error is None
    assert {"_Z6parentPi", "_Z5childPi", "_Z4fillILi1EEvPi"} <= set(r.symbols)


def test_raw_cubin(cuda_corpus: dict[str, Path]) -> None:
    r = read_kernels(cuda_corpus["raw.cubin"])
    assert r.archs == ("sm_90",)
    assert _k_kernels(r.symbols) == K_KERNELS | {"<anon>::ak"}


def test_host_object_has_no_kernels_and_no_error(cuda_corpus: dict[str, Path]) -> None:
    r = read_kernels(cuda_corpus["host.o"])
    assert (r.symbols, r.error, r.device) == ((), None, False)
