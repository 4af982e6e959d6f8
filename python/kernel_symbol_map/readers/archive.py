"""Members of a Unix ``ar`` archive (GNU and BSD variants), as windows onto the file.

Hand-written: the format is a 60-byte header per member, and no maintained
library reads it without extracting to disk.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from ._blob import Blob

AR_MAGIC = b"!<arch>\n"
THIN_MAGIC = b"!<thin>\n"

# ar_name[16], ar_date[12], ar_uid[6], ar_gid[6], ar_mode[8], ar_size[10], ar_fmag[2]
ArHeader = struct.Struct("16s12s6s6s8s10s2s")
AR_FMAG = b"`\n"

# Index and name-table members that hold no object code.
_SPECIAL = {"/", "//", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"}


def is_archive(blob: Blob) -> bool:
    return blob.startswith(AR_MAGIC) or blob.startswith(THIN_MAGIC)


def iter_members(blob: Blob) -> Iterator[tuple[str, Blob]]:
    """``(member name, window)`` for each object member, in archive order."""
    if blob.startswith(THIN_MAGIC):
        raise blob.error("thin archives (members stored outside the archive) are not supported")
    offset = len(AR_MAGIC)
    long_names = b""
    while offset < blob.size:
        raw_name, *_, raw_size, fmag = blob.unpack(ArHeader, offset, "archive member header")
        if fmag != AR_FMAG:
            raise blob.error("bad archive member header", offset)
        size = _int(blob, raw_size.decode("ascii", "replace").strip() or "0", offset)
        data_at = offset + ArHeader.size
        blob.check(data_at, size, "archive member")
        next_offset = data_at + size + (size & 1)  # members are 2-byte aligned
        name = raw_name.decode("ascii", "replace").rstrip()
        if name == "//":
            long_names = blob.read(data_at, size, "long name table")
        elif name.startswith("#1/"):  # BSD: the name follows the header
            name_len = _int(blob, name[3:], offset)
            if name_len > size:
                raise blob.error("BSD member name longer than the member", offset)
            raw = blob.read(data_at, name_len, "member name").rstrip(b"\0")
            name = raw.decode("utf-8", "replace")
            data_at, size = data_at + name_len, size - name_len
        elif name.startswith("/") and name[1:].isdigit():  # GNU: offset into "//"
            at = int(name[1:])
            end = long_names.find(b"/\n", at)
            if at >= len(long_names) or end < 0:
                raise blob.error(f"member name {name} points outside the long name table", offset)
            name = long_names[at:end].decode("utf-8", "replace")
        elif name not in _SPECIAL and name.endswith("/"):  # GNU short names end with '/'
            name = name[:-1]
        if name not in _SPECIAL:
            yield name, blob.window(data_at, size, f"member {name!r}", f"{blob.name}({name})")
        offset = next_offset


def _int(blob: Blob, text: str, offset: int) -> int:
    if not text.isdigit():
        raise blob.error(f"bad number {text!r} in archive member header", offset)
    return int(text)
