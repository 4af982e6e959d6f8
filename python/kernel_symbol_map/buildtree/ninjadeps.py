"""ninja's deps log (``.ninja_deps``, format v4), read in place and never written.

Hand-written: ninja offers only ``ninja -t deps``, which, run during a build,
can rewrite the log under the running ninja and lose its records (facts.md).

Layout: the header ``"# ninjadeps\\n"`` and an i32 version (4), then records,
each a u32 head whose bit 31 marks a deps record and whose low bits give the
size. A path record is the path, NUL-padded to 4 bytes, then u32 ``~id``. A
deps record is i32 output id, u32 mtime low, u32 mtime high, then i32 dep ids.
The last deps record per output wins.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildTreeError

MAGIC = b"# ninjadeps\n"
VERSION = 4
Head = struct.Struct("<I")
DepsHead = struct.Struct("<iII")  # output id, mtime low, mtime high
Version = struct.Struct("<i")
DEPS_BIT = 0x8000_0000
MAX_RECORD = 1 << 19  # ninja's own kMaxRecordSize


@dataclass(frozen=True)
class DepsRecord:
    mtime_ns: int
    deps: tuple[str, ...]  # as ninja spelled them: relative to the build dir, or absolute


class NinjaDeps:
    """Every output's latest deps record; a corrupt or truncated log is an error, never partial.

    With ``base``, paths come back absolute and normalised against it, each
    distinct path once (a tree's objects share most of their headers).
    """

    def __init__(self, path: Path, base: Path | None = None) -> None:
        self.path = path
        self.base = base
        self.records: dict[str, DepsRecord] = {}
        self._read()

    def _error(self, what: str, offset: int) -> BuildTreeError:
        if offset < len(MAGIC) + 4:  # the header itself: not a log this reader knows
            return BuildTreeError(f"{self.path}: {what}; its deps cannot be trusted")
        # Ninja itself never repairs such a log (two ninja processes writing one folder's log damage it):
        # say how to get a trustworthy one back.
        return BuildTreeError(
            f"{self.path}: {what} at offset {offset:#x}; its deps cannot be trusted. The log is damaged "
            f"(two ninja processes in one build folder write it at once); recover by truncating it at "
            f"that offset (truncate -s {offset} {self.path}) so ninja rebuilds what it forgot, or delete it "
            "and rebuild")

    def _read(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise BuildTreeError(f"{self.path}: {e.strerror or e}") from None
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + Version.size:
            raise self._error("not a ninja deps log", 0)
        (version,) = Version.unpack_from(data, len(MAGIC))
        if version != VERSION:
            raise self._error(f"unsupported deps log version {version} (expected {VERSION})", len(MAGIC))
        paths: list[str] = []
        latest: dict[int, tuple[int, tuple[int, ...]]] = {}
        offset, end = len(MAGIC) + Version.size, len(data)
        ints = memoryview(data)
        while offset < end:
            if end - offset < Head.size:
                raise self._error("truncated record header", offset)
            (head,) = Head.unpack_from(data, offset)
            size = head & ~DEPS_BIT
            body = offset + Head.size
            if size > MAX_RECORD or size % 4 or body + size > end:
                raise self._error(f"truncated or oversized record ({size} bytes)", offset)
            if head & DEPS_BIT:
                if size < DepsHead.size:
                    raise self._error("deps record too short", offset)
                out, lo, hi = DepsHead.unpack_from(data, body)
                deps = tuple(ints[body + DepsHead.size : body + size].cast("i"))
                if not 0 <= out < len(paths) or deps and (min(deps) < 0 or max(deps) >= len(paths)):
                    raise self._error("deps record names an unknown path id", offset)
                latest[out] = ((hi << 32) | lo, deps)
            else:
                if size < 4:
                    raise self._error("path record too short", offset)
                (check,) = Head.unpack_from(data, body + size - 4)
                if check != ~len(paths) & 0xFFFF_FFFF:
                    raise self._error("path record checksum mismatch", offset)
                raw = data[body : body + size - 4].rstrip(b"\0")
                paths.append(os.fsdecode(raw))
            offset = body + size
        spelled = paths
        if self.base is not None:
            base = os.fspath(self.base)
            spelled = [os.path.normpath(os.path.join(base, p)) for p in paths]
        self.records = {
            paths[out]: DepsRecord(mtime, tuple(map(spelled.__getitem__, deps))) for out, (mtime, deps) in latest.items()
        }

    def lookup(self, output: str) -> DepsRecord | None:
        return self.records.get(output)


def stale(record: DepsRecord, output: Path) -> str | None:
    """Why ``record`` cannot be trusted for ``output`` (ninja's STALE), or None."""
    try:
        mtime = output.stat().st_mtime_ns
    except FileNotFoundError:
        return "object is missing"
    if mtime > record.mtime_ns:
        return "STALE deps record: the object is newer than the record"
    return None
