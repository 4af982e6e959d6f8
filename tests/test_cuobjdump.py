"""The cuobjdump backend: its parser on captured real output, and its fallbacks live."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kernel_symbol_map import read_kernels
from kernel_symbol_map.errors import ToolError
from kernel_symbol_map.readers.cuobjdump import Cuobjdump, parse_symbols

CAPTURED = Path(__file__).parent / "data" / "cuobjdump"
K = {"_Z2skPi", "_ZN2ns2tkIfEEvPT_", "_ZN2ns2tkIiEEvPT_", "ck", "_ZN30_GLOBAL__N__ad63c04f_4_k_cu_ck2akEPi"}


@pytest.fixture(params=["13.4", "13.5"])
def captured(request: pytest.FixtureRequest) -> Path:
    return CAPTURED / request.param


def test_parses_three_archs(captured: Path) -> None:
    found = parse_symbols((captured / "k.txt").read_text())
    assert set(found) == {""}
    assert {a: set(s) for a, s in found[""].elf.items()} == {"sm_80": K, "sm_90": K, "sm_100": K}
    assert found[""].ptx_archs == {"sm_100"}


def test_skips_undefined_entries(captured: Path) -> None:
    found = parse_symbols((captured / "dp.txt").read_text())
    assert dict(found[""].elf) == {"sm_80": {"_Z6parentPi"}}


def test_archive_members(captured: Path) -> None:
    found = parse_symbols((captured / "lib.txt").read_text())
    assert list(found) == ["k.o", "host.o"]
    assert set(found["k.o"].elf["sm_90"]) == K
    assert not found["host.o"].elf


def test_ptx_only_and_lto_only_blocks(captured: Path) -> None:
    ptx = parse_symbols((captured / "ptx.txt").read_text())[""]
    assert (dict(ptx.elf), ptx.ptx_archs) == ({}, {"sm_90"})
    lto = parse_symbols((captured / "lto.txt").read_text())[""]
    assert (dict(lto.elf), lto.nvvm_archs) == ({}, {"sm_90"})


def test_debug_header_lines(captured: Path) -> None:
    assert set(parse_symbols((captured / "debug.txt").read_text())[""].elf["sm_80"]) == K


def test_unknown_symbol_format_is_an_error_not_zero_kernels() -> None:
    text = "\nFatbin elf code:\n================\narch = sm_80\n\nsymbols:\nfunc|global|entry|_Z1kv\n"
    with pytest.raises(ToolError, match="unrecognised cuobjdump -symbols line 7"):
        parse_symbols(text)


def test_elf_block_without_symbols_section_is_an_error() -> None:
    text = "\nFatbin elf code:\n================\narch = sm_80\nentries:\n  _Z1kv\n"
    with pytest.raises(ToolError, match="no symbols section"):
        parse_symbols(text)


@pytest.fixture
def cuobjdump(cuobjdumps: dict[str, str]) -> Cuobjdump:
    return Cuobjdump(cuobjdumps["13.5"])


def test_host_object_means_no_kernels(cuda_corpus: dict[str, Path], cuobjdump: Cuobjdump) -> None:
    r = cuobjdump.read_kernels(cuda_corpus["host.o"])
    assert (r.symbols, r.error) == ((), None)


def test_removed_architecture_is_retried_with_arch(
    cuda_corpus: dict[str, Path], cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    patched = tmp_path / "sm35.o"
    data = bytearray(cuda_corpus["gencode3.o"].read_bytes())
    container = data.find(struct.pack("<I", 0xBA55ED50))
    struct.pack_into("<I", data, container + 16 + 0x1C, 35)  # first entry's SM number
    patched.write_bytes(data)
    assert "sm_35" in read_kernels(patched).archs

    r = cuobjdump.read_kernels(patched)
    assert r.error is None
    assert r.archs == ("sm_100", "sm_90")
    assert set(r.symbols) == set(read_kernels(patched).symbols)


def test_missing_executable_is_an_error(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    r = Cuobjdump(str(tmp_path / "no-such-cuobjdump")).read_kernels(cuda_corpus["gencode3.o"])
    assert r.error is not None and "No such file" in r.error


def test_hip_object_is_not_called_kernel_free(hip_corpus: dict[str, Path], cuobjdump: Cuobjdump) -> None:
    r = cuobjdump.read_kernels(hip_corpus["hipcc.o"])
    assert r.error is not None and ".hip_fatbin" in r.error


def test_directory_is_an_error(tmp_path: Path, cuobjdump: Cuobjdump) -> None:
    assert cuobjdump.read_kernels(tmp_path).error == "is a directory"


def test_compare_names_every_difference() -> None:
    """The cross-check can fail: differing sets, one side unreadable, a member only one side has."""
    from kernel_symbol_map.readers.crosscheck import compare
    from kernel_symbol_map.readers.devicecode import Result

    mine = Result("x.o", {"sm_80": frozenset({"_Z2k1v", "_Z2k2v"})})
    theirs = Result("x.o", {"sm_90": frozenset({"_Z2k2v", "_Z2k3v"})})
    assert compare(mine, Result("x.o", {"sm_90": mine.kernels["sm_80"]})) == []  # arch labels are not compared
    (d,) = compare(mine, theirs)
    assert (d.only_first, d.only_second) == (("_Z2k1v",), ("_Z2k3v",))
    assert d.describe() == "x.o: only native: _Z2k1v; only cuobjdump: _Z2k3v"
    (d,) = compare(mine, Result("x.o", error="cuobjdump failed"))
    assert d.second_error == "cuobjdump failed" and "cuobjdump error: cuobjdump failed" in d.describe()
    archive = Result("lib.a", members=(Result("lib.a(a.o)", mine.kernels), Result("lib.a(b.o)", theirs.kernels)))
    fewer = Result("lib.a", members=(Result("lib.a(a.o)", mine.kernels),))
    (d,) = compare(archive, fewer)
    assert d.path == "lib.a(b.o)" and d.only_first == ("_Z2k2v", "_Z2k3v")
