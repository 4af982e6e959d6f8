"""Container layouts the compilers here do not produce on their own: built by the tests."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from kernel_symbol_map import read_kernels
from kernel_symbol_map.errors import FormatError
from kernel_symbol_map.readers._blob import Blob


def test_gnu_long_member_names(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    long_name = tmp_path / "a_member_name_longer_than_sixteen.o"
    long_name.write_bytes(cuda_corpus["k2.o"].read_bytes())
    subprocess.run(["ar", "rcs", "lib.a", long_name.name], cwd=tmp_path, check=True)
    r = read_kernels(tmp_path / "lib.a")
    assert [m.path for m in r.members] == [f"{tmp_path / 'lib.a'}({long_name.name})"]
    assert r.members[0].symbols == read_kernels(cuda_corpus["k2.o"]).symbols


def _ar_header(name: bytes, size: int) -> bytes:
    return struct.pack("16s12s6s6s8s10s2s", name.ljust(16), b"0".ljust(12), b"0".ljust(6),
                       b"0".ljust(6), b"644".ljust(8), str(size).encode().ljust(10), b"`\n")


def test_bsd_member_names(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    """BSD ar (macOS, llvm-ar --format=bsd) stores long names after the header as #1/<len>."""
    body = cuda_corpus["k2.o"].read_bytes()
    name = b"kernels_bsd.o\0\0\0"
    member = _ar_header(b"#1/%d" % len(name), len(name) + len(body)) + name + body
    symdef = _ar_header(b"__.SYMDEF", 4) + bytes(4)
    (tmp_path / "bsd.a").write_bytes(b"!<arch>\n" + symdef + member + b"\n" * (len(member) & 1))
    r = read_kernels(tmp_path / "bsd.a")
    assert [Path(m.path).name for m in r.members] == ["bsd.a(kernels_bsd.o)"]
    assert r.members[0].symbols == read_kernels(cuda_corpus["k2.o"]).symbols


def test_thin_archive_is_refused(tmp_path: Path) -> None:
    (tmp_path / "thin.a").write_bytes(b"!<thin>\n")
    assert "thin archives" in (read_kernels(tmp_path / "thin.a").error or "")


def test_containers_with_padding_between(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    one = cuda_corpus["raw.fatbin"].read_bytes()
    padded = one + bytes(-len(one) % 8 or 8) + one + bytes(8)
    (tmp_path / "two.fatbin").write_bytes(padded)
    r = read_kernels(tmp_path / "two.fatbin")
    assert r.error is None and r.symbols == read_kernels(cuda_corpus["raw.fatbin"]).symbols


def test_junk_between_containers_is_an_error(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    one = cuda_corpus["raw.fatbin"].read_bytes()
    (tmp_path / "junk.fatbin").write_bytes(one + b"\0\0junk" + one)
    assert "bad fatbin magic" in (read_kernels(tmp_path / "junk.fatbin").error or "")


def test_unsupported_offload_binary_version(hip_corpus: dict[str, Path], tmp_path: Path) -> None:
    data = bytearray(hip_corpus["offloading.o"].read_bytes())
    at = data.find(b"\x10\xff\x10\xad")
    struct.pack_into("<I", data, at + 4, 9)
    (tmp_path / "v9.o").write_bytes(data)
    assert "unsupported offload binary version 9" in (read_kernels(tmp_path / "v9.o").error or "")


def test_blob_checks_every_read() -> None:
    blob = Blob.from_bytes("mem", b"0123456789")
    assert blob.read(2, 3, "x") == b"234"
    assert blob.window(2, 6, "w").read(4, 2, "y") == b"67"
    for offset, size in [(8, 3), (-1, 1), (0, 11)]:
        with pytest.raises(FormatError, match="runs past the end"):
            blob.read(offset, size, "field")
    with pytest.raises(FormatError, match="runs past the end"):
        blob.window(2, 6, "w").read(5, 2, "y")
