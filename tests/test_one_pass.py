"""One open and one decompression per object (issue 29): the producer's read gives the same answer as the
readers' separate walks, and decompresses each image once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kernel_symbol_map.producer import extract
from kernel_symbol_map.readers import _blob, fatbin, hip
from kernel_symbol_map.readers.devicecode import read_kernels
from kernel_symbol_map.readers.sizes import images as measure_blob
from kernel_symbol_map.readers.sizes import measure

COMPRESSED = ["compress_default.o", "compress_speed.o", "compress_all.o"]  # zstd, LZ4, PTX compressed too


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, table: str) -> Counter[str]:
    """Every decompression ``module`` does through its table of decompressors, counted by its input."""
    calls: Counter[str] = Counter()
    wrapped = {}
    for method, decompress in getattr(module, table).items():
        def counted(raw: bytes, size: int, _d=decompress) -> bytes:  # noqa: ANN001
            calls[bytes(raw[:64]).hex()] += 1
            return _d(raw, size)
        wrapped[method] = counted
    monkeypatch.setattr(module, table, wrapped)
    return calls


@pytest.mark.parametrize("name", COMPRESSED)
def test_the_producers_read_decompresses_each_image_once(cuda_corpus: dict[str, Path], name: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = cuda_corpus[name]
    calls = _counting(monkeypatch, fatbin, "_DECOMPRESSORS")
    result, sizes, digests = extract._read_and_measure(read_kernels, path)
    assert calls and max(calls.values()) == 1, calls  # a second walk over the same file inflates nothing
    assert result == read_kernels(path)
    assert sizes and digests and sizes.keys() == {i.arch for i in measure(path) if i.kind == "cubin"} | {
        i.arch for i in measure(path) if i.kind == "ptx"}


def test_hip_bundles_are_decompressed_once(hip_corpus: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    path = hip_corpus["clang_zstd.o"]
    calls = _counting(monkeypatch, hip, "_DECOMPRESSORS")
    result, _sizes, digests = extract._read_and_measure(read_kernels, path)
    assert result.error is None and result.symbols and digests is not None
    assert calls and max(calls.values()) == 1, calls


def test_a_memo_keeps_no_payload_past_its_limit(cuda_corpus: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    path = cuda_corpus["compress_all.o"]  # the cubin compressed too: both walks need it
    monkeypatch.setattr(_blob, "MEMO_LIMIT", 0)  # no payload fits
    with _blob.OpenFile(path, memo=True) as blob:
        list(measure_blob(blob))
        memo = blob._src.memo
        assert memo is not None and memo.made and memo.kept == 0
        assert all(isinstance(v, frozenset) for v in memo.made.values())  # a cubin's kernels, no payload


def test_a_memo_answers_only_for_the_same_window_and_parameters(tmp_path: Path) -> None:
    """Two headers of a crafted file may name the same bytes with other sizes or flags: each is made anew
    (and fails as it would alone), never given what the other made."""
    path = tmp_path / "data"
    path.write_bytes(bytes(range(256)))
    made: list[object] = []

    def make(window: _blob.Blob, what: object) -> tuple[int, object]:
        made.append(what)
        return window.size, what

    with _blob.OpenFile(path, memo=True) as blob:
        whole, shorter = blob.window(16, 200, "a"), blob.window(16, 100, "b")
        assert whole.cached(0, "x", lambda: make(whole, "x"), lambda _: 1) == (200, "x")
        assert whole.cached(0, "x", lambda: make(whole, "x"), lambda _: 1) == (200, "x")  # the memo's
        assert shorter.cached(0, "x", lambda: make(shorter, "x"), lambda _: 1) == (100, "x")  # its own window
        assert whole.cached(0, ("x", 2), lambda: make(whole, ("x", 2)), lambda _: 1) == (200, ("x", 2))
    assert made == ["x", "x", ("x", 2)]


def test_a_library_larger_than_the_memo_inflates_each_cubin_once(cuda_corpus: dict[str, Path],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A library's images are hundreds of MB, past what the memo keeps of payloads: the sizes' walk leaves
    each cubin's kernels there (a few names), and the kernels' walk inflates nothing again."""
    path = cuda_corpus["compress_all.o"]
    kept = extract._read_and_measure(read_kernels, path)
    monkeypatch.setattr(_blob, "MEMO_LIMIT", 0)  # no payload fits: kernel lists are kept whatever it is
    calls = _counting(monkeypatch, fatbin, "_DECOMPRESSORS")
    assert extract._read_and_measure(read_kernels, path) == kept
    assert calls and max(calls.values()) == 1, calls
