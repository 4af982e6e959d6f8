"""Bad input: one clear line naming the file and the reason; no traceback, no hang."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fatbin_patch import patched, read_field

from kernel_symbol_map import read_kernels


def _cli(*paths: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernel_symbol_map", "symbols", *map(str, paths)],
        capture_output=True, text=True, timeout=60, check=False,
    )


def _assert_one_line_errors(proc: subprocess.CompletedProcess[str], paths: list[Path]) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(paths), lines
    for line, path in zip(lines, paths, strict=True):
        assert line.startswith(f"ERROR {path}: "), line


def test_empty_garbage_truncated_and_directory(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    obj = cuda_corpus["gencode3.o"].read_bytes()
    cases = {
        "empty.o": (b"", "empty file"),
        "garbage.o": (os.urandom(4096).replace(b"\x7fELF", b"xxxx"), "not an ELF file, ar archive"),
        "truncated-header.o": (obj[:40], "ELF header (64 bytes) runs past the end"),
        "truncated-sections.o": (obj[: len(obj) // 2], "runs past the end"),
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    for name, (_, reason) in cases.items():
        r = read_kernels(tmp_path / name)
        assert r.error is not None and reason in r.error, (name, r.error)
    folder = tmp_path / "a-directory.o"
    folder.mkdir()
    assert read_kernels(folder).error == "is a directory"

    paths = [tmp_path / n for n in cases] + [folder]
    _assert_one_line_errors(_cli(*paths), paths)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("container.size", 1 << 40, "fatbin entries (1099511627776 bytes) runs past the end"),
        ("entry.stored_size", 1 << 40, "payload (1099511627776 bytes) runs past its container"),
        ("entry.header_size", 1 << 30, "runs past its container"),
        ("entry.header_size", 8, "header size 8 is too small"),
        ("entry.kind", 0x40, "unknown fatbin entry kind 64"),
    ],
)
def test_fatbin_sizes_and_kinds_checked(
    cuda_corpus: dict[str, Path], tmp_path: Path, field: str, value: int, reason: str
) -> None:
    bad = tmp_path / "bad.o"
    bad.write_bytes(patched(cuda_corpus["gencode3.o"].read_bytes(), field, value))
    r = read_kernels(bad)
    assert r.error is not None and reason in r.error
    _assert_one_line_errors(_cli(bad), [bad])


def test_unknown_compression_bit_is_an_error_never_a_skip(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    data = cuda_corpus["rdc.o"].read_bytes()  # -rdc: the cubin is zstd-compressed
    flags = read_field(data, "entry.flags")
    assert flags & 0x8000
    bad = tmp_path / "bad.o"
    bad.write_bytes(patched(data, "entry.flags", (flags & ~0xF000) | 0x4000))
    assert "unknown compression flags 0x4000" in (read_kernels(bad).error or "")


def test_implausible_uncompressed_size_is_refused_before_allocating(
    cuda_corpus: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.o"
    bad.write_bytes(patched(cuda_corpus["rdc.o"].read_bytes(), "entry.uncompressed_size", 1 << 60))
    assert "implausible uncompressed size" in (read_kernels(bad).error or "")


@pytest.mark.parametrize(("case", "entry", "method"), [("rdc.o", 0, 0x8000), ("compress_speed.o", 1, 0x2000)])
def test_wrong_uncompressed_size_is_an_error(
    cuda_corpus: dict[str, Path], tmp_path: Path, case: str, entry: int, method: int
) -> None:
    data = cuda_corpus[case].read_bytes()
    assert read_field(data, "entry.flags", entry) & 0xF000 == method
    if case == "compress_speed.o":  # its PTX is read only when no cubin is there
        data = patched(data, "entry.kind", 8)  # the cubin becomes "LTO-IR"
    size = read_field(data, "entry.uncompressed_size", entry)
    bad = tmp_path / "bad.o"
    bad.write_bytes(patched(data, "entry.uncompressed_size", size + 1, entry))
    r = read_kernels(bad)
    assert r.error is not None and "payload" in r.error, r.error


def _as_nobody(argv: list[str]) -> tuple[int, str]:
    """Run ``main(argv)`` in a forked child that dropped root (root reads any file); (exit code, stderr)."""
    from kernel_symbol_map.cli import main

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            sys.stderr = os.fdopen(write_end, "w")
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            code = main(argv)
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as err:
        stderr = err.read()
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), stderr


def test_unreadable_file(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    locked = tmp_path / "locked.o"
    shutil.copy(cuda_corpus["gencode3.o"], locked)
    locked.chmod(0)
    if os.geteuid() == 0:
        code, stderr = _as_nobody(["symbols", str(locked)])
    else:
        proc = _cli(locked)
        code, stderr = proc.returncode, proc.stderr
    assert code == 1
    assert stderr.strip() == f"ERROR {locked}: Permission denied"


def test_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.o"
    os.mkfifo(fifo)
    assert read_kernels(fifo).error == "is not a regular file"


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.o"
    _assert_one_line_errors(_cli(missing), [missing])


def test_corrupt_archive_member_is_named(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    data = cuda_corpus["static.a"].read_bytes()
    bad = tmp_path / "bad.a"
    bad.write_bytes(patched(data, "container.size", 1 << 40))
    r = read_kernels(bad)
    assert [m.path for m in r.failures] == [f"{bad}(gencode3.o)"]
    assert r.members[2].error is None


def test_a_folder_that_is_not_a_build_tree_is_left_alone(tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = tmp_path / "not-a-build"
    folder.mkdir()
    ksm = [sys.executable, "-m", "kernel_symbol_map", "build", "--build-dir", str(folder)]
    proc = subprocess.run(ksm, capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "not a CMake build tree" in proc.stderr and "Traceback" not in proc.stderr
    assert list(folder.iterdir()) == []  # no map, no cache folder
    assert subprocess.run([*ksm, "--strict"], capture_output=True, check=False).returncode == 1
    out = tmp_path / "why.json.gz"
    assert subprocess.run([*ksm, "--out", str(out)], capture_output=True, check=False).returncode == 0
    assert out.exists() and list(folder.iterdir()) == []
