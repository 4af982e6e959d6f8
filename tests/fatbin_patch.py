"""Helpers that corrupt real objects in one known place."""

from __future__ import annotations

import struct

MAGIC = struct.pack("<I", 0xBA55ED50)


def container_offset(data: bytes) -> int:
    at = data.find(MAGIC)
    assert at >= 0, "no fatbin container"
    return at


FIELDS = {
    # name: (offset from the container, or from the entry, and struct format)
    "container.size": (8, "<Q"),
    "entry.kind": (0x00, "<H"),
    "entry.header_size": (0x04, "<I"),
    "entry.stored_size": (0x08, "<Q"),
    "entry.compressed_size": (0x10, "<I"),
    "entry.sm": (0x1C, "<I"),
    "entry.flags": (0x28, "<Q"),
    "entry.uncompressed_size": (0x38, "<Q"),
}


def _where(data: bytes, field: str, entry: int) -> tuple[int, str]:
    offset, fmt = FIELDS[field]
    at = container_offset(data)
    if field.startswith("container."):
        return at + offset, fmt
    at += 16
    for _ in range(entry):  # walk: next = entry + header size + stored size
        header_size, stored = struct.unpack_from("<IQ", data, at + 4)
        at += header_size + stored
    return at + offset, fmt


def patched(data: bytes, field: str, value: int, entry: int = 0) -> bytes:
    """``data`` with one field of its first fatbin container, or of that container's entry, set."""
    at, fmt = _where(data, field, entry)
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def read_field(data: bytes, field: str, entry: int = 0) -> int:
    at, fmt = _where(data, field, entry)
    return struct.unpack_from(fmt, data, at)[0]
