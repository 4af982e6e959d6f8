"""Reading a wheel's members, each bounded by its header before it is inflated.

Real wheels fit: vLLM's (336 MB) has a few thousand members, its largest
library a few hundred MB inflated; cuBLASLt's .so is 515 MB; shared libraries
deflate 2-5x. A zip bomb (2.5 GiB of zeros in 2.6 MB, 1,000x) is refused at
once, with nothing written.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ...errors import MapError

WHEEL_MAX_MEMBERS = 100_000  # members listed in the central directory
WHEEL_MAX_MEMBER = 4 << 30  # bytes one member inflates to (zip's own limit without zip64)
WHEEL_MAX_TOTAL = 16 << 30  # bytes the members read inflate to, together
WHEEL_MAX_RATIO = 256  # inflated bytes per stored byte, past the first MiB (deflate can reach 1,032x)

# What zipfile raises on a damaged wheel: RuntimeError for an encrypted member, zlib.error for a corrupt one.
WHEEL_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
                RuntimeError, zlib.error)


def is_wheel(path: Path) -> bool:
    """A ``.whl``, or any zip archive: what every command opens as a wheel."""
    if path.suffix == ".whl":
        return True
    try:
        with path.open("rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def member_bound(info: zipfile.ZipInfo) -> int:
    """The most bytes ``info`` may inflate to: :data:`WHEEL_MAX_RATIO` times what it stores (plus 1 MiB),
    :data:`WHEEL_MAX_MEMBER` at most."""
    return min(WHEEL_MAX_MEMBER, WHEEL_MAX_RATIO * info.compress_size + (1 << 20))


def wheel_members(z: zipfile.ZipFile, wheel: Path, wanted: Callable[[str], bool]) -> list[zipfile.ZipInfo]:
    """The files of ``z`` whose names are ``wanted``, checked by their headers before any is inflated: a
    :class:`MapError` naming the first member past a bound (count, ratio, bytes)."""
    infos = z.infolist()
    if len(infos) > WHEEL_MAX_MEMBERS:
        raise MapError(f"{wheel}: {len(infos):,} members, more than a wheel holds ({WHEEL_MAX_MEMBERS:,})")
    chosen = [i for i in infos if not i.is_dir() and wanted(i.filename)]
    for info in chosen:
        if info.file_size > member_bound(info):
            raise MapError(f"{wheel}!{info.filename}: claims {info.file_size:,} bytes from {info.compress_size:,} "
                           f"(more than {WHEEL_MAX_RATIO}x, or {WHEEL_MAX_MEMBER >> 30} GiB): a zip bomb, not read")
    total = sum(i.file_size for i in chosen)
    if total > WHEEL_MAX_TOTAL:
        raise MapError(f"{wheel}: its members claim {total:,} bytes together, more than "
                       f"{WHEEL_MAX_TOTAL >> 30} GiB: not read")
    return chosen


def copy_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, into: BinaryIO, wheel: Path) -> None:
    """Inflate ``info`` into ``into`` a MiB at a time, stopping past :func:`member_bound` (zipfile itself
    stops at the header's size and checks the CRC; this holds whatever the header says)."""
    bound, copied = member_bound(info), 0
    with z.open(info) as src:
        while chunk := src.read(1 << 20):
            copied += len(chunk)
            if copied > bound:
                raise MapError(f"{wheel}!{info.filename}: inflates past {bound:,} bytes ({WHEEL_MAX_RATIO}x its "
                               f"{info.compress_size:,}): a zip bomb, not read")
            into.write(chunk)


def is_library(name: str) -> bool:
    """A shared library, by its name: ``lib.so``, and a versioned ``lib.so.1``."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base
