"""The tool's own folder in a build dir: checksummed JSON files, and ``memoised``.

Shared by the producer's object cache and the build-tree model (which memoises
``ninja -t compdb``), so that neither layer imports the other. A file is a
header line, ``{"format", "tool", "checksum"}``, then the payload's JSON; the
checksum is the SHA-256 of exactly those payload bytes. A file that does not
parse, or whose checksum does not match, is ignored and never trusted. Writes
are atomic; deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _atomic

FOLDER = ".kernel_symbol_map"
FORMAT = 1


def stat_key(path: str | os.PathLike[str]) -> list[int] | None:
    """``[size, mtime_ns, inode, ctime_ns]``, or None when the file is missing.

    ctime goes beyond the size/mtime/inode the issue asks for: a file rewritten
    in place with its mtime put back still gets a new ctime, which no one can set.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def read(path: Path, tool: str, warn: Callable[[str], None]) -> Any:
    """The payload of a cache file written by this tool version, or None (missing, stale, corrupt)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        warn(f"ignoring unreadable cache {path}")
        return None
    head, _, body = raw.partition(b"\n")
    try:
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ValueError("not a cache header")
        if header.get("tool") != tool:
            return None  # another version of the tool: start afresh, quietly
        if header.get("checksum") != hashlib.sha256(body).hexdigest():
            raise ValueError("checksum mismatch")
        return json.loads(body)
    except ValueError as e:
        warn(f"ignoring corrupt cache {path} ({e})")
        return None


def write(path: Path, tool: str, payload: Any, warn: Callable[[str], None]) -> None:
    body = json.dumps(payload, separators=(",", ":")).encode()
    header = json.dumps({"format": FORMAT, "tool": tool, "checksum": hashlib.sha256(body).hexdigest()})
    try:
        _atomic.replace(path, header.encode() + b"\n" + body)
    except OSError as e:  # a cache we cannot write only costs time
        warn(f"cannot write cache {path}: {e.strerror or e}")


def memoised(
    build_dir: Path, name: str, tool: str, source: Path, compute: Callable[[], Any], enabled: bool = True
) -> Any:
    """``compute()``, reused from ``<build>/.kernel_symbol_map/<name>`` while ``source`` keeps its stat key."""
    if not enabled:
        return compute()
    path = build_dir / FOLDER / name
    key = stat_key(source)
    stored = read(path, tool, lambda _m: None)
    if key is not None and isinstance(stored, dict) and stored.get("key") == key:
        return stored["value"]
    value = compute()
    if key is not None:
        write(path, tool, {"key": key, "value": value}, lambda _m: None)
    return value
