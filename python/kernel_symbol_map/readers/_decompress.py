"""Bounded decompression for the payload formats device code uses.

Each function returns exactly ``size`` bytes or raises :class:`DecompressError`.
Sizes come from headers we do not trust, so they are capped before anything is
allocated: a corrupt header must not turn into a gigabyte allocation.
"""

from __future__ import annotations

import threading
import zlib as _zlib

import lz4.block
import zstandard

# Real cubins and code objects compress 2-20x and stay far below these.
MAX_SIZE = 1 << 30
MAX_RATIO = 1024


_local = threading.local()


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    """One per thread: a decompressor is not thread-safe, and making one per payload costs."""
    d = getattr(_local, "zstd", None)
    if d is None:
        d = _local.zstd = zstandard.ZstdDecompressor()
    return d


class DecompressError(Exception):
    """Callers turn this into a FormatError that names the input and offset."""


def plausible(size: int, compressed: int) -> bool:
    """Whether ``compressed`` bytes may hold ``size``: a header's claim, checked before it is used."""
    return size <= min(MAX_SIZE, MAX_RATIO * compressed + (1 << 20))


def _check(size: int, compressed: int) -> None:
    if not plausible(size, compressed):
        raise DecompressError(f"implausible uncompressed size {size}")


def _exact(out: bytes, size: int) -> bytes:
    if len(out) != size:
        raise DecompressError(f"decompressed to {len(out)} bytes, header says {size}")
    return out


def zstd(raw: bytes, size: int) -> bytes:
    _check(size, len(raw))
    try:
        declared = zstandard.frame_content_size(raw)
        if declared not in (-1, size):
            raise DecompressError(f"zstd frame declares {declared} bytes, header says {size}")
        return _exact(_zstd_decompressor().decompress(raw, max_output_size=size), size)
    except zstandard.ZstdError as e:
        raise DecompressError(f"zstd: {e}") from None


def lz4_block(raw: bytes, size: int) -> bytes:
    """A raw LZ4 block (no frame), as nvcc's ``--compress-mode=speed`` writes."""
    _check(size, len(raw))
    try:
        return _exact(lz4.block.decompress(raw, uncompressed_size=size), size)
    except lz4.block.LZ4BlockError as e:
        raise DecompressError(f"lz4: {e}") from None


def zlib(raw: bytes, size: int) -> bytes:
    _check(size, len(raw))
    try:
        d = _zlib.decompressobj()
        return _exact(d.decompress(raw, size + 1), size)
    except _zlib.error as e:
        raise DecompressError(f"zlib: {e}") from None
