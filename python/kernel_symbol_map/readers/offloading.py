"""clang's ``.llvm.offloading`` section: LLVM OffloadBinary images (clang's new offload driver).

Layout from ``llvm/Object/OffloadBinary.h`` (version 1): a header, one entry
describing the image, a string table of key/value pairs (``triple``,
``arch``), then the image. A section holds several binaries back to back,
each padded to 8 bytes. Hand-written: LLVM's reader is C++ only.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from ._blob import Blob

OFFLOAD_MAGIC = b"\x10\xff\x10\xad"
SUPPORTED_VERSION = 1

# magic, version, total size, entry offset, entry size
OffloadHeader = struct.Struct("<4sIQQQ")
# image kind, offload kind, flags, string offset, string count, image offset, image size
OffloadEntry = struct.Struct("<HHIQQQQ")
# key offset, value offset
OffloadString = struct.Struct("<QQ")


class ImageKind(enum.IntEnum):
    NONE = 0
    OBJECT = 1
    BITCODE = 2
    CUBIN = 3
    FATBINARY = 4
    PTX = 5


@dataclass(frozen=True)
class OffloadImage:
    kind: ImageKind
    strings: dict[str, str]
    blob: Blob

    @property
    def arch(self) -> str:
        return self.strings.get("arch", "")


def iter_images(blob: Blob) -> Iterator[OffloadImage]:
    offset = 0
    while offset < blob.size:
        if blob.size - offset < OffloadHeader.size and not any(
            blob.read(offset, blob.size - offset, "padding")
        ):
            return
        magic, version, size, entry_at, _entry_size = blob.unpack(
            OffloadHeader, offset, "offload binary header"
        )
        if magic != OFFLOAD_MAGIC:
            raise blob.error("bad offload binary magic", offset)
        if version != SUPPORTED_VERSION:
            raise blob.error(f"unsupported offload binary version {version}", offset)
        binary = blob.window(offset, size, "offload binary")
        yield _image(binary, entry_at)
        offset += (size + 7) & ~7


def _image(binary: Blob, entry_at: int) -> OffloadImage:
    kind, _offload_kind, _flags, strings_at, count, image_at, image_size = binary.unpack(
        OffloadEntry, entry_at, "offload entry"
    )
    try:
        image_kind = ImageKind(kind)
    except ValueError:
        raise binary.error(f"unknown offload image kind {kind}", entry_at) from None
    binary.check(strings_at, count * OffloadString.size, "offload string table")
    strings = {}
    for i in range(count):
        key_at, value_at = binary.unpack(OffloadString, strings_at + i * OffloadString.size, "offload string")
        strings[_cstring(binary, key_at)] = _cstring(binary, value_at)
    return OffloadImage(image_kind, strings, binary.window(image_at, image_size, "offload image"))


def _cstring(blob: Blob, offset: int) -> str:
    blob.check(offset, 1, "offload string")
    tail = blob.read(offset, min(4096, blob.size - offset), "offload string")
    end = tail.find(b"\0")
    if end < 0:
        raise blob.error("unterminated offload string", offset)
    return tail[:end].decode("utf-8", "replace")
