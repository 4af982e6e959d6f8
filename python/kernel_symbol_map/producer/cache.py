"""The per-object cache in the build dir, and the last run's fingerprint.

An object's kernels are reused only when its path, size, mtime_ns, inode and
ctime_ns, and this tool's version, are all unchanged. The file carries a checksum of its
contents: a cache that does not parse, or whose checksum does not match, is
ignored with a warning and never trusted. Writes are atomic; deleting the
folder is always safe. Only this module and ``json`` load before the no-op
check, so that an up-to-date re-run costs little more than Python's start.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

FOLDER = ".kernel_symbol_map"
CACHE_FILE = "cache.json"
RUN_FILE = "last-run.json"
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


# A cache file is a header line, {"format", "tool", "checksum"}, then the payload's
# JSON; the checksum is the SHA-256 of exactly those payload bytes.


def _read(path: Path, tool: str, warn: Callable[[str], None]) -> Any:
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


def _write(path: Path, tool: str, payload: Any, warn: Callable[[str], None]) -> None:
    body = json.dumps(payload, separators=(",", ":")).encode()
    header = json.dumps({"format": FORMAT, "tool": tool, "checksum": hashlib.sha256(body).hexdigest()})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(header.encode() + b"\n" + body)
        os.replace(tmp, path)
    except OSError as e:  # a cache we cannot write only costs time
        warn(f"cannot write cache {path}: {e.strerror or e}")


class ObjectCache:
    """Object path -> what the reader said, valid while the object's stat key holds."""

    def __init__(self, build_dir: Path, tool: str, warn: Callable[[str], None] = lambda _m: None) -> None:
        self.path = build_dir / FOLDER / CACHE_FILE
        self.tool = tool
        self.warn = warn
        payload = _read(self.path, tool, warn)
        self.entries: dict[str, Any] = payload if isinstance(payload, dict) else {}
        self.changed = False

    def get(self, obj: str, key: list[int] | None) -> Any:
        entry = self.entries.get(obj)
        if key is None or not isinstance(entry, dict) or entry.get("key") != key:
            return None
        return entry.get("value")

    def put(self, obj: str, key: list[int] | None, value: Any) -> None:
        if key is not None:
            self.entries[obj] = {"key": key, "value": value}
            self.changed = True

    def save(self, keep: Iterable[str]) -> None:
        """Write back, keeping only ``keep`` (objects no longer in the build are dropped)."""
        wanted = set(keep)
        kept = {k: v for k, v in self.entries.items() if k in wanted}
        if self.changed or len(kept) != len(self.entries):
            _write(self.path, self.tool, kept, self.warn)


def memoised(
    build_dir: Path, name: str, tool: str, source: Path, compute: Callable[[], Any], enabled: bool = True
) -> Any:
    """``compute()``, reused from ``<build>/.kernel_symbol_map/<name>`` while ``source`` keeps its stat key."""
    if not enabled:
        return compute()
    path = build_dir / FOLDER / name
    key = stat_key(source)
    stored = _read(path, tool, lambda _m: None)
    if key is not None and isinstance(stored, dict) and stored.get("key") == key:
        return stored["value"]
    value = compute()
    if key is not None:
        _write(path, tool, {"key": key, "value": value}, lambda _m: None)
    return value


def fingerprint(inputs: Iterable[str], deps: Iterable[str], options: dict[str, Any], out: Path) -> dict[str, Any]:
    """Everything a run's map depends on: input files' stat keys, deps' existence, options, the map file."""
    return {
        "inputs": {p: stat_key(p) for p in sorted(set(inputs))},
        "deps": sorted(set(deps)),
        "options": options,
        "out": [str(out), stat_key(out)],
    }


def last_run(build_dir: Path, tool: str) -> Any:
    return _read(build_dir / FOLDER / RUN_FILE, tool, lambda _m: None)


def remember_run(build_dir: Path, tool: str, run: dict[str, Any], summary: dict[str, Any]) -> None:
    _write(build_dir / FOLDER / RUN_FILE, tool, {"run": run, "summary": summary}, lambda _m: None)


def up_to_date(build_dir: Path, tool: str, options: dict[str, Any], out: Path) -> dict[str, Any] | None:
    """The last run's summary when nothing it depended on changed, else None."""
    last = last_run(build_dir, tool)
    if not isinstance(last, dict) or not isinstance(last.get("run"), dict):
        return None
    run = last["run"]
    if run.get("options") != options or run.get("out") != [str(out), stat_key(out)]:
        return None
    inputs = run.get("inputs")
    if not isinstance(inputs, dict) or any(stat_key(p) != key for p, key in inputs.items()):
        return None
    if not all(os.path.exists(d) for d in run.get("deps", [])):
        return None
    return last.get("summary")
