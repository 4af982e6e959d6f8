"""Property: mutated real objects never raise, hang or blow up memory; errors are one line."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pytest
from fatbin_patch import MAGIC
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_symbol_map import read_kernels

MEMORY_LIMIT = 64 << 20
EXTREMES = [0, 1, 0x7F, 0xFF, 0xFFFF, 0xFFFFFFFF, 1 << 31, 1 << 40, (1 << 64) - 1]

mutation = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True), st.just(0)),
    st.tuples(st.just("u32"), st.floats(0, 1, exclude_max=True), st.sampled_from(EXTREMES[:7])),
    st.tuples(st.just("u64"), st.floats(0, 1, exclude_max=True), st.sampled_from(EXTREMES)),
    st.tuples(st.just("insert"), st.floats(0, 1, exclude_max=True), st.integers(1, 64)),
)


def mutate(data: bytes, steps: list[tuple[str, float, int]], hot: int) -> bytes:
    """Apply mutations; positions are spread over the file and, half the time, near the device code."""
    out = bytearray(data)
    for i, (kind, where, arg) in enumerate(steps):
        if not out:
            break
        span = len(out) - hot if i % 2 and hot < len(out) else len(out)
        base = hot if i % 2 and hot < len(out) else 0
        at = base + int(where * span) % max(1, span)
        if kind == "flip":
            out[at] ^= 1 << arg
        elif kind == "truncate":
            del out[at:]
        elif kind == "insert":
            out[at:at] = bytes(range(arg))
        else:
            fmt = "<I" if kind == "u32" else "<Q"
            if at + struct.calcsize(fmt) <= len(out):
                struct.pack_into(fmt, out, at, arg % (1 << (8 * struct.calcsize(fmt))))
    return bytes(out)


def check(path: Path) -> None:
    tracemalloc.start()
    try:
        result = read_kernels(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT, peak
    for failure in result.failures:
        assert failure.error and "\n" not in failure.error


def _property(corpus: dict[str, Path], names: list[str], tmp: Path) -> None:
    originals = {n: corpus[n].read_bytes() for n in names}

    @settings(max_examples=150, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(names), st.lists(mutation, min_size=1, max_size=4))
    def run(name: str, steps: list[tuple[str, float, int]]) -> None:
        data = originals[name]
        hot = max(0, data.find(MAGIC), data.find(b"__CLANG_OFFLOAD_BUNDLE__"), data.find(b"CCOB"))
        target = tmp / name
        target.write_bytes(mutate(data, steps, hot))
        check(target)

    run()


def test_mutated_cuda_objects(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    _property(cuda_corpus, ["gencode3.o", "rdc.o", "compress_speed.o", "static.a", "raw.fatbin", "shared.so"], tmp_path)


def test_mutated_hip_objects(hip_corpus: dict[str, Path], tmp_path: Path) -> None:
    _property(hip_corpus, ["hipcc.o", "clang_zstd.o", "clang_zlib.o", "offloading.o", "clang_rdc.o"], tmp_path)


@pytest.mark.parametrize("size", [0, 1, 15, 16, 63, 64])
def test_tiny_files(tmp_path: Path, size: int) -> None:
    for prefix in (b"\x7fELF\x02\x01", b"!<arch>\n", MAGIC, b"CCOB", b"__CLANG_OFFLOAD_BUNDLE__"):
        target = tmp_path / "tiny"
        target.write_bytes((prefix + bytes(size))[: max(size, 1)])
        check(target)
