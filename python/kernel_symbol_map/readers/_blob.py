"""Bounds-checked, read-only views of bytes or of a file.

Every reader in this package goes through :class:`Blob`: an offset or size that
points outside the view raises :class:`FormatError` naming the file, the offset
and what was being read, never ``IndexError`` or ``struct.error``.

Small files are read into memory in one call; large ones (shared libraries of
hundreds of MB) are read piecewise with ``os.pread`` so that memory stays
bounded by the largest single payload rather than by the file size.

A file opened with ``OpenFile(path, memo=True)`` keeps what its views make
once (:meth:`Blob.cached`: decompressed payloads, and each cubin's kernels),
so that two walks of one file (its sizes and digests, then its kernels)
decompress each image once. The memo holds at most :data:`MEMO_LIMIT` bytes of
payloads; past it, payloads are made again rather than kept, and the kernels
the first walk left spare the second walk from making them.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable, Hashable
from typing import Protocol, TypeVar

from ..errors import FormatError

# Files up to this size are read whole: one syscall beats many small preads.
WHOLE_FILE_LIMIT = 8 << 20
MEMO_LIMIT = 64 << 20  # bytes a file's memo keeps: an object's images, not a library's hundreds of MB
T = TypeVar("T")


class _Memo:
    """What the views of one source made, by ``(absolute offset, what)``; bounded by its bytes."""

    __slots__ = ("made", "kept")

    def __init__(self) -> None:
        self.made: dict[tuple[int, str], object] = {}
        self.kept = 0


class _Source(Protocol):
    memo: _Memo | None

    def pread(self, offset: int, size: int) -> bytes: ...


class _BytesSource:
    __slots__ = ("_data", "memo")

    def __init__(self, data: bytes | memoryview) -> None:
        self._data = memoryview(data)
        self.memo: _Memo | None = None

    def pread(self, offset: int, size: int) -> bytes:
        return bytes(self._data[offset : offset + size])


class _FileSource:
    __slots__ = ("_fd", "memo")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.memo: _Memo | None = None

    def pread(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)


class Blob:
    """A window ``[base, base + size)`` onto a source, named after the input it came from."""

    __slots__ = ("name", "size", "_src", "_base")

    def __init__(self, name: str, src: _Source, base: int, size: int) -> None:
        self.name = name
        self.size = size
        self._src = src
        self._base = base

    @classmethod
    def from_bytes(cls, name: str, data: bytes | memoryview) -> Blob:
        return cls(name, _BytesSource(data), 0, len(data))

    def error(self, what: str, offset: int | None = None) -> FormatError:
        return FormatError(self.name, what, offset)

    def check(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise self.error(
                f"{what} ({size} bytes) runs past the end of the data ({self.size} bytes)", offset
            )

    def read(self, offset: int, size: int, what: str) -> bytes:
        self.check(offset, size, what)
        data = self._src.pread(self._base + offset, size)
        if len(data) != size:  # the file shrank under us
            raise self.error(f"short read of {what}", offset)
        return data

    def unpack(self, layout: struct.Struct, offset: int, what: str) -> tuple:
        return layout.unpack(self.read(offset, layout.size, what))

    def window(self, offset: int, size: int, what: str, name: str | None = None) -> Blob:
        self.check(offset, size, what)
        return Blob(name or self.name, self._src, self._base + offset, size)

    def startswith(self, magic: bytes) -> bool:
        return self.size >= len(magic) and self._src.pread(self._base, len(magic)) == magic

    def cached(self, offset: int, what: Hashable, make: Callable[[], T], size: Callable[[T], int]) -> T:
        """What ``make`` gives for the data at ``offset``, made once per file opened with a memo (else
        every time); ``size`` says how many bytes keeping it costs (0: little enough to keep whatever the
        memo holds, such as a cubin's kernel names, one set a cubin). ``what`` names what is made and every
        parameter beyond this window's bytes that ``make`` reads (a header's sizes and flags): the key is
        it, the offset and the window's end, so a crafted file's second header at the same bytes is made
        anew, and fails as it would have alone."""
        memo = self._src.memo
        if memo is None:
            return make()
        key = (self._base + offset, self._base + self.size, what)
        if key in memo.made:
            return memo.made[key]  # type: ignore[return-value]
        found = make()
        if memo.kept + size(found) <= MEMO_LIMIT:
            memo.made[key] = found
            memo.kept += size(found)
        return found


class OpenFile:
    """Context manager giving a :class:`Blob` over a file; directories and I/O errors are FormatErrors."""

    def __init__(self, path: str | os.PathLike[str], memo: bool = False) -> None:
        self.path = os.fspath(path)
        self.memo = memo
        self._fd: int | None = None

    def __enter__(self) -> Blob:
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            raise FormatError(self.path, _reason(e)) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                raise FormatError(self.path, f"is {kind}")
            if st.st_size > WHOLE_FILE_LIMIT:
                self._fd = fd
                return self._with_memo(Blob(self.path, _FileSource(fd), 0, st.st_size))
            data = _read_all(fd, st.st_size)
        except OSError as e:
            os.close(fd)
            raise FormatError(self.path, _reason(e)) from None
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        return self._with_memo(Blob.from_bytes(self.path, data))

    def _with_memo(self, blob: Blob) -> Blob:
        if self.memo:
            blob._src.memo = _Memo()
        return blob

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _reason(e: OSError) -> str:
    return "is a directory" if isinstance(e, IsADirectoryError) else (e.strerror or str(e))


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
