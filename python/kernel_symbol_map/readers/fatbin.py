"""CUDA fatbin containers: the entries of ``.nv_fatbin`` / ``__nv_relfatbin`` and raw ``.fatbin`` files.

The layout is undocumented by NVIDIA; ``../shared/reference/facts.md`` records what
was measured, and the tests re-check it against nvcc's output and cuobjdump.
Hand-written because no library reads it.

A linked binary holds one container per translation unit, back to back, each
possibly followed by zero padding up to the next 8-byte boundary.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from . import _decompress
from ._blob import Blob
from ._decompress import DecompressError

FATBIN_MAGIC = 0xBA55ED50
FATBIN_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)

# magic, version, header size, size of the entries that follow
FatbinHeader = struct.Struct("<IHHQ")
# kind, (unknown), header size, stored payload size, compressed size,
# (unknown), code version, SM number, name offset, name size, flags,
# (unknown), uncompressed size
FatbinEntryHeader = struct.Struct("<HHIQIIIIIIQQQ")
assert FatbinEntryHeader.size == 64

FLAG_ARCH_SPECIFIC = 0x10_0000  # sm_90a, sm_100a
FLAG_FAMILY_SPECIFIC = 0x20_0000  # sm_100f
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
# Bits 12-15 carry the payload's compression; only LZ4 and zstd are known.
COMPRESSION_MASK = 0xF000
_DECOMPRESSORS = {FLAG_LZ4: _decompress.lz4_block, FLAG_ZSTD: _decompress.zstd}


class EntryKind(enum.IntEnum):
    PTX = 1
    CUBIN = 2
    LTO_IR = 8


@dataclass(frozen=True)
class FatbinEntry:
    kind: EntryKind
    sm: int
    flags: int
    offset: int  # of the payload, within the blob the entry was read from
    compressed_size: int
    uncompressed_size: int
    container: int = 0  # where its container's header is: one compile's images share one

    @property
    def arch(self) -> str:
        prefix = "compute" if self.kind is EntryKind.PTX else "sm"
        suffix = "a" if self.flags & FLAG_ARCH_SPECIFIC else ""
        suffix += "f" if self.flags & FLAG_FAMILY_SPECIFIC else ""
        return f"{prefix}_{self.sm}{suffix}"

    def payload(self, blob: Blob) -> bytes:
        """The decompressed payload; bounded by the sizes in the header."""
        what = f"{self.arch} {self.kind.name} payload"
        raw = blob.read(self.offset, self.compressed_size, what)
        method = self.flags & COMPRESSION_MASK
        if method == 0:
            return raw
        decompress = _DECOMPRESSORS.get(method)
        if decompress is None:
            raise blob.error(f"{what} uses unknown compression flags {method:#x}", self.offset)

        def inflate() -> bytes:
            try:
                return decompress(raw, self.uncompressed_size)
            except DecompressError as e:
                raise blob.error(f"{what}: {e}", self.offset) from None

        key = ("fatbin payload", method, self.compressed_size, self.uncompressed_size)
        return blob.cached(self.offset, key, inflate, len)  # a second walk of the file inflates nothing


def is_fatbin(blob: Blob) -> bool:
    return blob.startswith(FATBIN_MAGIC_BYTES)


def iter_entries(blob: Blob) -> Iterator[FatbinEntry]:
    """Every entry of every container in ``blob`` (a section or a raw fatbin file)."""
    offset = 0
    while offset < blob.size:
        offset += _padding_before(blob, offset)
        if offset >= blob.size:
            return
        magic, _version, header_size, entries_size = blob.unpack(FatbinHeader, offset, "fatbin header")
        if magic != FATBIN_MAGIC:
            raise blob.error(f"bad fatbin magic {magic:#x}", offset)
        if header_size < FatbinHeader.size:
            raise blob.error(f"fatbin header size {header_size} is too small", offset)
        start = offset + header_size
        end = start + entries_size
        blob.check(start, entries_size, "fatbin entries")
        yield from _iter_container(blob, start, end, offset)
        offset = end


def _iter_container(blob: Blob, offset: int, end: int, container: int) -> Iterator[FatbinEntry]:
    while offset < end:
        (kind, _, header_size, stored_size, compressed_size, _, _, sm, _, _, flags, _, uncompressed) = (
            blob.unpack(FatbinEntryHeader, offset, "fatbin entry header")
        )
        if header_size < FatbinEntryHeader.size:
            raise blob.error(f"fatbin entry header size {header_size} is too small", offset)
        payload_at = offset + header_size
        if payload_at + stored_size > end:
            raise blob.error(
                f"fatbin entry payload ({stored_size} bytes) runs past its container", offset
            )
        try:
            entry_kind = EntryKind(kind)
        except ValueError:
            raise blob.error(f"unknown fatbin entry kind {kind}", offset) from None
        if flags & COMPRESSION_MASK:
            if compressed_size > stored_size:
                raise blob.error("fatbin entry compressed size exceeds its stored size", offset)
        else:
            compressed_size = stored_size
        yield FatbinEntry(entry_kind, sm, flags, payload_at, compressed_size, uncompressed, container)
        offset = payload_at + stored_size


def _padding_before(blob: Blob, offset: int) -> int:
    """Zero bytes a linker put between containers (under 16), or to the end of the section."""
    head = blob.read(offset, min(16, blob.size - offset), "fatbin header")
    if head.startswith(FATBIN_MAGIC_BYTES):
        return 0
    zeros = len(head) - len(head.lstrip(b"\0"))
    if zeros == len(head) < 16 or (0 < zeros and head[zeros:].startswith(FATBIN_MAGIC_BYTES)):
        return zeros
    return 0  # not padding: the caller reports the bad magic
